//! Sweep checkpoints: every finished point is written at once to
//! `points/<index>.json` in the output folder (atomically, see
//! `output::write_atomic`), beside `points/plan.json`, the scenario and
//! grid text it belongs to. An interrupted sweep (SIGINT, a failing point,
//! a crash) keeps every finished point, and running the same sweep into the
//! same folder again resumes: points already there are read back instead of
//! rerun. A point file round-trips exactly (serde_json's `float_roundtrip`),
//! so a resumed sweep writes the same bytes as an uninterrupted one. The
//! folder is removed once `sweep.json` is written.
//!
//! `servesim plan` checkpoints its options the same way, in `options/`,
//! with the query (demand, headroom, attainment) in the folder's identity.

use super::results::PointResult;
use super::SweepError;
use crate::output::write_bytes_atomic;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Subfolder of the output folder holding finished points.
pub const POINTS_DIR: &str = "points";

/// What the checkpointed points were run from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct PlanId {
    scenario_toml: String,
    grid_toml: String,
    /// What else the results depend on (a plan's demand and targets).
    #[serde(default)]
    query: String,
}

/// A result a checkpoint holds: one file per index.
pub trait Checkpointed: Serialize + DeserializeOwned {
    /// Its index in the sweep or space.
    fn index(&self) -> usize;
}

impl Checkpointed for PointResult {
    fn index(&self) -> usize {
        self.index
    }
}

/// The checkpoint folder of one sweep (or plan).
pub struct Checkpoint<T = PointResult> {
    dir: PathBuf,
    /// Results finished by an earlier, interrupted run of the same sweep.
    pub done: BTreeMap<usize, T>,
}

impl Checkpoint<PointResult> {
    /// Opens `out/points/`: keeps its points when they belong to this
    /// sweep, clears them otherwise.
    pub fn open(
        out: &Path,
        scenario_toml: &str,
        grid_toml: &str,
    ) -> Result<Checkpoint, SweepError> {
        Checkpoint::open_in(&out.join(POINTS_DIR), scenario_toml, grid_toml, "")
    }
}

impl<T: Checkpointed> Checkpoint<T> {
    /// Opens the checkpoint folder `dir`: keeps its results when they
    /// belong to the same scenario, grid and query, clears them otherwise.
    pub fn open_in(
        dir: &Path,
        scenario_toml: &str,
        grid_toml: &str,
        query: &str,
    ) -> Result<Checkpoint<T>, SweepError> {
        let dir = dir.to_path_buf();
        let io = |e: std::io::Error| SweepError::new(format!("{}: {e}", dir.display()));
        let id = PlanId {
            scenario_toml: scenario_toml.to_string(),
            grid_toml: grid_toml.to_string(),
            query: query.to_string(),
        };
        let plan_file = dir.join("plan.json");
        let same = crate::input_file::read_result(&plan_file, "checkpoint")
            .ok()
            .and_then(|t| serde_json::from_str::<PlanId>(&t).ok())
            .is_some_and(|old| old == id);
        let mut done = BTreeMap::new();
        if same {
            for e in fs::read_dir(&dir).map_err(io)? {
                let p = e.map_err(io)?.path();
                let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                let Ok(i) = stem.parse::<usize>() else {
                    continue;
                };
                // A file that does not read back is rerun.
                if let Some(r) = crate::input_file::read_result(&p, "checkpoint")
                    .ok()
                    .and_then(|t| serde_json::from_str::<T>(&t).ok())
                    .filter(|r| r.index() == i)
                {
                    done.insert(i, r);
                }
            }
        } else {
            match fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
                _ => {}
            }
            fs::create_dir_all(&dir).map_err(io)?;
            let text = serde_json::to_string(&id).map_err(|e| SweepError::new(e.to_string()))?;
            write_bytes_atomic(&plan_file, text.as_bytes()).map_err(io)?;
        }
        Ok(Checkpoint { dir, done })
    }

    /// Saves a finished result.
    pub fn save(&self, p: &T) -> Result<(), SweepError> {
        let path = self.dir.join(format!("{}.json", p.index()));
        let text = serde_json::to_string(p).map_err(|e| SweepError::new(e.to_string()))?;
        write_bytes_atomic(&path, text.as_bytes())
            .map_err(|e| SweepError::new(format!("{}: {e}", path.display())))
    }

    /// Removes the folder once the sweep's results are written.
    pub fn finish(self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::checked::tests::plan;
    use crate::sweep::run::{run, run_resumable};
    use crate::sweep::Shard;

    #[test]
    fn an_interrupted_sweep_resumes_from_its_finished_points() {
        let grid = "[axes]\n\"fleet.replicas\" = [1, 2, 3]\n";
        let p = plan(grid).unwrap();
        let whole = run(&p, Shard::ALL, &|| {}).unwrap();
        let out = tempfile::tempdir().unwrap();
        // An interrupted run: only points 0 and 2 were saved.
        let c = Checkpoint::open(out.path(), &p.scenario_toml, &p.grid.text).unwrap();
        assert!(c.done.is_empty());
        c.save(&whole.points[0]).unwrap();
        c.save(&whole.points[2]).unwrap();
        // Rerun: two points are read back, one is run; the result is the same.
        let c = Checkpoint::open(out.path(), &p.scenario_toml, &p.grid.text).unwrap();
        assert_eq!(c.done.keys().copied().collect::<Vec<_>>(), [0, 2]);
        let ran = std::sync::atomic::AtomicUsize::new(0);
        let resumed = run_resumable(
            &p,
            Shard::ALL,
            &|| {
                ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            },
            Some(&c),
        )
        .unwrap();
        assert_eq!(resumed, whole);
        assert_eq!(ran.into_inner(), 3);
        // Another sweep in the same folder does not reuse them.
        let other = Checkpoint::open(out.path(), &p.scenario_toml, "[axes]\n").unwrap();
        assert!(other.done.is_empty());
        other.finish();
        assert!(!out.path().join(POINTS_DIR).exists());
    }
}
