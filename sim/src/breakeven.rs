//! Dedicated fleet or hosted API? The cost of the tokens a simulated fleet
//! served, at the utilization the run measured (idle replicas, the standby
//! pool and cold starts included when the run has a life cycle), against a
//! hosted API's per-million-token prices for the same traffic, and the
//! volume at which the two cost the same.
//!
//! Every price is an input: there are no defaults that would pretend to be
//! a provider's quote. The GPU-hours come from the run's `summary.json`:
//! `lifecycle.gpu_hours.billed` when the fleet scaled, otherwise every GPU
//! for the whole run (a fixed fleet is billed whether or not it is busy).

use serde::Serialize;
use serde_json::Value;

/// The prices to compare, US dollars.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    /// One GPU for one hour (dedicated, on-demand or reserved: the user's).
    pub gpu_hour_usd: f64,
    /// Hosted API, per million input (prompt) tokens.
    pub api_input_usd_per_m: f64,
    /// Hosted API, per million output tokens.
    pub api_output_usd_per_m: f64,
}

impl Prices {
    /// Checks every price; the error names the flag.
    pub fn check(&self) -> Result<(), String> {
        for (flag, v, zero_ok) in [
            ("--gpu-hour-usd", self.gpu_hour_usd, false),
            ("--api-input-usd-per-mtok", self.api_input_usd_per_m, true),
            (
                "--api-output-usd-per-mtok",
                self.api_output_usd_per_m,
                false,
            ),
        ] {
            let ok = v.is_finite() && v <= 1e6 && (v > 0.0 || (zero_ok && v == 0.0));
            if !ok {
                let lo = if zero_ok { "≥ 0" } else { "> 0" };
                return Err(format!(
                    "{flag}: must be a price in US dollars {lo} and ≤ 1e6, got {v}"
                ));
            }
        }
        Ok(())
    }
}

/// Where the dedicated fleet's GPU-hours went.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Hours {
    pub serving: f64,
    pub idle: f64,
    pub standby_billed: f64,
    pub starting: f64,
    pub billed: f64,
}

/// The comparison.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct BreakEven {
    pub scenario: String,
    pub duration_h: f64,
    pub input_tokens: f64,
    pub output_tokens: f64,
    pub gpu_hours: Hours,
    /// Share of billed GPU-hours spent running iterations.
    pub utilization: f64,
    pub gpu_hour_usd: f64,
    pub api_input_usd_per_mtok: f64,
    pub api_output_usd_per_mtok: f64,
    pub dedicated_usd: f64,
    pub api_usd: f64,
    /// Dollars per million output tokens (each side's input cost included).
    pub dedicated_usd_per_m_output: f64,
    pub api_usd_per_m_output: f64,
    /// Output tokens per hour at which the fleet, as measured (its billed
    /// GPUs per hour), costs what the API would charge for the same mix.
    pub break_even_output_tokens_per_h: f64,
    /// The run's output tokens per hour.
    pub measured_output_tokens_per_h: f64,
    /// GPU-hour price at which the fleet costs what the API does at the
    /// measured volume.
    pub break_even_gpu_hour_usd: f64,
    /// "dedicated" or "api": the cheaper at the measured volume.
    pub cheaper: String,
}

fn num(v: &Value, path: &str) -> Result<f64, String> {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("summary.json has no number at `{path}`"))
}

