//! Scenario types of multi-tenancy: the `[[tenants]]` list (each tenant's
//! workload, SLOs, priority class, weight, admission limits and retry
//! behaviour), the `[fairness]` table (how a replica orders its waiting
//! queue) and the `[admission]` table (fleet-wide limits), with their
//! validation. The runtime lives in `crate::tenancy`.

use super::{positive, Invalid, ScenarioFile, SloCfg, TraceFormat, WorkloadCfg};
use serde::{Deserialize, Serialize};

/// One tenant of a shared serving platform (`[[tenants]]`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantCfg {
    /// Names the tenant in results and in its random streams
    /// (`tenant/<name>/...`).
    pub name: String,
    /// The tenant's own request stream (same keys as `[workload]`). Omit it
    /// on every tenant to split the single `[workload]` among tenants instead.
    #[serde(default)]
    pub workload: Option<WorkloadCfg>,
    /// With a shared `[workload]` trace that has a `tenant_column`: the
    /// column values that belong to this tenant. One tenant may leave it out
    /// and take every value no other tenant names.
    #[serde(default)]
    pub trace_tenants: Option<Vec<String>>,
    /// Latency targets of this tenant (default: the scenario's `[slo]`).
    #[serde(default)]
    pub slo: Option<SloCfg>,
    /// Priority class: `interactive` (0), `batch` (10) or an integer; lower
    /// is more urgent, as vLLM's `priority` request field.
    #[serde(default)]
    pub priority: PriorityClass,
    /// Share of service under weighted fairness (drr, vtc, wfq); > 0.
    #[serde(default = "one_f64")]
    pub weight: f64,
    /// Admission limits, checked before the request is queued.
    #[serde(default)]
    pub limits: LimitsCfg,
    /// Rejected requests come back after a back-off (closed-loop clients
    /// that retry on HTTP 429/503).
    #[serde(default)]
    pub retry: Option<RetryCfg>,
}

fn one_f64() -> f64 {
    1.0
}

/// A priority class: a name or a number (lower = more urgent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum PriorityClass {
    Named(NamedClass),
    Level(i64),
}

/// The named priority classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamedClass {
    Interactive,
    Batch,
}

impl<'de> Deserialize<'de> for PriorityClass {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PriorityClass;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"interactive\", \"batch\" or an integer level (lower is more urgent)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PriorityClass, E> {
                Ok(PriorityClass::Level(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PriorityClass, E> {
                match v {
                    "interactive" => Ok(PriorityClass::Named(NamedClass::Interactive)),
                    "batch" => Ok(PriorityClass::Named(NamedClass::Batch)),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl Default for PriorityClass {
    fn default() -> Self {
        PriorityClass::Named(NamedClass::Interactive)
    }
}

impl PriorityClass {
    /// The class as a number: lower is served first.
    pub fn level(self) -> i64 {
        match self {
            PriorityClass::Named(NamedClass::Interactive) => 0,
            PriorityClass::Named(NamedClass::Batch) => 10,
            PriorityClass::Level(n) => n,
        }
    }
}

/// What a token bucket on tokens charges for a request's output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputCharge {
    /// Prompt + requested output tokens are charged at admission.
    #[default]
    Requested,
    /// The prompt is charged at admission, the output tokens actually
    /// generated when the request ends (the bucket may go into debt).
    Actual,
}

/// Per-tenant admission limits (`[tenants.limits]`); every limit is off
/// unless given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsCfg {
    /// Token bucket on requests: sustained requests per second…
    #[serde(default)]
    pub requests_per_s: Option<f64>,
    /// …and its depth (default: one second's worth, at least 1).
    #[serde(default)]
    pub request_burst: Option<f64>,
    /// Token bucket on tokens (prompt + output): sustained tokens per minute…
    #[serde(default)]
    pub tokens_per_min: Option<f64>,
    /// …and its depth (default: one minute's worth).
    #[serde(default)]
    pub token_burst: Option<f64>,
    /// How output tokens are charged to the token bucket.
    #[serde(default)]
    pub charge_output: OutputCharge,
    /// Most requests of this tenant waiting in replica queues.
    #[serde(default)]
    pub max_queue: Option<u64>,
    /// Most requests of this tenant admitted and not yet ended.
    #[serde(default)]
    pub max_concurrency: Option<u64>,
    /// Reject a request whose predicted TTFT already exceeds the tenant's
    /// TTFT target (needs an SLO).
    #[serde(default)]
    pub shed_on_deadline: bool,
}

/// Retry of rejected requests with exponential back-off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryCfg {
    /// Attempts after the first (≥ 1).
    pub max_retries: u32,
    /// Wait before the first retry, seconds.
    pub backoff_s: f64,
    /// Each later wait is this many times the previous (≥ 1; default 2).
    #[serde(default = "two")]
    pub multiplier: f64,
}

fn two() -> f64 {
    2.0
}

/// Fleet-wide admission limits (`[admission]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionCfg {
    /// Most requests waiting in all replica queues together.
    #[serde(default)]
    pub max_queue: Option<u64>,
}

impl AdmissionCfg {
    pub fn is_default(&self) -> bool {
        self == &AdmissionCfg::default()
    }
}

/// Fairness policy names (see `replica::fairness`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FairnessKind {
    #[default]
    Fcfs,
    Priority,
    Drr,
    Vtc,
    Wfq,
}

