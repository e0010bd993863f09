use super::*;
use crate::catalog;

fn plan(model: &str, hw: &str, tp: u32) -> MemoryPlan {
    let (m, _) = catalog::model(model).unwrap();
    let h = catalog::hardware(hw).unwrap();
    MemoryPlan::new(
        &m,
        &h,
        Dtype::Bf16,
        Dtype::Bf16,
        &Parallelism::tensor(tp),
        &EngineCfg::default(),
    )
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
    assert_eq!(suggest_layout(&m, &h, Dtype::Bf16, &p1), Some((4, 1)));
}

fn plan_par(model: &str, hw: &str, par: Parallelism, w: Dtype) -> MemoryPlan {
    let (m, _) = catalog::model(model).unwrap();
    let h = catalog::hardware(hw).unwrap();
    par.validate(&m, &h).unwrap();
    MemoryPlan::new(&m, &h, w, Dtype::Bf16, &par, &EngineCfg::default())
}

#[test]
fn pipeline_stages_split_weights_and_kv_and_the_tightest_binds() {
    let par = Parallelism {
        tensor: 8,
        pipeline: 2,
        expert: 1,
        ..Parallelism::default()
    };
    let p = plan_par("llama-3.1-405b", "h100-sxm", par, Dtype::Bf16);
    assert_eq!(plan("llama-3.1-405b", "h100-sxm", 8).kv_blocks, 0);
    let layers: Vec<u32> = p.stages.iter().map(|s| s.layers).collect();
    assert_eq!(layers, vec![63, 63]);
    // 405.85e9 × 2 B over 16 GPUs = 47.25 GiB per GPU.
    assert!(
        (p.weight_bytes / GIB - 47.25).abs() < 0.05,
        "{}",
        p.weight_bytes / GIB
    );
    // The last stage holds the sampler's logits and binds the cache.
    assert_eq!(p.stage, 1);
    assert!(p.stages[1].activation_bytes > p.stages[0].activation_bytes);
    // 63 layers × 1 KV head × 128 × 2 (K, V) × 2 B = 32 256 B/token/GPU.
    assert_eq!(p.kv_bytes_per_token, 32_256.0);
    assert_eq!(p.kv_blocks, p.stages[1].kv_blocks);
    assert!((700_000..800_000).contains(&p.kv_tokens), "{}", p.kv_tokens);
    // Uneven: DeepSeek-V3's 61 layers over 2 stages, 3 dense ones on the first.
    let d = plan_par(
        "deepseek-v3",
        "h100-sxm",
        Parallelism {
            tensor: 8,
            pipeline: 2,
            expert: 1,
            ..Parallelism::default()
        },
        Dtype::Fp8,
    );
    assert_eq!(d.stages[0].layers, 31);
    assert_eq!(d.stages[1].kv_bytes_per_token, 30.0 * 576.0 * 2.0);
}

#[test]
fn expert_parallel_groups_keep_their_own_latent_caches() {
    let par = |ep| Parallelism {
        tensor: 8,
        pipeline: 1,
        expert: ep,
        ..Parallelism::default()
    };
    let tp = plan_par("deepseek-v3", "h200", par(1), Dtype::Fp8);
    let ep = plan_par("deepseek-v3", "h200", par(8), Dtype::Fp8);
    // 671B in fp8 (embeddings, LM head, norms, routers in bf16) over 8
    // GPUs is ~79 GiB each; EP replicates the 15B non-expert parameters
    // on every GPU (attention TP 1) and adds ~15 GiB.
    assert!(
        (78.5..80.0).contains(&(tp.weight_bytes / GIB)),
        "{}",
        tp.weight_bytes / GIB
    );
    assert!(ep.weight_bytes - tp.weight_bytes > 13.0 * GIB);
    // The MLA latent is whole on every GPU: 61 × 576 × 2 B either way...
    assert_eq!(tp.kv_bytes_per_token, 70_272.0);
    assert_eq!(ep.kv_bytes_per_token, 70_272.0);
    // ... but with EP each of the 8 groups caches only its own sequences,
    // so the replica holds 8 × one GPU's blocks (5.6× TP-8's despite the
    // smaller per-GPU cache).
    assert_eq!(ep.kv_blocks, 8 * ep.kv_blocks_per_group);
    assert_eq!(tp.kv_blocks, tp.kv_blocks_per_group);
    let gain = ep.kv_tokens as f64 / tp.kv_tokens as f64;
    assert!((5.0..6.0).contains(&gain), "{gain}");
}

