//! Grid files: which scenario keys a sweep varies, over which values, how the
//! points are sampled, and what the operating point optimises.
//!
//! ```toml
//! [sweep]
//! sample = "cartesian"          # or "random", "latin-hypercube" (then `points`)
//!
//! [objective]
//! latency = "ttft_ms.p99"       # any latency.<metric>.<stat> of the summary
//! attainment = 0.99             # share of requests meeting the scenario's [slo]
//! gpu_hour_usd = 2.50           # optional: cost in dollars instead of GPUs
//!                               # (or one per hardware option: { "h200" = 3.49, ... })
//!
//! [axes]
//! "fleet.replicas" = { from = 2, to = 8, step = 2 }
//! "engine.max_batched_tokens" = [2048, 8192]
//! "workload.rate" = { from = 20.0, to = 80.0 }   # sampled modes only
//!
//! [axes.zip]                    # paired axes: the i-th values go together
//! "hardware.preset" = ["h100-sxm", "h200"]
//! "fleet.tensor_parallel" = [4, 2]
//! ```
//!
//! Axis keys may be quoted (`"fleet.replicas"`) or dotted (`fleet.replicas`);
//! both name the same scenario key path. Axes keep the order of the file: the
//! first varies slowest in the cartesian product. The axes of a `zip` table
//! are one dimension of the product: equally long lists whose i-th values
//! make one option (`[[axes.zip]]` gives several such groups).

use super::objective::ObjectiveCfg;
use super::SweepError;
use crate::config::keypath;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// The most points one sweep may have (a guard against a typo in a range).
pub const MAX_POINTS: usize = 1_000_000;

/// How points are drawn from the axes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampleKind {
    /// Every combination of every axis value.
    #[default]
    Cartesian,
    /// `points` independent uniform draws per axis (seeded).
    Random,
    /// Latin hypercube (McKay, Beckman & Conover, Technometrics 1979): each
    /// axis is cut into `points` equal strata and every stratum is used once.
    LatinHypercube,
}

impl SampleKind {
    pub fn name(self) -> &'static str {
        match self {
            SampleKind::Cartesian => "cartesian",
            SampleKind::Random => "random",
            SampleKind::LatinHypercube => "latin-hypercube",
        }
    }
}

/// The `[sweep]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepCfg {
    #[serde(default)]
    sample: SampleKind,
    /// Points to draw (random and Latin-hypercube sampling).
    #[serde(default)]
    points: Option<u64>,
    /// Seed of the sampling streams; defaults to the scenario's seed.
    #[serde(default)]
    seed: Option<u64>,
}

/// The grid file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GridFile {
    #[serde(default)]
    sweep: SweepCfg,
    #[serde(default)]
    objective: ObjectiveCfg,
    axes: Option<Node>,
}

/// The values one axis takes.
#[derive(Clone, Debug, PartialEq)]
pub enum AxisValues {
    /// A list, or a `{ from, to, step }` range expanded to one.
    List(Vec<toml::Value>),
    /// A `{ from, to }` range without a step: sampled uniformly (integers
    /// when both ends are integers). Only random and Latin-hypercube sampling
    /// can use it.
    Continuous { from: f64, to: f64, integer: bool },
}

/// One varied scenario key.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The key as the grid file writes it (the column name in results).
    pub key: String,
    /// The scenario key path it sets (aliases resolved).
    pub path: String,
    pub values: AxisValues,
    /// The `zip` group the axis belongs to: the axes of a group vary
    /// together, their i-th values paired.
    pub zip: Option<usize>,
}

/// A parsed, checked grid file.
#[derive(Clone, Debug)]
pub struct Grid {
    /// The file it came from, for messages.
    pub origin: String,
    /// The file's text, kept so results can say exactly what was swept.
    pub text: String,
    pub sample: SampleKind,
    /// Points to draw when sampling (random / Latin hypercube).
    pub points: Option<usize>,
    pub seed: Option<u64>,
    pub axes: Vec<Axis>,
    pub objective: ObjectiveCfg,
}

