//! servesim's simulation library: a deterministic discrete-event simulator of
//! LLM serving fleets. See DESIGN.md for the map of modules.

pub mod accuracy;
pub mod attribution;
pub mod autoscale;
pub mod bounds;
pub mod breakeven;
pub mod canary;
pub mod catalog;
pub mod cluster;
pub mod config;
pub mod cost;
pub mod deployment;
pub mod emit;
pub mod energy;
pub mod engine;
pub mod from_bench;
pub mod guard;
pub mod input_file;
pub mod kv;
pub mod kv_groups;
pub mod lifecycle;
pub mod memory;
pub mod output;
pub mod parallel;
pub mod profile;
pub mod profiled;
pub mod records;
pub mod region;
pub mod replica;
pub mod report;
pub mod request;
pub mod rng;
pub mod scenario;
pub mod sig_figs;
pub mod simulation;
pub mod stats;
pub mod steady_state;
pub mod store;
pub mod sweep;
pub mod tenancy;
pub mod time;
pub mod workload;

pub use scenario::{Scenario, ScenarioError};
pub use simulation::{RunError, RunResult, Simulation};