#[test]
fn quantized_checkpoints_keep_embeddings_in_bf16() {
    let (m, _) = catalog::model("llama-3.1-8b").unwrap();
    // 2 × 128256 × 4096 embedding + LM head params stay at 2 B.
    let table = 2.0 * 128256.0 * 4096.0;
    let want =
        (m.total_params() - table - m.norm_params()) * 0.51953125 + (table + m.norm_params()) * 2.0;
    assert!((total_weight_bytes(&m, Dtype::Int4) - want).abs() < 1.0);
    let p = MemoryPlan::new(
        &m,
        &catalog::hardware("l4").unwrap(),
        Dtype::Int4,
        Dtype::Fp8,
        &Parallelism::tensor(1),
        &EngineCfg::default(),
    );
    assert!((p.weight_bytes - want).abs() < 1.0);
    // 8B in int4 with fp8 KV fits a 24 GiB L4 with room for ~250k tokens.
    assert!((200_000..300_000).contains(&p.kv_tokens), "{}", p.kv_tokens);
}

#[test]
fn suggestions_reach_for_pipeline_stages_beyond_a_node() {
    let (m, _) = catalog::model("llama-3.1-405b").unwrap();
    let h = catalog::hardware("h100-sxm").unwrap();
    let p = plan("llama-3.1-405b", "h100-sxm", 8);
    assert_eq!(suggest_layout(&m, &h, Dtype::Bf16, &p), Some((8, 2)));
    assert_eq!(suggest_layout(&m, &h, Dtype::Fp8, &p), Some((8, 1)));
    let e = p.check_fits(&m, &h, Dtype::Bf16, 8192, true).unwrap_err();
    assert!(e.1.contains("pipeline_parallel = 2"), "{e:?}");
}

/// The plan of a preset at its checkpoint's dtype (or `w`), with the
/// default engine (block 16, `max_num_seqs` as [`EngineCfg::default`]).
fn family_plan(key: &str, hw: &str, tp: u32, w: Option<Dtype>, kv: Dtype) -> MemoryPlan {
    let preset = catalog::model_preset(key).unwrap();
    let m = preset.load();
    let w = w.or(m.weight_dtype).unwrap_or(Dtype::Bf16);
    let h = catalog::hardware(hw).unwrap();
    MemoryPlan::new(
        &m.arch,
        &h,
        w,
        kv,
        &Parallelism::tensor(tp),
        &EngineCfg::default(),
    )
}

fn kinds(p: &MemoryPlan) -> Vec<(u32, f64, f64)> {
    p.layer_kinds
        .iter()
        .map(|k| (k.layers, k.kv_bytes_per_token, k.bytes_per_sequence))
        .collect()
}

fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{got} vs {want}"
    );
}

/// gpt_oss: alternating 128-token sliding and full layers with sinks,
/// MXFP4 experts, BF16 attention, on one H200.
#[test]
fn gpt_oss_plan_by_hand() {
    let p = family_plan("gpt-oss-120b", "h200", 1, None, Dtype::Bf16);
    // 18 full layers × K and V × 8 heads × 64 × 2 B; 18 sliding layers
    // hold ⌈128/16⌉·16 + 16 = 144 tokens each, per sequence.
    assert_eq!(p.kv_bytes_per_token, 18.0 * 2.0 * 8.0 * 64.0 * 2.0);
    let window = 18.0 * 144.0 * 2.0 * 8.0 * 64.0 * 2.0;
    assert_eq!(kinds(&p), vec![(18, 36_864.0, 0.0), (18, 0.0, window)]);
    // vLLM's groups: 18 full and 18 sliding layers, a block spans 18
    // layers' pages; the windows come out of the pool, nothing is set aside.
    let g = p.kv_groups.unwrap();
    assert_eq!((g.group_size, g.full_groups, g.block_size), (18, 1, 16));
    assert_eq!(p.sequence_reserve_bytes, 0.0);
    // A 10,000-token sequence: 625 full rows and at most ⌈128/16⌉ + 1
    // = 9 blocks of the sliding group (which frees what leaves the window).
    assert_eq!(p.sequence_blocks(10_000), 625 + 9);
    assert_eq!(p.sequence_blocks(100), 7 + 7);
    let experts = 36.0 * 128.0 * 3.0 * 2880.0 * 2880.0 * (0.5 + 1.0 / 32.0);
    let attention = 36.0 * (2.0 * 2880.0 * 4096.0 + 2.0 * 2880.0 * 512.0) * 2.0;
    let rest =
        (36.0 * 2880.0 * 128.0 + 2.0 * 201_088.0 * 2880.0 + 73.0 * 2880.0 + 36.0 * 64.0) * 2.0;
    close(p.weight_bytes, experts + attention + rest);
    // The blocks get what the weights, activations and runtime leave.
    close(
        p.kv_cache_bytes,
        p.usable_bytes - p.weight_bytes - p.activation_bytes - p.overhead_bytes,
    );
    assert_eq!(p.kv_blocks, (p.kv_cache_bytes / (36_864.0 * 16.0)) as u64);
}

