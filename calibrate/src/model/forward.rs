//! The packed forward pass (every sequence's new tokens through the dense
//! layers at once, attention per sequence on its own cache), the logits, and
//! greedy decoding; with the rotary tables and causal masks it uses.

use super::{Model, SeqCache, Step};
use crate::config::{ModelConfig, RopeLayout};
use crate::error::{input, Result};
use candle_core::{DType, Device, Tensor, D};
use candle_nn::Module;

impl Model {
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
                let o = self.attention.attend(&q, &k, &v, mask.as_ref())?;
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
        greedy_tokens(&self.forward(batch)?)
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

/// Greedy sampling of `[steps, vocab]` logits: each row's argmax, read
/// back to the host (which waits for the device).
pub fn greedy_tokens(logits: &Tensor) -> Result<Vec<u32>> {
    Ok(logits.argmax(D::Minus1)?.to_vec1::<u32>()?)
}

/// Rotary tables as Hugging Face computes them: angle p·θ^(−2i/d).
pub(super) fn rotary_tables(
    cfg: &ModelConfig,
    dtype: DType,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
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
