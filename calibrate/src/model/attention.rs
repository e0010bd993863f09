//! Attention of one sequence's queries over its KV cache, two ways.
//!
//! `naive` materialises the whole score matrix `[kv_heads, rows, context]`,
//! takes its softmax and multiplies by V: simple, and on a CPU the fastest
//! for the contexts a calibration grid holds. `tiled` is FlashAttention's
//! online softmax (Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 1;
//! Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018):
//! it walks the cache in blocks of `block` keys, keeping per row a running
//! maximum `m`, a running sum `l` of `exp(s − m)` and an unnormalised output,
//! each rescaled by `exp(m_old − m_new)` when a block raises the maximum, and
//! divides by `l` once at the end. Its working set is `[kv_heads, rows,
//! block]` whatever the context, which is what lets GPU kernels keep a tile
//! in on-chip memory; here it bounds the score memory of long prefills.

use crate::error::Result;
use candle_core::{Tensor, D};

/// How the live model's attention is computed (`naive` by default: it is
/// the faster of the two on candle's CPU kernels at calibration contexts;
/// see docs/calibration.md, "Tiled attention").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attention {
    /// One score matrix over the whole context, then softmax.
    Naive,
    /// Blocks of `block` keys with an online softmax.
    Tiled { block: usize },
}

impl Attention {
    /// The key block a tiled run uses unless told otherwise.
    pub const DEFAULT_BLOCK: usize = 256;

    /// Parses `naive`, `tiled` or `tiled:BLOCK`.
    pub fn parse(s: &str) -> std::result::Result<Attention, String> {
        let bad = || {
            format!("attention `{s}`: expected `naive`, `tiled` or `tiled:BLOCK` (BLOCK a whole number of keys from 1 to 65536)")
        };
        match s {
            "naive" => Ok(Attention::Naive),
            "tiled" => Ok(Attention::Tiled {
                block: Self::DEFAULT_BLOCK,
            }),
            _ => {
                let block: usize = s
                    .strip_prefix("tiled:")
                    .ok_or_else(bad)?
                    .parse()
                    .map_err(|_| bad())?;
                if !(1..=65_536).contains(&block) {
                    return Err(bad());
                }
                Ok(Attention::Tiled { block })
            }
        }
    }

    /// The name [`Attention::parse`] reads back: `naive` or `tiled:BLOCK`.
    pub fn name(self) -> String {
        match self {
            Attention::Naive => "naive".into(),
            Attention::Tiled { block } => format!("tiled:{block}"),
        }
    }

    /// Attention output `[kv_heads, rows, head_dim]` of queries `q`
    /// `[kv_heads, rows, head_dim]` (pre-scaled by 1/√d) over keys and values
    /// `[kv_heads, context, head_dim]`, with an additive `mask` `[rows,
    /// context]` (0 or −∞) when some rows may not see every key.
    pub fn attend(
        self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        match self {
            Attention::Naive => naive(q, k, v, mask),
            Attention::Tiled { block } => tiled(q, k, v, mask, block),
        }
    }
}

fn naive(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    let mut scores = q.matmul(&k.t()?)?;
    if let Some(m) = mask {
        scores = scores.broadcast_add(m)?;
    }
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    Ok(probs.matmul(v)?)
}

