//! The finite, physically sensible range of every numeric scenario key.
//!
//! The type checks of `scenario` and `workload_cfg` (positive, ≥ 0, in
//! order) admit any finite number; this module bounds them from both sides
//! so that no value can make a sampler overflow (a gamma shape of
//! 1/cv² = ∞), a loop fail to terminate (an on/off source whose on periods
//! are too short ever to hold an arrival), the clock saturate (u64
//! nanoseconds end at 1.8·10¹⁰ s), or a memory plan print "inf GiB".
//! The limits are documented in docs/scenario.md ("Ranges and the memory guard");
//! each is far beyond any real deployment, so it only rejects typos and
//! absurd values.

use super::{Invalid, LengthDist, ScenarioFile, WorkloadCfg};
use crate::catalog::HardwareSpec;
use crate::scenario::{ArrivalCfg, ThinkTime};

/// Arrival rates, requests/s: one a week to ten million a second.
pub const RATE_RPS: (f64, f64) = (1e-6, 1e7);
/// Coefficients of variation of gaps, lengths and think times. Beyond them
/// the samplers' parameters leave f64 (gamma shape 1/cv², log-normal σ).
pub const CV: (f64, f64) = (1e-3, 100.0);
/// Any duration or time in the scenario, seconds: up to ~31.7 years, which
/// keeps every simulated time well inside the u64-nanosecond clock.
pub const MAX_SECONDS: f64 = 1e9;
/// Shortest on/off period mean, seconds (a microsecond).
pub const MIN_PERIOD_S: f64 = 1e-6;
/// An on/off source must expect at least this many arrivals per on/off
/// cycle, or finding the next arrival takes unboundedly many cycles.
pub const MIN_ARRIVALS_PER_CYCLE: f64 = 1e-3;
/// Token counts: lengths, their means and deviations, bounds and prefix
/// sizes (the largest context windows are ~10⁷ tokens; a longer prompt would
/// also carry millions of block hashes).
pub const MAX_TOKENS: u32 = 10_000_000;
const MAX_TOKENS_F: f64 = MAX_TOKENS as f64;
/// Distinct shared system prompts.
pub const MAX_PREFIX_VARIANTS: u32 = 1_000_000;
/// Zipf exponents.
pub const MAX_ZIPF_EXPONENT: f64 = 100.0;
/// Trace replay speed-ups.
pub const TIME_SCALE: (f64, f64) = (1e-6, 1e6);
/// SLO targets, ms.
pub const MAX_SLO_MS: f64 = 1e9;

/// Hardware datasheet ranges, (key, min, max, unit): from a microcontroller
/// to a thousand times today's largest accelerator.
pub const HARDWARE: [(&str, f64, f64, &str); 9] = [
    ("bf16_tflops", 1e-3, 1e6, "TFLOP/s"),
    ("fp8_tflops", 1e-3, 1e6, "TFLOP/s"),
    ("int8_tops", 1e-3, 1e6, "TOP/s"),
    ("fp4_tflops", 1e-3, 1e6, "TFLOP/s"),
    ("memory_gib", 1e-3, 1e6, "GiB"),
    ("memory_bw_tbyte_s", 1e-4, 1e4, "TB/s"),
    ("interconnect_gbyte_s", 1e-3, 1e6, "GB/s"),
    ("pcie_gbyte_s", 1e-3, 1e6, "GB/s"),
    ("network_gbyte_s", 1e-3, 1e6, "GB/s"),
];
/// Link latencies, microseconds (up to a second).
pub const MAX_LATENCY_US: f64 = 1e6;
/// Host swap space per GPU, GiB.
pub const MAX_SWAP_GIB: f64 = 1e6;

fn within(key: &str, v: f64, lo: f64, hi: f64, unit: &str) -> Result<(), Invalid> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        let unit = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        Err((
            key.into(),
            format!("must be in [{lo:e}, {hi:e}]{unit}, got {}", num(v)),
        ))
    }
}

