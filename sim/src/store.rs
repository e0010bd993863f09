//! Per-request values a run must see again at its end, kept in a bounded
//! buffer and spilled to an anonymous temporary file beyond it, so memory
//! does not grow with the run's request count.
//!
//! Two uses: values read back in the order they came ([`SpillLog`]), and
//! values read back sorted ([`SpillSort`]), the run's one external sort
//! (the four latency distributions sum their samples in sorted order, so
//! they need every value in order), by external merge sort (Knuth,
//! TAOCP vol. 3, §5.4.1): each full buffer is sorted and written as a run,
//! and the runs are merged through a tree of losers at the end. Both give exactly the
//! sequence an in-memory `Vec` (sorted with `sort_unstable`) would: a
//! run's statistics are computed from the same values in the same order. A
//! run small enough for the buffer never touches the disk. Both spill into
//! a [`SpillFile`], as the inter-token gap log does (`records::gap_log`,
//! which groups gaps by bucket as it spills and reads back only the buckets
//! a percentile needs: a weighted quantile needs no sorted stream, and
//! nothing is merged).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// Values buffered before a spill (per structure).
pub const CHUNK: usize = 1 << 16;

/// Values read from a spilled run at a time, per run, at most ...
const READ: usize = 1 << 10;

/// ... and at least, when a merge has so many runs that the most would
/// pass [`MERGE_BYTES`].
const READ_MIN: usize = 1 << 6;

/// The read buffers of one merge, in all: a merge of `n` runs reads
/// `MERGE_BYTES / n` bytes a run at a time (within [`READ_MIN`] and
/// [`READ`] values), so its memory stops growing with the run's length
/// past 512 runs of `u64` (32 Mi values: a 100 M-request run's
/// distributions spill 1,525 runs each, 10^8 / [`CHUNK`], which took
/// 48 MiB of 8 KiB buffers for the four).
const MERGE_BYTES: usize = 4 << 20;

/// A fixed-size value that spills as bytes.
pub trait Spill: Copy {
    const BYTES: usize;
    fn put(&self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
}

impl Spill for u64 {
    const BYTES: usize = 8;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> u64 {
        u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
    }
}

impl Spill for (u64, i64) {
    const BYTES: usize = 16;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
        out.extend_from_slice(&self.1.to_le_bytes());
    }
    fn get(b: &[u8]) -> (u64, i64) {
        (
            u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            i64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        )
    }
}

/// An anonymous temporary file that spilled records are appended to and
/// read back from at their offsets: created at the first append, removed by
/// the system when dropped (or when the process dies), so nothing is left
/// behind. The sorted runs here and the inter-token gap log
/// (`records::gap_log`) both spill through it.
#[derive(Debug, Default)]
pub struct SpillFile {
    file: Option<File>,
    end: u64,
    /// The first error appending: what was spilled is then incomplete.
    error: Option<String>,
}

impl SpillFile {
    /// Appends `parts` one after another; gives the offset of the first,
    /// or `None` after an error, whose message (the first one kept) names
    /// `what` was spilled.
    pub fn append(&mut self, parts: &[&[u8]], what: &str) -> Option<u64> {
        if self.error.is_some() {
            return None;
        }
        let res = (|| -> std::io::Result<()> {
            if self.file.is_none() {
                self.file = Some(tempfile::tempfile()?);
            }
            let f = self.file.as_mut().expect("just created");
            parts.iter().try_for_each(|p| f.write_all(p))
        })();
        match res {
            Ok(()) => {
                let at = self.end;
                self.end += parts.iter().map(|p| p.len() as u64).sum::<u64>();
                Some(at)
            }
            Err(e) => {
                self.error = Some(format!("cannot spill {what} to a temporary file: {e}"));
                None
            }
        }
    }

    /// Reads `buf.len()` bytes at offset `at` (appended before).
    pub fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        match &self.file {
            Some(f) => f.read_exact_at(buf, at),
            None => Err(std::io::Error::other("nothing was spilled")),
        }
    }

    /// The first error appending.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Cuts the file to `len` bytes, as a disk that loses data would.
    #[cfg(test)]
    pub(crate) fn truncate(&self, len: u64) {
        self.file
            .as_ref()
            .expect("spilled")
            .set_len(len)
            .expect("truncate");
    }
}

