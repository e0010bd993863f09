//! Simulating every expressible point and comparing it with its
//! measurement. Points run on the rayon pool, one simulation per thread,
//! and are collected in input order, so results are identical at any
//! thread count.

use super::express::{express, Expressed, Settings, Unexpressible};
use super::{Load, MeasuredPoint, Metric, Stat};
use crate::stats::Dist;
use crate::Simulation;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// Version of the result files' layout.
pub const FORMAT: &str = "servesim-accuracy/1";

/// One measured statistic against its prediction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub metric: Metric,
    pub stat: Stat,
    pub measured_ms: f64,
    /// `None` when the simulation has no sample of the metric.
    pub predicted_ms: Option<f64>,
    /// (predicted − measured) / measured, as a fraction.
    pub error: Option<f64>,
}

/// What became of one point.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum PointOutcome {
    /// Simulated and compared.
    Compared {
        comparisons: Vec<Comparison>,
        /// Assumptions made for the point.
        notes: Vec<String>,
        /// The simulated model and hardware (catalog names).
        sim_model: String,
        sim_hardware: String,
        gpus: u32,
    },
    /// Not expressible as a scenario.
    Unexpressible(Unexpressible),
    /// Expressed, but the run failed (an invariant or a limit).
    Failed { reason: String },
}

/// A point, its labels for grouping, and its outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointResult {
    pub index: usize,
    pub point: MeasuredPoint,
    pub group: GroupKey,
    pub outcome: PointOutcome,
}

/// What points are grouped by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GroupKey {
    pub engine: String,
    pub version: String,
    pub chip: String,
    pub model: String,
    pub precision: String,
    pub mode: String,
    /// Concurrency band (`1-4`, `5-16`, …, `1025+`) or `rate`.
    pub band: String,
}

/// A field points can be grouped by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupField {
    Engine,
    Version,
    Chip,
    Model,
    Precision,
    Mode,
    Band,
}

impl GroupField {
    pub const ALL: [GroupField; 7] = [
        GroupField::Engine,
        GroupField::Version,
        GroupField::Chip,
        GroupField::Model,
        GroupField::Precision,
        GroupField::Mode,
        GroupField::Band,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GroupField::Engine => "engine",
            GroupField::Version => "version",
            GroupField::Chip => "chip",
            GroupField::Model => "model",
            GroupField::Precision => "precision",
            GroupField::Mode => "mode",
            GroupField::Band => "band",
        }
    }

    pub fn parse(name: &str) -> Option<GroupField> {
        GroupField::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl GroupKey {
    /// The key with the fields not in `by` merged (`*`).
    pub fn only(&self, by: &[GroupField]) -> GroupKey {
        let keep = |f: GroupField, v: &String| {
            if by.contains(&f) {
                v.clone()
            } else {
                "*".to_string()
            }
        };
        GroupKey {
            engine: keep(GroupField::Engine, &self.engine),
            version: keep(GroupField::Version, &self.version),
            chip: keep(GroupField::Chip, &self.chip),
            model: keep(GroupField::Model, &self.model),
            precision: keep(GroupField::Precision, &self.precision),
            mode: keep(GroupField::Mode, &self.mode),
            band: keep(GroupField::Band, &self.band),
        }
    }
}

/// Median errors of one metric over a group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupError {
    pub key: GroupKey,
    pub metric: Metric,
    /// The statistic compared (the mean where the files have it, else the
    /// median), as the group's first point has it.
    pub stat: Stat,
    pub count: usize,
    /// Median |error|, as a fraction.
    pub median_abs_error: f64,
    /// Median signed error, as a fraction (negative: servesim is faster).
    pub median_error: f64,
}

impl GroupError {
    /// The group's key, metric, statistic and count as table cells (the
    /// columns `groups.csv` and the HTML page share before the errors).
    pub fn label_cells(&self) -> Vec<String> {
        let k = &self.key;
        vec![
            k.engine.clone(),
            k.version.clone(),
            k.chip.clone(),
            k.model.clone(),
            k.precision.clone(),
            k.mode.clone(),
            k.band.clone(),
            self.metric.name().into(),
            self.stat.name().into(),
            self.count.to_string(),
        ]
    }
}

