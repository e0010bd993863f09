//! Inter-token latencies as an exact weighted histogram.
//!
//! Every decode iteration yields (gap, tokens) pairs: the time its tokens
//! waited since their sequence's previous token, and how many tokens waited
//! that long. Keeping every pair to the end would take 16 bytes per
//! iteration (3.3 GB for the 1,000-replica autoscaled day of
//! docs/autoscaling.md), and even the distinct pairs are many (the
//! Mooncake conversation trace on 16-token blocks: 2.31 M pairs, 355 k
//! distinct). The summary needs far less: the total weight, the
//! largest gap and the weighted sum are kept as the gaps come, exactly (the
//! sum in a u128), and each quantile is the smallest gap whose cumulative
//! token weight reaches its rank, found in the one log-linear bucket that
//! holds the rank (`records::gap_log`, HdrHistogram's index, Tene,
//! HdrHistogram, with exact per-bucket weights and the bucket's exact gaps).
//! No precision is traded away: [`ItlHistogram::dist`] gives the same
//! [`Dist`] as [`Dist::of_weighted`] over the full list, bit for bit,
//! whenever the weighted sum of gaps is below 2^53 ns (about 104 days of
//! summed token gaps: every example scenario and test). Then every partial
//! sum of the list's float addition is an exact integer, so one conversion
//! of the exact integer sum gives the same bits; beyond it the list's
//! running float sum rounds at each step and this mean is the more exact
//! (the exact sum rounded once).

use crate::records::gap_log::GapLog;
use crate::records::pair_counts::PairCounts;
use crate::stats::Dist;
use crate::time::{nanos_to_ms, Nanos};

/// Pairs collected before they are counted or filed together (16 bytes
/// each: 16 KiB, within an L1 cache). One decode step adds one pair; a
/// batch loop keeps the filing's state in registers instead of paying a
/// call per pair.
const BATCH: usize = 1 << 10;

/// Batches filed straight into the gap log after a hot-table window whose
/// hit rate was too low (then the hot table is tried again).
const BYPASS_BATCHES: u32 = 64;

/// The least share of a hot-table window's additions, in 256ths, that must
/// be repeats of a gap in the window for the table to be kept. A repeat
/// (about 12 instructions) saves filing an entry (about 50, counting its
/// spill and its reading back), a new gap costs its probe, slot and drain
/// (about 30) on top of it; below about half repeats the table costs more
/// than it saves.
const MIN_HITS_PER_256: u64 = 128;

/// The inter-token histogram; see the module comment. The counting itself
/// (`records::pair_counts`) keeps its working set in the L2 cache, and the
/// gaps it drains are filed by bucket with memory bounded (`records::gap_log`,
/// spilling to disk beyond the bound); the result is exact either way.
///
/// The hot table only pays where gaps repeat within its window (cost models
/// with few distinct iteration times); where almost every gap is new (the
/// Mooncake conversation run: 2.2 M new in 2.4 M) each window's hit rate is
/// measured when the table fills, and a low one sends the next
/// [`BYPASS_BATCHES`] batches straight to the gap log. Either way every
/// token is filed once.
#[derive(Debug)]
pub struct ItlHistogram {
    /// Pairs not yet counted (tokens > 0): the first `pending_len` (a
    /// fixed buffer: adding a pair makes no call).
    pending: Box<[(Nanos, u32)]>,
    pending_len: usize,
    hot: PairCounts,
    /// The hot table's gaps on their way to the gap log (kept for the next
    /// drain).
    drained: Vec<(Nanos, u32)>,
    gaps: GapLog,
    /// Tokens filed.
    total: u64,
    /// Sum of gap × tokens (exact).
    sum: u128,
    max: u64,
    /// Batches left to file straight into the gap log.
    direct: u32,
    /// Additions to the hot table since its last drain.
    hot_adds: u64,
    /// [`BYPASS_BATCHES`] and [`MIN_HITS_PER_256`] (small in tests, with
    /// a smaller batch than [`BATCH`]).
    bypass: u32,
    min_hits_per_256: u64,
}

impl Default for ItlHistogram {
    fn default() -> Self {
        ItlHistogram {
            pending: vec![(0, 0); BATCH].into_boxed_slice(),
            pending_len: 0,
            hot: PairCounts::default(),
            drained: Vec::new(),
            gaps: GapLog::default(),
            total: 0,
            sum: 0,
            max: 0,
            direct: 0,
            hot_adds: 0,
            bypass: BYPASS_BATCHES,
            min_hits_per_256: MIN_HITS_PER_256,
        }
    }
}

