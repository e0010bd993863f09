//! Inter-token gaps counted at cache speed before they are filed
//! (`records::gap_log`), for the inter-token histogram (`records::itl`).
//!
//! A run adds one (gap, tokens) pair per decode step (one gap for all the
//! sequences of a decode run) or a few per iteration (sequences whose
//! previous tokens came at different times), millions in all, and most of
//! their gaps are new: an iteration's duration depends on its batch's exact
//! shape. Counting them in one hash map of every distinct pair made each
//! addition a random access into megabytes (a cache miss per pair: 31 % of
//! the Mooncake conversation run's cycles). Here a gap's tokens are summed
//! in a small open-addressing table that stays in the L2 cache (a quantile
//! weighs gaps by their tokens, so pairs with the same gap need not be told
//! apart); when half its slots hold distinct gaps (a load factor that keeps
//! linear probes short) the table is drained, in the order its slots were
//! taken, into the gap log, which files them without sorting. A gap may
//! then be filed several times (once per drain that saw it); the quantiles
//! sum them, so the answer is the same as counting each gap once.

/// Slots of the hot table (16 bytes each: 128 KiB, within an L2 cache).
const HOT_BITS: u32 = 13;

/// One hot-table slot (`tokens == 0`: empty; gaps without tokens are never
/// counted).
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    gap: u64,
    tokens: u64,
}

/// Token counts per gap since the last drain; see the module comment.
#[derive(Debug)]
pub struct PairCounts {
    bits: u32,
    hot_max: usize,
    slots: Box<[Slot]>,
    /// Occupied slots, in the order they were taken.
    used: Vec<u32>,
}

impl Default for PairCounts {
    fn default() -> Self {
        PairCounts::with_bits(HOT_BITS)
    }
}

impl PairCounts {
    /// A table of 2^`bits` slots (small tables let tests drain often).
    pub fn with_bits(bits: u32) -> PairCounts {
        PairCounts {
            bits,
            hot_max: ((1usize << bits) / 2).max(1),
            slots: vec![Slot::default(); 1 << bits].into_boxed_slice(),
            used: Vec::new(),
        }
    }

    /// Adds `tokens` (> 0) tokens that waited `gap` ns; true when the table
    /// is full and must be drained before the next addition.
    #[inline]
    pub fn add(&mut self, gap: u64, tokens: u32) -> bool {
        debug_assert!(tokens > 0);
        let mask = (1usize << self.bits) - 1;
        let mut i = (gap.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits)) as usize;
        loop {
            let s = &mut self.slots[i];
            if s.gap == gap && s.tokens != 0 {
                s.tokens += tokens as u64;
                return false;
            }
            if s.tokens == 0 {
                *s = Slot {
                    gap,
                    tokens: tokens as u64,
                };
                self.used.push(i as u32);
                return self.used.len() >= self.hot_max;
            }
            i = (i + 1) & mask;
        }
    }

    /// Gaps held (distinct since the last drain).
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Whether no gap is held.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// Bytes the table holds.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>() + self.used.capacity() * 4
    }

    /// Calls `f(gap, tokens)` for every gap held, in the order the slots were
    /// taken; the table is empty after.
    pub fn drain(&mut self, mut f: impl FnMut(u64, u64)) {
        for &i in &self.used {
            // Only `tokens` marks a slot empty: the stale gap can stay.
            let s = &mut self.slots[i as usize];
            f(s.gap, s.tokens);
            s.tokens = 0;
        }
        self.used.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Whatever the table's size, the drains sum to each gap's tokens,
        /// and the table never holds more than half its slots.
        #[test]
        fn drains_sum_to_a_map_of_every_gap(
            pairs in proptest::collection::vec((0u64..300, 1u32..4), 0..3000),
            bits in 1u32..6,
        ) {
            let mut c = PairCounts::with_bits(bits);
            let (mut want, mut got) = (BTreeMap::new(), BTreeMap::new());
            for &(g, w) in &pairs {
                *want.entry(g * 1_000_003).or_insert(0u64) += w as u64;
                if c.add(g * 1_000_003, w) {
                    c.drain(|g, n| *got.entry(g).or_insert(0u64) += n);
                }
                prop_assert!(c.len() < (1 << bits).max(2) / 2 + 1);
            }
            c.drain(|g, n| *got.entry(g).or_insert(0u64) += n);
            prop_assert!(c.is_empty());
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn repeats_stay_in_the_table() {
        let mut c = PairCounts::default();
        for _ in 0..100_000 {
            assert!(!c.add(20_000_000, 3));
            assert!(!c.add(31_000_000, 1));
            assert!(!c.add(0, 2));
        }
        assert_eq!(c.len(), 3);
        let mut got = Vec::new();
        c.drain(|g, n| got.push((g, n)));
        assert_eq!(
            got,
            [(20_000_000, 300_000), (31_000_000, 100_000), (0, 200_000)]
        );
    }
}
