//! Scenario keys of the fleet's life cycle: `[lifecycle]` (cold-start
//! delays, the standby pool, scale-to-zero, draining), `[autoscale]` (the
//! policy that sets the replica count) and `[failures]` (replica failures
//! and retries). Every section is optional; without them replicas exist
//! for the whole run, as before these keys existed.
//!
//! Defaults come from public figures (docs/autoscaling.md, "Replica life cycle"):
//! Kubernetes' HPA (sync period 15 s, tolerance 0.1, scale-down
//! stabilization 300 s, scale-up 0 s), its pod termination grace period
//! (30 s), Knative's KPA (scale-to-zero grace period 30 s), and GPU node and
//! vLLM start-up times reported by their users.

use crate::scenario::ranges::MAX_SECONDS;
use serde::{Deserialize, Serialize};

type Invalid = (String, String);

/// `[lifecycle]`: how long a replica takes to start, and what a warm
/// standby replica costs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LifecycleCfg {
    /// Mean time to acquire a GPU node and start the serving container,
    /// seconds (instance launch, join, GPU driver and device plugin, image
    /// pull). Default 180 s: GPU nodes take minutes to join and a
    /// multi-GB vLLM image pull adds more (Karpenter GPU guides report up to
    /// ten minutes for a 10 GB image; cluster-autoscaler's gpu.go waits up
    /// to 15 minutes for a new node's GPUs to become allocatable).
    #[serde(default = "d_provision_s")]
    pub provision_s: f64,
    /// Coefficient of variation of the provisioning delay (log-normal);
    /// 0 makes it exactly `provision_s`.
    #[serde(default)]
    pub provision_cv: f64,
    /// Bandwidth of the weights' remote source (object store, model
    /// registry) into one node, GB/s. Default 1.25 GB/s: a 10 Gb/s stream.
    #[serde(default = "d_remote_gbyte_s")]
    pub weights_remote_gbyte_s: f64,
    /// Bandwidth of a node-local weight cache (NVMe), GB/s. Default 3 GB/s:
    /// one PCIe 4.0 NVMe drive's sequential read.
    #[serde(default = "d_cache_gbyte_s")]
    pub weights_cache_gbyte_s: f64,
    /// Probability that a starting replica finds its weights in the
    /// node-local cache (seeded stream `lifecycle`). Default 0: every node
    /// is fresh.
    #[serde(default)]
    pub cache_hit_probability: f64,
    /// Engine start after the weights are in GPU memory: profiling, KV
    /// allocation, torch.compile and CUDA-graph capture, seconds. Default
    /// 60 s (vLLM users report CUDA-graph capture alone at ~40 s and the
    /// API ready ~130 s after launch; cached torch.compile artefacts shorten
    /// it).
    #[serde(default = "d_warmup_s")]
    pub warmup_s: f64,
    /// Warm standby replicas (weights loaded, not serving) kept beside the
    /// serving fleet. A scale-up takes them first; each is replaced by a
    /// cold start.
    #[serde(default)]
    pub standby: u32,
    /// Seconds for a standby replica to take traffic: the load balancer's
    /// readiness check sees it. Default 5 s: half a Kubernetes readiness
    /// probe period (`periodSeconds` defaults to 10).
    #[serde(default = "d_standby_activate_s")]
    pub standby_activate_s: f64,
    /// Fraction of a serving replica's price a standby replica is billed
    /// (1 = a full GPU; lower for a pool shared or sold as warm capacity).
    #[serde(default = "d_one")]
    pub standby_cost_fraction: f64,
    /// A draining replica finishes its requests for at most this long, then
    /// hands the rest back to be retried elsewhere. Default 30 s,
    /// Kubernetes' `terminationGracePeriodSeconds`.
    #[serde(default = "d_drain_timeout_s")]
    pub drain_timeout_s: f64,
    /// Knative's activator: when no replica is ready, arrivals wait in a
    /// buffer until one is (instead of being rejected with
    /// `no_ready_replica`). Required for `autoscale.min_replicas = 0`.
    #[serde(default)]
    pub activator: bool,
    /// Most requests the activator holds; beyond it arrivals are rejected
    /// with `queue_full`. 0 = unbounded.
    #[serde(default)]
    pub activator_capacity: u32,
}

