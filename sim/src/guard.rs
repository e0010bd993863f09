//! Guards that stop a run with a clear error instead of exhausting memory or
//! spinning: an estimate of what the run will hold in memory, made before it
//! starts, and checks while it runs that the memory stays within the budget
//! and that simulated time keeps advancing.
//!
//! A run that keeps its records (the library's default) holds one record per
//! request; a streamed run (`Simulation::stream_records`, what `simulate`
//! and `bench` do) holds only the requests in flight. Either keeps one
//! time-series row per replica (or per fleet) per sampling tick; past
//! 65,536 rows they go to a temporary file (`RunResult::timeseries`), and
//! the same budget still bounds them, now for the disk and the size of
//! `timeseries.csv`. Both are known in advance from the horizon, the
//! arrival rate and `[metrics]`, so an oversized run is refused before it
//! starts, naming the key to change.

use crate::metrics::TimeseriesRow;
use crate::request::Request;
use crate::scenario::{Scenario, TimeseriesMode};

/// Memory a run may use for records and the time series, bytes: 4 GiB,
/// or `SERVESIM_MEMORY_GIB` GiB.
pub fn memory_budget() -> u64 {
    const DEFAULT_GIB: f64 = 4.0;
    let gib = std::env::var("SERVESIM_MEMORY_GIB")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|g| g.is_finite() && *g > 0.0)
        .unwrap_or(DEFAULT_GIB);
    (gib * (1u64 << 30) as f64) as u64
}

/// Bytes per kept request: the record plus its share of inter-token samples.
pub fn bytes_per_request() -> u64 {
    std::mem::size_of::<Request>() as u64 + 16
}

/// Bytes per time-series row.
pub fn bytes_per_row() -> u64 {
    std::mem::size_of::<TimeseriesRow>() as u64
}

/// Consecutive events at one simulated instant beyond which the run is
/// declared stuck (a trace may put a million arrivals on one timestamp; a
/// hundred million is no workload).
pub const MAX_EVENTS_AT_ONE_TIME: u64 = 100_000_000;

/// What a run is expected to hold, from its scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// Requests expected (`None` when the workload gives no rate and the
    /// horizon no count: a trace or a closed loop under a duration).
    pub requests: Option<u64>,
    /// Time-series rows expected.
    pub timeseries_rows: Option<u64>,
    pub bytes: u64,
}

/// Rows per sampling tick.
pub fn rows_per_tick(s: &Scenario) -> u64 {
    match s.file.metrics.timeseries {
        TimeseriesMode::PerReplica => s.file.fleet.replicas as u64,
        TimeseriesMode::Fleet => 1,
        TimeseriesMode::Off => 0,
    }
}

/// Estimates the run's records and series before it starts.
pub fn estimate(s: &Scenario) -> MemoryEstimate {
    estimate_with(s, false)
}

