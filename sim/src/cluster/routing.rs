//! The routing stage of a run: the scenario's router, its view of the
//! replicas and the load-report clock, behind the three calls the
//! simulation makes (route an arrival, a replica changed, a report is due).
//! A stage is built from its slice of the plan ([`RoutingPlan`]).

use super::router::{self, Router};
use super::view::{FleetView, PrefillWork};
use crate::replica::Replica;
use crate::request::Request;
use crate::scenario::RoutingPlan;
use crate::time::{secs_to_nanos, Nanos, SimTime};

/// Router + view + report interval of one run.
pub struct Routing {
    router: Box<dyn Router>,
    view: FleetView,
    /// Nanoseconds between load reports; `None`: the view is live.
    report_every: Option<Nanos>,
    /// The router's scores are kept for the routing trace
    /// (`[metrics] routing_trace`).
    trace: bool,
    /// The scores of the last decision (traced runs only).
    scores: Vec<f64>,
}

impl Routing {
    pub fn new(plan: &RoutingPlan, replicas: &[Replica]) -> Routing {
        Self::with_capacity(plan, replicas, None)
    }

    /// A routing stage over replicas of different speeds (`capacity`
    /// relative to the fastest, see `FleetView::with_capacity`).
    pub fn with_capacity(
        plan: &RoutingPlan,
        replicas: &[Replica],
        capacity: Option<Vec<u64>>,
    ) -> Routing {
        let report_every =
            (plan.report_interval_s > 0.0).then(|| secs_to_nanos(plan.report_interval_s).max(1));
        Routing {
            router: router::build(plan, replicas.len()),
            view: match capacity {
                Some(c) => FleetView::with_capacity(replicas, report_every.is_none(), c),
                None => FleetView::new(replicas, report_every.is_none()),
            },
            report_every,
            trace: plan.trace,
            scores: Vec::new(),
        }
    }

    /// Time of the first load report, when reports are periodic.
    pub fn first_report(&self) -> Option<SimTime> {
        self.report_every.map(|_| SimTime::ZERO)
    }

    /// The replica that takes `req`. A policy that picks by index (round
    /// robin, random, hashing, prefix ownership) may land on a replica that
    /// is not ready (`lifecycle`); the request then goes to the least-loaded
    /// ready replica, as a gateway moves on from an endpoint that is gone.
    pub fn route(&mut self, req: &Request) -> usize {
        if self.trace {
            // Scored before the pick: a prefix router's pick updates its index.
            self.router.scores(req, &self.view, &mut self.scores);
        }
        let r = self.router.route(req, &self.view);
        let r = if self.view.is_routable(r) {
            r
        } else {
            self.view.least_outstanding()
        };
        self.view.picked(r);
        r
    }

    /// The router's scores of its replicas at its last decision (empty
    /// unless traced, or when the policy scores nothing).
    pub fn last_scores(&self) -> &[f64] {
        &self.scores
    }

    /// What the router's scores mean.
    pub fn score_meaning(&self) -> &'static str {
        self.router.score_meaning()
    }

    /// Whether the router may choose replica `r` (of its group).
    pub fn is_routable(&self, r: usize) -> bool {
        self.view.is_routable(r)
    }

    /// The routing stage of a disaggregated prefill pool: its view weighs
    /// what binds a prefill replica (`FleetView::prefill`).
    pub fn for_prefill(plan: &RoutingPlan, replicas: &[Replica], work: PrefillWork) -> Routing {
        let mut r = Self::new(plan, replicas);
        r.view = FleetView::prefill(replicas, r.report_every.is_none(), work);
        r
    }

    /// Replica `r` enters (ready) or leaves (draining, failed, stopped) the
    /// set routers may choose from.
    pub fn set_routable(&mut self, r: usize, routable: bool) {
        self.view.set_routable(r, routable);
    }

    /// Replica `r` changed state (took a request, ended an iteration).
    pub fn observe(&mut self, r: usize, replica: &Replica) {
        self.view.observe(r, replica);
    }

    /// Every replica reports its load; returns when the next report is due.
    pub fn report(&mut self, now: SimTime, replicas: &[Replica]) -> SimTime {
        self.view.report(replicas);
        now.plus(self.report_every.unwrap_or(1))
    }
}
