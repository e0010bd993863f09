use super::*;
use crate::catalog;

fn roofline(model: &str, hw: &str, tp: u32) -> Roofline {
    let (m, _) = catalog::model(model).unwrap();
    let h = catalog::hardware(hw).unwrap();
    Roofline::new(&m, &h, Dtype::Bf16, Dtype::Bf16, tp)
}

fn decode_batch(seqs: u32, context: u64) -> BatchShape {
    let mut b = BatchShape::default();
    for _ in 0..seqs {
        b.add_decode(context);
    }
    b
}

#[test]
fn llama_8b_batch_1_decode_is_weight_bandwidth_bound() {
    let r = roofline("llama-3.1-8b", "h100-sxm", 1);
    let t = r.iteration_time(&decode_batch(1, 512)) as f64 / 1e6;
    // 16.06 GB of weights over 3.35 TB/s = 4.79 ms is the floor; at the
    // efficiencies above plus step overhead the step takes a little more,
    // and no more than twice the floor.
    let floor = 16.06e9 / 3.35e12 * 1e3;
    assert!(t > floor && t < 2.0 * floor, "{t} ms vs floor {floor} ms");
}

#[test]
fn decode_is_nearly_flat_in_batch_until_compute_bound() {
    let r = roofline("llama-3.1-8b", "h100-sxm", 1);
    let t1 = r.iteration_time(&decode_batch(1, 256));
    let t32 = r.iteration_time(&decode_batch(32, 256));
    assert!((t32 as f64) < 1.25 * t1 as f64, "{t1} {t32}");
    // A 4096-token prefill is compute-bound: 2 × 4096 × 8e9 FLOPs ≈ 65.8 TFLOP
    // at 643 TFLOP/s ≈ 102 ms.
    let mut p = BatchShape::default();
    p.add_prefill(4096, 0);
    let tp = r.iteration_time(&p) as f64 / 1e6;
    assert!((95.0..140.0).contains(&tp), "{tp} ms");
}

#[test]
fn longer_context_and_tensor_parallel_costs_move_the_right_way() {
    let r = roofline("llama-3.1-70b", "h100-sxm", 4);
    let short = r.iteration_time(&decode_batch(64, 512));
    let long = r.iteration_time(&decode_batch(64, 8192));
    assert!(long > short);
    let r8 = roofline("llama-3.1-70b", "h100-sxm", 8);
    assert!(r8.iteration_time(&decode_batch(1, 512)) < r.iteration_time(&decode_batch(1, 512)));
    assert_eq!(r.iteration_time(&BatchShape::default()), 0);
}

fn roofline_par(model: &str, hw: &str, par: Parallelism, w: Dtype, kv: Dtype) -> Roofline {
    let (m, _) = catalog::model(model).unwrap();
    let h = catalog::hardware(hw).unwrap();
    par.validate(&m, &h).unwrap();
    Roofline::with_parallelism(&m, &h, w, kv, &par)
}

fn ms(r: &Roofline, b: &BatchShape) -> f64 {
    r.iteration_time(b) as f64 / 1e6
}

fn prefill(tokens: u64) -> BatchShape {
    let mut b = BatchShape::default();
    b.add_prefill(tokens, 0);
    b
}

