//! Weight formats of the decoder's linear layers: the projections of every
//! block (fused QKV, attention output, fused gate/up, down) kept dense, or
//! converted to 8 or 4 bits. Embeddings, norms and the LM head stay in the
//! model's dtype, as in LLM.int8() (Dettmers et al. 2022) and llama.cpp's
//! default quantization mixes, which leave the first and last layers alone.
//!
//! - `int8`: symmetric **per-output-channel** weight-only INT8 (W8A16 in
//!   vLLM's terms; the scheme of Dettmers et al.'s absmax baseline without
//!   the outlier decomposition): one f32 scale per row, `s = max|w| / 127`,
//!   `q = round(w / s)`. Activations stay in full precision, so a weight that
//!   is an exact multiple of its row's scale is reproduced exactly. candle
//!   has no INT8 matrix kernel, so the step widens the INT8 matrix to f32
//!   before each product: memory is saved, time on the CPU is not.
//! - `q8_0`, `q4_0`: llama.cpp's GGML block formats through candle's
//!   quantized kernels: **per-group** scales, one f16 scale per 32 weights
//!   (`q4_0`: 4-bit values with an offset of 8). On the CPU the kernels also
//!   quantize each activation row to 8 bits per 32-group inside the dot
//!   product (W8A8 / W4A8), which is where their speed comes from.

use crate::error::{input, Result};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Module, Tensor};
use candle_nn::Linear;

/// How a block's linear layers hold their weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinearFormat {
    /// The model's dtype (f32, f16, bf16).
    Dense,
    /// Per-output-channel symmetric INT8, weight-only.
    Int8,
    /// GGML Q8_0: 8 bits, one scale per group of 32.
    Q8_0,
    /// GGML Q4_0: 4 bits, one scale per group of 32.
    Q4_0,
}