fn tiled(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    block: usize,
) -> Result<Tensor> {
    let context = k.dim(1)?;
    let mut run: Option<(Tensor, Tensor, Tensor)> = None; // (m, l, acc)
    let mut start = 0;
    while start < context {
        let b = block.min(context - start);
        let kb = k.narrow(1, start, b)?;
        let vb = v.narrow(1, start, b)?;
        let mut s = q.matmul(&kb.t()?)?;
        if let Some(m) = mask {
            s = s.broadcast_add(&m.narrow(1, start, b)?)?;
        }
        let block_max = s.max_keepdim(D::Minus1)?;
        run = Some(match run {
            // The first block holds key 0, which every row sees (causal
            // masks hide only later keys), so its maximum is finite.
            None => {
                let p = s.broadcast_sub(&block_max)?.exp()?;
                let l = p.sum_keepdim(D::Minus1)?;
                (block_max, l, p.matmul(&vb)?)
            }
            Some((m, l, acc)) => {
                let m_new = m.maximum(&block_max)?;
                let rescale = (&m - &m_new)?.exp()?;
                let p = s.broadcast_sub(&m_new)?.exp()?;
                let l = ((l * &rescale)? + p.sum_keepdim(D::Minus1)?)?;
                let acc = (acc.broadcast_mul(&rescale)? + p.matmul(&vb)?)?;
                (m_new, l, acc)
            }
        });
        start += b;
    }
    let (_, l, acc) = run.ok_or_else(|| crate::error::input("attention over an empty cache"))?;
    Ok(acc.broadcast_div(&l)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use rand::{Rng, SeedableRng};

    fn random(shape: (usize, usize, usize), rng: &mut rand_chacha::ChaCha8Rng) -> Tensor {
        let n = shape.0 * shape.1 * shape.2;
        let v: Vec<f32> = (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    /// The additive causal mask of `n` new rows (times `group` heads) on
    /// `cached` keys, as the forward pass builds it.
    fn causal(n: usize, cached: usize, group: usize) -> Tensor {
        let len = cached + n;
        let mut m = vec![0f32; group * n * len];
        for gi in 0..group {
            for i in 0..n {
                for x in &mut m[(gi * n + i) * len + cached + i + 1..(gi * n + i + 1) * len] {
                    *x = f32::NEG_INFINITY;
                }
            }
        }
        Tensor::from_vec(m, (group * n, len), &Device::Cpu).unwrap()
    }

    fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
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

    /// Online softmax gives naive attention's result to f32 rounding on
    /// decode rows, prefill chunks with causal masks, contexts shorter than
    /// a block, not a multiple of it, and many blocks long.
    #[test]
    fn tiled_attention_agrees_with_naive_softmax() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // (kv heads, group, new rows, cached keys, head dim, block)
        let shapes = [
            (2, 4, 1, 999, 64, 256),
            (1, 1, 1, 5, 16, 256),
            (4, 2, 17, 300, 32, 64),
            (2, 3, 64, 0, 64, 16),
            (8, 1, 5, 4096, 128, 256),
            (2, 2, 33, 31, 8, 7),
        ];
        let mut worst = 0f32;
        for (kv, group, n, cached, d, block) in shapes {
            let len = cached + n;
            let q = (random((kv, group * n, d), &mut rng) * (1.0 / (d as f64).sqrt())).unwrap();
            let k = random((kv, len, d), &mut rng);
            let v = random((kv, len, d), &mut rng);
            let mask = (n > 1).then(|| causal(n, cached, group));
            let want = Attention::Naive.attend(&q, &k, &v, mask.as_ref()).unwrap();
            let got = Attention::Tiled { block }
                .attend(&q, &k, &v, mask.as_ref())
                .unwrap();
            assert_eq!(got.dims(), want.dims());
            let err = max_abs_diff(&got, &want);
            assert!(
                err < 1e-5,
                "kv {kv} group {group} rows {n} cached {cached} d {d} block {block}: max abs error {err}"
            );
            worst = worst.max(err);
        }
        eprintln!(
            "tiled vs naive attention: max abs error {worst:e} over {} shapes",
            shapes.len()
        );
    }

    /// A causal row that sees one key of a block and none of the next keeps
    /// its value: masked blocks add nothing.
    #[test]
    fn fully_masked_blocks_add_nothing() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let (n, d) = (40, 8);
        let q = random((1, n, d), &mut rng);
        let k = random((1, n, d), &mut rng);
        let v = random((1, n, d), &mut rng);
        let mask = causal(n, 0, 1);
        let want = Attention::Naive.attend(&q, &k, &v, Some(&mask)).unwrap();
        let got = Attention::Tiled { block: 4 }
            .attend(&q, &k, &v, Some(&mask))
            .unwrap();
        assert!(max_abs_diff(&got, &want) < 1e-5);
        // Row 0 sees only key 0: its output is V's first row exactly.
        let row0 = got.narrow(1, 0, 1).unwrap().flatten_all().unwrap();
        let v0 = v.narrow(1, 0, 1).unwrap().flatten_all().unwrap();
        assert!(max_abs_diff(&row0, &v0) < 1e-6);
        assert_eq!(got.dtype(), DType::F32);
    }

    #[test]
    fn the_flag_parses_and_names_what_is_allowed() {
        assert_eq!(Attention::parse("naive"), Ok(Attention::Naive));
        assert_eq!(
            Attention::parse("tiled"),
            Ok(Attention::Tiled {
                block: Attention::DEFAULT_BLOCK
            })
        );
        assert_eq!(
            Attention::parse("tiled:64"),
            Ok(Attention::Tiled { block: 64 })
        );
        for bad in ["flash", "tiled:0", "tiled:x", "tiled:100000", ""] {
            let e = Attention::parse(bad).unwrap_err();
            assert!(
                e.contains("expected `naive`, `tiled` or `tiled:BLOCK`"),
                "{bad}: {e}"
            );
        }
    }
}
