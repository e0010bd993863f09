//! The plan's search: two stages over horizons, then the winner's headroom.
//!
//! 1. **Short stage**, every option in parallel: one replica at a light
//!    load (an option that misses the SLOs even then misses them with any
//!    count and is pruned), the highest load one replica sustains, and the
//!    fewest replicas meeting the SLOs at the demand
//!    ([`capacity::size_short`]).
//! 2. **Long stage**, best first: the long re-check
//!    ([`capacity::verify_long`], a horizon four times longer) only keeps or
//!    grows a short count, except when the probe below it missed only the
//!    steady-state verdict ([`capacity::is_shaky`]). So a short count's cost
//!    is a lower bound, and the options are re-checked in rounds, cheapest
//!    lower bound first (ties together, in parallel), until every option
//!    left has a lower bound above the cheapest re-checked cost. Shaky
//!    options have no such bound and are all re-checked in the first round.
//!    The answer is the one re-checking every option would give; the
//!    options left out keep their short counts, marked as not re-checked.
//!    This is successive halving (Jamieson and Talwalkar, "Non-stochastic
//!    Best Arm Identification and Hyperparameter Optimization", 2016) with
//!    the short horizon's answer used as a bound rather than a guess, which
//!    keeps it exact.
//!
//! Every option's stage results are saved as they finish when a
//! checkpoint is given, so a plan interrupted in either stage resumes
//! where it stopped.

use super::{
    finish, options, price_of, rederive, resolve, sized, DeployPlan, OptionResult, PlanInputs,
    PlanQuery, LIGHT_LOAD_DIVISOR,
};
use crate::sweep::capacity::{self, plan_capacity, CapacityQuery, Found, Probe};
use crate::sweep::checkpoint::{Checkpoint, Checkpointed};
use crate::sweep::{Grid, Shard, SweepError};
use crate::Scenario;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};

/// An option between the stages, as a checkpoint holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StagedOption {
    /// The option as reported so far.
    pub result: OptionResult,
    /// The short search's find, while the option is sized.
    pub found: Option<Found>,
}

impl Checkpointed for StagedOption {
    fn index(&self) -> usize {
        self.result.index
    }
}

impl StagedOption {
    /// The monthly cost of its fleet so far (a lower bound until re-checked).
    fn cost(&self) -> Option<f64> {
        self.result.fleet.as_ref().map(|f| f.usd_per_month)
    }

    /// Waiting for the long re-check.
    fn pending(&self) -> bool {
        self.found.is_some() && !self.result.rechecked
    }
}

/// One option of the space, ready to run.
struct Candidate {
    index: usize,
    settings: String,
    table: toml::Table,
    text: String,
}

/// The candidates of the space's options that `shard` holds.
fn candidates(
    space: &[(usize, String, toml::Table)],
    shard: Shard,
) -> Result<Vec<Candidate>, SweepError> {
    space
        .iter()
        .filter(|(i, _, _)| shard.holds(*i))
        .map(|(index, settings, table)| {
            let text = toml::to_string(table).map_err(|e| SweepError::new(e.to_string()))?;
            Ok(Candidate {
                index: *index,
                settings: settings.clone(),
                table: table.clone(),
                text,
            })
        })
        .collect()
}

