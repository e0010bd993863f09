//! The flags of the verbs that measure rather than simulate: `calibrate`
//! (a device with candle, a served engine, or benchmark results) and
//! `validate` (a profile against the live engine).

use super::CANDLE_DTYPES;
use crate::ranges;
use clap::Args;
use std::path::PathBuf;

/// A device candle runs on: `cpu`, `cuda`, `cuda:N`, `metal` or `metal:N`.
pub fn device(s: &str) -> Result<String, String> {
    let ok = match s.split_once(':') {
        Some((kind, n)) => matches!(kind, "cuda" | "metal") && n.parse::<usize>().is_ok(),
        None => matches!(s, "cpu" | "cuda" | "metal"),
    };
    if ok {
        Ok(s.to_string())
    } else {
        Err("allowed: cpu, cuda, cuda:N, metal, metal:N".into())
    }
}

/// `servesim calibrate` flags.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("scenario_users").args(["engine", "from_bench"])))]
pub struct CalibrateCmd {
    /// Fit the profile's engine terms (front end, per step, per sequence,
    /// compute and bandwidth efficiency) to these measured benchmark results
    /// (any format `servesim accuracy` reads) instead of measuring: no
    /// server or device needed. Needs --scenario.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with_all = ["engine", "weights", "refit", "quick", "threads", "max_context"])]
    pub from_bench: Vec<PathBuf>,
    /// --from-bench: hardware preset of every point, over the files'.
    #[arg(long, requires = "from_bench")]
    pub hardware: Option<String>,
    /// --from-bench: at most this many requests simulated per point.
    #[arg(long, default_value_t = 400, requires = "from_bench")]
    pub max_requests: u64,
    /// --from-bench: simulations of the training points the fit may run
    /// [default: 1000].
    #[arg(long, requires = "from_bench", value_parser = clap::value_parser!(u32).range(12..=100_000))]
    pub evaluations: Option<u32>,
    /// Calibrate the OpenAI-compatible server at this base URL through its
    /// API (vLLM, SGLang, TGI, llama.cpp's llama-server, `servesim serve`)
    /// instead of measuring candle on a device.
    #[arg(long, value_name = "URL", conflicts_with_all = ["device", "weights", "refit", "quick", "threads", "max_context", "attention"])]
    pub engine: Option<String>,
    /// Device to measure: cpu, cuda, cuda:N, metal, metal:N.
    #[arg(long, default_value = "cpu", value_parser = device)]
    pub device: String,
    /// A Llama-style catalog preset (e.g. smollm2-135m) or a Hugging Face config.json;
    /// optional when --weights is a GGUF file. With --engine: the served
    /// model's catalog preset [default: matched from its name].
    #[arg(long)]
    pub model: Option<String>,
    /// --engine: minutes the probes may take.
    #[arg(
        long,
        value_name = "MINUTES",
        default_value_t = 4.0,
        requires = "engine",
        value_parser = ranges::MINUTES,
        allow_negative_numbers = true
    )]
    pub budget: f64,
    /// --engine: most requests sent at once (also capped by the server's slots).
    #[arg(long, default_value_t = 16, requires = "engine", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_concurrency: u32,
    /// --engine: longest prompt to probe [default: the longest --scenario's
    /// workload sends, else half the server's context, at most 2048].
    #[arg(long, requires = "engine", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(16..))]
    pub max_prompt: Option<u32>,
    /// --engine: the scenario whose workload the profile is for: the probes
    /// reach its longest prompt (within the server's context).
    /// --from-bench: the scenario the benchmarks ran (model, hardware preset,
    /// engine settings).
    #[arg(long, requires = "scenario_users", value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// --engine: tokens per iteration as the server was started (vLLM
    /// --max-num-batched-tokens, llama.cpp -b), recorded in the profile so
    /// that simulate batches the same way [default: what the server reports;
    /// llama.cpp's default 2048].
    #[arg(long, requires = "engine", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    pub max_num_batched_tokens: Option<u32>,
    /// --engine: sequences per iteration as the server was started (vLLM
    /// --max-num-seqs, llama.cpp -np) [default: llama.cpp's slots in /props].
    #[arg(long, requires = "engine", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_num_seqs: Option<u32>,
    /// --engine: llama.cpp's micro-batch as the server was started (-ub)
    /// [default: what /props reports, else llama.cpp's default 512].
    #[arg(long, requires = "engine", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    pub ubatch_size: Option<u32>,
    /// --engine: the server's KV capacity in tokens [default: what its
    /// /metrics or /props say, else its context × --max-concurrency].
    #[arg(long, requires = "engine", value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
    pub kv_tokens: Option<u64>,
    /// --engine: write the profile even when it cannot be trusted (no
    /// held-out shapes, a fit error past 15 %, a probe family missing, a
    /// served model of another architecture class); the reasons are kept
    /// in its findings.
    #[arg(long, requires = "engine")]
    pub force: bool,
    /// --engine: the model name to request [default: the first /v1/models lists].
    #[arg(
        long = "served-model-name",
        alias = "served-model",
        value_name = "NAME",
        requires = "engine"
    )]
    pub served_model: Option<String>,
    /// --engine: bearer key for the server.
    #[arg(
        long,
        env = "SERVESIM_API_KEY",
        hide_env_values = true,
        requires = "engine"
    )]
    pub api_key: Option<String>,
    /// Real weights (.safetensors with --model, or .gguf); random weights without it.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// Dtype the model runs in: f32, f16 or bf16 (no bf16 on cpu) [default:
    /// f32; with --engine: bf16, what the server holds weights and KV in].
    #[arg(long, value_parser = CANDLE_DTYPES)]
    pub dtype: Option<String>,
    /// Longest context to measure [default: 1024 with --quick, else 2048; at most the model's].
    #[arg(long, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub max_context: Option<usize>,
    /// The smaller grid (fewer shapes and repetitions).
    #[arg(long)]
    pub quick: bool,
    /// CPU worker threads [default: RAYON_NUM_THREADS, else the physical cores].
    #[arg(long, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub threads: Option<usize>,
    /// Seed of random weights and token ids.
    #[arg(long, default_value_t = 0, value_parser = ranges::ANY_U64, allow_negative_numbers = true)]
    pub seed: u64,
    /// How the model computes attention: `naive` (one score matrix per
    /// sequence, the faster at calibration contexts on CPU), `tiled` or
    /// `tiled:BLOCK` (FlashAttention's blocks of BLOCK keys with an online
    /// softmax, default 256: memory flat in the context). `validate` serves
    /// with the one the profile records.
    #[arg(long, default_value = "naive", value_name = "KIND")]
    pub attention: String,
    /// Re-fit the samples of an existing profile instead of measuring (no device needed).
    #[arg(long, conflicts_with_all = ["model", "weights"])]
    pub refit: Option<PathBuf>,
    /// Output folder: the profile is written as <folder>/profile.toml.
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
    pub scenario: PathBuf,
    /// Run on another device than the profile's (e.g. cuda:1).
    #[arg(long, value_parser = device)]
    pub device: Option<String>,
    /// Output folder for validation.json [default: out/<scenario name>-validate/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Requests re-run alone to check batching leaves their greedy tokens unchanged.
    #[arg(long, default_value_t = 4, value_parser = ranges::ANY_USIZE, allow_negative_numbers = true)]
    pub alone_checks: usize,
    /// Serve the workload live this many times: the table then compares the
    /// simulation with the runs' mean and shows how far the live runs differ
    /// from each other (the machine's own noise).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20), allow_negative_numbers = true)]
    pub live_runs: u32,
    /// Print the result as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}
