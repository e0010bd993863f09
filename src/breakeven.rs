//! `servesim breakeven`: a simulated fleet's cost per million output tokens
//! at the utilization it measured, against a hosted API's prices, and the
//! volume where they meet (`sim::breakeven`).

use crate::cli::BreakEvenArgs;
use anyhow::{anyhow, Result};
use sim::breakeven::{compare, Prices};

/// Runs `servesim breakeven`.
pub fn run(args: BreakEvenArgs) -> Result<()> {
    let path = args.dir.join("summary.json");
    let text = sim::input_file::read_result(&path, "summary.json")?;
    let summary: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow!("{}: not a summary: {e}", path.display()))?;
    let prices = Prices {
        gpu_hour_usd: args.gpu_hour_usd,
        api_input_usd_per_m: args.api_input_usd_per_mtok,
        api_output_usd_per_m: args.api_output_usd_per_mtok,
    };
    let b = compare(&summary, prices).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&b)?);
        return Ok(());
    }
    let g = &b.gpu_hours;
    outln!(
        "{}: {:.2} h, {:.3} M input and {:.3} M output tokens",
        b.scenario,
        b.duration_h,
        b.input_tokens / 1e6,
        b.output_tokens / 1e6
    );
    outln!(
        "GPU-hours    {:.3} billed = {:.3} serving + {:.3} idle + {:.3} standby + {:.3} starting ({:.1} % utilization)",
        g.billed,
        g.serving,
        g.idle,
        g.standby_billed,
        g.starting,
        b.utilization * 100.0
    );
    outln!(
        "dedicated    ${:.2} at ${}/GPU-hour = ${:.3} per M output tokens",
        b.dedicated_usd,
        b.gpu_hour_usd,
        b.dedicated_usd_per_m_output
    );
    outln!(
        "hosted API   ${:.2} at ${}/M input + ${}/M output = ${:.3} per M output tokens",
        b.api_usd,
        b.api_input_usd_per_mtok,
        b.api_output_usd_per_mtok,
        b.api_usd_per_m_output
    );
    outln!(
        "break-even   {:.3} M output tokens/h for this fleet (measured {:.3} M/h, {:.0} % of it); or a GPU-hour at ${:.3}",
        b.break_even_output_tokens_per_h / 1e6,
        b.measured_output_tokens_per_h / 1e6,
        b.measured_output_tokens_per_h / b.break_even_output_tokens_per_h * 100.0,
        b.break_even_gpu_hour_usd
    );
    outln!(
        "cheaper      {} at the measured volume",
        if b.cheaper == "dedicated" {
            "the dedicated fleet"
        } else {
            "the hosted API"
        }
    );
    Ok(())
}
