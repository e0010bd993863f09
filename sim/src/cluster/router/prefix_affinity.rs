use super::prefix_index::PrefixIndex;
use super::{prompt_hashes, Router};
use crate::cluster::view::FleetView;
use crate::request::Request;
use crate::scenario::PrefixAffinityCfg;

/// Cache-aware routing with a load bound: SGLang's router (`cache_aware`
/// policy, SGLang v0.4 "cache-aware load balancer", 2024) and llm-d's
/// approximate prefix-cache scorer. The router keeps its own
/// [`PrefixIndex`] of the prompt blocks it sent to each replica and
///
/// 1. sends a request whose longest indexed match covers at least
///    `cache_threshold` of its prompt blocks to the replica holding that
///    match (the least loaded of them on ties); otherwise to the replica
///    whose index holds the least (SGLang's "smallest tree": the most room
///    to cache something new);
/// 2. unless that replica's outstanding requests exceed the least-loaded
///    replica's by more than `balance_abs_threshold` *and* by more than the
///    factor `balance_rel_threshold`: then the request goes to the
///    least-loaded replica instead (SGLang's imbalance test), so one hot
///    prefix cannot pile its whole traffic onto one replica.
///
/// Per request: a map probe per matched segment of the index (a run of
/// blocks without a branch), a comparison per matched block, and O(log N).
#[derive(Debug)]
pub struct PrefixAffinity {
    index: PrefixIndex,
    cfg: PrefixAffinityCfg,
    holders: Vec<u32>,
}

impl PrefixAffinity {
    pub fn new(cfg: &PrefixAffinityCfg, replicas: usize, kv_tokens: u64) -> PrefixAffinity {
        PrefixAffinity {
            index: PrefixIndex::new(replicas, cfg.index_tokens_per_replica.unwrap_or(kv_tokens)),
            cfg: cfg.clone(),
            holders: Vec::new(),
        }
    }

    /// The load bound: is `chosen` too much busier than the least loaded?
    fn overloaded(&self, chosen: u32, least: u32) -> bool {
        self.cfg.load_bound
            && chosen > least.saturating_add(self.cfg.balance_abs_threshold)
            && chosen as f64 > least as f64 * self.cfg.balance_rel_threshold
    }
}

impl Router for PrefixAffinity {
    fn route(&mut self, req: &Request, view: &FleetView) -> usize {
        let hashes = prompt_hashes(req);
        if hashes.is_empty() {
            // Nothing to match or to remember (no prefix structure, or a
            // prompt shorter than a block): plain load balancing.
            return view.least_outstanding();
        }
        let matched = self.index.longest_match(hashes, &mut self.holders);
        let cache_choice =
            if matched > 0 && matched as f64 >= self.cfg.cache_threshold * hashes.len() as f64 {
                // Holders are in ascending index: the first of the least loaded.
                let mut best = self.holders[0] as usize;
                for &h in &self.holders[1..] {
                    if view.load(h as usize).outstanding() < view.load(best).outstanding() {
                        best = h as usize;
                    }
                }
                best
            } else {
                self.index.smallest()
            };
        let least = view.least_outstanding();
        let chosen = if self.overloaded(
            view.load(cache_choice).outstanding(),
            view.load(least).outstanding(),
        ) {
            least
        } else {
            cache_choice
        };
        self.index
            .insert(chosen, hashes, req.hash_block_tokens.max(1));
        chosen
    }

    fn scores(&mut self, req: &Request, view: &FleetView, out: &mut Vec<f64>) {
        let hashes = prompt_hashes(req);
        self.index.match_lengths(hashes, &mut self.holders);
        out.clear();
        out.extend(self.holders.iter().map(|&m| m as f64));
        out.resize(view.len(), 0.0);
    }

    fn score_meaning(&self) -> &'static str {
        "prompt blocks matched in the router's prefix index (longest wins, within the load bound)"
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    fn router(load_bound: bool) -> PrefixAffinity {
        let cfg = PrefixAffinityCfg {
            balance_abs_threshold: 4,
            load_bound,
            ..Default::default()
        };
        PrefixAffinity::new(&cfg, 3, 1 << 20)
    }

    #[test]
    fn follows_the_longest_prefix_and_spreads_new_ones() {
        let mut reps = replicas(3);
        let mut view = FleetView::new(&reps, true);
        let mut r = router(true);
        let a = send(&mut r, &request(&[1, 2, 3, 4], 0), &mut reps, &mut view, 0);
        // New prefixes go to the emptiest index: a different replica each.
        let b = send(&mut r, &request(&[7, 8, 9], 0), &mut reps, &mut view, 1);
        let c = send(&mut r, &request(&[20, 21], 0), &mut reps, &mut view, 2);
        assert_eq!([a, b, c], [0, 1, 2]);
        // A continuation of the first conversation returns to its replica.
        assert_eq!(r.route(&request(&[1, 2, 3, 4, 5, 6], 0), &view), a);
        assert_eq!(r.route(&request(&[7, 8, 9, 10], 0), &view), b);
        // A prompt without prefix blocks goes to the least loaded.
        reps[0].enqueue(99);
        view.observe(0, &reps[0]);
        assert_eq!(r.route(&request(&[], 0), &view), 1);
        // A match under 30 % of the prompt does not count.
        assert_ne!(r.route(&request(&[1, 30, 31, 32, 33, 34], 0), &view), a);
    }

    #[test]
    fn the_load_bound_sends_a_hot_prefix_elsewhere_and_off_it_herds() {
        for bound in [true, false] {
            let mut reps = replicas(3);
            let mut view = FleetView::new(&reps, true);
            let mut r = router(bound);
            let hot = request(&[1, 2, 3, 4], 0);
            let picks: Vec<usize> = (0..12)
                .map(|id| send(&mut r, &hot, &mut reps, &mut view, id))
                .collect();
            if bound {
                // 5 on the hot replica (exceeds 0 + 4), then the others fill.
                assert_eq!(&picks[..6], &[0, 0, 0, 0, 0, 1]);
                assert!(reps.iter().all(|x| x.outstanding() <= 6), "{picks:?}");
            } else {
                assert_eq!(picks, vec![0; 12]);
            }
        }
    }
}
