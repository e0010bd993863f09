//! The architecture of the Llama-style decoder to build: from a catalog
//! preset, a Hugging Face `config.json` (Llama, Mistral, Qwen2), a GGUF
//! file's metadata, or a profile. One struct for all of them, so calibrate
//! and the live engine build the same model from any source.

use crate::error::{input, Result};
use sim::profile::{ProfileModel, WeightsInfo};
use std::path::Path;

/// How rotary embeddings pair the head dimensions: Hugging Face checkpoints
/// rotate the two halves (`rotate_half`); GGUF conversions permute Q and K
/// so that adjacent dimensions pair (ggml's default rope).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeLayout {
    Half,
    Interleaved,
}

impl RopeLayout {
    pub fn name(self) -> &'static str {
        match self {
            RopeLayout::Half => "half",
            RopeLayout::Interleaved => "interleaved",
        }
    }
}

/// A Llama-family decoder's architecture (RMSNorm, rotary attention with
/// grouped-query heads, SwiGLU MLP), after Hugging Face's `LlamaConfig`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub name: String,
    /// Where it came from, for the profile.
    pub source: String,
    pub layers: usize,
    pub hidden_size: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub tied_embeddings: bool,
    pub max_context: usize,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    /// Q/K/V projection biases (Qwen2).
    pub attention_bias: bool,
    pub rope_layout: RopeLayout,
}

/// `architectures` entries of config.json this decoder implements.
const SUPPORTED: [&str; 3] = ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"];

impl ModelConfig {
    /// A catalog preset key, or a path to a `config.json`.
    pub fn resolve(model: &str) -> Result<ModelConfig> {
        if let Some(c) = Self::from_preset(model)? {
            return Ok(c);
        }
        let path = Path::new(model);
        if path.extension().is_some_and(|e| e == "json") || path.exists() {
            return Self::from_config_json(path);
        }
        let llama: Vec<String> = sim::catalog::model_keys()
            .into_iter()
            .filter(|k| {
                sim::catalog::model(k).is_some_and(|(m, _)| !m.is_moe() && m.mla().is_none())
            })
            .map(|k| k.to_string())
            .collect();
        Err(input(format!(
            "--model: {model:?} is neither a Llama-style catalog preset ({}) nor a config.json file",
            llama.join(", ")
        )))
    }

    /// A dense catalog preset (MoE and latent-attention presets are not
    /// Llama-style decoders and are refused).
    pub fn from_preset(key: &str) -> Result<Option<ModelConfig>> {
        let Some((m, source)) = sim::catalog::model(key) else {
            return Ok(None);
        };
        if m.is_moe() || m.mla().is_some() {
            return Err(input(format!(
                "--model {key}: {} is a mixture-of-experts or latent-attention model; calibrate builds Llama-style dense decoders only",
                m.name
            )));
        }
        Ok(Some(ModelConfig {
            name: m.name.clone(),
            source: format!("catalog preset {key} ({source})"),
            layers: m.layers as usize,
            hidden_size: m.hidden_size as usize,
            num_heads: m.num_heads as usize,
            num_kv_heads: m.num_kv_heads as usize,
            head_dim: m.head_dim as usize,
            intermediate_size: m.intermediate_size as usize,
            vocab_size: m.vocab_size as usize,
            tied_embeddings: m.tied_embeddings,
            max_context: m.max_context as usize,
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-5,
            attention_bias: key.to_ascii_lowercase().contains("qwen"),
            rope_layout: RopeLayout::Half,
        }))
    }

    /// A Hugging Face `config.json` of a Llama, Mistral or Qwen2 model.
    pub fn from_config_json(path: &Path) -> Result<ModelConfig> {
        let text = sim::input_file::read_config(path, "model config")?;
        Self::from_config_str(&text, &path.display().to_string())
    }

