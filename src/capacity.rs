//! `servesim capacity`: the highest load within the SLOs and the fleet a
//! demand needs, printed, with every probe logged to stderr as it finishes
//! and the whole search written to `capacity.json`.

use crate::cli::CapacityArgs;
use anyhow::{Context, Result};
use sim::sig_figs::rate;
use sim::sweep::capacity::{
    fleet_count, plan_capacity, CapacityQuery, CapacityReport, FleetUnit, Probe,
};
use sim::Scenario;
use std::path::Path;

/// Runs `servesim capacity`.
pub fn run(args: CapacityArgs) -> Result<()> {
    if args.json {
        crate::json_stdout();
    }
    let origin = args.scenario.display().to_string();
    let text = sim::input_file::read_config(&args.scenario, "scenario file")?;
    let scenario = Scenario::from_toml_str(&text, &origin)?;
    let name = scenario.name().to_string();
    let unit = FleetUnit::of(&scenario);
    let query = CapacityQuery {
        attainment: args.attainment,
        replicas: args.replicas,
        demand_rps: args.demand,
        headroom: args.headroom / 100.0,
        spare: args.spare,
        gpu_hour_usd: args.gpu_hour_usd,
        tolerance: args.tolerance,
    };
    let log = |p: &Probe| {
        eprintln!(
            "  {:<16} {:>14} at {:>10} req/s: {:>6.2} % met, TTFT p99 {:>9.1} ms, TPOT p99 {:>7.2} ms  {}",
            p.search,
            fleet_count(unit.as_ref(), p.replicas),
            rate(p.rate_rps),
            p.attainment * 100.0,
            p.ttft_p99_ms,
            p.tpot_p99_ms,
            match (p.meets_slo, p.stable) {
                (true, _) => "meets",
                (false, true) => "misses",
                (false, false) => "misses (backlog growing: not a steady state)",
            }
        )
    };
    let out = args
        .out
        .unwrap_or_else(|| Path::new("out").join(format!("{name}-capacity")));
    // Refuse an unwritable folder, or one another run is writing, up front.
    let lock = sim::output::OutputLock::acquire(&out)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    let report = plan_capacity(&text, &origin, &query, &log)?;
    let mut json = serde_json::to_string_pretty(&report)?;
    json.push('\n');
    sim::output::write_bytes_atomic(&out.join("capacity.json"), json.as_bytes())
        .with_context(|| format!("cannot write {}", out.display()))?;
    drop(lock);
    print(&report);
    outln!("results: {}/capacity.json", out.display());
    if args.report {
        crate::write_report(&out)?;
    }
    if args.json {
        crate::print_json(&json);
    }
    Ok(())
}

fn probe(p: &Probe) -> String {
    format!(
        "{:.2} % met, TTFT p99 {:.1} ms, TPOT p99 {:.2} ms",
        p.attainment * 100.0,
        p.ttft_p99_ms,
        p.tpot_p99_ms
    )
}

/// The SLO the searches judged by, with the attainment target.
fn slo_text(c: &CapacityReport) -> String {
    let thresholds = [c.slo_ttft_ms, c.slo_tpot_ms, c.slo_e2e_ms];
    let targets = sim::report::describe_slo(thresholds, &c.slo_percentiles_ms, " and ");
    let share = c.attainment_target * 100.0;
    if thresholds.iter().all(Option::is_none) {
        // Without a per-request threshold the attainment is the share completed.
        format!("{targets} with ≥ {share:.1} % of requests completed")
    } else {
        format!("{targets} for ≥ {share:.1} % of requests")
    }
}

fn print(c: &CapacityReport) {
    let m = &c.max_load;
    let unit = c.unit.as_ref();
    let replicas = |n: u32| fleet_count(unit, n);
    let each = if unit.is_some() { "unit" } else { "replica" };
    outln!(
        "capacity of {} — SLO: {} ({} simulations)",
        c.scenario,
        slo_text(c),
        c.probes.len()
    );
    outln!(
        "highest load within the SLOs, {}: {} req/s ({} per {each}); {} req/s misses",
        replicas(m.replicas),
        rate(m.rate_rps),
        rate(m.per_replica_rps),
        rate(m.fails_at_rps)
    );
    outln!("  at {} req/s: {}", rate(m.rate_rps), probe(&m.at));
    let Some(s) = &c.sizing else {
        return;
    };
    outln!("demand {} req/s:", rate(s.demand_rps));
    // A fleet one smaller that reached the target share but not a steady
    // state says why it does not count.
    let below = |b: &Option<Probe>| match b {
        Some(b) if !b.stable && b.attainment >= c.attainment_target => format!(
            "; {}: {}, but its backlog grew: not a steady state",
            replicas(b.replicas),
            probe(b)
        ),
        Some(b) => format!("; {}: {}", replicas(b.replicas), probe(b)),
        None => String::new(),
    };
    if let Some(u) = unit {
        outln!(
            "  one unit is the pools as written: {} = {} replicas, {} GPUs",
            u.shape,
            u.replicas,
            u.gpus
        );
    }
    let row = |label: String, value: String| outln!("  {label:<24} {value}");
    row(
        format!("fewest {each}s"),
        format!(
            "{:>5}  ({}{})",
            s.replicas_min,
            probe(&s.at_min),
            below(&s.below_min)
        ),
    );
    if s.headroom > 0.0 {
        row(
            format!("with {:.0} % headroom", s.headroom * 100.0),
            format!(
                "{:>5}  (at {} req/s: {}{})",
                s.replicas_with_headroom,
                rate(s.sized_for_rps),
                probe(&s.at_headroom),
                below(&s.below_headroom)
            ),
        );
    }
    row(
        if s.spare > 0 {
            format!("+ {} spare (N+{})", s.spare, s.spare)
        } else {
            "fleet (no spares)".into()
        },
        match unit {
            Some(u) => format!(
                "{:>5}  units = {} = {} GPUs ({} per unit)",
                s.replicas_total,
                u.pools_at(s.replicas_total),
                s.gpus_total,
                s.gpus_per_replica
            ),
            None => format!(
                "{:>5}  replicas = {} GPUs ({} per replica)",
                s.replicas_total, s.gpus_total, s.gpus_per_replica
            ),
        },
    );
    row(
        "cost per month".into(),
        match (s.usd_per_month, s.gpu_hour_usd) {
            (Some(m), Some(p)) => format!(
                "${m:.0}  ({} GPUs × ${p:.2}/GPU-hour × {} h)",
                s.gpus_total, c.hours_per_month
            ),
            _ => "(state a price with --gpu-hour-usd)".into(),
        },
    );
}
