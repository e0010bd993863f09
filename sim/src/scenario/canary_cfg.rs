//! `[canary]`: a progressive rollout of a second model version. The canary
//! is a pool of `[[fleet.pools]]` that differs from the baseline pool by a
//! hardware preset, an engine setting (e.g. `runtime`) or a calibration
//! profile. Its traffic share follows `steps`, like Argo Rollouts'
//! `setWeight` + `pause { duration }` steps, and a gate compares it with the
//! baseline at the end of each step, like Flagger's analysis (`interval`,
//! `threshold`, `maxWeight`/`stepWeight`) and Kayenta's canary judge.
//! See docs/canary.md.

use serde::{Deserialize, Serialize};

/// One rollout step: the canary's share of new requests, in percent, held
/// for `hold_s` seconds before the gate judges it (Argo Rollouts
/// `- setWeight: 20` then `- pause: {duration: 5m}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepCfg {
    /// Percent of requests split to the canary, 1 to 100.
    pub weight: u32,
    /// Seconds the step runs before its gate, > 0.
    pub hold_s: f64,
}

/// Tolerances of the gate: how much worse than the baseline the canary may
/// be before a check fails. Latencies are relative (Kayenta judges the
/// canary against the baseline, not against a fixed number); the error
/// rate is an absolute difference, since a relative margin over a baseline
/// with no errors would fail on the first one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToleranceCfg {
    /// Canary TTFT percentile ≤ baseline's × (1 + ttft).
    #[serde(default = "default_latency_tolerance")]
    pub ttft: f64,
    /// Canary TPOT percentile ≤ baseline's × (1 + tpot).
    #[serde(default = "default_latency_tolerance")]
    pub tpot: f64,
    /// Canary end-to-end latency percentile ≤ baseline's × (1 + e2e).
    #[serde(default = "default_latency_tolerance")]
    pub e2e: f64,
    /// Canary rejection rate ≤ baseline's + error_rate (a fraction, 0 to 1).
    #[serde(default = "default_error_tolerance")]
    pub error_rate: f64,
}

/// 20 %: a latency regression of a fifth is what the examples and docs
/// treat as a failed release; it is a policy choice, so state your own.
fn default_latency_tolerance() -> f64 {
    0.2
}

/// One percentage point, Flagger's `request-success-rate` check at its
/// documented threshold of 99 %.
fn default_error_tolerance() -> f64 {
    0.01
}

impl Default for ToleranceCfg {
    fn default() -> Self {
        ToleranceCfg {
            ttft: default_latency_tolerance(),
            tpot: default_latency_tolerance(),
            e2e: default_latency_tolerance(),
            error_rate: default_error_tolerance(),
        }
    }
}

/// `[canary]`: which pool is the baseline and which the canary, the
/// traffic steps, and the gate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CanaryCfg {
    /// Name of the pool serving the current version.
    pub baseline: String,
    /// Name of the pool serving the new version.
    pub canary: String,
    /// A third pool running the baseline's version, sized like the canary,
    /// that takes the same share of traffic as the canary (out of the
    /// baseline's) while the rollout runs; the gate then compares the
    /// canary with it instead of with the baseline. Spinnaker's canary
    /// best practices: compare against a baseline of the same size and
    /// traffic, deployed at the same time, not against production, whose
    /// load differs. Weights are then at most 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<String>,
    /// When the rollout begins, seconds; before it the canary gets nothing.
    #[serde(default)]
    pub start_s: f64,
    /// Strictly increasing weights; passing the last step's gate promotes.
    pub steps: Vec<StepCfg>,
    /// Failed checks before a rollback (Flagger's `threshold`).
    #[serde(default = "default_max_failed_checks")]
    pub max_failed_checks: u32,
    /// Fewest requests of each version in a window for a metric to be judged;
    /// with fewer the step is held for another `hold_s`.
    #[serde(default = "default_min_samples")]
    pub min_samples: u32,
    /// Which latency percentile the gate compares, (0, 100].
    #[serde(default = "default_percentile")]
    pub percentile: f64,
    #[serde(default)]
    pub tolerance: ToleranceCfg,
}

/// Flagger's default `threshold` is given per canary; one failed check
/// rolling back is Argo Rollouts' default (`failureLimit: 0` fails on the
/// first failed measurement).
fn default_max_failed_checks() -> u32 {
    1
}

/// 50 requests: below this a p99 is the maximum of the window or close to
/// it, which one slow request decides.
fn default_min_samples() -> u32 {
    50
}

/// p99, the percentile of Flagger's built-in `request-duration` check.
fn default_percentile() -> f64 {
    99.0
}

type Invalid = (String, String);

/// `servesim check`'s line for the rollout (none without `[canary]`).
pub fn check_lines(f: &crate::scenario::ScenarioFile) -> Vec<String> {
    let Some(c) = &f.canary else {
        return Vec::new();
    };
    let steps: Vec<String> = c
        .steps
        .iter()
        .map(|s| format!("{} % for {} s", s.weight, s.hold_s))
        .collect();
    let t = &c.tolerance;
    let control = c
        .control
        .as_ref()
        .map(|x| format!(" (judged against control {x})"))
        .unwrap_or_default();
    vec![format!(
        "canary     pool {} vs baseline {}{control} from {} s: {}, then promote; gate on p{} TTFT/TPOT/E2E within +{} %/+{} %/+{} % and errors within +{} pt, ≥ {} requests per version, roll back after {} failed check(s)",
        c.canary,
        c.baseline,
        c.start_s,
        steps.join(" → "),
        c.percentile,
        t.ttft * 100.0,
        t.tpot * 100.0,
        t.e2e * 100.0,
        t.error_rate * 100.0,
        c.min_samples,
        c.max_failed_checks
    )]
}

