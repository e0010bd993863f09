use super::Router;
use crate::cluster::view::FleetView;
use crate::request::Request;

/// Least outstanding requests: send to the replica with the fewest requests
/// queued or running (Envoy's and NGINX's `least_request`/`least_conn`,
/// the default of vLLM production-stack's and llm-d's simpler routers).
/// Ties go to the lowest index. O(1) per request: the view keeps the
/// least-loaded replica at the root of an indexed tree.
#[derive(Debug, Default)]
pub struct LeastOutstanding;

impl Router for LeastOutstanding {
    fn route(&mut self, _req: &Request, view: &FleetView) -> usize {
        view.least_outstanding()
    }

    fn scores(&mut self, _req: &Request, view: &FleetView, out: &mut Vec<f64>) {
        super::outstanding_scores(view, out);
    }

    fn score_meaning(&self) -> &'static str {
        "outstanding requests as last reported (lowest wins)"
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn picks_the_least_loaded_lowest_index_on_ties() {
        let mut reps = replicas(3);
        let mut view = FleetView::new(&reps, true);
        let mut r = LeastOutstanding;
        let req = request(&[], 0);
        assert_eq!(send(&mut r, &req, &mut reps, &mut view, 0), 0);
        assert_eq!(send(&mut r, &req, &mut reps, &mut view, 1), 1);
        assert_eq!(send(&mut r, &req, &mut reps, &mut view, 2), 2);
        reps[2].enqueue(3);
        view.observe(2, &reps[2]);
        assert_eq!(send(&mut r, &req, &mut reps, &mut view, 4), 0);
        assert_eq!(send(&mut r, &req, &mut reps, &mut view, 5), 1);
        assert_eq!(r.route(&req, &view), 0);
    }

    #[test]
    fn herds_onto_one_replica_between_load_reports() {
        let mut reps = replicas(4);
        let mut view = FleetView::new(&reps, false);
        let mut r = LeastOutstanding;
        let req = request(&[], 0);
        let picks: Vec<usize> = (0..5)
            .map(|i| send(&mut r, &req, &mut reps, &mut view, i))
            .collect();
        assert_eq!(picks, vec![0; 5], "stale reports: everything herds");
        view.report(&reps);
        assert_eq!(r.route(&req, &view), 1);
    }
}
