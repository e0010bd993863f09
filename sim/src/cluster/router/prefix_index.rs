//! The router's own approximate index of which replica has seen which prompt
//! prefix blocks: llm-d's approximate prefix-cache scorer (a per-pod LRU of
//! block hashes with a fixed capacity) and SGLang's cache-aware router (a
//! radix tree per worker, pruned to a size bound). A router cannot read the
//! replicas' real caches, so the index records what it *sent* where and
//! forgets the least recently routed blocks past its capacity; after the
//! replica evicts on its own the index is wrong, as in production.
//!
//! Block hashes are chained (a block's hash identifies the whole prefix up to
//! it), so a replica's match is the number of leading blocks it holds.
//!
//! The index works on runs of blocks, not blocks, as the prefix cache does:
//! the chains it was sent form one [`SegmentTree`] (the prefix cache's), a
//! routed prompt is one *run* (its chain from the root) per replica, and
//! each segment records, per replica, the run that last covered it and how
//! many of its leading blocks that replica has forgotten since. See
//! [`PrefixIndex`] for why that is exactly the per-block LRU set it replaced
//! (`prefix_index_reference`, which the tests compare it with).

use super::super::min_tree::MinTree;
use crate::kv::segment_tree::{SegmentTree, NONE};
use std::collections::VecDeque;

/// One replica's hold on a segment: blocks `lo..` of it, last routed to the
/// replica by run `run` (blocks `..lo` were forgotten since).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hold {
    replica: u32,
    run: u32,
    lo: u32,
}

/// What a segment carries: the replicas holding some of its blocks.
type Holds = Vec<Hold>;

/// One routed prompt: its chain from the root was sent to `replica`.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    /// The segment holding its last block (splits keep that block there).
    end: u32,
    /// Its blocks the replica still holds as this run's.
    live: u64,
}

/// Per-replica LRU sets of prefix-block hashes, with a cap in tokens
/// (llm-d's approximate prefix-cache scorer, SGLang's cache-aware router).
///
/// A replica's blocks are ordered by last routing: the blocks of one routed
/// prompt in chain order (root first), prompts in routing order; past the
/// cap the oldest go first. In runs:
/// - a routed prompt covers whole segments (the tree is split where the
///   prompt ends or leaves it), from the root, so every block of a segment a
///   replica holds was last routed there by the same run, and a run's
///   blocks are oldest nearest the root;
/// - forgetting takes the oldest run's remaining blocks root first, so what
///   a replica holds of a segment is always a tail `lo..`, and a run's live
///   blocks are a tail of its chain (a later run taking some of its blocks
///   takes every block above them too): the run's last segment holds its
///   last block for as long as the run holds anything;
/// - a replica matches a segment's leading blocks only when it holds the
///   whole segment (`lo == 0`).
///
/// So the per-replica LRU of runs (with stale runs skipped, as the block
/// queue skipped stale blocks) forgets the same blocks in the same order,
/// and the matches, block counts and smallest index are the same.
#[derive(Debug)]
pub struct PrefixIndex {
    tree: SegmentTree<Holds>,
    runs: Vec<Run>,
    free_runs: Vec<u32>,
    /// Per replica, its runs in routing order (dead ones are skipped).
    lru: Vec<VecDeque<u32>>,
    /// Live blocks per replica.
    blocks: Vec<u64>,
    /// Tokens the index remembers per replica, and per live block.
    capacity_tokens: u64,
    /// Tokens held per replica, smallest first (SGLang's "smallest tree").
    by_size: MinTree<u64>,
    /// Scratch: the segments of the chain being routed or forgotten.
    path: Vec<u32>,
    /// Scratch sets for the longest-match walk.
    cur: Vec<u32>,
    next: Vec<u32>,
}

/// Replicas holding every block of segment `n`.
#[inline]
fn whole_holders(tree: &SegmentTree<Holds>, n: u32) -> impl Iterator<Item = u32> + '_ {
    tree.data(n).iter().filter(|h| h.lo == 0).map(|h| h.replica)
}

impl PrefixIndex {
    pub fn new(replicas: usize, capacity_tokens: u64) -> PrefixIndex {
        PrefixIndex {
            tree: SegmentTree::default(),
            runs: Vec::new(),
            free_runs: Vec::new(),
            lru: vec![VecDeque::new(); replicas],
            blocks: vec![0; replicas],
            capacity_tokens: capacity_tokens.max(1),
            by_size: MinTree::new(vec![0; replicas]),
            path: Vec::new(),
            cur: Vec::new(),
            next: Vec::new(),
        }
    }

