//! Fitting a profile's cost terms to measured samples: non-negative least
//! squares on relative error over the basis `sim::profiled::Basis` defines,
//! and the fit error on shapes held out of the fit, priced by the
//! simulator's own `Profiled` cost model.

use sim::profile::{CostTerms, FitError, Profile, Sample};
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
/// as long prefills). The fixed and per-sequence terms, the attention
/// slopes and the row table's segments are kept non-negative; the token
/// table's segments may fall as well as rise, because CPU GEMM kernels
/// really are slower for some row counts than for larger ones (two rows
/// pack the weights, three do not). Freeing the row table too would let
/// the two tables trade noise against each other where only their sum is
/// measured (pure decodes have as many rows as tokens).
pub fn fit(samples: &[Sample], basis: &Basis) -> CostTerms {
    let first = sim::profiled::SCALAR_COLUMNS;
    let free = first..first + basis.token_knots.len() - 1;
    let (a, b): (Vec<Vec<f64>>, Vec<f64>) = samples
        .iter()
        .filter(|s| s.fitted && s.kind != "wake")
        .map(|s| {
            let y = s.median_ns.max(1) as f64;
            let mut row: Vec<f64> = basis.row(&s.shape()).iter().map(|v| v / y).collect();
            // A free coefficient is the difference of two non-negative ones.
            let negated: Vec<f64> = row[free.clone()].iter().map(|v| -v).collect();
            row.extend(negated);
            (row, 1.0)
        })
        .unzip();
    let x = nnls(&a, &b);
    let n = basis.columns();
    let coef: Vec<f64> = (0..n)
        .map(|j| {
            if free.contains(&j) {
                x[j] - x[n + j - free.start]
            } else {
                x[j]
            }
        })
        .collect();
    let mut terms = basis.terms(&coef);
    (terms.idle_knots_ms, terms.wake_ns) = wake_table(samples);
    terms
}

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
}
