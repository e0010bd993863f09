//! Sweep points from a grid: the cartesian product, seeded uniform random
//! draws, or a Latin hypercube. Every random choice comes from a stream named
//! after its axis (`sim::rng::stream(seed, "sweep.lhs.<key>")`), so adding an
//! axis leaves the values drawn for the others unchanged.

use super::grid::{AxisValues, Grid, SampleKind};
use crate::rng::{self, StreamRng};
use rand::seq::SliceRandom;
use rand::Rng;

/// One point of a sweep: a value for every axis, in axis order.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Position in the sweep (0-based); results are reported in this order.
    pub index: usize,
    pub values: Vec<toml::Value>,
}

/// All points of `grid`; `seed` is used when the grid sets none.
pub fn points(grid: &Grid, seed: u64) -> Vec<Point> {
    let seed = grid.seed.unwrap_or(seed);
    match grid.sample {
        SampleKind::Cartesian => cartesian(grid),
        SampleKind::Random => random(grid, seed, grid.points.unwrap_or(1)),
        SampleKind::LatinHypercube => latin_hypercube(grid, seed, grid.points.unwrap_or(1)),
    }
}

fn list(v: &AxisValues) -> &[toml::Value] {
    match v {
        AxisValues::List(l) => l,
        AxisValues::Continuous { .. } => unreachable!("the grid rejects continuous axes here"),
    }
}

/// Mixed-radix enumeration: the first dimension varies slowest, like nested
/// loops written in the file's order. A dimension is one axis, or a `zip`
/// group whose axes take their i-th values together.
fn cartesian(grid: &Grid) -> Vec<Point> {
    let dims = grid.dims();
    let lists: Vec<&[toml::Value]> = grid.axes.iter().map(|a| list(&a.values)).collect();
    let lens: Vec<usize> = dims.iter().map(|d| lists[d[0]].len()).collect();
    let n: usize = lens.iter().product();
    (0..n)
        .map(|index| {
            let mut rest = index;
            let mut values = vec![toml::Value::Boolean(false); lists.len()];
            for (d, &len) in dims.iter().zip(&lens).rev() {
                for &a in d {
                    values[a] = lists[a][rest % len].clone();
                }
                rest /= len;
            }
            Point { index, values }
        })
        .collect()
}

/// The value at quantile `u` in [0, 1) of an axis: list entries are equally
/// likely; continuous ranges are uniform (integers: each equally likely).
fn at_quantile(v: &AxisValues, u: f64) -> toml::Value {
    match v {
        AxisValues::List(l) => l[list_index(l.len(), u)].clone(),
        &AxisValues::Continuous { from, to, integer } => {
            if integer {
                let span = to - from + 1.0;
                let i = (u * span).floor().min(span - 1.0);
                toml::Value::Integer((from + i) as i64)
            } else {
                toml::Value::Float(from + u * (to - from))
            }
        }
    }
}

fn list_index(len: usize, u: f64) -> usize {
    ((u * len as f64) as usize).min(len - 1)
}

/// Sets dimension `d`'s axes in `values` at quantile `u`: a lone axis at
/// its quantile, a `zip` group at one shared list index.
fn place(grid: &Grid, d: &[usize], u: f64, values: &mut [toml::Value]) {
    if let [a] = d {
        values[*a] = at_quantile(&grid.axes[*a].values, u);
        return;
    }
    let i = list_index(list(&grid.axes[d[0]].values).len(), u);
    for &a in d {
        values[a] = list(&grid.axes[a].values)[i].clone();
    }
}

/// Points from one quantile per dimension and point: `draw(stream, n)`
/// gives a dimension's `n` quantiles from the stream named after its first
/// axis (so a lone axis draws exactly what it drew before groups existed).
fn drawn(
    grid: &Grid,
    seed: u64,
    method: &str,
    n: usize,
    draw: impl Fn(&mut StreamRng, usize) -> Vec<f64>,
) -> Vec<Point> {
    let dims = grid.dims();
    let mut points: Vec<Point> = (0..n)
        .map(|index| Point {
            index,
            values: vec![toml::Value::Boolean(false); grid.axes.len()],
        })
        .collect();
    for d in &dims {
        let mut r = axis_stream(seed, method, &grid.axes[d[0]].key);
        for (p, u) in points.iter_mut().zip(draw(&mut r, n)) {
            place(grid, d, u, &mut p.values);
        }
    }
    points
}