/// Plans the cheapest deployment of `scenario_toml` over the space `grid`
/// for `q`, on the options `shard` holds. `on_probe` sees every simulation
/// as it finishes with its option's index (from several threads);
/// `checkpoint` keeps every option's stages and supplies those an earlier
/// run finished. A whole plan (`Shard::ALL`) also measures its winner's
/// headroom; a shard leaves that to [`super::merge`].
pub fn plan_deployment(
    scenario_toml: &str,
    origin: &str,
    grid: &Grid,
    q: &PlanQuery,
    shard: Shard,
    checkpoint: Option<&Checkpoint<StagedOption>>,
    on_probe: &(dyn Fn(usize, &Probe) + Sync),
) -> Result<DeployPlan, SweepError> {
    q.check()?;
    let base_scenario = Scenario::from_toml_str(scenario_toml, origin)?;
    if base_scenario.file.slo.is_none() {
        return Err(SweepError::new(format!(
            "{origin}: slo: missing: a plan needs [slo] targets to judge options by"
        )));
    }
    let base: toml::Table = scenario_toml
        .parse()
        .map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
    let price = price_of(grid)?;
    let space = options(&base, grid)?;
    let cands = candidates(&space, shard)?;
    let save = |st: &StagedOption| checkpoint.map_or(Ok(()), |c| c.save(st));
    // A checkpointed option is reused only when it is what this space's
    // option would give: its cost re-derived from its count (an edited
    // file that disagrees is rerun).
    let reuse = |c: &Candidate| {
        let done = checkpoint.and_then(|k| k.done.get(&c.index))?;
        let result = rederive(&done.result, &space, origin, price, q).ok()?;
        let consistent = match (&result.fleet, &done.found) {
            (Some(f), Some(found)) => found.0 == f.units.unwrap_or(f.replicas),
            (Some(_), None) => false,
            (None, found) => found.is_none(),
        };
        consistent.then(|| StagedOption {
            result,
            found: done.found.clone(),
        })
    };

    let mut staged = cands
        .par_iter()
        .map(|c| {
            if let Some(done) = reuse(c) {
                return Ok(done);
            }
            let st = short_stage(c, origin, price, q, on_probe)?;
            save(&st)?;
            Ok(st)
        })
        .collect::<Result<Vec<_>, SweepError>>()?;

    while let Some(round) = next_round(&staged, q.attainment) {
        let done = round
            .par_iter()
            .map(|&i| {
                let st = long_stage(&staged[i], &cands[i], origin, price, q, on_probe);
                save(&st)?;
                Ok(st)
            })
            .collect::<Result<Vec<_>, SweepError>>()?;
        for (i, st) in round.into_iter().zip(done) {
            staged[i] = st;
        }
    }

    let results = staged.into_iter().map(|s| s.result).collect();
    let mut plan = finish(
        base_scenario.name(),
        q,
        PlanInputs::of(scenario_toml, origin, grid),
        results,
    );
    if shard == Shard::ALL {
        let texts: Vec<(usize, String)> = cands.into_iter().map(|c| (c.index, c.text)).collect();
        measure_headroom(&mut plan, &texts, origin, q, on_probe)?;
    } else {
        plan.shard = Some(shard);
    }
    Ok(plan)
}

/// The positions (in `staged`) of the next round of long re-checks, or
/// `None` when no option left can beat the cheapest re-checked one.
fn next_round(staged: &[StagedOption], attainment: f64) -> Option<Vec<usize>> {
    let best = staged
        .iter()
        .filter(|s| s.result.rechecked)
        .filter_map(StagedOption::cost)
        .fold(f64::INFINITY, f64::min);
    let shaky = |s: &StagedOption| {
        s.found
            .as_ref()
            .is_some_and(|f| capacity::is_shaky(f, attainment))
    };
    let open: Vec<usize> = (0..staged.len())
        .filter(|&i| staged[i].pending())
        .filter(|&i| shaky(&staged[i]) || staged[i].cost().is_some_and(|c| c <= best))
        .collect();
    let low = open
        .iter()
        .filter(|&&i| !shaky(&staged[i]))
        .filter_map(|&i| staged[i].cost())
        .fold(f64::INFINITY, f64::min);
    let round: Vec<usize> = open
        .into_iter()
        .filter(|&i| shaky(&staged[i]) || staged[i].cost() == Some(low))
        .collect();
    (!round.is_empty()).then_some(round)
}

/// The short stage of one option: pruned with its reason, or sized by the
/// short-horizon search.
fn short_stage(
    c: &Candidate,
    origin: &str,
    price: &crate::sweep::objective::GpuHourPrice,
    q: &PlanQuery,
    on_probe: &(dyn Fn(usize, &Probe) + Sync),
) -> Result<StagedOption, SweepError> {
    let pruned = |hardware, sims, why| StagedOption {
        result: OptionResult::pruned(c.index, c.settings.clone(), hardware, sims, why),
        found: None,
    };
    let (s, p) = match resolve(&c.table, origin, price) {
        Ok(x) => x,
        Err((hardware, why)) => return Ok(pruned(hardware, 0, why)),
    };
    let hardware = Some(s.hardware.name.clone());
    let runs = AtomicUsize::new(0);
    let log = |pr: &Probe| {
        runs.fetch_add(1, Ordering::Relaxed);
        on_probe(c.index, pr)
    };
    // One replica at a light load first: an option that misses the SLOs
    // even then (rejections, a target below a lone request's latency)
    // misses them at any load and with any replica count.
    let light = q.demand_rps / LIGHT_LOAD_DIVISOR;
    let first = capacity::probe_once(&c.text, origin, 1, light, 1.0, q.attainment)?;
    log(&first);
    if !first.meets_slo {
        return Ok(pruned(
            hardware,
            1,
            format!(
                "one replica misses the SLOs even at {light} req/s ({}; {} of {} requests completed): no replica count meets them",
                first.missed,
                first.completed,
                first.requests
            ),
        ));
    }
    let found = capacity::size_short(
        &c.text,
        origin,
        q.attainment,
        q.tolerance,
        q.sized_for_rps(),
        &log,
    );
    let sims = runs.load(Ordering::Relaxed);
    Ok(match found {
        Ok(((n, at, below), _)) => StagedOption {
            result: OptionResult {
                index: c.index,
                settings: c.settings.clone(),
                hardware,
                simulations: sims,
                fleet: Some(sized(&s, n, p, at.attainment, at.goodput_rps)),
                pruned: None,
                rechecked: false,
            },
            found: Some((n, at, below)),
        },
        // The searches fail with a reason (no count up to the largest
        // fleet, a limit that cannot be bracketed): the option loses.
        Err(e) => pruned(hardware, sims, e.0),
    })
}

