//! Observation ticks: the replicas' load reports to the router and the
//! time series' samples.

use super::{Event, Simulation};
use crate::records::timeseries::TimeseriesRow;
use crate::replica::Replica;
use crate::time::SimTime;

impl Simulation<'_> {
    pub(super) fn on_load_report(&mut self, now: SimTime) {
        let next = self.fleet.report(now, &self.replicas);
        // Reports stop when nothing is left to happen but reports and samples.
        let work_ahead = self.fleet.busy()
            || self.pending.is_some()
            || self.deferred.iter().any(Option::is_some)
            || self.replicas.iter().any(Replica::is_busy);
        if work_ahead && self.deadline.is_none_or(|d| next <= d) {
            self.queue.schedule(next, Event::LoadReport);
        }
    }

    pub(super) fn on_sample(&mut self, now: SimTime) {
        self.fleet.sample(now, &self.replicas);
        if self.plan.timeseries == crate::scenario::TimeseriesMode::Fleet {
            self.timeseries
                .push(crate::guard::fleet_row(now, &self.replicas));
        }
        let per_replica = self.plan.timeseries == crate::scenario::TimeseriesMode::PerReplica;
        for rep in self.replicas.iter().filter(|_| per_replica) {
            self.timeseries.push(TimeseriesRow {
                time: now,
                replica: rep.id,
                waiting: rep.waiting_len() as u32,
                running: rep.running_len() as u32,
                kv_blocks_used: rep.active_kv_blocks(),
                kv_blocks_total: rep.kv().total(),
            });
        }
        self.fleet_sample(now);
        // Keep sampling while anything else is still to happen.
        if !self.queue.is_empty() {
            let next = now.plus(self.sample_every);
            if self.deadline.is_none_or(|d| next <= d) {
                self.queue.schedule(next, Event::Sample);
            }
        }
    }
}
