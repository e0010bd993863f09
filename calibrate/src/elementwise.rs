//! RMSNorm eager against fused on the calibration device: numerical
//! agreement and synchronized timings, recorded in the profile
//! (`sim::profile::ElementwiseExperiment`, where the two forms are
//! described).
//!
//! The eager form is candle-nn's `rms_norm_slow`, composed of tensor
//! operations exactly as Hugging Face's `LlamaRMSNorm` composes them in
//! PyTorch eager mode (upcast to f32, square, reduce, add ε, square root,
//! divide, downcast, scale by the weight); the fused form is candle-nn's
//! `rms_norm`, one kernel per row as vLLM's `rms_norm` CUDA kernel is.

use crate::device::{DeviceSpec, OpenDevice};
use crate::error::Result;
use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use sim::profile::{ElementwiseCase, ElementwiseExperiment, TimingClock};
use std::time::Instant;

/// The ε of Llama-family RMSNorm (`rms_norm_eps` of Llama 2 and 3).
pub const EPS: f32 = 1e-5;

/// The rows (tokens) normalized at once: one decode token up to a
/// prefill chunk.
fn token_counts(quick: bool) -> &'static [usize] {
    if quick {
        &[1, 32, 512]
    } else {
        &[1, 16, 128, 1024, 4096]
    }
}

/// The dtypes measured: f32, and the half-precision types engines serve in.
fn dtypes(quick: bool) -> &'static [DType] {
    if quick {
        &[DType::F32, DType::BF16]
    } else {
        &[DType::F32, DType::F16, DType::BF16]
    }
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => "f32",
    }
}

/// Runs the experiment at the model's `hidden` size; `quick` measures
/// fewer shapes and repetitions.
pub fn rms_norm_experiment(
    dev: &OpenDevice,
    hidden: usize,
    quick: bool,
    seed: u64,
) -> Result<ElementwiseExperiment> {
    let (warmup, repetitions) = if quick { (2, 7) } else { (5, 31) };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x0072_6d73_6e6f_726d);
    let mut cases = vec![];
    for &dtype in dtypes(quick) {
        for &tokens in token_counts(quick) {
            cases.push(one_case(
                dev,
                tokens,
                hidden,
                dtype,
                warmup,
                repetitions,
                &mut rng,
            )?);
        }
    }
    Ok(ElementwiseExperiment {
        op: "rms_norm".into(),
        eager: "candle-nn rms_norm_slow: to f32, sqr, sum / hidden, + eps, sqrt, divide, to dtype, × weight (Hugging Face LlamaRMSNorm's eager composition)".into(),
        fused: "candle-nn rms_norm: one kernel per row".into(),
        eps: EPS as f64,
        clock: match dev.spec {
            DeviceSpec::Cuda(_) => TimingClock::CudaEvents,
            _ => TimingClock::HostWall,
        },
        repetitions,
        cases,
    })
}