impl LinearFormat {
    /// Parses a format name; `flag` names the option in the error.
    pub fn parse(s: &str, flag: &str) -> Result<LinearFormat> {
        match s {
            "int8" => Ok(LinearFormat::Int8),
            "q8_0" => Ok(LinearFormat::Q8_0),
            "q4_0" => Ok(LinearFormat::Q4_0),
            _ => Err(input(format!(
                "{flag}: unknown weight format {s:?}; allowed: int8 (per-channel INT8, weight-only), q8_0, q4_0 (GGML, per group of 32)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LinearFormat::Dense => "dense",
            LinearFormat::Int8 => "int8",
            LinearFormat::Q8_0 => "q8_0",
            LinearFormat::Q4_0 => "q4_0",
        }
    }

    /// What the scales cover, for reports.
    pub fn scales(self) -> &'static str {
        match self {
            LinearFormat::Dense => "none",
            LinearFormat::Int8 => "per output channel (f32), weight-only",
            LinearFormat::Q8_0 | LinearFormat::Q4_0 => {
                "per group of 32 weights (f16); activations 8-bit per group on CPU"
            }
        }
    }
}

/// One linear layer, `y = x Wᵀ + b`, in one of the formats.
pub enum Proj {
    Dense(Linear),
    /// `q` holds `round(w / s) + 128` as u8 (candle has no i8 dtype),
    /// `scale` is `[out, 1]` f32.
    Int8 {
        q: Tensor,
        scale: Tensor,
        bias: Option<Tensor>,
    },
    Ggml {
        mm: QMatMul,
        bytes: usize,
        bias: Option<Tensor>,
    },
}

impl Proj {
    pub fn dense(weight: Tensor, bias: Option<Tensor>) -> Proj {
        Proj::Dense(Linear::new(weight, bias))
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (y, bias) = match self {
            Proj::Dense(l) => return Ok(l.forward(x)?),
            Proj::Int8 { q, scale, bias } => {
                let w =
                    ((q.to_dtype(x.dtype())? - 128.0)?.broadcast_mul(&scale.to_dtype(x.dtype())?))?;
                (x.matmul(&w.t()?)?, bias)
            }
            Proj::Ggml { mm, bias, .. } => (mm.forward(x)?, bias),
        };
        Ok(match bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }

    /// Bytes its weights (and scales) take.
    pub fn bytes(&self) -> usize {
        let t = |t: &Tensor| t.elem_count() * t.dtype().size_in_bytes();
        match self {
            Proj::Dense(l) => t(l.weight()) + l.bias().map_or(0, t),
            Proj::Int8 { q, scale, bias } => t(q) + t(scale) + bias.as_ref().map_or(0, t),
            Proj::Ggml { bytes, bias, .. } => bytes + bias.as_ref().map_or(0, t),
        }
    }

    /// This layer's weights converted to `fmt`; `name` names the layer in
    /// errors. Only a dense layer converts.
    pub fn convert(&self, fmt: LinearFormat, name: &str) -> Result<Proj> {
        let Proj::Dense(l) = self else {
            return Err(input(format!(
                "{name}: only dense weights can be quantized"
            )));
        };
        let bias = l.bias().cloned();
        let w = l.weight();
        match fmt {
            LinearFormat::Dense => Ok(Proj::dense(w.clone(), bias)),
            LinearFormat::Int8 => {
                let (q, scale) = int8_per_channel(w)?;
                Ok(Proj::Int8 { q, scale, bias })
            }
            LinearFormat::Q8_0 | LinearFormat::Q4_0 => {
                let cols = w.dim(1)?;
                if cols % 32 != 0 {
                    return Err(input(format!(
                        "{name}: {} needs rows of a multiple of 32 weights, this layer's rows have {cols}",
                        fmt.name()
                    )));
                }
                let dt = if fmt == LinearFormat::Q8_0 {
                    GgmlDType::Q8_0
                } else {
                    GgmlDType::Q4_0
                };
                let qt = QTensor::quantize(&w.to_dtype(DType::F32)?, dt)?;
                let bytes = qt.storage_size_in_bytes();
                Ok(Proj::Ggml {
                    mm: QMatMul::from_qtensor(qt)?,
                    bytes,
                    bias,
                })
            }
        }
    }
}

/// Symmetric per-row INT8: `s = max|w| / 127` (1 for an all-zero row),
/// `q = clamp(round(w / s), −127, 127)`, stored offset by 128 as u8.
fn int8_per_channel(w: &Tensor) -> Result<(Tensor, Tensor)> {
    let dev = w.device();
    let rows = w.to_dtype(DType::F32)?.to_vec2::<f32>()?;
    let mut q = Vec::with_capacity(rows.len() * rows.first().map_or(0, Vec::len));
    let mut scales = Vec::with_capacity(rows.len());
    for row in &rows {
        let amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let s = if amax > 0.0 { amax / 127.0 } else { 1.0 };
        scales.push(s);
        q.extend(
            row.iter()
                .map(|v| ((v / s).round().clamp(-127.0, 127.0) + 128.0) as u8),
        );
    }
    let (r, c) = w.dims2()?;
    Ok((
        Tensor::from_vec(q, (r, c), dev)?,
        Tensor::from_vec(scales, (r, 1), dev)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn int8_reproduces_exact_multiples_of_the_row_scale_and_rounds_others() {
        let dev = Device::Cpu;
        // Row 0: multiples of 2^-7 with max 127·2^-7 (exact). Row 1: not.
        let w0: Vec<f32> = [127, -3, 0, 64].iter().map(|&k| k as f32 / 128.0).collect();
        let w1 = vec![0.3f32, -0.1, 0.77, 0.01];
        let w = Tensor::from_vec([w0.clone(), w1.clone()].concat(), (2, 4), &dev).unwrap();
        let p = Proj::dense(w.clone(), None)
            .convert(LinearFormat::Int8, "t")
            .unwrap();
        let eye = Tensor::eye(4, DType::F32, &dev).unwrap();
        let back = p
            .forward(&eye)
            .unwrap()
            .t()
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        assert_eq!(back[0], w0);
        assert_ne!(back[1], w1);
        for (a, b) in back[1].iter().zip(&w1) {
            assert!((a - b).abs() <= 0.77 / 127.0 / 2.0 + 1e-7, "{a} vs {b}");
        }
        // 8 bytes of values + 2 scales of 4 bytes, vs 32 bytes dense.
        assert_eq!(p.bytes(), 16);
    }

    #[test]
    fn ggml_formats_need_rows_of_32_and_save_memory() {
        let dev = Device::Cpu;
        // Seeded draws: candle's CPU `randn` cannot be seeded, and an unlucky
        // draw pushed q8's error past the bound about once in a few hundred runs.
        let unit = |rows: usize, cols: usize, seed: u64| {
            use rand::{Rng, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let a = 3f32.sqrt(); // uniform on [-a, a] has unit variance
            let v: Vec<f32> = (0..rows * cols).map(|_| rng.random_range(-a..a)).collect();
            Tensor::from_vec(v, (rows, cols), &dev).unwrap()
        };
        let w = unit(8, 30, 1);
        let e = Proj::dense(w, None)
            .convert(LinearFormat::Q4_0, "layer 3 down")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("layer 3 down: q4_0 needs rows of a multiple of 32"),
            "{e}"
        );
        let w = unit(8, 64, 2);
        let d = Proj::dense(w.clone(), None);
        let q8 = d.convert(LinearFormat::Q8_0, "x").unwrap();
        let q4 = d.convert(LinearFormat::Q4_0, "x").unwrap();
        // GGML: Q8_0 is 34 bytes per 32 weights, Q4_0 18.
        assert_eq!((d.bytes(), q8.bytes(), q4.bytes()), (2048, 544, 288));
        let x = unit(3, 64, 3);
        let want = d.forward(&x).unwrap();
        let err = |p: &Proj| {
            (p.forward(&x).unwrap() - &want)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        };
        assert!(
            err(&q8) < 0.2 && err(&q8) < err(&q4),
            "{} {}",
            err(&q8),
            err(&q4)
        );
    }
}