impl FairnessKind {
    pub fn name(self) -> &'static str {
        match self {
            FairnessKind::Fcfs => "fcfs",
            FairnessKind::Priority => "priority",
            FairnessKind::Drr => "drr",
            FairnessKind::Vtc => "vtc",
            FairnessKind::Wfq => "wfq",
        }
    }
}

/// How each replica orders its waiting queue among tenants (`[fairness]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairnessCfg {
    #[serde(default)]
    pub policy: FairnessKind,
    /// drr: tokens of credit per round for a tenant of weight 1.
    #[serde(default = "default_quantum")]
    pub quantum_tokens: u32,
    /// Cost of one prompt (prefill) token in the service a tenant receives
    /// (drr, vtc, wfq and Jain's index). VTC's paper uses 1.
    #[serde(default = "one_f64")]
    pub input_weight: f64,
    /// Cost of one output (decode) token. VTC's paper uses 2.
    #[serde(default = "two")]
    pub output_weight: f64,
    /// priority: a waiting request that cannot be admitted preempts running
    /// sequences of less urgent classes.
    #[serde(default)]
    pub preempt: bool,
}

fn default_quantum() -> u32 {
    1024
}

impl Default for FairnessCfg {
    fn default() -> Self {
        FairnessCfg {
            policy: FairnessKind::Fcfs,
            quantum_tokens: default_quantum(),
            input_weight: 1.0,
            output_weight: 2.0,
            preempt: false,
        }
    }
}

impl FairnessCfg {
    pub fn is_default(&self) -> bool {
        self == &FairnessCfg::default()
    }
}

impl WorkloadCfg {
    /// No key given: the `[workload]` table was left out.
    pub fn is_empty(&self) -> bool {
        self.arrival.is_none()
            && self.prompt_tokens.is_none()
            && self.output_tokens.is_none()
            && self.trace.is_none()
            && self.length_pairs.is_none()
            && self.shared_prefix.is_none()
            && self.conversation.is_none()
            && self.n.is_none()
    }
}

/// Whether the tenants bring their own workloads (then `[workload]` is empty).
pub fn per_tenant_workloads(f: &ScenarioFile) -> bool {
    f.tenants.iter().any(|t| t.workload.is_some())
}