fn d_provision_s() -> f64 {
    180.0
}
fn d_remote_gbyte_s() -> f64 {
    1.25
}
fn d_cache_gbyte_s() -> f64 {
    3.0
}
fn d_warmup_s() -> f64 {
    60.0
}
fn d_standby_activate_s() -> f64 {
    5.0
}
fn d_one() -> f64 {
    1.0
}
fn d_drain_timeout_s() -> f64 {
    30.0
}

impl Default for LifecycleCfg {
    fn default() -> Self {
        LifecycleCfg {
            provision_s: d_provision_s(),
            provision_cv: 0.0,
            weights_remote_gbyte_s: d_remote_gbyte_s(),
            weights_cache_gbyte_s: d_cache_gbyte_s(),
            cache_hit_probability: 0.0,
            warmup_s: d_warmup_s(),
            standby: 0,
            standby_activate_s: d_standby_activate_s(),
            standby_cost_fraction: 1.0,
            drain_timeout_s: d_drain_timeout_s(),
            activator: false,
            activator_capacity: 0,
        }
    }
}

/// The autoscaler a scenario names (`autoscale.policy`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum AutoscalePolicy {
    /// The replica count stays `fleet.replicas` (failed replicas are
    /// replaced).
    #[default]
    Fixed,
    /// Kubernetes HPA on one metric.
    Target,
    /// A capacity plan: replica counts at given times.
    Schedule,
}

impl AutoscalePolicy {
    pub fn name(self) -> &'static str {
        match self {
            AutoscalePolicy::Fixed => "fixed",
            AutoscalePolicy::Target => "target",
            AutoscalePolicy::Schedule => "schedule",
        }
    }
}

/// The per-replica metric a `target` autoscaler holds at its target.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ScaleMetric {
    /// Requests waiting (queued or swapped) per replica, plus those held by
    /// the activator (vLLM's `num_requests_waiting`, the KServe/llm-d
    /// autoscaling signal).
    #[default]
    QueueDepth,
    /// Requests in the running batch per replica (`num_requests_running`;
    /// Knative's concurrency).
    Running,
    /// Fraction of KV blocks in active use (`kv_cache_usage`), 0..1.
    KvUse,
    /// Fraction of time the replica ran iterations over the last scrape
    /// interval (GPU duty cycle, DCGM `GPU_UTIL`), 0..1.
    Utilization,
    /// Arrivals per second per replica over the last scrape interval
    /// (Knative's `rps`).
    Rps,
}

impl ScaleMetric {
    pub fn name(self) -> &'static str {
        match self {
            ScaleMetric::QueueDepth => "queue_depth",
            ScaleMetric::Running => "running",
            ScaleMetric::KvUse => "kv_use",
            ScaleMetric::Utilization => "utilization",
            ScaleMetric::Rps => "rps",
        }
    }
}

/// One step of a `schedule` autoscaler: from `at_s` on, `replicas`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleStep {
    pub at_s: f64,
    pub replicas: u32,
}

