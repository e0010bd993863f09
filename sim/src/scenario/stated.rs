//! What a scenario file states, for the tools that derive variant
//! scenarios or write a deployment out of one (`sweep::capacity`,
//! `deployment`, `emit`): each read is named for what it is, so no code
//! outside `scenario/` reads the raw TOML (`Scenario::file`). A run's
//! models take their slices of the plan instead ([`super::PoolPlan`],
//! [`super::RunPlan`], ...).

use super::canary_cfg::CanaryCfg;
use super::lifecycle_cfg::{AutoscaleCfg, LifecycleCfg};
use super::{
    HorizonCfg, KvTransferCfg, PoolCfg, PoolPlan, RouterKind, Scenario, SloCfg, WorkloadCfg,
};

impl Scenario {
    /// `[workload]`: the shared request stream.
    pub fn workload(&self) -> &WorkloadCfg {
        &self.file.workload
    }

    /// Whether `[[tenants]]` share the fleet.
    pub fn has_tenants(&self) -> bool {
        !self.file.tenants.is_empty()
    }

    /// `[lifecycle]`, when replicas start cold.
    pub fn lifecycle(&self) -> Option<&LifecycleCfg> {
        self.file.lifecycle.as_ref()
    }

    /// `[autoscale]`, when an autoscaler sets the replica count.
    pub fn autoscale(&self) -> Option<&AutoscaleCfg> {
        self.file.autoscale.as_ref()
    }

    /// `[canary]`, when a rollout runs between pools.
    pub fn canary(&self) -> Option<&CanaryCfg> {
        self.file.canary.as_ref()
    }

    /// `[slo]`: the latency targets, if any.
    pub fn slo(&self) -> Option<&SloCfg> {
        self.file.slo.as_ref()
    }

    /// `[horizon]`: when the run stops.
    pub fn horizon(&self) -> &HorizonCfg {
        &self.file.horizon
    }

    /// `fleet.replicas`: the replicas serving at the start (the implicit
    /// pool's; each declared pool states its own).
    pub fn replicas(&self) -> u32 {
        self.file.fleet.replicas
    }

    /// `fleet.router`.
    pub fn router(&self) -> RouterKind {
        self.file.fleet.router
    }

    /// `[fleet.kv_transfer]`: the prefill→decode link.
    pub fn kv_transfer(&self) -> &KvTransferCfg {
        &self.file.fleet.kv_transfer
    }

    /// `fleet.eplb`: the expert-parallel load balancer runs.
    pub fn eplb(&self) -> bool {
        self.file.fleet.eplb
    }

    /// Whether `[[fleet.regions]]` splits the fleet into regions.
    pub fn has_regions(&self) -> bool {
        !self.file.fleet.regions.is_empty()
    }

    /// `model.weight_dtype` as the file states it (`None`: the
    /// checkpoint's own).
    pub fn stated_weight_dtype(&self) -> Option<crate::catalog::Dtype> {
        self.file.model.weight_dtype
    }

    /// `model.preset`, when the model is a catalog preset.
    pub fn model_preset(&self) -> Option<&str> {
        self.file.model.preset.as_deref()
    }

    /// `model.config`: the Hugging Face `config.json` path as written
    /// (relative to the scenario file).
    pub fn model_config(&self) -> Option<&str> {
        self.file.model.config.as_deref()
    }

    /// The declared pools in file order (`fleet.pools.<i>` is the i-th),
    /// each as written beside its resolved plan.
    pub fn pools_as_written(&self) -> Vec<(&PoolCfg, &PoolPlan)> {
        self.file
            .fleet
            .pools
            .iter()
            .map(|cfg| {
                let p = self
                    .pools
                    .iter()
                    .find(|p| p.name == cfg.name)
                    .expect("every pool resolves");
                (cfg, p)
            })
            .collect()
    }

    /// Samples `timeseries.csv` at most `max_samples` times over `span_s`
    /// seconds, coarsening `[metrics] timeseries_interval_s` when needed
    /// (the run's own sampling: its pools' plans keep theirs).
    pub fn cap_timeseries_samples(&mut self, span_s: f64, max_samples: f64) {
        let m = &mut self.file.metrics;
        if span_s.is_finite() && span_s / m.timeseries_interval_s > max_samples {
            m.timeseries_interval_s = span_s / max_samples;
        }
    }
}
