//! Sweeps: run one scenario over a grid of settings, in parallel, and turn
//! the results into a decision — the Pareto front of cost against latency,
//! the best operating point under the SLOs, and the capacity a demand needs.
//!
//! * [`grid`] reads a grid file (which scenario keys vary, over which values,
//!   and how to sample them);
//! * [`sample`] expands it into points (cartesian product, seeded random, or
//!   Latin hypercube);
//! * `config::keypath` applies a point to a clone of the scenario's TOML table, so
//!   every point goes through the normal scenario validation;
//! * [`checked`] checks every point before anything runs; [`run`] runs them with
//!   rayon, one simulation per thread, in any order, and returns results in
//!   point order;
//! * [`results`] and [`shard`] write, read and merge `sweep.json` /
//!   `sweep.csv`, so a sweep can be split over a job array;
//! * [`frontier`] draws throughput per GPU against interactivity (tokens
//!   per second per user) and TTFT, one curve per configuration;
//! * [`pareto`] and [`objective`] pick the operating point; [`capacity`]
//!   searches the arrival rate and the replica count (the `plan` command's
//!   search over a declared space of deployments builds on it, in
//!   `deployment`).

pub mod capacity;
pub mod checked;
pub mod checkpoint;
pub mod frontier;
pub mod grid;
pub mod objective;
pub mod pareto;
pub mod read_back;
pub mod results;
pub mod run;
pub mod sample;
pub mod shard;

pub use checked::CheckedSweep;
pub use grid::Grid;
pub use objective::{Analysis, Objective};
pub use results::SweepResults;
pub use shard::Shard;

/// A sweep error: one line naming the file, the key path or point, and what
/// is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SweepError(pub String);

impl SweepError {
    pub fn new(msg: impl Into<String>) -> Self {
        SweepError(msg.into())
    }
}

impl From<crate::ScenarioError> for SweepError {
    fn from(e: crate::ScenarioError) -> Self {
        SweepError(e.to_string())
    }
}