/// The runs written to a [`SpillFile`] (offset, values).
#[derive(Debug, Default)]
struct Disk {
    file: SpillFile,
    runs: Vec<(u64, usize)>,
    /// The first error reading a run back (set through `&self` by the
    /// cursors, which stop there): what was read is then incomplete.
    read_error: std::sync::OnceLock<String>,
}

impl Disk {
    fn write<T: Spill>(&mut self, v: &[T]) {
        if self.file.error().is_some() {
            return;
        }
        let mut bytes = Vec::with_capacity(v.len() * T::BYTES);
        for x in v {
            x.put(&mut bytes);
        }
        if let Some(at) = self.file.append(&[&bytes], "run records") {
            self.runs.push((at, v.len()));
        }
    }

    /// A cursor over run `k` reading `read` values at a time.
    fn cursor<T: Spill>(&self, k: usize, read: usize) -> Cursor<'_, T> {
        let (at, len) = self.runs[k];
        Cursor {
            file: &self.file,
            at,
            left: len,
            read,
            buf: Vec::new(),
            pos: 0,
            err: &self.read_error,
        }
    }

    /// The first error writing or reading a run.
    fn error(&self) -> Option<&str> {
        self.file
            .error()
            .or(self.read_error.get().map(String::as_str))
    }

    /// Cuts the temporary file to its first spilled run, as a disk that
    /// loses data would: the runs after it can no longer be read back.
    #[cfg(test)]
    fn lose_all_but_the_first_run(&self, bytes: usize) {
        let first = self.runs.first().map_or(0, |r| r.1 * bytes);
        self.file.truncate(first as u64);
    }
}

/// Reads one spilled run in blocks of `read` values.
struct Cursor<'a, T> {
    file: &'a SpillFile,
    at: u64,
    left: usize,
    read: usize,
    buf: Vec<T>,
    pos: usize,
    /// Where a read error goes (the run's [`Disk`]).
    err: &'a std::sync::OnceLock<String>,
}

impl<T: Spill> Iterator for Cursor<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        if self.pos == self.buf.len() {
            if self.left == 0 {
                return None;
            }
            let n = self.left.min(self.read);
            let mut bytes = vec![0u8; n * T::BYTES];
            if let Err(e) = self.file.read_at(&mut bytes, self.at) {
                let _ = self.err.set(format!(
                    "cannot read spilled records back from a temporary file: {e}"
                ));
                self.left = 0;
                return None;
            }
            self.at += bytes.len() as u64;
            self.left -= n;
            self.buf.clear();
            self.buf
                .extend(bytes.chunks_exact(T::BYTES).map(|b| T::get(b)));
            self.pos = 0;
        }
        let x = self.buf[self.pos];
        self.pos += 1;
        Some(x)
    }
}

/// Values read back in the order they were pushed.
#[derive(Debug)]
pub struct SpillLog<T> {
    buf: Vec<T>,
    disk: Disk,
    len: usize,
}

impl<T> Default for SpillLog<T> {
    fn default() -> Self {
        SpillLog {
            buf: Vec::new(),
            disk: Disk::default(),
            len: 0,
        }
    }
}

impl<T: Spill> SpillLog<T> {
    pub fn push(&mut self, x: T) {
        self.buf.push(x);
        self.len += 1;
        if self.buf.len() >= CHUNK {
            self.disk.write(&self.buf);
            self.buf.clear();
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every value, in push order.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        (0..self.disk.runs.len())
            .flat_map(|k| self.disk.cursor::<T>(k, READ))
            .chain(self.buf.iter().copied())
    }

    /// The first I/O error, writing or (once read) reading, if any (the
    /// values are then incomplete).
    pub fn error(&self) -> Option<&str> {
        self.disk.error()
    }
}

/// Values read back in ascending order.
#[derive(Debug)]
pub struct SpillSort<T> {
    buf: Vec<T>,
    disk: Disk,
    len: usize,
}

impl<T> Default for SpillSort<T> {
    fn default() -> Self {
        SpillSort {
            buf: Vec::new(),
            disk: Disk::default(),
            len: 0,
        }
    }
}

impl<T: Spill + Ord + Greatest + SortRun> SpillSort<T> {
    pub fn push(&mut self, x: T) {
        self.buf.push(x);
        self.len += 1;
        if self.buf.len() >= CHUNK {
            T::sort_run(&mut self.buf);
            self.disk.write(&self.buf);
            self.buf.clear();
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every value in ascending order (sorts the buffered tail in place).
    pub fn sorted(&mut self) -> impl Iterator<Item = T> + '_ {
        let read = merge_read(self.disk.runs.len(), T::BYTES);
        self.sorted_reading(read)
    }

    /// [`Self::sorted`], reading each spilled run `read` values at a time.
    fn sorted_reading(&mut self, read: usize) -> impl Iterator<Item = T> + '_ {
        T::sort_run(&mut self.buf);
        if self.disk.runs.is_empty() {
            // Nothing spilled: the buffer alone, without the merge heap.
            return Sorted::Memory(self.buf.iter().copied());
        }
        let mut sources: Vec<Source<'_, T>> = (0..self.disk.runs.len())
            .map(|k| Source::Disk(self.disk.cursor::<T>(k, read)))
            .collect();
        sources.push(Source::Memory(self.buf.iter().copied()));
        Sorted::Merged(Merge::new(sources, self.len))
    }