impl Grid {
    /// Reads and checks a grid file.
    pub fn load(path: &Path) -> Result<Grid, SweepError> {
        let origin = path.display().to_string();
        let text = crate::input_file::read_config(path, "grid file")
            .map_err(|e| SweepError::new(e.to_string()))?;
        Self::from_toml_str(&text, &origin)
    }

    /// Parses and checks grid text; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Grid, SweepError> {
        let err = |key: &str, msg: String| {
            SweepError::new(if key.is_empty() {
                format!("{origin}: {msg}")
            } else {
                format!("{origin}: {key}: {msg}")
            })
        };
        let file: GridFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!("line {}: ", line_of(text, s.start)))
                .unwrap_or_default();
            err(
                "",
                format!("{line}{}", e.message().trim().replace('\n', "; ")),
            )
        })?;
        let Some(axes_node) = file.axes else {
            return Err(err(
                "axes",
                "missing: add an [axes] table with the scenario keys to vary, e.g. \"fleet.replicas\" = [2, 4, 8]".into(),
            ));
        };
        let mut axes = Vec::new();
        flatten(axes_node, "", &mut axes).map_err(|(k, m)| err(&format!("axes.{k}"), m))?;
        if axes.is_empty() {
            return Err(err(
                "axes",
                "is empty: list at least one scenario key to vary".into(),
            ));
        }
        for (i, a) in axes.iter().enumerate() {
            if let Some(b) = axes[..i].iter().find(|b| b.path == a.path) {
                return Err(err(
                    &format!("axes.{}", a.key),
                    format!("sets `{}`, which axis `{}` already varies", a.path, b.key),
                ));
            }
        }

        let s = &file.sweep;
        let points = match (s.sample, s.points) {
            (SampleKind::Cartesian, Some(_)) => {
                return Err(err(
                    "sweep.points",
                    "only random and latin-hypercube sampling take a number of points; the cartesian product has every combination".into(),
                ))
            }
            (SampleKind::Cartesian, None) => {
                if let Some(a) = axes
                    .iter()
                    .find(|a| matches!(a.values, AxisValues::Continuous { .. }))
                {
                    return Err(err(
                        &format!("axes.{}", a.key),
                        "a range without `step` can only be sampled (sample = \"random\" or \"latin-hypercube\"); add `step` for the cartesian product".into(),
                    ));
                }
                let n = dims(&axes)
                    .iter()
                    .try_fold(1usize, |acc, d| match &axes[d[0]].values {
                        AxisValues::List(v) => acc.checked_mul(v.len()),
                        AxisValues::Continuous { .. } => unreachable!("rejected above"),
                    });
                match n {
                    Some(n) if n <= MAX_POINTS => None,
                    _ => {
                        return Err(err(
                            "axes",
                            format!("the cartesian product has more than {MAX_POINTS} points; sample fewer with sample = \"latin-hypercube\" and `points`"),
                        ))
                    }
                }
            }
            (kind, None) => {
                return Err(err(
                    "sweep.points",
                    format!(
                        "{} sampling needs `points`, the number of points to draw",
                        kind.name()
                    ),
                ))
            }
            (_, Some(n)) if n == 0 || n as usize > MAX_POINTS => {
                return Err(err(
                    "sweep.points",
                    format!("must be between 1 and {MAX_POINTS}, got {n}"),
                ))
            }
            (_, Some(n)) => Some(n as usize),
        };
        file.objective
            .check()
            .map_err(|(k, m)| err(&format!("objective.{k}"), m))?;
        Ok(Grid {
            origin: origin.to_string(),
            text: text.to_string(),
            sample: s.sample,
            points,
            seed: s.seed,
            axes,
            objective: file.objective,
        })
    }

    /// The axis keys as written, in order.
    pub fn keys(&self) -> Vec<String> {
        self.axes.iter().map(|a| a.key.clone()).collect()
    }

    /// The dimensions of the sweep: each a list of axis indices, one axis
    /// alone or a `zip` group, in the order of their first axis.
    pub fn dims(&self) -> Vec<Vec<usize>> {
        dims(&self.axes)
    }
}

