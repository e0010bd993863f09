//! The run's conservation laws, checked at the end (and by tests): every
//! request ended exactly once or is held by a replica, KV blocks and host
//! blocks add up, and the fleet, regions and tenants agree with the records.

use super::{InvariantViolation, Simulation};
use crate::request::Status;

impl Simulation<'_> {
    /// Conservation: every request ended exactly once (completed, rejected, or
    /// still held by a replica at the horizon); KV blocks granted = freed + held;
    /// completed requests produced exactly their output tokens.
    pub(super) fn check_invariants(&self) -> Result<(), InvariantViolation> {
        let fail = |m: String| Err(InvariantViolation(m));
        let mut held = vec![false; self.requests.len()];
        for rep in &self.replicas {
            for id in rep.unfinished() {
                let i = id as usize;
                if held[i] {
                    return fail(format!("request {id} is held twice"));
                }
                held[i] = true;
                if self.requests[i].status != Status::InFlight {
                    return fail(format!(
                        "request {id} is {} but still held by replica {}",
                        self.requests[i].status.as_str(),
                        rep.id
                    ));
                }
            }
            let kv = rep.kv();
            if kv.granted() != kv.freed() + kv.used() {
                return fail(format!(
                    "replica {}: KV blocks granted {} != freed {} + held {}",
                    rep.id,
                    kv.granted(),
                    kv.freed(),
                    kv.used()
                ));
            }
            if let Some(c) = rep.prefix_cache() {
                c.check().map_err(|e| {
                    InvariantViolation(format!("replica {}: prefix cache: {e}", rep.id))
                })?;
            }
            let (host_held, host_ledger) = rep.host_blocks_held();
            if host_held != host_ledger {
                return fail(format!(
                    "replica {}: swapped sequences hold {host_held} host blocks, ledger says {host_ledger}",
                    rep.id
                ));
            }
            if kv.used() != rep.blocks_held() {
                return fail(format!(
                    "replica {}: allocator says {} blocks in use, sequences hold {}",
                    rep.id,
                    kv.used(),
                    rep.blocks_held()
                ));
            }
        }
        self.fleet_check(&mut held)?;
        self.region_check(&mut held)?;
        self.front_end_check(&mut held)?;
        self.tenancy
            .check(&self.requests)
            .map_err(InvariantViolation)?;
        self.fleet
            .check(&self.requests, &self.replicas)
            .map_err(InvariantViolation)?;
        // Requests that ended and left the slab were checked as they left
        // (`records::stream::ended_violation`).
        for (i, id) in self.live() {
            let r = &self.requests[i];
            if r.status == Status::InFlight && !held[i] {
                return fail(format!("request {id} is in flight but no replica holds it"));
            }
            if let Some(v) = crate::records::stream::ended_violation(id, r) {
                return fail(v);
            }
        }
        Ok(())
    }
}