    /// The first I/O error, writing or (once read) reading, if any (the
    /// values are then incomplete).
    pub fn error(&self) -> Option<&str> {
        self.disk.error()
    }

    /// [`Disk::lose_all_but_the_first_run`], for the readers' tests.
    #[cfg(test)]
    pub(crate) fn lose_all_but_the_first_run(&self) {
        self.disk.lose_all_but_the_first_run(T::BYTES);
    }
}

/// Values a merge of `runs` spilled runs of `bytes`-byte values reads from
/// each at a time ([`MERGE_BYTES`]).
fn merge_read(runs: usize, bytes: usize) -> usize {
    (MERGE_BYTES / (runs.max(1) * bytes)).clamp(READ_MIN, READ)
}

/// [`SpillSort::sorted`]'s values: straight from memory when nothing
/// spilled, merged with the runs on disk otherwise.
enum Sorted<A, B> {
    Memory(A),
    Merged(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Sorted<A, B> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        match self {
            Sorted::Memory(a) => a.next(),
            Sorted::Merged(b) => b.next(),
        }
    }
}

/// One sorted source of a [`Merge`]: a run on disk or the buffer.
enum Source<'a, T> {
    Disk(Cursor<'a, T>),
    Memory(std::iter::Copied<std::slice::Iter<'a, T>>),
}

impl<T: Spill> Iterator for Source<'_, T> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Option<T> {
        match self {
            Source::Disk(c) => c.next(),
            Source::Memory(m) => m.next(),
        }
    }
}

/// A value no other orders after: an exhausted source's head in a
/// [`Merge`].
pub trait Greatest {
    const GREATEST: Self;
}

impl Greatest for u64 {
    const GREATEST: u64 = u64::MAX;
}

impl Greatest for (u64, i64) {
    const GREATEST: (u64, i64) = (u64::MAX, i64::MAX);
}

/// How a buffer of values is sorted before it spills or is merged: the
/// same order as `sort_unstable` (for these keys, a total order with no two
/// equal values told apart, so the same sequence).
pub trait SortRun: Ord + Sized {
    fn sort_run(v: &mut [Self]) {
        v.sort_unstable();
    }
}

impl SortRun for (u64, i64) {}

impl SortRun for u64 {
    /// Least-significant-digit radix sort, a byte a pass (Knuth, TAOCP
    /// vol. 3, §5.2.5), skipping the bytes every value shares: the latency
    /// keys (`f64_key` of milliseconds) share their top byte, so a full
    /// buffer takes seven passes of a few instructions a value, where a
    /// comparison sort took about 150 instructions a value. Short buffers
    /// (a comparison sort's few levels cost less than the passes) are
    /// sorted by comparison.
    fn sort_run(v: &mut [u64]) {
        if v.len() < 1 << 12 {
            v.sort_unstable();
            return;
        }
        let mut counts = [[0u32; 256]; 8];
        for &x in v.iter() {
            for (d, c) in counts.iter_mut().enumerate() {
                c[((x >> (8 * d)) & 0xFF) as usize] += 1;
            }
        }
        let len = u32::try_from(v.len()).expect("a buffer of fewer than 2^32 values");
        let mut scratch = vec![0u64; v.len()];
        // Where the values are now: `v` (false) or `scratch` (true).
        let mut in_scratch = false;
        for (d, c) in counts.iter_mut().enumerate() {
            if c.contains(&len) {
                continue;
            }
            let mut at = 0;
            for n in c.iter_mut() {
                (*n, at) = (at, at + *n);
            }
            let (from, to): (&[u64], &mut [u64]) = if in_scratch {
                (&scratch[..], &mut v[..])
            } else {
                (&v[..], &mut scratch[..])
            };
            let shift = 8 * d as u32;
            for &x in from {
                let slot = &mut c[((x >> shift) & 0xFF) as usize];
                // SAFETY: `slot` starts at the number of values with a
                // smaller digit and each value of this digit advances it
                // once, so it stays below that plus this digit's count:
                // within `to`, whose length is the values' count.
                unsafe { *to.get_unchecked_mut(*slot as usize) = x };
                *slot += 1;
            }
            in_scratch = !in_scratch;
        }
        if in_scratch {
            v.copy_from_slice(&scratch);
        }
    }
}

