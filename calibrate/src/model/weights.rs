//! Random weights with Hugging Face tensor names, for timing without a
//! checkpoint.

use crate::config::ModelConfig;
use crate::error::Result;
use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

/// Weights by Hugging Face tensor name (`model.layers.0.self_attn.q_proj.weight`, …).
pub type NamedTensors = HashMap<String, Tensor>;

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
