//! The engines' launch command lines for a pool: the flags of `vllm serve`
//! (vLLM's engine arguments, <https://docs.vllm.ai/en/latest/cli/serve.html>)
//! and of `python -m sglang.launch_server` (SGLang's server arguments,
//! <https://docs.sglang.io/advanced_features/server_arguments.html>) that
//! reproduce what the simulation ran, and a note for each setting the
//! engine cannot express. `docs/deploy.md` tabulates the mapping; the tests
//! parse every emitted line against the engines' documented flag sets.

use super::{comment_lines, model_id, pools, Emitted, Pool};
use crate::catalog::Dtype;
use crate::config::{
    AllReduceKind, BatchPolicyKind, DeepEpMode, EngineRuntime, MoeA2aKind, PreemptionMode,
};
use crate::scenario::{PoolRole, ReplicaPlan, Scenario};

/// The engines a command line is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Vllm,
    Sglang,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
        }
    }

    /// The port the server listens on (each engine's default).
    pub fn port(self) -> u16 {
        match self {
            Engine::Vllm => 8000,
            Engine::Sglang => 30000,
        }
    }
}

/// One server's launch: the program words, then `--flag [value]` pairs, and
/// the settings it cannot express.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub engine: Engine,
    /// `["vllm", "serve", MODEL]` or `["python", "-m", "sglang.launch_server"]`.
    pub program: Vec<String>,
    pub flags: Vec<(String, Option<String>)>,
    pub notes: Vec<String>,
}

impl Launch {
    /// The flags as argv words (`--flag`, then its value when it has one).
    pub fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        for (f, v) in &self.flags {
            a.push(f.clone());
            if let Some(v) = v {
                a.push(v.clone());
            }
        }
        a
    }

    /// The whole command as argv words.
    pub fn argv(&self) -> Vec<String> {
        let mut a = self.program.clone();
        a.extend(self.args());
        a
    }

    /// One shell command, a flag per line.
    pub fn shell(&self) -> String {
        let mut s = self
            .program
            .iter()
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        for (f, v) in &self.flags {
            s.push_str(" \\\n    ");
            s.push_str(f);
            if let Some(v) = v {
                s.push(' ');
                s.push_str(&quote(v));
            }
        }
        s.push('\n');
        s
    }
}

/// A word quoted for a POSIX shell where it needs it.
fn quote(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// Flags and notes being gathered.
struct Builder {
    flags: Vec<(String, Option<String>)>,
    notes: Vec<String>,
}

impl Builder {
    fn flag(&mut self, f: &str, v: impl ToString) {
        self.flags.push((f.to_string(), Some(v.to_string())));
    }
    fn switch(&mut self, f: &str) {
        self.flags.push((f.to_string(), None));
    }
    fn note(&mut self, n: impl Into<String>) {
        self.notes.push(n.into());
    }
}

/// The KV cache dtype as each engine names it; `None` when the engine
/// stores the KV cache in the activation dtype (its `auto`).
fn kv_dtype(engine: Engine, r: &ReplicaPlan, b: &mut Builder) -> Option<&'static str> {
    match r.kv_dtype {
        Dtype::Bf16 | Dtype::Fp16 | Dtype::Fp32 => None,
        Dtype::Fp8 | Dtype::Fp8Block => Some(match engine {
            Engine::Vllm => "fp8",
            Engine::Sglang => "fp8_e4m3",
        }),
        other => {
            b.note(format!(
                "kv_dtype {other:?}: {} stores the KV cache in bf16/fp16 or fp8 only; the simulation's {other:?} KV cache is not expressible (the emitted server keeps its default, so it holds fewer tokens than simulated)",
                engine.name()
            ));
            None
        }
    }
}