fn axis_stream(seed: u64, method: &str, key: &str) -> StreamRng {
    rng::stream(seed, &format!("sweep.{method}.{key}"))
}

fn random(grid: &Grid, seed: u64, n: usize) -> Vec<Point> {
    drawn(grid, seed, "random", n, |r, n| {
        (0..n).map(|_| r.random::<f64>()).collect()
    })
}

/// McKay, Beckman & Conover (1979): for each dimension a random permutation
/// gives every point its own stratum [k/n, (k+1)/n), and a uniform draw
/// places it within the stratum. Each list value therefore appears n/len
/// times (±1).
fn latin_hypercube(grid: &Grid, seed: u64, n: usize) -> Vec<Point> {
    drawn(grid, seed, "lhs", n, |r, n| {
        let mut strata: Vec<usize> = (0..n).collect();
        strata.shuffle(r);
        strata
            .into_iter()
            .map(|k| (k as f64 + r.random::<f64>()) / n as f64)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(text: &str) -> Grid {
        Grid::from_toml_str(text, "g.toml").unwrap()
    }

    #[test]
    fn cartesian_product_varies_the_last_axis_fastest() {
        let g = grid("[axes]\na = [1, 2]\nb = [\"x\", \"y\", \"z\"]\n");
        let p = points(&g, 0);
        assert_eq!(p.len(), 6);
        let show: Vec<String> = p
            .iter()
            .map(|p| format!("{}{}", p.values[0], p.values[1]))
            .collect();
        assert_eq!(
            show,
            ["1\"x\"", "1\"y\"", "1\"z\"", "2\"x\"", "2\"y\"", "2\"z\""]
        );
        assert!(p.iter().enumerate().all(|(i, p)| p.index == i));
    }

    #[test]
    fn latin_hypercube_uses_every_stratum_once() {
        let g = grid(
            "[sweep]\nsample = \"latin-hypercube\"\npoints = 20\n[axes]\nr = { from = 0.0, to = 20.0 }\nk = [1, 2, 3, 4]\nn = { from = 1, to = 20 }\n",
        );
        let p = points(&g, 9);
        assert_eq!(p.len(), 20);
        // Continuous axis: exactly one value in each of the 20 unit strata.
        let mut strata: Vec<i64> = p
            .iter()
            .map(|p| p.values[0].as_float().unwrap().floor() as i64)
            .collect();
        strata.sort();
        assert_eq!(strata, (0..20).collect::<Vec<_>>());
        // List axis: each of 4 values exactly 5 times.
        for k in 1..=4 {
            let c = p
                .iter()
                .filter(|p| p.values[1].as_integer() == Some(k))
                .count();
            assert_eq!(c, 5, "value {k}");
        }
        // Integer range 1..=20 over 20 points: a permutation.
        let mut ints: Vec<i64> = p
            .iter()
            .map(|p| p.values[2].as_integer().unwrap())
            .collect();
        ints.sort();
        assert_eq!(ints, (1..=20).collect::<Vec<_>>());
        // Seeded: same seed, same points; another seed, others.
        assert_eq!(p, points(&g, 9));
        assert_ne!(p, points(&g, 10));
    }

    #[test]
    fn random_draws_stay_in_range_and_axes_are_independent_streams() {
        let g = grid("[sweep]\nsample = \"random\"\npoints = 50\nseed = 3\n[axes]\nr = { from = 2.0, to = 4.0 }\n");
        let p = points(&g, 0);
        assert!(p
            .iter()
            .all(|p| (2.0..4.0).contains(&p.values[0].as_float().unwrap())));
        // Adding an axis does not change the values drawn for the first.
        let g2 = grid("[sweep]\nsample = \"random\"\npoints = 50\nseed = 3\n[axes]\nr = { from = 2.0, to = 4.0 }\nq = [1, 2]\n");
        let p2 = points(&g2, 0);
        assert!(p.iter().zip(&p2).all(|(a, b)| a.values[0] == b.values[0]));
    }
}
