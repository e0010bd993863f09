//! Exact counts of (gap, tokens) pairs at cache speed, for the inter-token
//! histogram (`records::itl`).
//!
//! A run adds one pair per decode step (one gap for all the sequences of a
//! decode run) or a few per iteration (sequences whose previous tokens came
//! at different times), millions in all, and most of their gaps are new: an
//! iteration's duration depends on its batch's exact shape. Counting them in
//! one hash map of every distinct pair made each addition a random access
//! into megabytes (a cache miss per pair: 31 % of the Mooncake conversation
//! run's cycles). Here a pair is counted in a small open-addressing table
//! that stays in the L2 cache; when half its slots hold distinct pairs (a
//! load factor that keeps linear probes short) it is flushed as a sorted
//! run, and runs are merged, equal pairs summed, in the pattern of a
//! log-structured merge tree (O'Neil et al., "The log-structured
//! merge-tree", Acta Informatica 1996) or of Timsort's run stack: a run is
//! merged into the one below it while that one is at most twice its size,
//! so there are O(log n) runs and every pair is copied O(log n) times,
//! sequentially. Past [`MEM_MAX`] pairs in memory the runs
//! are merged into one and written to disk as a sorted run
//! (`records::spill`), so memory stays bounded whatever the run's length.
//! The counts read back are exactly those of counting every pair in one
//! map: only where they are kept changed.

use crate::records::spill::SpillSort;

/// Slots of the hot table (16 bytes each: 128 KiB, within an L2 cache).
const HOT_BITS: u32 = 13;

/// Pairs held in memory runs (24 bytes each: 3 MiB; a merge holds its
/// inputs, its output and one spare buffer, at most 12 MiB) before they
/// spill.
const MEM_MAX: usize = 1 << 17;

/// A distinct pair and how many times it occurred; ordered by gap, then
/// tokens (the histogram's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Count {
    pub gap: u64,
    pub tokens: u32,
    pub n: u64,
}

/// A count's pair as one integer, ordered as (gap, tokens).
#[inline]
fn key(c: &Count) -> u128 {
    (c.gap as u128) << 32 | c.tokens as u128
}

/// One hot-table slot (`tokens == 0`: empty; pairs without tokens are
/// never counted).
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    gap: u64,
    tokens: u32,
    n: u32,
}

/// The counts: a hot table, sorted runs in memory, sorted runs on disk.
#[derive(Debug)]
pub struct PairCounts {
    bits: u32,
    hot_max: usize,
    mem_max: usize,
    slots: Box<[Slot]>,
    /// Occupied slots, in the order they were taken.
    used: Vec<u32>,
    /// Sorted runs with distinct pairs, each more than half the size of the
    /// one below it.
    runs: Vec<Vec<Count>>,
    /// Pairs in `runs`.
    held: usize,
    /// A freed run's buffer, reused for the next merge (no fresh pages).
    spare: Vec<Count>,
    spilled: SpillSort<(u64, u64, u64)>,
}

impl Default for PairCounts {
    fn default() -> Self {
        PairCounts::with_limits(HOT_BITS, MEM_MAX)
    }
}

impl PairCounts {
    /// Counts with a hot table of 2^`bits` slots and at most `mem_max`
    /// pairs in memory runs (small limits let tests reach every path).
    pub fn with_limits(bits: u32, mem_max: usize) -> PairCounts {
        PairCounts {
            bits,
            hot_max: (1usize << bits) / 2,
            mem_max,
            slots: vec![Slot::default(); 1 << bits].into_boxed_slice(),
            used: Vec::new(),
            runs: Vec::new(),
            held: 0,
            spare: Vec::new(),
            spilled: SpillSort::default(),
        }
    }

