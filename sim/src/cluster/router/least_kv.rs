use super::Router;
use crate::cluster::view::FleetView;
use crate::request::Request;

/// Most free KV blocks: send to the replica with the most KV cache to spare
/// (vLLM production-stack's and AIBrix's KV-usage-aware routing; llm-d's
/// kv-cache-utilization scorer used alone). Ties go to the fewest
/// outstanding requests, then the lowest index, so an idle fleet is still
/// spread while reports show equal memory. O(1) per request.
#[derive(Debug, Default)]
pub struct LeastKv;

impl Router for LeastKv {
    fn route(&mut self, _req: &Request, view: &FleetView) -> usize {
        view.most_free_kv()
    }

    fn scores(&mut self, _req: &Request, view: &FleetView, out: &mut Vec<f64>) {
        out.clear();
        out.extend(view.loads().iter().map(|l| l.kv_free() as f64));
    }

    fn score_meaning(&self) -> &'static str {
        "free KV blocks as last reported (most wins; fewest outstanding on ties)"
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::time::SimTime;

    #[test]
    fn prefers_free_memory_over_short_queues() {
        let mut reps = replicas(2);
        let mut reqs: Vec<Request> = (0..3).map(|_| request(&[1, 2, 3, 4], 0)).collect();
        // Replica 0 runs one long prompt (KV in use); replica 1 has two
        // requests queued but no KV yet.
        reps[0].enqueue(0);
        reps[0].form_batch(SimTime::ZERO, &mut reqs);
        reps[1].enqueue(1);
        reps[1].enqueue(2);
        let mut view = FleetView::new(&reps, true);
        view.report(&reps);
        assert!(view.load(0).kv_active > 0);
        assert_eq!(LeastKv.route(&reqs[0], &view), 1);
    }
}
