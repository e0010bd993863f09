//! Exact inter-token gaps kept by log-linear bucket, so that a quantile at
//! the end reads one bucket's gaps, not all of them.
//!
//! Every (gap, tokens) entry the hot table (`records::pair_counts`) drains
//! is filed under its gap's bucket: the gap's leading [`SUB_BITS`] + 1
//! significant bits, the log-linear index of HdrHistogram (Gil Tene,
//! HdrHistogram, "sub-buckets" within power-of-two buckets): buckets are one
//! nanosecond wide below 128 ns and 1/128 to 1/64 of their values wide
//! above, [`BUCKETS`] in all over the whole u64 range, in ascending order of
//! value. Each bucket's total token weight is kept exactly, so the bucket
//! that holds a quantile's rank is known without reading a gap; only that
//! bucket's entries are then read, their weights counted in 4,096 equal
//! sub-ranges on the way, and only the sub-range holding the rank is sorted
//! ([`GapLog::select`]; a bucket at most 4,096 ns wide needs no sort at
//! all), and a gap filed several times (once per drain that saw it) is
//! simply summed there.
//!
//! The entries themselves stay in an unsorted in-memory log of at most
//! [`LOG_MAX`] entries (16 bytes each); past that the log is written to an
//! anonymous temporary file (`store::SpillFile`) as one run grouped by bucket (a counting sort,
//! O(n), no comparisons, whose counts are kept as the entries are filed;
//! 12 bytes an entry on disk), followed by the run's bucket offsets, so a bucket
//! is one contiguous read per run. Nothing is merged, nothing is read back
//! except the few buckets asked for, and memory stays bounded whatever the
//! run's length. When a bucket holds more entries than [`SELECT_MAX`] the
//! selection narrows it first, as a radix select does: the weights of 4,096
//! equal sub-ranges are counted in one pass and the sub-range holding the
//! rank is searched next, so the selection's memory is bounded too.

use crate::store::SpillFile;

/// Linear sub-buckets per power of two (2^6: a bucket is at most 1/64 of
/// its values wide).
pub const SUB_BITS: u32 = 6;

/// Buckets over the whole u64 range.
pub const BUCKETS: usize = (65 - SUB_BITS as usize) << SUB_BITS;

/// Entries held in memory before the log spills (16 bytes each: 4 MiB; a
/// spill groups them into a second buffer of 12 bytes an entry: 3 MiB).
pub const LOG_MAX: usize = 1 << 18;

/// Entries a selection sorts at once; a bucket with more is narrowed first.
pub const SELECT_MAX: usize = 1 << 16;

/// Bits a narrowing step splits a range into.
const NARROW_BITS: u32 = 12;

/// Bytes per entry on disk (gap u64 and tokens u32, little-endian; the
/// bucket is the run's bucket offsets' to tell).
const ENTRY: usize = 12;

/// Entries read from disk at a time during a selection.
const READ: usize = 1 << 12;

/// The bucket of gap `v` (ascending in `v`).
#[inline]
pub fn bucket(v: u64) -> usize {
    // Below 2^(SUB_BITS + 1) the shift is 0 and the bucket is `v` itself:
    // one formula, no branch (gaps come in millions).
    let shift = (63 - (v | 1).leading_zeros()).saturating_sub(SUB_BITS);
    ((shift as usize) << SUB_BITS) + (v >> shift) as usize
}

/// The smallest gap of bucket `b` and log2 of the bucket's width.
fn bucket_range(b: usize) -> (u64, u32) {
    if b < 1 << SUB_BITS {
        return (b as u64, 0);
    }
    let shift = (b >> SUB_BITS) as u32 - 1;
    let mant = (b - ((shift as usize) << SUB_BITS)) as u64;
    (mant << shift, shift)
}

/// One filed gap in memory: tokens that waited `gap` ns, and the gap's
/// bucket (computed once, when filed, and used again by the spill).
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    gap: u64,
    tokens: u32,
    bucket: u32,
}

/// One bucket's tallies: its exact token weight, and its entries in the
/// in-memory log (side by side: filing an entry updates both).
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    weight: u64,
    logged: u64,
}

/// A spilled run: where its entries start and how many (its bucket offsets
/// follow them as `BUCKETS + 1` u32 values).
#[derive(Clone, Copy, Debug)]
struct Run {
    at: u64,
    len: usize,
}

