//! The run's loop: each event dispatched to the handler of the model that
//! owns it, the guards checked as it goes, and the end of the run (records
//! flushed, invariants checked, each subsystem's report gathered).

use super::{Event, InvariantViolation, Progress, RunError, RunParts, Simulation};
use crate::kv::prefix_cache::PrefixCacheReport;
use crate::replica::report::EngineReport;
use crate::time::SimTime;

impl Simulation<'_> {
    /// Runs to the horizon and returns the run's parts ([`Self::run`]
    /// gathers them into a summary). `progress` is called
    /// every few thousand events.
    pub fn simulate(mut self, mut progress: impl FnMut(Progress)) -> Result<RunParts, RunError> {
        if let Some(e) = self.init_error.take() {
            return Err(e.into());
        }
        crate::guard::check_estimate_with(self.scenario, self.slab.recycle)
            .map_err(RunError::Guard)?;
        let total_hint = self.max_requests;
        let deadline = self.deadline;
        while let Some((now, ev)) = self.queue.next() {
            if let Err(m) = self.queue.check_time(now) {
                return Err(self.stopped(m));
            }
            self.dispatch(ev, now)?;
            let events = self.queue.events_processed();
            if events & 0xFFF == 0 {
                self.queue
                    .guard()
                    .check_memory(
                        &self.scenario.origin,
                        self.requests.len(),
                        self.timeseries.len(),
                        self.fleet.series_len() + self.life_series_len(),
                    )
                    .map_err(RunError::Guard)?;
                let by_time = deadline.map(|d| now.as_secs_f64() / d.as_secs_f64().max(1e-9));
                let by_reqs =
                    (total_hint != u64::MAX).then(|| self.slab.arrived as f64 / total_hint as f64);
                let fraction = match (by_time, by_reqs) {
                    (Some(a), Some(b)) => a.max(b),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => 0.0,
                };
                progress(Progress {
                    fraction: fraction.min(1.0),
                    now,
                    events,
                });
            }
        }
        // A duration horizon is the measurement window, whether or not the
        // fleet drained before it.
        let end = deadline.unwrap_or(self.queue.end());
        self.finish(end)
    }

    /// Hands event `ev`, due at `now`, to the handlers of the model that
    /// owns it.
    #[inline(always)]
    pub(super) fn dispatch(&mut self, ev: Event, now: SimTime) -> Result<(), RunError> {
        match ev {
            // The workload and tenancy (`admission`, `request_ends`).
            Event::Arrival => self.on_arrival(now),
            Event::FollowUp(slot) => self.on_follow_up(slot, now),
            Event::Retry(slot) => self.on_retry(slot, now),
            // A replica (`replicas`).
            Event::IterationEnd(r) => return self.on_iteration_end(r as usize, now),
            // The observers (`sampling`).
            Event::Sample => self.on_sample(now),
            Event::LoadReport => self.on_load_report(now),
            // The life cycle (`life`).
            Event::Fleet(e) => self.on_fleet_event(e, now),
            // The pools' KV links (`pools`).
            Event::TransferDone(slot) => self.on_transfer_done(slot, now),
            // The canary rollout (`canary_run`).
            Event::Canary => self.on_canary(now),
            // The regions (`regions`).
            Event::Overflow => self.on_overflow(now),
            // The serving front end (`front_end`).
            Event::FrontEnd(id, pool) => self.on_front_end(id, pool, now),
        }
        Ok(())
    }

    /// The error of a run a guard stopped.
    pub(super) fn stopped(&self, m: String) -> RunError {
        RunError::Guard(format!("{}: simulation stopped: {m}", self.scenario.origin))
    }

    pub(super) fn finish(mut self, end: SimTime) -> Result<RunParts, RunError> {
        let s = self.scenario;
        let workload = self.source.finish()?;
        for rep in &mut self.replicas {
            rep.close(end);
        }
        self.check_invariants()?;

        let cost_source = self.costs[0].source();
        let events = self.queue.events();
        let mut eng = EngineReport::default();
        let (mut seqs, mut toks, mut busy, mut kv_ns) = (0u64, 0u64, 0u64, 0u128);
        let (mut spec_steps, mut spec_tokens) = (0u64, 0u64);
        let mut prefix: Option<PrefixCacheReport> = None;
        for rep in &self.replicas {
            let st = &rep.stats;
            eng.iterations += st.iterations;
            eng.preemptions += rep.preemptions();
            eng.swap_outs += rep.swap_outs();
            spec_steps += st.spec_steps;
            spec_tokens += st.spec_tokens;
            seqs += st.batch_seqs;
            toks += st.batch_tokens;
            busy += st.busy_ns;
            kv_ns += st.kv_block_ns;
            let total = rep.kv().total().max(1) as f64;
            eng.kv_util_max = eng.kv_util_max.max(st.kv_peak_blocks as f64 / total);
            if let Some(c) = rep.prefix_cache() {
                let p = prefix.get_or_insert_with(Default::default);
                p.lookup_tokens += c.stats.lookup_tokens;
                p.hit_tokens += c.stats.hit_tokens;
                p.lookup_blocks += c.stats.lookup_blocks;
                p.hit_blocks += c.stats.hit_blocks;
                p.inserted_blocks += c.stats.inserted_blocks;
                p.evicted_blocks += c.stats.evicted_blocks;
                p.cached_blocks_at_end += c.blocks();
                p.pinned_blocks_at_end += c.pinned_blocks();
            }
        }
        let its = eng.iterations.max(1) as f64;
        eng.mean_batch_size = seqs as f64 / its;
        eng.mean_batch_tokens = toks as f64 / its;
        let span = end.0.max(1) as f64 * self.replicas.len() as f64;
        eng.busy_fraction = busy as f64 / span;
        // Pools may differ in KV blocks: weigh by each replica's own.
        let blocks: u64 = self.replicas.iter().map(|r| r.kv().total()).sum();
        eng.kv_util_mean = kv_ns as f64 / (end.0.max(1) as f64 * blocks.max(1) as f64);
        eng.policy = self.plan.policy.to_string();
        eng.preemption_mode = self.plan.preemption.clone();
        eng.spec_tokens_per_step = (spec_steps > 0).then(|| spec_tokens as f64 / spec_steps as f64);
        if let Some(p) = &mut prefix {
            p.token_hit_rate = p.hit_tokens as f64 / p.lookup_tokens.max(1) as f64;
            p.block_hit_rate = p.hit_blocks as f64 / p.lookup_blocks.max(1) as f64;
        }
        eng.prefix_cache = prefix;
        let ended = self.flush_records();
        if let Some(v) = self.stream.violation.take() {
            return Err(InvariantViolation(v).into());
        }
        let itl = self.itl.dist();
        if let Some(e) = self
            .stream
            .spill_error()
            .or(self.itl.error().map(str::to_string))
            .or(self.timeseries.error().map(str::to_string))
        {
            return Err(RunError::Output(std::io::Error::other(e)));
        }
        let streamed = self.stream.take_csv().map_err(RunError::Output)?;
        let st = std::mem::replace(
            &mut self.stream,
            crate::records::RecordStream::new(None, None, None),
        );
        // Each region draws the whole `[workload]`: the fleet is offered it
        // once per region.
        let offered = self
            .plan
            .workload_rps
            .map(|r| r * self.plan.regions.len().max(1) as f64);
        let (requests, load) = (st.summary, &st.load);
        // What was spilled to disk is read back only now, so a run whose
        // spilled records cannot be read fails here rather than reporting
        // on part of its requests.
        let read_error = |e: String| RunError::Output(std::io::Error::other(e));
        let dists = requests.finish(itl, end, s.gpus());
        let load_report =
            crate::steady_state::load_report_of(|| load.iter(), end, self.plan.replicas, offered);
        let request_stats = dists.map_err(read_error)?;
        if let Some(e) = load.error() {
            return Err(read_error(e.to_string()));
        }
        let tenancy = match st.tenants {
            Some(t) => self
                .tenancy
                .report_from(t, end, s.gpus())
                .map_err(read_error)?,
            None => None,
        };
        let dip = st.dip.map(|(d, _)| d.finish());
        let lifecycle = self.fleet_report(end, &st.completed_output_tokens, dip);
        let fleet_series = self.fleet_series();
        let pools = self.fleet.pool_reports(s, &self.replicas, end);
        let kv_transfer = self
            .fleet
            .transfer_report_from(st.transfers, end)
            .map_err(read_error)?;
        let canary = self.canary.as_ref().map(crate::canary::Canary::report);
        let regions = self
            .region_report(st.regions, lifecycle.as_ref(), end)
            .map_err(read_error)?;
        Ok(RunParts {
            end,
            cost_source,
            events,
            workload,
            engine: eng,
            request_stats,
            load: load_report,
            tenancy,
            lifecycle,
            pools,
            kv_transfer,
            canary,
            regions,
            // A streamed run's slab holds only vacant slots by now.
            requests: if self.slab.recycle {
                Vec::new()
            } else {
                self.requests
            },
            ended,
            timeseries: self.timeseries,
            attribution: self.plan.attribution,
            fleet_series,
            pool_series: self.fleet.take_series(),
            streamed_requests: streamed,
            scenario_hash: crate::output::scenario_hash(s),
            routing_trace: self.routing_trace,
        })
    }
}