/// qwen3_5: 45 Gated DeltaNet layers (fixed state) and 15 full layers of
/// 2 KV heads (one per GPU at TP 4), NVFP4 weights, FP8 cache, 4 × B200.
#[test]
fn qwen35_plan_by_hand() {
    let p = family_plan(
        "qwen3.5-397b-a17b",
        "b200",
        4,
        Some(Dtype::Nvfp4),
        Dtype::Fp8,
    );
    assert_eq!(p.kv_bytes_per_token, 15.0 * 1.0 * 256.0 * 2.0 * 1.0);
    // Per layer and sequence: 64 heads × 128 × 128 FP32 state and 3
    // × (2·2048 + 8192) BF16 convolution inputs, a quarter per GPU.
    let state = 45.0 * (64.0 * 128.0 * 128.0 * 4.0 + 3.0 * 12_288.0 * 2.0) / 4.0;
    assert_eq!(kinds(&p), vec![(15, 7680.0, 0.0), (45, 0.0, state)]);
    // vLLM's block: 16 × ⌈(state of one layer per GPU) / (16 × 512 B)⌉
    // = 16 × ⌈1 067 008 / 8192⌉ = 2096 tokens; three linear groups of
    // 15 layers hold a block each per sequence.
    let g = p.kv_groups.unwrap();
    assert_eq!((g.group_size, g.state_groups, g.block_size), (15, 3, 2096));
    assert_eq!(p.block_size, 2096);
    assert_eq!(p.sequence_blocks(5000), 3 + 3);
    // Weights per GPU: full attention (Q with its gate and O split, the
    // one KV head replicated), linear projections split, 513 experts of
    // 3 × 4096 × 1024 split; routers whole, embeddings and norms split.
    let full = (4096.0 * 16384.0 + 8192.0 * 4096.0) / 4.0 + 2.0 * 4096.0 * 256.0;
    let linear = (4096.0 * 20480.0 + 4096.0 * 128.0 + 8192.0 * 4096.0) / 4.0;
    let experts = 513.0 * 3.0 * 4096.0 * 1024.0 / 4.0;
    let quantized = 15.0 * full + 45.0 * linear + 60.0 * experts;
    let norms = 121.0 * 4096.0 + 45.0 * (12_288.0 * 4.0 + 128.0 + 128.0);
    let bf16 = 60.0 * 4096.0 * 512.0 + (2.0 * 248_320.0 * 4096.0 + norms) / 4.0;
    close(p.weight_bytes, quantized * 0.5625 + bf16 * 2.0);
}

/// qwen3_next: the same hybrid read from a config.json (48 layers, a full
/// layer every 4th, 16 KV-less key heads and 32 value heads).
#[test]
fn qwen3_next_plan_by_hand() {
    let cfg = r#"{"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
        "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 16,
        "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 5120,
        "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "full_attention_interval": 4,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "vocab_size": 151936,
        "max_position_embeddings": 262144, "tie_word_embeddings": false}"#;
    let m = catalog::parse_config(cfg, "qwen3-next.json").unwrap();
    assert_eq!(m.family, "qwen3_next");
    // 80B total, 3B active (Qwen's card).
    assert!(
        (m.arch.total_params() / 1e9 - 80.0).abs() < 1.0,
        "{}",
        m.arch.total_params()
    );
    // "A3B" counts neither embedding table (0.62B): 3.2B here.
    let active = (m.arch.active_params() - m.arch.embedding_params()) / 1e9;
    assert!((2.9..3.4).contains(&active), "{active}");
    let h = catalog::hardware("h100").unwrap();
    let p = MemoryPlan::new(
        &m.arch,
        &h,
        Dtype::Bf16,
        Dtype::Bf16,
        &Parallelism::tensor(2),
        &EngineCfg::default(),
    );
    assert_eq!(p.kv_bytes_per_token, 12.0 * 1.0 * 256.0 * 2.0 * 2.0);
    let state = 36.0 * (32.0 * 128.0 * 128.0 * 4.0 + 3.0 * (2.0 * 2048.0 + 4096.0) * 2.0) / 2.0;
    assert_eq!(kinds(&p), vec![(12, 12_288.0, 0.0), (36, 0.0, state)]);
    // 16 × ⌈1 073 152 / (16 × 1024)⌉ = 1056 tokens a block (the figure
    // vLLM logs for this state-to-page ratio).
    assert_eq!(p.block_size, 1056);
}

