//! The per-replica time series (`timeseries.csv`): one row per replica (or
//! one fleet-wide row) per sampling tick, as a run samples it. A long run
//! samples more rows than memory should hold, so [`Timeseries`] keeps them
//! in the store's spilling log (memory holds one chunk, the rest sits in a
//! temporary file); its readers see the rows in order, or the I/O error
//! that lost some.

use crate::store::{Spill, SpillLog};
use crate::time::SimTime;

/// One sample of the per-replica time series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeseriesRow {
    pub time: SimTime,
    pub replica: u32,
    pub waiting: u32,
    pub running: u32,
    pub kv_blocks_used: u64,
    pub kv_blocks_total: u64,
}

/// A row as the time series spills it: its six fields, little-endian.
impl Spill for TimeseriesRow {
    const BYTES: usize = 36;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.time.0.to_le_bytes());
        out.extend_from_slice(&self.replica.to_le_bytes());
        out.extend_from_slice(&self.waiting.to_le_bytes());
        out.extend_from_slice(&self.running.to_le_bytes());
        out.extend_from_slice(&self.kv_blocks_used.to_le_bytes());
        out.extend_from_slice(&self.kv_blocks_total.to_le_bytes());
    }
    fn get(b: &[u8]) -> TimeseriesRow {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        TimeseriesRow {
            time: SimTime(u64_at(0)),
            replica: u32_at(8),
            waiting: u32_at(12),
            running: u32_at(16),
            kv_blocks_used: u64_at(20),
            kv_blocks_total: u64_at(28),
        }
    }
}

/// The time series a run sampled, in the order sampled.
#[derive(Debug, Default)]
pub struct Timeseries(SpillLog<TimeseriesRow>);

impl From<SpillLog<TimeseriesRow>> for Timeseries {
    /// The rows a run sampled into a spilling log.
    fn from(rows: SpillLog<TimeseriesRow>) -> Self {
        Timeseries(rows)
    }
}

impl Timeseries {
    /// Appends the next sample.
    pub fn push(&mut self, row: TimeseriesRow) {
        self.0.push(row);
    }

    /// Rows sampled.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every row, in the order sampled; a row that was spilled and cannot
    /// be read back (or written) ends the rows with its error, so a file
    /// written from them is refused rather than cut short.
    pub fn rows(&self) -> impl Iterator<Item = std::io::Result<TimeseriesRow>> + '_ {
        let lost = std::iter::once_with(|| {
            self.0
                .error()
                .map(|e| Err(std::io::Error::other(e.to_string())))
        });
        self.0.iter().map(Ok).chain(lost.flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::{Timeseries, TimeseriesRow};
    use crate::store::CHUNK;
    use crate::time::SimTime;

    #[test]
    fn a_spilled_time_series_comes_back_row_for_row() {
        let row = |i: u64| TimeseriesRow {
            time: SimTime(i * 1_000_000_007),
            replica: (i % 1_000) as u32,
            waiting: (i * 7) as u32,
            running: u32::MAX - i as u32,
            kv_blocks_used: i << 33,
            kv_blocks_total: u64::MAX - i,
        };
        // Two chunks on disk and a part in memory.
        let n = 2 * CHUNK as u64 + 77;
        let mut series = Timeseries::default();
        for i in 0..n {
            series.push(row(i));
        }
        assert_eq!(series.len() as u64, n);
        let back: Vec<TimeseriesRow> = series.rows().map(|r| r.unwrap()).collect();
        assert!(back.into_iter().eq((0..n).map(row)));
    }
}