impl ItlHistogram {
    /// Adds one iteration's pairs (pairs with no tokens are ignored, as
    /// [`Dist::of_weighted`] ignores them).
    #[inline]
    pub fn add_all(&mut self, pairs: &[(Nanos, u32)]) {
        for &(gap, w) in pairs {
            self.add(gap, w);
        }
    }

    /// Adds `w` tokens that waited `gap` (none: ignored).
    #[inline]
    pub fn add(&mut self, gap: Nanos, w: u32) {
        if w > 0 {
            self.pending[self.pending_len] = (gap, w);
            self.pending_len += 1;
            if self.pending_len == self.pending.len() {
                self.flush();
            }
        }
    }

    /// Counts the pending pairs in the hot table, or files them straight
    /// into the gap log while the table is bypassed.
    #[inline(never)]
    fn flush(&mut self) {
        // Taken out for the loop (a drain needs the whole histogram).
        let buffer = std::mem::take(&mut self.pending);
        let pending = &buffer[..self.pending_len];
        self.pending_len = 0;
        if self.direct > 0 {
            self.direct -= 1;
            self.file_all(pending);
        } else {
            for &(gap, w) in pending {
                self.hot_adds += 1;
                if self.hot.add(gap, w) {
                    self.drain_full();
                }
            }
        }
        self.pending = buffer;
    }

    /// The hot table is full: decides from its window's hit rate whether
    /// the next batches bypass it, and drains it.
    #[inline(never)]
    fn drain_full(&mut self) {
        let hits = self.hot_adds - self.hot.len() as u64;
        if hits * 256 < self.hot_adds * self.min_hits_per_256 {
            self.direct = self.bypass;
        }
        self.drain();
    }

    /// Moves the hot table's gaps into the statistics and the gap log.
    fn drain(&mut self) {
        let mut drained = std::mem::take(&mut self.drained);
        drained.clear();
        self.hot.drain(|gap, mut tokens| {
            // More than 2^32 - 1 tokens on one gap since the last drain:
            // several entries (quantiles sum them).
            while tokens > u32::MAX as u64 {
                drained.push((gap, u32::MAX));
                tokens -= u32::MAX as u64;
            }
            drained.push((gap, tokens as u32));
        });
        self.file_all(&drained);
        self.drained = drained;
        self.hot_adds = 0;
    }

    /// Files (gap, tokens > 0) pairs into the statistics and the gap log.
    fn file_all(&mut self, pairs: &[(Nanos, u32)]) {
        // The statistics in registers for the loop.
        let (mut total, mut sum, mut max) = (self.total, self.sum, self.max);
        self.gaps.file_all(pairs, |gap, w| {
            total += w as u64;
            sum += gap as u128 * w as u128;
            max = max.max(gap);
        });
        (self.total, self.sum, self.max) = (total, sum, max);
    }

    /// The first error spilling gaps to disk.
    pub fn error(&self) -> Option<&str> {
        self.gaps.error()
    }

    /// Entries held in memory (the pending pairs, the hot table's and the
    /// gap log's).
    pub fn in_memory(&self) -> usize {
        self.pending_len + self.hot.len() + self.gaps.in_memory()
    }

    /// Bytes held in memory (the structure's size).
    pub fn memory_bytes(&self) -> usize {
        (self.pending.len() + self.drained.capacity()) * std::mem::size_of::<(Nanos, u32)>()
            + self.hot.memory_bytes()
            + self.gaps.memory_bytes()
    }