/// The quantization figures: Llama-3.1-70B on 4 × H100 (TP 4) and
/// 2 × H200 (TP 2) with bf16 or fp8 weights and bf16 or fp8 KV cache. Run
/// with `cargo test -p servesim-sim quantization -- --nocapture` to see the table.
#[test]
fn quantization_capacity_and_decode_speed_on_llama_70b() {
    use crate::catalog::GIB;
    use crate::config::EngineCfg;
    use crate::memory::MemoryPlan;
    let (m, _) = catalog::model("llama-3.1-70b").unwrap();
    let combos = [
        (Dtype::Bf16, Dtype::Bf16),
        (Dtype::Fp8, Dtype::Bf16),
        (Dtype::Bf16, Dtype::Fp8),
        (Dtype::Fp8, Dtype::Fp8),
        (Dtype::Int4, Dtype::Bf16),
    ];
    eprintln!("GPUs       weights KV     weights/GPU  KV tokens  decode ms: b1  b64@2k  b256@2k");
    for (hw, tp) in [("h100-sxm", 4), ("h200", 2)] {
        let h = catalog::hardware(hw).unwrap();
        let par = Parallelism::tensor(tp);
        let rows: Vec<(u64, f64, f64, f64, f64)> = combos
            .iter()
            .map(|&(w, kv)| {
                let plan = MemoryPlan::new(&m, &h, w, kv, &par, &EngineCfg::default());
                let r = Roofline::with_parallelism(&m, &h, w, kv, &par);
                let row = (
                    plan.kv_tokens,
                    plan.weight_bytes / GIB,
                    ms(&r, &decode_batch(1, 2048)),
                    ms(&r, &decode_batch(64, 2048)),
                    ms(&r, &decode_batch(256, 2048)),
                );
                eprintln!(
                    "{tp}×{hw:<8} {:<7} {:<5} {:>8.2} GiB {:>10} {:>13.2} {:>7.2} {:>8.2}",
                    w.name(),
                    kv.name(),
                    row.1,
                    row.0,
                    row.2,
                    row.3,
                    row.4
                );
                row
            })
            .collect();
        let (bf16, fp8w, fp8kv, both, int4) = (rows[0], rows[1], rows[2], rows[3], rows[4]);
        // fp8 weights: linear layers halve, embeddings and LM head stay bf16
        // (2 × 128256 × 8192 × 2 B / TP): 141.1 GB → 72.7 GB in all.
        let want_w = (70.55e9 - 2.101e9) * 1.0 / tp as f64 + 2.101e9 * 2.0 / tp as f64;
        assert!((fp8w.1 * GIB - want_w).abs() / want_w < 0.005, "{}", fp8w.1);
        // ... which frees ~16 GiB (TP 4) or ~32 GiB (TP 2) per GPU for KV.
        assert!(fp8w.0 as f64 > 1.4 * bf16.0 as f64, "{fp8w:?} {bf16:?}");
        // fp8 KV halves bytes per token: twice the tokens (to a block).
        assert!(
            (fp8kv.0 as i64 - 2 * bf16.0 as i64).abs() <= 16,
            "{fp8kv:?}"
        );
        assert!(both.0 > 2 * fp8w.0 - 32 && both.0 as f64 > 2.8 * bf16.0 as f64);
        // Batch-1 decode streams weights: fp8 weights cut the weight
        // reads in half, the step by 25–45 % (all-reduces and kernel
        // floors do not shrink); fp8 KV barely matters at 2k context and
        // one sequence.
        assert!(
            fp8w.2 < 0.75 * bf16.2 && fp8w.2 > 0.55 * bf16.2,
            "{fp8w:?} {bf16:?}"
        );
        assert!((fp8kv.2 - bf16.2).abs() < 0.1);
        // 256 × 2k-token contexts: reading the KV cache is a large share of
        // the step, and fp8 KV cuts it by over a seventh; the saving grows
        // with the tokens in the batch.
        assert!(fp8kv.4 < 0.86 * bf16.4, "{bf16:?} {fp8kv:?}");
        assert!(bf16.4 - fp8kv.4 > 2.0 * (bf16.3 - fp8kv.3));
        // int4 is weight-only: fastest at batch 1, BF16 compute at batch
        // 256, where its smaller weight reads still count near the ridge.
        assert!(int4.2 < fp8w.2 && int4.1 < 0.3 * bf16.1);
        assert!(
            int4.4 < bf16.4 && int4.4 > 0.8 * bf16.4,
            "{int4:?} {bf16:?}"
        );
    }
}

