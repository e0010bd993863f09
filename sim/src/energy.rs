//! A run's energy: each GPU's board power from its chip's datasheet TDP and
//! idle figure (`catalog::hardware`), and how busy the run kept it.
//!
//! **The utilization model.** A GPU draws its idle power whenever it is
//! powered with the model loaded, and TDP while its replica runs an
//! iteration; in between, power is linear in the busy fraction:
//!
//! ```text
//! P = P_idle + (P_TDP − P_idle) × busy
//! ```
//!
//! This is the linear idle-to-peak model of server power (Fan, Weber and
//! Barroso, "Power provisioning for a warehouse-sized computer", ISCA 2007),
//! which Özcan, Wiesner, Weiß and Kao apply to GPUs in a simulated LLM
//! serving fleet (Vidur) with the GPU's utilization as `busy` ("Quantifying
//! the Energy Consumption and Carbon Emissions of LLM Inference via
//! Simulations", Euro-Par 2025 workshops, arXiv 2507.11417). `busy` is the
//! share of time the replica runs iterations (every GPU of a replica works
//! in each of its iterations), the figure `nvidia-smi` calls utilization.
//! Pricing a busy GPU at TDP is the upper end: a memory-bound decode step at
//! a small batch draws less (ML.ENERGY's measurements on H100 show about
//! half of TDP at batch 1), so the figure is a ceiling for decode-heavy
//! fleets and close for busy prefill-heavy ones.
//!
//! With a life cycle (`[lifecycle]`, `[autoscale]`) a replica draws power
//! only while it exists: serving, ready and idle, warm in standby or
//! starting (each at idle power, plus the busy share while serving); failed
//! and never-started slots draw nothing. Without one, every replica is
//! powered for the whole run.

use crate::cluster::fleet::PoolReport;
use crate::lifecycle::{GpuHours, LifecycleReport};
use crate::scenario::Scenario;
use serde::Serialize;

/// The power model in words, written into `summary.json`.
pub const POWER_MODEL: &str =
    "P = idle + (TDP - idle) x busy per GPU; TDP from the chip's datasheet, idle as [hardware.spec] idle_w or 0.15 x TDP";

/// Energy and power of one run (`summary.json` field `energy`), present
/// when every pool's hardware has a TDP (`[hardware.spec] tdp_w` or a
/// catalog preset).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct EnergyReport {
    pub power_model: String,
    /// GPU-hours powered (every GPU for the run, or with a life cycle the
    /// hours its replica existed).
    pub gpu_hours: f64,
    /// Of them, hours the GPU's replica ran iterations.
    pub busy_gpu_hours: f64,
    /// Mean board power of a powered GPU, W.
    pub avg_power_w_per_gpu: f64,
    /// Mean power of the whole fleet over the run, W.
    pub fleet_avg_power_w: f64,
    /// Energy of the fleet's GPUs over the run, kWh.
    pub energy_kwh: f64,
    /// Energy per output token of the completed requests, J (absent when
    /// none completed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joules_per_output_token: Option<f64>,
}

/// One group of GPUs of one chip: the whole fleet, or one pool.
struct Group {
    tdp_w: f64,
    idle_w: f64,
    gpu_hours: f64,
    busy_gpu_hours: f64,
}

impl Group {
    fn watt_hours(&self) -> f64 {
        self.idle_w * self.gpu_hours + (self.tdp_w - self.idle_w) * self.busy_gpu_hours
    }
}

/// Hours a life cycle kept GPUs powered, and of them busy.
fn powered(h: &GpuHours) -> (f64, f64) {
    (h.serving + h.idle_ready + h.standby + h.starting, h.serving)
}