/// Validates `[[tenants]]`, `[fairness]` and `[admission]`, and which
/// combinations with `[workload]` make sense.
pub(super) fn validate_tenants(f: &ScenarioFile) -> Result<(), Invalid> {
    let fc = &f.fairness;
    if fc.quantum_tokens == 0 {
        return Err((
            "fairness.quantum_tokens".into(),
            "must be at least 1".into(),
        ));
    }
    for (k, v) in [
        ("fairness.input_weight", fc.input_weight),
        ("fairness.output_weight", fc.output_weight),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err((k.into(), format!("must be a number ≥ 0, got {v}")));
        }
    }
    if fc.input_weight == 0.0 && fc.output_weight == 0.0 {
        return Err((
            "fairness.output_weight".into(),
            "input_weight and output_weight cannot both be 0: no service would be counted".into(),
        ));
    }
    if fc.preempt && fc.policy != FairnessKind::Priority {
        return Err((
            "fairness.preempt".into(),
            format!(
                "preempts lower priority classes: only with policy = \"priority\", not {:?}",
                fc.policy.name()
            ),
        ));
    }
    if let Some(q) = f.admission.max_queue {
        if q == 0 {
            return Err(("admission.max_queue".into(), "must be at least 1".into()));
        }
    }
    if f.tenants.is_empty() {
        if fc.policy != FairnessKind::Fcfs {
            return Err((
                "fairness.policy".into(),
                format!(
                    "{:?} orders tenants: add a [[tenants]] list (an empty list has nothing to be fair among)",
                    fc.policy.name()
                ),
            ));
        }
        return Ok(());
    }
    let per_tenant = per_tenant_workloads(f);
    let shared = !f.workload.is_empty();
    let shared_tenant_col = f
        .workload
        .trace
        .as_ref()
        .is_some_and(|t| t.tenant_column.is_some() && t.format != TraceFormat::Servegen);
    let mut catch_all = None;
    for (i, t) in f.tenants.iter().enumerate() {
        let key = |k: &str| format!("tenants.{i}.{k}");
        if t.name.trim().is_empty() {
            return Err((key("name"), "must not be empty".into()));
        }
        if let Some(j) = f.tenants[..i].iter().position(|o| o.name == t.name) {
            return Err((
                key("name"),
                format!("{:?} is already the name of tenants.{j}", t.name),
            ));
        }
        positive(&key("weight"), t.weight)?;
        match (&t.workload, per_tenant) {
            (None, true) => {
                return Err((
                    key("workload"),
                    "missing: other tenants have their own workload, so every tenant needs one"
                        .into(),
                ))
            }
            (Some(_), true) if shared => {
                return Err((
                    "workload".into(),
                    "ambiguous: the tenants have their own workloads; remove [workload] or the tenants' `workload`".into(),
                ))
            }
            _ => {}
        }
        if let Some(w) = &t.workload {
            validate_tenant_workload(f, w, &key("workload"))?;
        }
        match &t.trace_tenants {
            Some(_) if !shared_tenant_col => {
                return Err((
                    key("trace_tenants"),
                    "maps values of a trace's tenant column: needs a shared [workload] trace with `tenant_column`".into(),
                ));
            }
            Some(names) => {
                if names.is_empty() {
                    return Err((key("trace_tenants"), "must not be empty".into()));
                }
                for n in names {
                    for (j, o) in f.tenants[..i].iter().enumerate() {
                        if o.trace_tenants.iter().flatten().any(|x| x == n) {
                            return Err((
                                key("trace_tenants"),
                                format!("{n:?} is already mapped to tenants.{j}"),
                            ));
                        }
                    }
                }
            }
            None if shared_tenant_col => {
                if let Some(j) = catch_all {
                    return Err((
                        key("trace_tenants"),
                        format!("missing: tenants.{j} already takes every unnamed trace tenant; name this tenant's column values"),
                    ));
                }
                catch_all = Some(i);
            }
            None => {}
        }
        let l = &t.limits;
        let lk = |k: &str| key(&format!("limits.{k}"));
        for (k, v) in [
            ("requests_per_s", l.requests_per_s),
            ("request_burst", l.request_burst),
            ("tokens_per_min", l.tokens_per_min),
            ("token_burst", l.token_burst),
        ] {
            if let Some(v) = v {
                positive(&lk(k), v)?;
                if v > 1e12 {
                    return Err((lk(k), format!("must be at most 1e12, got {v}")));
                }
            }
        }
        if l.request_burst.is_some() && l.requests_per_s.is_none() {
            return Err((
                lk("request_burst"),
                "sizes the request bucket: give requests_per_s too".into(),
            ));
        }
        if l.token_burst.is_some() && l.tokens_per_min.is_none() {
            return Err((
                lk("token_burst"),
                "sizes the token bucket: give tokens_per_min too".into(),
            ));
        }
        if l.charge_output == OutputCharge::Actual && l.tokens_per_min.is_none() {
            return Err((
                lk("charge_output"),
                "applies to the token bucket: give tokens_per_min too".into(),
            ));
        }
        for (k, v) in [
            ("max_queue", l.max_queue),
            ("max_concurrency", l.max_concurrency),
        ] {
            if v == Some(0) {
                return Err((lk(k), "must be at least 1".into()));
            }
        }
        let ttft_target = t.slo.as_ref().or(f.slo.as_ref()).and_then(|s| s.ttft_ms);
        if l.shed_on_deadline && ttft_target.is_none() {
            return Err((
                lk("shed_on_deadline"),
                "sheds requests that would miss their TTFT target: give the tenant an `slo` or the scenario an [slo] with ttft_ms".into(),
            ));
        }
        // Bounded like the scenario's own: a target or wait beyond them is
        // a typo, and a back-off beyond the clock would saturate it.
        let upto = |k: String, v: f64, max: f64, unit: &str| -> Result<(), Invalid> {
            positive(&k, v)?;
            if v > max {
                return Err((
                    k,
                    format!(
                        "must be at most {max:e} {unit}, got {}",
                        super::ranges::num(v)
                    ),
                ));
            }
            Ok(())
        };
        if let Some(s) = &t.slo {
            s.check(&key("slo"))?;
        }
        if let Some(r) = &t.retry {
            if r.max_retries == 0 {
                return Err((key("retry.max_retries"), "must be at least 1".into()));
            }
            upto(
                key("retry.backoff_s"),
                r.backoff_s,
                super::ranges::MAX_SECONDS,
                "s",
            )?;
            if !(r.multiplier.is_finite() && (1.0..=100.0).contains(&r.multiplier)) {
                return Err((
                    key("retry.multiplier"),
                    format!("must be in [1, 100], got {}", r.multiplier),
                ));
            }
        }
    }
    if !per_tenant && !shared_tenant_col && f.tenants.len() > 1 {
        return Err((
            "tenants".into(),
            format!(
                "{} tenants share one [workload] without a tenant column: give each tenant its own `workload`, or use a trace with `tenant_column` and `trace_tenants`",
                f.tenants.len()
            ),
        ));
    }
    Ok(())
}

/// A tenant's workload passes the same checks as `[workload]`, with its key
/// path in the message.
fn validate_tenant_workload(f: &ScenarioFile, w: &WorkloadCfg, key: &str) -> Result<(), Invalid> {
    if w.is_empty() {
        return Err((
            key.into(),
            "is empty: give an arrival process or a trace".into(),
        ));
    }
    let mut alone = f.clone();
    alone.workload = w.clone();
    alone.tenants = Vec::new();
    alone.fairness = FairnessCfg::default();
    super::validate(&alone).map_err(|(k, m)| match k.strip_prefix("workload") {
        Some(rest) => (format!("{key}{rest}"), m),
        None => (k, m),
    })
}
