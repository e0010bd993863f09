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
//! The index works on runs of blocks, not blocks, as the prefix cache does
//! (`kv::prefix_cache`): the chains it was sent form one radix tree of
//! *segments* (runs of blocks with no branch inside), matched by comparing a
//! prompt's hashes with a segment's in order (one map probe per segment); a
//! routed prompt is one *run* (its chain from the root) per replica, and
//! each segment records, per replica, the run that last covered it and how
//! many of its leading blocks that replica has forgotten since. See
//! [`PrefixIndex`] for why that is exactly the per-block LRU set it replaced
//! (`prefix_index_reference`, which the tests compare it with).

use super::super::min_tree::MinTree;
use std::collections::VecDeque;

/// Segment heads: a segment's first block hash → segment. Keys are chained
/// hashes: foldhash, as in the prefix cache; never iterated.
type HeadIndex = std::collections::HashMap<u64, u32, foldhash::fast::FixedState>;

const NONE: u32 = u32::MAX;

/// One replica's hold on a segment: blocks `lo..` of it, last routed to the
/// replica by run `run` (blocks `..lo` were forgotten since).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hold {
    replica: u32,
    run: u32,
    lo: u32,
}

/// A run of blocks, each the only child of the one before it.
#[derive(Clone, Debug, Default)]
struct Segment {
    /// Its blocks' chained hashes, the one nearest the root first.
    hashes: Vec<u64>,
    /// The segment whose last block is this one's first block's parent.
    parent: u32,
    /// Segments hanging from its last block.
    children: u32,
    /// The replicas holding some of its blocks.
    holds: Vec<Hold>,
}

/// One routed prompt: its chain from the root was sent to `replica`.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    /// The segment holding its last block (splits keep that block there).
    end: u32,
    /// Its blocks the replica still holds as this run's.
    live: u64,
}

/// Per-replica LRU sets of prefix-block hashes, with a cap in tokens.
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
    segs: Vec<Segment>,
    free_segs: Vec<u32>,
    heads: HeadIndex,
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

