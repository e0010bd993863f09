//! `fixed`: the fleet keeps `fleet.replicas` serving replicas; a failed one
//! is replaced through a cold start (a Kubernetes Deployment without an
//! autoscaler: the ReplicaSet controller restores the count).

use super::{Autoscaler, Observation, Ticks};

/// A constant replica count.
pub struct Fixed {
    n: u32,
}

impl Fixed {
    pub fn new(n: u32) -> Fixed {
        Fixed { n }
    }
}

impl Autoscaler for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn ticks(&self) -> Ticks {
        Ticks::Never
    }

    fn decide(&mut self, _: &Observation) -> u32 {
        self.n
    }
}
