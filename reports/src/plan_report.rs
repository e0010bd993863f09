//! The report of `servesim plan` (`plan.json`): the ranked options with
//! their fleets and costs, a chart of the sized options' monthly cost (each
//! bar's settings, fleet and SLO attainment on hover), the
//! throughput–interactivity frontier of the cheapest options, and the
//! pruned options with the reason each lost.

use crate::chart::{self, BarPlot, Chart, GREY, PALETTE};
use crate::document::Section;
use sim::deployment::DeployPlan;
use std::path::Path;

/// Reads `dir/plan.json`.
pub fn read(dir: &Path) -> Result<DeployPlan, String> {
    DeployPlan::read(&dir.join("plan.json")).map_err(|e| e.0)
}

/// Builds the plan section, drawing its chart into `charts`.
pub fn section(dir: &Path, charts: &Path) -> Result<Section, String> {
    let p = read(dir)?;
    let mut sec = Section::new(format!(
        "Plan: {} at {} requests/s",
        p.scenario,
        sim::sig_figs::rate(p.demand_rps)
    ));
    let sized: Vec<_> = p.options.iter().filter(|o| o.fleet.is_some()).collect();
    sec.para(format!(
        "The cheapest deployment meeting the scenario's SLOs for at least {:.1} % of requests at {} requests/s{}, over {} options of the space ({} sized, {} pruned); {} simulations{}{}. A cost marked ≥ is an option checked by short runs only: its count is a lower bound, already dearer than the cheapest option checked with a long run.",
        p.attainment_target * 100.0,
        sim::sig_figs::rate(p.demand_rps),
        if p.headroom > 0.0 {
            format!(" plus {:.0} % headroom", p.headroom * 100.0)
        } else {
            String::new()
        },
        p.options.len(),
        sized.len(),
        p.options.len() - sized.len(),
        p.simulations - p.simulations_reused,
        if p.simulations_reused > 0 {
            format!(
                " ({} more probes reused a run another search had made)",
                p.simulations_reused
            )
        } else {
            String::new()
        },
        match p.shard {
            Some(s) => format!(" (shard {s}: merge every shard for the whole space's answer)"),
            None => String::new(),
        }
    ));
    if let Some(kwh) = p.energy_usd_per_kwh {
        sec.para(format!(
            "Each option's monthly cost is its GPUs and their energy at ${kwh} per kWh: its fleet's mean power over the run that sized it, for 730 hours."
        ));
    }
    let rows = sized
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let f = o.fleet.as_ref().expect("sized");
            vec![
                (i + 1).to_string(),
                o.settings.clone(),
                match (&f.unit, f.units) {
                    (Some(u), Some(n)) => format!("{n} × ({u}) = {}", f.replicas),
                    _ => f.replicas.to_string(),
                },
                f.gpus.to_string(),
                format!(
                    "{}{:.0}",
                    if o.rechecked { "" } else { "≥ " },
                    f.usd_per_month
                ),
                format!("{:.2} %", f.attainment * 100.0),
                format!("{:.3}", f.goodput_rps_per_gpu),
                f.headroom
                    .map(|h| format!("{:.0} %", h * 100.0))
                    .unwrap_or_else(|| "-".into()),
                if o.rechecked {
                    "long run"
                } else {
                    "short runs"
                }
                .into(),
            ]
        })
        .collect();
    sec.table(
        &[
            "rank",
            "option",
            "replicas",
            "GPUs",
            "$/month",
            "SLO met",
            "goodput/GPU (req/s)",
            "headroom",
            "checked",
        ],
        rows,
    );
    if !sized.is_empty() {
        sec.figure(chart::render(&cost_chart(&p), charts)?);
    }
    frontier(dir, &mut sec, charts)?;
    let pruned: Vec<Vec<String>> = p
        .options
        .iter()
        .filter(|o| o.fleet.is_none())
        .map(|o| {
            vec![
                o.settings.clone(),
                o.simulations.to_string(),
                o.pruned.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if !pruned.is_empty() {
        sec.table(&["pruned option", "simulations", "why it lost"], pruned);
    }
    Ok(sec)
}

/// The throughput–interactivity frontier of the cheapest options
/// (`frontier.json`, written by `servesim plan`), drawn as a sweep's is.
fn frontier(dir: &Path, sec: &mut Section, charts: &Path) -> Result<(), String> {
    let path = dir.join("frontier.json");
    if !path.exists() {
        return Ok(());
    }
    let r = sim::sweep::SweepResults::read(&path).map_err(|e| e.0)?;
    let grid =
        sim::sweep::Grid::from_toml_str(&r.grid_toml, &format!("{} (space)", path.display()))
            .map_err(|e| e.0)?;
    let f = sim::sweep::frontier::frontier(&r, grid.objective.gpu_hour_usd.as_ref());
    if f.points.is_empty() {
        return Ok(());
    }
    sec.para(format!(
        "The cheapest {} option(s), each with its sized fleet at {} of the load it was sized for (the point at the full load is the plan's own run). {}",
        f.configurations.len(),
        sim::deployment::frontier::LOAD_FRACTIONS
            .iter()
            .map(|s| format!("{:.0} %", s * 100.0))
            .collect::<Vec<_>>()
            .join(", "),
        crate::sweep_report::frontier_text(&f)
    ));
    for c in crate::sweep_report::frontier_charts(&f) {
        sec.figure(chart::render(&c, charts)?);
    }
    Ok(())
}

/// Monthly cost of every sized option, in rank order; the cheapest in the
/// winner's colour, options checked by short runs only in grey.
fn cost_chart(p: &DeployPlan) -> Chart {
    let sized: Vec<_> = p.options.iter().filter(|o| o.fleet.is_some()).collect();
    let colors = sized
        .iter()
        .enumerate()
        .map(|(i, o)| match (i, o.rechecked) {
            (0, _) => PALETTE[2],
            (_, true) => PALETTE[0],
            (_, false) => GREY,
        })
        .collect();
    Chart::Bars(BarPlot {
        name: "plan-options".into(),
        title: format!(
            "Monthly cost of each option at {} requests/s — {}",
            sim::sig_figs::rate(p.demand_rps),
            p.scenario
        ),
        x_label: "option, by rank".into(),
        y_label: "cost per month (USD)".into(),
        bars: sized
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let f = o.fleet.as_ref().expect("sized");
                (format!("#{}", i + 1), f.usd_per_month)
            })
            .collect(),
        colors,
        tips: sized
            .iter()
            .map(|o| {
                let f = o.fleet.as_ref().expect("sized");
                format!(
                    "{}; {} replicas, {} GPUs at ${:.2}/GPU-hour; {:.2} % met; {}",
                    o.settings,
                    f.replicas,
                    f.gpus,
                    f.gpu_hour_usd,
                    f.attainment * 100.0,
                    if o.rechecked {
                        "checked with a long run"
                    } else {
                        "short runs only: a lower bound"
                    }
                )
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::deployment::{OptionResult, PlanInputs, SizedFleet};

    fn option(index: usize, usd: f64, rechecked: bool) -> OptionResult {
        OptionResult {
            index,
            settings: format!("hardware.preset = \"hw{index}\""),
            hardware: Some(format!("HW{index}")),
            simulations: 10,
            fleet: Some(SizedFleet {
                replicas: 3,
                gpus_per_replica: 1,
                unit: None,
                units: None,
                gpus: 3,
                // The price the cost follows from (plan.json is checked
                // on read: cost = GPUs × price × 730 h).
                gpu_hour_usd: usd / (3.0 * 730.0),
                usd_per_month: usd,
                attainment: 0.995,
                goodput_rps_per_gpu: 10.0,
                headroom: None,
                max_load_rps: None,
                energy_kwh_per_month: None,
                energy_usd_per_month: None,
            }),
            pruned: None,
            rechecked,
        }
    }

    /// Each option's bar says on hover which option it is, its fleet and
    /// whether a long run checked it; pruned options are listed with why.
    #[test]
    fn the_plan_section_ranks_options_and_names_each_bar() {
        let mut pruned = option(2, 0.0, false);
        pruned.fleet = None;
        pruned.pruned = Some("3 does not divide 32 heads".into());
        let plan = DeployPlan {
            format: sim::deployment::FORMAT.into(),
            scenario: "q".into(),
            demand_rps: 70.0,
            headroom: 0.0,
            attainment_target: 0.99,
            tolerance: 0.01,
            shard: None,
            options: vec![option(1, 5453.0, true), option(0, 7643.0, false), pruned],
            best: Some(1),
            simulations: 30,
            headroom_simulations: 0,
            simulations_reused: 0,
            energy_usd_per_kwh: None,
            inputs: PlanInputs {
                scenario_toml: String::new(),
                scenario_origin: "q.toml".into(),
                space_toml: String::new(),
                space_origin: "s.toml".into(),
            },
        };
        let svg = crate::interactive::svg(&cost_chart(&plan));
        assert!(svg.contains("data-tip=\"#1: "), "{svg}");
        assert!(svg.contains("hw1"), "{svg}");
        assert!(svg.contains("short runs only"), "{svg}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("plan.json"),
            serde_json::to_string(&plan).unwrap(),
        )
        .unwrap();
        let charts = dir.path().join("charts");
        std::fs::create_dir_all(&charts).unwrap();
        let sec = section(dir.path(), &charts).unwrap();
        let md = crate::document::Doc {
            title: "t".into(),
            sections: vec![sec],
        }
        .markdown();
        assert!(md.contains("≥ 7643"), "{md}");
        assert!(md.contains("3 does not divide 32 heads"), "{md}");
    }
}
