//! Sweep result files: `sweep.json` (the sweep's definition and every point's
//! full summary) and `sweep.csv` (one row per point: the varied keys, then
//! every summary metric flattened to a dotted column name).
//!
//! Both are functions of the points alone — no wall-clock times, no thread
//! or shard identity beyond the `shard` field — so the same sweep gives
//! byte-identical files at any thread count, and merged shards give the
//! files of an unsharded run.

use super::grid::SampleKind;
use super::shard::Shard;
use super::SweepError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::Path;

/// Format tag of `sweep.json`; bumped when its shape changes.
pub const FORMAT: &str = "servesim-sweep/1";

/// Everything a sweep (or one shard of it) produced: `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepResults {
    pub format: String,
    /// The scenario's name.
    pub scenario: String,
    /// The scenario file as named on the command line: files it refers to
    /// (traces) are found relative to its folder when shards are merged.
    pub scenario_path: String,
    /// The base scenario file's text: with `grid_toml` it reproduces any point.
    pub scenario_toml: String,
    /// The grid file's text.
    pub grid_toml: String,
    pub sample: SampleKind,
    /// Axis keys as the grid writes them, in order.
    pub axes: Vec<String>,
    /// Points in the whole sweep (all shards).
    pub points_total: usize,
    /// Which shard this file holds; `None` for a whole sweep.
    pub shard: Option<Shard>,
    /// The points run, in index order.
    pub points: Vec<PointResult>,
}

/// One point's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointResult {
    pub index: usize,
    /// Axis values, in the order of `SweepResults::axes`.
    pub values: Vec<Value>,
    /// The arrival rate the point's scenario offers (requests/s), when its
    /// workload has one.
    pub offered_rps: Option<f64>,
    /// The run's `Summary`, as in `summary.json` (keys sorted).
    pub summary: Value,
}

impl SweepResults {
    /// Writes `sweep.json` and `sweep.csv` into `dir` (created if missing).
    pub fn write(&self, dir: &Path) -> Result<(), SweepError> {
        let io = |e: std::io::Error| {
            SweepError::new(format!("cannot write results to {}: {e}", dir.display()))
        };
        fs::create_dir_all(dir).map_err(io)?;
        let mut json = serde_json::to_string_pretty(self)
            .map_err(|e| SweepError::new(format!("cannot encode sweep.json: {e}")))?;
        json.push('\n');
        // Each file is renamed into place whole; the two are one result, so
        // when either cannot be written neither is left (an older sweep's
        // file beside a newer one would be read as one sweep).
        let (csv, js) = (dir.join("sweep.csv"), dir.join("sweep.json"));
        let written = crate::output::write_atomic(&csv, |w| self.write_csv(w))
            .and_then(|()| crate::output::write_bytes_atomic(&js, json.as_bytes()));
        if let Err(e) = written {
            let _ = fs::remove_file(&csv);
            let _ = fs::remove_file(&js);
            return Err(io(e));
        }
        Ok(())
    }

    /// Reads a `sweep.json`.
    pub fn read(path: &Path) -> Result<SweepResults, SweepError> {
        let p = path.display();
        let text = crate::input_file::read_result(path, "sweep results")
            .map_err(|e| SweepError::new(e.to_string()))?;
        let r: SweepResults = serde_json::from_str(&text)
            .map_err(|e| SweepError::new(format!("{p}: not a sweep.json: {e}")))?;
        if r.format != FORMAT {
            return Err(SweepError::new(format!(
                "{p}: format {:?} is not {FORMAT:?} (written by another servesim version?)",
                r.format
            )));
        }
        r.check_points()
            .map_err(|m| SweepError::new(format!("{p}: {m}")))?;
        Ok(r)
    }

