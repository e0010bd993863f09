//! A model from its Hugging Face `config.json`: the family recognised by
//! `model_type` (or `architectures`), its keys read with serde into a
//! [`ModelArch`], and the checkpoint's `quantization_config` read as the
//! weight dtype it stores.
//!
//! The keys are those of the `transformers` configuration classes of each
//! family (`LlamaConfig`, `MixtralConfig`, `Qwen3MoeConfig`,
//! `Qwen3NextConfig`, `DeepseekV3Config`, `GptOssConfig`, `Llama4TextConfig`,
//! `Gemma3TextConfig`, …) and of the model repositories' own configs
//! (DeepSeek-V3.2's `index_*`, MiniMax-M2, GLM-5). Multimodal configs
//! (Llama 4, Gemma 3, Qwen3.5, Kimi-K2.5) keep the language model under
//! `text_config`; it is read from there.

use super::{Dtype, LayerKind, LinearAttention, ModelArch, SparseAttention};
use serde::Deserialize;

/// The families this reader recognises: a name, the `model_type` values and
/// the `architectures` class names that select it.
pub const FAMILIES: &[(&str, &[&str], &[&str])] = &[
    ("llama", &["llama"], &["LlamaForCausalLM"]),
    ("mistral", &["mistral"], &["MistralForCausalLM"]),
    ("mixtral", &["mixtral"], &["MixtralForCausalLM"]),
    ("qwen2", &["qwen2"], &["Qwen2ForCausalLM"]),
    ("qwen3", &["qwen3"], &["Qwen3ForCausalLM"]),
    ("qwen3_moe", &["qwen3_moe"], &["Qwen3MoeForCausalLM"]),
    ("qwen3_next", &["qwen3_next"], &["Qwen3NextForCausalLM"]),
    (
        "qwen3_5",
        &["qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"],
        &[
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
            "Qwen3_5MoeForCausalLM",
        ],
    ),
    ("deepseek_v3", &["deepseek_v3"], &["DeepseekV3ForCausalLM"]),
    (
        "deepseek_v32",
        &["deepseek_v32"],
        &["DeepseekV32ForCausalLM"],
    ),
    (
        "kimi_k2",
        &["kimi_k2", "kimi_k25"],
        &["KimiK25ForConditionalGeneration"],
    ),
    ("glm4_moe", &["glm4_moe"], &["Glm4MoeForCausalLM"]),
    ("glm5", &["glm_moe_dsa", "glm5"], &["GlmMoeDsaForCausalLM"]),
    ("minimax_m2", &["minimax_m2"], &["MiniMaxM2ForCausalLM"]),
    ("gpt_oss", &["gpt_oss"], &["GptOssForCausalLM"]),
    (
        "llama4",
        &["llama4", "llama4_text"],
        &["Llama4ForConditionalGeneration", "Llama4ForCausalLM"],
    ),
    (
        "gemma3",
        &["gemma3", "gemma3_text"],
        &["Gemma3ForConditionalGeneration", "Gemma3ForCausalLM"],
    ),
];

/// Keys every family needs.
const REQUIRED: &str = "num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, \
                        vocab_size, max_position_embeddings";

