//! Tests of the decoder: logits against candle-transformers' Llama, packed
//! batches against sequences alone, weight checks, caches and forks.

use super::*;
use crate::config::RopeLayout;
use candle_core::D;

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

/// The tiled attention path serves the same tokens as the naive one: a
/// prefill in blocks smaller than the prompt, then decode steps that cross
/// block boundaries, in a packed batch.
#[test]
fn tiled_attention_serves_the_same_tokens_as_naive() {
    use crate::model::Attention;
    let naive = tiny_model(4);
    let mut tiled = tiny_model(4);
    tiled.attention = Attention::Tiled { block: 5 };
    let a: Vec<u32> = (0..23).map(|i| (i * 7 % 211) as u32).collect();
    let b: Vec<u32> = (0..9).map(|i| (i * 13 % 211) as u32).collect();
    let run = |m: &Model| -> (Vec<u32>, Tensor) {
        let mut ca = SeqCache::new(m, 64).unwrap();
        let mut cb = SeqCache::new(m, 64).unwrap();
        let mut toks = m
            .greedy(&mut [
                Step {
                    cache: &mut ca,
                    tokens: &a,
                },
                Step {
                    cache: &mut cb,
                    tokens: &b,
                },
            ])
            .unwrap();
        let mut out = toks.clone();
        for _ in 0..12 {
            toks = m
                .greedy(&mut [
                    Step {
                        cache: &mut ca,
                        tokens: &[toks[0]],
                    },
                    Step {
                        cache: &mut cb,
                        tokens: &[toks[1]],
                    },
                ])
                .unwrap();
            out.extend_from_slice(&toks);
        }
        let logits = m
            .forward(&mut [Step {
                cache: &mut ca,
                tokens: &[1, 2, 3],
            }])
            .unwrap();
        (out, logits)
    };
    let (want, want_logits) = run(&naive);
    let (got, got_logits) = run(&tiled);
    assert_eq!(got, want);
    let err = (got_logits - want_logits)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(err < 1e-4, "logits differ by {err}");
}