    /// Its points against its own header: as many as its shard of
    /// `points_total` holds, each once, in index order, with a value per axis.
    fn check_points(&self) -> Result<(), String> {
        let shard = self.shard.unwrap_or(Shard::ALL);
        let want = shard.share_of(self.points_total);
        if self.points.len() != want {
            return Err(format!(
                "holds {} points, but its header says {} ({} in all{}): the file was cut or edited; rerun the sweep",
                self.points.len(),
                want,
                self.points_total,
                self.shard.map(|s| format!(", shard {s}")).unwrap_or_default()
            ));
        }
        let mut last = None;
        for p in &self.points {
            if p.index >= self.points_total || !shard.holds(p.index) || last >= Some(p.index) {
                return Err(format!(
                    "point {} is out of place (points in index order, each once, from the sweep's {})",
                    p.index, self.points_total
                ));
            }
            if p.values.len() != self.axes.len() {
                return Err(format!(
                    "point {} has {} axis values for {} axes",
                    p.index,
                    p.values.len(),
                    self.axes.len()
                ));
            }
            last = Some(p.index);
        }
        Ok(())
    }

    /// The summary columns of `sweep.csv`: every leaf of every point's
    /// summary, as dotted paths. A sorted union, so it does not depend on
    /// which points a file holds (a map such as `rejected_by_reason` has
    /// keys only where something was rejected).
    pub fn summary_columns(&self) -> Vec<String> {
        let mut cols: BTreeSet<Vec<String>> = BTreeSet::new();
        for p in &self.points {
            let mut leaves = Vec::new();
            leaves_of(&p.summary, &mut Vec::new(), &mut leaves);
            cols.extend(leaves.into_iter().map(|(k, _)| k));
        }
        cols.into_iter().map(|k| k.join(".")).collect()
    }

    fn write_csv(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut w = csv::Writer::from_writer(out);
        // A summary leaf named like an axis (`engine.policy`, `seed`) holds the
        // same setting: the axis column already shows it, so it is not repeated.
        let mut cols = self.summary_columns();
        cols.retain(|c| !self.axes.contains(c) && c != "offered_rps" && c != "point");
        let mut header = vec!["point".to_string()];
        header.extend(self.axes.iter().cloned());
        header.push("offered_rps".into());
        header.extend(cols.iter().cloned());
        w.write_record(&header)?;
        for p in &self.points {
            let mut leaves = Vec::new();
            leaves_of(&p.summary, &mut Vec::new(), &mut leaves);
            let by_key: BTreeMap<String, &Value> =
                leaves.into_iter().map(|(k, v)| (k.join("."), v)).collect();
            let mut row = vec![p.index.to_string()];
            row.extend(p.values.iter().map(cell));
            row.push(
                p.offered_rps
                    .map(Value::from)
                    .as_ref()
                    .map(cell)
                    .unwrap_or_default(),
            );
            row.extend(
                cols.iter()
                    .map(|c| by_key.get(c).map(|v| cell(v)).unwrap_or_default()),
            );
            w.write_record(&row)?;
        }
        w.into_inner().map_err(|e| e.into_error())?.flush()
    }
}

/// Leaves of a JSON tree with their paths (objects recurse; empty objects
/// contribute nothing).
fn leaves_of<'a>(v: &'a Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, &'a Value)>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                path.push(k.clone());
                leaves_of(child, path, out);
                path.pop();
            }
        }
        _ => out.push((path.clone(), v)),
    }
}