/// A number as a person reads it: plain when moderate, else scientific.
pub fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-3..1e7).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

fn seconds(key: &str, v: f64) -> Result<(), Invalid> {
    within(key, v, 0.0, MAX_SECONDS, "s")
}

fn cv(key: &str, v: f64) -> Result<(), Invalid> {
    within(key, v, CV.0, CV.1, "")
}

fn rate(key: &str, v: f64) -> Result<(), Invalid> {
    within(key, v, RATE_RPS.0, RATE_RPS.1, "requests/s")
}

/// Checks every numeric key against its range; runs after the type checks.
pub(super) fn check(f: &ScenarioFile) -> Result<(), Invalid> {
    if let Some(d) = f.horizon.duration_s {
        within("horizon.duration_s", d, 1e-6, MAX_SECONDS, "s")?;
    }
    let e = &f.engine;
    within(
        "engine.swap_space_gib",
        e.swap_space_gib,
        0.0,
        MAX_SWAP_GIB,
        "GiB",
    )?;
    if let Some(s) = &f.hardware.spec {
        hardware("hardware.spec", s)?;
    }
    workload("workload", &f.workload)?;
    for (i, t) in f.tenants.iter().enumerate() {
        if let Some(w) = &t.workload {
            workload(&format!("tenants.{i}.workload"), w)?;
        }
    }
    if let (Some(n), Some(r)) = (f.horizon.requests, f.offered_rate()) {
        // Without a duration the run lasts about requests / rate.
        if f.horizon.duration_s.is_none() && n as f64 / r > MAX_SECONDS {
            return Err((
                "horizon.requests".into(),
                format!(
                    "{n} requests at {r} requests/s span {:.3e} s, beyond the {MAX_SECONDS:e} s \
                     the clock allows; lower it or add horizon.duration_s",
                    n as f64 / r
                ),
            ));
        }
    }
    within(
        "metrics.timeseries_interval_s",
        f.metrics.timeseries_interval_s,
        1e-3,
        MAX_SECONDS,
        "s",
    )?;
    Ok(())
}

/// One workload's arrival, lengths, trace options, prefixes and
/// conversations (the scenario's `[workload]` or a tenant's), keys under `p`.
fn workload(p: &str, w: &WorkloadCfg) -> Result<(), Invalid> {
    let k = |s: &str| format!("{p}.{s}");
    if let Some(a) = &w.arrival {
        arrival(&k("arrival"), a)?;
    }
    for (key, d) in [
        (k("prompt_tokens"), &w.prompt_tokens),
        (k("output_tokens"), &w.output_tokens),
    ] {
        if let Some(d) = d {
            length(&key, d)?;
        }
    }
    for (key, t) in [
        (k("trace"), w.trace.as_ref()),
        (
            k("length_pairs.trace"),
            w.length_pairs.as_ref().map(|lp| &lp.trace),
        ),
    ] {
        if let Some(t) = t {
            trace(&key, t)?;
        }
    }
    if let Some(sp) = &w.shared_prefix {
        tokens(&k("shared_prefix.tokens"), sp.tokens)?;
        if sp.variants > MAX_PREFIX_VARIANTS {
            return Err((
                k("shared_prefix.variants"),
                format!("must be at most {MAX_PREFIX_VARIANTS}, got {}", sp.variants),
            ));
        }
        within(
            &k("shared_prefix.zipf_exponent"),
            sp.zipf_exponent,
            0.0,
            MAX_ZIPF_EXPONENT,
            "",
        )?;
    }
    if let Some(c) = &w.conversation {
        length(&k("conversation.turns"), &c.turns)?;
        length(&k("conversation.follow_up_tokens"), &c.follow_up_tokens)?;
        seconds(&k("conversation.think_time_s"), c.think_time_s)?;
    }
    Ok(())
}

