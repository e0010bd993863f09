//! Command-line definitions (clap derive). Every flag is defined once here.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

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
        #[arg(long)]
        seed: Option<u64>,
        /// Print the summary as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Skip and count trace lines that do not parse instead of stopping.
        #[arg(long)]
        lenient: bool,
    },
    /// Validate a scenario and print the resolved configuration.
    #[command(after_help = "Example:\n  servesim check scenarios/llama70b-tp4.toml")]
    Check {
        /// Scenario TOML file.
        scenario: PathBuf,
    },
    /// List the hardware and model presets.
    #[command(after_help = "Example:\n  servesim catalog hardware")]
    Catalog {
        /// Which part of the catalog (both when omitted).
        what: Option<CatalogWhat>,
    },
    /// Measure simulator speed on a fixed large scenario.
    #[command(
        after_help = "Example:\n  cargo run --release -- bench --requests 200000 --replicas 16"
    )]
    Bench {
        /// Requests to simulate.
        #[arg(long, default_value_t = 200_000)]
        requests: u64,
        /// Replicas in the fleet.
        #[arg(long, default_value_t = 16)]
        replicas: u32,
        /// Runs to time (the best is reported).
        #[arg(long, default_value_t = 3)]
        repeat: u32,
    },
    /// Inspect trace files: statistics, and the readers' speed.
    #[command(
        after_help = "Example:\n  servesim trace stats AzureLLMInferenceTrace_code.csv --format azure"
    )]
    Trace {
        #[command(subcommand)]
        command: Box<TraceCommand>,
    },
}

/// `servesim trace ...`
#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Request count, span, rate, inter-arrival CV, length percentiles and
    /// prefix reuse of a trace file.
    #[command(
        after_help = "Examples:\n  servesim trace stats AzureLLMInferenceTrace_conv.csv --format azure\n  servesim trace stats conversation_trace.jsonl --format mooncake --json\n  servesim trace stats arrivals.csv --format csv --columns arrival=ts,prompt=in,output=out --time-unit ms"
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
    #[command(after_help = "Example:\n  cargo run --release -- trace bench --rows 1000000")]
    Bench {
        /// Formats to measure [default: every per-request format].
        #[arg(long, value_parser = trace_format)]
        format: Vec<String>,
        /// Rows per synthetic file.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// Read this trace file instead of synthetic ones (one --format).
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

/// Trace options (the keys of a scenario's `workload.trace`).
#[derive(clap::Args, Debug)]
pub struct TraceOpts {
    /// Trace format.
    #[arg(long, value_parser = trace_format)]
    pub format: String,
    /// Skip and count lines that do not parse instead of stopping.
    #[arg(long)]
    pub lenient: bool,
    /// Replay at k× speed (arrival times divided by k).
    #[arg(long)]
    pub time_scale: Option<f64>,
    /// Rescale times to this mean rate, requests/s.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Start of the time window, seconds from the first row.
    #[arg(long)]
    pub start: Option<f64>,
    /// End of the time window, seconds from the first row.
    #[arg(long)]
    pub end: Option<f64>,
    /// Only the first N requests.
    #[arg(long)]
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
    /// csv/jsonl: unit of the arrival column (s, ms, us, ns, datetime).
    #[arg(long)]
    pub time_unit: Option<String>,
    /// Tokens per hash block (ragpulse; csv/jsonl with a hashes column).
    #[arg(long)]
    pub block_tokens: Option<u32>,
}

fn trace_format(s: &str) -> Result<String, String> {
    match sim::scenario::TraceFormat::from_name(s) {
        Some(_) => Ok(s.to_string()),
        None => Err(format!(
            "unknown format {s:?}; known: {}",
            sim::scenario::TraceFormat::ALL.map(|f| f.name()).join(", ")
        )),
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum CatalogWhat {
    Hardware,
    Models,
}