/// The energy of a run of `s` that lasted `duration_s`, kept its replicas
/// `busy_fraction` busy (its pools each their own, `pools`), had the life
/// cycle `lifecycle` and completed requests with `output_tokens` output
/// tokens; `None` when a pool's hardware has no TDP.
pub fn energy_of(
    s: &Scenario,
    duration_s: f64,
    busy_fraction: f64,
    pools: &[PoolReport],
    lifecycle: Option<&LifecycleReport>,
    output_tokens: f64,
) -> Option<EnergyReport> {
    let hours = duration_s / 3600.0;
    let mut groups = Vec::new();
    if !s.declares_pools() {
        let (tdp_w, idle_w) = s.hardware.power_w()?;
        let (gpu_hours, busy_gpu_hours) = match lifecycle {
            Some(l) => powered(&l.gpu_hours),
            None => {
                let all = s.gpus() as f64 * hours;
                (all, all * busy_fraction)
            }
        };
        groups.push(Group {
            tdp_w,
            idle_w,
            gpu_hours,
            busy_gpu_hours,
        });
    } else {
        for (plan, report) in s.pools.iter().zip(pools) {
            let (tdp_w, idle_w) = plan.hardware().power_w()?;
            let own = lifecycle.and_then(|l| l.pools.iter().find(|p| p.pool == plan.name));
            let (gpu_hours, busy_gpu_hours) = match own {
                Some(p) => powered(&p.gpu_hours),
                None => {
                    // The busy share is over the pool's replica objects.
                    let gpus = plan.replicas as f64 * plan.parallel().gpus() as f64;
                    (gpus * hours, gpus * hours * report.busy_fraction)
                }
            };
            groups.push(Group {
                tdp_w,
                idle_w,
                gpu_hours,
                busy_gpu_hours,
            });
        }
    }
    let wh: f64 = groups.iter().map(Group::watt_hours).sum();
    let gpu_hours: f64 = groups.iter().map(|g| g.gpu_hours).sum();
    let busy_gpu_hours: f64 = groups.iter().map(|g| g.busy_gpu_hours).sum();
    let joules = wh * 3600.0;
    Some(EnergyReport {
        power_model: POWER_MODEL.to_string(),
        gpu_hours,
        busy_gpu_hours,
        avg_power_w_per_gpu: if gpu_hours > 0.0 { wh / gpu_hours } else { 0.0 },
        fleet_avg_power_w: if hours > 0.0 { wh / hours } else { 0.0 },
        energy_kwh: wh / 1000.0,
        joules_per_output_token: (output_tokens >= 1.0).then(|| joules / output_tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two replicas of TP 2 with `hardware` (a line before the tables, or
    /// a `[hardware.spec]` table after them).
    fn scenario(line: &str, table: &str) -> Result<Scenario, crate::ScenarioError> {
        let text = format!(
            r#"
name = "e"
horizon = {{ requests = 10 }}
model = {{ preset = "llama-3.1-8b" }}
{line}
fleet = {{ replicas = 2, tensor_parallel = 2 }}
[workload]
arrival = {{ process = "poisson", rate = 1.0 }}
prompt_tokens = {{ dist = "fixed", value = 100 }}
output_tokens = {{ dist = "fixed", value = 10 }}
{table}
"#
        );
        Scenario::from_toml_str(&text, "<test>")
    }

    #[test]
    fn a_fixed_fleet_draws_idle_power_plus_the_busy_share_of_the_rest() {
        let s = scenario(r#"hardware = { preset = "h100-sxm" }"#, "").unwrap();
        // 4 H100s (700 W, idle 105 W) for one hour, busy a quarter of it:
        // 105 + 595 / 4 = 253.75 W each, 1,015 W in all, 1.015 kWh.
        let e = energy_of(&s, 3600.0, 0.25, &[], None, 1_000_000.0).unwrap();
        assert!((e.avg_power_w_per_gpu - 253.75).abs() < 1e-9, "{e:?}");
        assert!((e.fleet_avg_power_w - 1015.0).abs() < 1e-9);
        assert!((e.energy_kwh - 1.015).abs() < 1e-12);
        assert!((e.gpu_hours - 4.0).abs() < 1e-12);
        assert!((e.busy_gpu_hours - 1.0).abs() < 1e-12);
        // 1.015 kWh = 3,654,000 J over a million tokens.
        assert!((e.joules_per_output_token.unwrap() - 3.654).abs() < 1e-9);
        assert_eq!(
            energy_of(&s, 3600.0, 0.25, &[], None, 0.0)
                .unwrap()
                .joules_per_output_token,
            None
        );
    }

    #[test]
    fn a_one_replica_run_draws_what_hand_arithmetic_gives() {
        let text = r#"
name = "one"
seed = 3
horizon = { requests = 200 }
model = { preset = "llama-3.1-8b" }
hardware = { preset = "l4" }
engine = { max_model_len = 4096 }
[workload]
arrival = { process = "poisson", rate = 4.0 }
prompt_tokens = { dist = "fixed", value = 500 }
output_tokens = { dist = "fixed", value = 100 }
"#;
        let s = Scenario::from_toml_str(text, "<test>").unwrap();
        let r = crate::simulation::Simulation::new(&s).run(|_| {}).unwrap();
        let sum = &r.summary;
        let e = sum.energy.as_ref().expect("the L4 has a TDP");
        // One L4 (72 W, idle 10.8 W): 10.8 + 61.2 × busy, for the run.
        let busy = sum.engine.busy_fraction;
        assert!(busy > 0.05 && busy < 1.0, "{busy}");
        let watts = 10.8 + 61.2 * busy;
        let secs = sum.duration_s;
        assert!((e.avg_power_w_per_gpu - watts).abs() < 1e-9, "{e:?}");
        assert!((e.fleet_avg_power_w - watts).abs() < 1e-9);
        assert!((e.energy_kwh - watts * secs / 3.6e6).abs() < 1e-12);
        // Every request completes: 200 × 100 output tokens.
        assert_eq!(sum.counts.completed, 200);
        let j = e.joules_per_output_token.unwrap();
        assert!((j - watts * secs / 20_000.0).abs() < 1e-9, "{j}");
    }

    #[test]
    fn an_inline_chip_without_a_tdp_reports_no_energy_and_its_idle_figure_is_used() {
        let spec = |power: &str| {
            format!(
                r#"
[hardware.spec]
bf16_tflops = 100.0
memory_gib = 80.0
memory_bw_tbyte_s = 2.0
interconnect_gbyte_s = 100.0
interconnect_latency_us = 5.0
pcie_gbyte_s = 32.0
{power}
"#
            )
        };
        let with = |power: &str| scenario("", &spec(power));
        let none = with("").unwrap();
        assert_eq!(energy_of(&none, 10.0, 0.5, &[], None, 1.0), None);
        let own = with("tdp_w = 500.0\nidle_w = 100.0").unwrap();
        let e = energy_of(&own, 3600.0, 0.5, &[], None, 1.0).unwrap();
        assert!((e.avg_power_w_per_gpu - 300.0).abs() < 1e-9, "{e:?}");
        let err = with("idle_w = 100.0").unwrap_err().to_string();
        assert!(err.contains("hardware.spec.idle_w"), "{err}");
        let err = with("tdp_w = 100.0\nidle_w = 200.0")
            .unwrap_err()
            .to_string();
        assert!(err.contains("from 0 to tdp_w"), "{err}");
    }
}
