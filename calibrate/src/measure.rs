//! Timing batches on the device: the grid of shapes a calibration measures
//! (prefill of n new tokens on c cached ones, decode of B sequences at
//! context l, a few mixed batches, and random shapes held out of the fit),
//! and the timing of one shape — warm-up, repetitions, device synchronized
//! before the clock is read, median and spread kept.
//!
//! Caches are filled with [`SeqCache::pretend_filled`]: the cost of a step
//! does not depend on the cached values, so a decode at context 2048 is set
//! up without running a 2048-token prefill first.

use crate::device::OpenDevice;
use crate::error::Result;
use crate::model::{greedy_tokens, Model, SeqCache, Step};
use rand::{Rng, SeedableRng};
use sim::profile::Sample;
use std::time::Instant;

/// One batch to time.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// `prefill`, `decode` or `mixed`.
    pub kind: &'static str,
    pub fitted: bool,
    /// (new tokens n, cached tokens c) per prefilling sequence.
    pub prefill: Vec<(usize, usize)>,
    /// Context per decoding sequence, its new token included.
    pub decode: Vec<usize>,
}

impl Shape {
    pub fn tokens(&self) -> usize {
        self.prefill.iter().map(|p| p.0).sum::<usize>() + self.decode.len()
    }

    /// KV tokens its caches hold at the end of the step.
    pub fn kv_tokens(&self) -> usize {
        self.prefill.iter().map(|p| p.0 + p.1).sum::<usize>() + self.decode.iter().sum::<usize>()
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct Grid {
    /// Token knots of the dense-layer table: 1, 2, 3, 4, 6, …, `max_tokens`.
    pub token_knots: Vec<u32>,
    /// Row knots (sequences per batch): 1, 2, 3, 4, 6, …, `max_seqs`.
    pub row_knots: Vec<u32>,
    pub shapes: Vec<Shape>,
    pub warmup: u32,
    pub repetitions: u32,
    pub max_context: usize,
}

/// Knots 1, 2, 3, 4, 6, 8, 12, 16, … (powers of two and the midpoints
/// between them) up to `max`: CPU GEMM kernels change strategy with the row
/// count (a one-row product is a GEMV, a two-row one packs the whole weight
/// matrix), so small batches need dense knots.
fn knots(max: usize) -> Vec<u32> {
    let mut v = vec![];
    let mut k = 1usize;
    while k < max {
        v.push(k as u32);
        if k >= 2 && k + k / 2 < max {
            v.push((k + k / 2) as u32);
        }
        k *= 2;
    }
    v.push(max as u32);
    v
}

/// Plans the grid for a model whose caches may hold `max_context` tokens
/// and whose KV takes `kv_bytes_per_token`; `quick` trades coverage for
/// time. Batches whose caches would pass `kv_budget_bytes` are skipped.
pub fn plan(
    max_context: usize,
    quick: bool,
    kv_bytes_per_token: usize,
    kv_budget_bytes: f64,
    seed: u64,
) -> Grid {
    let max_tokens = max_context.min(if quick { 512 } else { 1024 });
    let max_seqs = if quick { 32 } else { 64 };
    let token_knots = knots(max_tokens);
    let row_knots = knots(max_seqs);
    let fits = |s: &Shape| (s.kv_tokens() * kv_bytes_per_token) as f64 <= kv_budget_bytes;
    let mut shapes = vec![];
    let cached: Vec<usize> = if quick {
        vec![0, max_context / 2]
    } else {
        vec![0, max_context / 4, max_context / 2]
    };
    for &n in token_knots.iter().filter(|&&n| n >= 4) {
        for &c in &cached {
            if c + n as usize <= max_context {
                shapes.push(Shape {
                    kind: "prefill",
                    fitted: true,
                    prefill: vec![(n as usize, c)],
                    decode: vec![],
                });
            }
        }
    }
    let contexts: Vec<usize> = if quick {
        vec![32, max_context / 4, max_context]
    } else {
        vec![16, 128, max_context / 4, max_context / 2, max_context]
    };
    for &b in &row_knots {
        for &l in &contexts {
            shapes.push(Shape {
                kind: "decode",
                fitted: true,
                prefill: vec![],
                decode: vec![l.max(2); b as usize],
            });
        }
    }
    // Mixed batches (a chunk plus decodes) separate the token table from
    // the row table, which pure prefills (one row) and pure decodes (as
    // many rows as tokens) cannot; several chunks at once check the
    // per-prefill terms.
    for n in [max_tokens / 32, max_tokens / 8, max_tokens * 3 / 8] {
        for b in [1, 3, 6, 12] {
            shapes.push(Shape {
                kind: "mixed",
                fitted: true,
                prefill: vec![(n.max(1), max_context / 8)],
                decode: vec![(max_context / 4).max(2); b],
            });
        }
    }
    for chunks in [2, 3] {
        let n = (max_tokens / 4 / chunks).max(1);
        shapes.push(Shape {
            kind: "prefill",
            fitted: true,
            prefill: (0..chunks).map(|i| (n, i * max_context / 8)).collect(),
            decode: vec![],
        });
        shapes.push(Shape {
            kind: "mixed",
            fitted: true,
            prefill: (0..chunks).map(|i| (n, i * max_context / 8)).collect(),
            decode: vec![(max_context / 2).max(2); 4],
        });
    }
    // Held out: random shapes like a serving run's, with uneven contexts.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x0005_EED0_FF17);
    let held = if quick { 12 } else { 24 };
    let mut made = 0;
    while made < held {
        let kind = ["decode", "prefill", "mixed"][made % 3];
        let mut s = Shape {
            kind,
            fitted: false,
            prefill: vec![],
            decode: vec![],
        };
        if kind != "decode" {
            let n = rng.random_range(8..=max_tokens.max(9) * 3 / 4);
            let c = rng.random_range(0..=max_context - n.min(max_context));
            s.prefill.push((n, c));
        }
        if kind != "prefill" {
            let b = rng.random_range(1..=max_seqs);
            let room = max_tokens.saturating_sub(s.tokens()).max(1);
            for _ in 0..b.min(room) {
                s.decode.push(rng.random_range(8..=max_context));
            }
        }
        if fits(&s) {
            shapes.push(s);
            made += 1;
        }
    }
    shapes.retain(|s| fits(s));
    Grid {
        token_knots,
        row_knots,
        shapes,
        warmup: 1,
        repetitions: if quick { 7 } else { 11 },
        max_context,
    }
}

/// One packed forward pass and greedy sampling on the device, in the
/// device's context (the CPU backend's own thread pool), synchronized: what
/// the live engine runs each iteration, so calibration times the same step.
pub fn run_step(dev: &OpenDevice, model: &Model, steps: &mut [Step<'_>]) -> Result<Vec<u32>> {
    let tokens = dev.device.with_context(|| model.greedy(steps))?;
    dev.synchronize()?;
    Ok(tokens)
}

/// One step as [`run_step`] runs it, timed whole and in its host part, ns:
/// `(wall, host)`. The host part is what the device's clock leaves out
/// where it has one (CUDA: the wall time beyond the span of the forward
/// pass's events, the sampler and the copy of the tokens back included);
/// on CPU, where host and device are the same cores, the sampler's argmax
/// over the vocabulary and the copy of the tokens out, timed apart from the
/// forward pass (`sim::profile::MeasuredHost`).
pub fn timed_step(dev: &OpenDevice, model: &Model, steps: &mut [Step<'_>]) -> Result<(u64, u64)> {
    dev.synchronize()?;
    let t0 = Instant::now();
    let (logits, device_ns) =
        dev.device_time(|| dev.device.with_context(|| model.forward(steps)))?;
    let t1 = Instant::now();
    dev.device.with_context(|| greedy_tokens(&logits))?;
    dev.synchronize()?;
    let wall = t0.elapsed().as_nanos() as u64;
    let host = match device_ns {
        Some(d) => wall.saturating_sub(d),
        None => t1.elapsed().as_nanos() as u64,
    };
    Ok((wall, host.min(wall)))
}

/// Times every shape `repetitions` times, in rounds: each round runs every
/// shape once, in a fresh random order, so that a slow spell of the machine
/// (another process, frequency scaling) spreads over all shapes instead of
/// biasing the few measured during it, and so that each step follows
/// different shapes, as in serving. The first `warmup` rounds are not kept.
pub fn time_shapes(
    dev: &OpenDevice,
    model: &Model,
    shapes: &[Shape],
    warmup: u32,
    repetitions: u32,
    rng: &mut impl Rng,
    progress: &mut dyn FnMut(usize, &Shape),
) -> Result<Vec<Sample>> {
    let mut times: Vec<Vec<u64>> = vec![Vec::with_capacity(repetitions as usize); shapes.len()];
    let mut hosts: Vec<Vec<u64>> = vec![Vec::with_capacity(repetitions as usize); shapes.len()];
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    let mut done = 0;
    for round in 0..warmup + repetitions {
        // Fisher–Yates with the seeded generator.
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        for &i in &order {
            let t = time_shape(dev, model, &shapes[i], 0, 1, rng)?;
            if round >= warmup {
                times[i].push(t.median_ns);
                hosts[i].extend(t.host_ns);
            }
            done += 1;
            progress(done, &shapes[i]);
        }
    }
    Ok(shapes
        .iter()
        .zip(times.into_iter().zip(hosts))
        .map(|(shape, (times, hosts))| sample(shape, times, hosts))
        .collect())
}

fn sample(shape: &Shape, times: Vec<u64>, mut hosts: Vec<u64>) -> Sample {
    let mut sorted = times.clone();
    sorted.sort_unstable();
    hosts.sort_unstable();
    Sample {
        kind: shape.kind.to_string(),
        fitted: shape.fitted,
        prefill: shape
            .prefill
            .iter()
            .map(|&(n, c)| [n as u32, c as u32])
            .collect(),
        decode: shape.decode.iter().map(|&l| l as u32).collect(),
        idle_ms: 0.0,
        median_ns: median(&sorted),
        min_ns: sorted[0],
        max_ns: sorted[sorted.len() - 1],
        times_ns: times,
        host_ns: (!hosts.is_empty()).then(|| median(&hosts)),
    }
}

/// Times `shape`: `warmup` untimed runs, then `repetitions` timed ones, each
/// on caches reset to the same cached lengths.
pub fn time_shape(
    dev: &OpenDevice,
    model: &Model,
    shape: &Shape,
    warmup: u32,
    repetitions: u32,
    rng: &mut impl Rng,
) -> Result<Sample> {
    let vocab = model.cfg.vocab_size as u32;
    let mut caches = Vec::new();
    let mut tokens: Vec<Vec<u32>> = Vec::new();
    let mut base = Vec::new();
    for &(n, c) in &shape.prefill {
        let mut cache = SeqCache::new(model, c + n)?;
        cache.pretend_filled(c)?;
        caches.push(cache);
        tokens.push((0..n).map(|_| rng.random_range(0..vocab)).collect());
        base.push(c);
    }
    for &l in &shape.decode {
        let mut cache = SeqCache::new(model, l)?;
        cache.pretend_filled(l - 1)?;
        caches.push(cache);
        tokens.push(vec![rng.random_range(0..vocab)]);
        base.push(l - 1);
    }
    let mut times = Vec::with_capacity(repetitions as usize);
    let mut hosts = Vec::with_capacity(repetitions as usize);
    for rep in 0..warmup + repetitions {
        for (c, &b) in caches.iter_mut().zip(&base) {
            c.truncate(b);
        }
        let mut steps: Vec<Step<'_>> = caches
            .iter_mut()
            .zip(&tokens)
            .map(|(cache, t)| Step { cache, tokens: t })
            .collect();
        let (ns, host) = timed_step(dev, model, &mut steps)?;
        if rep >= warmup {
            times.push(ns);
            hosts.push(host);
        }
    }
    Ok(sample(shape, times, hosts))
}

fn median(sorted: &[u64]) -> u64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    }
}

/// Idle spells after which the wake-up penalty is measured, ms.
pub const IDLE_KNOTS_MS: [f64; 7] = [0.0, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0];

/// Times a serving-sized prefill (64 tokens, fewer on tiny grids) run after
/// each idle spell of [`IDLE_KNOTS_MS`] — the device sits idle, then the
/// step runs, as when a request reaches an idle server — `repetitions`
/// times per spell, each right after a warm step of the same shape. A
/// device that drops into idle states runs that first step slower.
pub fn time_wake(
    dev: &OpenDevice,
    model: &Model,
    max_tokens: usize,
    repetitions: u32,
    rng: &mut impl Rng,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Sample>> {
    let shape = Shape {
        kind: "wake",
        fitted: true,
        prefill: vec![(max_tokens.min(64), 0)],
        decode: vec![],
    };
    let mut times: Vec<Vec<u64>> = vec![vec![]; IDLE_KNOTS_MS.len()];
    let mut done = 0;
    for _ in 0..repetitions {
        for (k, &idle) in IDLE_KNOTS_MS.iter().enumerate() {
            time_shape(dev, model, &shape, 0, 1, rng)?;
            std::thread::sleep(std::time::Duration::from_secs_f64(idle / 1e3));
            times[k].push(time_shape(dev, model, &shape, 0, 1, rng)?.median_ns);
            done += 1;
            progress(done);
        }
    }
    Ok(IDLE_KNOTS_MS
        .iter()
        .zip(times)
        .map(|(&idle, t)| Sample {
            idle_ms: idle,
            ..sample(&shape, t, vec![])
        })
        .collect())
}

/// Device-to-host copy bandwidth (what swapping KV moves over), bytes/s:
/// the best of three copies of a 64 MiB tensor.
pub fn host_copy_bandwidth(dev: &OpenDevice) -> Result<f64> {
    let n = 16 * 1024 * 1024;
    let t = candle_core::Tensor::zeros(n, candle_core::DType::F32, &dev.device)?;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        dev.synchronize()?;
        let t0 = Instant::now();
        let copy = match dev.spec {
            crate::device::DeviceSpec::Cpu => t.copy()?,
            _ => t.to_device(&candle_core::Device::Cpu)?,
        };
        dev.synchronize()?;
        best = best.min(t0.elapsed().as_secs_f64());
        drop(copy);
    }
    Ok((n * 4) as f64 / best.max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceSpec;
    use crate::model::tests::tiny_model;

    #[test]
    fn grid_covers_the_knots_and_holds_out_random_shapes() {
        let g = plan(512, true, 1000, 1e12, 1);
        assert_eq!(
            g.token_knots,
            vec![1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
        );
        assert_eq!(g.row_knots, vec![1, 2, 3, 4, 6, 8, 12, 16, 24, 32]);
        let held: Vec<&Shape> = g.shapes.iter().filter(|s| !s.fitted).collect();
        assert_eq!(held.len(), 12);
        assert!(held.iter().any(|s| s.kind == "mixed"));
        for s in &g.shapes {
            assert!(s.tokens() >= 1 && s.tokens() <= 512 + 32, "{s:?}");
            assert!(s.prefill.iter().all(|&(n, c)| n + c <= 512), "{s:?}");
            assert!(s.decode.iter().all(|&l| (2..=512).contains(&l)), "{s:?}");
        }
        // Every token knot ≥ 4 has a prefill, every row knot a decode.
        for &k in g.token_knots.iter().filter(|&&k| k >= 4) {
            assert!(g
                .shapes
                .iter()
                .any(|s| s.kind == "prefill" && s.prefill[0].0 == k as usize));
        }
        assert!(
            g.shapes
                .iter()
                .filter(|s| s.fitted && s.kind == "mixed")
                .count()
                >= 12
        );
        assert!(g.shapes.iter().any(|s| s.fitted && s.prefill.len() == 3));
        // A KV budget drops the largest batches.
        let small = plan(512, true, 1000, 1e6, 1);
        assert!(small
            .shapes
            .iter()
            .all(|s| s.kv_tokens() * 1000 <= 1_000_000));
    }

    #[test]
    fn timing_a_shape_keeps_every_repetition() {
        let dev = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
        let m = tiny_model(1);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let shape = Shape {
            kind: "mixed",
            fitted: true,
            prefill: vec![(12, 20)],
            decode: vec![5, 40],
        };
        let s = time_shape(&dev, &m, &shape, 1, 3, &mut rng).unwrap();
        assert_eq!(s.times_ns.len(), 3);
        assert!(s.min_ns <= s.median_ns && s.median_ns <= s.max_ns && s.min_ns > 0);
        assert_eq!(s.prefill, vec![[12, 20]]);
        let b = s.shape();
        assert_eq!(
            (b.prefill_tokens, b.decode_seqs, b.decode_context_tokens),
            (12, 2, 45)
        );
        assert!(host_copy_bandwidth(&dev).unwrap() > 1e8);
        let shapes = vec![
            shape.clone(),
            Shape {
                kind: "decode",
                fitted: false,
                prefill: vec![],
                decode: vec![9],
            },
        ];
        let mut seen = 0;
        let all = time_shapes(&dev, &m, &shapes, 1, 3, &mut rng, &mut |_, _| seen += 1).unwrap();
        assert_eq!(seen, 8);
        assert!(all.iter().all(|s| s.times_ns.len() == 3));
        assert_eq!(all[1].decode, vec![9]);
    }
}
