//! The serde types of scenario tables that the knowledge floor reads too
//! (the memory plan and the cost models read `[engine]`, whose `runtime`
//! names the host overhead `cost::runtime` prices), with their
//! defaults: plain data, no I/O, no catalog lookups, no resolution.
//! `scenario` re-exports them beside the rest of the scenario file.
//! [`keypath`] edits a parsed scenario table by key path, as sweeps and
//! command-line overrides do before resolution.

pub mod engine;
pub mod keypath;

pub use engine::{
    AllReduceKind, BatchPolicyKind, DeepEpMode, EngineCfg, EngineRuntime, FrontEnd, LaunchPerLayer,
    MoeA2aKind, PreemptionMode, SpeculativeCfg,
};

/// Serde default of a switch that is on unless turned off.
pub(crate) fn yes() -> bool {
    true
}