/// Checks `[canary]` against the pools; errors carry the dotted key path.
pub fn validate(f: &crate::scenario::ScenarioFile) -> Result<(), Invalid> {
    let Some(c) = &f.canary else {
        return Ok(());
    };
    let err = |k: &str, m: String| Err((k.to_string(), m));
    for (key, set) in [
        ("lifecycle", f.lifecycle.is_some()),
        ("autoscale", f.autoscale.is_some()),
        ("failures", f.failures.is_some()),
        ("fleet.regions", !f.fleet.regions.is_empty()),
        (
            "fleet.pools.lifecycle",
            f.fleet.pools.iter().any(|p| p.lifecycle.is_some()),
        ),
        (
            "fleet.pools.autoscale",
            f.fleet.pools.iter().any(|p| p.autoscale.is_some()),
        ),
    ] {
        if set {
            return err(
                key,
                "cannot be combined with [canary] yet: the rollout splits traffic between two \
                 fixed pools (leave out this table or [canary])"
                    .into(),
            );
        }
    }
    let pools = &f.fleet.pools;
    let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
    let want = if c.control.is_some() { 3 } else { 2 };
    if pools.len() != want {
        let which = if want == 3 {
            "three [[fleet.pools]], the baseline, the canary and the control"
        } else {
            "two [[fleet.pools]], the baseline and the canary (three with canary.control)"
        };
        return err(
            "canary",
            format!("needs exactly {which}, got {}", pools.len()),
        );
    }
    if let Some(i) = pools
        .iter()
        .position(|p| p.role != crate::scenario::PoolRole::Colocated)
    {
        return err(
            &format!("fleet.pools[{i}].role"),
            "a canary rollout splits traffic between colocated pools; prefill/decode pools are not modelled with [canary]".into(),
        );
    }
    let named = [
        ("canary.baseline", &c.baseline),
        ("canary.canary", &c.canary),
    ];
    for (key, name) in named
        .into_iter()
        .chain(c.control.as_ref().map(|x| ("canary.control", x)))
    {
        if !names.contains(&name.as_str()) {
            return err(
                key,
                format!("no pool is named {name:?}; the pools are {names:?}"),
            );
        }
    }
    if c.baseline == c.canary {
        return err(
            "canary.canary",
            format!(
                "must name the other pool than canary.baseline ({:?})",
                c.baseline
            ),
        );
    }
    if let Some(x) = &c.control {
        if x == &c.baseline || x == &c.canary {
            return err(
                "canary.control",
                format!("must name the third pool, not the baseline or the canary, got {x:?}"),
            );
        }
    }
    let max_s = crate::scenario::ranges::MAX_SECONDS;
    if !(c.start_s.is_finite() && (0.0..=max_s).contains(&c.start_s)) {
        return err(
            "canary.start_s",
            format!(
                "must be a number of seconds in [0, {max_s:e}], got {}",
                crate::scenario::ranges::num(c.start_s)
            ),
        );
    }
    if c.steps.is_empty() {
        return err(
            "canary.steps",
            "give at least one step, e.g. steps = [{ weight = 10, hold_s = 300 }]".into(),
        );
    }
    let mut last = 0;
    for (i, s) in c.steps.iter().enumerate() {
        if !(1..=100).contains(&s.weight) {
            return err(
                &format!("canary.steps[{i}].weight"),
                format!("must be a percent from 1 to 100, got {}", s.weight),
            );
        }
        if s.weight <= last {
            return err(
                &format!("canary.steps[{i}].weight"),
                format!(
                    "weights must increase step by step, got {} after {last}",
                    s.weight
                ),
            );
        }
        if c.control.is_some() && s.weight > 50 {
            return err(
                &format!("canary.steps[{i}].weight"),
                format!(
                    "with canary.control, at most 50 (the control takes as much as the canary), got {}",
                    s.weight
                ),
            );
        }
        last = s.weight;
        if !(s.hold_s.is_finite() && s.hold_s > 0.0 && s.hold_s <= 1e9) {
            return err(
                &format!("canary.steps[{i}].hold_s"),
                format!(
                    "must be a number of seconds > 0 and ≤ 1e9, got {}",
                    s.hold_s
                ),
            );
        }
    }
    if c.max_failed_checks == 0 {
        return err(
            "canary.max_failed_checks",
            "must be at least 1 (1: the first failed check rolls back)".into(),
        );
    }
    if c.min_samples == 0 {
        return err("canary.min_samples", "must be at least 1".into());
    }
    if !(c.percentile.is_finite() && c.percentile > 0.0 && c.percentile <= 100.0) {
        return err(
            "canary.percentile",
            format!("must be a percentile in (0, 100], got {}", c.percentile),
        );
    }
    let t = &c.tolerance;
    for (key, v) in [
        ("canary.tolerance.ttft", t.ttft),
        ("canary.tolerance.tpot", t.tpot),
        ("canary.tolerance.e2e", t.e2e),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return err(
                key,
                format!("must be a relative tolerance ≥ 0 (0.2 = 20 % slower allowed), got {v}"),
            );
        }
    }
    if !(t.error_rate.is_finite() && (0.0..=1.0).contains(&t.error_rate)) {
        return err(
            "canary.tolerance.error_rate",
            format!(
                "must be a fraction from 0 to 1 (0.01 = one percentage point more rejections allowed), got {}",
                t.error_rate
            ),
        );
    }
    Ok(())
}
