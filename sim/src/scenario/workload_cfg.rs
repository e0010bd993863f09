//! Scenario types of the `[workload]` table beyond the spine's open-loop
//! stream (trace replay, length pairs, rate schedules, think times) and the
//! validation of the whole table: which keys go together, and every value.

use super::trace_cfg::{validate_trace, TraceCfg, TraceFormat, TraceUse};
use super::{at_least, positive, validate_len, ArrivalCfg, Invalid, LengthDist, WorkloadCfg};
use serde::{Deserialize, Serialize};

/// `[workload] length_pairs`: (prompt, output) pairs drawn jointly from a
/// trace, so their correlation is kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthPairsCfg {
    pub trace: TraceCfg,
    /// Pairs kept (a uniform reservoir sample of the trace's rows when it
    /// has more); default 1,000,000.
    #[serde(default)]
    pub max_pairs: Option<u64>,
    #[serde(default)]
    pub prompt_min: Option<u32>,
    #[serde(default)]
    pub prompt_max: Option<u32>,
    #[serde(default)]
    pub output_min: Option<u32>,
    #[serde(default)]
    pub output_max: Option<u32>,
}

/// One step of a piecewise-constant rate schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateStep {
    /// When the step begins, seconds from the start (or of the period).
    pub start_s: f64,
    /// Requests/s during the step (0 for silence).
    pub rate: f64,
}

/// A closed-loop user's think time between the end of one request and the
/// next, seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum ThinkTime {
    Fixed { value_s: f64 },
    Exponential { mean_s: f64 },
    Uniform { min_s: f64, max_s: f64 },
    Lognormal { mean_s: f64, cv: f64 },
}

/// Reservoir size of `length_pairs` when `max_pairs` is not given.
pub const DEFAULT_MAX_PAIRS: u64 = 1_000_000;

/// Weibull shapes the solver searches, and the CVs they span.
pub const WEIBULL_SHAPE_RANGE: (f64, f64) = (0.05, 200.0);

/// Mean rate of a piecewise schedule (see `ArrivalCfg::mean_rate`).
pub(crate) fn piecewise_mean_rate(schedule: &[RateStep], period: Option<f64>) -> Option<f64> {
    let last = schedule.last()?;
    let Some(p) = period else {
        return Some(last.rate);
    };
    let mut area = 0.0;
    for (i, s) in schedule.iter().enumerate() {
        let end = schedule.get(i + 1).map_or(p, |n| n.start_s);
        area += s.rate * (end - s.start_s);
    }
    Some(area / p)
}

pub(super) fn finite_nonneg(key: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("must be a number ≥ 0, got {v}")))
    }
}

/// The most samples one request may ask for: the OpenAI API's limit on `n`
/// (1–128). It also bounds the per-sample loops of a decode step.
pub const MAX_SAMPLES: u32 = 128;

/// `key` must draw at most [`MAX_SAMPLES`].
fn check_samples_bound(key: &str, d: &LengthDist) -> Result<(), Invalid> {
    match d.upper_bound() {
        Some(hi) if hi <= MAX_SAMPLES => Ok(()),
        Some(hi) => Err((
            key.into(),
            format!("at most {MAX_SAMPLES} samples per request (the OpenAI API's limit on n), got up to {hi}"),
        )),
        None => Err((
            format!("{key}.max"),
            format!("missing: bound the number of samples with `max` (at most {MAX_SAMPLES})"),
        )),
    }
}

