//! Device memory of one replica: weights, activation reserve, runtime overhead,
//! and what is left for the paged KV cache, following vLLM's memory profiling
//! (`gpu_memory_utilization` × device memory − weights − peak activations −
//! non-torch memory = KV cache).

use crate::catalog::{Dtype, HardwareSpec, ModelArch, GIB};
use crate::scenario::EngineCfg;
use serde::Serialize;

/// Memory outside PyTorch's allocator that vLLM subtracts before sizing the KV
/// cache: CUDA context, cuBLAS workspaces, NCCL buffers and captured CUDA
/// graphs. vLLM's startup log reports 0.2–1 GiB for 8B–70B models on H100;
/// we take the middle.
pub const NON_TORCH_OVERHEAD_BYTES: f64 = 0.5 * GIB;

/// Bytes per element of activations (bf16 on every GPU we model).
pub const ACTIVATION_BYTES: f64 = 2.0;

/// Sampling keeps fp32 logits for every sequence in the batch, and the sampler
/// holds about two copies (logits and probabilities).
const LOGIT_COPIES: f64 = 2.0;

/// The memory budget of one replica, per GPU (all GPUs of a tensor-parallel
/// replica hold equal shards).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MemoryPlan {
    pub tensor_parallel: u32,
    /// Device memory per GPU, bytes.
    pub device_bytes: f64,
    /// The engine's share (× gpu_memory_utilization), bytes per GPU.
    pub usable_bytes: f64,
    /// Weight shard per GPU, bytes.
    pub weight_bytes: f64,
    /// Peak activation memory of a `max_batched_tokens` forward pass plus
    /// sampler logits, per GPU.
    pub activation_bytes: f64,
    pub overhead_bytes: f64,
    /// What remains for the KV cache, per GPU (may be negative: does not fit).
    pub kv_cache_bytes: f64,
    /// KV bytes one token takes on one GPU (KV heads split over the TP group,
    /// replicated when there are fewer KV heads than GPUs).
    pub kv_bytes_per_token: f64,
    pub block_size: u32,
    /// KV blocks per replica.
    pub kv_blocks: u64,
    /// Tokens the KV cache of one replica holds.
    pub kv_tokens: u64,
}

impl MemoryPlan {
    pub fn new(
        model: &ModelArch,
        hw: &HardwareSpec,
        weight_dtype: Dtype,
        kv_dtype: Dtype,
        tp: u32,
        engine: &EngineCfg,
    ) -> MemoryPlan {
        let tpf = tp as f64;
        let device_bytes = hw.memory_bytes();
        let usable_bytes = device_bytes * engine.gpu_memory_utilization;
        // Norm weights stay in bf16 even in quantized checkpoints; they are tiny.
        let weight_bytes = model.total_params() * weight_dtype.bytes() / tpf;
        let activation_bytes = activation_peak(model, tp, engine);
        let overhead_bytes = NON_TORCH_OVERHEAD_BYTES;
        let kv_cache_bytes = usable_bytes - weight_bytes - activation_bytes - overhead_bytes;
        let kv_heads_per_gpu = (model.num_kv_heads as f64 / tpf).ceil();
        let kv_bytes_per_token =
            2.0 * model.layers as f64 * kv_heads_per_gpu * model.head_dim as f64 * kv_dtype.bytes();
        let block_bytes = kv_bytes_per_token * engine.block_size as f64;
        let kv_blocks = if kv_cache_bytes > 0.0 {
            (kv_cache_bytes / block_bytes).floor() as u64
        } else {
            0
        };
        MemoryPlan {
            tensor_parallel: tp,
            device_bytes,
            usable_bytes,
            weight_bytes,
            activation_bytes,
            overhead_bytes,
            kv_cache_bytes,
            kv_bytes_per_token,
            block_size: engine.block_size,
            kv_blocks,
            kv_tokens: kv_blocks * engine.block_size as u64,
        }
    }

    /// Adds a second model resident on the same GPUs (a speculative-decoding
    /// draft model): its weights shrink the KV budget, and its own KV cache
    /// grows with the same blocks as the target's (vLLM allocates both caches
    /// with one block table), so every block costs both models' bytes.
    pub fn add_resident_model(&mut self, weight_bytes: f64, kv_bytes_per_token: f64) {
        self.weight_bytes += weight_bytes;
        self.kv_cache_bytes -= weight_bytes;
        self.kv_bytes_per_token += kv_bytes_per_token;
        let block_bytes = self.kv_bytes_per_token * self.block_size as f64;
        self.kv_blocks = if self.kv_cache_bytes > 0.0 {
            (self.kv_cache_bytes / block_bytes).floor() as u64
        } else {
            0
        };
        self.kv_tokens = self.kv_blocks * self.block_size as u64;
    }

    /// Bytes of one KV block on one GPU.
    pub fn block_bytes(&self) -> f64 {
        self.kv_bytes_per_token * self.block_size as f64
    }

    /// Bytes per GPU the replica needs besides the KV cache.
    pub fn fixed_bytes(&self) -> f64 {
        self.weight_bytes + self.activation_bytes + self.overhead_bytes
    }

