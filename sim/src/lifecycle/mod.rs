//! The life cycle of the fleet's replicas: requested → provisioning →
//! loading weights → warming → ready → draining → stopped, a warm standby
//! pool, an activator buffer for scale-to-zero, and failures that send a
//! replica back through the cold-start path.
//!
//! Modelled on a Kubernetes/KServe/Knative serving stack: a replica is a
//! pod on a GPU node that must be acquired (Karpenter or cluster-autoscaler
//! launching an instance, pulling the image), that loads its weights from an
//! object store or a node-local cache (KServe's model cache, Run:ai's
//! model streamer), starts its engine (vLLM profiles memory, compiles and
//! captures CUDA graphs) and only then passes its readiness probe. Routers
//! see only ready replicas (`cluster::view`'s routable mask). A scale-down
//! drains a replica (Kubernetes removes it from the Service's endpoints and
//! sends SIGTERM; vLLM finishes in-flight requests within
//! `terminationGracePeriodSeconds`). A standby replica is warm capacity
//! (weights in GPU memory, not serving) that takes traffic in seconds, the
//! "warm pool" of AWS Auto Scaling and of serverless GPU platforms.
//!
//! The state machine acts on "a set of replicas with one config": the run's
//! slots `0..slots`. With pools, each pool owns one `ReplicaLifecycle` over its slots.
//!
//! Every delay is an integer of nanoseconds; random draws (provisioning
//! jitter, cache hits, failures) come from seeded streams, so runs are
//! deterministic.

mod report;

mod per_pool;
pub use per_pool::{combine, PoolLifecycle};
pub use report::{
    slo_dip, FleetSample, GpuHours, LifecycleReport, RetryReport, SloDip, SloDipRecords,
};

use crate::rng::{self, StreamRng};
use crate::scenario::{GivenFailure, LifeUnitPlan};
use crate::time::{secs_to_nanos, Nanos, SimTime};
use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use std::collections::VecDeque;

/// Where a replica is in its life cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// No node: costs nothing.
    Stopped,
    /// Acquiring a node and starting the container.
    Provisioning,
    /// Reading the weights into GPU memory.
    Loading,
    /// Engine start: profiling, compilation, CUDA-graph capture.
    Warming,
    /// Warm and idle, outside the serving set.
    Standby,
    /// A standby replica joining the serving set (readiness probe).
    Activating,
    /// Serving: routers may send it requests.
    Ready,
    /// Finishing its requests; takes no new ones.
    Draining,
    /// Failed; repaired after `failures.repair_s` through a cold start.
    Failed,
}

/// Number of phases (the accounting arrays' length).
pub const N_PHASES: usize = 9;

impl Phase {
    pub const ALL: [Phase; N_PHASES] = [
        Phase::Stopped,
        Phase::Provisioning,
        Phase::Loading,
        Phase::Warming,
        Phase::Standby,
        Phase::Activating,
        Phase::Ready,
        Phase::Draining,
        Phase::Failed,
    ];

    /// Starting from cold: the time a cold start costs.
    pub fn is_starting(self) -> bool {
        matches!(self, Phase::Provisioning | Phase::Loading | Phase::Warming)
    }
}

/// What a starting replica becomes once warm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    Serve,
    Standby,
}

/// A lifecycle event, carried by the simulation's event queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetEvent {
    /// Slot `slot` ends its current phase (ignored unless `gen` is current).
    Advance { slot: u32, gen: u32 },
    /// A draining slot's grace period ends: hand back what it still holds.
    DrainTimeout { slot: u32, gen: u32 },
    /// A random failure of `slot` (ignored unless `gen` is current).
    Fail { slot: u32, gen: u32 },
    /// A given failure (`failures.at`): always applies to a live slot.
    FailAt { slot: u32 },
    /// Metrics of unit `k` (a pool, or the fleet without pools) are scraped.
    Scrape(u16),
    /// Unit `k`'s autoscaler decides.
    Decide(u16),
}

