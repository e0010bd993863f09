//! `servesim sweep` and `servesim sweep merge`: run a grid (or one shard of
//! it) with a progress bar, or merge shard outputs; then write the results,
//! choose the operating point, rerun it in full, and print the decision.

use crate::cli::{SweepAction, SweepArgs};
use anyhow::{anyhow, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sim::sweep::objective::{self, Analysis, Objective};
use sim::sweep::results::cell;
use sim::sweep::{run as runner, shard, CheckedSweep, Grid, Shard, SweepResults};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Runs `servesim sweep` or `servesim sweep merge`.
pub fn run(args: SweepArgs) -> Result<()> {
    let json = match &args.action {
        Some(SweepAction::Merge(m)) => m.json,
        None => args.json,
    };
    if json {
        crate::json_stdout();
    }
    let out = match args.action {
        Some(SweepAction::Merge(m)) => {
            merge(&m.shards, &m.out, m.report, &[])?;
            m.out
        }
        None => {
            let (Some(scenario), Some(grid)) = (args.scenario, args.grid) else {
                return Err(anyhow!("sweep needs a scenario and --grid"));
            };
            let emit = crate::deploy::formats(&args.emit);
            sweep(&scenario, &grid, args.out, args.shard, args.report, &emit)?
        }
    };
    if json {
        // A shard has no operating point: its own points instead.
        let decision = out.join("operating-point.json");
        if args.shard.is_some_and(|s| s != Shard::ALL) || !decision.exists() {
            crate::print_json_file(&out.join("sweep.json"))?;
        } else {
            crate::print_json_file(&decision)?;
        }
    }
    Ok(())
}

/// A bar with ETA on stderr when it is a terminal; hidden otherwise.
fn progress_bar(points: usize) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(points as u64), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(points as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "sweeping [{elapsed_precise}] {wide_bar} {pos}/{len} points, eta {eta}",
        )
        .expect("valid template"),
    );
    bar
}

fn sweep(
    scenario: &Path,
    grid: &Path,
    out: Option<PathBuf>,
    shard: Option<Shard>,
    report: bool,
    emit: &[sim::emit::Format],
) -> Result<PathBuf> {
    let grid = Grid::load(grid)?;
    let origin = scenario.display().to_string();
    let text = sim::input_file::read_config(scenario, "scenario file")?;
    let plan = CheckedSweep::new(&text, &origin, grid)?;
    let shard = shard.unwrap_or(Shard::ALL);
    if !emit.is_empty() && shard != Shard::ALL {
        return Err(anyhow!(
            "--emit writes the operating point, which only a whole sweep has; run it without --shard"
        ));
    }
    let out = out.unwrap_or_else(|| Path::new("out").join(format!("{}-sweep", plan.scenario_name)));
    let mine = plan.points.iter().filter(|p| shard.holds(p.index)).count();
    let threads = rayon::current_num_threads();
    eprintln!(
        "sweep: {} point(s){} of {}, {} sampling, {threads} thread(s)",
        mine,
        if shard.count > 1 {
            format!(" (shard {shard} of {})", plan.points.len())
        } else {
            String::new()
        },
        plan.scenario_name,
        plan.grid.sample.name()
    );
    // Refuse an unwritable folder, or one another run is writing, up front.
    let lock = sim::output::OutputLock::acquire(&out)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    // Finished points are saved as they finish; a rerun resumes from them.
    let checkpoint =
        sim::sweep::checkpoint::Checkpoint::open(&out, &plan.scenario_toml, &plan.grid.text)?;
    if !checkpoint.done.is_empty() {
        eprintln!(
            "sweep: resuming: {} finished point(s) read from {}",
            checkpoint.done.len(),
            out.join(sim::sweep::checkpoint::POINTS_DIR).display()
        );
    }
    let bar = progress_bar(mine);
    let started = Instant::now();
    let results = runner::run_resumable(&plan, shard, &|| bar.inc(1), Some(&checkpoint))?;
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    eprintln!(
        "ran {mine} point(s) in {wall:.1} s wall ({:.0} points/min, {threads} thread(s))",
        mine as f64 / wall.max(1e-9) * 60.0
    );
    results.write(&out)?;
    checkpoint.finish();
    let _lock = lock;
    if results.shard.is_some() {
        outln!(
            "shard {shard}: {mine} of {} points → {}/{{sweep.json,sweep.csv}}",
            plan.points.len(),
            out.display()
        );
        outln!("when every shard is done: servesim sweep merge SHARD_DIR... --out DIR");
        if report {
            crate::write_report(&out)?;
        }
        return Ok(out);
    }
    finish(&plan, &results, &out, report, emit)?;
    Ok(out)
}

fn merge(dirs: &[PathBuf], out: &Path, report: bool, emit: &[sim::emit::Format]) -> Result<()> {
    let parts = dirs
        .iter()
        .map(|d| SweepResults::read(&d.join("sweep.json")))
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let merged = shard::merge(parts, &names)?;
    let from = dirs[0].join("sweep.json").display().to_string();
    let grid = Grid::from_toml_str(&merged.grid_toml, &format!("{from} (grid)"))?;
    // The scenario's own path, so files it names (traces) resolve as in the
    // shards' runs; its text comes from the shards.
    let plan = CheckedSweep::new(&merged.scenario_toml, &merged.scenario_path, grid)?;
    merged.write(out)?;
    eprintln!(
        "merged {} shards: {} points",
        dirs.len(),
        merged.points.len()
    );
    finish(&plan, &merged, out, report, emit)
}