/// [`estimate`]; `streamed`: the run's records leave memory as requests
/// end, so only the time series counts.
pub fn estimate_with(s: &Scenario, streamed: bool) -> MemoryEstimate {
    let h = &s.file.horizon;
    let rate = s.file.offered_rate();
    let by_time = match (h.duration_s, rate) {
        // 10 % above the mean for the randomness of arrivals.
        (Some(d), Some(r)) => Some((d * r * 1.1).ceil()),
        _ => None,
    };
    let requests = match (h.requests.map(|n| n as f64), by_time) {
        (Some(n), Some(t)) => Some(n.min(t)),
        (a, b) => a.or(b),
    };
    let span = h
        .duration_s
        .or_else(|| Some(requests? / rate?))
        .filter(|x| x.is_finite());
    let rows =
        span.map(|d| (d / s.file.metrics.timeseries_interval_s + 1.0) * rows_per_tick(s) as f64);
    let clamp = |x: f64| x.min(u64::MAX as f64 / 2.0) as u64;
    let requests = requests.map(clamp);
    let rows = rows.map(clamp);
    let kept = if streamed { 0 } else { requests.unwrap_or(0) };
    let bytes = kept
        .saturating_mul(bytes_per_request())
        .saturating_add(rows.unwrap_or(0).saturating_mul(bytes_per_row()));
    MemoryEstimate {
        requests,
        timeseries_rows: rows,
        bytes,
    }
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// Refuses a run whose estimate exceeds the budget; the error names the key
/// to change.
pub fn check_estimate(s: &Scenario) -> Result<MemoryEstimate, String> {
    check_estimate_with(s, false)
}

/// [`check_estimate`] of a run that keeps its records or (`streamed`) not.
pub fn check_estimate_with(s: &Scenario, streamed: bool) -> Result<MemoryEstimate, String> {
    let e = estimate_with(s, streamed);
    let budget = memory_budget();
    if e.bytes <= budget {
        return Ok(e);
    }
    let req_bytes = (!streamed as u64)
        .saturating_mul(e.requests.unwrap_or(0))
        .saturating_mul(bytes_per_request());
    let row_bytes = e
        .timeseries_rows
        .unwrap_or(0)
        .saturating_mul(bytes_per_row());
    Err(if req_bytes >= row_bytes {
        format!(
            "{}: horizon: about {} requests would hold {:.1} GiB of records in memory, over \
             the {:.1} GiB budget; lower horizon.requests or horizon.duration_s \
             (or raise SERVESIM_MEMORY_GIB)",
            s.origin,
            e.requests.unwrap_or(0),
            gib(req_bytes),
            gib(budget)
        )
    } else {
        format!(
            "{}: metrics.timeseries_interval_s: about {} time-series rows would hold {:.1} GiB \
             in memory, over the {:.1} GiB budget; sample more coarsely (a larger \
             metrics.timeseries_interval_s), aggregate over replicas (metrics.timeseries = \
             \"fleet\") or turn it off (\"off\")",
            s.origin,
            e.timeseries_rows.unwrap_or(0),
            gib(row_bytes),
            gib(budget)
        )
    })
}

/// Checks made while a run goes on.
pub struct RunGuard {
    budget: u64,
    last_time: u64,
    same_time: u64,
}

impl RunGuard {
    pub fn new() -> RunGuard {
        RunGuard {
            budget: memory_budget(),
            last_time: u64::MAX,
            same_time: 0,
        }
    }

    /// One event at `now`: stuck when too many happen at one instant.
    #[inline]
    pub fn on_event(&mut self, now: u64) -> Result<(), String> {
        if now == self.last_time {
            self.same_time += 1;
            if self.same_time > MAX_EVENTS_AT_ONE_TIME {
                return Err(format!(
                    "simulated time stopped advancing: more than {MAX_EVENTS_AT_ONE_TIME} \
                     events at t = {:.9} s",
                    now as f64 / 1e9
                ));
            }
        } else {
            self.last_time = now;
            self.same_time = 0;
        }
        Ok(())
    }

    /// Memory held so far: requests and time-series rows.
    pub fn check_memory(&self, origin: &str, requests: usize, rows: usize) -> Result<(), String> {
        let req = requests as u64 * bytes_per_request();
        let ts = rows as u64 * bytes_per_row();
        if req + ts <= self.budget {
            return Ok(());
        }
        Err(if ts > req {
            format!(
                "{origin}: metrics.timeseries_interval_s: the time series reached {rows} rows \
                 ({:.1} GiB), over the {:.1} GiB budget, before the run ended; sample more \
                 coarsely, use metrics.timeseries = \"fleet\" or \"off\", or shorten the horizon",
                gib(ts),
                gib(self.budget)
            )
        } else {
            format!(
                "{origin}: horizon: the run reached {requests} requests ({:.1} GiB of records), \
                 over the {:.1} GiB budget, before it ended; lower horizon.requests or \
                 horizon.duration_s (or raise SERVESIM_MEMORY_GIB)",
                gib(req),
                gib(self.budget)
            )
        })
    }
}

impl Default for RunGuard {
    fn default() -> Self {
        Self::new()
    }
}

/// One time-series row summed over the fleet (`replica` = `u32::MAX`,
/// written as "all").
pub fn fleet_row(now: crate::time::SimTime, replicas: &[crate::replica::Replica]) -> TimeseriesRow {
    let mut row = TimeseriesRow {
        time: now,
        replica: u32::MAX,
        waiting: 0,
        running: 0,
        kv_blocks_used: 0,
        kv_blocks_total: 0,
    };
    for rep in replicas {
        row.waiting += rep.waiting_len() as u32;
        row.running += rep.running_len() as u32;
        row.kv_blocks_used += rep.active_kv_blocks();
        row.kv_blocks_total += rep.kv().total();
    }
    row
}
