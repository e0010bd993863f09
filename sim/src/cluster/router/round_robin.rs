use super::Router;
use crate::cluster::view::FleetView;
use crate::request::Request;

/// Round-robin: request k goes to replica k mod R, blind to load — the
/// default of Kubernetes Services and most L4 load balancers.
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

impl Router for RoundRobin {
    fn route(&mut self, _req: &Request, view: &FleetView) -> usize {
        let i = self.next % view.len();
        self.next = (i + 1) % view.len();
        i
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn cycles_through_replicas() {
        let reps = replicas(3);
        let view = FleetView::new(&reps, true);
        let mut r = RoundRobin::default();
        let req = request(&[], 0);
        let picks: Vec<usize> = (0..7).map(|_| r.route(&req, &view)).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2, 0]);
    }
}
