//! The demand's slice of the plan: where a fleet's requests come from
//! without regions (`tenancy::build_source`) — the `[workload]`, or the
//! tenants' own workloads — resolved once from the scenario so that a
//! request source reads no configuration while the run goes. Regions have
//! their own demand ([`super::RegionsPlan`]).

use super::{Scenario, TenantCfg, WorkloadCfg};

/// The workloads requests are drawn from.
#[derive(Clone, Debug)]
pub struct DemandPlan {
    /// `[workload]`: the one shared stream when no tenant has its own.
    pub workload: WorkloadCfg,
    /// `[[tenants]]`, in order: their own workloads, or the names a shared
    /// trace's tenant column maps onto them by (`trace_tenants`).
    pub tenants: Vec<TenantCfg>,
}

impl Scenario {
    /// The demand's slice of the plan ([`DemandPlan`]).
    pub fn demand_plan(&self) -> DemandPlan {
        DemandPlan {
            workload: self.file.workload.clone(),
            tenants: self.file.tenants.clone(),
        }
    }
}
