//! A replica's iterations: each starts with the batch its policy forms,
//! priced by its pool's cost model, and ends with its completions, its
//! tokens' gaps and the next iteration (decode runs' steps aside:
//! `decode_runs`).

use super::{Event, Simulation};
use crate::time::SimTime;

impl Simulation<'_> {
    pub(super) fn start_iteration(&mut self, r: usize, now: SimTime) {
        if let Some(shape) = self.replicas[r].form_batch(now, &mut self.requests) {
            let cost = &self.costs[self.fleet.pool_of(r)];
            let dt = cost
                .iteration_time_with(&shape, &mut self.step_terms[r])
                .max(1);
            crate::replica::attribution::price_decode_alone(
                &mut self.replicas[r],
                &shape,
                cost.as_ref(),
            );
            if !self.defer_run_step(r, now.plus(dt)) {
                self.queue
                    .schedule(now.plus(dt), Event::IterationEnd(r as u32));
            }
        }
    }

    pub(super) fn on_iteration_end(&mut self, r: usize, now: SimTime) {
        let mut done = std::mem::take(&mut self.completed_buf);
        self.gaps.gaps.clear();
        self.replicas[r].finish_iteration(now, &mut self.requests, &mut done, &mut self.gaps);
        self.itl.add_all(&self.gaps.gaps);
        for &id in &done {
            self.request_ended(id, now, true, true);
        }
        self.release_completed(r, &done, now);
        done.clear();
        self.completed_buf = done;
        if self.fleet.disaggregated() {
            self.fleet_step(Some(r), None, now);
        }
        if self.replicas[r].has_work() && !self.replicas[r].is_busy() {
            self.start_iteration(r, now);
        }
        self.fleet.observe(r, &self.replicas[r]);
    }
}
