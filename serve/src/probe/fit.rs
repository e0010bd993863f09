//! The fit of an engine's measured shapes in the profile's own basis
//! (`sim::profiled::Basis`), so the simulator prices exactly what was fitted.
//!
//! Through an API only some of the basis' columns are identifiable: the
//! step, the per-prefill-sequence term (the per-request overhead a TTFT
//! shows), decode context, prefill pairs, and the token and row tables.
//! Prefill squares and prefill KV tokens equal pairs and tokens for
//! prompts without a cached prefix, so they are left at zero. Every
//! coefficient is non-negative (a table never falls, no term costs less
//! than nothing): non-negative least squares (Lawson and Hanson) on
//! relative errors, so a 5 ms gap and a 500 ms TTFT weigh alike.

use sim::profile::{CostTerms, FitError, Sample};
use sim::profiled::{Basis, Profiled, SCALAR_COLUMNS};

/// Basis columns an API measurement identifies.
fn used_columns(basis: &Basis) -> Vec<usize> {
    let mut v = vec![0, 1, 2, 3];
    v.extend(SCALAR_COLUMNS..basis.columns());
    v
}

/// Fits the samples marked `fitted` and returns the cost terms.
pub fn fit(samples: &[Sample], basis: &Basis) -> CostTerms {
    let cols = used_columns(basis);
    let mut rows = Vec::new();
    for s in samples.iter().filter(|s| s.fitted && s.median_ns > 0) {
        let full = basis.row(&s.shape());
        let w = 1.0 / s.median_ns as f64;
        rows.push(cols.iter().map(|&c| full[c] * w).collect::<Vec<f64>>());
    }
    let target = vec![1.0; rows.len()];
    let x = nnls(&rows, &target);
    let mut coef = vec![0.0; basis.columns()];
    for (i, &c) in cols.iter().enumerate() {
        coef[c] = x[i];
    }
    basis.terms(&coef)
}