/// One slot's life-cycle state.
#[derive(Clone, Debug)]
struct Slot {
    phase: Phase,
    dest: Dest,
    /// Bumped at every phase change: stale events carry an older one.
    gen: u32,
    /// An iteration of the replica that failed or was handed back is still
    /// in the event queue: its end must be ignored.
    stale_ends: u32,
    /// It finished warming while a stale iteration end was pending: it
    /// becomes ready once that end has been consumed.
    ready_pending: bool,
    /// Failure clock of this slot (`failures.mtbf_s`).
    fail_rng: Option<StreamRng>,
}

/// What the simulation must do after a life-cycle change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Schedule `event` at `at`.
    Schedule(SimTime, FleetEvent),
    /// Slot became ready: routable; the activator may release its buffer.
    Ready(u32),
    /// Slot left the serving set (draining, failed, cancelled): not routable.
    Unroutable(u32),
    /// Slot starts draining: if it holds nothing it stops at once.
    Drain(u32),
    /// Slot failed or timed out draining: its requests must be handed back
    /// and its replica replaced by a fresh one.
    HandBack(u32, HandBackCause),
}

/// Why a replica gave its requests back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandBackCause {
    Failure,
    DrainTimeout,
}

/// Resolved delays, in nanoseconds.
#[derive(Clone, Debug)]
struct Delays {
    provision: Option<LogNormal<f64>>,
    provision_fixed: Nanos,
    load_remote: Nanos,
    load_cache: Nanos,
    cache_hit: f64,
    warmup: Nanos,
    standby_activate: Nanos,
    drain_timeout: Nanos,
    repair: Nanos,
}

/// The replicas' life cycle over the run: slot states, the standby pool,
/// the activator buffer and the replica-time each phase took.
pub struct ReplicaLifecycle {
    slots: Vec<Slot>,
    delays: Delays,
    /// Serving replicas the autoscaler asks for.
    desired: u32,
    standby_target: u32,
    rng: StreamRng,
    mtbf: Option<Exp<f64>>,
    seed: u64,
    /// Replicas per phase, and ∫ replicas dt per phase (replica·ns).
    counts: [u32; N_PHASES],
    phase_ns: [u128; N_PHASES],
    last_change: SimTime,
    /// Requests held by the activator while no replica is ready.
    pub buffer: VecDeque<u32>,
    activator: bool,
    activator_capacity: u32,
    pub(crate) stats: report::Counters,
    pub(crate) series: Vec<FleetSample>,
    /// Most retries of one request after a failure.
    pub max_retries: u32,
}

