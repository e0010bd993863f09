//! The per-replica time series (`timeseries.csv`): one row per replica per
//! sampling interval, kept by the run in a spilling log (`store`).

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

/// A row as the time series spills it (`RunResult::timeseries`): its six
/// fields, little-endian.
impl crate::store::Spill for TimeseriesRow {
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