/// The whole comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AccuracyResults {
    pub format: String,
    /// The files read, in order.
    pub inputs: Vec<String>,
    /// The base scenario (`--scenario`), if any.
    pub scenario: Option<String>,
    pub points: Vec<PointResult>,
    pub groups: Vec<GroupError>,
    /// Overall median errors per metric (every compared point).
    pub overall: Vec<GroupError>,
}

/// The concurrency band of a point.
pub fn band(load: Option<&Load>) -> String {
    match load {
        Some(Load::Concurrency { users }) => {
            let u = *users;
            match u {
                0..=4 => "1-4",
                5..=16 => "5-16",
                17..=64 => "17-64",
                65..=256 => "65-256",
                257..=1024 => "257-1024",
                _ => "1025+",
            }
            .to_string()
        }
        Some(Load::Rate { .. }) => "rate".into(),
        None => "scenario".into(),
    }
}

fn group_key(p: &MeasuredPoint, sim: Option<(&str, &str)>) -> GroupKey {
    let or = |v: &Option<String>, fallback: Option<&str>| {
        v.clone()
            .or_else(|| fallback.map(str::to_string))
            .unwrap_or_else(|| "-".into())
    };
    GroupKey {
        engine: or(&p.engine, None),
        version: or(&p.engine_version, None),
        chip: or(&p.chip, sim.map(|s| s.1)),
        model: or(&p.model, sim.map(|s| s.0)),
        precision: or(&p.precision, None),
        mode: match &p.deployment {
            Some(super::Deployment::Agg { .. }) | None => "agg".into(),
            Some(_) => "disagg".into(),
        },
        band: band(p.load.as_ref()),
    }
}

fn stat_of(d: &Dist, s: Stat) -> Option<f64> {
    (d.count > 0).then_some(match s {
        Stat::Mean => d.mean,
        Stat::P50 => d.p50,
        Stat::P90 => d.p90,
        Stat::P95 => d.p95,
        Stat::P99 => d.p99,
    })
}

/// Whether every request of the expressed workload has the same prompt and
/// output length.
fn fixed_lengths(t: &toml::Table) -> bool {
    use crate::config::keypath;
    ["workload.prompt_tokens.dist", "workload.output_tokens.dist"]
        .iter()
        .all(|k| keypath::get(t, k).and_then(|v| v.as_str()) == Some("fixed"))
}

/// A closed loop of identical requests started together stays in
/// lockstep: every user's request ends in the same iteration and all of
/// them prefill together again, a burst each round that real benchmarks do
/// not see, because their random prompt lengths (vLLM's and InferenceX's
/// `--random-range-ratio`) spread the users apart within a few requests.
/// Starting the users spread over one request's duration (measured by a
/// pilot run of one request per user) gives that spread-out steady state.
/// A base scenario that sets its own `ramp_up_s` keeps it. Requests of
/// random lengths start together, as the benchmark sends them (its first
/// round a burst), and spread apart by themselves.
fn stagger(mut e: Expressed, point: &MeasuredPoint) -> Result<Expressed, String> {
    use crate::config::keypath;
    let Some(Load::Concurrency { users }) = point.load else {
        return Ok(e);
    };
    // A burst that sends each request once (as many users as requests)
    // is measured from its simultaneous start.
    let once = point.requests.is_some_and(|n| n <= u64::from(users));
    if point.own_workload
        || !fixed_lengths(&e.table)
        || once
        || users < 2
        || keypath::get(&e.table, "workload.arrival.ramp_up_s").is_some()
        || keypath::get(&e.table, "workload.arrival.process").and_then(|v| v.as_str())
            != Some("closed")
    {
        return Ok(e);
    }
    let resolve = |t: &toml::Table| {
        crate::Scenario::from_table(t.clone(), &format!("<accuracy> + {}", point.id))
            .map_err(|err| err.to_string())
    };
    let mut pilot = e.table.clone();
    keypath::set(&mut pilot, "horizon.requests", i64::from(users).into())?;
    let r = Simulation::new(&resolve(&pilot)?)
        .run(|_| {})
        .map_err(|err| format!("pilot run: {err}"))?;
    let e2e_s = r.summary.latency.e2e_ms.mean / 1e3;
    if !(e2e_s.is_finite() && e2e_s > 0.0) {
        return Ok(e);
    }
    keypath::set(&mut e.table, "workload.arrival.ramp_up_s", e2e_s.into())?;
    e.scenario = resolve(&e.table)?;
    e.notes.push(format!(
        "users start spread over {e2e_s:.3} s, one request's duration in a pilot run"
    ));
    Ok(e)
}