/// Chooses the operating point, reruns it in full into `operating-point/`,
/// and prints the front and the choice.
fn finish(
    plan: &CheckedSweep,
    results: &SweepResults,
    out: &Path,
    report: bool,
    emit: &[sim::emit::Format],
) -> Result<()> {
    let obj = plan.grid.objective.resolve();
    let a = objective::analyze(results, &obj);
    let mut json = serde_json::to_string_pretty(&a)?;
    json.push('\n');
    // Whole or absent: a failed write leaves no file, not this one cut nor
    // an earlier sweep's.
    let op_file = out.join("operating-point.json");
    if let Err(e) = sim::output::write_bytes_atomic(&op_file, json.as_bytes()) {
        let _ = std::fs::remove_file(&op_file);
        return Err(e).with_context(|| format!("cannot write {}", op_file.display()));
    }
    let op_dir = out.join(reports::OPERATING_POINT_DIR);
    if op_dir.exists() {
        // Stale files from an earlier sweep would be reported as this one's.
        std::fs::remove_dir_all(&op_dir)
            .with_context(|| format!("cannot replace {}", op_dir.display()))?;
    }
    if let Some(best) = a.best {
        let run = runner::run_full(plan, &plan.points[best])?;
        sim::report::write_all(&op_dir, &run)
            .with_context(|| format!("cannot write {}", op_dir.display()))?;
    }
    // The throughput–interactivity frontier, one curve per configuration.
    sim::sweep::frontier::frontier(results, obj.gpu_hour_usd.as_ref())
        .write(out)
        .with_context(|| format!("cannot write {}", out.join("frontier.csv").display()))?;
    print_decision(plan, results, &obj, &a);
    match a.best {
        Some(best) if !emit.is_empty() => {
            let s = plan.scenario_for(&plan.points[best])?;
            crate::deploy::write(&s, emit, out)?;
        }
        None if !emit.is_empty() => {
            outln!("no operating point, so there is no deployment to write")
        }
        _ => {}
    }
    outln!(
        "results: {}/{{sweep.csv,sweep.json,frontier.csv,operating-point.json{}}}",
        out.display(),
        if a.best.is_some() {
            ",operating-point/"
        } else {
            ""
        }
    );
    if report {
        crate::write_report(out)?;
    }
    Ok(())
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

/// Front points printed; the rest are in `operating-point.json`.
const MAX_ROWS: usize = 30;

fn print_decision(plan: &CheckedSweep, r: &SweepResults, obj: &Objective, a: &Analysis) {
    let mut header: Vec<String> = vec!["point".into()];
    header.extend(r.axes.iter().cloned());
    header.extend([
        obj.cost_label(),
        obj.latency_label(),
        "SLO met".into(),
        "goodput/GPU".into(),
    ]);
    let rows: Vec<Vec<String>> = a
        .pareto_front
        .iter()
        .take(MAX_ROWS)
        .map(|&i| {
            let (p, e) = (&r.points[i], &a.points[i]);
            let mut row = vec![format!("{i}{}", if a.best == Some(i) { " *" } else { "" })];
            row.extend(p.values.iter().map(cell));
            row.extend([
                fmt(e.cost, obj.cost_digits()),
                fmt(e.latency_ms, 1),
                e.attainment
                    .map(|x| format!("{:.2} %", x * 100.0))
                    .unwrap_or_else(|| "–".into()),
                e.goodput_rps_per_gpu
                    .map_or_else(|| "–".into(), sim::sig_figs::rate),
            ]);
            row
        })
        .collect();
    outln!(
        "Pareto front, {} vs {} ({} of {} points; * = operating point):",
        obj.cost_label(),
        obj.latency_label(),
        a.pareto_front.len(),
        r.points.len()
    );
    print_table(&header, &rows);
    if a.pareto_front.len() > MAX_ROWS {
        outln!(
            "  … {} more front points in operating-point.json (pareto_front)",
            a.pareto_front.len() - MAX_ROWS
        );
    }
    outln!();
    match a.best {
        Some(i) => {
            let e = &a.points[i];
            outln!(
                "operating point: point {i} ({})",
                plan.describe(&plan.points[i])
            );
            outln!(
                "  {} {}, {} {}, SLO met by {:.2} % (target {:.1} %), goodput {} requests/s per GPU",
                obj.cost_label(),
                fmt(e.cost, obj.cost_digits()),
                obj.latency_label(),
                fmt(e.latency_ms, 1),
                e.attainment.unwrap_or(0.0) * 100.0,
                obj.attainment * 100.0,
                e.goodput_rps_per_gpu.map_or_else(|| "–".into(), sim::sig_figs::rate)
            );
        }
        None => outln!(
            "no operating point: {}",
            a.note.as_deref().unwrap_or("no point meets the SLOs")
        ),
    }
    if obj.gpu_hour_usd.is_none() {
        outln!("(no price per GPU-hour stated, so no dollar figures; set gpu_hour_usd in the grid's [objective] for them)");
    }
}

/// Right-aligned columns, the first left-aligned.
fn print_table(header: &[String], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        outln!("  {}", parts.join("  "));
    };
    line(header);
    for r in rows {
        line(r);
    }
}
