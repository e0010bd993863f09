//! Inter-token latencies as an exact sparse histogram.
//!
//! Every decode iteration yields (gap, tokens) pairs: the time its tokens
//! waited since their sequence's previous token, and how many tokens waited
//! that long. The run used to keep every pair to the end (16 bytes per
//! iteration: 3.3 GB for the 1,000-replica autoscaled day of
//! docs/autoscaling.md). Counting each distinct pair instead keeps what
//! repeats once (the Mooncake conversation trace on 16 replicas: 2.3 M pairs,
//! 355 k distinct; the bench's scenario: 724 k pairs, 544 k distinct), and
//! [`ItlHistogram::dist`] gives the same [`Dist`] as [`Dist::of_weighted`]
//! over the full list, bit for bit: the same values in the same sorted
//! order, the same floating-point sum in the same order.
//! This is a count (frequency) histogram with unit-width integer buckets, the
//! exact limit of HdrHistogram-style bucketing (Tene, HdrHistogram); no
//! precision is traded away.

use crate::metrics::Dist;
use crate::records::pair_counts::{PairCounts, Sorted};
use crate::time::{nanos_to_ms, Nanos};

/// Counts of (gap ns, tokens) pairs; see the module comment. The counting
/// itself (`records::pair_counts`) keeps its working set in the L2 cache and
/// its memory bounded, spilling sorted runs to disk beyond the bound; the
/// result is exact either way.
#[derive(Debug, Default)]
pub struct ItlHistogram {
    counts: PairCounts,
}

impl ItlHistogram {
    /// Adds one iteration's pairs (pairs with no tokens are ignored, as
    /// [`Dist::of_weighted`] ignores them).
    #[inline]
    pub fn add_all(&mut self, pairs: &[(Nanos, u32)]) {
        for &(gap, w) in pairs {
            if w > 0 {
                self.counts.add(gap, w);
            }
        }
    }

    /// The first error spilling counts to disk.
    pub fn error(&self) -> Option<&str> {
        self.counts.error()
    }

    /// Entries held in memory (the structure's size).
    pub fn distinct(&self) -> usize {
        self.counts.in_memory()
    }

    /// The distribution [`Dist::of_weighted`] gives for the same pairs.
    pub fn dist(&mut self) -> Dist {
        dist_of(self.counts.sorted())
    }
}

/// [`ItlHistogram::dist`] over `src` (read twice).
fn dist_of(mut src: Sorted<'_>) -> Dist {
    if src.is_empty() {
        return Dist::default();
    }
    {
        // Pass 1: the total weight, the sum and the largest gap.
        let (mut total, mut sum, mut max) = (0u64, 0f64, 0u64);
        for ((x, w), c) in groups(src.iter()) {
            total += w as u64 * c;
            // One addition per original pair, in sorted order, as the list
            // version does: the float sum rounds the same way.
            let v = x as f64 * w as f64;
            for _ in 0..c {
                sum += v;
            }
            max = x;
        }
        // Pass 2: the quantiles, the smallest gap whose cumulative weight
        // reaches each target. Every copy of a pair has the same value: a
        // quantile is x once the group's last copy reaches its target.
        const QS: [f64; 4] = [0.50, 0.90, 0.95, 0.99];
        let targets = QS.map(|q| (q * total as f64).ceil().max(1.0) as u64);
        let mut found = [None::<u64>; 4];
        let mut acc = 0u64;
        for ((x, w), c) in groups(src.iter()) {
            acc += w as u64 * c;
            for (k, &t) in targets.iter().enumerate() {
                if found[k].is_none() && acc >= t {
                    found[k] = Some(x);
                }
            }
            if found[3].is_some() {
                break;
            }
        }
        let q = |k: usize| nanos_to_ms(found[k].unwrap_or(max));
        Dist {
            count: total,
            mean: sum / total as f64 / 1e6,
            p50: q(0),
            p90: q(1),
            p95: q(2),
            p99: q(3),
            max: nanos_to_ms(max),
        }
    }
}

/// Sorted (gap, tokens, count) runs with equal pairs summed.
fn groups(
    sorted: impl Iterator<Item = (u64, u64, u64)>,
) -> impl Iterator<Item = ((Nanos, u32), u64)> {
    let mut it = sorted.peekable();
    std::iter::from_fn(move || {
        let (x, w, mut c) = it.next()?;
        while let Some(&(nx, nw, nc)) = it.peek() {
            if (nx, nw) != (x, w) {
                break;
            }
            c += nc;
            it.next();
        }
        Some(((x, w as u32), c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The histogram's summary equals the list's, field for field, bit
        /// for bit (values drawn from few gaps and weights, so pairs repeat).
        #[test]
        fn histogram_equals_the_full_list(
            iters in proptest::collection::vec(
                proptest::collection::vec((0u64..40, 0u32..5), 0..6), 0..200),
            scale in prop_oneof![Just(1u64), Just(1_000_003u64), Just(3_000_000_007u64)],
        ) {
            let mut h = ItlHistogram::default();
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
        }
    }

    #[test]
    fn spilled_runs_merge_to_the_same_summary() {
        // A small hot table and memory bound: the counts flush, merge and
        // spill many times over.
        let mut h = ItlHistogram {
            counts: PairCounts::with_limits(5, 2_000),
        };
        let mut all = Vec::new();
        for i in 0..60_000u64 {
            // Distinct gaps, then the same gaps again in a later run.
            let pairs = [((i * 7919) % 40_009 * 1000, (i % 3) as u32 + 1)];
            h.add_all(&pairs);
            all.extend_from_slice(&pairs);
        }
        assert!(h.counts.spilled() > 0);
        assert!(h.distinct() <= 2_000 + 16);
        let (a, b) = (h.dist(), Dist::of_weighted(all));
        assert_eq!(a.count, b.count);
        for (x, y) in [
            (a.mean, b.mean),
            (a.p50, b.p50),
            (a.p90, b.p90),
            (a.p95, b.p95),
            (a.p99, b.p99),
            (a.max, b.max),
        ] {
            assert_eq!(x.to_bits(), y.to_bits());
        }
    }

    #[test]
    fn memory_follows_distinct_pairs() {
        let mut h = ItlHistogram::default();
        for _ in 0..10_000 {
            h.add_all(&[(20_000_000, 3), (20_000_000, 1), (31_000_000, 3)]);
        }
        assert_eq!(h.distinct(), 3);
        assert_eq!(h.dist().count, 70_000);
    }
}
