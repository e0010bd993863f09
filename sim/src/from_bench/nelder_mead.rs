//! The Nelder–Mead simplex method (Nelder & Mead, The Computer Journal
//! 1965), in the form of Lagarias et al. (SIAM J. Optim. 1998): reflection
//! 1, expansion 2, contraction ½, shrink ½. It needs no gradient, which a
//! discrete-event simulation does not give, and it is deterministic: ties
//! keep the earlier vertex (a stable sort), and a non-finite value counts as
//! the worst.

/// The best point found and how many evaluations it took.
#[derive(Clone, Debug, PartialEq)]
pub struct Minimum {
    pub x: Vec<f64>,
    pub f: f64,
    pub evaluations: u32,
}

/// Minimises `f` from `start`, the initial simplex `start` plus `step[i]`
/// along each axis, until `max_evaluations` evaluations are spent (a shrink
/// under way finishes, up to `n` more) or the simplex's values differ by
/// less than `f_tol` and its vertices by less than `x_tol` in every
/// coordinate.
pub fn minimize(
    mut f: impl FnMut(&[f64]) -> f64,
    start: &[f64],
    step: &[f64],
    max_evaluations: u32,
    f_tol: f64,
    x_tol: f64,
) -> Minimum {
    let n = start.len();
    let mut evals = 0u32;
    let mut eval = |x: &[f64], evals: &mut u32| {
        *evals += 1;
        let v = f(x);
        if v.is_finite() {
            v
        } else {
            f64::INFINITY
        }
    };
    let mut simplex: Vec<(Vec<f64>, f64)> = Vec::with_capacity(n + 1);
    let v = eval(start, &mut evals);
    simplex.push((start.to_vec(), v));
    for i in 0..n {
        let mut x = start.to_vec();
        x[i] += step[i];
        let v = eval(&x, &mut evals);
        simplex.push((x, v));
    }
    let along = |from: &[f64], to: &[f64], t: f64| -> Vec<f64> {
        from.iter().zip(to).map(|(a, b)| a + t * (b - a)).collect()
    };
    while evals < max_evaluations {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (best, worst) = (simplex[0].1, simplex[n].1);
        let spread = (0..n)
            .map(|i| {
                let (lo, hi) = simplex
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |m, v| {
                        (m.0.min(v.0[i]), m.1.max(v.0[i]))
                    });
                hi - lo
            })
            .fold(0.0, f64::max);
        if (worst - best).abs() < f_tol && spread < x_tol {
            break;
        }
        let centroid: Vec<f64> = (0..n)
            .map(|i| simplex[..n].iter().map(|v| v.0[i]).sum::<f64>() / n as f64)
            .collect();
        let xw = simplex[n].0.clone();
        let xr = along(&centroid, &xw, -1.0);
        let fr = eval(&xr, &mut evals);
        if fr < best {
            let xe = along(&centroid, &xw, -2.0);
            let fe = eval(&xe, &mut evals);
            simplex[n] = if fe < fr { (xe, fe) } else { (xr, fr) };
            continue;
        }
        if fr < simplex[n - 1].1 {
            simplex[n] = (xr, fr);
            continue;
        }
        // Contract towards the better of the worst and its reflection.
        let (xc, fc) = if fr < worst {
            let xc = along(&centroid, &xw, -0.5);
            let fc = eval(&xc, &mut evals);
            (xc, fc)
        } else {
            let xc = along(&centroid, &xw, 0.5);
            let fc = eval(&xc, &mut evals);
            (xc, fc)
        };
        if fc < fr.min(worst) {
            simplex[n] = (xc, fc);
            continue;
        }
        let x0 = simplex[0].0.clone();
        for v in simplex.iter_mut().skip(1) {
            v.0 = along(&x0, &v.0, 0.5);
            v.1 = eval(&v.0, &mut evals);
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (x, f) = simplex.swap_remove(0);
    Minimum {
        x,
        f,
        evaluations: evals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_minimum_of_rosenbrocks_valley() {
        let rosen = |x: &[f64]| (1.0 - x[0]).powi(2) + 100.0 * (x[1] - x[0] * x[0]).powi(2);
        let m = minimize(rosen, &[-1.2, 1.0], &[0.5, 0.5], 2000, 1e-14, 1e-8);
        assert!(
            (m.x[0] - 1.0).abs() < 1e-3 && (m.x[1] - 1.0).abs() < 1e-3,
            "{m:?}"
        );
        assert!(m.evaluations < 2000);
    }

    #[test]
    fn stops_at_its_budget_and_treats_nan_as_worst() {
        let mut calls = 0;
        let m = minimize(
            |x: &[f64]| {
                calls += 1;
                if x[0] < 0.0 {
                    f64::NAN
                } else {
                    (x[0] - 2.0).powi(2) + (x[1] + 1.0).powi(2)
                }
            },
            &[0.5, 0.5],
            &[1.0, 1.0],
            40,
            0.0,
            0.0,
        );
        assert!(m.evaluations <= 40 + 2, "{}", m.evaluations);
        assert_eq!(calls, m.evaluations);
        assert!(m.x[0] >= 0.0 && m.f < 0.5, "{m:?}");
    }
}