    pub fn from_config_str(text: &str, origin: &str) -> Result<ModelConfig> {
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| input(format!("{origin}: not valid JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| input(format!("{origin}: expected a JSON object")))?;
        let arch = match obj.get("architectures").and_then(|a| a.get(0)) {
            Some(a) => {
                let a = a.as_str().unwrap_or_default();
                if !SUPPORTED.contains(&a) {
                    return Err(input(format!(
                        "{origin}: architectures: {a:?} is not supported; allowed: {}",
                        SUPPORTED.join(", ")
                    )));
                }
                a.to_string()
            }
            None => "LlamaForCausalLM".into(),
        };
        let uint = |k: &str| -> Result<Option<usize>> {
            match obj.get(k) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(x) => x
                    .as_u64()
                    .filter(|&n| n > 0)
                    .map(|n| Some(n as usize))
                    .ok_or_else(|| {
                        input(format!(
                            "{origin}: {k}: must be a positive integer, got {x}"
                        ))
                    }),
            }
        };
        let need = |k: &str| -> Result<usize> {
            uint(k)?.ok_or_else(|| {
                input(format!(
                    "{origin}: missing `{k}` (a Llama-style config needs hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and vocab_size)"
                ))
            })
        };
        let float = |k: &str, default: f64| -> Result<f64> {
            match obj.get(k) {
                None | Some(serde_json::Value::Null) => Ok(default),
                Some(x) => x
                    .as_f64()
                    .filter(|f| f.is_finite() && *f > 0.0)
                    .ok_or_else(|| {
                        input(format!("{origin}: {k}: must be a positive number, got {x}"))
                    }),
            }
        };
        let hidden_size = need("hidden_size")?;
        let num_heads = need("num_attention_heads")?;
        let c = ModelConfig {
            name: obj
                .get("_name_or_path")
                .and_then(|n| n.as_str())
                .filter(|n| !n.is_empty())
                .map(|n| n.rsplit('/').next().unwrap_or(n).to_string())
                .unwrap_or_else(|| {
                    Path::new(origin)
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "custom".into())
                }),
            source: format!("{origin} ({arch})"),
            layers: need("num_hidden_layers")?,
            hidden_size,
            num_heads,
            num_kv_heads: uint("num_key_value_heads")?.unwrap_or(num_heads),
            head_dim: uint("head_dim")?.unwrap_or(hidden_size / num_heads),
            intermediate_size: need("intermediate_size")?,
            vocab_size: need("vocab_size")?,
            tied_embeddings: obj
                .get("tie_word_embeddings")
                .and_then(|b| b.as_bool())
                .unwrap_or(false),
            max_context: uint("max_position_embeddings")?.unwrap_or(2048),
            rope_theta: float("rope_theta", 10_000.0)?,
            rms_norm_eps: float("rms_norm_eps", 1e-6)?,
            attention_bias: obj
                .get("attention_bias")
                .and_then(|b| b.as_bool())
                .unwrap_or(arch == "Qwen2ForCausalLM"),
            rope_layout: RopeLayout::Half,
        };
        c.validate().map_err(|m| input(format!("{origin}: {m}")))?;
        Ok(c)
    }