impl ReplicaLifecycle {
    /// The life cycle of a pool's `plan`: its slots (the autoscaler's
    /// maximum plus the standby pool), of which `start` serve at t = 0 and
    /// the standby pool is warm; a cold start loads `weight_bytes` (all of
    /// a replica's GPUs' shards).
    pub fn new(plan: &LifeUnitPlan) -> ReplicaLifecycle {
        let lc = &plan.lifecycle;
        let auto = plan.autoscale.as_ref();
        let failures = plan.failures.as_ref();
        let (start, weight_bytes, seed) = (plan.start, plan.weight_bytes, plan.seed);
        let max = auto
            .and_then(|a| a.max_replicas)
            .unwrap_or(start)
            .max(start);
        let n = (max + lc.standby) as usize;
        let provision = (lc.provision_cv > 0.0 && lc.provision_s > 0.0).then(|| {
            LogNormal::from_mean_cv(lc.provision_s, lc.provision_cv)
                .expect("validated provision_cv")
        });
        let bytes_ns = |gbs: f64| secs_to_nanos(weight_bytes / (gbs * 1e9));
        let delays = Delays {
            provision,
            provision_fixed: secs_to_nanos(lc.provision_s),
            load_remote: bytes_ns(lc.weights_remote_gbyte_s),
            load_cache: bytes_ns(lc.weights_cache_gbyte_s),
            cache_hit: lc.cache_hit_probability,
            warmup: secs_to_nanos(lc.warmup_s),
            standby_activate: secs_to_nanos(lc.standby_activate_s),
            drain_timeout: secs_to_nanos(lc.drain_timeout_s),
            repair: failures.map_or(0, |f| secs_to_nanos(f.repair_s)),
        };
        let mut slots = vec![
            Slot {
                phase: Phase::Stopped,
                dest: Dest::Serve,
                gen: 0,
                stale_ends: 0,
                ready_pending: false,
                fail_rng: None,
            };
            n
        ];
        let mut counts = [0u32; N_PHASES];
        for (i, s) in slots.iter_mut().enumerate() {
            let i = i as u32;
            s.phase = if i < start {
                Phase::Ready
            } else if i < start + lc.standby {
                s.dest = Dest::Standby;
                Phase::Standby
            } else {
                Phase::Stopped
            };
            counts[s.phase as usize] += 1;
        }
        ReplicaLifecycle {
            slots,
            delays,
            desired: start,
            standby_target: lc.standby,
            rng: rng::stream(seed, "lifecycle"),
            mtbf: failures
                .and_then(|f| f.mtbf_s)
                .map(|m| Exp::new(1.0 / m).expect("validated mtbf_s")),
            seed,
            counts,
            phase_ns: [0; N_PHASES],
            last_change: SimTime::ZERO,
            buffer: VecDeque::new(),
            activator: lc.activator,
            activator_capacity: lc.activator_capacity,
            stats: report::Counters::default(),
            series: Vec::new(),
            max_retries: failures.map_or(0, |f| f.max_retries),
        }
    }

