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

use crate::records::timeseries::TimeseriesRow;
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

/// Bytes per row of the series a run keeps in memory beside the time
/// series: a `pools.csv` row per pool and a life-cycle phase row per
/// scaling unit, each sampling tick.
pub fn bytes_per_series_row() -> u64 {
    std::mem::size_of::<crate::cluster::pool_series::PoolSample>()
        .max(std::mem::size_of::<crate::lifecycle::FleetSample>()) as u64
}

/// Replica objects the run keeps: the fleet's replicas, or with a life
/// cycle its slots (the autoscaler's maximum plus the standby pool), each
/// a row of a per-replica time series.
pub fn replica_slots(s: &Scenario) -> u64 {
    s.run_plan().replica_slots
}

/// Rows per sampling tick of the series held in memory whole: one per
/// declared pool (`pools.csv`) and, with a life cycle, one per pool (its
/// replicas by phase).
pub fn series_rows_per_tick(s: &Scenario) -> u64 {
    s.run_plan().series_rows_per_tick
}

/// Closed-loop users of the scenario's workloads (each keeps one request
/// in flight, so a run holds at least this many requests at once).
pub fn closed_loop_users(s: &Scenario) -> u64 {
    s.run_plan().closed_loop_users
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
    /// Rows of the series held in memory whole (`pools.csv`, life-cycle
    /// phases) expected.
    pub series_rows: Option<u64>,
    /// Requests in flight at once at least (closed-loop users).
    pub in_flight: u64,
    pub bytes: u64,
    /// Bytes of result files the run writes (`requests.csv`,
    /// `timeseries.csv`, `pools.csv`), when the counts are known.
    pub disk_bytes: Option<u64>,
}