/// The keys of a `config.json` the simulator reads; others are ignored.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct HfConfig {
    model_type: Option<String>,
    architectures: Option<Vec<String>>,
    text_config: Option<Box<HfConfig>>,
    num_hidden_layers: Option<u32>,
    hidden_size: Option<u32>,
    num_attention_heads: Option<u32>,
    num_key_value_heads: Option<u32>,
    head_dim: Option<u32>,
    intermediate_size: Option<u32>,
    intermediate_size_mlp: Option<u32>,
    vocab_size: Option<u32>,
    tie_word_embeddings: Option<bool>,
    max_position_embeddings: Option<u32>,
    hidden_act: Option<String>,
    // Mixture of experts.
    num_local_experts: Option<u32>,
    num_experts: Option<u32>,
    n_routed_experts: Option<u32>,
    num_experts_per_tok: Option<u32>,
    n_shared_experts: Option<u32>,
    moe_intermediate_size: Option<u32>,
    shared_expert_intermediate_size: Option<u32>,
    first_k_dense_replace: Option<u32>,
    interleave_moe_layer_step: Option<u32>,
    decoder_sparse_step: Option<u32>,
    mlp_only_layers: Option<Vec<u32>>,
    // Latent and sparse attention.
    kv_lora_rank: Option<u32>,
    q_lora_rank: Option<u32>,
    qk_nope_head_dim: Option<u32>,
    qk_rope_head_dim: Option<u32>,
    v_head_dim: Option<u32>,
    index_n_heads: Option<u32>,
    index_head_dim: Option<u32>,
    index_topk: Option<u32>,
    // Layer kinds.
    layer_types: Option<Vec<String>>,
    sliding_window: Option<u32>,
    use_sliding_window: Option<bool>,
    sliding_window_pattern: Option<u32>,
    attention_chunk_size: Option<u32>,
    no_rope_layers: Option<Vec<u32>>,
    no_rope_layer_interval: Option<u32>,
    full_attention_interval: Option<u32>,
    linear_num_key_heads: Option<u32>,
    linear_num_value_heads: Option<u32>,
    linear_key_head_dim: Option<u32>,
    linear_value_head_dim: Option<u32>,
    linear_conv_kernel_dim: Option<u32>,
    attn_output_gate: Option<bool>,
    quantization_config: Option<serde_json::Value>,
}

/// A model read from a `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct HfModel {
    pub arch: ModelArch,
    /// The family recognised (a name of [`FAMILIES`]).
    pub family: &'static str,
    /// The weight dtype `quantization_config` declares (`None`: unquantized,
    /// the scenario's `weight_dtype` or bf16 applies).
    pub weight_dtype: Option<Dtype>,
}

/// The largest `config.json` read (real ones are a few KiB; Gemma 3's with
/// its vision tower under 10 KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads `path` (at most [`MAX_CONFIG_BYTES`]) and parses it. Errors name the
/// file and the key.
pub fn read_config(path: &std::path::Path) -> Result<HfModel, String> {
    use std::io::Read;
    // A FIFO would block the open below and a device never ends.
    crate::input_file::check_file_type(path, "model config").map_err(|e| e.to_string())?;
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut text = String::new();
    f.take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!(
            "{} is larger than {} KiB; a Hugging Face config.json is a few KiB",
            path.display(),
            MAX_CONFIG_BYTES / 1024
        ));
    }
    parse_config(&text, &path.display().to_string())
}

/// Parses a `config.json` text; `origin` names it in errors.
pub fn parse_config(text: &str, origin: &str) -> Result<HfModel, String> {
    let top: HfConfig =
        serde_json::from_str(text).map_err(|e| format!("{origin}: not a config.json: {e}"))?;
    let family = family_of(&top).ok_or_else(|| unknown_family(&top, origin))?;
    let quant = top.quantization_config.clone();
    let c = match &top.text_config {
        Some(t) => merged(t, &top),
        None => top.clone(),
    };
    let mut arch = arch_of(&c, family).map_err(|(k, m)| format!("{origin}: `{k}` {m}"))?;
    let weight_dtype = match quant.as_ref().filter(|q| !q.is_null()) {
        None => None,
        Some(q) => {
            arch.attention_unquantized = keeps_attention_unquantized(q);
            Some(quant_dtype(q).map_err(|m| format!("{origin}: `quantization_config` {m}"))?)
        }
    };
    arch.validate_moe_and_mla()
        .and_then(|_| arch.validate_layer_kinds())
        .map_err(|(k, m)| format!("{origin}: the model it describes has `{k}` that {m}"))?;
    Ok(HfModel {
        arch,
        family,
        weight_dtype,
    })
}