/// K-way merge of ascending sources through a tree of losers (Knuth, TAOCP
/// vol. 3, §5.4.1): each value out replays one path from its source's leaf
/// to the root, one comparison a level, with no branch on its outcome. On
/// 155 runs of 64 Ki values (a 10 M-request run's distribution spills 152)
/// it took 0.27 s where a binary heap's sift, whose branches the processor
/// cannot predict, took 0.41 s, and a tree of losers that branched 0.69 s.
///
/// Heads are (value, source), so ties go to the lower source; an exhausted
/// source's head is ([`Greatest::GREATEST`], source), and the merge stops
/// after the sources' total. A real greatest value may then lose its tie to
/// an exhausted source's head: the value given out is the same.
struct Merge<'a, T> {
    sources: Vec<Source<'a, T>>,
    heads: Vec<(T, u32)>,
    /// `tree[0]`: the source holding the least head; `tree[n]` for `n` in
    /// `1..k`: the loser of the match at node `n`, whose children are nodes
    /// `2n` and `2n + 1`, leaf `i` being node `k + i`.
    tree: Vec<u32>,
    /// Values not yet given out.
    left: usize,
}

impl<'a, T: Spill + Ord + Greatest> Merge<'a, T> {
    fn new(mut sources: Vec<Source<'a, T>>, total: usize) -> Self {
        let heads: Vec<(T, u32)> = (0..sources.len())
            .map(|i| (sources[i].next().unwrap_or(T::GREATEST), i as u32))
            .collect();
        let k = sources.len();
        let mut tree = vec![0; k.max(1)];
        // The winners of each node's match, bottom up.
        let mut winner: Vec<u32> = vec![0; 2 * k];
        for i in 0..k {
            winner[k + i] = i as u32;
        }
        for n in (1..k).rev() {
            let (a, b) = (winner[2 * n], winner[2 * n + 1]);
            let (w, l) = if heads[a as usize] < heads[b as usize] {
                (a, b)
            } else {
                (b, a)
            };
            winner[n] = w;
            tree[n] = l;
        }
        if k > 1 {
            tree[0] = winner[1];
        }
        Merge {
            sources,
            heads,
            tree,
            left: if k == 0 { 0 } else { total },
        }
    }
}

impl<T: Spill + Ord + Greatest> Iterator for Merge<'_, T> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let w = self.tree[0] as usize;
        let x = self.heads[w].0;
        self.heads[w].0 = self.sources[w].next().unwrap_or(T::GREATEST);
        // Replay the matches on the way from leaf `w` to the root.
        let mut node = (self.sources.len() + w) / 2;
        let (mut win, mut head) = (w as u32, self.heads[w]);
        while node > 0 {
            let l = self.tree[node];
            let h = self.heads[l as usize];
            let beaten = h < head;
            // Selects, not branches: the outcome is a coin toss.
            self.tree[node] = if beaten { win } else { l };
            win = if beaten { l } else { win };
            head = if beaten { h } else { head };
            node /= 2;
        }
        self.tree[0] = win;
        Some(x)
    }
}