/// Which combination of keys is present, and every value in them.
pub(super) fn validate_workload(w: &WorkloadCfg) -> Result<(), Invalid> {
    if let Some(d) = &w.n {
        validate_len("workload.n", d)?;
        check_samples_bound("workload.n", d)?;
    }
    if let Some(t) = &w.trace {
        if w.arrival.is_some() {
            return Err((
                "workload.arrival".into(),
                "not allowed with `workload.trace`: the trace gives the arrivals".into(),
            ));
        }
        if w.length_pairs.is_some() {
            return Err((
                "workload.length_pairs".into(),
                "not allowed with `workload.trace`: the trace gives the lengths".into(),
            ));
        }
        let given = (w.prompt_tokens.is_some(), w.output_tokens.is_some());
        if t.format == TraceFormat::Servegen {
            // ServeGen clients without length PMFs fall back on these.
            match given {
                (true, false) => return Err(("workload.output_tokens".into(), "missing: servegen fallback lengths need both `prompt_tokens` and `output_tokens`".into())),
                (false, true) => return Err(("workload.prompt_tokens".into(), "missing: servegen fallback lengths need both `prompt_tokens` and `output_tokens`".into())),
                _ => {}
            }
        } else if given.0 || given.1 {
            let key = if given.0 {
                "workload.prompt_tokens"
            } else {
                "workload.output_tokens"
            };
            return Err((
                key.into(),
                format!(
                    "not allowed with a {} trace, which gives the lengths (only `servegen` takes fallback lengths)",
                    t.format.name()
                ),
            ));
        }
        if let Some(d) = &w.prompt_tokens {
            validate_len("workload.prompt_tokens", d)?;
        }
        if let Some(d) = &w.output_tokens {
            validate_len("workload.output_tokens", d)?;
        }
        return validate_trace("workload.trace", t, TraceUse::Replay);
    }
    let Some(arrival) = &w.arrival else {
        return Err((
            "workload.arrival".into(),
            "missing: give an arrival `process` (poisson, gamma, weibull, on-off, piecewise, diurnal, closed) or a `trace`".into(),
        ));
    };
    validate_arrival("workload.arrival", arrival)?;
    match (&w.length_pairs, &w.prompt_tokens, &w.output_tokens) {
        (Some(p), None, None) => validate_pairs("workload.length_pairs", p),
        (Some(_), _, _) => Err((
            if w.prompt_tokens.is_some() {
                "workload.prompt_tokens"
            } else {
                "workload.output_tokens"
            }
            .into(),
            "not allowed with `length_pairs`, which gives both lengths".into(),
        )),
        (None, Some(p), Some(o)) => {
            validate_len("workload.prompt_tokens", p)?;
            validate_len("workload.output_tokens", o)
        }
        (None, None, _) => Err((
            "workload.prompt_tokens".into(),
            "missing: give `prompt_tokens` and `output_tokens` distributions, or `length_pairs`"
                .into(),
        )),
        (None, Some(_), None) => Err((
            "workload.output_tokens".into(),
            "missing: give `prompt_tokens` and `output_tokens` distributions, or `length_pairs`"
                .into(),
        )),
    }
}