fn run_point(
    index: usize,
    point: &MeasuredPoint,
    base: Option<&toml::Table>,
    origin: &str,
    settings: &Settings,
) -> PointResult {
    let e = match express(base, origin, settings, point) {
        Ok(e) => e,
        Err(u) => {
            return PointResult {
                index,
                group: group_key(point, None),
                point: point.clone(),
                outcome: PointOutcome::Unexpressible(u),
            }
        }
    };
    let e = match stagger(e, point) {
        Ok(e) => e,
        Err(reason) => {
            return PointResult {
                index,
                group: group_key(point, None),
                point: point.clone(),
                outcome: PointOutcome::Failed { reason },
            }
        }
    };
    let sim = (
        e.scenario.model.name.as_str(),
        e.scenario.hardware.name.as_str(),
    );
    let group = group_key(point, Some(sim));
    let outcome = match Simulation::new(&e.scenario).run(|_| {}) {
        Err(err) => PointOutcome::Failed {
            reason: err.to_string(),
        },
        Ok(r) if r.summary.counts.completed == 0 => {
            // No latency to compare: say why rather than list a point with
            // no prediction.
            let c = &r.summary.counts;
            let reasons: Vec<String> = c
                .rejected_by_reason
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            PointOutcome::Failed {
                reason: format!(
                    "the simulated run completed no request: {} arrived, {} rejected{}, {} in flight at the horizon",
                    c.arrived,
                    c.rejected,
                    if reasons.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", reasons.join(", "))
                    },
                    c.in_flight
                ),
            }
        }
        Ok(r) => {
            let l = &r.summary.latency;
            let comparisons = point
                .measured
                .iter()
                .map(|m| {
                    let d = match m.metric {
                        Metric::Ttft => &l.ttft_ms,
                        Metric::Tpot => &l.tpot_ms,
                        Metric::Itl => &l.itl_ms,
                        Metric::E2e => &l.e2e_ms,
                    };
                    let predicted_ms = stat_of(d, m.stat);
                    Comparison {
                        metric: m.metric,
                        stat: m.stat,
                        measured_ms: m.ms,
                        predicted_ms,
                        error: predicted_ms
                            .filter(|_| m.ms > 0.0)
                            .map(|p| (p - m.ms) / m.ms),
                    }
                })
                .collect();
            PointOutcome::Compared {
                comparisons,
                notes: e.notes,
                sim_model: sim.0.to_string(),
                sim_hardware: sim.1.to_string(),
                gpus: e.scenario.gpus(),
            }
        }
    };
    PointResult {
        index,
        point: point.clone(),
        group,
        outcome,
    }
}

/// The median of `v` (sorted in place), the mean of the middle two for an
/// even count.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The statistic a point is judged by for `metric`: its mean, else its
/// median.
fn headline(comparisons: &[Comparison], metric: Metric) -> Option<(Stat, f64)> {
    [Stat::Mean, Stat::P50].into_iter().find_map(|s| {
        comparisons
            .iter()
            .find(|c| c.metric == metric && c.stat == s)
            .and_then(|c| c.error.map(|e| (s, e)))
    })
}

/// Median errors per (group, metric), over compared points; `key` maps a
/// point to its group.
pub fn summarize(
    points: &[PointResult],
    key: impl Fn(&PointResult) -> GroupKey,
) -> Vec<GroupError> {
    let mut by: BTreeMap<(GroupKey, Metric), (Stat, Vec<f64>)> = BTreeMap::new();
    for p in points {
        let PointOutcome::Compared { comparisons, .. } = &p.outcome else {
            continue;
        };
        for metric in Metric::ALL {
            if let Some((stat, e)) = headline(comparisons, metric) {
                by.entry((key(p), metric))
                    .or_insert_with(|| (stat, Vec::new()))
                    .1
                    .push(e);
            }
        }
    }
    by.into_iter()
        .map(|((key, metric), (stat, mut errors))| {
            let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
            GroupError {
                key,
                metric,
                stat,
                count: errors.len(),
                median_abs_error: median(&mut abs),
                median_error: median(&mut errors),
            }
        })
        .collect()
}

