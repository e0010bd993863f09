//! servesim: the command-line front end. Thin by design (DESIGN.md): clap
//! definitions, dispatch, progress bars and printing; the simulation lives in
//! the `sim` crate.

/// `println!` that treats a closed stdout (`servesim … | head`) as the end of
/// the output rather than a panic: the process exits quietly with status 0.
/// Under `--json` ([`json_stdout`]) stdout holds the JSON document alone,
/// so these lines go to stderr.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if crate::JSON_STDOUT.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!($($arg)*);
        } else if writeln!(std::io::stdout().lock(), $($arg)*).is_err() {
            std::process::exit(0);
        }
    }};
}

/// Whether stdout is reserved for one JSON document (a command's `--json`).
static JSON_STDOUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reserves stdout for the JSON document a command prints at its end with
/// [`print_json`]: the text `outln!` prints meanwhile goes to stderr.
pub fn json_stdout() {
    JSON_STDOUT.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Prints one JSON document on stdout (a closed stdout ends the process
/// quietly, as `outln!`).
pub fn print_json(json: &str) {
    use std::io::Write as _;
    if writeln!(std::io::stdout().lock(), "{}", json.trim_end()).is_err() {
        std::process::exit(0);
    }
}

/// Prints a result file written by the command (`capacity.json`, …) as its
/// JSON document.
pub fn print_json_file(path: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    print_json(&text);
    Ok(())
}

mod accuracy;
mod bench;
mod breakeven;
mod calibration;
mod capacity;
mod cli;
mod cost;
mod deploy;
mod engine_calibration;
mod explain;
mod fleet_print;
mod from_bench;
mod help_markdown;
mod plan;
mod print;
mod profile_out;
mod quality;
mod ranges;
mod serve;
mod sweep;
mod trace;

// candle's CPU kernels allocate on every operation; mimalloc keeps that off
// the critical path (glibc's allocator made a batch-16 decode step 4.5x slower).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, Result};
use cli::{CatalogWhat, Cli, Command};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sim::{Scenario, Simulation};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn main() {
    let cli = cli::parse();
    // Settings given through the environment are checked like flags, before
    // any command reads them.
    if let Err(e) = sim::bounds::check_environment() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    if let Err(e) = run(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Simulate {
            scenario,
            out,
            seed,
            json,
            report,
            lenient,
            step_by_step,
        } => simulate(&scenario, out, seed, json, report, lenient, step_by_step),
        Command::Check { scenario, json } => check(&scenario, json),
        Command::Catalog { what } => {
            match what {
                Some(CatalogWhat::Hardware) => print::hardware_catalog(),
                Some(CatalogWhat::Models) => print::model_catalog(),
                None => {
                    print::hardware_catalog();
                    outln!();
                    print::model_catalog();
                }
            }
            Ok(())
        }
        Command::Bench {
            requests,
            replicas,
            repeat,
            no_attribution,
            step_by_step,
        } => bench::run(requests, replicas, repeat, !no_attribution, !step_by_step),
        Command::Trace { command } => trace::run(*command),
        Command::Sweep(args) => sweep::run(args),
        Command::Capacity(args) => capacity::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Breakeven(args) => breakeven::run(args),
        Command::Cost(args) => cost::run(args),
        Command::Report { dir } => write_report(&dir),
        Command::Explain { dir, json, request } => explain::run(&dir, json, request),
        Command::Calibrate(args) if !args.from_bench.is_empty() => from_bench::calibrate(args),
        Command::Calibrate(args) if args.engine.is_some() => engine_calibration::calibrate(args),
        Command::Calibrate(args) => calibration::calibrate(args),
        Command::Validate(args) => calibration::validate(args),
        Command::Serve(args) => serve::serve(args),
        Command::Observe(args) => serve::observe(args),
        Command::Compare { a, b, json } => serve::compare(&a, &b, json),
        Command::Accuracy(args) => accuracy::run(args),
        Command::Quality(args) => quality::quality(args),
        Command::Speculate(args) => quality::speculate(args),
        Command::HelpMarkdown => {
            print!("{}", help_markdown::markdown());
            Ok(())
        }
    }
}

/// `servesim check`: the scenario resolved and its estimates, as text or
/// (`--json`) as one JSON document.
fn check(scenario: &Path, json: bool) -> Result<()> {
    if json {
        json_stdout();
    }
    let s = Scenario::load(scenario)?;
    // `simulate` streams its records: only the time series stays.
    let est = sim::guard::check_estimate_with(&s, true).map_err(anyhow::Error::msg)?;
    print::resolved(&s);
    for line in sim::scenario::pool_plan::check_lines(&s) {
        outln!("{line}");
    }
    for line in s.canary_check_lines() {
        outln!("{line}");
    }
    if let Some(b) = &s.batching {
        outln!("batching   {b}");
    }
    for n in &s.notes {
        outln!("note       {n}");
    }
    print::memory_estimate(&est);
    if let Some(w) = sim::guard::disk_warning(&s, &est) {
        outln!("warning    {w}");
    }
    // Open the workload's files and read its first request, so a
    // bad trace shows here rather than in a run.
    let ctx = sim::workload::Context::new(&s.origin, &s.base_dir, s.seed());
    let first = sim::tenancy::probe(&s, &ctx)?;
    print::first_request(first.as_ref());
    for line in sim::cluster::budget::KvBudget::of(&s, &ctx)?.lines(&s) {
        outln!("{line}");
    }
    let capacity = sim::simulation::estimate::CapacityEstimate::of(&s, &ctx)?;
    for line in capacity.lines() {
        outln!("{line}");
    }
    if json {
        let warning = sim::guard::disk_warning(&s, &est);
        print_json(&serde_json::to_string_pretty(&print::check_json(
            &s, &est, &capacity, warning,
        ))?);
    }
    Ok(())
}

/// A progress bar on stderr that appears only when the run lasts longer than
/// a second and stderr is a terminal.
pub struct LazyProgress {
    bar: ProgressBar,
    started: Instant,
    shown: bool,
    enabled: bool,
}

impl LazyProgress {
    pub fn new(label: &str) -> LazyProgress {
        let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{elapsed_precise}] {wide_bar} {percent:>3}% eta {eta}",
            )
            .expect("valid template"),
        );
        bar.set_message(label.to_string());
        LazyProgress {
            bar,
            started: Instant::now(),
            shown: false,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    pub fn update(&mut self, fraction: f64) {
        if !self.enabled {
            return;
        }
        if !self.shown && self.started.elapsed() > Duration::from_secs(1) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
        self.bar
            .set_position((fraction.clamp(0.0, 1.0) * 1000.0) as u64);
    }

    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// Writes the report of an output folder and says where it is.
pub fn write_report(dir: &Path) -> Result<()> {
    let r = reports::write_report(dir)?;
    eprintln!(
        "report: {} (self-contained), {} and {} charts in {}",
        r.html.display(),
        r.markdown.display(),
        r.charts.len(),
        dir.join("charts").display()
    );
    Ok(())
}

fn simulate(
    path: &Path,
    out: Option<PathBuf>,
    seed: Option<u64>,
    json: bool,
    report: bool,
    lenient: bool,
    step_by_step: bool,
) -> Result<()> {
    let overrides = sim::scenario::Overrides {
        seed,
        step_by_step,
        lenient,
    };
    let scenario = Scenario::load_with(path, &overrides)?;
    for n in &scenario.notes {
        eprintln!("warning: {n}");
    }
    if let Some(b) = &scenario.batching {
        eprintln!("batching: {b}");
    }
    if let Some(w) =
        sim::guard::disk_warning(&scenario, &sim::guard::estimate_with(&scenario, true))
    {
        eprintln!("warning: {w}");
    }
    let out_dir = out.unwrap_or_else(|| Path::new("out").join(scenario.name()));
    // Refuse an unwritable folder, or one another run is writing, before
    // spending the run's time.
    let lock = sim::output::OutputLock::acquire(&out_dir)
        .with_context(|| format!("cannot write results to {}", out_dir.display()))?;
    let mut progress = LazyProgress::new(&format!("simulating {}", scenario.name()));
    let wall = Instant::now();
    // Requests leave memory as they end; requests.csv is written as they go.
    let sim = Simulation::new(&scenario)
        .stream_records(Some(&out_dir))
        .with_context(|| format!("cannot write results to {}", out_dir.display()))?;
    let result = match sim.run(|p| progress.update(p.fraction)) {
        Ok(r) => r,
        // A workload error names its own file and line.
        Err(sim::RunError::Workload(e)) => return Err(e.into()),
        Err(e @ sim::RunError::Guard(_)) => return Err(e.into()),
        Err(e) => {
            return Err(anyhow::Error::new(e))
                .with_context(|| format!("{}: simulation failed", path.display()))
        }
    };
    progress.finish();
    for t in result.summary.workload.iter().flat_map(|w| &w.traces) {
        if let Some(note) = t.skipped_note() {
            eprintln!("warning: {note}");
        }
        if let Some(note) = t.out_of_order_note() {
            eprintln!("warning: {note}");
        }
        if let Some(note) = t.empty_note() {
            eprintln!("warning: {note}");
        }
    }
    let wall = wall.elapsed();
    sim::report::write_all(&out_dir, &result)
        .with_context(|| format!("cannot write results to {}", out_dir.display()))?;
    drop(lock);
    if json {
        // The file as written, its run identity included.
        let summary = std::fs::read_to_string(out_dir.join("summary.json"))
            .with_context(|| format!("cannot read {}/summary.json", out_dir.display()))?;
        outln!("{}", summary.trim_end());
    } else {
        print::summary(&scenario, &result.summary);
        outln!();
        outln!(
            "results: {}/{{summary.json,requests.csv,timeseries.csv}}",
            out_dir.display()
        );
    }
    eprintln!(
        "simulated {} requests in {:.2} s wall ({:.0} requests/s)",
        result.summary.counts.arrived,
        wall.as_secs_f64(),
        result.summary.counts.arrived as f64 / wall.as_secs_f64().max(1e-9)
    );
    if report {
        write_report(&out_dir)?;
    }
    Ok(())
}