/// The text config with the keys its parent gives and it omits.
fn merged(text: &HfConfig, top: &HfConfig) -> HfConfig {
    let mut c = text.clone();
    if c.tie_word_embeddings.is_none() {
        c.tie_word_embeddings = top.tie_word_embeddings;
    }
    if c.max_position_embeddings.is_none() {
        c.max_position_embeddings = top.max_position_embeddings;
    }
    c
}

fn family_of(c: &HfConfig) -> Option<&'static str> {
    let types = [
        c.text_config.as_ref().and_then(|t| t.model_type.clone()),
        c.model_type.clone(),
    ];
    for t in types.iter().flatten() {
        if let Some((f, _, _)) = FAMILIES.iter().find(|(_, ts, _)| ts.contains(&t.as_str())) {
            // Kimi-K2.5 and GLM-5 nest a family of their own: the outer type wins.
            if let Some(outer) = &c.model_type {
                if let Some((g, _, _)) = FAMILIES
                    .iter()
                    .find(|(_, ts, _)| ts.contains(&outer.as_str()))
                {
                    return Some(g);
                }
            }
            return Some(f);
        }
    }
    let archs = c.architectures.iter().flatten();
    for a in archs {
        if let Some((f, _, _)) = FAMILIES
            .iter()
            .find(|(_, _, cls)| cls.contains(&a.as_str()))
        {
            return Some(f);
        }
    }
    None
}

fn unknown_family(c: &HfConfig, origin: &str) -> String {
    let names: Vec<&str> = FAMILIES.iter().map(|(f, _, _)| *f).collect();
    let types: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|(_, ts, _)| ts.iter().copied())
        .collect();
    format!(
        "{origin}: unknown model family (model_type {:?}, architectures {:?}); supported \
         families: {} (model_type one of: {}). A config of one of them needs {REQUIRED}; for \
         another model give its architecture inline as [model.architecture]",
        c.model_type.as_deref().unwrap_or("absent"),
        c.architectures.clone().unwrap_or_default(),
        names.join(", "),
        types.join(", ")
    )
}

