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

use crate::config::{ModelConfig, RopeLayout};
use crate::error::{input, Result};
use crate::quant::{LinearFormat, Proj};
use candle_core::{DType, Device, Tensor, D};
use candle_nn::{Linear, Module};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

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
}

/// A sequence's KV cache: per layer a preallocated `[kv_heads, capacity,
/// head_dim]` key and value tensor, filled in place.
pub struct SeqCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    len: usize,
    capacity: usize,
    /// Shared by the caches of one fork family while they share `k` and `v`
    /// (candle tensors share storage on clone): a cache whose token has
    /// other holders copies its tensors before its first write.
    owner: std::sync::Arc<()>,
}

impl SeqCache {
    /// A cache for up to `capacity` tokens of `model`. Its memory is written
    /// once here (filled with ones, not lazily mapped zeros) so that first-
    /// touch page faults never land in a timed step; engines allocate
    /// caches before they start the clock and reuse them.
    pub fn new(model: &Model, capacity: usize) -> Result<SeqCache> {
        let c = &model.cfg;
        let shape = (c.num_kv_heads, capacity.max(1), c.head_dim);
        let mut k = Vec::with_capacity(c.layers);
        let mut v = Vec::with_capacity(c.layers);
        for _ in 0..c.layers {
            k.push(Tensor::ones(shape, model.dtype, &model.device)?);
            v.push(Tensor::ones(shape, model.dtype, &model.device)?);
        }
        Ok(SeqCache {
            k,
            v,
            len: 0,
            capacity: capacity.max(1),
            owner: std::sync::Arc::new(()),
        })
    }

    /// A second sequence continuing from this one (parallel sampling, vLLM's
    /// `n`): it shares this cache's tensors — no copy — until either of them
    /// writes, and the writer copies first (copy-on-write). The live
    /// engine's caches are contiguous per sequence, so the copy is the whole
    /// cache, where a paged engine copies only the last, partial block.
    pub fn fork(&self) -> SeqCache {
        SeqCache {
            k: self.k.clone(),
            v: self.v.clone(),
            len: self.len,
            capacity: self.capacity,
            owner: self.owner.clone(),
        }
    }

    /// Whether this cache still shares its tensors with `other`.
    pub fn shares_with(&self, other: &SeqCache) -> bool {
        std::sync::Arc::ptr_eq(&self.owner, &other.owner)
    }

    /// Copies the tensors if another cache shares them.
    fn make_writable(&mut self) -> Result<()> {
        if std::sync::Arc::strong_count(&self.owner) > 1 {
            for t in self.k.iter_mut().chain(self.v.iter_mut()) {
                *t = t.copy()?;
            }
            self.owner = std::sync::Arc::new(());
        }
        Ok(())
    }

    /// The cached keys and values of `layer`, `[kv_heads, len, head_dim]`.
    pub fn layer_kv(&self, layer: usize) -> Result<(Tensor, Tensor)> {
        Ok((
            self.k[layer].narrow(1, 0, self.len)?,
            self.v[layer].narrow(1, 0, self.len)?,
        ))
    }

    /// Tokens cached.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Forgets everything after the first `len` tokens (a recompute
    /// preemption, or a timed repetition being undone).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Marks `len` tokens as cached without computing them. Timing does not
    /// depend on the cached values, so calibration uses this to set up long
    /// contexts without running their prefills.
    pub fn pretend_filled(&mut self, len: usize) -> Result<()> {
        if len > self.capacity {
            return Err(input(format!(
                "cache of {} tokens cannot hold {len}",
                self.capacity
            )));
        }
        self.len = len;
        Ok(())
    }

    /// Bytes of all its tensors.
    pub fn bytes(&self) -> usize {
        self.k
            .iter()
            .chain(&self.v)
            .map(|t| t.elem_count() * t.dtype().size_in_bytes())
            .sum()
    }
}