/// llama4: three chunked-local layers (8192) of four, MoE on every layer
/// (Scout), on 8 H100s; weights all split but the routers.
#[test]
fn llama4_plan_by_hand() {
    let p = family_plan("llama-4-scout", "h100", 8, None, Dtype::Bf16);
    assert_eq!(p.kv_bytes_per_token, 12.0 * 2.0 * 1.0 * 128.0 * 2.0);
    let chunk = 36.0 * (8192.0 + 16.0) * 2.0 * 128.0 * 2.0;
    assert_eq!(kinds(&p), vec![(12, 6144.0, 0.0), (36, 0.0, chunk)]);
    // Three chunked groups of 12: a 20,000-token sequence holds 1250
    // full rows and at most 8192/16 + 1 = 513 blocks in each chunked
    // group on its way there.
    assert_eq!(p.kv_groups.unwrap().chunked.unwrap().groups, 3);
    assert_eq!(p.sequence_blocks(20_000), 1250 + 3 * 513);
    let (m, _) = catalog::model("llama-4-scout").unwrap();
    let routers = 48.0 * 5120.0 * 16.0;
    close(
        p.weight_bytes,
        (m.total_params() - routers) * 2.0 / 8.0 + routers * 2.0,
    );
    // 48 layers × (Q, O 5120² + K, V 5120·1024 + 17 experts × 3·5120·8192
    // + router) + 2 × 202048 × 5120 + 97 × 5120 norms.
    let layer = 2.0 * 5120.0 * 5120.0
        + 2.0 * 5120.0 * 1024.0
        + 17.0 * 3.0 * 5120.0 * 8192.0
        + 5120.0 * 16.0;
    close(
        m.total_params(),
        48.0 * layer + 2.0 * 202_048.0 * 5120.0 + 97.0 * 5120.0,
    );
}

/// gemma3: five 1024-token sliding layers per full one (62 layers: 52
/// sliding, 10 full), tied embeddings, on 2 H100s.
#[test]
fn gemma3_plan_by_hand() {
    let p = family_plan("gemma-3-27b", "h100", 2, None, Dtype::Bf16);
    assert_eq!(p.kv_bytes_per_token, 10.0 * 2.0 * 8.0 * 128.0 * 2.0);
    let window = 52.0 * (1024.0 + 16.0) * 2.0 * 8.0 * 128.0 * 2.0;
    assert_eq!(kinds(&p), vec![(10, 40_960.0, 0.0), (52, 0.0, window)]);
    // Groups of 10: one full, six sliding (the last 2 layers and 8
    // padding slots); in decode each holds at most ⌈1024/16⌉ + 1 = 65.
    assert_eq!(p.kv_groups.unwrap().sliding.unwrap().groups, 6);
    assert_eq!(p.sequence_blocks(4000), 250 + 6 * 65);
    let layer = 5376.0 * 4096.0 * 2.0 + 2.0 * 5376.0 * 2048.0 + 3.0 * 5376.0 * 21504.0;
    let total = 62.0 * layer + 262_208.0 * 5376.0 + 125.0 * 5376.0;
    close(p.weight_bytes, total * 2.0 / 2.0);
}

/// deepseek_v32 and glm5: MLA latent plus the DSA indexer's 132-byte
/// FP8 key per token and layer, whole on every GPU; the indexer's weights
/// replicated.
#[test]
fn sparse_mla_plans_by_hand() {
    let v32 = family_plan("deepseek-v3.2", "h200", 8, None, Dtype::Bf16);
    assert_eq!(v32.kv_bytes_per_token, 61.0 * (576.0 * 2.0 + 132.0));
    assert_eq!(kinds(&v32), vec![(61, 61.0 * 1284.0, 0.0)]);
    assert_eq!(v32.sequence_reserve_bytes, 0.0);
    let v3 = family_plan("deepseek-v3", "h200", 8, Some(Dtype::Fp8Block), Dtype::Bf16);
    let indexer = 1536.0 * 8192.0 + 7168.0 * 128.0 + 256.0 + 7168.0 * 64.0;
    close(
        v32.weight_bytes - v3.weight_bytes,
        61.0 * indexer * (1.0 + 4.0 / 16384.0),
    );
    let glm = family_plan("glm-5", "b200", 8, Some(Dtype::Fp8), Dtype::Fp8);
    assert_eq!(glm.kv_bytes_per_token, 78.0 * (576.0 + 132.0));
}