    /// Number of slots (replica objects the simulation keeps).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    pub fn phase(&self, slot: usize) -> Phase {
        self.slots[slot].phase
    }

    pub fn desired(&self) -> u32 {
        self.desired
    }

    pub fn count(&self, p: Phase) -> u32 {
        self.counts[p as usize]
    }

    /// Whether any replica takes requests.
    pub fn any_ready(&self) -> bool {
        self.counts[Phase::Ready as usize] > 0
    }

    pub fn activator(&self) -> bool {
        self.activator
    }

    /// Whether the activator has room for one more request.
    pub fn activator_has_room(&self) -> bool {
        self.activator
            && (self.activator_capacity == 0
                || (self.buffer.len() as u32) < self.activator_capacity)
    }

    /// Events to schedule at t = 0: failure clocks of the live slots and
    /// the `given` failures (in its own slots' numbers).
    pub fn start(&mut self, given: &[GivenFailure]) -> Vec<Action> {
        let mut out = Vec::new();
        for i in 0..self.slots.len() {
            if matches!(self.slots[i].phase, Phase::Ready | Phase::Standby) {
                self.arm_failure(i, SimTime::ZERO, &mut out);
            }
        }
        for g in given {
            out.push(Action::Schedule(
                g.at,
                FleetEvent::FailAt { slot: g.replica },
            ));
        }
        out
    }

    fn arm_failure(&mut self, i: usize, now: SimTime, out: &mut Vec<Action>) {
        let Some(exp) = self.mtbf else { return };
        let seed = self.seed;
        let s = &mut self.slots[i];
        let r = s
            .fail_rng
            .get_or_insert_with(|| rng::stream(seed, &format!("failures.{i}")));
        let gap = secs_to_nanos(exp.sample(r)).max(1);
        out.push(Action::Schedule(
            now.plus(gap),
            FleetEvent::Fail {
                slot: i as u32,
                gen: s.gen,
            },
        ));
    }

    /// Brings the per-phase replica-time integral to `now`.
    fn account(&mut self, now: SimTime) {
        let dt = now.since(self.last_change) as u128;
        if dt > 0 {
            for (acc, &c) in self.phase_ns.iter_mut().zip(&self.counts) {
                *acc += c as u128 * dt;
            }
        }
        self.last_change = SimTime(self.last_change.0.max(now.0));
    }

    fn set_phase(&mut self, i: usize, p: Phase, now: SimTime) {
        self.account(now);
        let s = &mut self.slots[i];
        self.counts[s.phase as usize] -= 1;
        self.counts[p as usize] += 1;
        s.phase = p;
        s.gen = s.gen.wrapping_add(1);
    }

    fn advance_after(&self, i: usize, at: SimTime) -> Action {
        Action::Schedule(
            at,
            FleetEvent::Advance {
                slot: i as u32,
                gen: self.slots[i].gen,
            },
        )
    }

    /// Starts a cold start of stopped slot `i` toward `dest`.
    fn cold_start(&mut self, i: usize, dest: Dest, now: SimTime, out: &mut Vec<Action>) {
        self.slots[i].dest = dest;
        self.set_phase(i, Phase::Provisioning, now);
        self.stats.cold_starts += 1;
        let d = match &self.delays.provision {
            Some(ln) => secs_to_nanos(ln.sample(&mut self.rng)),
            None => self.delays.provision_fixed,
        };
        out.push(self.advance_after(i, now.plus(d)));
    }

    /// A slot's phase ended (event `Advance`).
    pub fn on_advance(&mut self, slot: u32, gen: u32, now: SimTime) -> Vec<Action> {
        let i = slot as usize;
        let mut out = Vec::new();
        if self.slots[i].gen != gen {
            return out;
        }
        match self.slots[i].phase {
            Phase::Provisioning => {
                self.set_phase(i, Phase::Loading, now);
                let hit =
                    self.delays.cache_hit > 0.0 && self.rng.random::<f64>() < self.delays.cache_hit;
                let d = if hit {
                    self.stats.cache_hits += 1;
                    self.delays.load_cache
                } else {
                    self.delays.load_remote
                };
                out.push(self.advance_after(i, now.plus(d)));
            }
            Phase::Loading => {
                self.set_phase(i, Phase::Warming, now);
                out.push(self.advance_after(i, now.plus(self.delays.warmup)));
            }
            Phase::Warming => match self.slots[i].dest {
                Dest::Serve => self.become_ready(i, now, &mut out),
                Dest::Standby => {
                    self.set_phase(i, Phase::Standby, now);
                    self.arm_failure(i, now, &mut out);
                }
            },
            Phase::Activating => self.become_ready(i, now, &mut out),
            Phase::Failed => {
                // Repaired: a new node, through the cold-start path.
                self.set_phase(i, Phase::Stopped, now);
                self.reconcile(now, &mut out);
            }
            _ => {}
        }
        out
    }

    fn become_ready(&mut self, i: usize, now: SimTime, out: &mut Vec<Action>) {
        self.set_phase(i, Phase::Ready, now);
        if self.slots[i].stale_ends > 0 {
            // Wait until the old replica's last iteration end is consumed.
            self.slots[i].ready_pending = true;
            return;
        }
        out.push(Action::Ready(i as u32));
        self.arm_failure(i, now, out);
    }

    /// The simulation handed slot `i`'s requests back while an iteration of
    /// the old replica was in progress.
    pub fn note_stale_end(&mut self, i: usize) {
        self.slots[i].stale_ends += 1;
    }

    /// An iteration end of slot `i` arrived: true when it is stale (the
    /// replica it belonged to is gone), with the actions that follow.
    pub fn consume_stale_end(&mut self, i: usize, now: SimTime) -> Option<Vec<Action>> {
        let s = &mut self.slots[i];
        if s.stale_ends == 0 {
            return None;
        }
        s.stale_ends -= 1;
        let mut out = Vec::new();
        if s.stale_ends == 0 && s.ready_pending {
            s.ready_pending = false;
            if s.phase == Phase::Ready {
                out.push(Action::Ready(i as u32));
                self.arm_failure(i, now, &mut out);
            }
        }
        Some(out)
    }

    /// Whether slot `i` is routable (ready and not waiting for a stale end).
    pub fn routable(&self, i: usize) -> bool {
        let s = &self.slots[i];
        s.phase == Phase::Ready && !s.ready_pending
    }

    /// The autoscaler asks for `n` serving replicas.
    pub fn set_desired(&mut self, n: u32, now: SimTime) -> Vec<Action> {
        if n > self.desired {
            self.stats.scale_ups += 1;
        } else if n < self.desired {
            self.stats.scale_downs += 1;
        }
        self.desired = n;
        let mut out = Vec::new();
        self.reconcile(now, &mut out);
        out
    }

    /// Serving replicas counted toward the request: ready, on their way to
    /// ready, or failed and to be repaired as serving replicas.
    fn serving(&self) -> u32 {
        self.slots
            .iter()
            .filter(|s| match s.phase {
                Phase::Ready | Phase::Activating => true,
                p if p.is_starting() || p == Phase::Failed => s.dest == Dest::Serve,
                _ => false,
            })
            .count() as u32
    }

    fn standby_count(&self) -> u32 {
        self.slots
            .iter()
            .filter(|s| match s.phase {
                Phase::Standby => true,
                p if p.is_starting() || p == Phase::Failed => s.dest == Dest::Standby,
                _ => false,
            })
            .count() as u32
    }

    /// Moves the fleet toward `desired` serving replicas and a full standby
    /// pool: warm standby first, then a cold start; a scale-down cancels
    /// cold starts before it drains ready replicas (Kubernetes' ReplicaSet
    /// deletes unready pods first).
    fn reconcile(&mut self, now: SimTime, out: &mut Vec<Action>) {
        let mut serving = self.serving();
        while serving < self.desired {
            if let Some(i) = self.find(|s| s.phase == Phase::Standby) {
                self.stats.standby_activations += 1;
                self.slots[i].dest = Dest::Serve;
                self.set_phase(i, Phase::Activating, now);
                out.push(self.advance_after(i, now.plus(self.delays.standby_activate)));
            } else if let Some(i) = self.find(|s| s.phase.is_starting() && s.dest == Dest::Standby)
            {
                // A replica on its way to standby serves instead.
                self.slots[i].dest = Dest::Serve;
            } else if let Some(i) = self.find(|s| s.phase == Phase::Draining) {
                // Called back from draining: still warm.
                self.set_phase(i, Phase::Ready, now);
                out.push(Action::Ready(i as u32));
                self.arm_failure(i, now, out);
            } else if let Some(i) = self.find(|s| s.phase == Phase::Stopped) {
                self.cold_start(i, Dest::Serve, now, out);
            } else {
                break;
            }
            serving += 1;
        }
        while serving > self.desired {
            // The least advanced cold start first, the newest slot on ties.
            let starting = (0..self.slots.len())
                .rev()
                .filter(|&i| self.slots[i].phase.is_starting() && self.slots[i].dest == Dest::Serve)
                .min_by_key(|&i| self.slots[i].phase);
            if let Some(i) = starting {
                if self.standby_count() < self.standby_target {
                    self.slots[i].dest = Dest::Standby;
                } else {
                    self.set_phase(i, Phase::Stopped, now);
                    self.stats.cancelled_starts += 1;
                }
            } else if let Some(i) = self.find(|s| s.phase == Phase::Activating) {
                self.slots[i].dest = Dest::Standby;
                self.set_phase(i, Phase::Standby, now);
                self.arm_failure(i, now, out);
            } else if let Some(i) = (0..self.slots.len())
                .rev()
                .find(|&i| self.slots[i].phase == Phase::Ready)
            {
                self.set_phase(i, Phase::Draining, now);
                self.stats.drains += 1;
                out.push(Action::Unroutable(i as u32));
                out.push(Action::Drain(i as u32));
                out.push(Action::Schedule(
                    now.plus(self.delays.drain_timeout),
                    FleetEvent::DrainTimeout {
                        slot: i as u32,
                        gen: self.slots[i].gen,
                    },
                ));
            } else {
                break;
            }
            serving -= 1;
        }
        let mut standby = self.standby_count();
        while standby < self.standby_target {
            match self.find(|s| s.phase == Phase::Stopped) {
                Some(i) => self.cold_start(i, Dest::Standby, now, out),
                None => break,
            }
            standby += 1;
        }
        while standby > self.standby_target {
            match (0..self.slots.len())
                .rev()
                .find(|&i| self.slots[i].phase == Phase::Standby)
            {
                Some(i) => self.set_phase(i, Phase::Stopped, now),
                None => break,
            }
            standby -= 1;
        }
    }

    fn find(&self, pred: impl Fn(&Slot) -> bool) -> Option<usize> {
        self.slots.iter().position(pred)
    }

    /// A draining replica holds no more requests: it joins the standby pool
    /// when the pool is short (its weights are loaded), else it stops.
    pub fn drained(&mut self, i: usize, now: SimTime) -> Vec<Action> {
        let mut out = Vec::new();
        if self.slots[i].phase != Phase::Draining {
            return out;
        }
        if self.standby_count() < self.standby_target {
            self.slots[i].dest = Dest::Standby;
            self.set_phase(i, Phase::Standby, now);
            self.arm_failure(i, now, &mut out);
        } else {
            self.set_phase(i, Phase::Stopped, now);
        }
        out
    }

    /// A drain's grace period ended.
    pub fn on_drain_timeout(&mut self, slot: u32, gen: u32) -> Vec<Action> {
        let i = slot as usize;
        if self.slots[i].gen != gen || self.slots[i].phase != Phase::Draining {
            return Vec::new();
        }
        self.stats.drain_timeouts += 1;
        vec![Action::HandBack(slot, HandBackCause::DrainTimeout)]
    }

    /// Slot `slot` fails (a random failure with `gen`, or a given one).
    pub fn on_fail(&mut self, slot: u32, gen: Option<u32>, now: SimTime) -> Vec<Action> {
        let i = slot as usize;
        let mut out = Vec::new();
        if gen.is_some_and(|g| g != self.slots[i].gen) {
            return out;
        }
        let p = self.slots[i].phase;
        if matches!(p, Phase::Stopped | Phase::Failed) {
            return out;
        }
        self.stats.failures += 1;
        if matches!(p, Phase::Ready | Phase::Draining) {
            out.push(Action::Unroutable(slot));
            out.push(Action::HandBack(slot, HandBackCause::Failure));
        }
        if p == Phase::Draining {
            // It was leaving anyway: no repair.
            self.set_phase(i, Phase::Stopped, now);
        } else {
            if matches!(p, Phase::Ready | Phase::Activating) {
                self.slots[i].dest = Dest::Serve;
            }
            self.set_phase(i, Phase::Failed, now);
            out.push(self.advance_after(i, now.plus(self.delays.repair)));
        }
        self.reconcile(now, &mut out);
        out
    }

    /// Replica-time per phase up to `end` (replica·ns), closing the books.
    pub fn close(&mut self, end: SimTime) -> [u128; N_PHASES] {
        self.account(end);
        self.phase_ns
    }

    /// Conservation of the slot books: every slot in exactly one phase, and
    /// the phase integrals add up to slots × elapsed time.
    pub fn check(&self) -> Result<(), String> {
        let n: u32 = self.counts.iter().sum();
        if n as usize != self.slots.len() {
            return Err(format!(
                "lifecycle: {n} slots counted in phases, {} exist",
                self.slots.len()
            ));
        }
        for p in Phase::ALL {
            let c = self.slots.iter().filter(|s| s.phase == p).count() as u32;
            if c != self.counts[p as usize] {
                return Err(format!(
                    "lifecycle: {p:?} counts {} but {c} slots are in it",
                    self.counts[p as usize]
                ));
            }
        }
        let total: u128 = self.phase_ns.iter().sum();
        let want = self.slots.len() as u128 * self.last_change.0 as u128;
        if total != want {
            return Err(format!(
                "lifecycle: replica-time {total} ns != slots × duration {want} ns"
            ));
        }
        Ok(())
    }
}