/// Fit error of `model` over the fitted and the held-out samples.
pub fn errors(samples: &[Sample], model: &Profiled) -> FitError {
    let err = |s: &Sample| {
        let p = model.predict_ns(&s.shape());
        100.0 * (p - s.median_ns as f64).abs() / s.median_ns.max(1) as f64
    };
    let held: Vec<f64> = samples.iter().filter(|s| !s.fitted).map(err).collect();
    let fitted: Vec<f64> = samples.iter().filter(|s| s.fitted).map(err).collect();
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

/// Non-negative least squares: min ‖A x − b‖ subject to x ≥ 0 (Lawson and
/// Hanson's active-set method). Columns are scaled to unit norm first, so
/// coefficients of very different magnitudes (ns per step, per query-key
/// pair) are solved alike; an all-zero column gets 0.
pub fn nnls(a: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let n = a.first().map_or(0, |r| r.len());
    let norms: Vec<f64> = (0..n)
        .map(|j| a.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt())
        .collect();
    let live: Vec<usize> = (0..n).filter(|&j| norms[j] > 0.0).collect();
    let col = |j: usize, i: usize| a[i][j] / norms[j];
    let m = b.len();
    let mut x = vec![0.0; n];
    let mut passive = vec![false; n];
    let residual = |x: &[f64]| -> Vec<f64> {
        (0..m)
            .map(|i| b[i] - live.iter().map(|&j| col(j, i) * x[j]).sum::<f64>())
            .collect()
    };
    for _ in 0..3 * n + 10 {
        let r = residual(&x);
        let grad = |j: usize| (0..m).map(|i| col(j, i) * r[i]).sum::<f64>();
        let Some((best, g)) = live
            .iter()
            .filter(|&&j| !passive[j])
            .map(|&j| (j, grad(j)))
            .max_by(|p, q| p.1.total_cmp(&q.1))
        else {
            break;
        };
        if g <= 1e-12 {
            break;
        }
        passive[best] = true;
        loop {
            let set: Vec<usize> = live.iter().copied().filter(|&j| passive[j]).collect();
            let z = solve_subset(&set, m, &col, b);
            if z.iter().all(|&v| v > 0.0) {
                for (k, &j) in set.iter().enumerate() {
                    x[j] = z[k];
                }
                break;
            }
            // Step from x toward z until the first coefficient reaches 0.
            let mut alpha = 1.0f64;
            for (k, &j) in set.iter().enumerate() {
                if z[k] <= 0.0 {
                    let d = x[j] - z[k];
                    if d > 0.0 {
                        alpha = alpha.min(x[j] / d);
                    }
                }
            }
            for (k, &j) in set.iter().enumerate() {
                x[j] += alpha * (z[k] - x[j]);
                if x[j] <= 1e-15 {
                    x[j] = 0.0;
                    passive[j] = false;
                }
            }
            if !set.iter().any(|&j| passive[j]) {
                break;
            }
        }
    }
    (0..n)
        .map(|j| if norms[j] > 0.0 { x[j] / norms[j] } else { 0.0 })
        .collect()
}

/// Unconstrained least squares on the columns `set`, by Householder QR of
/// the columns themselves (the normal equations would square a condition
/// number that nearly collinear ramps already make large); a column that
/// adds nothing independent gets 0.
fn solve_subset(set: &[usize], m: usize, col: &dyn Fn(usize, usize) -> f64, b: &[f64]) -> Vec<f64> {
    let k = set.len();
    // Column-major copy of the columns and the right-hand side.
    let mut a: Vec<Vec<f64>> = set
        .iter()
        .map(|&j| (0..m).map(|i| col(j, i)).collect())
        .collect();
    let mut y = b.to_vec();
    let mut diag = vec![0.0; k];
    for c in 0..k.min(m) {
        let norm = (c..m).map(|i| a[c][i] * a[c][i]).sum::<f64>().sqrt();
        if norm < 1e-10 {
            diag[c] = 0.0;
            continue;
        }
        let alpha = if a[c][c] > 0.0 { -norm } else { norm };
        let mut v: Vec<f64> = (c..m).map(|i| a[c][i]).collect();
        v[0] -= alpha;
        let vv = v.iter().map(|x| x * x).sum::<f64>();
        if vv == 0.0 {
            diag[c] = a[c][c];
            continue;
        }
        let reflect = |x: &mut [f64]| {
            let d = (c..m).map(|i| v[i - c] * x[i]).sum::<f64>() * 2.0 / vv;
            for i in c..m {
                x[i] -= d * v[i - c];
            }
        };
        for column in &mut a[c..k] {
            reflect(column);
        }
        reflect(&mut y);
        diag[c] = a[c][c];
    }
    // Back substitution on R x = Qᵀ y.
    let mut x = vec![0.0; k];
    for c in (0..k.min(m)).rev() {
        if diag[c].abs() < 1e-10 {
            continue;
        }
        let s: f64 = (c + 1..k).map(|cc| a[cc][c] * x[cc]).sum();
        x[c] = (y[c] - s) / diag[c];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::shapes::sample;
    use sim::cost::BatchShape;

    #[test]
    fn nnls_solves_exactly_and_keeps_coefficients_non_negative() {
        // y = 2 + 3x, exact.
        let a: Vec<Vec<f64>> = (0..5).map(|x| vec![1.0, x as f64]).collect();
        let b: Vec<f64> = (0..5).map(|x| 2.0 + 3.0 * x as f64).collect();
        let x = nnls(&a, &b);
        assert!(
            (x[0] - 2.0).abs() < 1e-9 && (x[1] - 3.0).abs() < 1e-9,
            "{x:?}"
        );
        // The unconstrained answer has a negative slope: NNLS clamps it to 0
        // and fits the mean.
        let b: Vec<f64> = (0..5).map(|x| 10.0 - x as f64).collect();
        let x = nnls(&a, &b);
        assert_eq!(x[1], 0.0);
        assert!((x[0] - 8.0).abs() < 1e-9, "{x:?}");
        // An all-zero column gets 0.
        let a: Vec<Vec<f64>> = (0..4).map(|x| vec![1.0, 0.0, x as f64]).collect();
        let b: Vec<f64> = (0..4).map(|x| 1.0 + x as f64).collect();
        let x = nnls(&a, &b);
        assert_eq!(x[1], 0.0);
        assert!((x[2] - 1.0).abs() < 1e-9);
    }

    /// An engine with known costs, priced by `Profiled` itself.
    fn known() -> (Basis, CostTerms) {
        let basis = Basis {
            token_knots: vec![1, 128, 2048],
            row_knots: vec![1, 16],
        };
        // step 8 ms, request 2 ms, 1 µs per context token, 0.01 ns... per
        // pair; tokens 30 µs each to 128 then 20 µs; rows 400 µs each.
        let coef = [
            8e6,
            2e6,
            1e3,
            10.0,
            0.0,
            0.0,
            127.0 * 30e3,
            1920.0 * 20e3,
            15.0 * 400e3,
        ];
        let t = basis.terms(&coef);
        (basis, t)
    }

    fn shapes(t: &CostTerms, noise: f64) -> Vec<Sample> {
        let mut p = sim::profile::Profile::from_toml_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../scenarios/validate/cpu-profile.toml"
            ))
            .unwrap(),
            "cpu-profile.toml",
        )
        .unwrap();
        p.fit = t.clone();
        let m = Profiled::new(&p, "known");
        let mut out = Vec::new();
        let mut k = 0u64;
        let mut timed = |b: &BatchShape| {
            // Each shape's median off by a deterministic -noise..+noise.
            k += 1;
            let f = 1.0 + noise * (((k * 3) % 5) as f64 - 2.0) / 2.0;
            (0..5)
                .map(|i| (m.predict_ns(b) * f * (1.0 + 0.01 * (i as f64 - 2.0))) as u64)
                .collect::<Vec<u64>>()
        };
        for n in [1u32, 32, 128, 512, 2048] {
            let mut b = BatchShape::default();
            b.add_prefill(n as u64, 0);
            out.push(sample("prefill", true, vec![[n, 0]], vec![], timed(&b)));
        }
        for (seqs, ctx) in [
            (1u32, 17u64),
            (1, 2049),
            (2, 17),
            (4, 17),
            (8, 17),
            (16, 17),
            (16, 1040),
        ] {
            let mut b = BatchShape::default();
            for _ in 0..seqs {
                b.add_decode(ctx);
            }
            out.push(sample(
                "decode",
                true,
                vec![],
                vec![ctx as u32; seqs as usize],
                timed(&b),
            ));
        }
        out
    }

    #[test]
    fn the_fit_recovers_a_known_engine_exactly_without_noise() {
        let (basis, t) = known();
        let f = fit(&shapes(&t, 0.0), &basis);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(
            close(f.step_ns, t.step_ns),
            "{} vs {}",
            f.step_ns,
            t.step_ns
        );
        assert!(
            close(f.prefill_seq_ns, t.prefill_seq_ns),
            "{}",
            f.prefill_seq_ns
        );
        assert!(
            close(f.decode_token_ns, t.decode_token_ns),
            "{}",
            f.decode_token_ns
        );
        assert!(
            close(f.prefill_pair_ns, t.prefill_pair_ns),
            "{}",
            f.prefill_pair_ns
        );
        for (a, b) in f.token_ns.iter().zip(&t.token_ns) {
            assert!(close(*a, *b), "tokens {:?} vs {:?}", f.token_ns, t.token_ns);
        }
        for (a, b) in f.row_ns.iter().zip(&t.row_ns) {
            assert!(close(*a, *b), "rows {:?} vs {:?}", f.row_ns, t.row_ns);
        }
    }

    #[test]
    fn with_two_percent_noise_the_terms_stay_within_a_few_percent() {
        let (basis, t) = known();
        let s = shapes(&t, 0.02);
        let f = fit(&s, &basis);
        let pct = |a: f64, b: f64| 100.0 * (a - b).abs() / b;
        assert!(pct(f.step_ns, t.step_ns) < 3.0, "{}", f.step_ns);
        assert!(
            pct(f.decode_token_ns, t.decode_token_ns) < 3.0,
            "{}",
            f.decode_token_ns
        );
        assert!(pct(f.row_ns[1], t.row_ns[1]) < 5.0, "{:?}", f.row_ns);
        assert!(pct(f.token_ns[2], t.token_ns[2]) < 3.0, "{:?}", f.token_ns);
        let mut p = sim::profile::Profile::from_toml_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../scenarios/validate/cpu-profile.toml"
            ))
            .unwrap(),
            "p",
        )
        .unwrap();
        p.fit = f;
        let e = errors(&s, &Profiled::new(&p, "p"));
        assert!(e.fitted_mape_pct < 2.0, "{e:?}");
    }
}
