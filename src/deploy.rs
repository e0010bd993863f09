//! What `plan` and `sweep` hand a platform team beside their tables: the
//! chosen deployment written as engine command lines and manifests
//! (`--emit`, into `<out>/deploy/`), and for `plan` the chosen fleet's
//! energy, its price and its carbon at the figures the user states.

use crate::cli::EmitFormat;
use anyhow::{bail, Context, Result};
use sim::emit::{self, Format};
use sim::Scenario;
use std::path::Path;

/// Subfolder of the output folder the emitted files go into.
pub const DEPLOY_DIR: &str = "deploy";

/// The formats `--emit` names (`all`: every one), in a fixed order.
pub fn formats(asked: &[EmitFormat]) -> Vec<Format> {
    let mut out: Vec<Format> = asked
        .iter()
        .flat_map(|f| match f {
            EmitFormat::Vllm => vec![Format::Vllm],
            EmitFormat::Sglang => vec![Format::Sglang],
            EmitFormat::Kubernetes => vec![Format::Kubernetes],
            EmitFormat::Dynamo => vec![Format::Dynamo],
            EmitFormat::All => Format::ALL.to_vec(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Writes the deployment of `s` in `formats` into `out/deploy/` and prints
/// the files and every setting a format could not express.
pub fn write(s: &Scenario, formats: &[Format], out: &Path) -> Result<()> {
    let dir = out.join(DEPLOY_DIR);
    let files = emit::emit(s, formats);
    emit::write(&dir, &files).with_context(|| format!("cannot write {}", dir.display()))?;
    for f in &files {
        outln!(
            "deployment: {}{}",
            dir.join(&f.file).display(),
            if f.notes.is_empty() {
                String::new()
            } else {
                format!(" ({} note(s), below and in the file)", f.notes.len())
            }
        );
        for n in &f.notes {
            outln!("  note: {n}");
        }
    }
    Ok(())
}

/// The chosen fleet's energy at the demand, per month, priced and with its
/// carbon when the figures are given (`energy.json` and printed).
#[derive(serde::Serialize)]
struct MonthlyEnergy {
    /// The simulation the figures come from: the chosen fleet at the demand.
    scenario: String,
    fleet_avg_power_w: f64,
    avg_power_w_per_gpu: f64,
    joules_per_output_token: Option<f64>,
    kwh_per_month: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    energy_price_usd_per_kwh: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    energy_usd_per_month: Option<f64>,
    gpu_usd_per_month: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_usd_per_month: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    carbon_g_per_kwh: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kg_co2_per_month: Option<f64>,
}

/// Simulates the chosen fleet `s` (sized, at the demand) and writes and
/// prints its monthly energy, priced at `price` and with carbon at `carbon`.
pub fn energy(
    s: &Scenario,
    gpu_usd_per_month: f64,
    price: Option<f64>,
    carbon: Option<f64>,
    out: &Path,
) -> Result<()> {
    let run = sim::simulation::Simulation::new(s)
        .run(|_| {})
        .with_context(|| format!("{}: the chosen fleet at the demand", s.origin))?;
    let Some(e) = run.summary.energy else {
        bail!(
            "the chosen option's hardware ({}) has no board power (tdp_w) in its datasheet, so its energy cannot be priced; give [hardware.spec] tdp_w",
            s.hardware.name
        );
    };
    let kwh = e.fleet_avg_power_w * sim::sweep::capacity::HOURS_PER_MONTH / 1000.0;
    let energy_usd = price.map(|p| kwh * p);
    let m = MonthlyEnergy {
        scenario: s.name().to_string(),
        fleet_avg_power_w: e.fleet_avg_power_w,
        avg_power_w_per_gpu: e.avg_power_w_per_gpu,
        joules_per_output_token: e.joules_per_output_token,
        kwh_per_month: kwh,
        energy_price_usd_per_kwh: price,
        energy_usd_per_month: energy_usd,
        gpu_usd_per_month,
        total_usd_per_month: energy_usd.map(|u| u + gpu_usd_per_month),
        carbon_g_per_kwh: carbon,
        kg_co2_per_month: carbon.map(|g| kwh * g / 1000.0),
    };
    let mut json = serde_json::to_string_pretty(&m)?;
    json.push('\n');
    let file = out.join("energy.json");
    sim::output::write_bytes_atomic(&file, json.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    outln!(
        "energy of the cheapest option at the demand: {:.0} W for the fleet ({:.0} W per GPU), {} kWh per month{}",
        e.fleet_avg_power_w,
        e.avg_power_w_per_gpu,
        sim::sig_figs::sig(kwh, 4),
        e.joules_per_output_token
            .map(|j| format!(", {} J per output token", sim::sig_figs::sig(j, 3)))
            .unwrap_or_default()
    );
    if let (Some(p), Some(u)) = (price, energy_usd) {
        outln!(
            "  at ${p} per kWh: ${u:.0} per month for energy + ${gpu_usd_per_month:.0} for the GPUs = ${:.0} per month",
            u + gpu_usd_per_month
        );
    }
    if let (Some(g), Some(kg)) = (carbon, m.kg_co2_per_month) {
        outln!(
            "  at {g} g CO2 per kWh: {} kg CO2 per month",
            sim::sig_figs::sig(kg, 4)
        );
    }
    outln!("  ({})", file.display());
    Ok(())
}