/// `[autoscale]`: the policy that sets how many replicas the fleet asks for.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AutoscaleCfg {
    #[serde(default)]
    pub policy: AutoscalePolicy,
    /// Fewest replicas asked for (0 needs `lifecycle.activator`). Default:
    /// `fleet.replicas`' value is the starting count; min defaults to 1.
    #[serde(default = "d_min_replicas")]
    pub min_replicas: u32,
    /// Most replicas asked for (the fleet's slots). Default: `fleet.replicas`.
    #[serde(default)]
    pub max_replicas: Option<u32>,
    /// How often the autoscaler decides, seconds (HPA's
    /// `--horizontal-pod-autoscaler-sync-period`, 15 s).
    #[serde(default = "d_sync_s")]
    pub sync_period_s: f64,
    /// How often replicas' metrics are scraped, seconds: a decision acts on
    /// the last scrape (metrics-server's resolution, 15 s).
    #[serde(default = "d_sync_s")]
    pub scrape_interval_s: f64,
    /// `target`: the metric held at `target_value`.
    #[serde(default)]
    pub metric: ScaleMetric,
    /// `target`: the metric's per-replica target value.
    #[serde(default)]
    pub target_value: Option<f64>,
    /// `target`: no change while metric/target is within 1 ± tolerance
    /// (HPA's `--horizontal-pod-autoscaler-tolerance`, 0.1).
    #[serde(default = "d_tolerance")]
    pub tolerance: f64,
    /// `target`: a scale-up takes the lowest recommendation of this window,
    /// seconds (HPA `behavior.scaleUp.stabilizationWindowSeconds`, 0).
    #[serde(default)]
    pub scale_up_stabilization_s: f64,
    /// `target`: a scale-down takes the highest recommendation of this
    /// window, seconds (HPA's default 300).
    #[serde(default = "d_down_window_s")]
    pub scale_down_stabilization_s: f64,
    /// No scale-up within this long of the last scale change, seconds.
    #[serde(default)]
    pub scale_up_cooldown_s: f64,
    /// No scale-down within this long of the last scale change, seconds.
    #[serde(default)]
    pub scale_down_cooldown_s: f64,
    /// `schedule`: the replica counts over time, in order of `at_s`.
    #[serde(default)]
    pub steps: Vec<ScheduleStep>,
}

fn d_min_replicas() -> u32 {
    1
}
fn d_sync_s() -> f64 {
    15.0
}
fn d_tolerance() -> f64 {
    0.1
}
fn d_down_window_s() -> f64 {
    300.0
}

/// `[failures]`: replicas fail and are repaired through the cold-start path.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailureCfg {
    /// Mean time between failures of one replica, seconds (exponential
    /// gaps from the seeded stream `failures`).
    #[serde(default)]
    pub mtbf_s: Option<f64>,
    /// Given failures: `[[failures.at]]` with `time_s` and `replica`.
    #[serde(default)]
    pub at: Vec<FailureAt>,
    /// Seconds from a failure until the replacement starts its cold start
    /// (detection and node replacement). Default 0.
    #[serde(default)]
    pub repair_s: f64,
    /// Times one request is retried on another replica after the replica
    /// serving it failed; beyond that it fails with `replica_failed`.
    /// 0 turns retries off. Default 1.
    #[serde(default = "d_retries")]
    pub max_retries: u32,
}

fn d_retries() -> u32 {
    1
}

/// One given failure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailureAt {
    pub time_s: f64,
    pub replica: u32,
}

fn seconds(key: &str, v: f64, allow_zero: bool) -> Result<(), Invalid> {
    let ok = v.is_finite() && v <= MAX_SECONDS && (v > 0.0 || (allow_zero && v == 0.0));
    if ok {
        Ok(())
    } else {
        let lo = if allow_zero { "≥ 0" } else { "> 0" };
        Err((
            key.into(),
            format!("must be a number of seconds {lo} and ≤ {MAX_SECONDS:e}, got {v}"),
        ))
    }
}

/// Shortest decision and scrape period, seconds (a millisecond, as for
/// `metrics.timeseries_interval_s`): each period is an event, so a shorter
/// one makes a run of any length spin through billions of them.
pub const MIN_PERIOD_S: f64 = 1e-3;
/// Shortest mean time between failures of one replica, seconds: shorter
/// ones fail replicas faster than any cold start can replace them.
pub const MIN_MTBF_S: f64 = 1.0;
/// Most replica slots one fleet or pool keeps (the autoscaler's maximum
/// plus the standby pool), as `fleet.replicas` allows.
pub const MAX_SLOTS: u32 = 100_000;

fn period(key: &str, v: f64, min: f64) -> Result<(), Invalid> {
    if v.is_finite() && (min..=MAX_SECONDS).contains(&v) {
        Ok(())
    } else {
        Err((
            key.into(),
            format!(
                "must be a number of seconds in [{min:e}, {MAX_SECONDS:e}], got {}",
                crate::scenario::ranges::num(v)
            ),
        ))
    }
}

