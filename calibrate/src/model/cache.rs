//! A sequence's KV cache on the live model: preallocated per-layer key and
//! value tensors filled in place, and forks that share them until a write
//! (copy-on-write, for parallel sampling).

use super::Model;
use crate::error::{input, Result};
use candle_core::Tensor;

/// A sequence's KV cache: per layer a preallocated `[kv_heads, capacity,
/// head_dim]` key and value tensor, filled in place.
pub struct SeqCache {
    pub(super) k: Vec<Tensor>,
    pub(super) v: Vec<Tensor>,
    pub(super) len: usize,
    pub(super) capacity: usize,
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
    pub(super) fn make_writable(&mut self) -> Result<()> {
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
