use super::Router;
use crate::cluster::view::FleetView;
use crate::request::Request;
use crate::rng::{stream, StreamRng};
use rand::Rng;

/// Power of two choices (Mitzenmacher, "The Power of Two Choices in
/// Randomized Load Balancing", IEEE TPDS 2001; Envoy's `LEAST_REQUEST` with
/// `choice_count = 2`): draw two distinct replicas from the seeded `router`
/// stream and send to the one with fewer outstanding requests (the first
/// drawn on ties). O(1) per request, and robust to stale reports where
/// least-outstanding herds: the two candidates differ per request.
#[derive(Debug)]
pub struct PowerOfTwo {
    rng: StreamRng,
}

impl PowerOfTwo {
    pub fn new(seed: u64) -> PowerOfTwo {
        PowerOfTwo {
            rng: stream(seed, "router"),
        }
    }
}

impl Router for PowerOfTwo {
    fn route(&mut self, _req: &Request, view: &FleetView) -> usize {
        let n = view.len();
        if n == 1 {
            return 0;
        }
        let a = self.rng.random_range(0..n);
        // A second, distinct candidate.
        let b = (a + 1 + self.rng.random_range(0..n - 1)) % n;
        if view.load(b).outstanding() < view.load(a).outstanding() {
            b
        } else {
            a
        }
    }

    fn scores(&mut self, _req: &Request, view: &FleetView, out: &mut Vec<f64>) {
        super::outstanding_scores(view, out);
    }

    fn score_meaning(&self) -> &'static str {
        "outstanding requests as last reported (the lower of two random replicas wins)"
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn never_picks_the_busier_of_its_two_candidates() {
        let mut reps = replicas(2);
        for id in 0..5 {
            reps[0].enqueue(id);
        }
        let view = FleetView::new(&reps, true);
        let mut r = PowerOfTwo::new(1);
        let req = request(&[], 0);
        // With two replicas both are always the candidates.
        assert!((0..100).all(|_| r.route(&req, &view) == 1));
    }

    #[test]
    fn spreads_load_far_better_than_random() {
        // 8 replicas, 4000 requests that never finish: the max load of
        // two choices stays near the mean; random's spread is wider.
        let max_load = |two: bool| {
            let mut reps = replicas(8);
            let mut view = FleetView::new(&reps, true);
            let req = request(&[], 0);
            let mut p2 = PowerOfTwo::new(9);
            let mut rnd = super::super::Random::new(9);
            for id in 0..4000 {
                let router: &mut dyn Router = if two { &mut p2 } else { &mut rnd };
                send(router, &req, &mut reps, &mut view, id);
            }
            reps.iter().map(|r| r.outstanding()).max().unwrap()
        };
        let (two, rnd) = (max_load(true), max_load(false));
        assert!(two <= 502, "two choices max load {two}");
        assert!(rnd > two + 10, "random {rnd} vs two choices {two}");
    }
}
