//! Routers choose the replica each arriving request is sent to. One file per
//! policy; [`build`] is the registry the scenario's `fleet.router` names.

mod least_outstanding;
mod round_robin;

pub use least_outstanding::LeastOutstanding;
pub use round_robin::RoundRobin;

use crate::replica::Replica;
use crate::scenario::RouterKind;

/// A routing policy across identical replicas. Must be deterministic: ties are
/// broken by replica index, never by hash order or randomness outside the
/// run's seeded streams.
pub trait Router: Send {
    /// Index into `replicas` of the replica that takes the next request.
    fn route(&mut self, replicas: &[Replica]) -> usize;
}

/// The router a scenario names.
pub fn build(kind: RouterKind) -> Box<dyn Router> {
    match kind {
        RouterKind::RoundRobin => Box::new(RoundRobin::default()),
        RouterKind::LeastOutstanding => Box::new(LeastOutstanding),
    }
}
