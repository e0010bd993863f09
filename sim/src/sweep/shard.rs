//! Splitting a sweep over machines: shard `I/N` runs the points whose index
//! is `I` modulo `N` (so each shard gets a similar mix of small and large
//! configurations), and [`merge`] puts shard outputs back together into
//! exactly the results of an unsharded run. `I` is 0-based, matching
//! Slurm's `$SLURM_ARRAY_TASK_ID` (with `--array=0-(N-1)`) and Kubernetes'
//! `$JOB_COMPLETION_INDEX` for Indexed Jobs.

use super::results::SweepResults;
use super::SweepError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Shard `index` of `count` (0 ≤ index < count; a result file holding
/// another pair is refused as it is read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ShardFields")]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// A shard as a result file writes it, before its range is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardFields {
    index: usize,
    count: usize,
}

impl TryFrom<ShardFields> for Shard {
    type Error = String;
    fn try_from(f: ShardFields) -> Result<Shard, String> {
        if f.count == 0 || f.index >= f.count {
            return Err(format!(
                "shard {}/{} is not a shard: 0 ≤ index < count",
                f.index, f.count
            ));
        }
        Ok(Shard {
            index: f.index,
            count: f.count,
        })
    }
}

impl Shard {
    /// The whole sweep as one shard.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Whether point `i` belongs to this shard.
    pub fn holds(self, i: usize) -> bool {
        i % self.count == self.index
    }