/// The comparison for the run whose `summary.json` is `summary`.
pub fn compare(summary: &Value, p: Prices) -> Result<BreakEven, String> {
    p.check()?;
    let dur = num(summary, "duration_s")?;
    let h = dur / 3600.0;
    if h <= 0.0 {
        return Err("summary.json: the run lasted no time (duration_s = 0)".into());
    }
    let input = num(summary, "throughput.input_tokens_per_s")? * dur;
    let output = num(summary, "throughput.output_tokens_per_s")? * dur;
    if output <= 0.0 {
        return Err("summary.json: the run completed no output tokens to price".into());
    }
    let hours = match summary.get("lifecycle").filter(|l| !l.is_null()) {
        Some(l) => Hours {
            serving: num(l, "gpu_hours.serving")?,
            idle: num(l, "gpu_hours.idle_ready")?,
            standby_billed: num(l, "gpu_hours.standby_billed")?,
            starting: num(l, "gpu_hours.starting")?,
            billed: num(l, "gpu_hours.billed")?,
        },
        None => {
            let all = num(summary, "gpus")? * h;
            let busy = num(summary, "engine.busy_fraction")?.clamp(0.0, 1.0);
            Hours {
                serving: all * busy,
                idle: all * (1.0 - busy),
                standby_billed: 0.0,
                starting: 0.0,
                billed: all,
            }
        }
    };
    let dedicated = hours.billed * p.gpu_hour_usd;
    let api = input / 1e6 * p.api_input_usd_per_m + output / 1e6 * p.api_output_usd_per_m;
    let api_per_out = api / output;
    let per_h = dedicated / h;
    Ok(BreakEven {
        scenario: summary
            .get("scenario")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        duration_h: h,
        input_tokens: input,
        output_tokens: output,
        utilization: hours.serving / hours.billed.max(1e-12),
        gpu_hours: hours.clone(),
        gpu_hour_usd: p.gpu_hour_usd,
        api_input_usd_per_mtok: p.api_input_usd_per_m,
        api_output_usd_per_mtok: p.api_output_usd_per_m,
        dedicated_usd: dedicated,
        api_usd: api,
        dedicated_usd_per_m_output: dedicated / output * 1e6,
        api_usd_per_m_output: api_per_out * 1e6,
        break_even_output_tokens_per_h: per_h / api_per_out,
        measured_output_tokens_per_h: output / h,
        break_even_gpu_hour_usd: api / hours.billed.max(1e-12),
        cheaper: if dedicated < api { "dedicated" } else { "api" }.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(lifecycle: bool) -> Value {
        let mut v = serde_json::json!({
            "scenario": "s",
            "duration_s": 3600.0,
            "gpus": 4,
            "throughput": { "input_tokens_per_s": 2000.0, "output_tokens_per_s": 500.0 },
            "engine": { "busy_fraction": 0.5 },
        });
        if lifecycle {
            v["lifecycle"] = serde_json::json!({ "gpu_hours": {
                "serving": 2.0, "idle_ready": 0.5, "standby_billed": 0.25, "starting": 0.25, "billed": 3.0
            }});
        }
        v
    }

    const P: Prices = Prices {
        gpu_hour_usd: 2.0,
        api_input_usd_per_m: 0.5,
        api_output_usd_per_m: 2.0,
    };

    #[test]
    fn a_fixed_fleet_is_billed_for_every_gpu_hour() {
        let b = compare(&summary(false), P).unwrap();
        assert_eq!(b.gpu_hours.billed, 4.0);
        assert_eq!(b.dedicated_usd, 8.0);
        // 7.2 M input × 0.5 + 1.8 M output × 2 = 3.6 + 3.6.
        assert!((b.api_usd - 7.2).abs() < 1e-9);
        assert_eq!(b.cheaper, "api");
        // 8 $/h over 4 $ per M output tokens (input share included) = 2 M/h.
        assert!((b.break_even_output_tokens_per_h - 2.0e6).abs() < 1e-3);
        assert!((b.break_even_gpu_hour_usd - 1.8).abs() < 1e-9);
        assert!((b.utilization - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_scaled_fleet_is_billed_its_lifecycle_hours() {
        let b = compare(&summary(true), P).unwrap();
        assert_eq!(b.gpu_hours.billed, 3.0);
        assert_eq!(b.dedicated_usd, 6.0);
        assert_eq!(b.cheaper, "dedicated");
        assert!((b.dedicated_usd_per_m_output - 6.0 / 1.8).abs() < 1e-9);
    }

    #[test]
    fn prices_are_required_to_be_real_numbers() {
        for p in [
            Prices {
                gpu_hour_usd: 0.0,
                ..P
            },
            Prices {
                api_input_usd_per_m: -1.0,
                ..P
            },
            Prices {
                api_output_usd_per_m: f64::NAN,
                ..P
            },
        ] {
            assert!(compare(&summary(false), p).unwrap_err().starts_with("--"));
        }
        let e = compare(&serde_json::json!({}), P).unwrap_err();
        assert!(e.contains("duration_s"), "{e}");
    }
}