fn dims(axes: &[Axis]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, a) in axes.iter().enumerate() {
        match a.zip {
            Some(g) => match out.iter_mut().find(|d| axes[d[0]].zip == Some(g)) {
                Some(d) => d.push(i),
                None => out.push(vec![i]),
            },
            None => out.push(vec![i]),
        }
    }
    out
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].matches('\n').count() + 1
}

/// A node of the `[axes]` tree as TOML gives it. Dotted keys nest tables, so
/// the tree is walked down to lists and ranges; map entries keep file order.
enum Node {
    Scalar(toml::Value),
    List(Vec<toml::Value>),
    Table(Vec<(String, Node)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of values, a { from, to, step } range, or a table of axes")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        i64::try_from(v)
            .map(|v| Node::Scalar(v.into()))
            .map_err(|_| E::custom(format!("{v} is too large for a TOML integer")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Scalar(v.into()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element::<toml::Value>()? {
            out.push(v);
        }
        Ok(Node::List(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            let v = map.next_value::<Node>()?;
            out.push((k, v));
        }
        Ok(Node::Table(out))
    }
}

type Invalid = (String, String);

const RANGE_KEYS: [&str; 3] = ["from", "to", "step"];

fn flatten(node: Node, prefix: &str, out: &mut Vec<Axis>) -> Result<(), Invalid> {
    let Node::Table(entries) = node else {
        return Err((
            String::new(),
            "must be a table of scenario keys, e.g. \"fleet.replicas\" = [2, 4]".into(),
        ));
    };
    for (k, v) in entries {
        if prefix.is_empty() && k == ZIP {
            zip_groups(v, out)?;
            continue;
        }
        let key = if prefix.is_empty() {
            k
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Node::List(values) => {
                if values.is_empty() {
                    return Err((key, "the list of values is empty".into()));
                }
                out.push(axis(key, AxisValues::List(values)));
            }
            Node::Table(entries) if entries.iter().any(|(k, _)| RANGE_KEYS.contains(&k.as_str())) => {
                let values = range(&entries).map_err(|m| (key.clone(), m))?;
                out.push(axis(key, values));
            }
            Node::Table(entries) => flatten(Node::Table(entries), &key, out)?,
            Node::Scalar(v) => {
                return Err((
                    key,
                    format!("an axis needs a list of values or a {{ from, to, step }} range, got the single value {v} (write [{v}] to fix it, or set it in the scenario)"),
                ))
            }
        }
    }
    Ok(())
}

fn axis(key: String, values: AxisValues) -> Axis {
    Axis {
        path: keypath::resolve(&key).to_string(),
        key,
        values,
        zip: None,
    }
}

/// The `[axes]` key of paired axes.
const ZIP: &str = "zip";

/// `zip`: one table of paired axes, or a list of such tables.
fn zip_groups(node: Node, out: &mut Vec<Axis>) -> Result<(), Invalid> {
    let tables = match node {
        Node::Table(entries) => vec![(ZIP.to_string(), Node::Table(entries))],
        Node::List(values) => values
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("{ZIP}[{i}]"), node_of(v)))
            .collect(),
        Node::Scalar(_) => {
            return Err((
                ZIP.into(),
                "must be a table of paired axes, e.g. [axes.zip] with \"hardware.preset\" = [\"h100-sxm\", \"h200\"] and \"fleet.tensor_parallel\" = [4, 2]".into(),
            ))
        }
    };
    for (name, table) in tables {
        let group = out.iter().filter_map(|a| a.zip).max().map_or(0, |g| g + 1);
        let mut axes = Vec::new();
        flatten(table, "", &mut axes).map_err(|(k, m)| (format!("{name}.{k}"), m))?;
        if axes.is_empty() {
            return Err((name, "is empty: list the axes that vary together".into()));
        }
        let mut len = None;
        for a in &mut axes {
            let AxisValues::List(v) = &a.values else {
                return Err((
                    format!("{name}.{}", a.key),
                    "paired axes need lists of values (or ranges with `step`)".into(),
                ));
            };
            if a.zip.is_some() {
                return Err((
                    format!("{name}.{}", a.key),
                    "a zip group cannot hold another".into(),
                ));
            }
            match len {
                None => len = Some((v.len(), a.key.clone())),
                Some((n, ref first)) if n != v.len() => {
                    return Err((
                        format!("{name}.{}", a.key),
                        format!(
                            "has {} values, `{first}` has {n}: paired axes need lists of the same length (the i-th values go together)",
                            v.len()
                        ),
                    ))
                }
                Some(_) => {}
            }
            a.zip = Some(group);
        }
        out.extend(axes);
    }
    Ok(())
}

/// A TOML value as an `[axes]` node (a table's keys in TOML's order).
fn node_of(v: toml::Value) -> Node {
    match v {
        toml::Value::Table(t) => Node::Table(t.into_iter().map(|(k, v)| (k, node_of(v))).collect()),
        toml::Value::Array(a) => Node::List(a),
        other => Node::Scalar(other),
    }
}

/// `{ from, to, step }` (inclusive of `to` when a step lands on it) or a
/// continuous `{ from, to }`.
fn range(entries: &[(String, Node)]) -> Result<AxisValues, String> {
    let (mut from, mut to, mut step) = (None, None, None);
    for (k, v) in entries {
        let Node::Scalar(v) = v else {
            return Err(format!("range field `{k}` must be a number"));
        };
        let slot = match k.as_str() {
            "from" => &mut from,
            "to" => &mut to,
            "step" => &mut step,
            other => {
                return Err(format!(
                    "unknown range field `{other}`; a range has `from`, `to` and optionally `step`"
                ))
            }
        };
        if !matches!(v, toml::Value::Integer(_) | toml::Value::Float(_)) {
            return Err(format!("range field `{k}` must be a number, got {v}"));
        }
        *slot = Some(v.clone());
    }
    let (Some(from), Some(to)) = (from, to) else {
        return Err("a range needs both `from` and `to`".into());
    };
    let num = |v: &toml::Value| match v {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        _ => unreachable!("checked numeric"),
    };
    let (lo, hi) = (num(&from), num(&to));
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        return Err(format!("`from` ({lo}) must not exceed `to` ({hi})"));
    }
    let Some(step) = step else {
        return Ok(AxisValues::Continuous {
            from: lo,
            to: hi,
            integer: from.is_integer() && to.is_integer(),
        });
    };
    let st = num(&step);
    if !(st.is_finite() && st > 0.0) {
        return Err(format!("`step` must be a positive number, got {st}"));
    }
    match (from, to, step) {
        (toml::Value::Integer(a), toml::Value::Integer(b), toml::Value::Integer(s)) => {
            // In i128: `to - from` of two i64 values may not fit an i64.
            let n = (b as i128 - a as i128) / s as i128 + 1;
            if n > MAX_POINTS as i128 {
                return Err(format!(
                    "the range has {n} values ({a} to {b} by {s}), more than {MAX_POINTS}; \
                     use a larger `step`"
                ));
            }
            let n = n as usize;
            Ok(AxisValues::List(
                (0..n as i64)
                    .map(|i| toml::Value::Integer(a + i * s))
                    .collect(),
            ))
        }
        _ => {
            // Tolerate rounding in (to - from) / step so 0.1..=0.3 by 0.1 has 3
            // values. The count is compared as a float: a tiny step makes it
            // far larger than any integer (1e300 would wrap to 0 points).
            let count = ((hi - lo) / st + 1e-9).floor() + 1.0;
            // NaN (an infinite range) is refused with the too-large ones.
            if count.is_nan() || count > MAX_POINTS as f64 {
                return Err(format!(
                    "the range has {count:.3e} values ({lo} to {hi} by {st:e}), more than \
                     {MAX_POINTS}; use a larger `step`"
                ));
            }
            let n = count as usize;
            if n > 1 && tidy(lo + st) == tidy(lo) {
                return Err(format!(
                    "`step` {st:e} is below the precision of the values ({lo} to {hi}): the \
                     points would repeat; use a larger `step`"
                ));
            }
            Ok(AxisValues::List(
                (0..n)
                    .map(|i| toml::Value::Float(tidy(lo + i as f64 * st)))
                    .collect(),
            ))
        }
    }
}

/// Rounds to 13 significant digits, so 0.1 + 2 × 0.1 prints as 0.3.
fn tidy(v: f64) -> f64 {
    format!("{v:.12e}").parse().unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(text: &str) -> Result<Grid, SweepError> {
        Grid::from_toml_str(text, "g.toml")
    }

    fn list(g: &Grid, i: usize) -> Vec<toml::Value> {
        match &g.axes[i].values {
            AxisValues::List(v) => v.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn axes_keep_file_order_and_ranges_expand() {
        let g = grid(
            r#"
[axes]
"fleet.replicas" = { from = 4, to = 32, step = 4 }
engine.max_batched_tokens = [2048, 4096, 8192]
"workload.rate" = { from = 0.1, to = 0.3, step = 0.1 }
"#,
        )
        .unwrap();
        assert_eq!(
            g.keys(),
            [
                "fleet.replicas",
                "engine.max_batched_tokens",
                "workload.rate"
            ]
        );
        assert_eq!(g.axes[2].path, "workload.arrival.rate");
        let reps: Vec<i64> = list(&g, 0)
            .iter()
            .map(|v| v.as_integer().unwrap())
            .collect();
        assert_eq!(reps, [4, 8, 12, 16, 20, 24, 28, 32]);
        let rates: Vec<f64> = list(&g, 2).iter().map(|v| v.as_float().unwrap()).collect();
        assert_eq!(rates, [0.1, 0.2, 0.3]);
        assert_eq!(g.sample, SampleKind::Cartesian);
    }

    #[test]
    fn nested_tables_name_full_paths() {
        let g = grid("[axes.engine]\nmax_num_seqs = [64, 128]\n[axes.fleet]\nreplicas = [1]\n")
            .unwrap();
        assert_eq!(g.keys(), ["engine.max_num_seqs", "fleet.replicas"]);
    }

    #[test]
    fn bad_grids_name_the_key() {
        let e = grid("[axes]\n\"fleet.replicas\" = 4\n").unwrap_err();
        assert!(e.0.starts_with("g.toml: axes.fleet.replicas: "), "{e}");
        assert!(e.0.contains("[4]"), "{e}");
        let e = grid("[axes]\nx = []\n").unwrap_err();
        assert!(e.0.contains("axes.x: the list of values is empty"), "{e}");
        let e = grid("[axes]\nx = { from = 5, to = 1, step = 1 }\n").unwrap_err();
        assert!(e.0.contains("must not exceed"), "{e}");
        let e = grid("[axes]\nx = { from = 1, to = 5, stp = 1 }\n").unwrap_err();
        assert!(e.0.contains("unknown range field `stp`"), "{e}");
        let e = grid("[axes]\nx = { from = 1, to = 5 }\n").unwrap_err();
        assert!(e.0.contains("without `step`"), "{e}");
        let e = grid("[axes]\nx = [1]\n\"x\" = [2]\n").unwrap_err();
        assert!(
            e.0.contains("line 3"),
            "duplicate keys are a TOML error: {e}"
        );
        let e = grid("[axes]\n\"workload.rate\" = [1.0]\n\"workload.arrival.rate\" = [2.0]\n")
            .unwrap_err();
        assert!(e.0.contains("already varies"), "{e}");
        let e = grid("[sweep]\nsample = \"sobol\"\n[axes]\nx = [1]\n").unwrap_err();
        assert!(
            e.0.contains("line 2") && e.0.contains("latin-hypercube"),
            "{e}"
        );
        let e = grid("[sweep]\nsample = \"random\"\n[axes]\nx = [1]\n").unwrap_err();
        assert!(e.0.contains("sweep.points"), "{e}");
        let e = grid("[sweep]\npoints = 3\n[axes]\nx = [1]\n").unwrap_err();
        assert!(e.0.contains("sweep.points"), "{e}");
        let e = grid("[swep]\n[axes]\nx = [1]\n").unwrap_err();
        assert!(e.0.contains("unknown field `swep`"), "{e}");
        let e = grid("").unwrap_err();
        assert!(e.0.contains("g.toml: axes: missing"), "{e}");
        let e = grid("[axes]\nx = { from = 1, to = 1000000000, step = 1 }\n").unwrap_err();
        assert!(e.0.contains("more than"), "{e}");
        // A tiny step ran 0 points: its count wrapped past usize.
        let e =
            grid("[axes]\n\"workload.arrival.rate\" = { from = 1.0, to = 2.0, step = 1e-300 }\n")
                .unwrap_err();
        assert!(
            e.0.contains("more than") && e.0.contains("larger `step`"),
            "{e}"
        );
        let e = grid(
            "[axes]\nx = { from = -9000000000000000000, to = 9000000000000000000, step = 1 }\n",
        )
        .unwrap_err();
        assert!(e.0.contains("more than"), "{e}");
        let e =
            grid("[axes]\nx = { from = 1.0, to = 1.000000000001, step = 1e-15 }\n").unwrap_err();
        assert!(e.0.contains("precision"), "{e}");
    }

    #[test]
    fn zipped_axes_are_one_dimension_with_paired_values() {
        let g = grid(
            "[axes]\n\"fleet.replicas\" = [1, 2, 3]\n[axes.zip]\n\"hardware.preset\" = [\"h100-sxm\", \"h200\"]\n\"fleet.tensor_parallel\" = [4, 2]\n",
        )
        .unwrap();
        assert_eq!(
            g.keys(),
            ["fleet.replicas", "hardware.preset", "fleet.tensor_parallel"]
        );
        assert_eq!(g.dims(), vec![vec![0], vec![1, 2]]);
        let pts = super::super::sample::points(&g, 0);
        // 3 replica counts × 2 hardware options, not × 2 × 2.
        assert_eq!(pts.len(), 6);
        let pairs: Vec<(String, i64)> = pts
            .iter()
            .map(|p| {
                (
                    p.values[1].as_str().unwrap().to_string(),
                    p.values[2].as_integer().unwrap(),
                )
            })
            .collect();
        for (hw, tp) in &pairs {
            assert_eq!(*tp, if hw == "h100-sxm" { 4 } else { 2 }, "{pairs:?}");
        }
        assert_eq!(pts[1].values[0].as_integer(), Some(1));
        // Sampled, a group draws one index for all its axes.
        let g = grid(
            "[sweep]\nsample = \"latin-hypercube\"\npoints = 8\n[axes]\nr = { from = 1, to = 8 }\n[[axes.zip]]\na = [1, 2, 3]\nb = [10, 20, 30]\n",
        )
        .unwrap();
        for p in super::super::sample::points(&g, 7) {
            let a = p.values[1].as_integer().unwrap();
            assert_eq!(p.values[2].as_integer(), Some(a * 10), "{p:?}");
        }
    }

    #[test]
    fn bad_zips_name_the_key() {
        let e = grid("[axes.zip]\na = [1, 2]\nb = [1, 2, 3]\n").unwrap_err();
        assert!(e.0.contains("axes.zip.b: has 3 values, `a` has 2"), "{e}");
        let e = grid("[sweep]\nsample = \"random\"\npoints = 2\n[axes.zip]\na = { from = 1, to = 2 }\nb = [1, 2]\n")
            .unwrap_err();
        assert!(e.0.contains("axes.zip.a: paired axes need lists"), "{e}");
        let e = grid("[axes]\nzip = 3\n").unwrap_err();
        assert!(
            e.0.contains("axes.zip: must be a table of paired axes"),
            "{e}"
        );
        let e = grid("[axes]\nx = [1]\n[axes.zip]\n").unwrap_err();
        assert!(e.0.contains("axes.zip: is empty"), "{e}");
    }

    #[test]
    fn continuous_ranges_are_for_sampling() {
        let g = grid(
            "[sweep]\nsample = \"latin-hypercube\"\npoints = 10\n[axes]\nr = { from = 1, to = 8 }\nx = { from = 0.5, to = 2 }\n",
        )
        .unwrap();
        assert_eq!(g.points, Some(10));
        assert_eq!(
            g.axes[0].values,
            AxisValues::Continuous {
                from: 1.0,
                to: 8.0,
                integer: true
            }
        );
        assert!(matches!(
            g.axes[1].values,
            AxisValues::Continuous { integer: false, .. }
        ));
    }
}