    /// How many of the indices `0..total` the shard holds.
    pub fn share_of(self, total: usize) -> usize {
        if total > self.index {
            (total - self.index - 1) / self.count + 1
        } else {
            0
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// Parses `I/N`.
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("{s:?} is not a shard: write I/N with 0 ≤ I < N, e.g. 0/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// How input `i` of a merge is named in messages.
pub fn input_name(names: &[String], i: usize) -> String {
    names
        .get(i)
        .cloned()
        .unwrap_or_else(|| format!("input {i}"))
}

/// Checks that `shards` (one per input, `None` for an input holding a
/// whole `what`: "sweep", "plan") are the N distinct shards of one run,
/// all present; returns N. The inputs' being of the same run is the
/// caller's check.
pub fn check_set(
    shards: &[Option<Shard>],
    names: &[String],
    what: &str,
) -> Result<usize, SweepError> {
    let name = |i: usize| input_name(names, i);
    let count = match shards.first() {
        None => {
            return Err(SweepError::new(format!(
                "{what} merge: give the shard output folders to merge"
            )))
        }
        Some(None) => {
            return Err(SweepError::new(format!(
                "{}: holds a whole {what}, not a shard: nothing to merge",
                name(0)
            )))
        }
        Some(Some(s)) => s.count,
    };
    let mut seen = vec![None::<usize>; count];
    for (i, s) in shards.iter().enumerate() {
        let Some(s) = *s else {
            return Err(SweepError::new(format!(
                "{}: holds a whole {what}, not a shard",
                name(i)
            )));
        };
        if s.count != count {
            return Err(SweepError::new(format!(
                "{}: is shard {s} but {} is one of {count}",
                name(i),
                name(0)
            )));
        }
        if let Some(j) = seen[s.index] {
            return Err(SweepError::new(format!(
                "{} and {} are both shard {s}",
                name(j),
                name(i)
            )));
        }
        seen[s.index] = Some(i);
    }
    if let Some(missing) = seen.iter().position(Option::is_none) {
        return Err(SweepError::new(format!(
            "shard {missing}/{count} is missing: merge needs the outputs of all {count} shards"
        )));
    }
    Ok(count)
}

/// Merges the outputs of every shard of one sweep. `names` label the inputs
/// in errors (their paths). Fails unless the inputs are the `N` distinct
/// shards of the same sweep (same scenario, grid and size) and hold every
/// point exactly once.
pub fn merge(parts: Vec<SweepResults>, names: &[String]) -> Result<SweepResults, SweepError> {
    let Some(first) = parts.first() else {
        return Err(SweepError::new(
            "sweep merge: give the shard output folders to merge",
        ));
    };
    let name = |i: usize| input_name(names, i);
    for (i, p) in parts.iter().enumerate() {
        let same = p.format == first.format
            && p.scenario_toml == first.scenario_toml
            && p.grid_toml == first.grid_toml
            && p.points_total == first.points_total
            && p.axes == first.axes
            && p.sample == first.sample;
        if !same {
            return Err(SweepError::new(format!(
                "{}: comes from another sweep than {} (the scenario, grid or size differ)",
                name(i),
                name(0)
            )));
        }
        if let Some(q) = p
            .shard
            .and_then(|s| p.points.iter().find(|q| !s.holds(q.index)))
        {
            return Err(SweepError::new(format!(
                "{}: point {} does not belong to shard {}",
                name(i),
                q.index,
                p.shard.expect("found in a shard")
            )));
        }
    }
    let shards: Vec<Option<Shard>> = parts.iter().map(|p| p.shard).collect();
    check_set(&shards, names, "sweep")?;
    let mut merged = first.clone();
    merged.shard = None;
    merged.points = parts.into_iter().flat_map(|p| p.points).collect();
    merged.points.sort_by_key(|p| p.index);
    let complete = merged.points.len() == merged.points_total
        && merged.points.iter().enumerate().all(|(i, p)| p.index == i);
    if !complete {
        let have: std::collections::BTreeSet<usize> =
            merged.points.iter().map(|p| p.index).collect();
        let gap = (0..merged.points_total).find(|i| !have.contains(i));
        return Err(SweepError::new(match gap {
            Some(i) => format!(
                "point {i} of {} is in no shard's output",
                merged.points_total
            ),
            None => "a point appears twice in the shard outputs".to_string(),
        }));
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::grid::SampleKind;
    use crate::sweep::results::{PointResult, FORMAT};

    #[test]
    fn parses_and_selects() {
        let s: Shard = "1/3".parse().unwrap();
        assert_eq!(s, Shard { index: 1, count: 3 });
        let held: Vec<usize> = (0..8).filter(|&i| s.holds(i)).collect();
        assert_eq!(held, [1, 4, 7]);
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(s.to_string(), "1/3");
    }

    fn shard(i: usize, n: usize, total: usize) -> SweepResults {
        SweepResults {
            format: FORMAT.into(),
            scenario: "s".into(),
            scenario_path: "s.toml".into(),
            scenario_toml: "x".into(),
            grid_toml: "g".into(),
            sample: SampleKind::Cartesian,
            axes: vec!["a".into()],
            points_total: total,
            shard: Some(Shard { index: i, count: n }),
            points: (0..total)
                .filter(|p| p % n == i)
                .map(|p| PointResult {
                    index: p,
                    values: vec![p.into()],
                    offered_rps: None,
                    summary: serde_json::json!({ "p": p }),
                })
                .collect(),
        }
    }

    #[test]
    fn merges_complete_shard_sets_only() {
        let names: Vec<String> = (0..3).map(|i| format!("s{i}")).collect();
        let m = merge(vec![shard(2, 3, 7), shard(0, 3, 7), shard(1, 3, 7)], &names).unwrap();
        assert_eq!(m.shard, None);
        let idx: Vec<usize> = m.points.iter().map(|p| p.index).collect();
        assert_eq!(idx, (0..7).collect::<Vec<_>>());

        let e = merge(vec![shard(0, 3, 7), shard(1, 3, 7)], &names).unwrap_err();
        assert!(e.0.contains("shard 2/3 is missing"), "{e}");
        let e = merge(vec![shard(0, 2, 7), shard(0, 2, 7)], &names).unwrap_err();
        assert!(e.0.contains("both shard 0/2"), "{e}");
        let e = merge(vec![shard(0, 2, 7), shard(1, 3, 7)], &names).unwrap_err();
        assert!(e.0.contains("one of 2"), "{e}");
        let mut other = shard(1, 2, 7);
        other.grid_toml = "h".into();
        let e = merge(vec![shard(0, 2, 7), other], &names).unwrap_err();
        assert!(e.0.starts_with("s1: comes from another sweep"), "{e}");
        let mut short = shard(1, 2, 7);
        short.points.pop();
        let e = merge(vec![shard(0, 2, 7), short], &names).unwrap_err();
        assert!(e.0.contains("point 5 of 7 is in no shard"), "{e}");
        let mut whole = shard(0, 1, 3);
        whole.shard = None;
        assert!(merge(vec![whole], &names).is_err());
    }
}
