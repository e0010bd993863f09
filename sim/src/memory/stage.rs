//! What one GPU of a pipeline stage holds before the KV cache: its share of
//! the weights (quantized linear layers, unquantized embeddings and norms,
//! experts split over expert parallelism), its layer kinds' KV or state per
//! token, and the activation peak of the largest batch; and, when a model does
//! not fit, the smallest layout that would.

use super::*;

/// Weight bytes on one GPU of `stage`. Linear layers are stored in
/// `weight_dtype`; embeddings, LM head, norms and routers in its unquantized
/// counterpart ([`Dtype::unquantized_part`]). Non-expert parameters are split
/// over the attention group (the whole stage without EP); routed experts over
/// the whole stage (E / EP experts per group, each split over the group).
/// Routers are replicated. Norm weights (< 0.01 %) are counted as split.
pub(super) fn stage_weight_bytes(
    model: &ModelArch,
    st: &Stage,
    par: &Parallelism,
    dtype: Dtype,
) -> f64 {
    let atp = par.attention_tp();
    let (a, t) = (atp as f64, par.tensor as f64);
    let mut quantized = st.dense_layers as f64 * model.dense_layer_params_per_gpu(atp);
    let mut unquantized = model.norm_params() * st.layers as f64 / model.layers as f64 / a;
    if st.moe_layers > 0 {
        let moe_layer = model.attention_params_per_gpu(atp)
            + model.num_shared_experts as f64 * model.expert_params() / a
            + par.expert_slots(model) as f64 * model.expert_params() / t;
        quantized += st.moe_layers as f64 * moe_layer;
        unquantized += st.moe_layers as f64 * model.router_params();
    }
    let table = model.vocab_size as f64 * model.hidden_size as f64 / a;
    if st.embedding {
        unquantized += table;
    }
    if st.lm_head && !(model.tied_embeddings && st.embedding) {
        unquantized += table;
    }
    if model.attention_unquantized {
        let attention = st.layers as f64 * model.attention_params_per_gpu(atp);
        quantized -= attention;
        unquantized += attention;
    }
    quantized * dtype.weight_bytes() + unquantized * dtype.unquantized_part().bytes()
}

/// Each layer kind's cache among the `n` layers from `first` on one GPU of
/// `tp`: full layers' bytes per token (in the blocks), windowed layers' window
/// of blocks and linear layers' state per sequence (set aside). Without any
/// full layer the windowed layers go in the blocks (see the module comment).
pub fn stage_kinds(
    model: &ModelArch,
    first: u32,
    n: u32,
    tp: u32,
    kv_dtype: Dtype,
    block_size: u32,
) -> Vec<LayerKindMemory> {
    let c = model.kinds_in(first, n);
    let per_layer = model.kv_bytes_per_token_layer(tp, kv_dtype);
    let windows_in_blocks = c[0] == 0;
    let sinks = if model.attention_sinks { ", sinks" } else { "" };
    let full_name = match (model.mla(), &model.sparse_attention) {
        (Some(_), Some(sp)) => format!(
            "full attention (MLA latent + DSA indexer key of {} B, top-{} sparse)",
            sp.key_bytes(),
            sp.top_k
        ),
        (Some(_), None) => "full attention (MLA latent)".to_string(),
        (None, _) => format!("full attention ({} KV heads{sinks})", model.num_kv_heads),
    };
    LayerKind::ALL
        .iter()
        .zip(c)
        .filter(|(_, layers)| *layers > 0)
        .map(|(&kind, layers)| {
            let l = layers as f64;
            let (name, per_token, per_seq) = match kind {
                LayerKind::Full => (full_name.clone(), l * per_layer, 0.0),
                LayerKind::Sliding | LayerKind::Chunked => {
                    let w = model.window(kind).unwrap_or(0);
                    let name = format!("{} attention (window {w}{sinks})", kind.name());
                    if windows_in_blocks {
                        (name, l * per_layer, 0.0)
                    } else {
                        let held =
                            crate::catalog::kv_tokens_held(u64::MAX / 2, Some(w), block_size);
                        (name, 0.0, l * held as f64 * per_layer)
                    }
                }
                LayerKind::Linear => {
                    let state = model.linear_attention.map_or(0.0, |a| a.state_bytes(tp));
                    (
                        "linear attention (Gated DeltaNet state)".to_string(),
                        0.0,
                        l * state,
                    )
                }
            };
            LayerKindMemory {
                kind: name,
                layers,
                kv_bytes_per_token: per_token,
                bytes_per_sequence: per_seq,
            }
        })
        .collect()
}

