//! Fitting a profile's cost terms to measured samples: non-negative least
//! squares on relative error over the basis `sim::profiled::Basis` defines,
//! and the fit error on shapes held out of the fit, priced by the
//! simulator's own `Profiled` cost model.

use sim::profile::{CostTerms, FitError, MeasuredHost, Profile, Sample};
use sim::profiled::{Basis, Profiled};

/// Solves min ‖A x − b‖² subject to x ≥ 0 (Lawson & Hanson, "Solving Least
/// Squares Problems", 1974, ch. 23). `a` is row-major, m × n.
pub fn nnls(a: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let m = a.len();
    let n = a.first().map_or(0, Vec::len);
    // Columns scaled to unit norm: the normal equations stay well conditioned
    // although the features span many orders of magnitude.
    let norms: Vec<f64> = (0..n)
        .map(|j| {
            let s: f64 = (0..m).map(|i| a[i][j] * a[i][j]).sum();
            if s > 0.0 {
                s.sqrt()
            } else {
                1.0
            }
        })
        .collect();
    let col = |i: usize, j: usize| a[i][j] / norms[j];
    let mut x = vec![0.0; n];
    let mut passive = vec![false; n];
    let gradient = |x: &[f64]| -> Vec<f64> {
        let r: Vec<f64> = (0..m)
            .map(|i| b[i] - (0..n).map(|j| col(i, j) * x[j]).sum::<f64>())
            .collect();
        (0..n)
            .map(|j| (0..m).map(|i| col(i, j) * r[i]).sum())
            .collect()
    };
    let tol = 1e-10 * (m.max(n) as f64);
    for _ in 0..3 * n + 10 {
        let w = gradient(&x);
        let Some(t) = (0..n)
            .filter(|&j| !passive[j] && w[j] > tol)
            .max_by(|&p, &q| w[p].total_cmp(&w[q]))
        else {
            break;
        };
        passive[t] = true;
        loop {
            let z = solve_on(&col, m, n, b, &passive);
            if (0..n).all(|j| !passive[j] || z[j] > 0.0) {
                x = z;
                break;
            }
            // Step from x toward z until the first passive coefficient hits 0.
            let alpha = (0..n)
                .filter(|&j| passive[j] && z[j] <= 0.0)
                .map(|j| x[j] / (x[j] - z[j]))
                .fold(f64::INFINITY, f64::min);
            for j in 0..n {
                x[j] += alpha * (z[j] - x[j]);
                if passive[j] && x[j] <= 1e-15 {
                    passive[j] = false;
                    x[j] = 0.0;
                }
            }
            if !passive.iter().any(|&p| p) {
                break;
            }
        }
    }
    x.iter().zip(&norms).map(|(v, s)| v / s).collect()
}

/// Unconstrained least squares on the passive columns (normal equations,
/// Cholesky with a whisker of ridge), zero elsewhere.
// Index loops read as the textbook algorithm; iterators would hide it.
#[allow(clippy::needless_range_loop)]
fn solve_on(
    col: &dyn Fn(usize, usize) -> f64,
    m: usize,
    n: usize,
    b: &[f64],
    passive: &[bool],
) -> Vec<f64> {
    let idx: Vec<usize> = (0..n).filter(|&j| passive[j]).collect();
    let k = idx.len();
    let mut g = vec![vec![0.0; k]; k];
    let mut rhs = vec![0.0; k];
    for i in 0..m {
        for (p, &jp) in idx.iter().enumerate() {
            let v = col(i, jp);
            rhs[p] += v * b[i];
            for (q, &jq) in idx.iter().enumerate().take(p + 1) {
                g[p][q] += v * col(i, jq);
            }
        }
    }
    for p in 0..k {
        for q in 0..p {
            g[q][p] = g[p][q];
        }
        g[p][p] += 1e-12;
    }
    let sol = cholesky_solve(g, rhs);
    let mut z = vec![0.0; n];
    for (p, &j) in idx.iter().enumerate() {
        z[j] = sol[p];
    }
    z
}

