use super::Router;
use crate::cluster::view::FleetView;
use crate::request::Request;
use crate::rng::{stream, StreamRng};
use rand::Rng;

/// Uniform random choice from the run's seeded `router` stream (Envoy's
/// `RANDOM`; the baseline of Mitzenmacher's balls-into-bins analysis, whose
/// maximum load grows as log N / log log N). O(1) per request.
#[derive(Debug)]
pub struct Random {
    rng: StreamRng,
}

impl Random {
    pub fn new(seed: u64) -> Random {
        Random {
            rng: stream(seed, "router"),
        }
    }
}

impl Router for Random {
    fn route(&mut self, _req: &Request, view: &FleetView) -> usize {
        self.rng.random_range(0..view.len())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn covers_every_replica_about_evenly_and_repeats_with_the_seed() {
        let reps = replicas(4);
        let view = FleetView::new(&reps, true);
        let req = request(&[], 0);
        let mut r = Random::new(5);
        let picks: Vec<usize> = (0..4000).map(|_| r.route(&req, &view)).collect();
        for i in 0..4 {
            let n = picks.iter().filter(|&&p| p == i).count();
            assert!((900..1100).contains(&n), "replica {i}: {n}");
        }
        let mut again = Random::new(5);
        assert!(picks.iter().all(|&p| p == again.route(&req, &view)));
    }
}