/// Peak activation memory of a profiling forward pass of `max_batched_tokens`
/// tokens on one GPU of `stage` (each EP group runs its share of them): the
/// residual stream and attention projections (≈ 4 × hidden) and the MLP's
/// gate, up and activated tensors (≈ 3 × intermediate / TP) live at once. An
/// MoE layer holds those for each of a token's `experts_per_token` routed
/// copies plus the copies themselves, as vLLM's fused-MoE intermediate caches
/// do. The last stage adds fp32 logits for `max_num_seqs` sampled rows.
pub(super) fn activation_peak(
    model: &ModelArch,
    st: &Stage,
    par: &Parallelism,
    engine: &EngineCfg,
) -> f64 {
    let tp = par.attention_tp() as f64;
    let dp = par.attention_dp() as f64;
    let h = model.hidden_size as f64;
    let dense_mlp = if st.dense_layers > 0 {
        3.0 * model.intermediate_size as f64 / tp
    } else {
        0.0
    };
    let moe_mlp = if st.moe_layers > 0 {
        let width = model
            .moe_intermediate_size
            .unwrap_or(model.intermediate_size) as f64;
        model.experts_per_token as f64 * (3.0 * width / tp + h)
    } else {
        0.0
    };
    let per_token = (4.0 * h + dense_mlp.max(moe_mlp)) * ACTIVATION_BYTES;
    let logits = if st.lm_head {
        engine.max_num_seqs as f64 / dp * model.vocab_size as f64 / tp * 4.0 * LOGIT_COPIES
    } else {
        0.0
    };
    engine.max_batched_tokens as f64 / dp * per_token + logits
}

/// Smallest layout (fewest GPUs, then fewest stages) of power-of-two tensor
/// parallelism within a node (dividing the heads) and power-of-two pipeline
/// stages, up to 64 GPUs, whose weights and fixed memory leave room for a KV
/// cache of at least a tenth of the device.
pub(super) fn suggest_layout(
    model: &ModelArch,
    hw: &HardwareSpec,
    dtype: Dtype,
    plan: &MemoryPlan,
) -> Option<(u32, u32)> {
    let util = plan.usable_bytes / plan.device_bytes;
    let weights = total_weight_bytes(model, dtype);
    let act = plan.activation_bytes; // upper bound: shrinks with TP
    let tps = (0..=6)
        .map(|p| 1u32 << p)
        .filter(|&tp| tp <= hw.gpus_per_node && model.num_heads % tp == 0);
    let mut layouts: Vec<(u32, u32)> = tps
        .flat_map(|tp| (0..=6).map(move |p| (tp, 1u32 << p)))
        .filter(|&(tp, pp)| tp * pp <= 64 && pp <= model.layers)
        .filter(|&(tp, pp)| pp == 1 || hw.network_gbps.is_some() || tp * pp <= hw.gpus_per_node)
        .collect();
    layouts.sort_by_key(|&(tp, pp)| (tp * pp, pp));
    layouts.into_iter().find(|&(tp, pp)| {
        let per_gpu = weights / (tp * pp) as f64;
        hw.memory_bytes() * util - per_gpu - act - plan.overhead_bytes > 0.1 * hw.memory_bytes()
    })
}

/// Weight bytes of the whole model in `dtype` (quantized linear layers,
/// unquantized embeddings, norms and routers).
pub fn total_weight_bytes(model: &ModelArch, dtype: Dtype) -> f64 {
    let unquantized = model.embedding_params()
        + model.norm_params()
        + model.moe_layers() as f64 * model.router_params();
    let attention = if model.attention_unquantized {
        model.layers as f64 * model.attention_params()
    } else {
        0.0
    };
    let unquantized = unquantized + attention;
    let quantized = model.total_params() - unquantized;
    quantized * dtype.weight_bytes() + unquantized * dtype.unquantized_part().bytes()
}