/// An inline datasheet: every figure within [`HARDWARE`].
pub fn hardware(key: &str, s: &HardwareSpec) -> Result<(), Invalid> {
    let values = [
        Some(s.bf16_tflops),
        s.fp8_tflops,
        s.int8_tops,
        s.fp4_tflops,
        Some(s.memory_gib),
        Some(s.memory_bw_tbps),
        Some(s.interconnect_gbps),
        Some(s.pcie_gbps),
        s.network_gbps,
    ];
    if let Some(v) = s.allreduce_latency_us {
        within(
            &format!("{key}.allreduce_latency_us"),
            v,
            0.0,
            MAX_LATENCY_US,
            "µs",
        )?;
    }
    if let Some(v) = s.allreduce_busbw_gbps {
        within(
            &format!("{key}.allreduce_busbw_gbyte_s"),
            v,
            1e-3,
            1e6,
            "GB/s",
        )?;
    }
    for ((name, lo, hi, unit), v) in HARDWARE.iter().zip(values) {
        if let Some(v) = v {
            within(&format!("{key}.{name}"), v, *lo, *hi, unit)?;
        }
    }
    within(
        &format!("{key}.interconnect_latency_us"),
        s.interconnect_latency_us,
        0.0,
        MAX_LATENCY_US,
        "µs",
    )?;
    if let Some(l) = s.network_latency_us {
        within(
            &format!("{key}.network_latency_us"),
            l,
            0.0,
            MAX_LATENCY_US,
            "µs",
        )?;
    }
    if let Some(w) = s.tdp_w {
        within(&format!("{key}.tdp_w"), w, 1e-3, MAX_BOARD_W, "W")?;
    }
    if let Some(w) = s.idle_w {
        within(&format!("{key}.idle_w"), w, 0.0, MAX_BOARD_W, "W")?;
    }
    Ok(())
}

/// Board power, W: a thousand times today's largest accelerator.
pub const MAX_BOARD_W: f64 = 1e6;

fn arrival(key: &str, a: &ArrivalCfg) -> Result<(), Invalid> {
    let k = |f: &str| format!("{key}.{f}");
    match a {
        ArrivalCfg::Poisson { rate: r } => rate(&k("rate"), *r),
        ArrivalCfg::Gamma { rate: r, cv: c } | ArrivalCfg::Weibull { rate: r, cv: c } => {
            rate(&k("rate"), *r)?;
            cv(&k("cv"), *c)
        }
        ArrivalCfg::OnOff {
            on_rate,
            off_rate,
            mean_on_s,
            mean_off_s,
        } => {
            rate(&k("on_rate"), *on_rate)?;
            within(&k("off_rate"), *off_rate, 0.0, RATE_RPS.1, "requests/s")?;
            within(&k("mean_on_s"), *mean_on_s, MIN_PERIOD_S, MAX_SECONDS, "s")?;
            within(
                &k("mean_off_s"),
                *mean_off_s,
                MIN_PERIOD_S,
                MAX_SECONDS,
                "s",
            )?;
            let per_cycle = on_rate * mean_on_s + off_rate * mean_off_s;
            if per_cycle < MIN_ARRIVALS_PER_CYCLE {
                return Err((
                    k("mean_on_s"),
                    format!(
                        "an on/off cycle expects {per_cycle:.3e} arrivals (on_rate × mean_on_s + \
                         off_rate × mean_off_s); at least {MIN_ARRIVALS_PER_CYCLE:e} are needed \
                         for the stream to make progress"
                    ),
                ));
            }
            let mean = per_cycle / (mean_on_s + mean_off_s);
            rate(&format!("{key} (mean rate)"), mean)
        }
        ArrivalCfg::Piecewise {
            schedule,
            period_s,
            cv: c,
        } => {
            for (i, s) in schedule.iter().enumerate() {
                seconds(&format!("{key}.schedule[{i}].start_s"), s.start_s)?;
                within(
                    &format!("{key}.schedule[{i}].rate"),
                    s.rate,
                    0.0,
                    RATE_RPS.1,
                    "requests/s",
                )?;
                if s.rate > 0.0 {
                    rate(&format!("{key}.schedule[{i}].rate"), s.rate)?;
                }
            }
            if let Some(p) = period_s {
                seconds(&k("period_s"), *p)?;
            }
            if let Some(c) = c {
                cv(&k("cv"), *c)?;
            }
            Ok(())
        }
        ArrivalCfg::Diurnal {
            mean_rate,
            period_s,
            peak_s,
            cv: c,
            ..
        } => {
            rate(&k("mean_rate"), *mean_rate)?;
            within(&k("period_s"), *period_s, 1e-3, MAX_SECONDS, "s")?;
            within(&k("peak_s"), *peak_s, -MAX_SECONDS, MAX_SECONDS, "s")?;
            if let Some(c) = c {
                cv(&k("cv"), *c)?;
            }
            Ok(())
        }
        ArrivalCfg::Closed {
            think_time,
            ramp_up_s,
            ..
        } => {
            if let Some(r) = ramp_up_s {
                seconds(&k("ramp_up_s"), *r)?;
            }
            let tk = |f: &str| format!("{key}.think_time.{f}");
            match think_time {
                None => Ok(()),
                Some(ThinkTime::Fixed { value_s }) => seconds(&tk("value_s"), *value_s),
                Some(ThinkTime::Exponential { mean_s }) => seconds(&tk("mean_s"), *mean_s),
                Some(ThinkTime::Uniform { min_s, max_s }) => {
                    seconds(&tk("min_s"), *min_s)?;
                    seconds(&tk("max_s"), *max_s)
                }
                Some(ThinkTime::Lognormal { mean_s, cv: c }) => {
                    seconds(&tk("mean_s"), *mean_s)?;
                    cv(&tk("cv"), *c)
                }
            }
        }
    }
}

