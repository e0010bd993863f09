//! The tenants' slice of the plan: what `tenancy::Tenancy` is built from,
//! resolved once from `[[tenants]]`, `[fairness]`, `[admission]` and the
//! scenario's `[slo]`, so that admission reads no configuration while the
//! run goes.

use super::{FairnessCfg, LimitsCfg, RetryCfg, Scenario, SloCfg, SloTargets};

/// The tenants sharing the fleet (none: one anonymous tenant) and the
/// fleet-wide admission limit.
#[derive(Clone, Debug)]
pub struct TenantsPlan {
    /// Their names, in `[[tenants]]` order (a request's tenant index).
    pub names: Vec<String>,
    /// Shares of service under weighted fairness.
    pub weights: Vec<f64>,
    /// Priority levels (lower is more urgent).
    pub levels: Vec<i64>,
    /// How replicas order their waiting queues among tenants.
    pub fairness: FairnessCfg,
    /// Each tenant's admission limits.
    pub limits: Vec<LimitsCfg>,
    /// Each tenant's latency targets: its own `slo`, else the scenario's.
    /// A tenant's report has no inter-token distribution of its own (gaps
    /// are gathered per iteration, shared by every tenant in the batch), so
    /// it judges no ITL percentile.
    pub slos: Vec<Option<SloTargets>>,
    /// Each tenant's retry policy for rejected requests.
    pub retry: Vec<Option<RetryCfg>>,
    /// `[admission] max_queue`: requests waiting fleet-wide at most.
    pub max_queue: Option<u64>,
}

impl Scenario {
    /// The tenants' slice of the plan ([`TenantsPlan`]).
    pub fn tenants_plan(&self) -> TenantsPlan {
        let f = &self.file;
        let default_slo = f.slo.as_ref().map(SloCfg::targets);
        TenantsPlan {
            names: f.tenants.iter().map(|t| t.name.clone()).collect(),
            weights: f.tenants.iter().map(|t| t.weight).collect(),
            levels: f.tenants.iter().map(|t| t.priority.level()).collect(),
            fairness: f.fairness.clone(),
            limits: f.tenants.iter().map(|t| t.limits.clone()).collect(),
            slos: f
                .tenants
                .iter()
                .map(|t| t.slo.as_ref().map(SloCfg::targets).or(default_slo))
                .map(|s| s.map(|s| s.without("itl")))
                .collect(),
            retry: f.tenants.iter().map(|t| t.retry.clone()).collect(),
            max_queue: f.admission.max_queue,
        }
    }
}
