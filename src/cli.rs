//! Command-line definitions (clap derive). Every flag is defined once here.

use clap::{Args, Parser, Subcommand, ValueEnum};
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
    /// Measure a model on a device (candle) and write a calibration profile.
    #[command(
        after_help = "Examples:\n  servesim calibrate --device cpu --model scenarios/validate/tiny-llama.json --quick --out cpu-profile.toml\n  servesim calibrate --device cuda:0 --model llama-3.2-1b --dtype bf16 --out h100-1b.toml\n  servesim calibrate --weights SmolLM2-135M-Instruct.Q4_1.gguf --quick --out smollm2.toml"
    )]
    Calibrate(CalibrateCmd),
    /// Serve a scenario's workload for real and compare with the simulation of the profile.
    #[command(
        after_help = "Example:\n  servesim validate --profile cpu-profile.toml --scenario scenarios/validate/cpu.toml"
    )]
    Validate(ValidateCmd),
}

/// `servesim calibrate` flags.
#[derive(Args, Debug)]
pub struct CalibrateCmd {
    /// Device to measure: cpu, cuda, cuda:N, metal.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// A Llama-style catalog preset (e.g. smollm2-135m) or a Hugging Face config.json;
    /// optional when --weights is a GGUF file.
    #[arg(long)]
    pub model: Option<String>,
    /// Real weights (.safetensors with --model, or .gguf); random weights without it.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// Dtype the model runs in: f32, f16 or bf16 (no bf16 on cpu).
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Longest context to measure [default: 1024 with --quick, else 2048; at most the model's].
    #[arg(long)]
    pub max_context: Option<usize>,
    /// The smaller grid (fewer shapes and repetitions).
    #[arg(long)]
    pub quick: bool,
    /// CPU worker threads [default: RAYON_NUM_THREADS, else the physical cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seed of random weights and token ids.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Re-fit the samples of an existing profile instead of measuring (no device needed).
    #[arg(long, conflicts_with_all = ["model", "weights"])]
    pub refit: Option<PathBuf>,
    /// Where to write the profile TOML.
    #[arg(long)]
    pub out: PathBuf,
}

/// `servesim validate` flags.
#[derive(Args, Debug)]
pub struct ValidateCmd {
    /// Profile written by `servesim calibrate` (gives the model and the device).
    #[arg(long)]
    pub profile: PathBuf,
    /// Scenario whose [engine] and [workload] are served (its model and hardware are ignored).
    #[arg(long)]
    pub scenario: PathBuf,
    /// Run on another device than the profile's (e.g. cuda:1).
    #[arg(long)]
    pub device: Option<String>,
    /// Output folder for validation.json [default: out/<scenario name>-validate/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Requests re-run alone to check batching leaves their greedy tokens unchanged.
    #[arg(long, default_value_t = 4)]
    pub alone_checks: usize,
    /// Print the result as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum CatalogWhat {
    Hardware,
    Models,
}