/// A CSV cell: strings bare, numbers as JSON writes them, null empty,
/// arrays and tables as compact JSON.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// The number at dotted `path` in a JSON tree, if any.
pub fn number_at(v: &Value, path: &str) -> Option<f64> {
    path.split('.')
        .try_fold(v, |v, seg| v.get(seg))
        .and_then(Value::as_f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn results(points: Vec<PointResult>) -> SweepResults {
        SweepResults {
            format: FORMAT.into(),
            scenario: "s".into(),
            scenario_path: "s.toml".into(),
            scenario_toml: String::new(),
            grid_toml: String::new(),
            sample: SampleKind::Cartesian,
            axes: vec!["fleet.replicas".into()],
            points_total: points.len(),
            shard: None,
            points,
        }
    }

    #[test]
    fn csv_has_one_row_per_point_and_a_union_of_columns() {
        let p = |i: usize, s: Value| PointResult {
            index: i,
            values: vec![json!(i + 1)],
            offered_rps: Some(2.5),
            summary: s,
        };
        let r = results(vec![
            p(
                0,
                json!({"counts": {"arrived": 10, "rejected_by_reason": {}}, "router": "rr"}),
            ),
            p(
                1,
                json!({"counts": {"arrived": 11, "rejected_by_reason": {"too_long": 2}}, "router": "a,b"}),
            ),
        ]);
        assert_eq!(
            r.summary_columns(),
            [
                "counts.arrived",
                "counts.rejected_by_reason.too_long",
                "router"
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        r.write(dir.path()).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("sweep.csv")).unwrap();
        assert_eq!(
            csv,
            "point,fleet.replicas,offered_rps,counts.arrived,counts.rejected_by_reason.too_long,router\n\
             0,1,2.5,10,,rr\n\
             1,2,2.5,11,2,\"a,b\"\n"
        );
        let back = SweepResults::read(&dir.path().join("sweep.json")).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            number_at(&back.points[1].summary, "counts.arrived"),
            Some(11.0)
        );
        assert_eq!(number_at(&back.points[1].summary, "counts.nope"), None);

        // A sweep.json cut to fewer points than its header says, or with a
        // point out of place, is refused rather than read as the sweep.
        let js = dir.path().join("sweep.json");
        let mut cut = r.clone();
        cut.points.truncate(1);
        std::fs::write(&js, serde_json::to_string(&cut).unwrap()).unwrap();
        let e = SweepResults::read(&js).unwrap_err();
        assert!(e.0.contains("holds 1 points, but its header says 2"), "{e}");
        let mut moved = r.clone();
        moved.points[1].index = 0;
        std::fs::write(&js, serde_json::to_string(&moved).unwrap()).unwrap();
        let e = SweepResults::read(&js).unwrap_err();
        assert!(e.0.contains("point 0 is out of place"), "{e}");
        r.write(dir.path()).unwrap();

        // An axis named like a summary leaf is one column, not two.
        let mut r = r;
        r.axes = vec!["router".into()];
        r.write(dir.path()).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("sweep.csv")).unwrap();
        assert_eq!(
            csv.lines().next().unwrap(),
            "point,router,offered_rps,counts.arrived,counts.rejected_by_reason.too_long"
        );
    }

    #[test]
    fn a_failed_write_leaves_neither_file() {
        let r = results(vec![PointResult {
            index: 0,
            values: vec![json!(1)],
            offered_rps: None,
            summary: json!({"router": "rr"}),
        }]);
        let dir = tempfile::tempdir().unwrap();
        // An earlier sweep's files, then a sweep.json that cannot be
        // replaced (a folder in its place stands for a full disk).
        r.write(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join("sweep.json")).unwrap();
        std::fs::create_dir_all(dir.path().join("sweep.json").join("x")).unwrap();
        let e = r.write(dir.path()).unwrap_err();
        assert!(e.0.contains("cannot write results"), "{e}");
        assert!(!dir.path().join("sweep.csv").exists());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["sweep.json"], "no temporaries left: {names:?}");
    }

    #[test]
    fn floats_survive_a_round_trip_exactly() {
        let x = 0.1 + 0.2;
        let r = results(vec![PointResult {
            index: 0,
            values: vec![json!(x)],
            offered_rps: Some(1.0 / 3.0),
            summary: json!({"v": 2.0f64.sqrt(), "w": 1e-300, "z": 123456.789e10}),
        }]);
        let text = serde_json::to_string_pretty(&r).unwrap();
        let back: SweepResults = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
    }
}