/// Simulates every point of `points` (in parallel) and compares, grouping
/// by the fields `group_by` names. `on_point_done` is called from worker
/// threads, for progress bars.
pub fn compare(
    inputs: Vec<String>,
    points: &[MeasuredPoint],
    base: Option<(&toml::Table, &str)>,
    settings: &Settings,
    group_by: &[GroupField],
    on_point_done: &(dyn Fn() + Sync),
) -> AccuracyResults {
    let origin = base.map_or("<accuracy>", |b| b.1);
    let base_table = base.map(|b| b.0);
    let results: Vec<PointResult> = points
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let r = run_point(i, p, base_table, origin, settings);
            on_point_done();
            r
        })
        .collect();
    let groups = summarize(&results, |p| p.group.only(group_by));
    let overall = summarize(&results, |p| p.group.only(&[]));
    AccuracyResults {
        format: FORMAT.into(),
        inputs,
        scenario: base.map(|b| b.1.to_string()),
        points: results,
        groups,
        overall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn bands_split_concurrency_by_powers_of_four() {
        let c = |users| band(Some(&Load::Concurrency { users }));
        assert_eq!(c(1), "1-4");
        assert_eq!(c(64), "17-64");
        assert_eq!(c(8192), "1025+");
        assert_eq!(band(Some(&Load::Rate { rate: 2.0, cv: 1.0 })), "rate");
    }

    fn sample() -> Vec<MeasuredPoint> {
        crate::accuracy::read(include_str!("testdata/aiconfigurator.csv"), "s.csv").unwrap()
    }

    fn settings() -> Settings {
        Settings {
            max_requests: 12,
            ..Settings::default()
        }
    }

    #[test]
    fn each_point_is_compared_or_listed_with_its_reason() {
        use crate::accuracy::express::ReasonKind;
        let points = sample();
        let r = compare(
            vec!["s.csv".into()],
            &points,
            None,
            &settings(),
            &GroupField::ALL,
            &|| {},
        );
        assert_eq!(r.points.len(), points.len());
        let kinds: Vec<Option<ReasonKind>> = r
            .points
            .iter()
            .map(|p| match &p.outcome {
                PointOutcome::Compared { .. } => None,
                PointOutcome::Unexpressible(u) => Some(u.kind),
                PointOutcome::Failed { reason } => panic!("{reason}"),
            })
            .collect();
        assert_eq!(kinds[0], None, "Llama-3.1-8B bf16 on one H100");
        assert_eq!(kinds[1], None, "Llama-3.1-70B fp8 TP 4 on H200");
        assert_eq!(
            kinds[2],
            Some(ReasonKind::NotRecorded),
            "disagg without workers"
        );
        assert_eq!(kinds[4], None, "MoE EP 8 under attention TP 8");
        let PointOutcome::Compared { comparisons, .. } = &r.points[0].outcome else {
            unreachable!()
        };
        assert_eq!(comparisons.len(), 2);
        for c in comparisons {
            let p = c.predicted_ms.expect("a prediction");
            assert!(p > 0.0);
            assert_eq!(c.error, Some((p - c.measured_ms) / c.measured_ms));
        }
        assert!(r
            .overall
            .iter()
            .any(|g| g.metric == Metric::Ttft
                && g.count == kinds.iter().filter(|k| k.is_none()).count()));
    }

    #[test]
    fn results_do_not_depend_on_threads() {
        let points = sample();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let three = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let run = || {
            compare(
                vec!["s.csv".into()],
                &points,
                None,
                &settings(),
                &GroupField::ALL,
                &|| {},
            )
        };
        let a = one.install(run);
        let b = three.install(run);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
    }
}