fn tokens(key: &str, v: u32) -> Result<(), Invalid> {
    if v <= MAX_TOKENS {
        Ok(())
    } else {
        Err((
            key.into(),
            format!("must be in [1, {MAX_TOKENS}] tokens, got {v}"),
        ))
    }
}

fn length(key: &str, d: &LengthDist) -> Result<(), Invalid> {
    let k = |f: &str| format!("{key}.{f}");
    let bounds = |min: Option<u32>, max: Option<u32>| -> Result<(), Invalid> {
        if let Some(v) = min {
            tokens(&k("min"), v)?;
        }
        if let Some(v) = max {
            tokens(&k("max"), v)?;
        }
        Ok(())
    };
    match d {
        LengthDist::Fixed { value } => tokens(&k("value"), *value)?,
        LengthDist::Uniform { min, max } => bounds(Some(*min), Some(*max))?,
        LengthDist::Normal { min, max, .. }
        | LengthDist::Lognormal { min, max, .. }
        | LengthDist::Empirical { min, max, .. } => bounds(*min, *max)?,
        LengthDist::Zipf { n, min, max, .. } => {
            tokens(&k("n"), *n)?;
            bounds(*min, *max)?
        }
    }
    if let LengthDist::Empirical {
        values: Some(v), ..
    } = d
    {
        if let Some(i) = v.iter().position(|&x| x > MAX_TOKENS) {
            tokens(&format!("{key}.values[{i}]"), v[i])?;
        }
    }
    match *d {
        LengthDist::Normal { mean, sd, .. } => {
            within(&k("mean"), mean, 0.0, MAX_TOKENS_F, "tokens")?;
            within(&k("sd"), sd, 0.0, MAX_TOKENS_F, "tokens")
        }
        LengthDist::Lognormal { mean, cv: c, .. } => {
            within(&k("mean"), mean, 0.0, MAX_TOKENS_F, "tokens")?;
            cv(&k("cv"), c)
        }
        LengthDist::Zipf { exponent, .. } => {
            within(&k("exponent"), exponent, 0.0, MAX_ZIPF_EXPONENT, "")
        }
        LengthDist::Empirical {
            trace: Some(ref t), ..
        } => trace(&k("trace"), t),
        _ => Ok(()),
    }
}