fn validate_arrival(key: &str, a: &ArrivalCfg) -> Result<(), Invalid> {
    let k = |f: &str| format!("{key}.{f}");
    match a {
        ArrivalCfg::Poisson { rate } => positive(&k("rate"), *rate),
        ArrivalCfg::Gamma { rate, cv } => {
            positive(&k("rate"), *rate)?;
            positive(&k("cv"), *cv)
        }
        ArrivalCfg::Weibull { rate, cv } => {
            positive(&k("rate"), *rate)?;
            positive(&k("cv"), *cv)?;
            let (lo, hi) = weibull_cv_range();
            if *cv < lo || *cv > hi {
                return Err((
                    k("cv"),
                    format!("must be in [{lo:.4}, {hi:.0}] for a Weibull process, got {cv}"),
                ));
            }
            Ok(())
        }
        ArrivalCfg::OnOff {
            on_rate,
            off_rate,
            mean_on_s,
            mean_off_s,
        } => {
            positive(&k("on_rate"), *on_rate)?;
            finite_nonneg(&k("off_rate"), *off_rate)?;
            positive(&k("mean_on_s"), *mean_on_s)?;
            positive(&k("mean_off_s"), *mean_off_s)
        }
        ArrivalCfg::Piecewise {
            schedule,
            period_s,
            cv,
        } => {
            if schedule.is_empty() {
                return Err((k("schedule"), "must have at least one step".into()));
            }
            for (i, s) in schedule.iter().enumerate() {
                let sk = format!("{key}.schedule[{i}]");
                finite_nonneg(&format!("{sk}.start_s"), s.start_s)?;
                finite_nonneg(&format!("{sk}.rate"), s.rate)?;
                if i == 0 && s.start_s != 0.0 {
                    return Err((
                        format!("{sk}.start_s"),
                        format!("the first step must start at 0, got {}", s.start_s),
                    ));
                }
                if i > 0 && s.start_s <= schedule[i - 1].start_s {
                    return Err((
                        format!("{sk}.start_s"),
                        format!(
                            "steps must start in increasing order: {} is not after {}",
                            s.start_s,
                            schedule[i - 1].start_s
                        ),
                    ));
                }
            }
            if schedule.iter().all(|s| s.rate == 0.0) {
                return Err((k("schedule"), "at least one step needs a rate > 0".into()));
            }
            if let Some(p) = period_s {
                positive(&k("period_s"), *p)?;
                let last = schedule[schedule.len() - 1].start_s;
                if *p <= last {
                    return Err((
                        k("period_s"),
                        format!("must be after the last step's start ({last}), got {p}"),
                    ));
                }
            }
            if let Some(cv) = cv {
                positive(&k("cv"), *cv)?;
            }
            Ok(())
        }
        ArrivalCfg::Diurnal {
            mean_rate,
            amplitude,
            period_s,
            peak_s,
            cv,
        } => {
            positive(&k("mean_rate"), *mean_rate)?;
            if !(amplitude.is_finite() && (0.0..=1.0).contains(amplitude)) {
                return Err((
                    k("amplitude"),
                    format!("must be in [0, 1] (the rate never goes negative), got {amplitude}"),
                ));
            }
            positive(&k("period_s"), *period_s)?;
            if !peak_s.is_finite() {
                return Err((k("peak_s"), format!("must be a number, got {peak_s}")));
            }
            if let Some(cv) = cv {
                positive(&k("cv"), *cv)?;
            }
            Ok(())
        }
        ArrivalCfg::Closed {
            users,
            think_time,
            ramp_up_s,
        } => {
            at_least(&k("users"), (*users).into(), 1)?;
            if *users > 10_000_000 {
                return Err((k("users"), format!("at most 10000000, got {users}")));
            }
            if let Some(r) = ramp_up_s {
                finite_nonneg(&k("ramp_up_s"), *r)?;
            }
            if let Some(t) = think_time {
                let tk = |f: &str| format!("{key}.think_time.{f}");
                match *t {
                    ThinkTime::Fixed { value_s } => finite_nonneg(&tk("value_s"), value_s)?,
                    ThinkTime::Exponential { mean_s } => positive(&tk("mean_s"), mean_s)?,
                    ThinkTime::Uniform { min_s, max_s } => {
                        finite_nonneg(&tk("min_s"), min_s)?;
                        finite_nonneg(&tk("max_s"), max_s)?;
                        if max_s < min_s {
                            return Err((
                                tk("max_s"),
                                format!("max_s {max_s} is below min_s {min_s}"),
                            ));
                        }
                    }
                    ThinkTime::Lognormal { mean_s, cv } => {
                        positive(&tk("mean_s"), mean_s)?;
                        positive(&tk("cv"), cv)?;
                    }
                }
            }
            Ok(())
        }
    }
}

/// The CVs a Weibull process can take with shapes in `WEIBULL_SHAPE_RANGE`.
pub fn weibull_cv_range() -> (f64, f64) {
    let cv = crate::stats::weibull_cv_of_shape;
    (cv(WEIBULL_SHAPE_RANGE.1), cv(WEIBULL_SHAPE_RANGE.0))
}

