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
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum CatalogWhat {
    Hardware,
    Models,
}