/// The long re-check of one option the short stage sized.
fn long_stage(
    st: &StagedOption,
    c: &Candidate,
    origin: &str,
    price: &crate::sweep::objective::GpuHourPrice,
    q: &PlanQuery,
    on_probe: &(dyn Fn(usize, &Probe) + Sync),
) -> StagedOption {
    let found = st.found.clone().expect("a pending option has a find");
    let runs = AtomicUsize::new(0);
    let log = |pr: &Probe| {
        runs.fetch_add(1, Ordering::Relaxed);
        on_probe(c.index, pr)
    };
    let mut result = st.result.clone();
    result.rechecked = true;
    let verified = resolve(&c.table, origin, price)
        .map_err(|(_, why)| SweepError::new(why))
        .and_then(|(s, p)| {
            capacity::verify_long(
                &c.text,
                origin,
                q.attainment,
                q.sized_for_rps(),
                found,
                &log,
            )
            .map(|(f, _)| (s, p, f))
        });
    result.simulations += runs.load(Ordering::Relaxed);
    match verified {
        Ok((s, p, (n, at, below))) => {
            result.fleet = Some(sized(&s, n, p, at.attainment, at.goodput_rps));
            StagedOption {
                result,
                found: Some((n, at, below)),
            }
        }
        Err(e) => {
            result.fleet = None;
            result.pruned = Some(e.0);
            StagedOption {
                result,
                found: None,
            }
        }
    }
}