/// One sequence's part of a packed forward pass: `tokens` are appended at
/// positions `cache.len()..`.
pub struct Step<'a> {
    pub cache: &'a mut SeqCache,
    pub tokens: &'a [u32],
}

/// Weights by Hugging Face tensor name (`model.layers.0.self_attn.q_proj.weight`, …).
pub type NamedTensors = HashMap<String, Tensor>;

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
        let (cos, sin) = rotary_tables(cfg, dtype, device)?;
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

    /// Runs one packed forward pass: every step's tokens are appended to its
    /// cache, and the logits of each step's last token are returned as
    /// `[steps, vocab]` f32.
    pub fn forward(&self, batch: &mut [Step<'_>]) -> Result<Tensor> {
        let (x, last_rows) = self.hidden(batch)?;
        let rows = Tensor::from_vec(last_rows, batch.len(), &self.device)?;
        self.logits(&x.index_select(&rows, 0)?)
    }

    /// Runs one sequence's `tokens` on its cache and returns the logits of
    /// every one of them, `[tokens, vocab]` f32: row i predicts the token
    /// after `tokens[i]` (likelihood of a text, speculative verification).
    pub fn forward_all(&self, cache: &mut SeqCache, tokens: &[u32]) -> Result<Tensor> {
        let (x, _) = self.hidden(&mut [Step { cache, tokens }])?;
        self.logits(&x)
    }

    /// The final norm and the LM head over hidden rows, as f32.
    fn logits(&self, x: &Tensor) -> Result<Tensor> {
        let x = candle_nn::ops::rms_norm(x, &self.norm, self.cfg.rms_norm_eps as f32)?;
        Ok(self.lm_head.forward(&x)?.to_dtype(DType::F32)?)
    }

    /// The decoder layers over a packed batch: the hidden state of every
    /// token `[N, hidden]` and the row of each step's last token. Appends the
    /// tokens to the caches.
    fn hidden(&self, batch: &mut [Step<'_>]) -> Result<(Tensor, Vec<u32>)> {
        let c = &self.cfg;
        let (nh, nkv, d, g) = (c.num_heads, c.num_kv_heads, c.head_dim, c.group());
        let mut ids = Vec::new();
        let mut pos = Vec::new();
        let mut last_rows = Vec::with_capacity(batch.len());
        for s in batch.iter_mut() {
            let (start, n) = (s.cache.len, s.tokens.len());
            if n == 0 {
                return Err(input("a batch entry with no tokens"));
            }
            if start + n > s.cache.capacity {
                return Err(input(format!(
                    "sequence needs {} cached tokens, its cache holds {}",
                    start + n,
                    s.cache.capacity
                )));
            }
            if start + n > c.max_context {
                return Err(input(format!(
                    "context of {} tokens exceeds the model's {}",
                    start + n,
                    c.max_context
                )));
            }
            if let Some(&bad) = s.tokens.iter().find(|&&t| t as usize >= c.vocab_size) {
                return Err(input(format!(
                    "token id {bad} is outside the vocabulary of {}",
                    c.vocab_size
                )));
            }
            s.cache.make_writable()?;
            ids.extend_from_slice(s.tokens);
            pos.extend((start..start + n).map(|p| p as u32));
            last_rows.push((ids.len() - 1) as u32);
        }
        let n_tok = ids.len();
        let dev = &self.device;
        let ids = Tensor::from_vec(ids, n_tok, dev)?;
        let pos = Tensor::from_vec(pos, n_tok, dev)?;
        let cos = self.cos.index_select(&pos, 0)?.reshape((n_tok, 1, d / 2))?;
        let sin = self.sin.index_select(&pos, 0)?.reshape((n_tok, 1, d / 2))?;
        // Causal masks of multi-token steps, shared by every layer.
        let masks: Vec<Option<Tensor>> = batch
            .iter()
            .map(|s| causal_mask(s.tokens.len(), s.cache.len, g, self.dtype, dev))
            .collect::<Result<_>>()?;

        let mut x = self.embed.index_select(&ids, 0)?;
        for (li, layer) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, c.rms_norm_eps as f32)?;
            let qkv = layer
                .qkv
                .forward(&h)?
                .reshape((n_tok, nh + 2 * nkv, 1, d))?;
            let qk = qkv.narrow(1, 0, nh + nkv)?.contiguous()?;
            let qk = match c.rope_layout {
                RopeLayout::Half => candle_nn::rotary_emb::rope(&qk, &cos, &sin)?,
                RopeLayout::Interleaved => candle_nn::rotary_emb::rope_i(&qk, &cos, &sin)?,
            };
            let mut outs = Vec::with_capacity(batch.len());
            let mut off = 0;
            for (s, mask) in batch.iter_mut().zip(&masks) {
                let n = s.tokens.len();
                let start = s.cache.len;
                let q = qk.narrow(0, off, n)?.narrow(1, 0, nh)?;
                let k_new = qk.narrow(0, off, n)?.narrow(1, nh, nkv)?;
                let v_new = qkv.narrow(0, off, n)?.narrow(1, nh + nkv, nkv)?;
                off += n;
                // [n, heads, 1, d] → [kv_heads, group·n, d]: the queries of a
                // KV head's group attend to its keys in one matrix product.
                let q = if n == 1 {
                    q.reshape((nkv, g, d))?
                } else {
                    q.reshape((n, nkv, g, d))?
                        .permute((1, 2, 0, 3))?
                        .contiguous()?
                        .reshape((nkv, g * n, d))?
                };
                let k_new = k_new.reshape((n, nkv, d))?.transpose(0, 1)?.contiguous()?;
                let v_new = v_new.reshape((n, nkv, d))?.transpose(0, 1)?.contiguous()?;
                s.cache.k[li].slice_set(&k_new, 1, start)?;
                s.cache.v[li].slice_set(&v_new, 1, start)?;
                let len = start + n;
                let k = s.cache.k[li].narrow(1, 0, len)?;
                let v = s.cache.v[li].narrow(1, 0, len)?;
                let mut scores = q.matmul(&k.t()?)?;
                if let Some(m) = mask {
                    scores = scores.broadcast_add(m)?;
                }
                let probs = candle_nn::ops::softmax_last_dim(&scores)?;
                let o = probs.matmul(&v)?;
                let o = if n == 1 {
                    o.reshape((1, nh * d))?
                } else {
                    o.reshape((nh, n, d))?
                        .transpose(0, 1)?
                        .contiguous()?
                        .reshape((n, nh * d))?
                };
                outs.push(o);
            }
            let attn = Tensor::cat(&outs, 0)?;
            x = (x + layer.o.forward(&attn)?)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.mlp_norm, c.rms_norm_eps as f32)?;
            let gu = layer.gate_up.forward(&h)?;
            let inter = c.intermediate_size;
            let act =
                (candle_nn::ops::silu(&gu.narrow(1, 0, inter)?)? * gu.narrow(1, inter, inter)?)?;
            x = (x + layer.down.forward(&act)?)?;
        }
        for s in batch.iter_mut() {
            s.cache.len += s.tokens.len();
        }
        Ok((x, last_rows))
    }

    /// One packed forward pass and greedy sampling: the argmax token of each
    /// step. Reading the tokens back to the host waits for the device.
    pub fn greedy(&self, batch: &mut [Step<'_>]) -> Result<Vec<u32>> {
        let logits = self.forward(batch)?;
        Ok(logits.argmax(D::Minus1)?.to_vec1::<u32>()?)
    }

    /// Greedy decoding of one sequence alone: the prompt, then `new_tokens`
    /// tokens one step at a time.
    pub fn generate_alone(&self, prompt: &[u32], new_tokens: usize) -> Result<Vec<u32>> {
        let mut cache = SeqCache::new(self, prompt.len() + new_tokens)?;
        let mut out = Vec::with_capacity(new_tokens);
        let mut next = self.greedy(&mut [Step {
            cache: &mut cache,
            tokens: prompt,
        }])?[0];
        out.push(next);
        while out.len() < new_tokens {
            next = self.greedy(&mut [Step {
                cache: &mut cache,
                tokens: &[next],
            }])?[0];
            out.push(next);
        }
        Ok(out)
    }
}

