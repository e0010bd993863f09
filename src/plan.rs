//! `servesim plan` and `servesim plan merge`: the ranked options of a
//! declared space at a demand (or one shard of them), printed, with every
//! simulation logged to stderr as it finishes, and the whole plan written
//! to `plan.json` and `plan.csv`. An interrupted plan resumes from the
//! options it checkpointed in its output folder.

use crate::cli::{PlanAction, PlanArgs};
use anyhow::{bail, Context, Result};
use sim::deployment::frontier::{frontier_runs, FRONTIER_OPTIONS, LOAD_FRACTIONS};
use sim::deployment::{
    check_space, estimate, exhaustive, merge, plan_deployment, DeployPlan, PlanQuery, StagedOption,
};
use sim::sweep::capacity::{Probe, ProbeCache};
use sim::sweep::checkpoint::Checkpoint;
use sim::sweep::{Grid, Shard};
use sim::Scenario;
use std::path::{Path, PathBuf};

/// Subfolder of the output folder holding a plan's finished options.
const OPTIONS_DIR: &str = "options";

/// Past this many expected simulations a plan warns before it starts
/// (about an hour on a laptop's cores at the quickstart's speed).
const LARGE_PLAN_SIMULATIONS: usize = 2_000;

/// Runs `servesim plan` or `servesim plan merge`.
pub fn run(args: PlanArgs) -> Result<()> {
    if let Some(PlanAction::Merge(m)) = args.action {
        if m.json {
            crate::json_stdout();
        }
        merge_shards(&m.shards, &m.out, m.report)?;
        if m.json {
            crate::print_json_file(&m.out.join("plan.json"))?;
        }
        return Ok(());
    }
    if args.json {
        crate::json_stdout();
    }
    let (Some(scenario), Some(space), Some(demand)) = (args.scenario, args.space, args.demand)
    else {
        bail!("plan needs a scenario, --space and --demand");
    };
    let origin = scenario.display().to_string();
    let text = sim::input_file::read_config(&scenario, "scenario file")?;
    let name = Scenario::from_toml_str(&text, &origin)?.name().to_string();
    let grid = Grid::load(&space)?;
    let q = PlanQuery {
        demand_rps: demand,
        headroom: args.headroom / 100.0,
        attainment: args.attainment,
        tolerance: args.tolerance,
        energy_usd_per_kwh: args.energy_price_kwh,
    };
    // Before the output folder is locked or a checkpoint opened.
    q.check()?;
    let emit = crate::deploy::formats(&args.emit);
    let shard = args.shard.unwrap_or(Shard::ALL);
    if args.exhaustive.is_some() && shard != Shard::ALL {
        bail!("--exhaustive runs the whole space for comparison; it takes no --shard");
    }
    // The space checked whole, then its size told before a long search:
    // options × the simulations each takes.
    check_space(&text, &origin, &grid)?;
    let size = estimate(&grid, shard, args.exhaustive);
    eprintln!(
        "plan: {} option(s) × about {} simulations each ≈ {} simulations",
        size.options,
        size.simulations / size.options.max(1),
        size.simulations
    );
    if size.simulations > LARGE_PLAN_SIMULATIONS {
        eprintln!(
            "warning: a large plan (≈ {} simulations, over {LARGE_PLAN_SIMULATIONS}); it checkpoints every option into its output folder and resumes when run again, and --shard I/N splits it over machines (then `servesim plan merge`)",
            size.simulations
        );
    }
    let out = args
        .out
        .unwrap_or_else(|| Path::new("out").join(format!("{name}-plan")));
    let lock = sim::output::OutputLock::acquire(&out)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    let started = std::time::Instant::now();
    let cache = ProbeCache::default();
    let (plan, checkpoint) = match args.exhaustive {
        Some(0) => bail!("--exhaustive must be at least 1"),
        Some(n) => (exhaustive(&text, &origin, &grid, &q, n)?, None),
        None => {
            // The checkpoint's identity holds everything the options'
            // results depend on besides the two files.
            let mut query = format!(
                "demand {} headroom {} attainment {} tolerance {} shard {shard}",
                q.demand_rps, q.headroom, q.attainment, q.tolerance
            );
            if let Some(p) = q.energy_usd_per_kwh {
                query.push_str(&format!(" energy {p}"));
            }
            let checkpoint: Checkpoint<StagedOption> =
                Checkpoint::open_in(&out.join(OPTIONS_DIR), &text, &grid.text, &query)?;
            if !checkpoint.done.is_empty() {
                eprintln!(
                    "resuming: {} option(s) already in {}",
                    checkpoint.done.len(),
                    out.join(OPTIONS_DIR).display()
                );
            }
            let plan = plan_deployment(
                &text,
                &origin,
                &grid,
                &q,
                shard,
                Some(&checkpoint),
                Some(&cache),
                &log,
            )?;
            (plan, Some(checkpoint))
        }
    };
    let wall = started.elapsed().as_secs_f64();
    refuse_all_invalid(&plan, &grid.origin)?;
    let ran = cache.simulated();
    let frontier = (shard == Shard::ALL)
        .then(|| frontier_runs(&plan, Some(&cache), &log))
        .transpose()?;
    write(&out, &plan)?;
    if let Some(f) = &frontier {
        write_frontier(&out, f)?;
    }
    // The checkpoint goes only once the plan it holds is written.
    if let Some(c) = checkpoint {
        c.finish();
    }
    drop(lock);
    print(&plan);
    outln!(
        "{} simulations ({} measuring the cheapest option's headroom{}) in {wall:.1} s wall; results: {}/{{plan.json,plan.csv}}",
        plan.simulations - plan.simulations_reused,
        plan.headroom_simulations,
        if plan.simulations_reused > 0 {
            format!(
                "; {} more probes reused a run another search had made",
                plan.simulations_reused
            )
        } else {
            String::new()
        },
        out.display()
    );
    if let Some(f) = &frontier {
        print_frontier(f, cache.simulated() - ran, &out);
    }
    if let Some(s) = plan.shard {
        outln!(
            "this is shard {s}: the cheapest option of the whole space and its headroom come from `servesim plan merge` over every shard's folder"
        );
    }
    let wants_energy = args.energy_price_kwh.is_some() || args.carbon_g_per_kwh.is_some();
    if !emit.is_empty() || wants_energy {
        chosen(
            &plan,
            &emit,
            args.energy_price_kwh,
            args.carbon_g_per_kwh,
            &out,
        )?;
    }
    if args.report {
        crate::write_report(&out)?;
    }
    if args.json {
        crate::print_json_file(&out.join("plan.json"))?;
    }
    Ok(())
}