/// Gaps with token weights, filed by bucket; see the module comment.
#[derive(Debug)]
pub struct GapLog {
    log_max: usize,
    select_max: usize,
    /// Per bucket, its weight and its entries in `log` (counted as they are
    /// filed, so that a spill starts from its offsets instead of a counting
    /// pass).
    tally: Box<[Tally]>,
    /// Entries not yet spilled, in the order they came.
    log: Vec<Entry>,
    /// A spill's entries grouped by bucket, already in their on-disk
    /// bytes (kept for the next spill).
    grouped: Vec<[u8; ENTRY]>,
    /// A spill's bucket offsets on their way to disk.
    bytes: Vec<u8>,
    file: SpillFile,
    runs: Vec<Run>,
    /// The first error reading gaps back: they are then incomplete.
    read_error: Option<String>,
}

impl Default for GapLog {
    fn default() -> Self {
        GapLog::with_limits(LOG_MAX, SELECT_MAX)
    }
}

impl GapLog {
    /// A log holding at most `log_max` entries in memory whose selections
    /// sort at most `select_max` entries at once (small limits let tests
    /// reach every path).
    pub fn with_limits(log_max: usize, select_max: usize) -> GapLog {
        GapLog {
            log_max: log_max.max(1),
            select_max: select_max.max(1),
            tally: vec![Tally::default(); BUCKETS].into_boxed_slice(),
            // Its whole bound at once: batches of varied sizes would
            // otherwise grow it past the bound (amortized growth rounds up).
            log: Vec::with_capacity(log_max.clamp(1, LOG_MAX)),
            grouped: Vec::new(),
            bytes: Vec::new(),
            file: SpillFile::default(),
            runs: Vec::new(),
            read_error: None,
        }
    }

    /// Files `tokens` (> 0) tokens that waited `gap` ns.
    #[inline]
    pub fn push(&mut self, gap: u64, mut tokens: u64) {
        // More than 2^32 - 1 tokens on one gap since the last drain: several
        // entries (quantiles sum them).
        while tokens > u32::MAX as u64 {
            self.file(gap, u32::MAX);
            tokens -= u32::MAX as u64;
        }
        self.file(gap, tokens as u32);
    }

    /// Files one entry: `tokens` (> 0) tokens that waited `gap` ns.
    #[inline]
    fn file(&mut self, gap: u64, tokens: u32) {
        self.file_all(&[(gap, tokens)], |_, _| {});
    }

    /// Files every (gap, tokens) pair (tokens > 0), calling `each` with each
    /// pair as it goes. The inter-token histogram files a batch of pairs at
    /// once (one per decode step), and this loop is its cost: the log has
    /// room reserved for each stretch between spills, so that the loop body
    /// makes no call and keeps its state in registers.
    #[inline]
    pub fn file_all(&mut self, pairs: &[(u64, u32)], mut each: impl FnMut(u64, u32)) {
        let mut rest = pairs;
        while !rest.is_empty() {
            let room = self.log_max.saturating_sub(self.log.len()).max(1);
            let (now, later) = rest.split_at(rest.len().min(room));
            let tally = &mut self.tally;
            self.log.extend(now.iter().map(|&(gap, tokens)| {
                each(gap, tokens);
                let b = bucket(gap);
                let t = &mut tally[b];
                t.weight += tokens as u64;
                t.logged += 1;
                Entry {
                    gap,
                    tokens,
                    bucket: b as u32,
                }
            }));
            if self.log.len() >= self.log_max {
                self.spill();
            }
            rest = later;
        }
    }

    /// Entries in memory (the log's size).
    pub fn in_memory(&self) -> usize {
        self.log.len()
    }

    /// Bytes this structure holds in memory (its buffers' capacities).
    pub fn memory_bytes(&self) -> usize {
        self.tally.len() * std::mem::size_of::<Tally>()
            + self.log.capacity() * std::mem::size_of::<Entry>()
            + self.grouped.capacity() * ENTRY
            + self.bytes.capacity()
            + self.runs.capacity() * std::mem::size_of::<Run>()
    }

    /// Runs written to disk so far.
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    /// The first error spilling to disk.
    pub fn error(&self) -> Option<&str> {
        self.file.error().or(self.read_error.as_deref())
    }