#[test]
fn fp8_multiplies_at_fp8_rate_only_where_the_chip_has_fp8_units() {
    let p = prefill(4096);
    let at = |hw: &str, w: Dtype| {
        ms(
            &roofline_par("llama-3.1-70b", hw, Parallelism::tensor(4), w, Dtype::Bf16),
            &p,
        )
    };
    // A 4096-token prefill is compute-bound: 2 × 4096 × 70e9 / 4 FLOP per
    // GPU = 143.7 TFLOP; at 0.75 × 989 TFLOP/s that is ~194 ms of GEMMs
    // in bf16; H100's fp8 rate is twice that, of which per-tensor FP8
    // GEMMs reach 0.47 (`gemm::FP8_GEMM_EFFICIENCY`): 0.8 of the bf16
    // GEMM time, and attention does not change (0.86 in all). Weight-only formats multiply at
    // the bf16 rate: only their smaller weight reads (the memory roof,
    // which the rounded corner still counts a little) differ.
    let (h_bf16, h_fp8, h_int4) = (
        at("h100", Dtype::Bf16),
        at("h100", Dtype::Fp8),
        at("h100", Dtype::Int4),
    );
    assert!(
        h_fp8 < 0.9 * h_bf16 && h_fp8 > 0.75 * h_bf16,
        "{h_fp8} {h_bf16}"
    );
    assert!(
        h_int4 < h_bf16 && h_int4 > 0.98 * h_bf16,
        "int4 dequantizes to bf16 GEMMs"
    );
    // A100 has no FP8 units: fp8 weights dequantize (Marlin) at bf16 rate.
    let (a_fp8, a_bf16) = (at("a100-80gb", Dtype::Fp8), at("a100-80gb", Dtype::Bf16));
    assert!(a_fp8 < a_bf16 && a_fp8 > 0.98 * a_bf16, "{a_fp8} {a_bf16}");
    // ... but INT8 runs on its integer tensor cores (624 TOPS).
    assert!(at("a100-80gb", Dtype::Int8) < 0.65 * at("a100-80gb", Dtype::Bf16));
}

#[test]
fn moe_decode_reads_only_the_experts_its_tokens_touch() {
    let r = roofline_par(
        "mixtral-8x7b",
        "h100",
        Parallelism::tensor(2),
        Dtype::Bf16,
        Dtype::Bf16,
    );
    // E·(1 − (1 − k/E)^B) with E = 8, k = 2.
    assert!((r.experts_touched(1.0) - 2.0).abs() < 1e-12);
    assert!((r.experts_touched(8.0) - 8.0 * (1.0 - 0.75f64.powi(8))).abs() < 1e-12);
    assert!(r.experts_touched(256.0) > 7.999);
    // Batch 1 reads attention + 2 of 8 experts per layer: on each of 2 GPUs
    // 32 × 41.9M / 2 + LM head 65.5M = 0.74e9 params, 1.5 GB at
    // 0.85 × 3.35 TB/s (0.52 ms), and 32 × 2 × 176.2M / 2 = 5.64e9 expert
    // params, 11.3 GB at the grouped GEMMs' 0.65 × 3.35 TB/s (5.18 ms);
    // plus 64 two-GPU all-reduces (~0.5 ms), 32 × (5 GEMM + 5
    // element-wise) kernel floors (1.44 ms) and 32 decode-attention
    // floors (0.37 ms).
    let t1 = ms(&r, &decode_batch(1, 512));
    assert!((7.8..8.3).contains(&t1), "{t1} ms");
    // Eight sequences touch 7.2 experts on average: nearly every weight.
    let t8 = ms(&r, &decode_batch(8, 512));
    assert!(t8 > 2.5 * t1, "{t1} {t8}");
    // Prefill compute scales with the 12.9B active parameters, not 46.7B:
    // per GPU 2 × 4096 × 11.3e9 / 2 expert FLOPs at 0.35 × 742 TFLOP/s
    // (grouped GEMMs) ≈ 178 ms, and 2 × 4096 × 1.6e9 / 2 others at
    // 742 TFLOP/s ≈ 9 ms (+ attention); 46.7B would take over 600 ms.
    let tp = ms(&r, &prefill(4096));
    assert!((180.0..220.0).contains(&tp), "{tp} ms");
}

#[test]
fn mla_attention_reads_one_latent_per_token() {
    let r = roofline_par(
        "deepseek-v3",
        "h200",
        Parallelism::tensor(8),
        Dtype::Fp8,
        Dtype::Bf16,
    );
    // (512 + 64) × 2 bytes on every GPU of the group.
    assert_eq!(r.kv_bytes_per_token_layer, 1152.0);
    // Decode attention over 64 × 8192 tokens: 604 MB per layer read at
    // 0.86 × 4.8 TB/s = 0.146 ms, vs the absorbed-MLA FLOPs of 16 heads ×
    // 2176 × 524288 = 18.3 GFLOP at 445 TFLOP/s = 0.041 ms: memory-bound;
    // plus the kernel's 11.5 µs floor.
    let b = decode_batch(64, 8192);
    let attn = r.attn_decode(&b) * 1e3;
    assert!((attn - 0.1578).abs() < 0.001, "{attn} ms");
}