fn bandwidth(key: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() && (1e-6..=1e6).contains(&v) {
        Ok(())
    } else {
        Err((
            key.into(),
            format!("must be a bandwidth in GB/s between 1e-6 and 1e6, got {v}"),
        ))
    }
}

/// Replica slots a fleet (or pool) with a life cycle keeps: room for the
/// autoscaler's maximum plus the standby pool; `None` without a life cycle.
pub fn slots(f: &crate::scenario::ScenarioFile) -> Option<u32> {
    if f.lifecycle.is_none() && f.autoscale.is_none() && f.failures.is_none() {
        return None;
    }
    let start = f.fleet.replicas;
    let max = f
        .autoscale
        .as_ref()
        .and_then(|a| a.max_replicas)
        .unwrap_or(start)
        .max(start);
    Some(max + f.lifecycle.as_ref().map_or(0, |l| l.standby))
}

/// Checks `[lifecycle]`, `[autoscale]` and `[failures]` against each other
/// and `fleet.replicas`; errors carry the dotted key path.
pub fn validate(f: &crate::scenario::ScenarioFile) -> Result<(), Invalid> {
    if !f.fleet.pools.is_empty() {
        // Each pool is validated as a scenario of its own, with the tables
        // it inherits or sets (`pool_plan::resolve`); only the given
        // failures, which name the fleet's replicas, are checked here (their
        // replica numbers once the pools' slots are known).
        if let Some(fl) = &f.failures {
            for (i, a) in fl.at.iter().enumerate() {
                seconds(&format!("failures.at[{i}].time_s"), a.time_s, true)?;
            }
        }
        return Ok(());
    }
    if let Some(l) = &f.lifecycle {
        seconds("lifecycle.provision_s", l.provision_s, true)?;
        if !(l.provision_cv.is_finite() && (0.0..=10.0).contains(&l.provision_cv)) {
            return Err((
                "lifecycle.provision_cv".into(),
                format!("must be between 0 and 10, got {}", l.provision_cv),
            ));
        }
        bandwidth("lifecycle.weights_remote_gbyte_s", l.weights_remote_gbyte_s)?;
        bandwidth("lifecycle.weights_cache_gbyte_s", l.weights_cache_gbyte_s)?;
        if !(0.0..=1.0).contains(&l.cache_hit_probability) {
            return Err((
                "lifecycle.cache_hit_probability".into(),
                format!("must be between 0 and 1, got {}", l.cache_hit_probability),
            ));
        }
        seconds("lifecycle.warmup_s", l.warmup_s, true)?;
        seconds("lifecycle.standby_activate_s", l.standby_activate_s, true)?;
        seconds("lifecycle.drain_timeout_s", l.drain_timeout_s, true)?;
        if !(0.0..=1.0).contains(&l.standby_cost_fraction) {
            return Err((
                "lifecycle.standby_cost_fraction".into(),
                format!(
                    "must be between 0 and 1 (a share of a serving replica's price), got {}",
                    l.standby_cost_fraction
                ),
            ));
        }
        let serving = f
            .autoscale
            .as_ref()
            .and_then(|a| a.max_replicas)
            .unwrap_or(f.fleet.replicas)
            .max(f.fleet.replicas);
        if l.standby as u64 + serving as u64 > MAX_SLOTS as u64 {
            return Err((
                "lifecycle.standby".into(),
                format!(
                    "at most {} here: the {serving} serving replicas (fleet.replicas or \
                     autoscale.max_replicas) and the standby pool make at most {MAX_SLOTS} \
                     replica slots, got {}",
                    MAX_SLOTS.saturating_sub(serving),
                    l.standby
                ),
            ));
        }
    }
    let activator = f.lifecycle.as_ref().is_some_and(|l| l.activator);
    if let Some(a) = &f.autoscale {
        let max = a.max_replicas.unwrap_or(f.fleet.replicas);
        if max > 100_000 {
            return Err(("autoscale.max_replicas".into(), "at most 100000".into()));
        }
        if max < 1 {
            return Err(("autoscale.max_replicas".into(), "must be at least 1".into()));
        }
        if a.min_replicas > max {
            return Err((
                "autoscale.min_replicas".into(),
                format!("{} is above max_replicas {max}", a.min_replicas),
            ));
        }
        if f.fleet.replicas > max || f.fleet.replicas < a.min_replicas {
            return Err((
                "fleet.replicas".into(),
                format!(
                    "the starting count {} must lie within autoscale.min_replicas {} and max_replicas {max}",
                    f.fleet.replicas, a.min_replicas
                ),
            ));
        }
        if a.min_replicas == 0 && !activator {
            return Err((
                "autoscale.min_replicas".into(),
                "0 (scale to zero) needs `lifecycle.activator = true` to hold arrivals until a replica is ready".into(),
            ));
        }
        period("autoscale.sync_period_s", a.sync_period_s, MIN_PERIOD_S)?;
        period(
            "autoscale.scrape_interval_s",
            a.scrape_interval_s,
            MIN_PERIOD_S,
        )?;
        seconds(
            "autoscale.scale_up_stabilization_s",
            a.scale_up_stabilization_s,
            true,
        )?;
        seconds(
            "autoscale.scale_down_stabilization_s",
            a.scale_down_stabilization_s,
            true,
        )?;
        seconds("autoscale.scale_up_cooldown_s", a.scale_up_cooldown_s, true)?;
        seconds(
            "autoscale.scale_down_cooldown_s",
            a.scale_down_cooldown_s,
            true,
        )?;
        if !(a.tolerance.is_finite() && (0.0..1.0).contains(&a.tolerance)) {
            return Err((
                "autoscale.tolerance".into(),
                format!("must be in [0, 1), got {}", a.tolerance),
            ));
        }
        match a.policy {
            AutoscalePolicy::Target => match a.target_value {
                None => {
                    return Err((
                        "autoscale.target_value".into(),
                        format!(
                            "`target` needs the per-replica value of `{}` to hold",
                            a.metric.name()
                        ),
                    ))
                }
                Some(v) => {
                    let fraction =
                        matches!(a.metric, ScaleMetric::KvUse | ScaleMetric::Utilization);
                    let ok = v.is_finite() && v > 0.0 && (!fraction || v <= 1.0) && v <= 1e7;
                    if !ok {
                        let allowed = if fraction {
                            "in (0, 1]"
                        } else {
                            "> 0 and ≤ 1e7"
                        };
                        return Err((
                            "autoscale.target_value".into(),
                            format!("for `{}` must be {allowed}, got {v}", a.metric.name()),
                        ));
                    }
                }
            },
            AutoscalePolicy::Schedule => {
                if a.steps.is_empty() {
                    return Err((
                        "autoscale.steps".into(),
                        "`schedule` needs at least one step ({ at_s, replicas })".into(),
                    ));
                }
                let mut last = -1.0;
                for (i, s) in a.steps.iter().enumerate() {
                    seconds(&format!("autoscale.steps[{i}].at_s"), s.at_s, true)?;
                    if s.at_s <= last {
                        return Err((
                            format!("autoscale.steps[{i}].at_s"),
                            format!(
                                "steps must be in increasing order of at_s, got {} after {last}",
                                s.at_s
                            ),
                        ));
                    }
                    last = s.at_s;
                    if s.replicas < a.min_replicas || s.replicas > max {
                        return Err((
                            format!("autoscale.steps[{i}].replicas"),
                            format!(
                                "{} is outside min_replicas {} ..= max_replicas {max}",
                                s.replicas, a.min_replicas
                            ),
                        ));
                    }
                }
            }
            AutoscalePolicy::Fixed => {}
        }
        if a.policy != AutoscalePolicy::Target && a.target_value.is_some() {
            return Err((
                "autoscale.target_value".into(),
                format!(
                    "only the `target` policy takes a target (policy is `{}`)",
                    a.policy.name()
                ),
            ));
        }
        if a.policy != AutoscalePolicy::Schedule && !a.steps.is_empty() {
            return Err((
                "autoscale.steps".into(),
                format!(
                    "only the `schedule` policy takes steps (policy is `{}`)",
                    a.policy.name()
                ),
            ));
        }
    }
    if let Some(fl) = &f.failures {
        if let Some(m) = fl.mtbf_s {
            period("failures.mtbf_s", m, MIN_MTBF_S)?;
            if f.horizon.duration_s.is_none() {
                return Err((
                    "failures.mtbf_s".into(),
                    "random failures never stop: give `horizon.duration_s` to end the run".into(),
                ));
            }
        }
        seconds("failures.repair_s", fl.repair_s, true)?;
        let slots = f
            .autoscale
            .as_ref()
            .and_then(|a| a.max_replicas)
            .unwrap_or(f.fleet.replicas);
        for (i, a) in fl.at.iter().enumerate() {
            seconds(&format!("failures.at[{i}].time_s"), a.time_s, true)?;
            if a.replica >= slots {
                return Err((
                    format!("failures.at[{i}].replica"),
                    format!("no replica {} (the fleet has slots 0..{slots})", a.replica),
                ));
            }
        }
        if fl.max_retries > 100 {
            return Err((
                "failures.max_retries".into(),
                format!("at most 100, got {}", fl.max_retries),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;

    const BASE: &str = r#"
name = "t"
[horizon]
duration_s = 60
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
replicas = 2
[workload]
arrival = { process = "poisson", rate = 5.0 }
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
"#;

    fn key_of(extra: &str) -> (String, String) {
        let e = Scenario::from_toml_str(&format!("{BASE}{extra}"), "s.toml").unwrap_err();
        (e.key, e.message)
    }

    #[test]
    fn bad_lifecycle_values_name_their_key() {
        let cases = [
            ("[lifecycle]\nprovision_s = -1", "lifecycle.provision_s"),
            ("[lifecycle]\nprovision_cv = 11", "lifecycle.provision_cv"),
            ("[lifecycle]\nweights_remote_gbyte_s = 0", "lifecycle.weights_remote_gbyte_s"),
            ("[lifecycle]\nweights_cache_gbyte_s = inf", "lifecycle.weights_cache_gbyte_s"),
            ("[lifecycle]\ncache_hit_probability = 1.5", "lifecycle.cache_hit_probability"),
            ("[lifecycle]\nwarmup_s = nan", "lifecycle.warmup_s"),
            ("[lifecycle]\nstandby_cost_fraction = 2", "lifecycle.standby_cost_fraction"),
            ("[lifecycle]\ndrain_timeout_s = -5", "lifecycle.drain_timeout_s"),
            ("[lifecycle]\nstandby = 200000", "lifecycle.standby"),
            ("[lifecycle]\nwarm_s = 3", "lifecycle.warm_s"),
            ("[autoscale]\npolicy = \"target\"", "autoscale.target_value"),
            ("[autoscale]\npolicy = \"target\"\nmetric = \"kv_use\"\ntarget_value = 2", "autoscale.target_value"),
            ("[autoscale]\npolicy = \"magic\"", "autoscale.policy"),
            ("[autoscale]\nmetric = \"gpu\"", "autoscale.metric"),
            ("[autoscale]\nmax_replicas = 1", "fleet.replicas"),
            ("[autoscale]\nmin_replicas = 3\nmax_replicas = 2", "autoscale.min_replicas"),
            ("[autoscale]\nmin_replicas = 0", "autoscale.min_replicas"),
            ("[autoscale]\nsync_period_s = 0", "autoscale.sync_period_s"),
            ("[autoscale]\nscrape_interval_s = -1", "autoscale.scrape_interval_s"),
            ("[autoscale]\ntolerance = 1", "autoscale.tolerance"),
            ("[autoscale]\nscale_down_stabilization_s = -1", "autoscale.scale_down_stabilization_s"),
            ("[autoscale]\npolicy = \"schedule\"", "autoscale.steps"),
            (
                "[autoscale]\npolicy = \"schedule\"\nmax_replicas = 4\nsteps = [{ at_s = 10, replicas = 3 }, { at_s = 5, replicas = 2 }]",
                "autoscale.steps[1].at_s",
            ),
            (
                "[autoscale]\npolicy = \"schedule\"\nsteps = [{ at_s = 10, replicas = 9 }]",
                "autoscale.steps[0].replicas",
            ),
            ("[autoscale]\nsteps = [{ at_s = 10, replicas = 1 }]", "autoscale.steps"),
            ("[autoscale]\ntarget_value = 3", "autoscale.target_value"),
            ("[failures]\nmtbf_s = 0", "failures.mtbf_s"),
            ("[failures]\nrepair_s = -1", "failures.repair_s"),
            ("[failures]\nmax_retries = 1000", "failures.max_retries"),
            ("[failures]\nat = [{ time_s = 5, replica = 2 }]", "failures.at[0].replica"),
            ("[failures]\nat = [{ time_s = -5, replica = 0 }]", "failures.at[0].time_s"),
        ];
        for (extra, key) in cases {
            let (k, m) = key_of(extra);
            assert_eq!(k, key, "{extra}: {m}");
        }
    }

    #[test]
    fn pools_take_the_life_cycle_per_pool() {
        let pooled = BASE.replace(
            "[fleet]\nreplicas = 2\n",
            "[fleet]\n[[fleet.pools]]\nname = \"a\"\nreplicas = 2\n[[fleet.pools]]\nname = \"b\"\nreplicas = 1\n[fleet.pools.autoscale]\nmax_replicas = 3\n",
        );
        let s = Scenario::from_toml_str(&format!("{pooled}[lifecycle]\nstandby = 1\n"), "s.toml")
            .unwrap();
        // a: 2 + 1 standby; b: max 3 + 1 standby.
        let slots: Vec<u32> = s.pools.iter().map(|p| p.replicas).collect();
        assert_eq!(slots, vec![3, 4]);
        assert_eq!(s.pools[1].first, 3);
        let cases = [
            (
                format!("{pooled}[fleet.pools.lifecycle]\nwarmup_s = -1\n"),
                "fleet.pools[1].lifecycle.warmup_s",
            ),
            (
                pooled.replace("max_replicas = 3", "max_replicas = 0"),
                "fleet.pools[1].autoscale.max_replicas",
            ),
            (
                format!("{pooled}[failures]\nat = [{{ time_s = 1, replica = 5 }}]\n"),
                "failures.at[0].replica",
            ),
        ];
        for (text, key) in &cases {
            let e = Scenario::from_toml_str(text, "s.toml").unwrap_err();
            assert_eq!(&e.key, key, "{}", e.message);
        }
        let ok = format!("{pooled}[failures]\nat = [{{ time_s = 1, replica = 4 }}]\n");
        assert!(Scenario::from_toml_str(&ok, "s.toml").is_ok());
        let pd = BASE.replace(
            "[fleet]\nreplicas = 2\n",
            "[fleet]\n[[fleet.pools]]\nname = \"p\"\nrole = \"prefill\"\nreplicas = 1\n[[fleet.pools]]\nname = \"d\"\nrole = \"decode\"\nreplicas = 1\n",
        );
        let e = Scenario::from_toml_str(&format!("{pd}[autoscale]\nmax_replicas = 2\n"), "s.toml")
            .unwrap_err();
        assert_eq!(e.key, "autoscale", "{}", e.message);
        assert!(e.message.contains("colocated"), "{}", e.message);
    }

    #[test]
    fn random_failures_need_a_duration_and_scale_to_zero_needs_the_activator() {
        let text = BASE.replace("duration_s = 60", "requests = 10");
        let e = Scenario::from_toml_str(&format!("{text}[failures]\nmtbf_s = 100\n"), "s.toml")
            .unwrap_err();
        assert_eq!(e.key, "failures.mtbf_s");
        assert!(e.message.contains("duration_s"), "{}", e.message);
        let (_, m) = key_of("[autoscale]\nmin_replicas = 0");
        assert!(m.contains("activator"), "{m}");
        let ok = format!(
            "{}[lifecycle]\nactivator = true\n[autoscale]\nmin_replicas = 0\nmax_replicas = 2\n",
            BASE.replace("replicas = 2", "replicas = 0")
        );
        assert!(Scenario::from_toml_str(&ok, "s.toml").is_ok());
    }
}