    /// Writes the log to disk as one run grouped by bucket.
    #[inline(never)]
    fn spill(&mut self) {
        if self.log.is_empty() || self.error().is_some() {
            self.log.clear();
            self.tally.iter_mut().for_each(|t| t.logged = 0);
            return;
        }
        // Counting sort by bucket (the counts were kept as the entries were
        // filed): offsets, then each entry's bytes at its place, so that the
        // grouped buffer is written as it is.
        let mut offsets = vec![0u32; BUCKETS + 1];
        for (b, t) in self.tally.iter_mut().enumerate() {
            offsets[b + 1] = offsets[b] + t.logged as u32;
            t.logged = 0;
        }
        self.grouped.resize(self.log.len(), [0; ENTRY]);
        let mut next = offsets.clone();
        for e in &self.log {
            let slot = &mut next[e.bucket as usize];
            let out = &mut self.grouped[*slot as usize];
            out[..8].copy_from_slice(&e.gap.to_le_bytes());
            out[8..].copy_from_slice(&e.tokens.to_le_bytes());
            *slot += 1;
        }
        self.bytes.clear();
        for o in &offsets {
            self.bytes.extend_from_slice(&o.to_le_bytes());
        }
        let parts = [self.grouped.as_flattened(), &self.bytes[..]];
        if let Some(at) = self.file.append(&parts, "inter-token latencies") {
            self.runs.push(Run {
                at,
                len: self.log.len(),
            });
        }
        self.log.clear();
    }

    /// Calls `f` with every entry of bucket `b` whose gap lies in
    /// [`lo`, `hi`] (memory and disk).
    fn scan(&mut self, b: usize, lo: u64, hi: u64, mut f: impl FnMut(u64, u64)) {
        for e in &self.log {
            if e.gap >= lo && e.gap <= hi {
                f(e.gap, e.tokens as u64);
            }
        }
        if self.runs.is_empty() {
            return;
        }
        let file = &self.file;
        let mut buf = vec![0u8; READ * ENTRY];
        for run in &self.runs {
            let mut span = [0u8; 8];
            let index = run.at + (run.len * ENTRY) as u64 + 4 * b as u64;
            let read = file.read_at(&mut span, index).and_then(|()| {
                let from = u32::from_le_bytes(span[..4].try_into().expect("4 bytes")) as usize;
                let to = u32::from_le_bytes(span[4..].try_into().expect("4 bytes")) as usize;
                let mut at = from;
                while at < to {
                    let n = (to - at).min(READ);
                    let chunk = &mut buf[..n * ENTRY];
                    file.read_at(chunk, run.at + (at * ENTRY) as u64)?;
                    for e in chunk.chunks_exact(ENTRY) {
                        let g = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
                        if g >= lo && g <= hi {
                            let w = u32::from_le_bytes(e[8..12].try_into().expect("4 bytes"));
                            f(g, w as u64);
                        }
                    }
                    at += n;
                }
                Ok(())
            });
            if let Err(e) = read {
                self.read_error.get_or_insert(format!(
                    "cannot read inter-token latencies back from a temporary file: {e}"
                ));
                return;
            }
        }
    }

    /// For each rank in `targets` (token weights, ascending, each at least
    /// 1 and at most the total weight), the smallest gap whose cumulative
    /// weight reaches it; `None` where the ranks exceed the weight filed.
    pub fn select(&mut self, targets: &[u64]) -> Vec<Option<u64>> {
        let mut out = vec![None; targets.len()];
        let (mut b, mut below) = (0usize, 0u64);
        for (k, &t) in targets.iter().enumerate() {
            // The bucket whose cumulative weight first reaches t.
            while b < BUCKETS && below + self.tally[b].weight < t {
                below += self.tally[b].weight;
                b += 1;
            }
            if b == BUCKETS {
                break;
            }
            // A later target in the same bucket reuses nothing but the
            // bucket's position: each selection reads only this bucket.
            out[k] = Some(self.select_in(b, below, t));
        }
        out
    }