    /// Checks that weights fit and that the KV cache holds at least one
    /// sequence of `max_model_len` tokens (vLLM refuses to start otherwise).
    /// Errors carry a key path and a suggestion.
    pub fn check_fits(
        &self,
        model: &ModelArch,
        hw: &HardwareSpec,
        max_model_len: u32,
        max_model_len_given: bool,
    ) -> Result<(), (String, String)> {
        let gib = |b: f64| b / GIB;
        let suggest_tp = suggest_tensor_parallel(model, hw, self);
        if self.kv_blocks == 0 {
            let tp_hint = match suggest_tp {
                Some(t) => format!("; try fleet.tensor_parallel = {t}"),
                None => "; no tensor-parallel degree up to 64 fits: use a larger GPU or a smaller weight dtype".into(),
            };
            return Err((
                "model".into(),
                format!(
                    "{} does not fit on {} with tensor_parallel = {}: it needs {:.1} GiB per GPU \
                     (weights {:.1} + activations {:.1} + runtime {:.1}) plus KV cache, but only \
                     {:.1} GiB is usable (gpu_memory_utilization){tp_hint}",
                    model.name,
                    hw.name,
                    self.tensor_parallel,
                    gib(self.fixed_bytes()),
                    gib(self.weight_bytes),
                    gib(self.activation_bytes),
                    gib(self.overhead_bytes),
                    gib(self.usable_bytes),
                ),
            ));
        }
        if self.kv_tokens < max_model_len as u64 {
            let key = if max_model_len_given {
                "engine.max_model_len"
            } else {
                "model"
            };
            return Err((
                key.into(),
                format!(
                    "KV cache of {} tokens ({:.1} GiB per GPU) cannot hold one sequence of \
                     max_model_len = {max_model_len}; set engine.max_model_len ≤ {}{}",
                    self.kv_tokens,
                    gib(self.kv_cache_bytes),
                    self.kv_tokens,
                    match suggest_tp {
                        Some(t) if t > self.tensor_parallel =>
                            format!(" or try fleet.tensor_parallel = {t}"),
                        _ => String::new(),
                    }
                ),
            ));
        }
        Ok(())
    }
}

/// Peak activation memory of a profiling forward pass of `max_batched_tokens`
/// tokens, per GPU: the residual stream and attention projections (≈ 4 × hidden)
/// and the MLP's gate, up and activated tensors (≈ 3 × intermediate / TP) live
/// at once; plus fp32 logits for `max_num_seqs` sampled rows.
fn activation_peak(model: &ModelArch, tp: u32, engine: &EngineCfg) -> f64 {
    let per_token = (4.0 * model.hidden_size as f64
        + 3.0 * model.intermediate_size as f64 / tp as f64)
        * ACTIVATION_BYTES;
    let logits =
        engine.max_num_seqs as f64 * model.vocab_size as f64 / tp as f64 * 4.0 * LOGIT_COPIES;
    engine.max_batched_tokens as f64 * per_token + logits
}

/// Smallest power-of-two tensor-parallel degree (≤ 64, dividing the heads) at
/// which the weights and fixed memory leave room for a KV cache of at least
/// a tenth of the device.
fn suggest_tensor_parallel(model: &ModelArch, hw: &HardwareSpec, plan: &MemoryPlan) -> Option<u32> {
    let util = plan.usable_bytes / plan.device_bytes;
    (0..=6).map(|p| 1u32 << p).find(|&tp| {
        if model.num_heads % tp != 0 {
            return false;
        }
        let weights = plan.weight_bytes * plan.tensor_parallel as f64 / tp as f64;
        let act = plan.activation_bytes; // upper bound: shrinks with TP
        hw.memory_bytes() * util - weights - act - plan.overhead_bytes > 0.1 * hw.memory_bytes()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    fn plan(model: &str, hw: &str, tp: u32) -> MemoryPlan {
        let (m, _) = catalog::model(model).unwrap();
        let h = catalog::hardware(hw).unwrap();
        MemoryPlan::new(&m, &h, Dtype::Bf16, Dtype::Bf16, tp, &EngineCfg::default())
    }

    #[test]
    fn llama_8b_on_h100_leaves_about_55_gib_of_kv() {
        let p = plan("llama-3.1-8b", "h100-sxm", 1);
        // 8.03e9 params × 2 bytes = 16.06e9 bytes = 14.96 GiB (vLLM logs ~14.99 GiB).
        assert!(
            (p.weight_bytes / GIB - 14.96).abs() < 0.05,
            "{}",
            p.weight_bytes / GIB
        );
        // 72 GiB usable − 15 − ~1.3 − 0.5 ≈ 55 GiB → ≈ 450k tokens at 128 KiB/token.
        let kv_gib = p.kv_cache_bytes / GIB;
        assert!((54.0..57.0).contains(&kv_gib), "{kv_gib}");
        assert!((440_000..470_000).contains(&p.kv_tokens), "{}", p.kv_tokens);
        assert_eq!(p.kv_tokens % 16, 0);
    }

    #[test]
    fn tensor_parallel_splits_weights_and_kv_heads() {
        let p1 = plan("llama-3.1-70b", "h100-sxm", 1);
        assert_eq!(p1.kv_blocks, 0, "70B bf16 does not fit one H100");
        let p4 = plan("llama-3.1-70b", "h100-sxm", 4);
        assert!(p4.kv_blocks > 0);
        assert_eq!(p4.kv_bytes_per_token, 2.0 * 80.0 * 2.0 * 128.0 * 2.0);
        // 16 GPUs > 8 KV heads: heads are replicated, one per GPU.
        let p16 = plan("llama-3.1-70b", "h100-sxm", 16);
        assert_eq!(p16.kv_bytes_per_token, 2.0 * 80.0 * 1.0 * 128.0 * 2.0);
        let (m, _) = catalog::model("llama-3.1-70b").unwrap();
        let h = catalog::hardware("h100-sxm").unwrap();
        assert_eq!(suggest_tensor_parallel(&m, &h, &p1), Some(4));
    }
}