fn validate_pairs(key: &str, p: &LengthPairsCfg) -> Result<(), Invalid> {
    validate_trace(&format!("{key}.trace"), &p.trace, TraceUse::Lengths)?;
    if let Some(n) = p.max_pairs {
        at_least(&format!("{key}.max_pairs"), n, 1)?;
    }
    for (lo_k, lo, hi_k, hi) in [
        ("prompt_min", p.prompt_min, "prompt_max", p.prompt_max),
        ("output_min", p.output_min, "output_max", p.output_max),
    ] {
        if let Some(v) = lo {
            at_least(&format!("{key}.{lo_k}"), v.into(), 1)?;
        }
        if let Some(v) = hi {
            at_least(&format!("{key}.{hi_k}"), v.into(), 1)?;
        }
        if let (Some(l), Some(h)) = (lo, hi) {
            if h < l {
                return Err((format!("{key}.{hi_k}"), format!("{h} is below {lo_k} {l}")));
            }
        }
    }
    Ok(())
}

/// The sources of an empirical length distribution: exactly one.
pub(super) fn validate_empirical(key: &str, d: &LengthDist) -> Result<(), Invalid> {
    let LengthDist::Empirical {
        file,
        values,
        weights,
        trace,
        column,
        ..
    } = d
    else {
        return Ok(());
    };
    let n = file.is_some() as u8 + values.is_some() as u8 + trace.is_some() as u8;
    if n != 1 {
        return Err((
            key.into(),
            "give exactly one of `file` (a PMF or histogram CSV), `values` (with optional `weights`) or `trace` (with `column`)".into(),
        ));
    }
    if weights.is_some() && values.is_none() {
        return Err((
            format!("{key}.weights"),
            "only allowed with `values`".into(),
        ));
    }
    if let Some(v) = values {
        if v.is_empty() {
            return Err((format!("{key}.values"), "must not be empty".into()));
        }
        if let Some(i) = v.iter().position(|&x| x == 0) {
            return Err((
                format!("{key}.values[{i}]"),
                "token counts must be at least 1".into(),
            ));
        }
        if let Some(w) = weights {
            if w.len() != v.len() {
                return Err((
                    format!("{key}.weights"),
                    format!("has {} entries but `values` has {}", w.len(), v.len()),
                ));
            }
            if let Some(i) = w.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
                return Err((
                    format!("{key}.weights[{i}]"),
                    format!("must be a number ≥ 0, got {}", w[i]),
                ));
            }
            if !w.iter().any(|x| *x > 0.0) {
                return Err((
                    format!("{key}.weights"),
                    "at least one weight must be > 0".into(),
                ));
            }
        }
    }
    if let Some(f) = file {
        if f.trim().is_empty() {
            return Err((format!("{key}.file"), "must not be empty".into()));
        }
    }
    match (trace, column) {
        (Some(t), Some(_)) => validate_trace(&format!("{key}.trace"), t, TraceUse::Lengths),
        (Some(_), None) => Err((
            format!("{key}.column"),
            "missing: which trace column to draw from, \"prompt\" or \"output\"".into(),
        )),
        (None, Some(_)) => Err((format!("{key}.column"), "only allowed with `trace`".into())),
        (None, None) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::MINIMAL;
    use super::super::{Scenario, ScenarioError};
    use super::{check_samples_bound, LengthDist};

    fn with_workload(w: &str) -> Result<Scenario, ScenarioError> {
        let head = MINIMAL.split("[workload]").next().unwrap();
        Scenario::from_toml_str(&format!("{head}[workload]\n{w}\n"), "s.toml")
    }

    fn key_of(w: &str) -> String {
        let e = with_workload(w).unwrap_err();
        assert!(e.to_string().starts_with("s.toml: "), "{e}");
        e.key
    }

    const LENS: &str = "prompt_tokens = { dist = \"fixed\", value = 10 }\noutput_tokens = { dist = \"fixed\", value = 5 }";

    #[test]
    fn new_processes_parse_and_validate() {
        for a in [
            "{ process = \"weibull\", rate = 3.0, cv = 2.0 }",
            "{ process = \"on-off\", on_rate = 30.0, mean_on_s = 5, mean_off_s = 20 }",
            "{ process = \"piecewise\", schedule = [{ start_s = 0, rate = 1 }, { start_s = 60, rate = 5 }], period_s = 120 }",
            "{ process = \"diurnal\", mean_rate = 4, amplitude = 0.5 }",
            "{ process = \"closed\", users = 8, think_time = { dist = \"exponential\", mean_s = 2 } }",
        ] {
            with_workload(&format!("arrival = {a}\n{LENS}")).unwrap_or_else(|e| panic!("{a}: {e}"));
        }
        let bad = [
            ("{ process = \"weibull\", rate = 3.0, cv = 1e9 }", "workload.arrival.cv"),
            ("{ process = \"on-off\", on_rate = 30.0, mean_on_s = 0, mean_off_s = 20 }", "workload.arrival.mean_on_s"),
            ("{ process = \"piecewise\", schedule = [{ start_s = 0, rate = 1 }, { start_s = 0, rate = 5 }] }", "workload.arrival.schedule[1].start_s"),
            ("{ process = \"piecewise\", schedule = [{ start_s = 5, rate = 1 }] }", "workload.arrival.schedule[0].start_s"),
            ("{ process = \"piecewise\", schedule = [{ start_s = 0, rate = 0 }] }", "workload.arrival.schedule"),
            ("{ process = \"piecewise\", schedule = [{ start_s = 0, rate = 1 }, { start_s = 60, rate = 2 }], period_s = 30 }", "workload.arrival.period_s"),
            ("{ process = \"diurnal\", mean_rate = 4, amplitude = 1.5 }", "workload.arrival.amplitude"),
            ("{ process = \"closed\", users = 0 }", "workload.arrival.users"),
            ("{ process = \"closed\", users = 2, think_time = { dist = \"uniform\", min_s = 3, max_s = 1 } }", "workload.arrival.think_time.max_s"),
        ];
        for (a, key) in bad {
            assert_eq!(key_of(&format!("arrival = {a}\n{LENS}")), key, "{a}");
        }
    }

    #[test]
    fn key_combinations_are_checked() {
        let trace = "trace = { format = \"azure\", path = \"t.csv\" }";
        let poisson = "arrival = { process = \"poisson\", rate = 1.0 }";
        with_workload(trace).unwrap();
        assert_eq!(key_of(&format!("{trace}\n{poisson}")), "workload.arrival");
        assert_eq!(
            key_of(&format!("{trace}\n{LENS}")),
            "workload.prompt_tokens"
        );
        assert_eq!(key_of(poisson), "workload.prompt_tokens");
        assert_eq!(key_of(""), "workload.arrival");
        let pairs = "length_pairs = { trace = { format = \"azure\", path = \"t.csv\" } }";
        with_workload(&format!("{poisson}\n{pairs}")).unwrap();
        assert_eq!(
            key_of(&format!("{poisson}\n{pairs}\n{LENS}")),
            "workload.prompt_tokens"
        );
        // ServeGen takes fallback lengths, both or neither.
        let sg = "trace = { format = \"servegen\", path = \"d\" }";
        with_workload(&format!("{sg}\n{LENS}")).unwrap();
        assert_eq!(
            key_of(&format!(
                "{sg}\nprompt_tokens = {{ dist = \"fixed\", value = 3 }}"
            )),
            "workload.output_tokens"
        );
    }

    #[test]
    fn trace_options_are_checked_per_format() {
        let t = |opts: &str| format!("trace = {{ format = \"azure\", path = \"t.csv\", {opts} }}");
        assert_eq!(
            key_of(&t("time_scale = 2.0, rate = 3.0")),
            "workload.trace.rate"
        );
        assert_eq!(key_of(&t("time_scale = 0.0")), "workload.trace.time_scale");
        assert_eq!(
            key_of(&t("start_s = 10, end_s = 5")),
            "workload.trace.end_s"
        );
        assert_eq!(key_of(&t("model = \"GPT-4\"")), "workload.trace.model");
        assert_eq!(
            key_of(&t("block_tokens = 16")),
            "workload.trace.block_tokens"
        );
        assert_eq!(
            key_of(&t("max_requests = 0")),
            "workload.trace.max_requests"
        );
        assert_eq!(key_of(&t("colour = 1")), "workload.trace.colour");
        assert_eq!(
            key_of("trace = { format = \"csv\", path = \"t.csv\" }"),
            "workload.trace.columns"
        );
        assert_eq!(
            key_of("trace = { format = \"csv\", path = \"t.csv\", columns = { arrival = \"a\", prompt = \"p\", output = \"o\", hashes = \"h\" } }"),
            "workload.trace.block_tokens"
        );
        let e = with_workload("trace = { format = \"parquet\", path = \"t\" }").unwrap_err();
        assert_eq!(e.key, "workload.trace.format");
        assert!(e.message.contains("mooncake"), "lists the formats: {e}");
        // A trace needs no horizon: it ends by itself.
        let head = MINIMAL.split("[horizon]").next().unwrap();
        let rest = MINIMAL
            .split("[model]")
            .nth(1)
            .unwrap()
            .split("[workload]")
            .next()
            .unwrap();
        let text = format!(
            "{head}[horizon]\n[model]{rest}[workload]\n{}\n",
            t("lenient = true")
        );
        Scenario::from_toml_str(&text, "s.toml").unwrap();
    }

    #[test]
    fn empirical_lengths_need_exactly_one_source() {
        let e = |d: &str| {
            format!("arrival = {{ process = \"poisson\", rate = 1.0 }}\nprompt_tokens = {d}\noutput_tokens = {{ dist = \"fixed\", value = 5 }}")
        };
        with_workload(&e(
            "{ dist = \"empirical\", values = [1, 2], weights = [1, 3] }",
        ))
        .unwrap();
        with_workload(&e("{ dist = \"zipf\", exponent = 1.1, n = 1000 }")).unwrap();
        assert_eq!(
            key_of(&e("{ dist = \"empirical\" }")),
            "workload.prompt_tokens"
        );
        assert_eq!(
            key_of(&e(
                "{ dist = \"empirical\", values = [1, 2], weights = [1] }"
            )),
            "workload.prompt_tokens.weights"
        );
        assert_eq!(
            key_of(&e("{ dist = \"empirical\", values = [0] }")),
            "workload.prompt_tokens.values[0]"
        );
        assert_eq!(
            key_of(&e(
                "{ dist = \"empirical\", trace = { format = \"azure\", path = \"a\" } }"
            )),
            "workload.prompt_tokens.column"
        );
        assert_eq!(
            key_of(&e("{ dist = \"empirical\", column = \"prompt\", trace = { format = \"azure\", path = \"a\", rate = 2.0 } }")),
            "workload.prompt_tokens.trace.rate"
        );
        assert_eq!(
            key_of(&e("{ dist = \"zipf\", exponent = 0, n = 10 }")),
            "workload.prompt_tokens.exponent"
        );
    }

    #[test]
    fn unbounded_or_too_many_samples_are_refused() {
        let too_many = LengthDist::Fixed { value: 129 };
        assert!(check_samples_bound("workload.n", &too_many)
            .unwrap_err()
            .1
            .contains("at most 128"));
        let open = LengthDist::Lognormal {
            mean: 4.0,
            cv: 1.0,
            min: None,
            max: None,
        };
        assert_eq!(
            check_samples_bound("workload.n", &open).unwrap_err().0,
            "workload.n.max"
        );
        assert!(check_samples_bound("workload.n", &LengthDist::Fixed { value: 8 }).is_ok());
    }
}