#[test]
fn pipeline_stages_stay_busy_with_one_micro_batch_per_stage() {
    let tp8 = |pp| Parallelism {
        tensor: 8,
        pipeline: pp,
        ..Parallelism::default()
    };
    let one = roofline_par("llama-3.1-405b", "h100", tp8(1), Dtype::Bf16, Dtype::Bf16);
    let two = roofline_par("llama-3.1-405b", "h100", tp8(2), Dtype::Bf16, Dtype::Bf16);
    // One sequence: the whole model in sequence plus one cross-node hop of
    // 16384 × 2 B at 0.8 × 50 GB/s and 20 µs: 20.82 µs more than one stage.
    let b1 = decode_batch(1, 1024);
    assert_eq!(two.micro_batches(&b1), 1);
    let extra = two.iteration_time(&b1) as i64 - one.iteration_time(&b1) as i64;
    assert!((extra - 20_819).abs() <= 2, "{extra} ns");
    // Two sequences fill both stages (vLLM keeps PP batches in flight):
    // each stage runs two one-token micro-batches while the other works,
    // so the step costs about what one sequence costs — GPipe's
    // (m + S − 1)/m · S schedule would take 1.5× as long.
    let b2 = decode_batch(2, 1024);
    assert_eq!(two.micro_batches(&b2), 2);
    let ratio = two.iteration_time(&b2) as f64 / two.iteration_time(&b1) as f64;
    assert!((1.0..1.05).contains(&ratio), "{ratio}");
    // Decode with PP does not beat TP per token: a 4-stage TP-4 replica
    // streams each GPU's quarter of the weights four times in sequence.
    let tp4pp4 = Parallelism {
        tensor: 4,
        pipeline: 4,
        ..Parallelism::default()
    };
    let deep = roofline_par("llama-3.1-405b", "h100", tp4pp4, Dtype::Bf16, Dtype::Bf16);
    let ratio = ms(&deep, &b1) / ms(&two, &b1);
    // (less than 2×: all-reduces and kernel floors do not repeat per stage).
    assert!((1.6..2.0).contains(&ratio), "{ratio}");
    // Uneven stages: the bottleneck term makes the longer stage set the pace.
    let d = roofline_par("deepseek-v3", "h100", tp8(2), Dtype::Fp8, Dtype::Bf16);
    assert_eq!(d.stage_shapes, vec![(3.0, 28.0, false), (0.0, 30.0, true)]);
}

#[test]
fn expert_parallelism_dispatches_and_combines_with_all_to_all() {
    let par = |ep| Parallelism {
        tensor: 8,
        pipeline: 1,
        expert: ep,
        ..Parallelism::default()
    };
    let ep8 = roofline_par("mixtral-8x7b", "h100", par(8), Dtype::Bf16, Dtype::Bf16);
    let ep1 = roofline_par("mixtral-8x7b", "h100", par(1), Dtype::Bf16, Dtype::Bf16);
    // EP 8: one GPU per group, no all-reduce; dispatch and combine each send
    // 64 tokens × 2 experts × 4096 × 2 B × 7/8 = 917 504 B at 0.75 × 450 GB/s
    // (2.72 µs) plus 8 µs.
    let want = 2.0 * (917_504.0 / 337.5e9 + 8e-6);
    assert!(
        (ep8.moe_comm(64.0, true) - want).abs() < 1e-12,
        "{}",
        ep8.moe_comm(64.0, true)
    );
    // EP 1: the dense layer's two all-reduces.
    assert_eq!(ep1.moe_comm(64.0, true), ep1.comm(64.0));
    // Each of the 8 groups runs attention for its own sequences; at 64
    // sequences the replica is about as fast either way.
    let b = decode_batch(64, 2048);
    let ratio = ms(&ep8, &b) / ms(&ep1, &b);
    assert!((0.5..1.5).contains(&ratio), "{ratio}");
    // One sequence keeps one group busy and the others idle in attention.
    assert!(ms(&ep8, &prefill(2048)) > ms(&ep1, &prefill(2048)));
}