/// Rows per sampling tick.
pub fn rows_per_tick(s: &Scenario) -> u64 {
    let plan = s.run_plan();
    match plan.timeseries {
        TimeseriesMode::PerReplica => plan.replica_slots,
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
    let plan = s.run_plan();
    let rate = plan.workload_rps;
    let by_time = match (plan.duration_s, rate) {
        // 10 % above the mean for the randomness of arrivals.
        (Some(d), Some(r)) => Some((d * r * 1.1).ceil()),
        _ => None,
    };
    let requests = match (plan.max_requests.map(|n| n as f64), by_time) {
        (Some(n), Some(t)) => Some(n.min(t)),
        (a, b) => a.or(b),
    };
    let span = plan
        .duration_s
        .or_else(|| Some(requests? / rate?))
        .filter(|x| x.is_finite());
    let ticks = span.map(|d| d / plan.sample_interval_s + 1.0);
    let clamp = |x: f64| x.min(u64::MAX as f64 / 2.0) as u64;
    let rows = ticks.map(|t| clamp(t * rows_per_tick(s) as f64));
    let series = ticks.map(|t| clamp(t * plan.series_rows_per_tick as f64));
    let requests = requests.map(clamp);
    let in_flight = plan.closed_loop_users;
    let kept = if streamed { 0 } else { requests.unwrap_or(0) }.max(in_flight);
    let bytes = kept
        .saturating_mul(bytes_per_request())
        .saturating_add(rows.unwrap_or(0).saturating_mul(bytes_per_row()))
        .saturating_add(series.unwrap_or(0).saturating_mul(bytes_per_series_row()));
    let disk_bytes = match (requests, rows) {
        (Some(n), Some(r)) => Some(
            n.saturating_mul(CSV_BYTES_PER_REQUEST)
                .saturating_add(r.saturating_mul(CSV_BYTES_PER_ROW))
                .saturating_add(series.unwrap_or(0).saturating_mul(CSV_BYTES_PER_POOL_ROW))
                .saturating_add(routing_bytes(s, n)),
        ),
        _ => None,
    };
    MemoryEstimate {
        requests,
        timeseries_rows: rows,
        series_rows: series,
        in_flight,
        bytes,
        disk_bytes,
    }
}

/// Typical bytes of one `requests.csv` line (ids, times, token counts and
/// latencies; more with attribution or transfers).
pub const CSV_BYTES_PER_REQUEST: u64 = 220;
/// Typical bytes of one `timeseries.csv` line.
pub const CSV_BYTES_PER_ROW: u64 = 30;
/// Typical bytes of one `pools.csv` line.
pub const CSV_BYTES_PER_POOL_ROW: u64 = 80;
/// Typical bytes of one `routing.csv` line (one per candidate replica per
/// routing decision).
pub const CSV_BYTES_PER_ROUTING_ROW: u64 = 40;

/// Bytes of `routing.csv` for `requests` routed requests: with `[metrics]
/// routing_trace`, a row per candidate (every replica slot) per decision.
fn routing_bytes(s: &Scenario, requests: u64) -> u64 {
    let plan = s.run_plan();
    if !plan.routing_trace {
        return 0;
    }
    requests
        .saturating_mul(plan.replica_slots)
        .saturating_mul(CSV_BYTES_PER_ROUTING_ROW)
}

/// Result files beyond this many bytes get a warning before the run
/// (`check` and `simulate` state the estimate).
pub const LARGE_DISK_BYTES: u64 = 1 << 30;

/// A warning when the run's result files are estimated to be large: how
/// big, and the keys that shrink them.
pub fn disk_warning(s: &Scenario, e: &MemoryEstimate) -> Option<String> {
    let d = e.disk_bytes?;
    if d < LARGE_DISK_BYTES {
        return None;
    }
    let rows = e
        .timeseries_rows
        .unwrap_or(0)
        .saturating_mul(CSV_BYTES_PER_ROW);
    let routing = routing_bytes(s, e.requests.unwrap_or(0));
    let hint = if routing >= d / 2 {
        "most of it routing.csv (a row per replica per routing decision): \
         metrics.routing_trace = false or a shorter horizon shrinks it"
            .to_string()
    } else if rows >= d / 2 {
        format!(
            "most of it timeseries.csv ({} rows): a larger metrics.timeseries_interval_s (now {} s), \
             metrics.timeseries = \"fleet\" or \"off\" shrinks it",
            e.timeseries_rows.unwrap_or(0),
            s.run_plan().sample_interval_s
        )
    } else {
        format!(
            "most of it requests.csv ({} requests): a shorter horizon shrinks it",
            e.requests.unwrap_or(0)
        )
    };
    Some(format!(
        "{}: the run will write about {:.2} GiB of result files; {hint}",
        s.origin,
        gib(d)
    ))
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
    let kept = if streamed { 0 } else { e.requests.unwrap_or(0) };
    let req_bytes = kept.max(e.in_flight).saturating_mul(bytes_per_request());
    let row_bytes = e
        .timeseries_rows
        .unwrap_or(0)
        .saturating_mul(bytes_per_row())
        .saturating_add(
            e.series_rows
                .unwrap_or(0)
                .saturating_mul(bytes_per_series_row()),
        );
    if req_bytes >= row_bytes && e.in_flight >= kept {
        return Err(format!(
            "{}: workload.arrival.users: {} closed-loop users keep as many requests in flight, \
             {:.1} GiB of records in memory, over the {:.1} GiB budget; fewer users \
             (or raise SERVESIM_MEMORY_GIB)",
            s.origin,
            e.in_flight,
            gib(req_bytes),
            gib(budget)
        ));
    }
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
            e.timeseries_rows.unwrap_or(0) + e.series_rows.unwrap_or(0),
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

    /// Memory held so far: requests, time-series rows and the rows of the
    /// series kept in memory whole (`series`: pools, life-cycle phases).
    pub fn check_memory(
        &self,
        origin: &str,
        requests: usize,
        rows: usize,
        series: usize,
    ) -> Result<(), String> {
        let req = requests as u64 * bytes_per_request();
        let ts = rows as u64 * bytes_per_row() + series as u64 * bytes_per_series_row();
        let rows = rows + series;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra_metrics: &str, replicas: u32) -> Scenario {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/quickstart.toml"),
        )
        .unwrap()
        .replace("requests = 20000", "requests = 10000000")
        .replace("replicas = 4", &format!("replicas = {replicas}"))
            + &format!("\n[metrics]\n{extra_metrics}\n");
        Scenario::from_toml_str(&text, "q.toml").unwrap()
    }

    #[test]
    fn a_routing_trace_counts_a_row_per_replica_per_decision_on_disk() {
        let off = scenario("", 16);
        let on = scenario("routing_trace = true", 16);
        let (a, b) = (estimate(&off), estimate(&on));
        let n = b.requests.unwrap();
        assert_eq!(
            b.disk_bytes.unwrap() - a.disk_bytes.unwrap(),
            n * 16 * CSV_BYTES_PER_ROUTING_ROW
        );
        // 10 M decisions × 16 candidates × 40 bytes: the trace is most of it.
        let w = disk_warning(&on, &b).unwrap();
        assert!(
            w.contains("routing.csv") && w.contains("routing_trace"),
            "{w}"
        );
        assert!(!disk_warning(&off, &a).unwrap().contains("routing.csv"));
    }
}