    /// The smallest gap in bucket `b` whose cumulative weight (`below` in
    /// the buckets before it) reaches `t`.
    fn select_in(&mut self, b: usize, mut below: u64, t: u64) -> u64 {
        let (mut lo, mut width_bits) = bucket_range(b);
        loop {
            if width_bits == 0 {
                // One value: every entry here is lo.
                return lo;
            }
            let hi = lo + ((1u64 << width_bits) - 1);
            let sub_bits = width_bits.min(NARROW_BITS);
            let shift = width_bits - sub_bits;
            let mut sub = vec![0u64; 1 << sub_bits];
            // A range of at most 2^NARROW_BITS values is settled by the
            // counts alone: each sub-range is one value.
            let keep = shift > 0;
            let mut held: Vec<(u64, u64)> = Vec::new();
            let mut overflow = false;
            let cap = self.select_max;
            self.scan(b, lo, hi, |g, w| {
                sub[((g - lo) >> shift) as usize] += w;
                if keep && !overflow {
                    if held.len() < cap {
                        held.push((g, w));
                    } else {
                        overflow = true;
                        held = Vec::new();
                    }
                }
            });
            // The sub-range holding the rank.
            let mut i = 0;
            while i + 1 < sub.len() && below + sub[i] < t {
                below += sub[i];
                i += 1;
            }
            if !keep {
                return lo + i as u64;
            }
            if !overflow {
                // Only the sub-range's entries are sorted: the ones before
                // it are all smaller and weigh `below` together.
                let from = lo + ((i as u64) << shift);
                let to = from + ((1u64 << shift) - 1);
                held.retain(|&(g, _)| g >= from && g <= to);
                held.sort_unstable_by_key(|&(g, _)| g);
                let mut acc = below;
                for &(g, w) in &held {
                    acc += w;
                    if acc >= t {
                        return g;
                    }
                }
                // Only after an I/O error (reported by `error`).
                return to;
            }
            // Narrow to the sub-range holding the rank.
            lo += (i as u64) << shift;
            width_bits = shift;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: the smallest value of the sorted list whose
    /// cumulative weight reaches each target.
    fn by_sorting(mut v: Vec<(u64, u64)>, targets: &[u64]) -> Vec<Option<u64>> {
        v.sort_unstable();
        targets
            .iter()
            .map(|&t| {
                let mut acc = 0;
                v.iter()
                    .find(|&&(_, w)| {
                        acc += w;
                        acc >= t
                    })
                    .map(|&(g, _)| g)
            })
            .collect()
    }

    #[test]
    fn buckets_ascend_and_cover_their_ranges() {
        let mut probes: Vec<u64> = (0..5000).collect();
        for e in 0..64 {
            for d in [0u64, 1, 2, 3] {
                probes.push((1u64 << e).wrapping_sub(d));
                probes.push((1u64 << e) + d);
            }
        }
        probes.push(u64::MAX);
        probes.sort_unstable();
        for w in probes.windows(2) {
            assert!(bucket(w[0]) <= bucket(w[1]), "{} {}", w[0], w[1]);
        }
        for &v in &probes {
            let b = bucket(v);
            assert!(b < BUCKETS);
            let (lo, bits) = bucket_range(b);
            assert!(
                lo <= v && v - lo < (1u64 << bits),
                "{v} in {b}: {lo} +2^{bits}"
            );
            assert_eq!(bucket(lo), b);
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    proptest! {
        /// Through memory only, spills and narrowing (small limits), every
        /// quantile rank selects what sorting the full list gives.
        #[test]
        fn selection_equals_sorting_the_full_list(
            entries in proptest::collection::vec((0u64..5_000, 1u64..5), 1..2000),
            scale in prop_oneof![Just(1u64), Just(977u64), Just(1_000_003u64), Just(u64::MAX / 5_000)],
            log_max in prop_oneof![Just(7usize), Just(100usize), Just(usize::MAX)],
            select_max in prop_oneof![Just(1usize), Just(5usize), Just(usize::MAX)],
            qs in proptest::collection::vec(0.0f64..1.0, 1..6),
        ) {
            let mut log = GapLog::with_limits(log_max, select_max);
            let v: Vec<(u64, u64)> = entries.iter().map(|&(g, w)| (g * scale, w)).collect();
            for &(g, w) in &v {
                log.push(g, w);
            }
            let total: u64 = v.iter().map(|e| e.1).sum();
            let mut targets: Vec<u64> = qs
                .iter()
                .map(|q| ((q * total as f64).ceil() as u64).clamp(1, total))
                .collect();
            targets.push(total);
            targets.sort_unstable();
            prop_assert_eq!(log.select(&targets), by_sorting(v, &targets));
            prop_assert!(log.error().is_none());
        }
    }

    #[test]
    fn a_spilled_log_stays_within_its_bound() {
        let mut log = GapLog::with_limits(64, 8);
        let mut v = Vec::new();
        for i in 0..20_000u64 {
            let e = ((i * 7919) % 50_021 * 1_013, 1 + i % 3);
            log.push(e.0, e.1);
            v.push(e);
            assert!(log.in_memory() < 64);
        }
        assert!(log.spilled_runs() > 300);
        let total: u64 = v.iter().map(|e| e.1).sum();
        let targets = [1, total / 2, total * 99 / 100, total];
        assert_eq!(log.select(&targets), by_sorting(v, &targets));
    }

    #[test]
    fn more_tokens_than_an_entry_holds_are_split() {
        let mut log = GapLog::with_limits(2, 1);
        log.push(7_000, 1);
        log.push(9_000, 3 * u32::MAX as u64 + 5);
        log.push(8_000, 2);
        assert!(log.spilled_runs() >= 2);
        let total = 3 * u32::MAX as u64 + 8;
        assert_eq!(
            log.select(&[1, 2, 3, 4, total]),
            [
                Some(7_000),
                Some(8_000),
                Some(8_000),
                Some(9_000),
                Some(9_000)
            ]
        );
    }
}