/// Rotary tables as Hugging Face computes them: angle p·θ^(−2i/d).
fn rotary_tables(cfg: &ModelConfig, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
    let d = cfg.head_dim;
    let inv: Vec<f32> = (0..d)
        .step_by(2)
        .map(|i| 1f32 / (cfg.rope_theta as f32).powf(i as f32 / d as f32))
        .collect();
    let inv = Tensor::from_vec(inv, (1, d / 2), device)?;
    let positions = Tensor::arange(0u32, cfg.max_context as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((cfg.max_context, 1))?;
    let angles = positions.matmul(&inv)?;
    Ok((
        angles.cos()?.to_dtype(dtype)?,
        angles.sin()?.to_dtype(dtype)?,
    ))
}

/// The additive causal mask of `n` new tokens on `cached` ones, for the
/// `[group·n, cached + n]` score matrix of one KV head (None for one token:
/// it sees everything).
fn causal_mask(
    n: usize,
    cached: usize,
    group: usize,
    dtype: DType,
    device: &Device,
) -> Result<Option<Tensor>> {
    if n <= 1 {
        return Ok(None);
    }
    let len = cached + n;
    let mut m = vec![0f32; group * n * len];
    for gi in 0..group {
        for i in 0..n {
            let row = &mut m[(gi * n + i) * len..(gi * n + i + 1) * len];
            for v in &mut row[cached + i + 1..] {
                *v = f32::NEG_INFINITY;
            }
        }
    }
    Ok(Some(
        Tensor::from_vec(m, (group * n, len), device)?.to_dtype(dtype)?,
    ))
}

/// Random weights with Hugging Face names, drawn from a seeded generator
/// (candle's CPU device cannot be seeded): uniform with the variance of
/// PyTorch's default linear init, unit norms. Values do not change timing;
/// this scale keeps activations finite through any depth.
pub fn random_weights(cfg: &ModelConfig, seed: u64, device: &Device) -> Result<NamedTensors> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut t = NamedTensors::new();
    let (h, d) = (cfg.hidden_size, cfg.head_dim);
    let mut mat = |name: String, rows: usize, cols: usize, t: &mut NamedTensors| -> Result<()> {
        let a = (3.0 / cols as f32).sqrt();
        let v: Vec<f32> = (0..rows * cols).map(|_| rng.random_range(-a..a)).collect();
        t.insert(name, Tensor::from_vec(v, (rows, cols), device)?);
        Ok(())
    };
    mat(
        "model.embed_tokens.weight".into(),
        cfg.vocab_size,
        h,
        &mut t,
    )?;
    let ones = |n: usize| Tensor::ones(n, DType::F32, device);
    for i in 0..cfg.layers {
        let p = format!("model.layers.{i}");
        mat(
            format!("{p}.self_attn.q_proj.weight"),
            cfg.num_heads * d,
            h,
            &mut t,
        )?;
        mat(
            format!("{p}.self_attn.k_proj.weight"),
            cfg.num_kv_heads * d,
            h,
            &mut t,
        )?;
        mat(
            format!("{p}.self_attn.v_proj.weight"),
            cfg.num_kv_heads * d,
            h,
            &mut t,
        )?;
        mat(
            format!("{p}.self_attn.o_proj.weight"),
            h,
            cfg.num_heads * d,
            &mut t,
        )?;
        if cfg.attention_bias {
            for (k, n) in [
                ("q", cfg.num_heads * d),
                ("k", cfg.num_kv_heads * d),
                ("v", cfg.num_kv_heads * d),
            ] {
                t.insert(
                    format!("{p}.self_attn.{k}_proj.bias"),
                    Tensor::zeros(n, DType::F32, device)?,
                );
            }
        }
        mat(
            format!("{p}.mlp.gate_proj.weight"),
            cfg.intermediate_size,
            h,
            &mut t,
        )?;
        mat(
            format!("{p}.mlp.up_proj.weight"),
            cfg.intermediate_size,
            h,
            &mut t,
        )?;
        mat(
            format!("{p}.mlp.down_proj.weight"),
            h,
            cfg.intermediate_size,
            &mut t,
        )?;
        t.insert(format!("{p}.input_layernorm.weight"), ones(h)?);
        t.insert(format!("{p}.post_attention_layernorm.weight"), ones(h)?);
    }
    t.insert("model.norm.weight".into(), ones(h)?);
    if !cfg.tied_embeddings {
        mat("lm_head.weight".into(), cfg.vocab_size, h, &mut t)?;
    }
    Ok(t)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A two-layer model small enough for unit tests.
    pub fn tiny_config() -> ModelConfig {
        ModelConfig {
            name: "tiny".into(),
            source: "test".into(),
            layers: 2,
            hidden_size: 64,
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 16,
            intermediate_size: 96,
            vocab_size: 211,
            tied_embeddings: false,
            max_context: 256,
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-5,
            attention_bias: false,
            rope_layout: RopeLayout::Half,
        }
    }

    pub fn tiny_model(seed: u64) -> Model {
        let cfg = tiny_config();
        let w = random_weights(&cfg, seed, &Device::Cpu).unwrap();
        Model::from_tensors(&cfg, w, DType::F32, &Device::Cpu, "random").unwrap()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    /// The logits of our packed decoder equal candle-transformers' Llama on
    /// the same weights, for a prompt and for decode steps after it.
    #[test]
    fn logits_match_candle_transformers_llama() {
        use candle_transformers::models::llama as ct;
        let cfg = tiny_config();
        let dev = Device::Cpu;
        let w = random_weights(&cfg, 7, &dev).unwrap();
        let ours = Model::from_tensors(&cfg, w.clone(), DType::F32, &dev, "random").unwrap();
        let ct_cfg = ct::Config {
            hidden_size: cfg.hidden_size,
            intermediate_size: cfg.intermediate_size,
            vocab_size: cfg.vocab_size,
            num_hidden_layers: cfg.layers,
            num_attention_heads: cfg.num_heads,
            num_key_value_heads: cfg.num_kv_heads,
            use_flash_attn: false,
            rms_norm_eps: cfg.rms_norm_eps,
            rope_theta: cfg.rope_theta as f32,
            bos_token_id: None,
            eos_token_id: None,
            rope_scaling: None,
            max_position_embeddings: cfg.max_context,
            tie_word_embeddings: false,
        };
        let vb = candle_nn::VarBuilder::from_tensors(w, DType::F32, &dev);
        let theirs = ct::Llama::load(vb, &ct_cfg).unwrap();
        let mut their_cache = ct::Cache::new(true, DType::F32, &ct_cfg, &dev).unwrap();
        let prompt: Vec<u32> = vec![5, 17, 42, 99, 3, 150, 7];
        let their = theirs
            .forward(
                &Tensor::new(prompt.as_slice(), &dev)
                    .unwrap()
                    .unsqueeze(0)
                    .unwrap(),
                0,
                &mut their_cache,
            )
            .unwrap();
        let mut cache = SeqCache::new(&ours, 32).unwrap();
        let mine = ours
            .forward(&mut [Step {
                cache: &mut cache,
                tokens: &prompt,
            }])
            .unwrap();
        assert!(
            max_diff(&mine, &their) < 1e-4,
            "prefill {}",
            max_diff(&mine, &their)
        );
        let mut next = mine.argmax(D::Minus1).unwrap().to_vec1::<u32>().unwrap()[0];
        for step in 0..5 {
            let pos = prompt.len() + step;
            let their = theirs
                .forward(
                    &Tensor::new(&[next], &dev).unwrap().unsqueeze(0).unwrap(),
                    pos,
                    &mut their_cache,
                )
                .unwrap();
            let mine = ours
                .forward(&mut [Step {
                    cache: &mut cache,
                    tokens: &[next],
                }])
                .unwrap();
            assert!(
                max_diff(&mine, &their) < 1e-4,
                "decode {step}: {}",
                max_diff(&mine, &their)
            );
            next = mine.argmax(D::Minus1).unwrap().to_vec1::<u32>().unwrap()[0];
        }
    }

    /// A packed batch (a chunk on top of a cache, a fresh prompt and two
    /// decodes) gives each sequence the logits it gets alone.
    #[test]
    fn packed_batch_equals_each_sequence_alone() {
        let m = tiny_model(3);
        let a: Vec<u32> = (0..20).map(|i| (i * 7 % 211) as u32).collect();
        let b: Vec<u32> = (0..9).map(|i| (i * 13 % 211) as u32).collect();
        let alone = |toks: &[u32], split: usize| {
            let mut c = SeqCache::new(&m, 64).unwrap();
            m.forward(&mut [Step {
                cache: &mut c,
                tokens: &toks[..split],
            }])
            .unwrap();
            m.forward(&mut [Step {
                cache: &mut c,
                tokens: &toks[split..],
            }])
            .unwrap()
        };
        // Sequence a: 12 cached, then a chunk of 8. Sequence b: whole prompt.
        // Sequences c, d: decode one token on 5 and 10 cached tokens.
        let want_a = alone(&a, 12);
        let want_c = alone(&a[..6], 5);
        let want_d = alone(&b, 8);
        let mut ca = SeqCache::new(&m, 64).unwrap();
        let mut cc = SeqCache::new(&m, 64).unwrap();
        let mut cd = SeqCache::new(&m, 64).unwrap();
        m.forward(&mut [
            Step {
                cache: &mut ca,
                tokens: &a[..12],
            },
            Step {
                cache: &mut cc,
                tokens: &a[..5],
            },
            Step {
                cache: &mut cd,
                tokens: &b[..8],
            },
        ])
        .unwrap();
        let mut cb = SeqCache::new(&m, 64).unwrap();
        let got = m
            .forward(&mut [
                Step {
                    cache: &mut cc,
                    tokens: &a[5..6],
                },
                Step {
                    cache: &mut ca,
                    tokens: &a[12..],
                },
                Step {
                    cache: &mut cb,
                    tokens: &b,
                },
                Step {
                    cache: &mut cd,
                    tokens: &b[8..],
                },
            ])
            .unwrap();
        let mut cb2 = SeqCache::new(&m, 64).unwrap();
        let want_b = m
            .forward(&mut [Step {
                cache: &mut cb2,
                tokens: &b,
            }])
            .unwrap();
        for (i, want) in [want_c, want_a, want_b, want_d].iter().enumerate() {
            let row = got.narrow(0, i, 1).unwrap();
            assert!(
                max_diff(&row, want) < 1e-4,
                "row {i}: {}",
                max_diff(&row, want)
            );
        }
        assert_eq!((ca.len(), cb.len(), cc.len(), cd.len()), (20, 9, 6, 9));
    }

    #[test]
    fn mismatched_weights_are_named() {
        let cfg = tiny_config();
        let mut w = random_weights(&cfg, 1, &Device::Cpu).unwrap();
        w.insert(
            "model.layers.1.mlp.up_proj.weight".into(),
            Tensor::zeros((95, 64), DType::F32, &Device::Cpu).unwrap(),
        );
        let e = Model::from_tensors(&cfg, w.clone(), DType::F32, &Device::Cpu, "w.safetensors")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("w.safetensors: weights do not match the config"),
            "{e}"
        );
        assert!(
            e.contains("model.layers.1.mlp.up_proj.weight` has shape [95, 64]"),
            "{e}"
        );
        w.remove("model.norm.weight");
        w.remove("model.layers.1.mlp.up_proj.weight");
        let e = Model::from_tensors(&cfg, w, DType::F32, &Device::Cpu, "w.safetensors")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("no tensor `model.layers.1.mlp.up_proj.weight`"),
            "{e}"
        );
    }

    #[test]
    fn caches_refuse_overflow_and_report_their_bytes() {
        let m = tiny_model(1);
        let mut c = SeqCache::new(&m, 4).unwrap();
        let e = m
            .forward(&mut [Step {
                cache: &mut c,
                tokens: &[1, 2, 3, 4, 5],
            }])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("its cache holds 4"), "{e}");
        assert_eq!(c.bytes(), 4 * m.kv_bytes_per_token());
        let e = m
            .forward(&mut [Step {
                cache: &mut c,
                tokens: &[500],
            }])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("outside the vocabulary"), "{e}");
    }

    /// Parallel sampling on the live engine: a fork shares the prompt's
    /// cache tensors, both samples get identical logits at the fork point,
    /// and their caches diverge only after it, each writer copying first.
    #[test]
    fn forked_caches_share_until_a_write_and_diverge_only_after_it() {
        let m = tiny_model(2);
        let prompt: Vec<u32> = (0..11).map(|i| (i * 19 % 211) as u32).collect();
        let mut a = SeqCache::new(&m, 32).unwrap();
        m.forward(&mut [Step {
            cache: &mut a,
            tokens: &prompt,
        }])
        .unwrap();
        let mut b = a.fork();
        assert!(a.shares_with(&b));
        let (ka, _) = a.layer_kv(1).unwrap();
        let (kb, _) = b.layer_kv(1).unwrap();
        assert_eq!(max_diff(&ka, &kb), 0.0);
        // The same token on both: identical logits at the fork point.
        let la = m
            .forward(&mut [Step {
                cache: &mut a,
                tokens: &[7],
            }])
            .unwrap();
        assert!(!a.shares_with(&b), "the first writer copied");
        let lb = m
            .forward(&mut [Step {
                cache: &mut b,
                tokens: &[7],
            }])
            .unwrap();
        assert_eq!(max_diff(&la, &lb), 0.0);
        // Different tokens: the caches agree on the first 12 positions only.
        m.forward(&mut [Step {
            cache: &mut a,
            tokens: &[1],
        }])
        .unwrap();
        m.forward(&mut [Step {
            cache: &mut b,
            tokens: &[2],
        }])
        .unwrap();
        for layer in 0..2 {
            let (ka, va) = a.layer_kv(layer).unwrap();
            let (kb, vb) = b.layer_kv(layer).unwrap();
            let head = |t: &Tensor, s: usize, n: usize| t.narrow(1, s, n).unwrap();
            assert_eq!(max_diff(&head(&ka, 0, 12), &head(&kb, 0, 12)), 0.0);
            assert_eq!(max_diff(&head(&va, 0, 12), &head(&vb, 0, 12)), 0.0);
            assert!(max_diff(&head(&ka, 12, 1), &head(&kb, 12, 1)) > 0.0);
        }
        // The parent's own later writes never reached the fork: a fresh
        // cache fed the fork's tokens holds the same values.
        let mut c = SeqCache::new(&m, 32).unwrap();
        let mut toks = prompt.clone();
        toks.extend([7, 2]);
        m.forward(&mut [Step {
            cache: &mut c,
            tokens: &toks,
        }])
        .unwrap();
        let (kc, _) = c.layer_kv(1).unwrap();
        let (kb, _) = b.layer_kv(1).unwrap();
        assert!(max_diff(&kc, &kb) < 1e-5);
    }
}