    /// Checks the dimensions agree with each other.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.num_heads % self.num_kv_heads != 0 {
            return Err(format!(
                "num_key_value_heads ({}) must divide num_attention_heads ({})",
                self.num_kv_heads, self.num_heads
            ));
        }
        if self.head_dim % 2 != 0 {
            return Err(format!(
                "head_dim ({}) must be even for rotary embeddings",
                self.head_dim
            ));
        }
        if self.layers == 0 || self.hidden_size == 0 || self.vocab_size == 0 {
            return Err("layers, hidden_size and vocab_size must be positive".into());
        }
        Ok(())
    }

    /// Query heads per KV head.
    pub fn group(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }

    /// The profile's description of this model.
    pub fn to_profile(&self, dtype: &str, weights: WeightsInfo) -> ProfileModel {
        ProfileModel {
            name: self.name.clone(),
            source: self.source.clone(),
            layers: self.layers as u32,
            hidden_size: self.hidden_size as u32,
            num_heads: self.num_heads as u32,
            num_kv_heads: self.num_kv_heads as u32,
            head_dim: self.head_dim as u32,
            intermediate_size: self.intermediate_size as u32,
            vocab_size: self.vocab_size as u32,
            tied_embeddings: self.tied_embeddings,
            max_context: self.max_context as u32,
            rope_theta: self.rope_theta,
            rms_norm_eps: self.rms_norm_eps,
            attention_bias: self.attention_bias,
            rope_layout: self.rope_layout.name().into(),
            dtype: dtype.into(),
            weights,
        }
    }

    /// The model a profile measured.
    pub fn from_profile(p: &ProfileModel) -> ModelConfig {
        ModelConfig {
            name: p.name.clone(),
            source: p.source.clone(),
            layers: p.layers as usize,
            hidden_size: p.hidden_size as usize,
            num_heads: p.num_heads as usize,
            num_kv_heads: p.num_kv_heads as usize,
            head_dim: p.head_dim as usize,
            intermediate_size: p.intermediate_size as usize,
            vocab_size: p.vocab_size as usize,
            tied_embeddings: p.tied_embeddings,
            max_context: p.max_context as usize,
            rope_theta: p.rope_theta,
            rms_norm_eps: p.rms_norm_eps,
            attention_bias: p.attention_bias,
            rope_layout: if p.rope_layout == "interleaved" {
                RopeLayout::Interleaved
            } else {
                RopeLayout::Half
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOL: &str = r#"{
      "architectures": ["LlamaForCausalLM"], "_name_or_path": "HuggingFaceTB/SmolLM2-135M",
      "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
      "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
      "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 100000,
      "tie_word_embeddings": true, "torch_dtype": "bfloat16", "bos_token_id": 0
    }"#;

    #[test]
    fn reads_a_hugging_face_config_and_matches_the_catalog_preset() {
        let c = ModelConfig::from_config_str(SMOL, "config.json").unwrap();
        assert_eq!(c.name, "SmolLM2-135M");
        assert_eq!((c.layers, c.hidden_size, c.head_dim), (30, 576, 64));
        assert_eq!(c.rope_theta, 100000.0);
        let p = ModelConfig::resolve("smollm2-135m").unwrap();
        assert_eq!(
            (
                p.layers,
                p.hidden_size,
                p.num_heads,
                p.num_kv_heads,
                p.head_dim
            ),
            (
                c.layers,
                c.hidden_size,
                c.num_heads,
                c.num_kv_heads,
                c.head_dim
            )
        );
        assert_eq!((p.intermediate_size, p.vocab_size), (1536, 49152));
    }

    #[test]
    fn qwen2_configs_carry_attention_biases() {
        let q = SMOL.replace("LlamaForCausalLM", "Qwen2ForCausalLM");
        assert!(
            ModelConfig::from_config_str(&q, "q.json")
                .unwrap()
                .attention_bias
        );
    }

    #[test]
    fn bad_configs_name_the_key() {
        let e = ModelConfig::from_config_str(&SMOL.replace("\"hidden_size\": 576,", ""), "c.json")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("c.json: missing `hidden_size`"), "{e}");
        let e = ModelConfig::from_config_str(
            &SMOL.replace("\"num_key_value_heads\": 3", "\"num_key_value_heads\": 4"),
            "c.json",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("must divide num_attention_heads"), "{e}");
        let e = ModelConfig::from_config_str(
            &SMOL.replace("LlamaForCausalLM", "GPT2LMHeadModel"),
            "c.json",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("not supported; allowed: LlamaForCausalLM"),
            "{e}"
        );
        let e = ModelConfig::from_config_str("[1]", "c.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a JSON object"), "{e}");
        let e = ModelConfig::resolve("no-such-model")
            .unwrap_err()
            .to_string();
        assert!(e.contains("neither a Llama-style catalog preset"), "{e}");
        let e = ModelConfig::resolve("mixtral-8x7b")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mixture-of-experts"), "{e}");
    }
}