    /// The distribution [`Dist::of_weighted`] gives for the same pairs (see
    /// the module comment for the mean past 2^53 ns).
    pub fn dist(&mut self) -> Dist {
        self.flush();
        self.drain();
        if self.total == 0 {
            return Dist::default();
        }
        const QS: [f64; 4] = [0.50, 0.90, 0.95, 0.99];
        let targets = QS.map(|q| (q * self.total as f64).ceil().max(1.0) as u64);
        let found = self.gaps.select(&targets);
        let q = |k: usize| nanos_to_ms(found[k].unwrap_or(self.max));
        Dist {
            count: self.total,
            mean: self.sum as f64 / self.total as f64 / 1e6,
            p50: q(0),
            p90: q(1),
            p95: q(2),
            p99: q(3),
            max: nanos_to_ms(self.max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A histogram with small limits: the hot table drains, the gap log
    /// spills and the selection narrows, all many times over.
    fn small(bits: u32, log_max: usize, select_max: usize) -> ItlHistogram {
        ItlHistogram {
            hot: PairCounts::with_bits(bits),
            gaps: GapLog::with_limits(log_max, select_max),
            ..Default::default()
        }
    }

    /// `small` counting `batch` pairs at once and bypassing the hot table
    /// for `bypass` batches after a window with fewer than
    /// `min_hits_per_256` repeats.
    fn bypassing(
        (bits, log_max, select_max, batch, bypass, min_hits_per_256): (
            u32,
            usize,
            usize,
            usize,
            u32,
            u64,
        ),
    ) -> ItlHistogram {
        ItlHistogram {
            pending: vec![(0, 0); batch].into_boxed_slice(),
            bypass,
            min_hits_per_256,
            ..small(bits, log_max, select_max)
        }
    }

    fn assert_same(a: &Dist, b: &Dist) {
        assert_eq!(a.count, b.count);
        for (x, y) in [
            (a.mean, b.mean),
            (a.p50, b.p50),
            (a.p90, b.p90),
            (a.p95, b.p95),
            (a.p99, b.p99),
            (a.max, b.max),
        ] {
            assert_eq!(x.to_bits(), y.to_bits(), "{a:?} vs {b:?}");
        }
    }

    proptest! {
        /// The histogram's summary equals the list's, field for field, bit
        /// for bit (values drawn from few gaps and weights, so pairs repeat),
        /// through every path: drains, bypasses of the hot table (always
        /// after a window, or after one with few repeats), spills and
        /// narrowed selections.
        #[test]
        fn histogram_equals_the_full_list(
            iters in proptest::collection::vec(
                proptest::collection::vec((0u64..40, 0u32..5), 0..6), 0..200),
            scale in prop_oneof![Just(1u64), Just(1_000_003u64), Just(3_000_000_007u64)],
            limits in prop_oneof![
                Just((13u32, LOG_MAX_DEFAULT, SELECT_MAX_DEFAULT, BATCH, BYPASS_BATCHES,
                      MIN_HITS_PER_256)),
                Just((2u32, 3usize, 2usize, 1usize, BYPASS_BATCHES, 0)),
                Just((3u32, 16usize, 1usize, 5usize, BYPASS_BATCHES, 0)),
                Just((2u32, 3usize, 2usize, 3usize, 5, 257)),
                Just((3u32, 16usize, 1usize, 2usize, 7, MIN_HITS_PER_256)),
                Just((1u32, 5usize, 3usize, 1usize, 1, MIN_HITS_PER_256)),
            ],
        ) {
            let mut h = bypassing(limits);
            let mut all = Vec::new();
            for it in &iters {
                let pairs: Vec<(Nanos, u32)> = it.iter().map(|&(g, w)| (g * scale, w)).collect();
                h.add_all(&pairs);
                all.extend_from_slice(&pairs);
            }
            let a = h.dist();
            let b = Dist::of_weighted(all);
            prop_assert_eq!(a.count, b.count);
            for (x, y) in [(a.mean, b.mean), (a.p50, b.p50), (a.p90, b.p90),
                           (a.p95, b.p95), (a.p99, b.p99), (a.max, b.max)] {
                prop_assert_eq!(x.to_bits(), y.to_bits());
            }
            prop_assert!(h.error().is_none());
        }
    }

    const LOG_MAX_DEFAULT: usize = crate::records::gap_log::LOG_MAX;
    const SELECT_MAX_DEFAULT: usize = crate::records::gap_log::SELECT_MAX;

    #[test]
    fn spilled_gaps_give_the_same_summary() {
        let mut h = small(5, 2_000, 300);
        let mut all = Vec::new();
        for i in 0..60_000u64 {
            // Distinct gaps, then the same gaps again in a later run.
            let pairs = [((i * 7919) % 40_009 * 1000, (i % 3) as u32 + 1)];
            h.add_all(&pairs);
            all.extend_from_slice(&pairs);
            assert!(h.in_memory() <= 2_000 + 16 + BATCH);
        }
        assert!(h.gaps.spilled_runs() > 10);
        assert_same(&h.dist(), &Dist::of_weighted(all));
    }

    #[test]
    fn new_gaps_bypass_the_hot_table_and_repeats_bring_it_back() {
        // 8 gaps fill the table; 4 pairs a batch; 5 batches bypass it.
        let mut h = bypassing((4, 1_000, 100, 4, 5, MIN_HITS_PER_256));
        let mut all = Vec::new();
        let mut add = |h: &mut ItlHistogram, gap: u64, w: u32| {
            h.add(gap, w);
            all.push((gap, w));
        };
        // 8 distinct gaps fill the table with no repeat: bypass.
        for i in 0..8 {
            add(&mut h, 1_000 + i, 1);
        }
        assert_eq!((h.direct, h.hot.len(), h.in_memory()), (5, 0, 8));
        for i in 0..20 {
            add(&mut h, 2_000 + i, 2);
        }
        assert_eq!((h.direct, h.hot.len(), h.in_memory()), (0, 0, 28));
        // Repeats: the table keeps them, and stays.
        for i in 0..400 {
            add(&mut h, 3_000 + i % 3, 1);
        }
        assert_eq!((h.direct, h.hot.len()), (0, 3));
        assert_eq!(h.in_memory(), 3 + 8 + 20);
        assert_same(&h.dist(), &Dist::of_weighted(all));
    }

    #[test]
    fn more_tokens_on_a_gap_than_an_entry_holds_are_split() {
        let mut h = small(4, 3, 2);
        let pairs = [(7_000, u32::MAX), (9_000, 5), (7_000, u32::MAX), (7_000, 9)];
        for _ in 0..3 {
            h.add_all(&pairs);
        }
        h.flush();
        assert_eq!(h.hot.len(), 2, "the repeats stay in the hot table");
        let all: Vec<_> = (0..3).flat_map(|_| pairs).collect();
        assert_same(&h.dist(), &Dist::of_weighted(all));
    }

    #[test]
    fn memory_stays_within_its_bound_with_the_default_limits() {
        // Distinct gaps (bypassing the hot table) mixed with a repeated one
        // (keeping it): several spills of the full log.
        let mut h = ItlHistogram::default();
        let mut all = Vec::new();
        for i in 0..700_000u64 {
            let mut pairs = vec![((i * 7919) % 1_000_003 * 1_000 + 1, 1 + (i % 3) as u32)];
            if i % 5 == 0 {
                pairs.push((5_000_000, 2));
            }
            h.add_all(&pairs);
            all.extend_from_slice(&pairs);
        }
        assert!(h.gaps.spilled_runs() >= 2);
        // The log (16 bytes an entry) and a spill's grouping (12) at their
        // bound, and the rest (batch, hot table, tallies) well below 1 MiB.
        let bound = LOG_MAX_DEFAULT * (16 + 12) + (1 << 20);
        assert!(h.memory_bytes() <= bound, "{} > {bound}", h.memory_bytes());
        assert_same(&h.dist(), &Dist::of_weighted(all));
    }

    #[test]
    fn memory_follows_distinct_gaps() {
        let mut h = ItlHistogram::default();
        for _ in 0..10_000 {
            h.add_all(&[(20_000_000, 3), (20_000_000, 1), (31_000_000, 3)]);
        }
        h.flush();
        assert_eq!(h.in_memory(), 2);
        assert_eq!(h.dist().count, 70_000);
    }

    #[test]
    fn the_mean_is_the_list_s_below_2_53_and_the_exact_sum_rounded_once_beyond() {
        // Just below 2^53 ns of summed gaps: the list's float sum is exact
        // at every step, and so the same bits.
        let gap = (1u64 << 40) + 12_345;
        let below: Vec<(Nanos, u32)> = (0..4095u64).map(|i| (gap + i, 2)).collect();
        let sum_below: u128 = below.iter().map(|&(g, w)| g as u128 * w as u128).sum();
        assert!(sum_below < 1 << 53);
        let mut h = ItlHistogram::default();
        h.add_all(&below);
        assert_same(&h.dist(), &Dist::of_weighted(below.clone()));

        // Far beyond: odd gaps near 2^60 whose running float sum rounds at
        // almost every step. The histogram's mean is the exact sum rounded
        // once; the list's drifts from it.
        let big: Vec<(Nanos, u32)> = (0..3000u64)
            .map(|i| ((1 << 60) + 2 * i * 1_000_003 + 1, 3))
            .collect();
        let exact: u128 = big.iter().map(|&(g, w)| g as u128 * w as u128).sum();
        let total: u64 = big.iter().map(|p| p.1 as u64).sum();
        let mut h = ItlHistogram::default();
        h.add_all(&big);
        let (a, b) = (h.dist(), Dist::of_weighted(big));
        assert_eq!((h.sum, h.total), (exact, total), "the sum is exact");
        assert_eq!(
            a.mean.to_bits(),
            (exact as f64 / total as f64 / 1e6).to_bits()
        );
        assert_ne!(a.mean.to_bits(), b.mean.to_bits(), "the list's sum rounds");
        // Everything else is unchanged.
        assert_same(&Dist { mean: b.mean, ..a }, &b);
    }
}