fn one_case(
    dev: &OpenDevice,
    tokens: usize,
    hidden: usize,
    dtype: DType,
    warmup: u32,
    repetitions: u32,
    rng: &mut impl Rng,
) -> Result<ElementwiseCase> {
    // Activations of unit scale and a weight near one, as trained models
    // have them.
    let xs: Vec<f32> = (0..tokens * hidden)
        .map(|_| rng.random_range(-2.0f32..2.0))
        .collect();
    let ws: Vec<f32> = (0..hidden).map(|_| rng.random_range(0.5f32..1.5)).collect();
    let x = Tensor::from_vec(xs, (tokens, hidden), &Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(&dev.device)?;
    let w = Tensor::from_vec(ws, hidden, &Device::Cpu)?
        .to_dtype(dtype)?
        .to_device(&dev.device)?;
    let eager = || -> Result<Tensor> { Ok(candle_nn::ops::rms_norm_slow(&x, &w, EPS)?) };
    let fused = || -> Result<Tensor> { Ok(candle_nn::ops::rms_norm(&x, &w, EPS)?) };

    let mut eager_ns = Vec::with_capacity(repetitions as usize);
    let mut fused_ns = Vec::with_capacity(repetitions as usize);
    for round in 0..warmup + repetitions {
        // Alternate which form goes first, so neither always runs on a
        // cache the other warmed.
        let eager_first = round % 2 == 0;
        for pick_eager in [eager_first, !eager_first] {
            let t = if pick_eager {
                timed(dev, eager)?
            } else {
                timed(dev, fused)?
            };
            if round >= warmup {
                if pick_eager {
                    eager_ns.push(t);
                } else {
                    fused_ns.push(t);
                }
            }
        }
    }

    // Agreement, on the host, against an f64 reference from the inputs as
    // rounded to `dtype`.
    let to_host = |t: &Tensor| -> Result<Vec<f32>> {
        Ok(t.to_dtype(DType::F32)?
            .to_device(&Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f32>()?)
    };
    let (xr, wr) = (to_host(&x)?, to_host(&w)?);
    let (e, f) = (to_host(&eager()?)?, to_host(&fused()?)?);
    let mut reference = Vec::with_capacity(xr.len());
    for row in xr.chunks(hidden) {
        let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / hidden as f64;
        let scale = 1.0 / (ms + EPS as f64).sqrt();
        reference.extend(
            row.iter()
                .zip(&wr)
                .map(|(&v, &g)| v as f64 * scale * g as f64),
        );
    }
    let max_abs = |a: &[f32], b: &[f64]| {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| (x as f64 - y).abs())
            .fold(0.0, f64::max)
    };
    let diffs = e.iter().zip(&f).map(|(&a, &b)| (a as f64 - b as f64).abs());
    let (max_abs_diff, sum) = diffs.fold((0.0f64, 0.0f64), |(m, s), d| (m.max(d), s + d));
    Ok(ElementwiseCase {
        dtype: dtype_name(dtype).into(),
        tokens: tokens as u32,
        hidden: hidden as u32,
        eager_ns: median(eager_ns),
        fused_ns: median(fused_ns),
        max_abs_diff,
        mean_abs_diff: sum / e.len().max(1) as f64,
        eager_max_abs_error: max_abs(&e, &reference),
        fused_max_abs_error: max_abs(&f, &reference),
    })
}

/// One synchronized timing of `op`, ns: the device's own clock where it
/// has one (CUDA events), else the host's clock around a region the device
/// was synchronized before and after.
fn timed(dev: &OpenDevice, op: impl FnOnce() -> Result<Tensor> + Send) -> Result<u64> {
    dev.synchronize()?;
    let t0 = Instant::now();
    let (_out, device_ns) = dev.device_time(|| dev.device.with_context(op))?;
    let wall = t0.elapsed().as_nanos() as u64;
    Ok(device_ns.unwrap_or(wall).max(1))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    let n = v.len();
    if n == 0 {
        return 1;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eager_and_fused_rms_norm_agree_and_are_timed_on_the_host_clock_on_cpu() {
        let dev = OpenDevice::open(DeviceSpec::Cpu, Some(1)).unwrap();
        let e = rms_norm_experiment(&dev, 64, true, 7).unwrap();
        assert_eq!(e.clock, TimingClock::HostWall);
        assert_eq!(e.cases.len(), 6);
        e.check().unwrap();
        for c in &e.cases {
            assert!(c.eager_ns > 0 && c.fused_ns > 0);
            // f32 forms agree to rounding; bf16 outputs to its 8-bit
            // mantissa (ulp 2^-7 of values up to ~|2 × 1.5 × √h / ‖x‖|).
            let tol = if c.dtype == "f32" { 1e-5 } else { 0.05 };
            assert!(c.max_abs_diff <= tol, "{c:?}");
            assert!(
                c.eager_max_abs_error <= tol && c.fused_max_abs_error <= tol,
                "{c:?}"
            );
            assert!(c.mean_abs_diff <= c.max_abs_diff);
        }
    }

    #[test]
    fn the_median_of_timings_is_the_middle_one() {
        assert_eq!(median(vec![5, 1, 3]), 3);
        assert_eq!(median(vec![4, 1, 3, 2]), 2);
    }
}