type Invalid = (&'static str, String);

fn need(v: Option<u32>, key: &'static str, family: &str) -> Result<u32, Invalid> {
    match v {
        Some(0) => Err((key, "must be at least 1, got 0".into())),
        Some(v) => Ok(v),
        None => Err((key, format!("is missing; a {family} config needs it"))),
    }
}

fn arch_of(c: &HfConfig, family: &'static str) -> Result<ModelArch, Invalid> {
    let layers = need(c.num_hidden_layers, "num_hidden_layers", family)?;
    let hidden = need(c.hidden_size, "hidden_size", family)?;
    let heads = need(c.num_attention_heads, "num_attention_heads", family)?;
    let vocab = need(c.vocab_size, "vocab_size", family)?;
    let max_context = need(c.max_position_embeddings, "max_position_embeddings", family)?;
    let mut a = ModelArch {
        layers,
        hidden_size: hidden,
        num_heads: heads,
        num_kv_heads: c.num_key_value_heads.unwrap_or(heads),
        head_dim: c.head_dim.unwrap_or(hidden / heads),
        intermediate_size: 0,
        vocab_size: vocab,
        gated_mlp: true,
        tied_embeddings: c.tie_word_embeddings.unwrap_or(family == "gemma3"),
        max_context,
        ..ModelArch::default()
    };
    // The dense MLP width (Llama 4 names it `intermediate_size_mlp`, its
    // experts' width `intermediate_size`).
    a.intermediate_size = if family == "llama4" {
        need(c.intermediate_size_mlp, "intermediate_size_mlp", family)?
    } else if matches!(family, "qwen3_moe" | "qwen3_next" | "qwen3_5") {
        // Every layer has experts: the dense width is unused where absent.
        need(
            c.intermediate_size.or(c.moe_intermediate_size),
            "intermediate_size",
            family,
        )?
    } else {
        need(c.intermediate_size, "intermediate_size", family)?
    };
    moe_of(c, family, &mut a)?;
    mla_of(c, family, &mut a)?;
    kinds_of(c, family, &mut a)?;
    Ok(a)
}

fn moe_of(c: &HfConfig, family: &'static str, a: &mut ModelArch) -> Result<(), Invalid> {
    let experts = match family {
        "mixtral" | "minimax_m2" | "gpt_oss" | "llama4" => c.num_local_experts,
        "qwen3_moe" | "qwen3_next" | "qwen3_5" => c.num_experts,
        "deepseek_v3" | "deepseek_v32" | "kimi_k2" | "glm4_moe" | "glm5" => c.n_routed_experts,
        _ => None,
    };
    let Some(experts) = experts.filter(|&e| e > 0) else {
        if matches!(family, "mixtral" | "minimax_m2" | "gpt_oss" | "qwen3_moe") {
            let key = if family == "qwen3_moe" {
                "num_experts"
            } else {
                "num_local_experts"
            };
            return Err((key, format!("is missing; a {family} config needs it")));
        }
        return Ok(());
    };
    a.num_experts = experts;
    a.experts_per_token = need(c.num_experts_per_tok, "num_experts_per_tok", family)?;
    match family {
        // Experts as wide as `intermediate_size`.
        "mixtral" | "minimax_m2" | "gpt_oss" => {}
        "llama4" => {
            // One shared expert as wide as the routed ones; MoE every
            // `interleave_moe_layer_step`-th layer.
            a.moe_intermediate_size = Some(need(c.intermediate_size, "intermediate_size", family)?);
            a.num_shared_experts = 1;
            a.moe_layer_step = c.interleave_moe_layer_step.unwrap_or(1).max(1);
        }
        "qwen3_moe" | "qwen3_next" | "qwen3_5" => {
            let width = need(c.moe_intermediate_size, "moe_intermediate_size", family)?;
            a.moe_intermediate_size = Some(width);
            if let Some(shared) = c.shared_expert_intermediate_size.filter(|&s| s > 0) {
                if shared % width != 0 {
                    return Err((
                        "shared_expert_intermediate_size",
                        format!(
                            "must be a multiple of moe_intermediate_size ({width}), got {shared}"
                        ),
                    ));
                }
                a.num_shared_experts = shared / width;
            }
            if c.decoder_sparse_step.unwrap_or(1) != 1
                || c.mlp_only_layers.as_ref().is_some_and(|l| !l.is_empty())
            {
                return Err((
                    "decoder_sparse_step",
                    "other than 1 (or a non-empty mlp_only_layers) is not supported: every layer must have experts".into(),
                ));
            }
        }
        _ => {
            a.moe_intermediate_size = Some(need(
                c.moe_intermediate_size,
                "moe_intermediate_size",
                family,
            )?);
            a.num_shared_experts = c.n_shared_experts.unwrap_or(0);
            a.first_dense_layers = c.first_k_dense_replace.unwrap_or(0);
        }
    }
    Ok(())
}

fn mla_of(c: &HfConfig, family: &'static str, a: &mut ModelArch) -> Result<(), Invalid> {
    if !matches!(family, "deepseek_v3" | "deepseek_v32" | "kimi_k2" | "glm5") {
        return Ok(());
    }
    let rank = need(c.kv_lora_rank, "kv_lora_rank", family)?;
    let nope = need(c.qk_nope_head_dim, "qk_nope_head_dim", family)?;
    let rope = need(c.qk_rope_head_dim, "qk_rope_head_dim", family)?;
    a.kv_lora_rank = Some(rank);
    a.q_lora_rank = c.q_lora_rank;
    a.qk_nope_head_dim = Some(nope);
    a.qk_rope_head_dim = Some(rope);
    a.v_head_dim = Some(need(c.v_head_dim, "v_head_dim", family)?);
    a.head_dim = nope + rope;
    if matches!(family, "deepseek_v32" | "glm5") {
        a.sparse_attention = Some(SparseAttention {
            index_heads: need(c.index_n_heads, "index_n_heads", family)?,
            index_head_dim: need(c.index_head_dim, "index_head_dim", family)?,
            top_k: need(c.index_topk, "index_topk", family)?,
        });
    }
    Ok(())
}

/// The layer pattern: `layer_types` where the config lists it, otherwise
/// each family's own keys.
fn kinds_of(c: &HfConfig, family: &'static str, a: &mut ModelArch) -> Result<(), Invalid> {
    let repeat = |k: LayerKind, n: u32, last: LayerKind| {
        let mut v = vec![k; n.saturating_sub(1) as usize];
        v.push(last);
        v
    };
    let pattern: Vec<LayerKind> = if let Some(types) = &c.layer_types {
        let mut v = Vec::with_capacity(types.len());
        for t in types {
            v.push(match t.as_str() {
                "full_attention" | "attention" => LayerKind::Full,
                "sliding_attention" => LayerKind::Sliding,
                "chunked_attention" => LayerKind::Chunked,
                "linear_attention" => LayerKind::Linear,
                other => {
                    return Err((
                        "layer_types",
                        format!(
                            "has {other:?}; allowed: full_attention, sliding_attention, \
                             chunked_attention, linear_attention"
                        ),
                    ))
                }
            });
        }
        if v.len() != a.layers as usize {
            return Err((
                "layer_types",
                format!(
                    "lists {} layers, but num_hidden_layers is {}",
                    v.len(),
                    a.layers
                ),
            ));
        }
        v
    } else {
        match family {
            "gpt_oss" => vec![LayerKind::Sliding, LayerKind::Full],
            "gemma3" => repeat(
                LayerKind::Sliding,
                need(c.sliding_window_pattern, "sliding_window_pattern", family)?,
                LayerKind::Full,
            ),
            "llama4" => match &c.no_rope_layers {
                // 1: a RoPE layer, chunked; 0: a NoPE layer, global.
                Some(l) if !l.is_empty() => l
                    .iter()
                    .map(|&r| {
                        if r == 0 {
                            LayerKind::Full
                        } else {
                            LayerKind::Chunked
                        }
                    })
                    .collect(),
                _ => repeat(
                    LayerKind::Chunked,
                    c.no_rope_layer_interval.unwrap_or(4),
                    LayerKind::Full,
                ),
            },
            "qwen3_next" | "qwen3_5" => repeat(
                LayerKind::Linear,
                need(c.full_attention_interval, "full_attention_interval", family)?,
                LayerKind::Full,
            ),
            "mistral" if c.sliding_window.is_some() => vec![LayerKind::Sliding],
            "qwen2" | "qwen3"
                if c.use_sliding_window == Some(true) && c.sliding_window.is_some() =>
            {
                vec![LayerKind::Sliding]
            }
            _ => Vec::new(),
        }
    };
    a.layer_pattern = shortest_period(pattern);
    let uses = |k: LayerKind| a.layer_pattern.contains(&k);
    if uses(LayerKind::Sliding) {
        a.sliding_window = Some(need(c.sliding_window, "sliding_window", family)?);
    }
    if uses(LayerKind::Chunked) {
        a.attention_chunk = Some(need(
            c.attention_chunk_size,
            "attention_chunk_size",
            family,
        )?);
    }
    if uses(LayerKind::Linear) {
        a.linear_attention = Some(LinearAttention {
            key_heads: need(c.linear_num_key_heads, "linear_num_key_heads", family)?,
            value_heads: need(c.linear_num_value_heads, "linear_num_value_heads", family)?,
            key_head_dim: need(c.linear_key_head_dim, "linear_key_head_dim", family)?,
            value_head_dim: need(c.linear_value_head_dim, "linear_value_head_dim", family)?,
            conv_kernel: need(c.linear_conv_kernel_dim, "linear_conv_kernel_dim", family)?,
        });
    }
    a.attention_sinks = family == "gpt_oss";
    a.attention_output_gate =
        matches!(family, "qwen3_next" | "qwen3_5") && c.attn_output_gate.unwrap_or(true);
    if a.layer_pattern.iter().all(|&k| k == LayerKind::Full) {
        a.layer_pattern.clear();
    }
    Ok(())
}

/// The shortest prefix that repeats into `v` (`v` itself when none does).
fn shortest_period(v: Vec<LayerKind>) -> Vec<LayerKind> {
    for p in 1..v.len() {
        if v.len() % p == 0 && v.iter().enumerate().all(|(i, k)| *k == v[i % p]) {
            return v[..p].to_vec();
        }
    }
    v
}

/// Whether `quantization_config` leaves the attention layers unquantized
/// (`modules_to_not_convert` or `ignore` naming `self_attn`, as gpt-oss's).
fn keeps_attention_unquantized(q: &serde_json::Value) -> bool {
    ["modules_to_not_convert", "ignore", "exclude_modules"]
        .iter()
        .any(|k| {
            q.get(k).and_then(|v| v.as_array()).is_some_and(|a| {
                a.iter()
                    .any(|m| m.as_str().is_some_and(|s| s.contains("self_attn")))
            })
        })
}

/// The weight dtype a `quantization_config` declares.
///
/// - `fp8` (DeepSeek-V3/R1, Qwen3 FP8): `weight_block_size` [128, 128] →
///   FP8 with a block scale per 128 × 128 (`fp8-block`), else per-tensor or
///   per-channel FP8.
/// - `mxfp4` (gpt-oss): MXFP4, an E8M0 scale per 32.
/// - `modelopt` (NVIDIA TensorRT Model Optimizer): `quant_algo` NVFP4 or FP8.
/// - `compressed-tensors` (llm-compressor): the first config group's
///   `weights` — 8-bit float (block strategy → `fp8-block`), 4-bit float
///   (NVFP4), 4- or 8-bit int.
/// - `awq`, `gptq`: 4-bit (int4) or 8-bit (int8) integers.
fn quant_dtype(q: &serde_json::Value) -> Result<Dtype, String> {
    let s = |k: &str| {
        q.get(k)
            .and_then(|v| v.as_str())
            .map(str::to_ascii_lowercase)
    };
    let method = s("quant_method").unwrap_or_default();
    let algo = s("quant_algo").or_else(|| {
        q.get("quantization")
            .and_then(|v| v.get("quant_algo"))
            .and_then(|v| v.as_str())
            .map(str::to_ascii_lowercase)
    });
    let bits = q
        .get("bits")
        .or_else(|| q.get("w_bit"))
        .and_then(|v| v.as_u64());
    match (method.as_str(), algo.as_deref()) {
        ("fp8", _) => Ok(
            if q.get("weight_block_size").is_some_and(|v| !v.is_null()) {
                Dtype::Fp8Block
            } else {
                Dtype::Fp8
            },
        ),
        ("mxfp4", _) => Ok(Dtype::Mxfp4),
        (_, Some("nvfp4")) | ("nvfp4", _) => Ok(Dtype::Nvfp4),
        ("modelopt", Some("fp8")) => Ok(Dtype::Fp8),
        ("compressed-tensors", _) => {
            let groups = q.get("config_groups").and_then(|g| g.as_object());
            let w = groups
                .and_then(|g| g.values().next())
                .and_then(|g| g.get("weights"))
                .ok_or("(compressed-tensors) has no config_groups.*.weights")?;
            let nb = w.get("num_bits").and_then(|v| v.as_u64());
            let ty = w.get("type").and_then(|v| v.as_str()).unwrap_or("int");
            let strategy = w.get("strategy").and_then(|v| v.as_str()).unwrap_or("");
            match (nb, ty) {
                (Some(8), "float") if strategy == "block" => Ok(Dtype::Fp8Block),
                (Some(8), "float") => Ok(Dtype::Fp8),
                (Some(4), "float") => Ok(Dtype::Nvfp4),
                (Some(4), "int") => Ok(Dtype::Int4),
                (Some(8), "int") => Ok(Dtype::Int8),
                _ => Err(format!(
                    "(compressed-tensors) has weights of {nb:?} bits of type {ty:?}; supported: \
                     8-bit float, 4-bit float, 4- or 8-bit int"
                )),
            }
        }
        ("awq" | "gptq", _) if bits == Some(4) || bits.is_none() => Ok(Dtype::Int4),
        ("awq" | "gptq", _) if bits == Some(8) => Ok(Dtype::Int8),
        _ => Err(format!(
            "has quant_method {method:?}{}; supported: fp8 (per-tensor or weight_block_size), \
             mxfp4, modelopt (NVFP4, FP8), compressed-tensors, awq, gptq",
            algo.map(|a| format!(" / quant_algo {a:?}"))
                .unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_family_is_one_error_naming_the_supported_ones() {
        let e = parse_config(
            r#"{"model_type": "falcon", "architectures": ["FalconForCausalLM"]}"#,
            "c.json",
        )
        .unwrap_err();
        assert!(e.contains("c.json") && e.contains("\"falcon\""), "{e}");
        assert!(
            e.contains("gpt_oss") && e.contains("qwen3_next") && e.contains("deepseek_v32"),
            "{e}"
        );
        assert!(
            e.contains("num_hidden_layers") && e.contains("[model.architecture]"),
            "{e}"
        );
        let e = parse_config("{not json", "c.json").unwrap_err();
        assert!(e.contains("c.json: not a config.json"), "{e}");
        let e =
            parse_config(r#"{"model_type": "llama", "hidden_size": 64}"#, "c.json").unwrap_err();
        assert!(e.contains("`num_hidden_layers` is missing"), "{e}");
    }

    #[test]
    fn quantization_configs_set_the_weight_dtype() {
        let q = |j: &str| quant_dtype(&serde_json::from_str(j).unwrap());
        assert_eq!(
            q(r#"{"quant_method":"fp8","weight_block_size":[128,128]}"#),
            Ok(Dtype::Fp8Block)
        );
        assert_eq!(q(r#"{"quant_method":"fp8"}"#), Ok(Dtype::Fp8));
        assert_eq!(q(r#"{"quant_method":"mxfp4"}"#), Ok(Dtype::Mxfp4));
        assert_eq!(
            q(r#"{"quant_method":"modelopt","quant_algo":"NVFP4"}"#),
            Ok(Dtype::Nvfp4)
        );
        assert_eq!(
            q(
                r#"{"quant_method":"compressed-tensors","config_groups":{"group_0":{"weights":{"num_bits":4,"type":"float","group_size":16}}}}"#
            ),
            Ok(Dtype::Nvfp4)
        );
        assert_eq!(
            q(
                r#"{"quant_method":"compressed-tensors","config_groups":{"group_0":{"weights":{"num_bits":8,"type":"float","strategy":"block"}}}}"#
            ),
            Ok(Dtype::Fp8Block)
        );
        assert_eq!(q(r#"{"quant_method":"awq","bits":4}"#), Ok(Dtype::Int4));
        assert!(q(r#"{"quant_method":"bitsandbytes"}"#)
            .unwrap_err()
            .contains("mxfp4"));
    }

    #[test]
    fn layer_types_fold_to_their_period() {
        use LayerKind::*;
        assert_eq!(
            shortest_period(vec![Sliding, Full, Sliding, Full]),
            vec![Sliding, Full]
        );
        assert_eq!(
            shortest_period(vec![
                Linear, Linear, Linear, Full, Linear, Linear, Linear, Full
            ]),
            vec![Linear, Linear, Linear, Full]
        );
        assert_eq!(
            shortest_period(vec![Full, Sliding, Sliding]),
            vec![Full, Sliding, Sliding]
        );
    }
}