#[allow(clippy::needless_range_loop)]
fn cholesky_solve(mut g: Vec<Vec<f64>>, mut r: Vec<f64>) -> Vec<f64> {
    let k = r.len();
    for j in 0..k {
        let mut d = g[j][j];
        for p in 0..j {
            d -= g[j][p] * g[j][p];
        }
        let d = d.max(1e-300).sqrt();
        g[j][j] = d;
        for i in j + 1..k {
            let mut s = g[i][j];
            for p in 0..j {
                s -= g[i][p] * g[j][p];
            }
            g[i][j] = s / d;
        }
    }
    for i in 0..k {
        for p in 0..i {
            r[i] -= g[i][p] * r[p];
        }
        r[i] /= g[i][i];
    }
    for i in (0..k).rev() {
        for p in i + 1..k {
            r[i] -= g[p][i] * r[p];
        }
        r[i] /= g[i][i];
    }
    r
}

/// Fits the cost terms to the samples marked `fitted`, minimizing the
/// squared *relative* error (every shape counts alike, short steps as much
/// as long prefills). Every coefficient is kept non-negative (NNLS), which
/// makes the fit physically plausible: the fixed and per-sequence terms and
/// the attention slopes cannot be negative, and the token and row tables,
/// whose coefficients are their increases over each segment, never fall —
/// more tokens or more rows never cost less. The one exception is a token
/// segment over which the measurements themselves fall, repeatably
/// ([`falling_segments`]); such a segment is left free (a difference of two
/// non-negative coefficients) and listed in the profile. Freeing segments
/// without such evidence lets the token and row tables trade noise against
/// each other where only their sum is measured (pure decodes have as many
/// rows as tokens): the committed loaded-machine profile fell from 6.8 ms
/// at 2 tokens to 6.0 ms at 3 although every 3-sequence decode it measured
/// ran slower than the 2-sequence one.
pub fn fit(samples: &[Sample], basis: &Basis) -> CostTerms {
    let first = sim::profiled::SCALAR_COLUMNS;
    let falling = falling_segments(samples, &basis.token_knots);
    // Column of each free segment: the ramp of the segment ending at `to`.
    let free: Vec<usize> = falling
        .iter()
        .filter_map(|[_, to]| basis.token_knots.iter().position(|k| k == to))
        .map(|k| first + k - 1)
        .collect();
    let (a, b): (Vec<Vec<f64>>, Vec<f64>) = samples
        .iter()
        .filter(|s| s.fitted && s.kind != "wake")
        .map(|s| {
            let y = s.median_ns.max(1) as f64;
            let mut row: Vec<f64> = basis.row(&s.shape()).iter().map(|v| v / y).collect();
            // A free coefficient is the difference of two non-negative ones.
            let negated: Vec<f64> = free.iter().map(|&j| -row[j]).collect();
            row.extend(negated);
            (row, 1.0)
        })
        .unzip();
    let x = nnls(&a, &b);
    let n = basis.columns();
    let coef: Vec<f64> = (0..n)
        .map(|j| match free.iter().position(|&f| f == j) {
            Some(i) => x[j] - x[n + i],
            None => x[j],
        })
        .collect();
    let mut terms = basis.terms(&coef);
    (terms.idle_knots_ms, terms.wake_ns) = wake_table(samples);
    terms.falling_token_segments = falling;
    terms
}