/// Leading equal elements of two slices.
#[inline]
fn common_prefix(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl PrefixIndex {
    pub fn new(replicas: usize, capacity_tokens: u64) -> PrefixIndex {
        PrefixIndex {
            segs: Vec::new(),
            free_segs: Vec::new(),
            heads: HeadIndex::default(),
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

    /// The segment starting with `hash` below `parent`, if indexed.
    #[inline]
    fn child(&self, parent: u32, hash: u64) -> Option<u32> {
        self.heads
            .get(&hash)
            .copied()
            .filter(|&n| self.segs[n as usize].parent == parent)
    }

    /// Replicas holding every block of segment `n`.
    #[inline]
    fn whole_holders(&self, n: u32) -> impl Iterator<Item = u32> + '_ {
        self.segs[n as usize]
            .holds
            .iter()
            .filter(|h| h.lo == 0)
            .map(|h| h.replica)
    }

    /// The longest run of leading `hashes` one replica holds, and the
    /// replicas holding it (ascending index) in `out`. Stops where no
    /// remaining replica holds the next block: O(segments matched ×
    /// holders), plus a comparison per matched block.
    pub fn longest_match(&mut self, hashes: &[u64], out: &mut Vec<u32>) -> usize {
        out.clear();
        let Some(first) = hashes.first().and_then(|&h| self.child(NONE, h)) else {
            return 0;
        };
        let mut cur = std::mem::take(&mut self.cur);
        let mut next = std::mem::take(&mut self.next);
        cur.clear();
        cur.extend(self.whole_holders(first));
        cur.sort_unstable();
        let (mut n, mut matched) = (first, 0);
        while !cur.is_empty() {
            let seg = &self.segs[n as usize].hashes;
            let k = common_prefix(seg, &hashes[matched..]);
            matched += k;
            if k < seg.len() || matched == hashes.len() {
                break;
            }
            let Some(c) = self.child(n, hashes[matched]) else {
                break;
            };
            next.clear();
            next.extend(
                cur.iter()
                    .copied()
                    .filter(|&r| self.whole_holders(c).any(|x| x == r)),
            );
            if next.is_empty() {
                break;
            }
            std::mem::swap(&mut cur, &mut next);
            n = c;
        }
        if !cur.is_empty() {
            out.extend_from_slice(&cur);
        } else {
            matched = 0;
        }
        self.cur = cur;
        self.next = next;
        matched
    }

    /// Leading blocks of `hashes` each replica holds, written into `out`
    /// (one entry per replica): the per-replica form of `longest_match`.
    pub fn match_lengths(&mut self, hashes: &[u64], out: &mut Vec<u32>) {
        out.clear();
        out.resize(self.lru.len(), 0);
        let (mut pos, mut parent) = (0, NONE);
        while pos < hashes.len() {
            let Some(n) = self.child(parent, hashes[pos]) else {
                break;
            };
            let seg = &self.segs[n as usize];
            let k = common_prefix(&seg.hashes, &hashes[pos..]);
            let mut any = false;
            for h in &seg.holds {
                if h.lo == 0 && out[h.replica as usize] == pos as u32 {
                    out[h.replica as usize] += k as u32;
                    any = true;
                }
            }
            pos += k;
            if !any || k < seg.hashes.len() {
                break;
            }
            parent = n;
        }
    }

    /// A free segment slot (its buffers reused when recycled).
    fn alloc_seg(&mut self) -> u32 {
        match self.free_segs.pop() {
            Some(n) => n,
            None => {
                self.segs.push(Segment::default());
                (self.segs.len() - 1) as u32
            }
        }
    }

    /// Splits segment `n` after its first `k` blocks; returns the new
    /// segment holding those (the rest keeps `n`, its children and the runs
    /// ending in it). A replica holding blocks `lo..` of `n` holds `lo..k`
    /// of the upper part (if `lo < k`) and the lower part from `lo − k`.
    fn split(&mut self, n: u32, k: usize) -> u32 {
        let u = self.alloc_seg();
        let mut upper = std::mem::take(&mut self.segs[u as usize].hashes);
        let mut up_holds = std::mem::take(&mut self.segs[u as usize].holds);
        upper.clear();
        up_holds.clear();
        let seg = &mut self.segs[n as usize];
        debug_assert!(k > 0 && k < seg.hashes.len());
        upper.extend_from_slice(&seg.hashes[..k]);
        seg.hashes.drain(..k);
        let k32 = k as u32;
        for h in seg.holds.iter_mut() {
            if h.lo < k32 {
                up_holds.push(*h);
            }
            h.lo = h.lo.saturating_sub(k32);
        }
        let parent = std::mem::replace(&mut seg.parent, u);
        let lower_head = seg.hashes[0];
        let upper_head = upper[0];
        self.segs[u as usize] = Segment {
            hashes: upper,
            parent,
            children: 1,
            holds: up_holds,
        };
        self.heads.insert(upper_head, u);
        self.heads.insert(lower_head, n);
        u
    }

    /// Adds an unheld segment of `run` below `parent`.
    fn new_segment(&mut self, run: &[u64], parent: u32) -> u32 {
        let n = self.alloc_seg();
        let seg = &mut self.segs[n as usize];
        seg.hashes.clear();
        seg.hashes.extend_from_slice(run);
        seg.holds.clear();
        seg.parent = parent;
        seg.children = 0;
        self.heads.insert(run[0], n);
        if parent != NONE {
            self.segs[parent as usize].children += 1;
        }
        n
    }

    /// Drops segment `n` if no replica holds any of it and nothing hangs
    /// from it, then its ancestors on the same terms.
    fn prune(&mut self, mut n: u32) {
        while n != NONE {
            let s = &self.segs[n as usize];
            if !s.holds.is_empty() || s.children > 0 {
                return;
            }
            let (head, parent) = (s.hashes[0], s.parent);
            if self.heads.get(&head) == Some(&n) {
                self.heads.remove(&head);
            }
            self.free_segs.push(n);
            if parent != NONE {
                self.segs[parent as usize].children -= 1;
            }
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
        self.path.clear();
        let (mut pos, mut parent) = (0, NONE);
        while pos < hashes.len() {
            match self.child(parent, hashes[pos]) {
                Some(mut n) => {
                    let len = self.segs[n as usize].hashes.len();
                    let k = common_prefix(&self.segs[n as usize].hashes, &hashes[pos..]);
                    if k < len {
                        n = self.split(n, k);
                    }
                    self.path.push(n);
                    pos += k;
                    parent = n;
                }
                None if self.heads.contains_key(&hashes[pos]) => break,
                None => {
                    let n = self.new_segment(&hashes[pos..], parent);
                    self.path.push(n);
                    pos = hashes.len();
                }
            }
        }
        pos
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
                let seg = &mut self.segs[n as usize];
                let len = seg.hashes.len() as u32;
                live += len as u64;
                match seg.holds.iter_mut().find(|h| h.replica == r) {
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
                        seg.holds.push(Hold {
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
            n = self.segs[n as usize].parent;
        }
        for i in (0..self.path.len()).rev() {
            if want == 0 {
                break;
            }
            let n = self.path[i];
            let seg = &mut self.segs[n as usize];
            let len = seg.hashes.len() as u32;
            let Some(at) = seg
                .holds
                .iter()
                .position(|h| h.replica == r && h.run == run)
            else {
                continue;
            };
            let h = &mut seg.holds[at];
            let take = want.min((len - h.lo) as u64);
            h.lo += take as u32;
            want -= take;
            self.blocks[r as usize] -= take;
            self.runs[run as usize].live -= take;
            if h.lo == len {
                seg.holds.swap_remove(at);
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

    /// Checks the bookkeeping (tests): block counts, run sizes, children
    /// counts and the head map agree with the segments.
    #[cfg(test)]
    fn check(&self) -> Result<(), String> {
        let mut blocks = vec![0u64; self.blocks.len()];
        let mut live = vec![0u64; self.runs.len()];
        let mut children = vec![0u32; self.segs.len()];
        for (&h, &n) in &self.heads {
            let s = &self.segs[n as usize];
            if s.hashes.first() != Some(&h) {
                return Err(format!("segment {n} filed under the wrong hash"));
            }
            if s.holds.is_empty() && s.children == 0 {
                return Err(format!("segment {n} is bare and kept"));
            }
            for x in &s.holds {
                if x.lo as usize >= s.hashes.len() {
                    return Err(format!("segment {n}: an empty hold"));
                }
                let held = (s.hashes.len() - x.lo as usize) as u64;
                blocks[x.replica as usize] += held;
                live[x.run as usize] += held;
            }
            if s.parent != NONE {
                children[s.parent as usize] += 1;
            }
        }
        for &n in self.heads.values() {
            if children[n as usize] != self.segs[n as usize].children {
                return Err(format!("segment {n}: children count out of date"));
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