/// The winner's headroom, measured: the highest load its sized fleet
/// sustains within the SLOs (the capacity rate search at that fleet size).
pub(super) fn measure_headroom(
    plan: &mut DeployPlan,
    texts: &[(usize, String)],
    origin: &str,
    q: &PlanQuery,
    on_probe: &(dyn Fn(usize, &Probe) + Sync),
) -> Result<(), SweepError> {
    let Some(best) = plan.best else {
        return Ok(());
    };
    let text = &texts.iter().find(|(i, _)| *i == best).expect("sized").1;
    let o = plan
        .options
        .iter_mut()
        .find(|o| o.index == best)
        .expect("best");
    let f = o.fleet.as_mut().expect("sized");
    let cq = CapacityQuery {
        attainment: q.attainment,
        replicas: f.units.unwrap_or(f.replicas),
        demand_rps: None,
        headroom: 0.0,
        spare: 0,
        gpu_hour_usd: None,
        tolerance: q.tolerance,
    };
    let count = AtomicUsize::new(0);
    let log = |pr: &Probe| {
        count.fetch_add(1, Ordering::Relaxed);
        on_probe(best, pr);
    };
    // A fleet whose limit cannot be bracketed keeps no headroom figure
    // rather than failing the plan it already answered.
    let Ok(c) = plan_capacity(text, origin, &cq, &log) else {
        let n = count.load(Ordering::Relaxed);
        o.simulations += n;
        plan.simulations += n;
        plan.headroom_simulations = n;
        return Ok(());
    };
    f.max_load_rps = Some(c.max_load.rate_rps);
    f.headroom = Some(c.max_load.rate_rps / q.demand_rps - 1.0);
    o.simulations += c.probes.len();
    plan.simulations += c.probes.len();
    plan.headroom_simulations = c.probes.len();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::Mutex;

    /// The quickstart with a short horizon, and a space of two GPUs.
    fn inputs() -> (String, Grid) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join("scenarios/quickstart.toml"))
            .unwrap()
            .replace("requests = 20000", "requests = 300");
        let grid = Grid::from_toml_str(
            "[objective]\ngpu_hour_usd = { \"h100-sxm\" = 2.49, \"h200\" = 3.49 }\n[axes]\n\"hardware.preset\" = [\"h100-sxm\", \"h200\"]\n",
            "space.toml",
        )
        .unwrap();
        (text, grid)
    }

    fn query() -> PlanQuery {
        PlanQuery {
            demand_rps: 20.0,
            headroom: 0.0,
            attainment: 0.99,
            tolerance: 0.05,
        }
    }

    /// A plan whose checkpoint lost an option (interrupted before it
    /// finished) reruns only that option and gives the same plan.
    #[test]
    fn an_interrupted_plan_resumes_from_its_checkpointed_options() {
        let (text, grid) = inputs();
        let q = query();
        let dir = tempfile::tempdir().unwrap();
        let options = dir.path().join("options");
        let ran = Mutex::new(Vec::new());
        let log = |i: usize, _: &Probe| ran.lock().unwrap().push(i);
        let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
        let whole =
            plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, Some(&c), &log).unwrap();
        let first_run = std::mem::take(&mut *ran.lock().unwrap());
        assert!(first_run.contains(&0) && first_run.contains(&1));
        std::fs::remove_file(options.join("1.json")).unwrap();

        let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
        assert_eq!(c.done.keys().copied().collect::<Vec<_>>(), [0]);
        let resumed =
            plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, Some(&c), &log).unwrap();
        assert_eq!(resumed, whole);
        // Option 0 ran again only for the winner's headroom, if it won.
        let again = ran.lock().unwrap().clone();
        assert_eq!(
            again.iter().filter(|&&i| i == 0).count(),
            whole.headroom_simulations * usize::from(whole.best == Some(0)),
            "{again:?}"
        );
        assert!(again.contains(&1));
        // Another query does not reuse the checkpoint.
        let other: Checkpoint<StagedOption> =
            Checkpoint::open_in(&options, &text, &grid.text, "other").unwrap();
        assert!(other.done.is_empty());
    }

    /// A checkpointed option whose figures were edited (its cost, its
    /// count without its cost) is not trusted: the resumed plan re-derives
    /// or reruns it and gives the uninterrupted plan's answer.
    #[test]
    fn an_edited_checkpoint_resumes_into_the_plan_it_would_have_given() {
        let (text, grid) = inputs();
        let q = query();
        let dir = tempfile::tempdir().unwrap();
        let options = dir.path().join("options");
        let quiet = |_: usize, _: &Probe| {};
        let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
        let whole =
            plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, Some(&c), &quiet).unwrap();
        let edits: [fn(&mut serde_json::Value); 3] = [
            |v| v["result"]["fleet"]["usd_per_month"] = 1.0.into(),
            |v| v["result"]["fleet"]["usd_per_month"] = (-5000.0).into(),
            |v| v["result"]["fleet"]["gpu_hour_usd"] = 0.01.into(),
        ];
        for edit in edits {
            for i in 0..2 {
                let f = options.join(format!("{i}.json"));
                let mut v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
                if v["result"]["fleet"].is_null() {
                    continue;
                }
                edit(&mut v);
                std::fs::write(&f, v.to_string()).unwrap();
            }
            let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
            let resumed =
                plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, Some(&c), &quiet).unwrap();
            assert_eq!(resumed, whole);
            resumed.check().unwrap();
        }
    }

    /// Shards plan their options apart; merged, they give the whole plan's
    /// answer.
    #[test]
    fn merged_shards_give_the_whole_plans_answer() {
        let (text, grid) = inputs();
        let q = query();
        let quiet = |_: usize, _: &Probe| {};
        let whole = plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, None, &quiet).unwrap();
        let part = |index| {
            let s = Shard { index, count: 2 };
            plan_deployment(&text, "q.toml", &grid, &q, s, None, &quiet).unwrap()
        };
        let (a, b) = (part(1), part(0));
        assert_eq!(a.shard, Some(Shard { index: 1, count: 2 }));
        assert!(a.options.iter().all(|o| o.index == 1));
        let names = ["a".to_string(), "b".to_string()];
        let merged = super::super::merge(vec![a.clone(), b], &names, &quiet).unwrap();
        assert_eq!(merged.best, whole.best);
        let fleet = |p: &DeployPlan| {
            p.options
                .iter()
                .find(|o| Some(o.index) == p.best)
                .and_then(|o| o.fleet.clone())
        };
        assert_eq!(fleet(&merged), fleet(&whole));
        assert_eq!(merged.shard, None);
        let e = super::super::merge(vec![a.clone()], &names, &quiet).unwrap_err();
        assert!(e.0.contains("shard 0/2 is missing"), "{e}");
        // An edited shard is refused with the option named: a cost that
        // does not follow from its count and price, an option not in the
        // space, an attainment below the target.
        let b = part(0);
        let edited = |edit: &dyn Fn(&mut OptionResult)| {
            let mut a = a.clone();
            edit(&mut a.options[0]);
            super::super::merge(vec![a, b.clone()], &names, &quiet)
                .unwrap_err()
                .0
        };
        let e = edited(&|o| o.fleet.as_mut().unwrap().usd_per_month = -1.0);
        assert!(e.contains("option 1") && e.contains("usd_per_month"), "{e}");
        let e = edited(&|o| o.index = 999);
        assert!(e.contains("option 999 is not in the space"), "{e}");
        let e = edited(&|o| o.fleet.as_mut().unwrap().attainment = 0.5);
        assert!(e.contains("below the 99.00 % target"), "{e}");
    }
}