/// Token-table segments `[a, b]` (adjacent knots) over which the measured
/// time repeatably falls: the fitted shapes that differ only in their token
/// count — decodes of a and b sequences at one context, or one prefill of a
/// and b tokens on one cache — form at least [`FALLING_MIN_PAIRS`] pairs,
/// and in every pair each repetition at b tokens ran faster than each
/// repetition at a (the ranges do not overlap, so noise cannot explain it).
/// CPU GEMM kernels can do this where they switch strategy; a GPU's tile
/// padding makes steps, not drops.
pub fn falling_segments(samples: &[Sample], token_knots: &[u32]) -> Vec<[u32; 2]> {
    // A shape's token count and what must match for two shapes to be a pair.
    let key = |s: &Sample| -> Option<(u32, String)> {
        if !s.fitted || s.times_ns.is_empty() {
            return None;
        }
        match (s.kind.as_str(), s.prefill.as_slice(), s.decode.as_slice()) {
            ("decode", [], [l, rest @ ..]) if rest.iter().all(|x| x == l) => {
                Some((1 + rest.len() as u32, format!("decode at {l}")))
            }
            ("prefill", [[n, c]], []) => Some((*n, format!("prefill on {c}"))),
            _ => None,
        }
    };
    let keyed: Vec<(u32, String, &Sample)> = samples
        .iter()
        .filter_map(|s| key(s).map(|(n, k)| (n, k, s)))
        .collect();
    let range = |s: &Sample| {
        let lo = s.times_ns.iter().copied().min().unwrap_or(0);
        let hi = s.times_ns.iter().copied().max().unwrap_or(0);
        (lo, hi)
    };
    let mut out = vec![];
    for w in token_knots.windows(2) {
        let (a, b) = (w[0], w[1]);
        let mut pairs = 0;
        let mut all_fall = true;
        for (n, k, sa) in &keyed {
            if *n != a {
                continue;
            }
            for (_, _, sb) in keyed.iter().filter(|(m, kb, _)| *m == b && kb == k) {
                pairs += 1;
                all_fall &= range(sb).1 < range(sa).0;
            }
        }
        if pairs >= FALLING_MIN_PAIRS && all_fall {
            out.push([a, b]);
        }
    }
    out
}

/// Pairs of shapes that must all show a drop before a token segment may
/// fall: one pair could be a slow spell of the machine on one shape.
pub const FALLING_MIN_PAIRS: usize = 2;

/// The wake-up penalty by idle time: how much longer the same step ran
/// after each idle spell than right after another step (never negative).
pub fn wake_table(samples: &[Sample]) -> (Vec<f64>, Vec<f64>) {
    let mut wake: Vec<&Sample> = samples.iter().filter(|s| s.kind == "wake").collect();
    wake.sort_by(|a, b| a.idle_ms.total_cmp(&b.idle_ms));
    match wake.first() {
        Some(base) if base.idle_ms == 0.0 && wake.len() >= 2 => {
            let b = base.median_ns as f64;
            wake.iter()
                .map(|s| (s.idle_ms, (s.median_ns as f64 - b).max(0.0)))
                .unzip()
        }
        _ => (vec![], vec![]),
    }
}