    /// The longest run of leading `hashes` one replica holds, and the
    /// replicas holding it (ascending index) in `out`. Stops where no
    /// remaining replica holds the next block: O(segments matched ×
    /// holders), plus a comparison per matched block.
    pub fn longest_match(&mut self, hashes: &[u64], out: &mut Vec<u32>) -> usize {
        out.clear();
        let PrefixIndex {
            tree, cur, next, ..
        } = self;
        cur.clear();
        let mut matched = 0;
        for s in tree.walk(hashes) {
            if s.start == 0 {
                cur.extend(whole_holders(tree, s.seg));
                cur.sort_unstable();
                if cur.is_empty() {
                    break;
                }
            } else {
                next.clear();
                next.extend(
                    cur.iter()
                        .copied()
                        .filter(|&r| whole_holders(tree, s.seg).any(|x| x == r)),
                );
                if next.is_empty() {
                    break;
                }
                std::mem::swap(cur, next);
            }
            matched = s.start + s.matched;
        }
        out.extend_from_slice(cur);
        matched
    }

    /// Leading blocks of `hashes` each replica holds, written into `out`
    /// (one entry per replica): the per-replica form of `longest_match`.
    pub fn match_lengths(&mut self, hashes: &[u64], out: &mut Vec<u32>) {
        out.clear();
        out.resize(self.lru.len(), 0);
        for s in self.tree.walk(hashes) {
            let mut any = false;
            for h in self.tree.data(s.seg) {
                if h.lo == 0 && out[h.replica as usize] == s.start as u32 {
                    out[h.replica as usize] += s.matched as u32;
                    any = true;
                }
            }
            if !any {
                break;
            }
        }
    }

    /// Splits segment `n` after its first `k` blocks; returns the new
    /// segment holding those (the rest keeps `n`, its children and the runs
    /// ending in it). A replica holding blocks `lo..` of `n` holds `lo..k`
    /// of the upper part (if `lo < k`) and the lower part from `lo − k`.
    fn split(&mut self, n: u32, k: usize) -> u32 {
        let k32 = k as u32;
        let holds = self.tree.data_mut(n);
        let upper: Holds = holds.iter().filter(|h| h.lo < k32).copied().collect();
        for h in holds.iter_mut() {
            h.lo = h.lo.saturating_sub(k32);
        }
        self.tree.split(n, k, upper)
    }

    /// Drops segment `n` if no replica holds any of it and nothing hangs
    /// from it, then its ancestors on the same terms.
    fn prune(&mut self, mut n: u32) {
        while n != NONE {
            if !self.tree.data(n).is_empty() || self.tree.children(n) > 0 {
                return;
            }
            let parent = self.tree.parent(n);
            self.tree.remove(n);
            n = parent;
        }
    }

    fn new_run(&mut self) -> u32 {
        match self.free_runs.pop() {
            Some(i) => i,
            None => {
                self.runs.push(Run::default());
                (self.runs.len() - 1) as u32
            }
        }
    }

    /// Fills `path` with the segments of `hashes`' chain, splitting and
    /// adding segments so that they hold exactly its blocks, and returns how
    /// many blocks they hold (fewer than `hashes` only when a hash appears
    /// under two different prefixes, which chained hashes never do).
    fn chain_path(&mut self, hashes: &[u64]) -> usize {
        let end = self.tree.path(hashes, &mut self.path);
        let mut parent = self.path.last().copied().unwrap_or(NONE);
        if end.inside > 0 {
            parent = self.split(parent, end.inside);
            let last = self.path.len() - 1;
            self.path[last] = parent;
        }
        if end.blocks == hashes.len() || self.tree.is_head(hashes[end.blocks]) {
            return end.blocks;
        }
        let n = self.tree.add(&hashes[end.blocks..], parent, Holds::new());
        self.path.push(n);
        hashes.len()
    }