#[test]
fn fp4_weights_multiply_on_fp4_units_only_where_the_chip_has_them() {
    let at = |model: &str, hw: &str, tp: u32, w: Dtype, b: &BatchShape| {
        ms(
            &roofline_par(model, hw, Parallelism::tensor(tp), w, Dtype::Bf16),
            b,
        )
    };
    // A 8192-token prefill of Llama-3.1-70B on 4 B200s is compute-bound:
    // NVFP4 runs at 0.40 × 9000 TFLOP/s against BF16's 0.75 × 2250, so
    // its GEMMs take 1688/3600 = 0.47 of the time; attention (BF16),
    // element-wise kernels and all-reduces do not shrink.
    let (fp4, bf16) = (
        at("llama-3.1-70b", "b200", 4, Dtype::Nvfp4, &prefill(8192)),
        at("llama-3.1-70b", "b200", 4, Dtype::Bf16, &prefill(8192)),
    );
    assert!(fp4 < 0.75 * bf16 && fp4 > 0.47 * bf16, "{fp4} {bf16}");
    // Batch-1 decode streams 0.5625 bytes per weight instead of 2: per
    // GPU 34.0 GB of linear weights become 9.6 GB, 3.6 ms less at
    // 0.85 × 8 TB/s, less 80 × 4 × 2 µs of activation quantization.
    let d = decode_batch(1, 1024);
    let (fp4, bf16) = (
        at("llama-3.1-70b", "b200", 4, Dtype::Nvfp4, &d),
        at("llama-3.1-70b", "b200", 4, Dtype::Bf16, &d),
    );
    assert!((2.5..3.5).contains(&(bf16 - fp4)), "{fp4} {bf16}");
    // On H200 (no FP4 units) MXFP4 weights dequantize to BF16 GEMMs:
    // a compute-bound prefill costs what BF16 costs, less a little memory.
    let (mx, bf) = (
        at("llama-3.1-70b", "h200", 4, Dtype::Mxfp4, &prefill(8192)),
        at("llama-3.1-70b", "h200", 4, Dtype::Bf16, &prefill(8192)),
    );
    assert!(mx < bf && mx > 0.97 * bf, "{mx} {bf}");
}

#[test]
fn unquantized_attention_runs_at_the_bf16_rate_without_activation_quantization() {
    // gpt-oss quantizes only its experts to MXFP4
    // (`modules_to_not_convert: model.layers.*.self_attn, *.mlp.router`).
    let (oss, _) = catalog::model("gpt-oss-120b").unwrap();
    assert!(oss.attention_unquantized);
    let mut all = oss.clone();
    all.attention_unquantized = false;
    let b200 = catalog::hardware("b200").unwrap();
    let par = Parallelism::tensor(1);
    let kept = Roofline::with_parallelism(&oss, &b200, Dtype::Mxfp4, Dtype::Bf16, &par);
    let quant = Roofline::with_parallelism(&all, &b200, Dtype::Mxfp4, Dtype::Bf16, &par);
    // One-token MoE layer: five GEMM floors, and activation quantization
    // only before the experts' two grouped GEMMs (the router, QKV and
    // output projections stay BF16), 2 × 2 µs instead of 4 × 2 µs.
    let floor = |r: &Roofline| r.moe_gemm(1.0, 1.0).floor * 1e6;
    assert!(
        (floor(&kept) - (5.0 * 6.0 + 2.0 * 2.0)).abs() < 1e-9,
        "{}",
        floor(&kept)
    );
    assert!(
        (floor(&quant) - (5.0 * 6.0 + 4.0 * 2.0)).abs() < 1e-9,
        "{}",
        floor(&quant)
    );
    // A 8192-token prefill: the attention projections multiply at
    // 0.75 × B200's BF16 peak, not 0.40 × its FP4 peak.
    let attn = oss.attention_params_per_gpu(1);
    let (bf16, fp4) = (
        b200.peak_flops(Dtype::Bf16) * GEMM_EFFICIENCY,
        b200.peak_flops(Dtype::Mxfp4) * compute_efficiency(Dtype::Mxfp4, true),
    );
    let extra = 2.0 * 8192.0 * attn * (1.0 / bf16 - 1.0 / fp4);
    let dc = kept.moe_gemm(8192.0, 8192.0).compute - quant.moe_gemm(8192.0, 8192.0).compute;
    assert!((dc / extra - 1.0).abs() < 0.01, "{dc} vs {extra}");
    // Without FP4 units nothing changes but the rate's source.
    let h200 = catalog::hardware("h200").unwrap();
    let kept = Roofline::with_parallelism(&oss, &h200, Dtype::Mxfp4, Dtype::Bf16, &par);
    assert_eq!(kept.moe_gemm(1.0, 1.0).floor * 1e6, 30.0);
}
