use super::Router;
use crate::replica::Replica;

/// Round-robin: request k goes to replica k mod R, blind to load — the
/// default of Kubernetes Services and most L4 load balancers.
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

impl Router for RoundRobin {
    fn route(&mut self, replicas: &[Replica]) -> usize {
        let i = self.next % replicas.len();
        self.next = (i + 1) % replicas.len();
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::EngineCfg;

    #[test]
    fn cycles_through_replicas() {
        let reps: Vec<Replica> = (0..3)
            .map(|i| Replica::new(i, &EngineCfg::default(), 10, 1024.0, 0))
            .collect();
        let mut r = RoundRobin::default();
        let picks: Vec<usize> = (0..7).map(|_| r.route(&reps)).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2, 0]);
    }
}