/// A plan none of whose options is even a valid scenario on this base
/// (every option pruned before a simulation) answers nothing: an error
/// with the first option's reason, not "no option meets the SLOs".
fn refuse_all_invalid(plan: &DeployPlan, space: &str) -> Result<()> {
    // An option pruned by its latency floor is valid: it answers that no
    // fleet of it meets the SLOs.
    let all_invalid = plan.best.is_none()
        && !plan.options.is_empty()
        && plan.options.iter().all(|o| {
            o.simulations == 0
                && !o
                    .pruned
                    .as_deref()
                    .is_some_and(|r| r.starts_with(sim::deployment::bound::LATENCY_FLOOR))
        });
    if let (true, Some(first)) = (all_invalid, plan.options.first()) {
        bail!(
            "{space}: no option of the space is a valid scenario on this base, so none was simulated; option {} ({}): {}",
            first.index,
            first.settings,
            first.pruned.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

/// The cheapest option's deployment written (`--emit`) and its energy
/// priced (`--energy-price-kwh`, `--carbon-g-per-kwh`).
fn chosen(
    plan: &DeployPlan,
    emit: &[sim::emit::Format],
    price: Option<f64>,
    carbon: Option<f64>,
    out: &Path,
) -> Result<()> {
    let Some(s) = sim::emit::chosen::chosen_scenario(plan)? else {
        outln!("no option meets the SLOs, so there is no deployment to write or energy to price");
        return Ok(());
    };
    if !emit.is_empty() {
        crate::deploy::write(&s, emit, out)?;
    }
    if price.is_some() || carbon.is_some() {
        let gpu_usd = plan
            .options
            .iter()
            .find(|o| Some(o.index) == plan.best)
            .and_then(|o| o.fleet.as_ref())
            .map_or(0.0, |f| {
                f.usd_per_month - f.energy_usd_per_month.unwrap_or(0.0)
            });
        crate::deploy::energy(&s, gpu_usd, price, carbon, out)?;
    }
    Ok(())
}

/// Every simulation of a plan, as it finishes, on stderr.
fn log(option: usize, p: &Probe) {
    eprintln!(
        "  option {option:<3} {:<22} {:>14} at {:>9.3} req/s: {:>6.2} % met  {}",
        p.search,
        match p.pool_replicas {
            Some(n) => format!("{} unit(s) = {n} replicas", p.replicas),
            None => format!("{} replica(s)", p.replicas),
        },
        p.rate_rps,
        p.attainment * 100.0,
        if p.meets_slo { "meets" } else { "misses" }
    )
}

/// Writes `plan.json` and `plan.csv`, each whole or not at all.
fn write(out: &Path, plan: &DeployPlan) -> Result<()> {
    let mut json = serde_json::to_string_pretty(plan)?;
    json.push('\n');
    sim::output::write_bytes_atomic(&out.join("plan.json"), json.as_bytes())
        .with_context(|| format!("cannot write {}", out.display()))?;
    sim::output::write_bytes_atomic(&out.join("plan.csv"), csv(plan).as_bytes())
        .with_context(|| format!("cannot write {}", out.display()))?;
    Ok(())
}

/// `servesim plan merge`: the shards' plans read back, merged, written.
fn merge_shards(dirs: &[PathBuf], out: &Path, report: bool) -> Result<()> {
    let mut parts = Vec::new();
    let mut names = Vec::new();
    for d in dirs {
        parts.push(DeployPlan::read(&d.join("plan.json"))?);
        names.push(d.display().to_string());
    }
    let lock = sim::output::OutputLock::acquire(out)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    let started = std::time::Instant::now();
    let plan = merge(parts, &names, &log)?;
    let wall = started.elapsed().as_secs_f64();
    let frontier = frontier_runs(&plan, None, &log)?;
    write(out, &plan)?;
    write_frontier(out, &frontier)?;
    drop(lock);
    print(&plan);
    outln!(
        "merged {} shards: {} simulations in all ({} measuring the cheapest option's headroom, {wall:.1} s wall here); results: {}/{{plan.json,plan.csv}}",
        dirs.len(),
        plan.simulations,
        plan.headroom_simulations,
        out.display()
    );
    print_frontier(&frontier, frontier.points.len(), out);
    if report {
        crate::write_report(out)?;
    }
    Ok(())
}

/// Writes the frontier's runs (`frontier.json`, the shape of a sweep's
/// results) and its chart's figures (`frontier.csv`), each whole.
fn write_frontier(out: &Path, runs: &sim::sweep::SweepResults) -> Result<()> {
    let price = sim::sweep::Grid::from_toml_str(&runs.grid_toml, "space")?
        .objective
        .gpu_hour_usd;
    let f = sim::sweep::frontier::frontier(runs, price.as_ref());
    let mut json = serde_json::to_string_pretty(runs)?;
    json.push('\n');
    sim::output::write_bytes_atomic(&out.join("frontier.json"), json.as_bytes())
        .with_context(|| format!("cannot write {}", out.display()))?;
    f.write(out)
        .with_context(|| format!("cannot write {}", out.display()))?;
    Ok(())
}

/// The frontier's runs, in a line: its load points, and how many of
/// them were simulated for it (the rest reused the plan's runs).
fn print_frontier(f: &sim::sweep::SweepResults, simulated: usize, out: &Path) {
    if f.points.is_empty() {
        return;
    }
    outln!(
        "frontier: the {} cheapest option(s) (at most {FRONTIER_OPTIONS}) with their sized fleets at {} of the load sized for: {} load points, {simulated} simulated for it, {} reused from the plan's runs; {}/{{frontier.csv,frontier.json}}",
        f.points.len() / LOAD_FRACTIONS.len(),
        LOAD_FRACTIONS
            .iter()
            .map(|s| format!("{:.0} %", s * 100.0))
            .collect::<Vec<_>>()
            .join(", "),
        f.points.len(),
        f.points.len().saturating_sub(simulated),
        out.display()
    );
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per option, ranked: sized ones cheapest first, then the pruned.
fn csv(p: &DeployPlan) -> String {
    let mut s = String::from(
        "rank,option,settings,hardware,replicas,gpus,usd_per_month,attainment,goodput_rps_per_gpu,headroom,simulations,pruned,unit,units,rechecked\n",
    );
    for (i, o) in p.options.iter().enumerate() {
        let f = o.fleet.as_ref();
        let num = |v: Option<String>| v.unwrap_or_default();
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            if f.is_some() {
                (i + 1).to_string()
            } else {
                String::new()
            },
            o.index,
            csv_cell(&o.settings),
            csv_cell(o.hardware.as_deref().unwrap_or("")),
            num(f.map(|f| f.replicas.to_string())),
            num(f.map(|f| f.gpus.to_string())),
            num(f.map(|f| format!("{:.2}", f.usd_per_month))),
            num(f.map(|f| f.attainment.to_string())),
            num(f.map(|f| f.goodput_rps_per_gpu.to_string())),
            num(f.and_then(|f| f.headroom).map(|h| h.to_string())),
            o.simulations,
            csv_cell(o.pruned.as_deref().unwrap_or("")),
            csv_cell(f.and_then(|f| f.unit.as_deref()).unwrap_or("")),
            num(f.and_then(|f| f.units).map(|n| n.to_string())),
            o.rechecked,
        ));
    }
    s
}

fn print(p: &DeployPlan) {
    outln!(
        "plan for {} at {} req/s{} — SLO met by ≥ {:.1} % of requests; {} options",
        p.scenario,
        p.demand_rps,
        if p.headroom > 0.0 {
            format!(" + {:.0} % headroom", p.headroom * 100.0)
        } else {
            String::new()
        },
        p.attainment_target * 100.0,
        p.options.len()
    );
    outln!(
        "{:>4}  {:<52} {:>8} {:>5} {:>11} {:>8} {:>12} {:>8} {:>5}  checked",
        "rank",
        "option",
        "replicas",
        "GPUs",
        "$/month",
        "SLO met",
        "goodput/GPU",
        "headroom",
        "sims"
    );
    let mut rank = 0;
    for o in &p.options {
        match &o.fleet {
            Some(f) => {
                rank += 1;
                outln!(
                    "{:>4}  {:<52} {:>8} {:>5} {:>11} {:>7.2}% {:>12.3} {:>8} {:>5}  {}",
                    rank,
                    o.settings,
                    f.replicas,
                    f.gpus,
                    // A short count's cost is a lower bound.
                    if o.rechecked {
                        format!("{:.0}", f.usd_per_month)
                    } else {
                        format!("≥ {:.0}", f.usd_per_month)
                    },
                    f.attainment * 100.0,
                    f.goodput_rps_per_gpu,
                    f.headroom
                        .map(|h| format!("{:.0} %", h * 100.0))
                        .unwrap_or_else(|| "-".into()),
                    o.simulations,
                    if o.rechecked {
                        "long run"
                    } else {
                        "short run only"
                    }
                );
            }
            None => outln!(
                "   -  {:<52} pruned ({} sims): {}",
                o.settings,
                o.simulations,
                o.pruned.as_deref().unwrap_or("")
            ),
        }
    }
    match p.best {
        Some(i) => {
            let o = p
                .options
                .iter()
                .find(|o| o.index == i)
                .expect("best is an option");
            let f = o.fleet.as_ref().expect("best is sized");
            match (&f.unit, f.units) {
                (Some(u), Some(n)) => outln!(
                    "cheapest: {}: {n} units of {u} = {} replicas ({} GPUs), ${:.0} per month",
                    o.settings,
                    f.replicas,
                    f.gpus,
                    f.usd_per_month
                ),
                _ => outln!(
                    "cheapest: {} × {} replicas ({} GPUs), ${:.0} per month",
                    o.settings,
                    f.replicas,
                    f.gpus,
                    f.usd_per_month
                ),
            }
        }
        None => outln!("no option meets the SLOs at this demand"),
    }
    if p.options.iter().any(|o| o.fleet.is_some() && !o.rechecked) {
        outln!(
            "options checked by a short run only: their counts are lower bounds, already dearer than the cheapest long-run-checked option, so no long run could make them win"
        );
    }
}
