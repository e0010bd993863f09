//! Command-line definitions (clap derive). Every flag is defined once here.

use crate::ranges;
use clap::{Args, Parser, Subcommand, ValueEnum};
use sim::sweep::Shard;
use std::path::PathBuf;

mod measure;
pub use measure::{device, CalibrateCmd, ValidateCmd};

/// servesim — simulate LLM serving fleets to pick a configuration and a size.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a scenario and write summary.json, requests.csv and timeseries.csv.
    ///
    /// Runs the scenario and writes `summary.json`, `requests.csv` and `timeseries.csv` (and
    /// `pools.csv` with pools) into the output folder ([output-files.md](output-files.md)), then
    /// prints the summary (the README's "How to read the summary"). A progress bar appears on
    /// stderr when the run lasts longer than 1 s and stderr is a terminal; one line of wall time
    /// and speed always goes to stderr.
    #[command(
        after_help = "Example:\n  servesim simulate scenarios/quickstart.toml --out out/qs --seed 7"
    )]
    Simulate {
        /// Scenario TOML file.
        scenario: PathBuf,
        /// Output folder [default: out/<scenario name>/].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override the scenario's seed.
        #[arg(long, value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
        seed: Option<u64>,
        /// Print the summary as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Also write report.html, report.md and charts/ into the output folder.
        #[arg(long)]
        report: bool,
        /// Skip and count trace lines that do not parse instead of stopping.
        #[arg(long)]
        lenient: bool,
        /// Debugging switch: step every iteration through the event queue
        /// (`[engine] decode_runs = false`); the files are the same.
        #[arg(long)]
        step_by_step: bool,
    },
    /// Validate a scenario and print the resolved configuration.
    ///
    /// Validates the scenario and prints what it resolves to: the model (parameter count, shape,
    /// source), the weight and KV dtypes, the hardware figures and their source, the fleet
    /// (replicas × TP = GPUs, router), the engine settings with the effective `max_model_len`, the
    /// memory plan per GPU (device, usable, weights, activations, runtime overhead, KV cache), KV
    /// bytes per token and the blocks and tokens per replica, the horizon, the workload (it opens
    /// traces and reads their first rows) and the SLO, the memory guard's estimate; each pool of
    /// `[[fleet.pools]]`; and the KV-transfer budget of a disaggregated fleet (KV bytes per prompt
    /// token, the payload at the workload's prompt p50/p99, the link bandwidth the offered load
    /// needs and the bandwidth that keeps a transfer within 10 % of the prefill;
    /// [disaggregation.md](disaggregation.md)); and the fleet's capacity estimated from the cost
    /// model (the decode batch the KV cache allows, the decode step and the prefill at the
    /// workload's mean lengths) against the offered load, with a warning when the offered load is
    /// past it. Distributions print as TOML inline tables, as a scenario writes them.
    #[command(after_help = "Example:\n  servesim check scenarios/llama70b-tp4.toml")]
    Check {
        /// Scenario TOML file.
        scenario: PathBuf,
        /// Print the resolved configuration and the estimates as JSON on
        /// stdout (the text goes to stderr).
        #[arg(long)]
        json: bool,
    },
    /// List the hardware and model presets.
    ///
    /// Lists the hardware presets (with their datasheet sources), the model presets, or both when
    /// the argument is left out.
    #[command(after_help = "Example:\n  servesim catalog hardware")]
    Catalog {
        /// Which part of the catalog (both when omitted).
        what: Option<CatalogWhat>,
    },
    /// Measure simulator speed on a fixed large scenario.
    ///
    /// Times a fixed large scenario (Llama-3.1-8B on H100-SXM, 16 req/s per replica, log-normal
    /// prompts of mean 1000 and outputs of mean 250) and reports the best of `--repeat` runs, in
    /// simulated requests per second. It writes no files. See [performance.md](performance.md).
    #[command(
        after_help = "Example:\n  cargo run --release -- bench --requests 200000 --replicas 16"
    )]
    Bench {
        /// Requests to simulate.
        #[arg(long, default_value_t = 200_000, value_parser = ranges::ITEMS_U64, allow_negative_numbers = true)]
        requests: u64,
        /// Replicas in the fleet.
        #[arg(long, default_value_t = 16, value_parser = ranges::REPLICAS, allow_negative_numbers = true)]
        replicas: u32,
        /// Runs to time (the best is reported).
        #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
        repeat: u32,
        /// Run with `[metrics] attribution = false` (to measure its cost).
        #[arg(long)]
        no_attribution: bool,
        /// Debugging switch: step every iteration through the event queue
        /// (`[engine] decode_runs = false`), to measure what decode runs save;
        /// the run is the same.
        #[arg(long)]
        step_by_step: bool,
    },
    /// Inspect trace files: statistics, and the readers' speed.
    #[command(
        after_help = "Example:\n  servesim trace stats scenarios/traces/azure_sample.csv --format azure"
    )]
    Trace {
        #[command(subcommand)]
        command: Box<TraceCommand>,
    },
    /// Run a scenario over a grid of settings in parallel; print the Pareto
    /// front (cost vs latency) and the best point under the SLOs.
    ///
    /// Runs every point of a grid (cartesian, random or Latin-hypercube sample over scenario key
    /// paths) in parallel, identical at any thread count; writes `sweep.csv`, `sweep.json` and
    /// `frontier.csv` (throughput per GPU against interactivity and TTFT, for a whole sweep),
    /// prints the Pareto front (cost vs a latency percentile) and the operating point (most goodput
    /// per GPU under the SLOs). Finished points are kept in `points/` so an interrupted sweep
    /// resumes. Grid format, outputs, and Slurm / Kubernetes job files:
    /// [sweeps-and-reports.md](sweeps-and-reports.md).
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        after_help = "Examples:\n  servesim sweep scenarios/quickstart.toml --grid scenarios/grids/quickstart-sizing.toml --report\n  servesim sweep scenarios/quickstart.toml --grid scenarios/grids/quickstart-sizing.toml --shard 0/2 --out out/shard-0\n  servesim sweep scenarios/quickstart.toml --grid scenarios/grids/quickstart-sizing.toml --shard 1/2 --out out/shard-1\n  servesim sweep merge out/shard-* --out out/sweep\n\nGrid files, outputs and job-array examples: docs/sweeps-and-reports.md"
    )]
    Sweep(SweepArgs),
    /// Find the highest load a fleet sustains within the SLOs, and the fewest
    /// replicas a demand needs (with headroom, spares and cost per month).
    ///
    /// The highest load a fleet of `--replicas` sustains within the scenario's `[slo]` (required),
    /// and with `--demand` the fewest replicas that demand needs, with headroom and N+k spares, and
    /// the cost per month at a stated price. Writes `capacity.json`.
    ///
    /// With `[[fleet.pools]]` the pools as written are one unit and every count is a number of
    /// units (each pool's replicas times n).
    #[command(
        after_help = "Example:\n  servesim capacity scenarios/quickstart.toml --demand 280 --headroom 20 --spare 1 --gpu-hour-usd 2.50"
    )]
    Capacity(CapacityArgs),
    /// The cheapest deployment that meets the SLOs at a demand, over a
    /// declared space of options (hardware with prices, parallelism, engine
    /// settings), with replica counts found by the capacity search.
    ///
    /// The cheapest deployment meeting the scenario's `[slo]` at a demand, over the options of a
    /// space (a grid file: its axes, paired with `[axes.zip]`, and `[objective] gpu_hour_usd`, one
    /// price or one per hardware option). Each option's replica count (or count of pool units) is
    /// found by the capacity search, short runs for every option and long re-checks only for those
    /// that can still win; options that cannot work are pruned with the reason. Options run in
    /// parallel; the plan is the same at any thread count. Writes `plan.json` and `plan.csv`; an
    /// interrupted plan rerun into the same folder resumes from the options it saved in `options/`
    /// ([sweeps-and-reports.md](sweeps-and-reports.md#servesim-plan)). `plan merge` ranks the union
    /// of every shard's options and measures the winner's headroom.
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        after_help = "Examples:\n  servesim plan scenarios/quickstart.toml --space scenarios/spaces/quickstart-hardware.toml --demand 70\n  servesim plan scenarios/quickstart.toml --space scenarios/spaces/quickstart-hardware.toml --demand 70 --shard 0/2 --out out/plan-0\n  servesim plan scenarios/quickstart.toml --space scenarios/spaces/quickstart-hardware.toml --demand 70 --shard 1/2 --out out/plan-1\n  servesim plan merge out/plan-* --out out/plan\n\nSpace files and outputs: docs/sweeps-and-reports.md"
    )]
    Plan(PlanArgs),
    /// Price one iteration term by term (prefill, decode or mixed batch), sweep
    /// decode batch sizes to find the knee, and price a lone request as
    /// `simulate` would; `--fidelity` compares the default model with public
    /// GPU measurements.
    ///
    /// Prices one iteration and prints it term by term (host step and per-sequence time, dense
    /// GEMMs with compute vs memory time, what binds and the arithmetic intensity, element-wise,
    /// attention prefill/decode, communication, LM head, swap; a profile's fitted terms with a
    /// profile), a decode sweep over batch sizes (step time, tokens/s per GPU and per user) with
    /// its knee, and a lone request's TTFT and TPOT exactly as `simulate` reports them. The flags
    /// stand alone or override the scenario's keys. `--fidelity` compares the default cost model
    /// with the public GPU measurements in the shared data instead. See
    /// [cost-model.md](cost-model.md).
    #[command(
        after_help = "Examples:\n  servesim cost --model llama-3.1-8b --hardware h100-sxm --prefill 2048\n  servesim cost --model llama-3.1-8b --hardware h100-sxm --prefill 2048 --prefill 512@1024 --decode 8@1000   (one mixed batch; --separate prices each)\n  servesim cost scenarios/llama70b-tp4.toml --decode 64@1024 --lone-request 1024,256\n  servesim cost --model llama-2-7b --hardware a100-80gb --runtime eager-2023 --json\n  servesim cost --fidelity"
    )]
    Cost(crate::cost::CostArgs),
    /// Compare a simulated fleet's cost per million output tokens (at the
    /// utilization it measured, idle, standby and cold starts included)
    /// with a hosted API's prices, and give the break-even volume.
    ///
    /// A simulated run's cost per million output tokens at the utilization it measured (billed
    /// GPU-hours: idle, standby and cold starts included when the fleet has a life cycle) against a
    /// hosted API's prices for the same tokens, and the break-even volume and GPU-hour price. `DIR`
    /// is an output folder of `simulate`. Every price is an input; none has a default. See
    /// [autoscaling.md](autoscaling.md).
    #[command(
        after_help = "Example:\n  servesim simulate scenarios/autoscale-step.toml --out out/step\n  servesim breakeven out/step --gpu-hour-usd 2.50 --api-input-usd-per-mtok 0.10 --api-output-usd-per-mtok 0.40\n\nPrices are inputs: none has a default (see docs/autoscaling.md)."
    )]
    Breakeven(BreakEvenArgs),
    /// Write report.html (self-contained), report.md and charts/ from the
    /// results in an output folder (of simulate, sweep or capacity).
    ///
    /// Writes a self-contained `report.html`, `report.md` and `charts/` (PNG and SVG: latency CDFs,
    /// latency vs load, Pareto front, queue/batch/KV time series, per-replica and per-tenant bars,
    /// replicas requested vs ready) from an output folder of `simulate`, `sweep` or `capacity`
    /// (holding `summary.json`, `sweep.json` or `capacity.json`). `simulate --report`, `sweep
    /// --report` and `capacity --report` do the same at the end of the run. See
    /// [sweeps-and-reports.md](sweeps-and-reports.md).
    #[command(
        after_help = "Examples:\n  servesim simulate scenarios/quickstart.toml\n  servesim report out/quickstart"
    )]
    Report {
        /// Output folder holding summary.json, sweep.json or capacity.json.
        dir: PathBuf,
    },
    /// Explain the tail of a run: which latency components dominate each
    /// percentile, the slowest requests' timelines, the per-replica tail and
    /// ranked hypotheses with their numbers, each with a change to try.
    ///
    /// Why the tail is slow: for TTFT, TPOT and E2E, the mean share of each latency component among
    /// the requests at or above p50/p90/p99/p99.9, ranked hypotheses with the numbers behind them
    /// and a change to try for each (a scenario key and its direction), the slowest requests'
    /// timelines and their replica meanwhile, and the per-replica tail. `DIR` is an output folder
    /// of `simulate`; on a sweep's folder it explains the operating point's run when the sweep kept
    /// it, or lists the points it can explain. See
    /// [latency-attribution.md](latency-attribution.md).
    #[command(
        after_help = "Examples:\n  servesim simulate scenarios/overload.toml --out out/overload\n  servesim explain out/overload\n  servesim explain out/overload --json\n  servesim explain out/overload --request 1234"
    )]
    Explain {
        /// Output folder of `servesim simulate` (requests.csv, timeseries.csv),
        /// or of `servesim sweep` (its operating point's run).
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Show one request's timeline instead.
        #[arg(long, value_name = "ID", value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
        request: Option<u64>,
    },
    /// Measure a model on a device (candle), or a served engine through its
    /// OpenAI-compatible API (--engine), or fit measured benchmark results
    /// (--from-bench), and write a calibration profile.
    ///
    /// Measures a model's prefill and decode cost on a device with candle over a grid of shapes
    /// plus the memory it takes, fits the cost model, and writes a profile TOML. See
    /// [calibration.md](calibration.md).
    ///
    /// With `--engine URL` it calibrates an OpenAI-compatible server (vLLM, SGLang, TGI,
    /// llama.cpp's `llama-server`, `servesim serve`) through its API instead of candle on a device
    /// ([calibration.md](calibration.md#a-served-engine-calibrate---engine)); `--device`,
    /// `--weights`, `--refit`, `--quick`, `--threads`, `--max-context` and `--attention` do not
    /// apply. With `--from-bench FILES` it fits the profile's engine terms to benchmark results a
    /// team already has, without a server or device. `--engine` and `--from-bench` run in every
    /// build; the device modes need the `calibrate` feature.
    #[command(
        after_help = "Examples:\n  servesim calibrate --device cpu --model scenarios/validate/tiny-llama.json --quick --out out/cpu-profile\n  servesim calibrate --device cuda:0 --model llama-3.2-1b --dtype bf16 --out out/h100-1b\n  servesim calibrate --weights SmolLM2-135M-Instruct.Q4_1.gguf --quick --out out/smollm2\n  servesim calibrate --engine http://127.0.0.1:8000 --budget 4 --out out/vllm-8b\n  servesim calibrate --from-bench tests/data/from-bench/point-*.json --scenario tests/data/from-bench/h100-llama-8b.toml --out out/h100-8b\n\nEngine calibration: docs/calibration.md"
    )]
    Calibrate(CalibrateCmd),
    /// Serve a scenario's workload for real and compare with the simulation of the profile.
    ///
    /// Serves the scenario's `[engine]` and `[workload]` for real on the profile's device (real
    /// scheduler, real forward passes, real KV caches), simulates the same workload with the
    /// profile, and prints predicted vs measured TTFT / TPOT / ITL / E2E percentiles and throughput
    /// with the error of each. Writes `validation.json`. See [calibration.md](calibration.md).
    #[command(
        hide = !cfg!(feature = "calibrate"),
        after_help = "Example:\n  servesim validate scenarios/validate/cpu.toml --profile out/cpu-profile/profile.toml"
    )]
    Validate(ValidateCmd),
    /// Serve an OpenAI-compatible streaming endpoint backed by a scenario's
    /// simulated fleet (the twin), paced to the wall clock.
    ///
    /// An OpenAI-compatible streaming endpoint (`/v1/completions`, `/v1/chat/completions`,
    /// `/v1/models`, `/health`, `/metrics`) backed by the scenario's simulated fleet paced to the
    /// wall clock (`--engine sim`), or by a real model with its tokenizer (`--engine live`, the
    /// candle live engine; `--features calibrate`). See
    /// [serve-and-observe.md](serve-and-observe.md).
    #[command(
        after_help = "Example:\n  servesim serve scenarios/quickstart.toml --engine sim --port 8000\n\nDetails: docs/serve-and-observe.md"
    )]
    Serve(crate::serve::ServeArgs),
    /// Send a scenario's workload to any OpenAI-compatible server and record
    /// what it answers (summary.json and requests.csv as `simulate` writes).
    ///
    /// Sends the scenario's workload (open or closed loop) to any OpenAI-compatible server and
    /// records what it answers: `summary.json` and `requests.csv` as `simulate` writes them, plus
    /// an `observed` section. See [serve-and-observe.md](serve-and-observe.md).
    #[command(
        after_help = "Example:\n  servesim observe http://127.0.0.1:8000 scenarios/quickstart.toml --max-requests 200 --out out/observed"
    )]
    Observe(crate::serve::ObserveArgs),
    /// Print two result folders side by side (TTFT/TPOT/ITL/E2E, throughput,
    /// rejections) with the error of the second against the first; warns
    /// when they come from different scenarios, models, hardware or seeds.
    ///
    /// Prints two result folders (each holding a `summary.json`, as `simulate` and `observe` write)
    /// side by side — TTFT/TPOT/ITL/E2E, throughput, rejections — with the error of `B` against `A`
    /// (counts as whole numbers; an error past ±1,000 % as a ratio). When the two summaries name a
    /// different scenario, model, hardware, fleet or seed, a warning on stderr lists each
    /// difference.
    #[command(after_help = "Example:\n  servesim compare out/quickstart out/observed")]
    Compare {
        /// Reference result folder (summary.json).
        a: PathBuf,
        /// Result folder compared with it.
        b: PathBuf,
        /// Print the rows and the setup differences as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compare servesim with measured benchmark results (vLLM bench serve,
    /// genai-perf, GuideLLM, inference-perf, aiconfigurator's silicon CSV,
    /// observe folders): per point and per group errors, CSV, JSON and an
    /// HTML page; --coverage says which points servesim can express.
    ///
    /// Reads measured benchmark results (vLLM `bench serve --save-result`, genai-perf/AIPerf,
    /// GuideLLM, inference-perf, aiconfigurator's silicon CSV, `observe` folders; detected from
    /// content), simulates each point and writes `points.csv`, `groups.csv`, `unexpressed.csv`,
    /// `accuracy.json` and `accuracy.html`. Formats, how a point becomes a scenario, and the
    /// measured table: [accuracy.md](accuracy.md).
    #[command(
        after_help = "Examples:\n  servesim accuracy bench-results/*.json --hardware h100-sxm --tp 1 --out out/accuracy\n  servesim accuracy ../shared/data/aiconfigurator/silicon/silicon_train.csv --out out/accuracy\n  servesim accuracy --coverage ../shared/data/aiconfigurator/silicon/silicon_train.csv\n  servesim accuracy out/observed --scenario scenarios/quickstart.toml\n\nFormats and the accuracy table: docs/accuracy.md"
    )]
    Accuracy(crate::accuracy::AccuracyArgs),
    /// Compare a quantized candidate with its baseline on a text: likelihood, agreement, KL, speed, memory.
    ///
    /// A quantized candidate against its baseline on a text: perplexity, regression with a
    /// bootstrap interval, top-1 agreement, KL, speed, memory, and a gate for CI. See
    /// [quality-and-speculation.md](quality-and-speculation.md).
    #[command(
        hide = !cfg!(feature = "calibrate"),
        after_help = "Example:\n  servesim quality --weights SmolLM2-135M-Instruct.Q4_1.gguf --text scenarios/text/dev.txt --candidate int8 --max-regression 1"
    )]
    Quality(crate::quality::QualityCmd),
    /// Measure speculative decoding on a text: α per draft position, speed-up, the scenario table.
    ///
    /// Speculative sampling on the live model: α per draft position, speed-up, and the
    /// `[engine.speculative]` table to put in a scenario. See
    /// [quality-and-speculation.md](quality-and-speculation.md).
    #[command(
        hide = !cfg!(feature = "calibrate"),
        after_help = "Example:\n  servesim speculate --weights SmolLM2-135M-Instruct.Q4_1.gguf --draft-format q4_0 --text scenarios/text/dev.txt --k 4"
    )]
    Speculate(crate::quality::SpeculateCmd),
    /// Print this command-line reference as Markdown (docs/cli.md is its
    /// output; a test fails when they differ).
    #[command(hide = true)]
    HelpMarkdown,
}