    /// Records that `hashes` (blocks of `block_tokens` tokens) were sent to
    /// `replica`, making them its most recent, and forgets its least recently
    /// routed blocks beyond the capacity.
    pub fn insert(&mut self, replica: usize, hashes: &[u64], block_tokens: u32) {
        let r = replica as u32;
        if self.chain_path(hashes) > 0 {
            let run = self.new_run();
            let mut live = 0;
            for i in 0..self.path.len() {
                let n = self.path[i];
                let len = self.tree.len(n) as u32;
                live += len as u64;
                let holds = self.tree.data_mut(n);
                match holds.iter_mut().find(|h| h.replica == r) {
                    Some(h) => {
                        // Its held tail moves to this run; the forgotten
                        // head comes back.
                        self.runs[h.run as usize].live -= (len - h.lo) as u64;
                        self.blocks[replica] += h.lo as u64;
                        *h = Hold {
                            replica: r,
                            run,
                            lo: 0,
                        };
                    }
                    None => {
                        holds.push(Hold {
                            replica: r,
                            run,
                            lo: 0,
                        });
                        self.blocks[replica] += len as u64;
                    }
                }
            }
            let end = *self.path.last().expect("a chain of one block or more");
            self.runs[run as usize] = Run { end, live };
            self.lru[replica].push_back(run);
        }
        let cap_blocks = (self.capacity_tokens / block_tokens.max(1) as u64).max(1);
        while self.blocks[replica] > cap_blocks {
            let Some(&run) = self.lru[replica].front() else {
                debug_assert!(false, "live blocks belong to queued runs");
                break;
            };
            if self.runs[run as usize].live > 0 {
                self.forget(r, run, self.blocks[replica] - cap_blocks);
            }
            if self.runs[run as usize].live == 0 {
                self.lru[replica].pop_front();
                self.free_runs.push(run);
            }
        }
        // Drop dead runs once they outnumber the live blocks.
        let q = &mut self.lru[replica];
        if q.len() as u64 > 2 * self.blocks[replica] + 64 {
            let runs = &self.runs;
            let free = &mut self.free_runs;
            q.retain(|&x| {
                let keep = runs[x as usize].live > 0;
                if !keep {
                    free.push(x);
                }
                keep
            });
        }
        self.by_size
            .set(replica, self.blocks[replica] * block_tokens as u64);
    }

    /// Forgets up to `want` of replica `r`'s blocks of `run`, nearest the
    /// root first.
    fn forget(&mut self, r: u32, run: u32, mut want: u64) {
        self.path.clear();
        let mut n = self.runs[run as usize].end;
        while n != NONE {
            self.path.push(n);
            n = self.tree.parent(n);
        }
        for i in (0..self.path.len()).rev() {
            if want == 0 {
                break;
            }
            let n = self.path[i];
            let len = self.tree.len(n) as u32;
            let holds = self.tree.data_mut(n);
            let Some(at) = holds.iter().position(|h| h.replica == r && h.run == run) else {
                continue;
            };
            let h = &mut holds[at];
            let take = want.min((len - h.lo) as u64);
            h.lo += take as u32;
            want -= take;
            self.blocks[r as usize] -= take;
            self.runs[run as usize].live -= take;
            if h.lo == len {
                holds.swap_remove(at);
                // Only the run's last segment can be left bare.
                self.prune(n);
            }
        }
    }

    /// The replica whose index holds the fewest tokens (lowest index on ties).
    pub fn smallest(&self) -> usize {
        self.by_size.argmin()
    }

    /// Blocks the index remembers for `replica`.
    pub fn blocks(&self, replica: usize) -> u64 {
        self.blocks[replica]
    }