/// The launch of one replica of `pool` on `engine`.
pub fn launch(engine: Engine, pool: &Pool<'_>) -> Launch {
    let (r, s) = (pool.replica, pool.fleet);
    let e = &r.engine;
    let p = &r.parallel;
    let (model, model_note) = model_id(s);
    let mut b = Builder {
        flags: Vec::new(),
        notes: model_note.into_iter().collect(),
    };
    let program: Vec<String> = match engine {
        Engine::Vllm => vec!["vllm".into(), "serve".into(), model.clone()],
        Engine::Sglang => vec!["python".into(), "-m".into(), "sglang.launch_server".into()],
    };
    if engine == Engine::Sglang {
        b.flag("--model-path", &model);
    }
    b.flag("--host", "0.0.0.0");
    b.flag("--port", engine.port());

    // Parallelism: servesim's stage of `tensor` GPUs holds `attention_dp`
    // attention groups of `attention_tp` GPUs and `expert` EP ranks.
    let dp = p.attention_dp();
    match engine {
        Engine::Vllm => {
            // vLLM's DP attention is `--data-parallel-size` ranks of
            // `--tensor-parallel-size` GPUs each; EP spans all of them.
            b.flag("--tensor-parallel-size", p.attention_tp());
            if dp > 1 {
                b.flag("--data-parallel-size", dp);
            }
            if p.expert > 1 {
                b.switch("--enable-expert-parallel");
                if p.expert != p.tensor {
                    b.note(format!(
                        "expert_parallel {}: vLLM's expert parallelism spans every GPU of the stage ({}), not {} ranks; the emitted server runs EP {}",
                        p.expert, p.tensor, p.expert, p.tensor
                    ));
                }
            }
        }
        Engine::Sglang => {
            // SGLang's `--tp-size` is every GPU of the stage; DP attention
            // splits it into `--dp-size` attention groups.
            b.flag("--tp-size", p.tensor);
            if dp > 1 {
                b.flag("--dp-size", dp);
                b.switch("--enable-dp-attention");
            }
            if p.expert > 1 {
                b.flag("--ep-size", p.expert);
            }
        }
    }
    if p.pipeline > 1 {
        match engine {
            Engine::Vllm => b.flag("--pipeline-parallel-size", p.pipeline),
            Engine::Sglang => b.flag("--pp-size", p.pipeline),
        }
    }
    if r.eplb {
        b.switch("--enable-eplb");
        if p.redundant_experts > 0 {
            match engine {
                Engine::Vllm => b.flag(
                    "--eplb-config",
                    format!("{{\"num_redundant_experts\": {}}}", p.redundant_experts),
                ),
                Engine::Sglang => b.flag("--ep-num-redundant-experts", p.redundant_experts),
            }
        }
    }

    // Batching.
    match engine {
        Engine::Vllm => {
            b.flag("--max-num-seqs", e.max_num_seqs);
            b.flag("--max-num-batched-tokens", e.max_batched_tokens);
        }
        Engine::Sglang => {
            b.flag("--max-running-requests", e.max_num_seqs);
            b.flag("--max-prefill-tokens", e.max_batched_tokens);
        }
    }
    let chunked = e.policy == BatchPolicyKind::Sarathi;
    match (engine, chunked) {
        (Engine::Vllm, true) => b.switch("--enable-chunked-prefill"),
        (Engine::Vllm, false) => b.switch("--no-enable-chunked-prefill"),
        (Engine::Sglang, true) => b.flag("--chunked-prefill-size", e.max_batched_tokens),
        // -1 turns SGLang's chunked prefill off.
        (Engine::Sglang, false) => b.flag("--chunked-prefill-size", -1),
    }
    match e.policy {
        BatchPolicyKind::Continuous | BatchPolicyKind::Sarathi => {}
        BatchPolicyKind::Vllm => b.note(format!(
            "policy vllm (prefill-first iterations that never mix prefills with decodes, vLLM v0's scheduler): {} mixes them; the emitted server runs continuous batching without chunked prefill",
            engine.name()
        )),
        BatchPolicyKind::Orca | BatchPolicyKind::Static => b.note(format!(
            "policy {}: {} has no such scheduler; the emitted server runs continuous batching without chunked prefill",
            e.policy.name(),
            engine.name()
        )),
    }
    match (engine, e.prefix_caching) {
        (Engine::Vllm, true) => b.switch("--enable-prefix-caching"),
        // vLLM V1 caches prefixes unless told not to.
        (Engine::Vllm, false) => b.switch("--no-enable-prefix-caching"),
        (Engine::Sglang, true) => {}
        (Engine::Sglang, false) => b.switch("--disable-radix-cache"),
    }
    if e.pinned_prefix_blocks > 0 {
        b.note(format!(
            "pinned_prefix_blocks {}: neither engine pins cached prefixes against eviction; the emitted server evicts them as any other block",
            e.pinned_prefix_blocks
        ));
    }

    // Memory.
    match engine {
        Engine::Vllm => {
            b.flag("--block-size", e.block_size);
            b.flag("--gpu-memory-utilization", e.gpu_memory_utilization);
            b.flag("--max-model-len", r.limits.max_model_len);
        }
        Engine::Sglang => {
            b.flag("--page-size", e.block_size);
            // SGLang's fraction is for weights and KV cache; vLLM's (the
            // simulation's) covers activations too: the closest figure.
            b.flag("--mem-fraction-static", e.gpu_memory_utilization);
            b.flag("--context-length", r.limits.max_model_len);
        }
    }
    if engine == Engine::Vllm && ![1, 8, 16, 32, 64, 128].contains(&e.block_size) {
        b.note(format!(
            "block_size {}: vLLM's --block-size takes 1, 8, 16, 32, 64 or 128",
            e.block_size
        ));
    }
    if let Some(d) = kv_dtype(engine, r, &mut b) {
        b.flag("--kv-cache-dtype", d);
    }
    match r.weight_dtype {
        Dtype::Bf16 => b.flag("--dtype", "bfloat16"),
        Dtype::Fp16 => b.flag("--dtype", "float16"),
        Dtype::Fp8 if s.stated_weight_dtype().is_some() => {
            // Asked for in the scenario: quantize a 16-bit checkpoint on load.
            b.flag("--quantization", "fp8")
        }
        d => b.note(format!(
            "weight_dtype {d:?}: serve a checkpoint quantized to it; both engines read its quantization_config, so no flag is written"
        )),
    }
    if e.preemption == PreemptionMode::Swap {
        b.note(format!(
            "preemption swap (KV blocks to host memory, swap_space_gib {}): {} preempts by recomputation; the emitted server recomputes",
            e.swap_space_gib,
            engine.name()
        ));
    }

    // Speculative decoding.
    if let Some(sp) = &e.speculative {
        let k = sp.num_draft_tokens;
        let draft = sp.draft_model.as_deref().map(|d| {
            crate::catalog::model_preset(d)
                .and_then(|p| {
                    p.url
                        .strip_prefix("https://huggingface.co/")
                        .and_then(|r| r.split("/blob/").next())
                })
                .unwrap_or(d)
                .to_string()
        });
        let (method, path) = match (&draft, sp.draft_layers) {
            (Some(d), _) => ("draft", Some(d.clone())),
            (None, Some(_)) => ("mtp", None),
            (None, None) => ("eagle", None),
        };
        match engine {
            Engine::Vllm => {
                let cfg = match (method, &path) {
                    ("draft", Some(d)) => format!(
                        "{{\"model\": \"{d}\", \"num_speculative_tokens\": {k}}}"
                    ),
                    ("mtp", _) => format!("{{\"method\": \"mtp\", \"num_speculative_tokens\": {k}}}"),
                    _ => format!(
                        "{{\"method\": \"eagle\", \"model\": \"EAGLE_HEAD\", \"num_speculative_tokens\": {k}}}"
                    ),
                };
                b.flag("--speculative-config", cfg);
            }
            Engine::Sglang => {
                let algorithm = match method {
                    "draft" => "STANDALONE",
                    "mtp" => "NEXTN",
                    _ => "EAGLE",
                };
                b.flag("--speculative-algorithm", algorithm);
                match (method, &path) {
                    ("draft", Some(d)) => b.flag("--speculative-draft-model-path", d),
                    ("eagle", _) => b.flag("--speculative-draft-model-path", "EAGLE_HEAD"),
                    _ => {}
                }
                // A chain of k drafts: k steps, one candidate each, k + 1
                // tokens verified.
                b.flag("--speculative-num-steps", k);
                b.flag("--speculative-eagle-topk", 1);
                b.flag("--speculative-num-draft-tokens", k + 1);
            }
        }
        if method == "eagle" {
            b.note("speculative: the simulation prices an EAGLE-style head by draft_cost_fraction; replace EAGLE_HEAD with the head's checkpoint trained for this model");
        }
        b.note(format!(
            "speculative acceptance_rate {}: a property of the draft and the workload, not a flag; measure it on the deployed server",
            sp.acceptance_rate
        ));
    }

    // Kernels and runtime.
    if p.tensor > 1 && e.all_reduce.unwrap_or(e.runtime.all_reduce()) == AllReduceKind::Nccl {
        // The simulation priced every all-reduce through NCCL.
        b.switch("--disable-custom-all-reduce");
    }
    if e.moe_a2a == MoeA2aKind::Deepep {
        match engine {
            Engine::Vllm => {
                let backend = match (e.deepep_mode, pool.role) {
                    (DeepEpMode::Normal, _) | (DeepEpMode::Auto, PoolRole::Prefill) => {
                        "deepep_high_throughput"
                    }
                    _ => "deepep_low_latency",
                };
                b.flag("--all2all-backend", backend);
                if e.deepep_mode == DeepEpMode::Auto && pool.role == PoolRole::Colocated {
                    b.note("deepep_mode auto (normal kernels for prefill steps, low-latency ones for decode-only steps): vLLM runs one DeepEP mode per server; the emitted server runs the low-latency kernels");
                }
            }
            Engine::Sglang => {
                b.flag("--moe-a2a-backend", "deepep");
                b.flag(
                    "--deepep-mode",
                    match e.deepep_mode {
                        DeepEpMode::Auto => "auto",
                        DeepEpMode::Normal => "normal",
                        DeepEpMode::LowLatency => "low_latency",
                    },
                );
            }
        }
    }
    if e.runtime == EngineRuntime::Eager2023 {
        b.note(format!(
            "runtime eager-2023: the simulation priced a 2023 eager engine's host overhead; today's {} runs CUDA graphs and an overlapped scheduler, so the emitted server is faster per step than simulated",
            engine.name()
        ));
    }

    // Disaggregation.
    match (engine, pool.role) {
        (_, PoolRole::Colocated) => {}
        (Engine::Vllm, role) => {
            b.flag(
                "--kv-transfer-config",
                "{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\"}",
            );
            b.note(format!(
                "role {}: a vLLM prefill and decode pair is joined by a proxy or router that sends each request to both (Dynamo, llm-d, or vLLM's disaggregated-serving proxy)",
                role.name()
            ));
        }
        (Engine::Sglang, role) => b.flag("--disaggregation-mode", role.name()),
    }
    Launch {
        engine,
        program,
        flags: b.flags,
        notes: b.notes,
    }
}

/// A shell script launching one replica of each pool on `engine`, with the
/// replica counts and the notes as comments.
pub fn script(s: &Scenario, engine: Engine) -> Emitted {
    let mut text = format!(
        "#!/bin/sh\n# {} launch commands for {:?}, as servesim simulated it: one command per replica of each pool.\n",
        engine.name(),
        s.name()
    );
    let mut notes = Vec::new();
    for pool in pools(s) {
        let l = launch(engine, &pool);
        text.push_str(&format!(
            "\n# pool {} ({}): {} replica(s) of {} GPU(s) on {}\n",
            pool.name,
            pool.role.name(),
            pool.replicas,
            pool.replica.gpus(),
            pool.replica.hardware.name
        ));
        text.push_str(&comment_lines(&l.notes));
        text.push_str(&l.shell());
        for n in l.notes {
            let n = format!("pool {}: {n}", pool.name);
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    Emitted {
        file: match engine {
            Engine::Vllm => super::Format::Vllm.file(),
            Engine::Sglang => super::Format::Sglang.file(),
        }
        .to_string(),
        text,
        notes,
    }
}
