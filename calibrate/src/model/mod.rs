//! The Llama-style decoder that calibration times and the live engine serves
//! with, on candle-nn: RMSNorm, rotary attention with grouped-query heads and
//! a SwiGLU MLP, as Hugging Face's `LlamaForCausalLM` (a test checks its
//! logits against candle-transformers' Llama on the same weights).
//!
//! Unlike candle-transformers' Llama, it runs a *packed* batch of sequences
//! of different lengths in one forward pass, each with its own preallocated
//! KV cache filled in place, as continuous-batching engines do (vLLM's
//! varlen attention): the dense layers (QKV, output projection, MLP, LM head)
//! run once over all N tokens of the iteration, and attention runs per
//! sequence over its own cache. That is exactly the cost structure the
//! profile's terms describe (dense work in N, attention per sequence in its
//! context), so calibration and the live engine measure the same kind of
//! step.
//!
//! The module is split by idea: `attention` (naive or tiled with an online
//! softmax), `cache` (a sequence's KV cache, forks with
//! copy-on-write), `forward` (the packed forward pass, rotary tables, causal
//! masks, greedy decoding), `weights` (random weights by Hugging Face name);
//! this file holds the model itself and its construction from named tensors.

mod attention;
mod cache;
mod forward;
mod weights;

pub use attention::Attention;
pub use cache::{SeqCache, Step};
pub use forward::greedy_tokens;
pub use weights::{random_weights, NamedTensors};

use crate::config::ModelConfig;
use crate::error::{input, Result};
use crate::quant::{LinearFormat, Proj};
use candle_core::{DType, Device, Tensor};
use candle_nn::Linear;

/// One decoder layer, with Q/K/V and gate/up projections fused into one
/// matrix each (fewer, larger matrix products).
struct Layer {
    attn_norm: Tensor,
    /// Rows: H·d query (pre-scaled by 1/√d), KV·d key, KV·d value.
    qkv: Proj,
    o: Proj,
    mlp_norm: Tensor,
    /// Rows: I gate, I up.
    gate_up: Proj,
    down: Proj,
}

/// A loaded model on a device.
pub struct Model {
    pub cfg: ModelConfig,
    pub dtype: DType,
    device: Device,
    embed: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Linear,
    /// Rotary tables, [max_context, head_dim / 2].
    cos: Tensor,
    sin: Tensor,
    weight_bytes: usize,
    /// The format of the blocks' linear layers.
    pub linear_format: LinearFormat,
    /// How attention over each sequence's cache is computed.
    pub attention: Attention,
}