    /// Checks the bookkeeping (tests): the tree's shape, block counts and
    /// run sizes agree with the holds, and no bare segment is kept.
    #[cfg(test)]
    fn check(&self) -> Result<(), String> {
        self.tree.check()?;
        let mut blocks = vec![0u64; self.blocks.len()];
        let mut live = vec![0u64; self.runs.len()];
        for n in self.tree.segments() {
            let (holds, len) = (self.tree.data(n), self.tree.len(n));
            if holds.is_empty() && self.tree.children(n) == 0 {
                return Err(format!("segment {n} is bare and kept"));
            }
            for x in holds {
                if x.lo as usize >= len {
                    return Err(format!("segment {n}: an empty hold"));
                }
                let held = (len - x.lo as usize) as u64;
                blocks[x.replica as usize] += held;
                live[x.run as usize] += held;
            }
        }
        if blocks != self.blocks {
            return Err(format!("blocks {blocks:?}, recorded {:?}", self.blocks));
        }
        for q in &self.lru {
            for &x in q {
                if live[x as usize] != self.runs[x as usize].live {
                    return Err(format!("run {x}: live count out of date"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::prefix_index_reference::ReferenceIndex;
    use super::*;
    use crate::workload::prefix::chain_in_place;

    #[test]
    fn finds_the_longest_leading_match_and_its_holders() {
        let mut ix = PrefixIndex::new(3, 1000);
        ix.insert(0, &[1, 2, 3], 16);
        ix.insert(2, &[1, 2, 3, 4], 16);
        ix.insert(1, &[1, 9], 16);
        let mut out = Vec::new();
        assert_eq!(ix.longest_match(&[1, 2, 3, 4, 5], &mut out), 4);
        assert_eq!(out, vec![2]);
        assert_eq!(ix.longest_match(&[1, 2, 7], &mut out), 2);
        assert_eq!(out, vec![0, 2]);
        assert_eq!(ix.longest_match(&[8], &mut out), 0);
        assert!(out.is_empty());
        ix.match_lengths(&[1, 2, 3, 4, 5], &mut out);
        assert_eq!(out, vec![3, 1, 4]);
        assert_eq!(ix.smallest(), 1);
        ix.check().unwrap();
    }

    #[test]
    fn forgets_least_recently_routed_blocks_past_capacity() {
        // 4 blocks of 16 tokens per replica.
        let mut ix = PrefixIndex::new(1, 64);
        ix.insert(0, &[1, 2, 3], 16);
        ix.insert(0, &[1, 5], 16); // 1 refreshed; 2 is now the oldest
        ix.insert(0, &[6], 16);
        assert_eq!(ix.blocks(0), 4);
        let mut out = Vec::new();
        assert_eq!(ix.longest_match(&[1, 2], &mut out), 1, "2 was forgotten");
        assert_eq!(ix.longest_match(&[1, 5], &mut out), 2);
        // Many refreshes of one block leave the queue bounded.
        for _ in 0..1000 {
            ix.insert(0, &[1], 16);
        }
        assert!(ix.lru[0].len() < 200, "{}", ix.lru[0].len());
        assert_eq!(ix.blocks(0), 4);
        ix.check().unwrap();
    }

    /// Both indexes driven by the same operations.
    struct Both {
        fast: PrefixIndex,
        slow: ReferenceIndex,
        replicas: usize,
    }

    impl Both {
        fn same(&mut self, probe: &[u64]) -> Result<(), proptest::test_runner::TestCaseError> {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let m = self.fast.longest_match(probe, &mut a);
            let n = self.slow.longest_match(probe, &mut b);
            proptest::prop_assert_eq!((m, &a), (n, &b));
            self.fast.match_lengths(probe, &mut a);
            self.slow.match_lengths(probe, &mut b);
            proptest::prop_assert_eq!(&a, &b);
            proptest::prop_assert_eq!(self.fast.smallest(), self.slow.smallest());
            for r in 0..self.replicas {
                proptest::prop_assert_eq!(self.fast.blocks(r), self.slow.blocks(r));
            }
            proptest::prop_assert!(self.fast.check().is_ok(), "{:?}", self.fast.check());
            Ok(())
        }
    }

    /// A chained-hash prompt: `family`'s stem of `at` blocks, then branch
    /// `branch`, `len` blocks in all (chained, as every reader gives them).
    fn prompt(family: u64, branch: u64, at: usize, len: usize) -> Vec<u64> {
        let mut ids: Vec<u64> = (0..len as u64)
            .map(|i| {
                if (i as usize) < at {
                    family * 1000 + i
                } else {
                    family * 1000 + branch * 100 + i + 1
                }
            })
            .collect();
        chain_in_place(&mut ids);
        ids
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// The run-wise index makes the block-by-block reference's
        /// decisions: the same longest matches and holders, per-replica
        /// match lengths, block counts and smallest replica after every
        /// routed prompt, with capacities small enough that forgetting
        /// happens all the time.
        #[test]
        fn runs_match_the_per_block_reference(
            replicas in 1usize..5,
            cap_blocks in 1u64..40,
            ops in proptest::collection::vec(
                (0u64..3, 0u64..4, 0usize..12, 0usize..30, 0usize..5, 0u64..8),
                1..120,
            ),
        ) {
            let cap = cap_blocks * 16;
            let mut both = Both {
                fast: PrefixIndex::new(replicas, cap),
                slow: ReferenceIndex::new(replicas, cap),
                replicas,
            };
            for (family, branch, at, len, replica, probe) in ops {
                let p = prompt(family, branch, at, len);
                // Mostly 16-token blocks; sometimes 32 (half the capacity).
                let bt = if probe == 7 { 32 } else { 16 };
                both.fast.insert(replica % replicas, &p, bt);
                both.slow.insert(replica % replicas, &p, bt);
                both.same(&p)?;
                both.same(&prompt(probe % 3, probe % 4, at / 2, len + 3))?;
            }
        }
    }
}
