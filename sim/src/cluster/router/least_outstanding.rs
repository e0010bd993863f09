use super::Router;
use crate::replica::Replica;

/// Least outstanding requests: send to the replica with the fewest requests
/// queued or running (Envoy's and NGINX's `least_request`/`least_conn`,
/// the default of vLLM production-stack's and llm-d's simpler routers).
/// Ties go to the lowest index.
#[derive(Debug, Default)]
pub struct LeastOutstanding;

impl Router for LeastOutstanding {
    fn route(&mut self, replicas: &[Replica]) -> usize {
        let mut best = 0;
        let mut best_load = usize::MAX;
        for (i, r) in replicas.iter().enumerate() {
            let load = r.outstanding();
            if load < best_load {
                best = i;
                best_load = load;
                if load == 0 {
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::EngineCfg;

    #[test]
    fn picks_the_least_loaded_lowest_index_on_ties() {
        let mut reps: Vec<Replica> = (0..3)
            .map(|i| Replica::new(i, &EngineCfg::default(), 10, 1024.0, 0))
            .collect();
        let mut r = LeastOutstanding;
        assert_eq!(r.route(&reps), 0);
        reps[0].enqueue(0);
        reps[1].enqueue(1);
        assert_eq!(r.route(&reps), 2);
        reps[2].enqueue(2);
        reps[2].enqueue(3);
        assert_eq!(r.route(&reps), 0);
    }
}