impl Model {
    /// Builds the model from named tensors (random, safetensors or GGUF),
    /// checking every shape against the config; `origin` names the weights
    /// in errors.
    pub fn from_tensors(
        cfg: &ModelConfig,
        mut t: NamedTensors,
        dtype: DType,
        device: &Device,
        origin: &str,
    ) -> Result<Model> {
        cfg.validate()
            .map_err(|m| input(format!("{}: {m}", cfg.source)))?;
        let (h, d, nh, nkv) = (
            cfg.hidden_size,
            cfg.head_dim,
            cfg.num_heads,
            cfg.num_kv_heads,
        );
        let mut weight_bytes = 0usize;
        let mut take = |name: &str, shape: &[usize]| -> Result<Tensor> {
            let x = t.remove(name).ok_or_else(|| {
                input(format!(
                    "{origin}: weights do not match the config: no tensor `{name}`"
                ))
            })?;
            if x.dims() != shape {
                return Err(input(format!(
                    "{origin}: weights do not match the config ({}): `{name}` has shape {:?}, the config needs {shape:?}",
                    cfg.source,
                    x.dims()
                )));
            }
            let x = x.to_dtype(dtype)?.to_device(device)?;
            weight_bytes += x.elem_count() * dtype.size_in_bytes();
            Ok(x)
        };
        let embed = take("model.embed_tokens.weight", &[cfg.vocab_size, h])?;
        let scale = 1.0 / (d as f64).sqrt();
        let mut layers = Vec::with_capacity(cfg.layers);
        for i in 0..cfg.layers {
            let p = format!("model.layers.{i}");
            let q = (take(&format!("{p}.self_attn.q_proj.weight"), &[nh * d, h])? * scale)?;
            let k = take(&format!("{p}.self_attn.k_proj.weight"), &[nkv * d, h])?;
            let v = take(&format!("{p}.self_attn.v_proj.weight"), &[nkv * d, h])?;
            let bias = if cfg.attention_bias {
                let qb = (take(&format!("{p}.self_attn.q_proj.bias"), &[nh * d])? * scale)?;
                let kb = take(&format!("{p}.self_attn.k_proj.bias"), &[nkv * d])?;
                let vb = take(&format!("{p}.self_attn.v_proj.bias"), &[nkv * d])?;
                Some(Tensor::cat(&[qb, kb, vb], 0)?)
            } else {
                None
            };
            let qkv = Proj::dense(Tensor::cat(&[q, k, v], 0)?, bias);
            let o = Proj::dense(
                take(&format!("{p}.self_attn.o_proj.weight"), &[h, nh * d])?,
                None,
            );
            let inter = cfg.intermediate_size;
            let gate = take(&format!("{p}.mlp.gate_proj.weight"), &[inter, h])?;
            let up = take(&format!("{p}.mlp.up_proj.weight"), &[inter, h])?;
            let gate_up = Proj::dense(Tensor::cat(&[gate, up], 0)?, None);
            let down = Proj::dense(
                take(&format!("{p}.mlp.down_proj.weight"), &[h, inter])?,
                None,
            );
            layers.push(Layer {
                attn_norm: take(&format!("{p}.input_layernorm.weight"), &[h])?,
                qkv,
                o,
                mlp_norm: take(&format!("{p}.post_attention_layernorm.weight"), &[h])?,
                gate_up,
                down,
            });
        }
        let norm = take("model.norm.weight", &[h])?;
        let lm_head = if cfg.tied_embeddings {
            Linear::new(embed.clone(), None)
        } else {
            Linear::new(take("lm_head.weight", &[cfg.vocab_size, h])?, None)
        };
        let (cos, sin) = forward::rotary_tables(cfg, dtype, device)?;
        Ok(Model {
            cfg: cfg.clone(),
            dtype,
            device: device.clone(),
            embed,
            layers,
            norm,
            lm_head,
            cos,
            sin,
            weight_bytes,
            linear_format: LinearFormat::Dense,
            attention: Attention::Naive,
        })
    }

    /// A copy of this model (sharing its tensors) whose blocks' linear
    /// layers are converted to `fmt`; embeddings, norms and the LM head stay
    /// as they are (see `quant`).
    pub fn with_linear_format(&self, fmt: LinearFormat) -> Result<Model> {
        if fmt != LinearFormat::Dense && self.dtype != DType::F32 {
            return Err(input(format!(
                "{} weights are converted from an f32 model; this one runs in {:?}",
                fmt.name(),
                self.dtype
            )));
        }
        let mut weight_bytes = self.weight_bytes;
        let mut layers = Vec::with_capacity(self.layers.len());
        for (i, l) in self.layers.iter().enumerate() {
            let mut conv = |p: &Proj, what: &str| -> Result<Proj> {
                let q = p.convert(fmt, &format!("layer {i} {what}"))?;
                weight_bytes = weight_bytes + q.bytes() - p.bytes();
                Ok(q)
            };
            layers.push(Layer {
                attn_norm: l.attn_norm.clone(),
                qkv: conv(&l.qkv, "qkv")?,
                o: conv(&l.o, "o_proj")?,
                mlp_norm: l.mlp_norm.clone(),
                gate_up: conv(&l.gate_up, "gate_up")?,
                down: conv(&l.down, "down_proj")?,
            });
        }
        Ok(Model {
            cfg: self.cfg.clone(),
            dtype: self.dtype,
            device: self.device.clone(),
            embed: self.embed.clone(),
            layers,
            norm: self.norm.clone(),
            lm_head: self.lm_head.clone(),
            cos: self.cos.clone(),
            sin: self.sin.clone(),
            weight_bytes,
            linear_format: fmt,
            attention: self.attention,
        })
    }

    /// Bytes of the weights as loaded on the device.
    pub fn weight_bytes(&self) -> usize {
        self.weight_bytes
    }

    /// KV-cache bytes one token takes over all layers.
    pub fn kv_bytes_per_token(&self) -> usize {
        2 * self.cfg.layers * self.cfg.num_kv_heads * self.cfg.head_dim * self.dtype.size_in_bytes()
    }

    pub fn device(&self) -> &Device {
        &self.device
    }
}

#[cfg(test)]
pub(crate) mod tests;
