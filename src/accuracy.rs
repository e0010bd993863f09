//! `servesim accuracy FILES…` and `servesim accuracy --coverage FILES…`:
//! read measured benchmark results, simulate each point (or only resolve
//! it, for coverage), write the result files and the HTML page, and print
//! the summary tables.

use crate::ranges;
use anyhow::{anyhow, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sim::accuracy::compare::{AccuracyResults, GroupError, GroupField, PointOutcome};
use sim::accuracy::express::DEFAULT_MAX_REQUESTS;
use sim::accuracy::{self as acc, MeasuredPoint, Metric, Settings};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// `servesim accuracy` arguments.
#[derive(Args, Debug)]
pub struct AccuracyArgs {
    /// Result files (formats detected from content) or servesim observe
    /// folders.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Base scenario: what the files do not record (GPU, parallelism,
    /// engine settings; the whole workload for an observe folder).
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Output folder [default: out/accuracy, or out/coverage].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print accuracy.json (with --coverage, coverage.json) on stdout (the
    /// text goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Only decide which points servesim can express, and why not the
    /// others (no simulation).
    #[arg(long)]
    pub coverage: bool,
    /// Model for every point (catalog key or Hugging Face id), over the files'.
    #[arg(long)]
    pub model: Option<String>,
    /// Hardware preset for every point, over the files'.
    #[arg(long)]
    pub hardware: Option<String>,
    /// Weight dtype for every point, over the files'.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(sim::catalog::Dtype::ALL.map(|d| d.name())))]
    pub weight_dtype: Option<String>,
    /// Tensor-parallel GPUs per replica, over the files'.
    #[arg(long, allow_negative_numbers = true)]
    pub tp: Option<u32>,
    /// Pipeline stages per replica, over the files'.
    #[arg(long, allow_negative_numbers = true)]
    pub pp: Option<u32>,
    /// Expert-parallel groups per replica, over the files'.
    #[arg(long, allow_negative_numbers = true)]
    pub ep: Option<u32>,
    /// Replicas, over the files'.
    #[arg(long, value_parser = ranges::REPLICAS, allow_negative_numbers = true)]
    pub replicas: Option<u32>,
    /// At most this many requests simulated per point (a closed loop of C
    /// users still gets 4 × C).
    #[arg(long, default_value_t = DEFAULT_MAX_REQUESTS, value_parser = ranges::ITEMS_U64, allow_negative_numbers = true)]
    pub max_requests: u64,
    /// Group the per-group errors by these fields (comma-separated: engine,
    /// version, chip, model, precision, mode, band).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "engine,version,chip,model,precision,mode,band"
    )]
    pub group_by: Vec<String>,
    /// Keep every N-th point only (1, 1+N, 1+2N, … in file order): a
    /// deterministic subset of a large file.
    #[arg(long, default_value_t = 1, value_parser = ranges::POSITIVE_U64, allow_negative_numbers = true)]
    pub every: u64,
}

