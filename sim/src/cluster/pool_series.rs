//! `pools.csv`: the time series of a fleet with pools, one row per pool per
//! sampling tick — how busy each pool is, how much of its KV cache is in
//! use (and, on a prefill pool, held for transfers), and how much KV is
//! queued for or crossing its links. It is the view that shows back-pressure
//! building (the prefill pool's KV filling with caches the decode pool
//! cannot take yet).

use crate::replica::Replica;
use crate::scenario::PoolRole;
use crate::time::SimTime;
use std::io::Write;

/// One pool at one tick.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSample {
    pub time: SimTime,
    pub pool: u16,
    /// Replicas computing an iteration at the tick.
    pub busy: u32,
    pub waiting: u32,
    pub running: u32,
    pub kv_blocks_used: u64,
    pub kv_blocks_total: u64,
    /// Requests prefilled here whose KV has not left (prefill pools).
    pub held_for_transfer: u32,
    /// KV caches waiting for decode memory or on the links (prefill pools).
    pub transfers_pending: u32,
    /// Bytes sent over the pool's links so far (prefill pools).
    pub link_bytes_sent: u64,
    /// The pool's replicas by life-cycle phase (runs with a life cycle).
    pub phases: Option<crate::lifecycle::FleetSample>,
}

pub const COLUMNS: &str = "time_s,pool,role,busy_replicas,waiting,running,kv_blocks_used,kv_util,held_for_transfer,transfers_pending,link_bytes_sent";

/// Aggregates one pool's replicas at `time`.
pub fn sample(time: SimTime, pool: u16, reps: &[Replica]) -> PoolSample {
    let mut s = PoolSample {
        time,
        pool,
        busy: 0,
        waiting: 0,
        running: 0,
        kv_blocks_used: 0,
        kv_blocks_total: 0,
        held_for_transfer: 0,
        transfers_pending: 0,
        link_bytes_sent: 0,
        phases: None,
    };
    for r in reps {
        s.busy += r.is_busy() as u32;
        s.waiting += r.waiting_len() as u32;
        s.running += r.running_len() as u32;
        s.kv_blocks_used += r.active_kv_blocks();
        s.kv_blocks_total += r.kv().total();
        s.held_for_transfer += r.held_for_transfer() as u32;
    }
    s
}

/// Writes `rows` as CSV; `names` and `roles` are indexed by pool.
pub fn write(
    out: &mut impl Write,
    rows: &[PoolSample],
    names: &[String],
    roles: &[PoolRole],
) -> std::io::Result<()> {
    // With a life cycle each row adds the pool's replicas by phase.
    let phased = rows.first().is_some_and(|r| r.phases.is_some());
    if phased {
        let cols = crate::lifecycle::FleetSample::COLUMNS.join(",");
        writeln!(out, "{COLUMNS},{cols}")?;
    } else {
        writeln!(out, "{COLUMNS}")?;
    }
    for r in rows {
        let p = r.pool as usize;
        write!(
            out,
            "{:.3},{},{},{},{},{},{},{:.4},{},{},{}",
            r.time.as_secs_f64(),
            names[p],
            roles[p].name(),
            r.busy,
            r.waiting,
            r.running,
            r.kv_blocks_used,
            r.kv_blocks_used as f64 / r.kv_blocks_total.max(1) as f64,
            r.held_for_transfer,
            r.transfers_pending,
            r.link_bytes_sent
        )?;
        if let (true, Some(p)) = (phased, &r.phases) {
            for v in p.values() {
                write!(out, ",{v}")?;
            }
        }
        writeln!(out)?;
    }
    Ok(())
}
