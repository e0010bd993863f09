//! Inter-token latencies as an exact weighted histogram.
//!
//! Every decode iteration yields (gap, tokens) pairs: the time its tokens
//! waited since their sequence's previous token, and how many tokens waited
//! that long. The run used to keep every pair to the end (16 bytes per
//! iteration: 3.3 GB for the 1,000-replica autoscaled day of
//! docs/autoscaling.md), then every distinct pair, sorted and merged
//! (the Mooncake conversation trace on 16-token blocks: 2.31 M pairs,
//! 355 k distinct). The summary needs far less: the total weight, the
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

use crate::metrics::Dist;
use crate::records::gap_log::GapLog;
use crate::records::pair_counts::PairCounts;
use crate::time::{nanos_to_ms, Nanos};

/// The inter-token histogram; see the module comment. The counting itself
/// (`records::pair_counts`) keeps its working set in the L2 cache, and the
/// gaps it drains are filed by bucket with memory bounded (`records::gap_log`,
/// spilling to disk beyond the bound); the result is exact either way.
#[derive(Debug, Default)]
pub struct ItlHistogram {
    hot: PairCounts,
    gaps: GapLog,
    /// Tokens counted (drained from the hot table).
    total: u64,
    /// Sum of gap × tokens (exact).
    sum: u128,
    max: u64,
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
        if w > 0 && self.hot.add(gap, w) {
            self.drain();
        }
    }

    /// Moves the hot table's gaps into the statistics and the gap log.
    fn drain(&mut self) {
        let (gaps, total, sum, max) = (
            &mut self.gaps,
            &mut self.total,
            &mut self.sum,
            &mut self.max,
        );
        self.hot.drain(|gap, tokens| {
            *total += tokens;
            *sum += gap as u128 * tokens as u128;
            *max = (*max).max(gap);
            gaps.push(gap, tokens);
        });
    }

    /// The first error spilling gaps to disk.
    pub fn error(&self) -> Option<&str> {
        self.gaps.error()
    }

    /// Entries held in memory (the hot table's and the gap log's).
    pub fn in_memory(&self) -> usize {
        self.hot.len() + self.gaps.in_memory()
    }

    /// Bytes held in memory (the structure's size).
    pub fn memory_bytes(&self) -> usize {
        self.hot.memory_bytes() + self.gaps.memory_bytes()
    }

    /// The distribution [`Dist::of_weighted`] gives for the same pairs (see
    /// the module comment for the mean past 2^53 ns).
    pub fn dist(&mut self) -> Dist {
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
        /// through every path: drains, spills and narrowed selections.
        #[test]
        fn histogram_equals_the_full_list(
            iters in proptest::collection::vec(
                proptest::collection::vec((0u64..40, 0u32..5), 0..6), 0..200),
            scale in prop_oneof![Just(1u64), Just(1_000_003u64), Just(3_000_000_007u64)],
            limits in prop_oneof![
                Just((13u32, LOG_MAX_DEFAULT, SELECT_MAX_DEFAULT)),
                Just((2u32, 3usize, 2usize)),
                Just((3u32, 16usize, 1usize)),
            ],
        ) {
            let mut h = small(limits.0, limits.1, limits.2);
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
            assert!(h.in_memory() <= 2_000 + 16);
        }
        assert!(h.gaps.spilled_runs() > 10);
        assert_same(&h.dist(), &Dist::of_weighted(all));
    }

    #[test]
    fn memory_follows_distinct_gaps() {
        let mut h = ItlHistogram::default();
        for _ in 0..10_000 {
            h.add_all(&[(20_000_000, 3), (20_000_000, 1), (31_000_000, 3)]);
        }
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
