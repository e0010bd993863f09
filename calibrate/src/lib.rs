//! servesim's calibration library (DESIGN.md, "Calibration and validation"):
//! builds a Llama-style model with candle, measures what its iterations cost
//! on a device, fits the profile the simulator's `Profiled` cost model reads,
//! and runs the live engine behind `servesim validate` — the replica
//! scheduler of `sim` driving real forward passes on the wall clock.
//!
//! | module | owns |
//! | --- | --- |
//! | `device` | `--device` parsing, opening, naming, synchronizing, memory |
//! | `config` | the decoder's architecture from a preset, config.json or GGUF |
//! | `model` | the packed-batch Llama decoder with per-sequence KV caches |
//! | `gguf`, `tokenizer` | GGUF weights and their byte-level BPE tokenizer |
//! | `loader` | random / safetensors / GGUF weights onto the device |
//! | `measure` | the grid of shapes and the timing of one shape |
//! | `elementwise` | RMSNorm eager against fused: agreement and timings |
//! | `fit` | non-negative least squares and held-out error |
//! | `quant` | INT8 / GGML weight formats of the blocks' linear layers |
//! | `quality` | the quantization quality gate: likelihood, agreement, KL |
//! | `speculative` | speculative sampling with a draft model (rejection rule, residual) |
//! | `spec_bench` | α, accepted length and speed-up of speculation on a text |
//! | `calibrate` | one calibration, start to profile |
//! | `engine` | the live engine: `sim`'s scheduler on the wall clock |
//! | `online` | the live engine one iteration at a time, for `serve --engine live` |
//! | `validate` | live vs simulated, side by side |

pub mod calibrate;
pub mod config;
pub mod device;
pub mod drift;
pub mod elementwise;
pub mod engine;
pub mod error;
pub mod fit;
pub mod gguf;
pub mod loader;
pub mod measure;
pub mod model;
pub mod noise;
pub mod online;
pub mod quality;
pub mod quant;
pub mod repeat;
pub mod spec_bench;
pub mod speculative;
pub mod tokenizer;
pub mod validate;

pub use error::{Error, Result};