/// An f64's bits mapped so that unsigned order is `f64::total_cmp`'s order.
pub fn f64_key(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// The inverse of [`f64_key`].
pub fn f64_of_key(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The radix sort gives `sort_unstable`'s order, on latency-like
        /// keys (shared top bytes) and on any values.
        #[test]
        fn the_radix_sort_sorts_as_sort_unstable(
            v in proptest::collection::vec(any::<u64>(), 0..10_000),
            ms in proptest::collection::vec(0.0f64..5_000.0, 0..10_000),
        ) {
            for mut v in [v, ms.iter().map(|&x| f64_key(x)).collect()] {
                let mut want = v.clone();
                want.sort_unstable();
                u64::sort_run(&mut v);
                prop_assert_eq!(v, want);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(6))]
        #[test]
        fn spilled_values_come_back_as_a_vec_would(v in proptest::collection::vec(any::<u64>(), 0..3 * CHUNK + 7)) {
            let (mut log, mut sort) = (SpillLog::default(), SpillSort::default());
            for &x in &v {
                log.push(x % 1000);
                sort.push(x % 1000);
            }
            let kept: Vec<u64> = v.iter().map(|x| x % 1000).collect();
            prop_assert_eq!(log.iter().collect::<Vec<_>>(), kept.clone());
            let mut sorted = kept;
            sorted.sort_unstable();
            prop_assert_eq!(sort.sorted().collect::<Vec<_>>(), sorted);
            prop_assert!(log.error().is_none() && sort.error().is_none());
        }
    }

    proptest! {
        #[test]
        fn f64_keys_order_like_total_cmp(a in any::<f64>(), b in any::<f64>()) {
            prop_assert_eq!(f64_key(a).cmp(&f64_key(b)), a.total_cmp(&b));
            prop_assert_eq!(f64_of_key(f64_key(a)).to_bits(), a.to_bits());
        }
    }

    #[test]
    fn the_tree_of_losers_merges_any_number_of_sources() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for k in 0..40usize {
            // Runs of uneven lengths (some empty), values with ties.
            let runs: Vec<Vec<u64>> = (0..k)
                .map(|i| {
                    let mut v: Vec<u64> = (0..(i * 37) % 23)
                        .map(|_| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            // Some of the greatest value too.
                            match x % 50 {
                                49 => u64::MAX,
                                v => v,
                            }
                        })
                        .collect();
                    v.sort_unstable();
                    v
                })
                .collect();
            let sources = runs
                .iter()
                .map(|r| Source::Memory(r.iter().copied()))
                .collect();
            let mut want: Vec<u64> = runs.concat();
            let got: Vec<u64> = Merge::new(sources, want.len()).collect();
            want.sort_unstable();
            assert_eq!(got, want, "{k} sources");
        }
    }

    #[test]
    fn a_merge_of_many_runs_reads_less_of_each() {
        // A 10 M-request run's 152 runs (10^7 / CHUNK) read as much as
        // ever, up to 512; a 100 M one's 1,525 share the merge's bytes;
        // past that the floor holds.
        assert_eq!(merge_read(152, 8), READ);
        assert_eq!(merge_read(512, 8), READ);
        assert_eq!(merge_read(513, 8), 1022);
        assert_eq!(merge_read(1525, 8), 343);
        assert!(1525 * merge_read(1525, 8) * 8 <= MERGE_BYTES);
        assert_eq!(merge_read(1 << 20, 8), READ_MIN);
        assert_eq!(merge_read(0, 16), READ);
    }

    #[test]
    fn runs_read_a_few_values_at_a_time_merge_the_same() {
        let mut s = SpillSort::default();
        let mut x = 7u64;
        let mut want = Vec::new();
        for _ in 0..3 * CHUNK + 11 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s.push(x >> 40);
            want.push(x >> 40);
        }
        want.sort_unstable();
        // 7 values a read: the runs' lengths are not multiples of it.
        assert_eq!(s.sorted_reading(7).collect::<Vec<_>>(), want);
        assert_eq!(s.sorted().collect::<Vec<_>>(), want);
    }

    #[test]
    fn a_run_that_cannot_be_read_back_is_an_error() {
        let mut log = SpillLog::default();
        for i in 0..2 * CHUNK as u64 + 5 {
            log.push(i);
        }
        assert!(log.error().is_none());
        // The temporary file loses its second run.
        log.disk.lose_all_but_the_first_run(<u64 as Spill>::BYTES);
        let read = log.iter().count();
        assert!(read < 2 * CHUNK + 5, "{read} values");
        assert!(
            log.error().is_some_and(|e| e.contains("cannot read")),
            "{:?}",
            log.error()
        );
    }

    #[test]
    fn pairs_spill_and_merge() {
        let mut s = SpillSort::default();
        for i in (0..2 * CHUNK as i64 + 5).rev() {
            s.push(((i % 97) as u64, -i));
        }
        let got: Vec<(u64, i64)> = s.sorted().collect();
        assert_eq!(got.len(), 2 * CHUNK + 5);
        assert!(got.windows(2).all(|w| w[0] <= w[1]));
    }
}