/// The host terms of the fitted samples that timed their host part: a
/// least-squares line `step_ns + seq_ns × sequences` through their median
/// host times, the slope kept non-negative (more sequences never sample
/// faster); `None` when no sample timed it.
pub fn host_terms(samples: &[Sample], method: &str) -> Option<MeasuredHost> {
    let pts: Vec<(f64, f64, f64)> = samples
        .iter()
        .filter(|s| s.fitted && s.idle_ms == 0.0)
        .filter_map(|s| {
            let seqs = (s.prefill.len() + s.decode.len()) as f64;
            s.host_ns.map(|h| (seqs, h as f64, s.median_ns as f64))
        })
        .collect();
    if pts.is_empty() {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let seq_ns = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    let step_ns = (my - seq_ns * mx).max(0.0);
    let wall: f64 = pts.iter().map(|p| p.2).sum();
    let host: f64 = pts.iter().map(|p| p.1).sum();
    Some(MeasuredHost {
        step_ns,
        seq_ns,
        share_pct: if wall > 0.0 {
            (100.0 * host / wall).min(100.0)
        } else {
            0.0
        },
        method: method.into(),
    })
}

/// Percent errors of the profile's cost model on its own samples: held-out
/// shapes (and, for comparison, the fitted ones).
pub fn errors(p: &Profile) -> FitError {
    let model = Profiled::new(p, "fit");
    let pct = |s: &Sample| {
        let y = s.median_ns.max(1) as f64;
        (model.predict_ns(&s.shape()) - y).abs() / y * 100.0
    };
    let held: Vec<f64> = p.samples.iter().filter(|s| !s.fitted).map(pct).collect();
    let fitted: Vec<f64> = p.samples.iter().filter(|s| s.fitted).map(pct).collect();
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    FitError {
        shapes: held.len() as u32,
        mape_pct: mean(&held),
        max_error_pct: held.iter().copied().fold(0.0, f64::max),
        fitted_mape_pct: mean(&fitted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nnls_recovers_non_negative_coefficients_and_clamps_negative_ones() {
        // b = 2·x0 + 0·x1 + 3·x2 exactly, over varied rows.
        let rows: Vec<Vec<f64>> = (0..12)
            .map(|i| {
                let t = i as f64;
                vec![1.0, t, t * t * 0.1]
            })
            .collect();
        let b: Vec<f64> = rows.iter().map(|r| 2.0 * r[0] + 3.0 * r[2]).collect();
        let x = nnls(&rows, &b);
        assert!(
            (x[0] - 2.0).abs() < 1e-8 && x[1].abs() < 1e-8 && (x[2] - 3.0).abs() < 1e-8,
            "{x:?}"
        );
        // A target that wants a negative slope gets 0 for it instead.
        let b: Vec<f64> = rows.iter().map(|r| 10.0 - 0.5 * r[1]).collect();
        let x = nnls(&rows, &b);
        assert!(x.iter().all(|&v| v >= 0.0), "{x:?}");
        assert_eq!(x[1], 0.0);
    }

    #[test]
    fn fit_recovers_a_cost_model_from_its_own_prices() {
        use sim::cost::BatchShape;
        let basis = Basis {
            token_knots: vec![1, 4, 16, 64, 256],
            row_knots: vec![1, 4, 16],
        };
        let coef = [
            3e5, 4e4, 20.0, 1.5, 0.5, 60.0, 2e4, 5e4, 3e5, 1.2e6, 1e4, 3e4,
        ];
        let truth = basis.terms(&coef);
        let price =
            |b: &BatchShape| -> f64 { basis.row(b).iter().zip(&coef).map(|(x, c)| x * c).sum() };
        let mut samples = vec![];
        let mut add = |prefill: Vec<[u32; 2]>, decode: Vec<u32>, fitted: bool| {
            let mut s = Sample {
                kind: "x".into(),
                fitted,
                prefill,
                decode,
                idle_ms: 0.0,
                median_ns: 0,
                min_ns: 0,
                max_ns: 0,
                times_ns: vec![],
                host_ns: None,
            };
            s.median_ns = price(&s.shape()).round() as u64;
            samples.push(s);
        };
        for n in [4, 16, 64, 256] {
            for c in [0, 100, 500] {
                add(vec![[n, c]], vec![], true);
            }
        }
        for b in [1usize, 2, 4, 8, 16] {
            for l in [10, 200, 900] {
                add(vec![], vec![l; b], true);
            }
        }
        add(vec![[64, 0]], vec![300; 4], true);
        add(vec![[30, 70]], vec![50, 700, 9], false);
        let got = fit(&samples, &basis);
        for s in &samples {
            let mut p = crate::calibrate::tests::blank_profile();
            p.fit = got.clone();
            let m = Profiled::new(&p, "x");
            let y = s.median_ns as f64;
            // Fitted shapes exactly; a held-out one closely (the basis is
            // not fully identified by so few shapes).
            let tol = if s.fitted { 1e-3 } else { 0.05 };
            let err = (m.predict_ns(&s.shape()) - y).abs() / y;
            assert!(err < tol, "{err}: {s:?}");
        }
        assert!(
            (got.step_ns - truth.step_ns).abs() / truth.step_ns < 0.05,
            "{got:?}"
        );
    }

    #[test]
    fn host_terms_recover_a_known_line_and_skip_untimed_samples() {
        // Host 40 µs + 3 µs per sequence, in 10 ms steps.
        let mut v: Vec<Sample> = [1, 2, 4, 8, 16]
            .iter()
            .map(|&b| Sample {
                host_ns: Some(40_000 + 3_000 * b as u64),
                ..decode_sample(b, 64, &[10.0])
            })
            .collect();
        v.push(decode_sample(32, 64, &[10.0])); // not timed apart: left out
        let h = host_terms(&v, "test").unwrap();
        assert!((h.step_ns - 40_000.0).abs() < 1.0, "{h:?}");
        assert!((h.seq_ns - 3_000.0).abs() < 0.01, "{h:?}");
        let share = 100.0 * (5.0 * 40_000.0 + 3_000.0 * 31.0) / 5e7;
        assert!((h.share_pct - share).abs() < 1e-9, "{h:?}");
        // A host time that falls with more sequences fits no negative slope.
        let falling: Vec<Sample> = [1, 8]
            .iter()
            .map(|&b| Sample {
                host_ns: Some(50_000 - 1_000 * b as u64),
                ..decode_sample(b, 64, &[10.0])
            })
            .collect();
        assert_eq!(host_terms(&falling, "t").unwrap().seq_ns, 0.0);
        assert!(host_terms(&[decode_sample(1, 64, &[1.0])], "t").is_none());
    }

    fn decode_sample(b: usize, ctx: u32, times_ms: &[f64]) -> Sample {
        let times_ns: Vec<u64> = times_ms.iter().map(|t| (t * 1e6) as u64).collect();
        let mut sorted = times_ns.clone();
        sorted.sort_unstable();
        Sample {
            kind: "decode".into(),
            fitted: true,
            prefill: vec![],
            decode: vec![ctx; b],
            idle_ms: 0.0,
            median_ns: sorted[sorted.len() / 2],
            min_ns: sorted[0],
            max_ns: sorted[sorted.len() - 1],
            times_ns,
            host_ns: None,
        }
    }

    /// Decodes of 1–8 sequences at two contexts whose 3-sequence step costs
    /// `three` ms against 12 ms for two, each repeated with ±`wiggle` ms.
    fn decodes(three: f64, wiggle: f64) -> Vec<Sample> {
        let base = |b: usize| match b {
            1 => 5.0,
            2 => 12.0,
            3 => three,
            _ => 12.0 + b as f64,
        };
        let mut v = vec![];
        for ctx in [32, 512] {
            for b in [1, 2, 3, 4, 6, 8] {
                let t = base(b) + (b * ctx as usize) as f64 * 1e-3;
                v.push(decode_sample(b, ctx, &[t - wiggle, t, t + wiggle]));
            }
        }
        v
    }

    fn rises(v: &[f64]) -> bool {
        v.windows(2).all(|w| w[1] >= w[0] - 1e-6)
    }

    #[test]
    fn tables_rise_unless_a_drop_is_measured_repeatably() {
        let basis = Basis {
            token_knots: vec![1, 2, 3, 4, 6, 8],
            row_knots: vec![1, 2, 4, 8],
        };
        // A drop inside the noise (two ms wiggle, 0.5 ms drop) is not an
        // exception: the fitted tables rise.
        let noisy = decodes(11.5, 2.0);
        assert!(falling_segments(&noisy, &basis.token_knots).is_empty());
        let t = fit(&noisy, &basis);
        assert!(t.falling_token_segments.is_empty());
        assert!(rises(&t.token_ns) && rises(&t.row_ns), "{t:?}");
        // A drop every repetition shows, at both contexts, is recorded and fitted.
        let real = decodes(9.0, 0.2);
        assert_eq!(falling_segments(&real, &basis.token_knots), vec![[2, 3]]);
        let t = fit(&real, &basis);
        assert_eq!(t.falling_token_segments, vec![[2, 3]]);
        assert!(t.token_ns[2] < t.token_ns[1], "{t:?}");
        let mut p = crate::calibrate::tests::blank_profile();
        p.fit = t;
        let m = Profiled::new(&p, "x");
        for s in &real {
            let err = (m.predict_ns(&s.shape()) / s.median_ns as f64 - 1.0).abs();
            assert!(err < 0.02, "{err}: {s:?}");
        }
        // One context alone is not enough evidence.
        let one: Vec<Sample> = real.into_iter().filter(|s| s.decode[0] == 32).collect();
        assert!(falling_segments(&one, &basis.token_knots).is_empty());
    }
}