fn trace(key: &str, t: &super::TraceCfg) -> Result<(), Invalid> {
    let k = |f: &str| format!("{key}.{f}");
    if let Some(v) = t.time_scale {
        within(&k("time_scale"), v, TIME_SCALE.0, TIME_SCALE.1, "")?;
    }
    if let Some(v) = t.rate {
        rate(&k("rate"), v)?;
    }
    if let Some(v) = t.start_s {
        seconds(&k("start_s"), v)?;
    }
    if let Some(v) = t.end_s {
        seconds(&k("end_s"), v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::scenario::tests::MINIMAL;
    use crate::scenario::Scenario;

    fn key_of(text: &str) -> String {
        let e = Scenario::from_toml_str(text, "s.toml").unwrap_err();
        assert!(e.message.contains("must be in"), "{e}");
        e.key
    }

    fn arrival(a: &str) -> String {
        MINIMAL.replace(r#"{ process = "poisson", rate = 5.0 }"#, a)
    }

    #[test]
    fn extreme_distribution_parameters_are_rejected_by_key() {
        // Each of these panicked in a sampler or hung before the ranges.
        let lognormal = MINIMAL.replace(
            r#"prompt_tokens = { dist = "fixed", value = 100 }"#,
            r#"prompt_tokens = { dist = "lognormal", mean = 100, cv = 1e200 }"#,
        );
        assert_eq!(key_of(&lognormal), "workload.prompt_tokens.cv");
        for cv in ["1e-200", "1e308"] {
            let g = arrival(&format!(
                r#"{{ process = "gamma", rate = 5.0, cv = {cv} }}"#
            ));
            assert_eq!(key_of(&g), "workload.arrival.cv");
        }
        let d =
            arrival(r#"{ process = "diurnal", mean_rate = 5.0, amplitude = 0.5, cv = 1e-200 }"#);
        assert_eq!(key_of(&d), "workload.arrival.cv");
        let c = arrival(
            r#"{ process = "closed", users = 2, think_time = { dist = "lognormal", mean_s = 1.0, cv = 1e200 } }"#,
        );
        assert_eq!(key_of(&c), "workload.arrival.think_time.cv");
        let o = arrival(
            r#"{ process = "on-off", on_rate = 5.0, mean_on_s = 1e-300, mean_off_s = 1e300 }"#,
        );
        assert_eq!(key_of(&o), "workload.arrival.mean_on_s");
    }

    #[test]
    fn an_on_off_source_must_expect_arrivals_per_cycle() {
        let o =
            arrival(r#"{ process = "on-off", on_rate = 1.0, mean_on_s = 1e-6, mean_off_s = 1.0 }"#);
        let e = Scenario::from_toml_str(&o, "s.toml").unwrap_err();
        assert_eq!(e.key, "workload.arrival.mean_on_s");
        assert!(e.message.contains("arrivals"), "{e}");
    }

    #[test]
    fn durations_and_datasheets_are_bounded() {
        let d = MINIMAL.replace("requests = 100", "duration_s = 1e300");
        assert_eq!(key_of(&d), "horizon.duration_s");
        let hw = MINIMAL.replace(
            "[hardware]\npreset = \"h100-sxm\"",
            "[hardware.spec]\nbf16_tflops = 989\nmemory_gib = 1e308\nmemory_bw_tbps = 3.35\n\
             interconnect_gbps = 450\ninterconnect_latency_us = 3\npcie_gbps = 64",
        );
        assert_eq!(key_of(&hw), "hardware.spec.memory_gib");
        // Requests at a rate that would outrun the clock.
        let slow = MINIMAL
            .replace("requests = 100", "requests = 100000")
            .replace("rate = 5.0", "rate = 1e-5");
        let e = Scenario::from_toml_str(&slow, "s.toml").unwrap_err();
        assert_eq!(e.key, "horizon.requests", "{e}");
    }
}