/// The verbs a build without the `calibrate` feature lacks: hidden from its
/// help, and marked in docs/cli.md.
pub const CALIBRATE_VERBS: [&str; 4] = ["calibrate", "validate", "quality", "speculate"];

/// `servesim trace ...`
#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Request count, span, rate, inter-arrival CV, length percentiles and
    /// prefix reuse of a trace file.
    ///
    /// `trace stats` streams a trace file through the same reader and replay options a simulation
    /// uses and prints the request count, span, rate, inter-arrival CV, prompt/output percentiles,
    /// the rows read, skipped, filtered and out of order, sessions and tenants, and for hashed
    /// formats the infinite-cache prefix-hit ratio. Its flags are the keys of a scenario's
    /// `workload.trace` ([scenario.md](scenario.md#trace-a-trace-file-and-its-options),
    /// [workloads.md](workloads.md)):
    #[command(
        after_help = "Examples:\n  servesim trace stats scenarios/traces/azure_conv_sample.csv\n  servesim trace stats scenarios/traces/mooncake_sample.jsonl --format mooncake --json\n  servesim trace stats scenarios/traces/generic_sample.csv --format csv --columns arrival=ts_ms,prompt=in_tokens,output=out_tokens --time-unit ms"
    )]
    Stats {
        /// Trace file (for servegen: the folder of chunk-N files).
        file: PathBuf,
        #[command(flatten)]
        opts: Box<TraceOpts>,
        /// Print the statistics as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure the readers' throughput on synthetic files of each format.
    ///
    /// `trace bench` writes a synthetic file per format and times reading it through the whole
    /// replay pipeline, on one thread: `--format F` (repeatable; default every per-request format),
    /// `--rows N` (default 1 000 000), `--file FILE` (read this trace instead, with one
    /// `--format`).
    #[command(after_help = "Example:\n  cargo run --release -- trace bench --rows 1000000")]
    Bench {
        /// Formats to measure [default: every per-request format].
        #[arg(long, value_parser = trace_formats())]
        format: Vec<String>,
        /// Rows per synthetic file.
        #[arg(long, default_value_t = 1_000_000, value_parser = ranges::ITEMS_U64, allow_negative_numbers = true)]
        rows: u64,
        /// Read this trace file instead of synthetic ones (one --format).
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

/// Trace options (the keys of a scenario's `workload.trace`).
#[derive(clap::Args, Debug)]
pub struct TraceOpts {
    /// Trace format [default: detected from the file: a CSV header's
    /// columns, a JSON line's keys, a folder's files; said on stderr].
    #[arg(long, value_parser = trace_formats())]
    pub format: Option<String>,
    /// Skip and count lines that do not parse instead of stopping.
    #[arg(long)]
    pub lenient: bool,
    /// Replay at k× speed (arrival times divided by k).
    #[arg(long, value_parser = ranges::SPEED, allow_negative_numbers = true)]
    pub time_scale: Option<f64>,
    /// Rescale times to this mean rate, requests/s.
    #[arg(long, value_parser = ranges::RATE, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Start of the time window, seconds from the first row.
    #[arg(long, value_parser = ranges::OFFSET_SECONDS, allow_negative_numbers = true)]
    pub start: Option<f64>,
    /// End of the time window, seconds from the first row.
    #[arg(long, value_parser = ranges::OFFSET_SECONDS, allow_negative_numbers = true)]
    pub end: Option<f64>,
    /// Only the first N requests.
    #[arg(long, value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
    pub limit: Option<u64>,
    /// Column naming each request's tenant.
    #[arg(long)]
    pub tenant_column: Option<String>,
    /// burstgpt: keep only this Model.
    #[arg(long)]
    pub model: Option<String>,
    /// burstgpt: keep only this Log Type.
    #[arg(long)]
    pub log_type: Option<String>,
    /// burstgpt: drop failed requests (0 response tokens).
    #[arg(long)]
    pub drop_failures: bool,
    /// csv/jsonl: column mapping, e.g. arrival=ts,prompt=in,output=out[,session=s][,hashes=h].
    #[arg(long)]
    pub columns: Option<String>,
    /// csv/jsonl: unit of the arrival column.
    #[arg(long, value_parser = ["s", "ms", "us", "ns", "datetime"])]
    pub time_unit: Option<String>,
    /// Tokens per hash block (ragpulse; csv/jsonl with a hashes column).
    #[arg(long, allow_negative_numbers = true)]
    pub block_tokens: Option<u32>,
}

/// The trace formats' names, as `workload.trace.format` takes them.
fn trace_formats() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(sim::scenario::TraceFormat::ALL.map(|f| f.name()))
}

/// The dtypes candle runs a model in (no bf16 on cpu).
pub const CANDLE_DTYPES: [&str; 3] = ["f32", "f16", "bf16"];

/// The weight formats of a quantized candidate's linear layers: per-channel
/// INT8 (weight-only), GGML's Q8_0 and Q4_0 (one scale per 32 weights).
pub const LINEAR_FORMATS: [&str; 3] = ["int8", "q8_0", "q4_0"];

/// `servesim sweep`: run a grid, or merge shard outputs.
#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub action: Option<SweepAction>,
    /// Scenario TOML file.
    #[arg(required = true)]
    pub scenario: Option<PathBuf>,
    /// Grid TOML file: the scenario keys to vary and their values.
    #[arg(long, required = true)]
    pub grid: Option<PathBuf>,
    /// Output folder [default: out/<scenario name>-sweep/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only shard I of N: the points whose index is I modulo N (I from 0).
    #[arg(long, value_name = "I/N", allow_hyphen_values = true)]
    pub shard: Option<Shard>,
    /// Also write report.html, report.md and charts/ into the output folder.
    #[arg(long)]
    pub report: bool,
    /// Write the operating point's deployment into <out>/deploy/: vllm,
    /// sglang, kubernetes, dynamo or all (comma-separated; see docs/deploy.md).
    #[arg(long, value_name = "FORMAT", value_delimiter = ',')]
    pub emit: Vec<EmitFormat>,
    /// Print operating-point.json (a shard: sweep.json) on stdout (the
    /// text goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// `servesim breakeven`.
#[derive(Args, Debug)]
pub struct BreakEvenArgs {
    /// Output folder of `servesim simulate` (holding summary.json).
    pub dir: PathBuf,
    /// Price of one GPU for one hour, US dollars.
    #[arg(long, value_name = "USD", value_parser = ranges::GPU_HOUR_USD, allow_negative_numbers = true)]
    pub gpu_hour_usd: f64,
    /// Hosted API price per million input tokens, US dollars.
    #[arg(long, value_name = "USD", value_parser = ranges::USD_PER_MTOK, allow_negative_numbers = true)]
    pub api_input_usd_per_mtok: f64,
    /// Hosted API price per million output tokens, US dollars.
    #[arg(long, value_name = "USD", value_parser = ranges::USD_PER_MTOK, allow_negative_numbers = true)]
    pub api_output_usd_per_mtok: f64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `servesim plan`: plan over a space, or merge shard outputs.
#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(subcommand)]
    pub action: Option<PlanAction>,
    /// Scenario TOML file (needs an [slo] table).
    #[arg(required = true)]
    pub scenario: Option<PathBuf>,
    /// The space: a grid file whose axes are the options (no fleet.replicas
    /// axis) and whose [objective] gpu_hour_usd prices them.
    #[arg(long, value_name = "FILE", required = true)]
    pub space: Option<PathBuf>,
    /// Peak demand, requests/s.
    #[arg(long, value_name = "RATE", required = true, value_parser = ranges::DEMAND, allow_negative_numbers = true)]
    pub demand: Option<f64>,
    /// Extra load the fleet must absorb above the demand, percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.0, value_parser = ranges::HEADROOM, allow_negative_numbers = true)]
    pub headroom: f64,
    /// Share of requests that must meet the scenario's [slo].
    #[arg(long, default_value_t = 0.99, value_parser = ranges::ATTAINMENT, allow_negative_numbers = true)]
    pub attainment: f64,
    /// Relative precision of the one-replica rate search.
    #[arg(long, default_value_t = 0.01, value_parser = ranges::TOLERANCE, allow_negative_numbers = true)]
    pub tolerance: f64,
    /// Instead of searching, run every option at every replica count up to N
    /// (for comparison with the search).
    #[arg(long, value_name = "N", value_parser = ranges::EXHAUSTIVE, allow_negative_numbers = true)]
    pub exhaustive: Option<u32>,
    /// Plan only shard I of N: the options whose index is I modulo N (I from 0).
    #[arg(long, value_name = "I/N", allow_hyphen_values = true)]
    pub shard: Option<Shard>,
    /// Output folder for plan.json and plan.csv [default: out/<scenario name>-plan/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write report.html, report.md and charts/ into the output folder.
    #[arg(long)]
    pub report: bool,
    /// Write the cheapest option's deployment into <out>/deploy/: vllm,
    /// sglang, kubernetes, dynamo or all (comma-separated; see docs/deploy.md).
    #[arg(long, value_name = "FORMAT", value_delimiter = ',')]
    pub emit: Vec<EmitFormat>,
    /// Price of electricity, US dollars per kWh: every option's cost is its
    /// GPUs plus their energy at the demand, and the options are ranked by
    /// that (no price is assumed).
    #[arg(long, value_name = "USD", value_parser = ranges::ENERGY_PRICE, allow_negative_numbers = true)]
    pub energy_price_kwh: Option<f64>,
    /// Carbon intensity of the electricity, grams of CO2 per kWh: the
    /// cheapest option's emissions per month (none without it).
    #[arg(long, value_name = "G_PER_KWH", value_parser = ranges::CARBON, allow_negative_numbers = true)]
    pub carbon_g_per_kwh: Option<f64>,
    /// Print plan.json on stdout (the text goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// What `--emit` writes (docs/deploy.md).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmitFormat {
    /// `vllm serve …` per pool (vllm.sh).
    Vllm,
    /// `python -m sglang.launch_server …` per pool (sglang.sh).
    Sglang,
    /// Deployment or LeaderWorkerSet, Service and HPA (kubernetes.yaml).
    Kubernetes,
    /// A Dynamo DynamoGraphDeployment (dynamo.yaml).
    Dynamo,
    /// Every format.
    All,
}

#[derive(Subcommand, Debug)]
pub enum PlanAction {
    /// Merge the outputs of every shard of one plan into the plan an
    /// unsharded run gives (and measure the winner's headroom).
    #[command(after_help = "Example:\n  servesim plan merge out/plan-0 out/plan-1 --out out/plan")]
    Merge(MergeArgs),
}

/// `sweep merge` and `plan merge`: the shards of one run joined into one.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Shard output folders, each holding one shard's sweep.json or plan.json.
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
    /// Output folder for the merged results.
    #[arg(long)]
    pub out: PathBuf,
    /// Also write report.html, report.md and charts/ into the output folder.
    #[arg(long)]
    pub report: bool,
    /// Print the merged result (operating-point.json, or plan.json) on
    /// stdout (the text goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// `servesim capacity`.
#[derive(Args, Debug)]
pub struct CapacityArgs {
    /// Scenario TOML file (needs an [slo] table).
    pub scenario: PathBuf,
    /// Fleet size for the highest-load search.
    #[arg(long, default_value_t = 1, value_parser = ranges::REPLICAS, allow_negative_numbers = true)]
    pub replicas: u32,
    /// Peak demand to size a fleet for, requests/s.
    #[arg(long, value_name = "RATE", value_parser = ranges::DEMAND, allow_negative_numbers = true)]
    pub demand: Option<f64>,
    /// Extra load the fleet must absorb above the demand, percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.0, value_parser = ranges::HEADROOM, allow_negative_numbers = true)]
    pub headroom: f64,
    /// Spare replicas added for failures (N+k).
    #[arg(long, value_name = "K", default_value_t = 0, value_parser = ranges::SPARE, allow_negative_numbers = true)]
    pub spare: u32,
    /// Price of one GPU for one hour, US dollars (no cost is reported without it).
    #[arg(long, value_name = "USD", value_parser = ranges::GPU_HOUR_USD, allow_negative_numbers = true)]
    pub gpu_hour_usd: Option<f64>,
    /// Share of requests that must meet the scenario's [slo].
    #[arg(long, default_value_t = 0.99, value_parser = ranges::ATTAINMENT, allow_negative_numbers = true)]
    pub attainment: f64,
    /// Relative precision of the rate search.
    #[arg(long, default_value_t = 0.01, value_parser = ranges::TOLERANCE, allow_negative_numbers = true)]
    pub tolerance: f64,
    /// Output folder for capacity.json [default: out/<scenario name>-capacity/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write report.html, report.md and charts/ into the output folder.
    #[arg(long)]
    pub report: bool,
    /// Print capacity.json on stdout (the text goes to stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum SweepAction {
    /// Merge the outputs of every shard of one sweep into the results of an
    /// unsharded run.
    ///
    /// `sweep merge` joins the output folders of every shard of one sweep (each holding a
    /// `sweep.json`) into the results of an unsharded run: `--out DIR` (required), `--report`.
    #[command(
        after_help = "Example:\n  servesim sweep merge out/shard-0 out/shard-1 --out out/sweep"
    )]
    Merge(MergeArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum CatalogWhat {
    Hardware,
    Models,
}

/// Parses the command line. Numeric flags parse with their range from
/// [`crate::ranges`] and accept a leading `-` (`--demand -1` reaches the
/// range check, which names the flag); names and paths keep clap's rule, so
/// `--model --json` says `--model` lacks its value.
pub fn parse() -> Cli {
    Cli::parse()
}

#[cfg(test)]
mod tests;