/// Runs `servesim accuracy`.
pub fn run(args: AccuracyArgs) -> Result<()> {
    if args.json {
        crate::json_stdout();
    }
    let mut points: Vec<MeasuredPoint> = Vec::new();
    let mut inputs = Vec::new();
    for f in &args.files {
        inputs.push(f.display().to_string());
        points.extend(acc::read_path(f)?);
    }
    let points: Vec<MeasuredPoint> = points
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i as u64 % args.every == 0)
        .map(|(_, p)| p)
        .collect();
    let base = match &args.scenario {
        Some(path) => {
            let origin = path.display().to_string();
            let text = sim::input_file::read_config(path, "scenario file")?;
            // The scenario must resolve on its own before points edit it.
            sim::Scenario::from_toml_str(&text, &origin)?;
            let table: toml::Table = text.parse().map_err(|e| anyhow!("{origin}: {e}"))?;
            Some((table, origin))
        }
        None => None,
    };
    let base_ref = base.as_ref().map(|(t, o)| (t, o.as_str()));
    let settings = Settings {
        model: args.model.clone(),
        hardware: args.hardware.clone(),
        weight_dtype: args.weight_dtype.clone(),
        tensor_parallel: args.tp,
        pipeline_parallel: args.pp,
        expert_parallel: args.ep,
        replicas: args.replicas,
        max_requests: args.max_requests,
    };
    if args.coverage {
        let out = args
            .out
            .unwrap_or_else(|| Path::new("out").join("coverage"));
        let c = acc::coverage(inputs, &points, base_ref, &settings);
        let _lock = sim::output::OutputLock::acquire(&out)
            .with_context(|| format!("cannot write results to {}", out.display()))?;
        acc::results::write_coverage(&out, &c)
            .with_context(|| format!("cannot write results to {}", out.display()))?;
        print_coverage(&c);
        outln!("wrote {}/coverage.csv and coverage.json", out.display());
        if args.json {
            crate::print_json_file(&out.join("coverage.json"))?;
        }
        return Ok(());
    }
    let group_by = args
        .group_by
        .iter()
        .map(|f| {
            GroupField::parse(f.trim()).ok_or_else(|| {
                anyhow!(
                    "--group-by: unknown field {f:?}; allowed: {}",
                    GroupField::ALL.map(GroupField::name).join(", ")
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let out = args
        .out
        .unwrap_or_else(|| Path::new("out").join("accuracy"));
    let lock = sim::output::OutputLock::acquire(&out)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    eprintln!(
        "accuracy: {} point(s) from {} file(s), {} thread(s)",
        points.len(),
        args.files.len(),
        rayon::current_num_threads()
    );
    let bar = progress_bar(points.len());
    let r = acc::compare(inputs, &points, base_ref, &settings, &group_by, &|| {
        bar.inc(1)
    });
    bar.finish_and_clear();
    acc::results::write(&out, &r)
        .with_context(|| format!("cannot write results to {}", out.display()))?;
    let html = reports::accuracy_report::write(&out, &r)
        .with_context(|| format!("cannot write the HTML page to {}", out.display()))?;
    drop(lock);
    print_results(&r);
    outln!(
        "wrote {}/points.csv, groups.csv, unexpressed.csv, accuracy.json and {}",
        out.display(),
        html.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    );
    if args.json {
        crate::print_json_file(&out.join("accuracy.json"))?;
    }
    Ok(())
}

fn progress_bar(points: usize) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(points as u64), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(points as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "simulating [{elapsed_precise}] {wide_bar} {pos}/{len} points, eta {eta}",
        )
        .expect("valid template"),
    );
    bar
}

fn pct(v: f64) -> String {
    format!("{:+.1}%", v * 100.0)
}

fn abs_pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn print_results(r: &AccuracyResults) {
    let compared = r
        .points
        .iter()
        .filter(|p| matches!(p.outcome, PointOutcome::Compared { .. }))
        .count();
    let unexpressed = r.points.len() - compared;
    outln!(
        "{} point(s): {compared} compared, {unexpressed} not expressible or failed (unexpressed.csv says why)",
        r.points.len()
    );
    if r.overall.is_empty() {
        return;
    }
    outln!();
    outln!(
        "{:<6} {:>5} {:>6} {:>14} {:>14}",
        "metric",
        "stat",
        "count",
        "median |err|",
        "median err"
    );
    for g in &r.overall {
        outln!(
            "{:<6} {:>5} {:>6} {:>14} {:>14}",
            g.metric.name(),
            g.stat.name(),
            g.count,
            abs_pct(g.median_abs_error),
            pct(g.median_error)
        );
    }
    outln!();
    print_groups(&r.groups);
}

/// One line per group: TTFT, TPOT (or ITL) and E2E median errors.
fn print_groups(groups: &[GroupError]) {
    use std::collections::BTreeMap;
    let mut rows: BTreeMap<&sim::accuracy::compare::GroupKey, BTreeMap<Metric, &GroupError>> =
        BTreeMap::new();
    for g in groups {
        rows.entry(&g.key).or_default().insert(g.metric, g);
    }
    outln!(
        "{:<8} {:<14} {:<10} {:<34} {:<5} {:<6} {:<9} {:>5} {:>16} {:>16} {:>16}",
        "engine",
        "version",
        "chip",
        "model",
        "prec",
        "mode",
        "band",
        "n",
        "TTFT |err| (err)",
        "TPOT |err| (err)",
        "E2E |err| (err)"
    );
    let cell = |m: Option<&&GroupError>| match m {
        Some(g) => format!("{} ({})", abs_pct(g.median_abs_error), pct(g.median_error)),
        None => "-".into(),
    };
    for (k, m) in rows {
        let n = m.values().map(|g| g.count).max().unwrap_or(0);
        outln!(
            "{:<8} {:<14} {:<10} {:<34} {:<5} {:<6} {:<9} {:>5} {:>16} {:>16} {:>16}",
            k.engine,
            k.version,
            k.chip,
            k.model,
            k.precision,
            k.mode,
            k.band,
            n,
            cell(m.get(&Metric::Ttft)),
            cell(m.get(&Metric::Tpot).or(m.get(&Metric::Itl))),
            cell(m.get(&Metric::E2e))
        );
    }
}

fn print_coverage(c: &sim::accuracy::Coverage) {
    let share = |n: usize| {
        if c.rows == 0 {
            0.0
        } else {
            100.0 * n as f64 / c.rows as f64
        }
    };
    outln!(
        "coverage: {} of {} point(s) expressible ({:.1}%)",
        c.expressible,
        c.rows,
        share(c.expressible)
    );
    for (kind, n) in &c.by_kind {
        outln!("  {kind:<13} {n:>6} ({:.1}%)", share(*n));
    }
    outln!();
    outln!("{:>6}  {:<13} reason", "rows", "kind");
    for r in &c.reasons {
        outln!("{:>6}  {:<13} {}", r.rows, r.kind.name(), r.group);
    }
}
