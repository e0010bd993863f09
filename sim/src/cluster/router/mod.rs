//! Routers choose the replica each arriving request is sent to. One file per
//! policy; [`build`] is the registry the scenario's `fleet.router` names.
//!
//! A router sees the request (prompt length, prefix-block hashes, session,
//! tenant) and a [`FleetView`] of the replicas' load as last reported. The
//! load-based policies cost O(log N) or O(1) per request in a fleet of N
//! (the view keeps its least-loaded replicas in indexed trees); the
//! `weighted` scorer scores every replica, O(N), as llm-d's does.

mod least_kv;
mod least_outstanding;
mod power_of_two;
mod prefix_affinity;
pub mod prefix_index;
#[cfg(test)]
mod prefix_index_reference;
mod random;
mod round_robin;
mod session_affinity;
mod weighted;

pub use least_kv::LeastKv;
pub use least_outstanding::LeastOutstanding;
pub use power_of_two::PowerOfTwo;
pub use prefix_affinity::PrefixAffinity;
pub use random::Random;
pub use round_robin::RoundRobin;
pub use session_affinity::SessionAffinity;
pub use weighted::Weighted;

use super::view::FleetView;
use crate::request::Request;
use crate::scenario::{RouterKind, RoutingPlan};

/// A routing policy. Must be deterministic: ties are broken by replica
/// index, never by hash order, and randomness comes from the run's seeded
/// streams.
pub trait Router: Send {
    /// Index of the replica that takes `req`.
    fn route(&mut self, req: &Request, view: &FleetView) -> usize;

    /// The policy's score of every replica of `view` for `req`, as it
    /// stands before the pick, into `out` (one per replica): what the
    /// routing trace (`[metrics] routing_trace`) records beside the pick.
    /// Left empty by a policy that scores nothing (round robin, random).
    /// Must not change what the next `route` does.
    fn scores(&mut self, _req: &Request, _view: &FleetView, out: &mut Vec<f64>) {
        out.clear();
    }

    /// What [`Self::scores`] means, in words, for the summary.
    fn score_meaning(&self) -> &'static str {
        "none (the policy does not score replicas)"
    }
}

/// Every replica's outstanding requests as the view reports them: the score
/// of the load-based policies.
fn outstanding_scores(view: &FleetView, out: &mut Vec<f64>) {
    out.clear();
    out.extend(view.loads().iter().map(|l| l.outstanding() as f64));
}

/// The router `plan` names, over `replicas` replicas.
pub fn build(plan: &RoutingPlan, replicas: usize) -> Box<dyn Router> {
    match plan.router {
        RouterKind::RoundRobin => Box::new(RoundRobin::default()),
        RouterKind::LeastOutstanding => Box::new(LeastOutstanding),
        RouterKind::Random => Box::new(Random::new(plan.seed)),
        RouterKind::LeastKv => Box::new(LeastKv),
        RouterKind::PowerOfTwo => Box::new(PowerOfTwo::new(plan.seed)),
        RouterKind::SessionAffinity => {
            Box::new(SessionAffinity::new(replicas, &plan.session_affinity))
        }
        RouterKind::PrefixAffinity => Box::new(PrefixAffinity::new(
            &plan.prefix_affinity,
            replicas,
            plan.kv_tokens_per_replica,
        )),
        RouterKind::Weighted => Box::new(Weighted::new(
            &plan.weighted,
            replicas,
            plan.kv_tokens_per_replica,
        )),
    }
}

/// The chained hashes of the prompt's full blocks: what a router can see of
/// a request's prefix (the output's blocks do not exist yet).
pub fn prompt_hashes(req: &Request) -> &[u64] {
    let blocks = req.prompt_tokens / req.hash_block_tokens.max(1);
    &req.prefix_hashes()[..req.prefix_hashes().len().min(blocks as usize)]
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::replica::Replica;
    use crate::scenario::EngineCfg;

    pub fn replicas(n: u32) -> Vec<Replica> {
        (0..n)
            .map(|i| Replica::new(i, &EngineCfg::default(), 1000, 1024.0, 0))
            .collect()
    }

    /// A request with `blocks` prefix blocks of 16 tokens from `hashes`.
    pub fn request(hashes: &[u64], session: u64) -> Request {
        let spec = crate::workload::RequestSpec {
            prompt_tokens: 16 * hashes.len() as u32 + 8,
            output_tokens: 10,
            session,
            prefix_hashes: hashes.to_vec(),
            hash_block_tokens: 16,
            ..Default::default()
        };
        Request::from_spec(spec)
    }

    /// Routes `req` and makes the chosen replica hold it, as a run does.
    pub fn send(
        router: &mut dyn Router,
        req: &Request,
        reps: &mut [Replica],
        view: &mut FleetView,
        id: u32,
    ) -> usize {
        let r = router.route(req, view);
        reps[r].enqueue(id);
        view.observe(r, &reps[r]);
        r
    }
}