    /// One occurrence of (`gap`, `tokens`); `tokens` must not be 0.
    #[inline]
    pub fn add(&mut self, gap: u64, tokens: u32) {
        debug_assert!(tokens > 0);
        let mask = (1usize << self.bits) - 1;
        let h = (gap ^ (tokens as u64).rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut i = (h >> (64 - self.bits)) as usize;
        loop {
            let s = &mut self.slots[i];
            if s.gap == gap && s.tokens == tokens {
                if s.n == u32::MAX {
                    // The slot's count is full: it goes to the runs.
                    self.flush();
                    return self.add(gap, tokens);
                }
                s.n += 1;
                return;
            }
            if s.tokens == 0 {
                *s = Slot { gap, tokens, n: 1 };
                self.used.push(i as u32);
                if self.used.len() >= self.hot_max {
                    self.flush();
                }
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Whether no pair was counted.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty() && self.held == 0 && self.spilled.is_empty()
    }

    /// Entries held in memory (hot table and runs; a pair may be in several).
    pub fn in_memory(&self) -> usize {
        self.used.len() + self.held
    }

    /// Runs written to disk so far (values, not runs).
    pub fn spilled(&self) -> usize {
        self.spilled.len()
    }

    /// The first error spilling to disk (the counts are then incomplete).
    pub fn error(&self) -> Option<&str> {
        self.spilled.error()
    }

    /// The hot table's pairs as a sorted run; the table is empty after.
    fn flush(&mut self) {
        if self.used.is_empty() {
            return;
        }
        let mut run = Vec::with_capacity(self.used.len());
        for &i in &self.used {
            let s = std::mem::take(&mut self.slots[i as usize]);
            run.push(Count {
                gap: s.gap,
                tokens: s.tokens,
                n: s.n as u64,
            });
        }
        self.used.clear();
        run.sort_unstable();
        self.push_run(run);
    }

    /// Adds a sorted run of distinct pairs, merging to keep each run more
    /// than twice the size of the one above it; spills past the bound.
    fn push_run(&mut self, mut run: Vec<Count>) {
        self.held += run.len();
        while let Some(below) = self.runs.last() {
            if below.len() > 2 * run.len() {
                break;
            }
            let below = self.runs.pop().expect("a run");
            run = self.merge(below, run);
        }
        self.runs.push(run);
        if self.held > self.mem_max {
            let all = self.merge_all();
            self.spilled
                .push_sorted_run(all.iter().map(|c| (c.gap, c.tokens as u64, c.n)));
            self.recycle(all);
        }
    }

    /// `a` and `b` merged, the counts of equal pairs summed.
    fn merge(&mut self, a: Vec<Count>, b: Vec<Count>) -> Vec<Count> {
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        out.reserve(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            // Without branches on the comparison (the pairs are new more
            // often than not, so a branch would be mispredicted half the
            // time): take the smaller, both when equal, and sum their counts.
            let (x, y) = (a[i], b[j]);
            let (kx, ky) = (key(&x), key(&y));
            let (take_x, take_y) = (kx <= ky, ky <= kx);
            let n = if take_x { x.n } else { 0 } + if take_y { y.n } else { 0 };
            let k = if take_x { x } else { y };
            out.push(Count { n, ..k });
            i += take_x as usize;
            j += take_y as usize;
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        self.held -= a.len() + b.len() - out.len();
        self.recycle(a);
        self.recycle(b);
        out
    }

    /// Keeps the larger of `v` and the spare buffer for the next merge.
    fn recycle(&mut self, v: Vec<Count>) {
        if v.capacity() > self.spare.capacity() {
            self.spare = v;
        }
    }

    /// Every run in memory merged into one (the runs are empty after).
    fn merge_all(&mut self) -> Vec<Count> {
        let mut all = self.runs.pop().unwrap_or_default();
        while let Some(below) = self.runs.pop() {
            all = self.merge(below, all);
        }
        self.held = 0;
        all
    }

    /// Every distinct pair with its total count, ascending by (gap, tokens).
    pub fn sorted(&mut self) -> Sorted<'_> {
        self.flush();
        let all = self.merge_all();
        if self.spilled.is_empty() {
            return Sorted::Memory(all);
        }
        self.spilled
            .push_sorted_run(all.iter().map(|c| (c.gap, c.tokens as u64, c.n)));
        Sorted::Spilled(&mut self.spilled)
    }
}

/// [`PairCounts::sorted`]'s pairs: one run in memory, or runs on disk
/// merged (a pair may then come several times, to be summed by the reader).
pub enum Sorted<'a> {
    Memory(Vec<Count>),
    Spilled(&'a mut SpillSort<(u64, u64, u64)>),
}

impl Sorted<'_> {
    pub fn is_empty(&self) -> bool {
        match self {
            Sorted::Memory(v) => v.is_empty(),
            Sorted::Spilled(s) => s.is_empty(),
        }
    }

    /// (gap, tokens, count) in ascending order (may be read again).
    pub fn iter(&mut self) -> Box<dyn Iterator<Item = (u64, u64, u64)> + '_> {
        match self {
            Sorted::Memory(v) => Box::new(v.iter().map(|c| (c.gap, c.tokens as u64, c.n))),
            Sorted::Spilled(s) => Box::new(s.sorted()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Each pair's total from `sorted`, equal pairs from several disk runs
    /// summed.
    fn totals(c: &mut PairCounts) -> BTreeMap<(u64, u32), u64> {
        let mut m = BTreeMap::new();
        let mut last = None;
        for (g, w, n) in c.sorted().iter() {
            let k = (g, w as u32);
            assert!(last.is_none_or(|l| l <= k), "not sorted");
            last = Some(k);
            *m.entry(k).or_insert(0) += n;
        }
        m
    }

    proptest! {
        /// Through every path (hot-table flushes, merges of runs, spills to
        /// disk and the merge of disk runs) the counts are those of a map
        /// counting each pair, in ascending order.
        #[test]
        fn counts_equal_a_map_through_flush_merge_and_spill(
            pairs in proptest::collection::vec((0u64..300, 1u32..4), 0..3000),
            bits in 2u32..6,
            mem_max in prop_oneof![Just(8usize), Just(64usize), Just(usize::MAX)],
        ) {
            let mut c = PairCounts::with_limits(bits, mem_max);
            let mut want = BTreeMap::new();
            for &(g, w) in &pairs {
                c.add(g * 1_000_003, w);
                *want.entry((g * 1_000_003, w)).or_insert(0u64) += 1;
            }
            prop_assert!(c.runs.windows(2).all(|r| r[0].len() > 2 * r[1].len()));
            prop_assert!(c.runs.iter().all(|r| r.windows(2).all(|p| (p[0].gap, p[0].tokens) < (p[1].gap, p[1].tokens))));
            prop_assert_eq!(c.is_empty(), pairs.is_empty());
            prop_assert_eq!(totals(&mut c), want);
            prop_assert!(c.error().is_none());
        }
    }

    #[test]
    fn memory_is_bounded_by_the_limits() {
        let mut c = PairCounts::with_limits(4, 100);
        for i in 0..10_000u64 {
            c.add(i, 1);
            assert!(c.in_memory() <= 100 + 8, "{} held", c.in_memory());
        }
        assert!(c.spilled() > 0);
        let t = totals(&mut c);
        assert_eq!(t.len(), 10_000);
        assert!(t.values().all(|&n| n == 1));
    }

    #[test]
    fn repeats_stay_in_the_hot_table() {
        let mut c = PairCounts::default();
        for _ in 0..100_000 {
            c.add(20_000_000, 3);
            c.add(31_000_000, 1);
        }
        assert_eq!(c.in_memory(), 2);
        let t = totals(&mut c);
        assert_eq!(t[&(20_000_000, 3)], 100_000);
        assert_eq!(t[&(31_000_000, 1)], 100_000);
    }
}