/// kimi_k2 (MLA, INT4 experts with attention kept in BF16) and
/// minimax_m2 (GQA, block-FP8), and a qwen3_moe / mistral pair of plain
/// and all-sliding models.
#[test]
fn kimi_minimax_qwen3_mistral_plans_by_hand() {
    let k = family_plan("kimi-k2.5", "h200", 8, None, Dtype::Bf16);
    assert_eq!(k.kv_bytes_per_token, 61.0 * 576.0 * 2.0);
    let (km, _) = catalog::model("kimi-k2.5").unwrap();
    // Attention per GPU: split up-projections and O, replicated down-projections.
    let att = (1536.0 * 64.0 * 192.0 + 512.0 * 64.0 * 256.0 + 64.0 * 128.0 * 7168.0) / 8.0
        + 7168.0 * 1536.0
        + 7168.0 * 576.0;
    assert_eq!(km.attention_params_per_gpu(8), att);
    let all_int4 = MemoryPlan::new(
        &ModelArch {
            attention_unquantized: false,
            ..km.clone()
        },
        &catalog::hardware("h200").unwrap(),
        Dtype::Int4,
        Dtype::Bf16,
        &Parallelism::tensor(8),
        &EngineCfg::default(),
    );
    close(
        k.weight_bytes - all_int4.weight_bytes,
        61.0 * att * (2.0 - Dtype::Int4.weight_bytes()),
    );
    let mm = family_plan("minimax-m2.5", "h200", 4, None, Dtype::Fp8);
    assert_eq!(mm.kv_bytes_per_token, 62.0 * 2.0 * 2.0 * 128.0);
    assert!(mm.layer_kinds.is_empty());
    let q = family_plan("qwen3-235b-a22b", "h200", 8, None, Dtype::Bf16);
    assert_eq!(q.kv_bytes_per_token, 94.0 * 2.0 * 1.0 * 128.0 * 2.0);
    // Mistral-7B-v0.1: every layer a 4096-token window, no full layer:
    // the windows go in the blocks and nothing is set aside.
    let cfg = r#"{"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
        "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096}"#;
    let m = catalog::parse_config(cfg, "mistral.json").unwrap().arch;
    let p = MemoryPlan::new(
        &m,
        &catalog::hardware("h100").unwrap(),
        Dtype::Bf16,
        Dtype::Bf16,
        &Parallelism::tensor(1),
        &EngineCfg::default(),
    );
    assert_eq!(p.kv_bytes_per_token, 32.0 * 2.0 * 8.0 * 128.0 * 2.0);
    assert_eq!(kinds(&p), vec![(32, 131_072.0, 0.0)]);
    assert_eq!(p.sequence_reserve_bytes, 0.0);
}

proptest::proptest! {
    /// Over any length, a sequence of a hybrid model holds its full layers'
    /// tokens plus at most the windows and states set aside: sliding
    /// layers stop at the window and linear layers do not grow at all.
    #[test]
    fn hybrid_sequences_grow_only_in_full_layers(ctx in 1u64..1_000_000, extra in 1u64..100_000) {
        for key in ["gpt-oss-120b", "qwen3.5-397b-a17b", "gemma-3-27b", "llama-4-scout"] {
            let (m, _) = catalog::model(key).unwrap();
            let cap = m.sequence_state_bytes(0, m.layers, 1, Dtype::Bf16, 16);
            let per_token = m.kv_bytes_per_token(Dtype::Bf16);
            let full = |c: u64| c.div_ceil(16) as f64 * 16.0 * per_token;
            let held = m.sequence_bytes(ctx, 1, Dtype::Bf16, 16);
            proptest::prop_assert!(held <= full(ctx) + cap + 1e-6);
            let more = m.sequence_bytes(ctx + extra, 1, Dtype::Bf16, 16);
            // Growth beyond the full layers' is bounded by what the
            // windows still had room for.
            proptest::prop_assert!(more - full(ctx + extra) <= cap + 1e-6);
            proptest::prop_assert!(more >= held);
        }
        // Linear layers alone: the same bytes at any length.
        let (q, _) = catalog::model("qwen3.5-397b-a17b").unwrap();
        let linear_only = ModelArch { layer_pattern: vec![LayerKind::Linear], ..q.clone() };
        proptest::prop_assert_eq!(
            linear_only.sequence_bytes(ctx, 1, Dtype::Bf16, 16),
            linear_only.sequence_bytes(ctx + extra, 1, Dtype::Bf16, 16)
        );
    }
}
