use super::prefix_index::PrefixIndex;
use super::{prompt_hashes, Router};
use crate::cluster::view::FleetView;
use crate::request::Request;
use crate::scenario::WeightedCfg;

/// A weighted sum of scorers, each in [0, 1] with higher better, as llm-d's
/// inference scheduler combines its plugins (`prefix-cache-scorer`,
/// `queue-scorer`, `kv-cache-utilization-scorer`, weights from its config):
///
/// - prefix: matched fraction of the prompt's blocks in the router's own
///   [`PrefixIndex`];
/// - queue: (max − q) / (max − min) of the replicas' outstanding requests
///   (1 for all when they are equal);
/// - kv: 1 − the replica's KV-cache use.
///
/// The highest total wins (lowest index on ties). Like llm-d it scores every
/// replica: O(N) per request.
#[derive(Debug)]
pub struct Weighted {
    index: PrefixIndex,
    w: WeightedCfg,
    matched: Vec<u32>,
}

impl Weighted {
    pub fn new(cfg: &WeightedCfg, replicas: usize, kv_tokens: u64) -> Weighted {
        Weighted {
            index: PrefixIndex::new(replicas, kv_tokens),
            w: cfg.clone(),
            matched: Vec::new(),
        }
    }
}

impl Weighted {
    /// Every replica's weighted score for a prompt of `hashes`, in turn.
    fn each_score<'a>(
        &'a mut self,
        hashes: &[u64],
        view: &'a FleetView,
    ) -> impl Iterator<Item = f64> + 'a {
        self.index.match_lengths(hashes, &mut self.matched);
        let loads = view.loads();
        let qmin = loads.iter().map(|l| l.outstanding()).min().unwrap_or(0);
        let qmax = loads.iter().map(|l| l.outstanding()).max().unwrap_or(0);
        let blocks = hashes.len().max(1) as f64;
        let (w, matched) = (&self.w, &self.matched);
        loads.iter().enumerate().map(move |(i, l)| {
            let queue = if qmax > qmin {
                (qmax - l.outstanding()) as f64 / (qmax - qmin) as f64
            } else {
                1.0
            };
            w.prefix * matched[i] as f64 / blocks + w.queue * queue + w.kv * (1.0 - l.kv_use())
        })
    }
}

impl Router for Weighted {
    fn route(&mut self, req: &Request, view: &FleetView) -> usize {
        let hashes = prompt_hashes(req);
        let mut best = (f64::NEG_INFINITY, 0usize);
        for (i, score) in self.each_score(hashes, view).enumerate() {
            if score > best.0 {
                best = (score, i);
            }
        }
        self.index
            .insert(best.1, hashes, req.hash_block_tokens.max(1));
        best.1
    }

    fn scores(&mut self, req: &Request, view: &FleetView, out: &mut Vec<f64>) {
        out.clear();
        let hashes = prompt_hashes(req);
        out.extend(self.each_score(hashes, view));
    }

    fn score_meaning(&self) -> &'static str {
        "weighted sum of prefix match, queue and KV scorers (highest wins)"
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn weights_trade_prefix_reuse_against_queue_length() {
        let run = |prefix: f64| {
            let mut reps = replicas(2);
            let mut view = FleetView::new(&reps, true);
            let cfg = WeightedCfg {
                prefix,
                queue: 1.0,
                kv: 0.0,
            };
            let mut r = Weighted::new(&cfg, 2, 1 << 20);
            let conv = request(&[1, 2, 3, 4], 0);
            let first = send(&mut r, &conv, &mut reps, &mut view, 0);
            assert_eq!(first, 0);
            // Replica 0 now has 1 outstanding, replica 1 none.
            r.route(&request(&[1, 2, 3, 4, 5], 0), &view)
        };
        // Match 4/5 × 2 = 1.6 + queue 0 beats 0 + queue 1: stay.
        assert_eq!(run(2.0), 0);
        // Match 4/5 × 1 = 0.8 < 1: the shorter queue wins.
        assert_eq!(run(1.0), 1);
    }
}
