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

use super::bound::{self, OptionBound};
use super::{
    energy_of, finish, least_usd, options, price_of, rederive, resolve, sized, unpriced_energy,
    DeployPlan, OptionResult, PlanInputs, PlanQuery, CANNOT_WIN, LIGHT_LOAD_DIVISOR,
};
use crate::sweep::capacity::{
    self, plan_capacity_with, CapacityQuery, FleetUnit, Found, Probe, ProbeCache,
};
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
    /// With an energy price: the least its short count can cost (its GPUs
    /// and their idle power), the bound the long stage ranks it by. The
    /// measured energy of a short run is no bound on a long run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub least_usd: Option<f64>,
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

    /// The least its fleet can cost once re-checked: the short count's
    /// cost, or with an energy price its GPUs and idle power.
    fn bound(&self) -> Option<f64> {
        self.least_usd.or_else(|| self.cost())
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
/// headroom; a shard leaves that to [`super::merge`]. With `cache`, every
/// probe the searches ask for twice (the same option scaled to the same
/// fleet at the same load) is simulated once; `simulations_reused` counts
/// the others.
#[allow(clippy::too_many_arguments)]
pub fn plan_deployment(
    scenario_toml: &str,
    origin: &str,
    grid: &Grid,
    q: &PlanQuery,
    shard: Shard,
    checkpoint: Option<&Checkpoint<StagedOption>>,
    cache: Option<&ProbeCache>,
    on_probe: &(dyn Fn(usize, &Probe) + Sync),
) -> Result<DeployPlan, SweepError> {
    let reused_before = cache.map_or(0, |c| c.asked() - c.simulated());
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
            least_usd: done.least_usd,
        })
    };

    // Every option resolved and bounded first (no simulation): the pruned
    // ones settle here, the rest wait in order of the least they can cost.
    let prepared = cands
        .par_iter()
        .map(|c| prepare(c, origin, price, q))
        .collect::<Vec<_>>();
    let mut staged: Vec<Option<StagedOption>> = Vec::with_capacity(cands.len());
    let mut order = Vec::new();
    for (i, p) in prepared.into_iter().enumerate() {
        match p {
            Prepared::Settled(st) => staged.push(Some(*st)),
            Prepared::Open(floor) => {
                staged.push(None);
                order.push((i, floor));
            }
        }
    }
    order.sort_by(|a, b| a.1.usd.total_cmp(&b.1.usd).then(a.0.cmp(&b.0)));

    // Waves of options, least cost first: each wave's short stages, then
    // the long re-checks that can change the cheapest; an option whose
    // least cost is above the cheapest re-checked one is not simulated.
    let mut next = 0;
    loop {
        let best = cheapest_rechecked(staged.iter().flatten());
        let wave: Vec<usize> = order[next..]
            .iter()
            .take(WAVE)
            .take_while(|(_, f)| f.usd <= best)
            .map(|&(i, _)| i)
            .collect();
        if wave.is_empty() {
            break;
        }
        next += wave.len();
        let done = wave
            .par_iter()
            .map(|&i| {
                let c = &cands[i];
                if let Some(done) = reuse(c) {
                    return Ok(done);
                }
                let st = short_stage(c, origin, price, q, best, cache, on_probe)?;
                save(&st)?;
                Ok(st)
            })
            .collect::<Result<Vec<_>, SweepError>>()?;
        for (i, st) in wave.into_iter().zip(done) {
            staged[i] = Some(st);
        }
        loop {
            let known: Vec<usize> = (0..staged.len()).filter(|&i| staged[i].is_some()).collect();
            let view: Vec<StagedOption> = known
                .iter()
                .map(|&i| staged[i].clone().expect("known"))
                .collect();
            let Some(round) = next_round(&view, q.attainment) else {
                break;
            };
            let round: Vec<usize> = round.into_iter().map(|k| known[k]).collect();
            let done = round
                .par_iter()
                .map(|&i| {
                    let st = staged[i].as_ref().expect("staged");
                    let st = long_stage(st, &cands[i], origin, price, q, cache, on_probe);
                    save(&st)?;
                    Ok(st)
                })
                .collect::<Result<Vec<_>, SweepError>>()?;
            for (i, st) in round.into_iter().zip(done) {
                staged[i] = Some(st);
            }
        }
    }
    let best = cheapest_rechecked(staged.iter().flatten());
    for (i, f) in &order[next..] {
        let i = *i;
        let c = &cands[i];
        staged[i] = Some(StagedOption {
            result: OptionResult::pruned(
                c.index,
                c.settings.clone(),
                Some(f.hardware.clone()),
                0,
                f.cannot_win(best),
            ),
            found: None,
            least_usd: None,
        });
    }
    let staged: Vec<StagedOption> = staged
        .into_iter()
        .map(|s| s.expect("every option settled"))
        .collect();

    let results = staged.into_iter().map(|s| s.result).collect();
    let mut plan = finish(
        base_scenario.name(),
        q,
        PlanInputs::of(scenario_toml, origin, grid),
        results,
    );
    if shard == Shard::ALL {
        let texts: Vec<(usize, String)> = cands.into_iter().map(|c| (c.index, c.text)).collect();
        measure_headroom(&mut plan, &texts, origin, q, cache, on_probe)?;
    } else {
        plan.shard = Some(shard);
    }
    plan.simulations_reused = cache.map_or(0, |c| c.asked() - c.simulated()) - reused_before;
    Ok(plan)
}

/// The positions (in `staged`) of the next round of long re-checks, or
/// `None` when no option left can beat the cheapest re-checked one.
fn next_round(staged: &[StagedOption], attainment: f64) -> Option<Vec<usize>> {
    let best = cheapest_rechecked(staged.iter());
    let shaky = |s: &StagedOption| {
        s.found
            .as_ref()
            .is_some_and(|f| capacity::is_shaky(f, attainment))
    };
    let open: Vec<usize> = (0..staged.len())
        .filter(|&i| staged[i].pending())
        .filter(|&i| shaky(&staged[i]) || staged[i].bound().is_some_and(|c| c <= best))
        .collect();
    let low = open
        .iter()
        .filter(|&&i| !shaky(&staged[i]))
        .filter_map(|&i| staged[i].bound())
        .fold(f64::INFINITY, f64::min);
    let round: Vec<usize> = open
        .into_iter()
        .filter(|&i| shaky(&staged[i]) || staged[i].bound() == Some(low))
        .collect();
    (!round.is_empty()).then_some(round)
}

/// Options simulated together, least cost first. Fixed rather than the
/// thread count, so that which options a plan simulates (and so its
/// table) is the same on any machine.
const WAVE: usize = 16;

/// The cost of the cheapest option re-checked by a long run so far.
fn cheapest_rechecked<'a>(staged: impl Iterator<Item = &'a StagedOption>) -> f64 {
    staged
        .filter(|s| s.result.rechecked)
        .filter_map(StagedOption::cost)
        .fold(f64::INFINITY, f64::min)
}

/// The least an option can cost, from its bounds.
#[derive(Clone, Debug)]
struct Floor {
    /// Its fleet at `fewest` replicas (or units), per month.
    usd: f64,
    fewest: u32,
    gpus: u32,
    ceiling_rps: Option<f64>,
    unit: Option<String>,
    hardware: String,
}

impl Floor {
    /// Why an option is not simulated: its least cost is above `best`.
    fn cannot_win(&self, best: f64) -> String {
        let count = match &self.unit {
            Some(u) => format!("{} unit(s) of {u}", self.fewest),
            None => format!("{} replica(s)", self.fewest),
        };
        let ceiling = self.ceiling_rps.map_or(String::new(), |c| {
            format!(
                " at its throughput ceiling of {} req/s each",
                crate::sig_figs::rate(c)
            )
        });
        format!(
            "{CANNOT_WIN}: the demand needs at least {count}{ceiling} ({} GPUs), at least ${:.0} per month, above the cheapest option's ${best:.0}; not simulated",
            self.gpus, self.usd
        )
    }
}

/// An option after resolution and its bounds: settled (pruned without a
/// run), or open with the least it can cost.
enum Prepared {
    Settled(Box<StagedOption>),
    Open(Floor),
}

/// Resolves and bounds one option (see `bound`).
fn prepare(
    c: &Candidate,
    origin: &str,
    price: &crate::sweep::objective::GpuHourPrice,
    q: &PlanQuery,
) -> Prepared {
    let pruned = |hardware, why| {
        Prepared::Settled(Box::new(StagedOption {
            result: OptionResult::pruned(c.index, c.settings.clone(), hardware, 0, why),
            found: None,
            least_usd: None,
        }))
    };
    let (s, p) = match resolve(&c.table, origin, price) {
        Ok(x) => x,
        Err((hardware, why)) => return pruned(hardware, why),
    };
    let hardware = s.hardware.name.clone();
    if let Some(why) = unpriced_energy(&s, q) {
        return pruned(Some(hardware), why);
    }
    let (fewest, ceiling_rps) = match bound::bound(&s, q.sized_for_rps()) {
        OptionBound::Unservable(why) => return pruned(Some(hardware), why),
        OptionBound::Count {
            fewest,
            ceiling_rps,
        } => (fewest, Some(ceiling_rps)),
        OptionBound::Unbounded => (1, None),
    };
    let f = sized(&s, fewest, p, 0.0, 0.0, None);
    Prepared::Open(Floor {
        usd: least_usd(&s, fewest, p, q),
        fewest,
        gpus: f.gpus,
        ceiling_rps,
        unit: f.unit,
        hardware,
    })
}

/// The short stage of one option: pruned with its reason, or sized by the
/// short-horizon search.
fn short_stage(
    c: &Candidate,
    origin: &str,
    price: &crate::sweep::objective::GpuHourPrice,
    q: &PlanQuery,
    best: f64,
    cache: Option<&ProbeCache>,
    on_probe: &(dyn Fn(usize, &Probe) + Sync),
) -> Result<StagedOption, SweepError> {
    let pruned = |hardware, sims, why| StagedOption {
        result: OptionResult::pruned(c.index, c.settings.clone(), hardware, sims, why),
        found: None,
        least_usd: None,
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
    let first = capacity::probe_at(
        &c.text,
        origin,
        q.attainment,
        "light",
        1,
        light,
        cache,
        &|_| {},
    )?;
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
    // The most replicas (or units) at which this option could still cost
    // no more than the cheapest re-checked one: its count search stops
    // once that many miss the SLOs.
    let cost = |n: u32| least_usd(&s, n, p, q);
    let within = best.is_finite().then(|| {
        let mut n = (best / cost(1))
            .floor()
            .clamp(0.0, capacity::MAX_REPLICAS as f64) as u32;
        while n < capacity::MAX_REPLICAS && cost(n + 1) <= best {
            n += 1;
        }
        while n > 0 && cost(n) > best {
            n -= 1;
        }
        n
    });
    let found = capacity::size_short(
        &c.text,
        origin,
        q.attainment,
        q.tolerance,
        q.sized_for_rps(),
        within,
        cache,
        &log,
    );
    let sims = runs.load(Ordering::Relaxed);
    Ok(match found {
        Ok((None, _)) => {
            let n = within.unwrap_or(0);
            pruned(
                hardware,
                sims,
                format!(
                    "{CANNOT_WIN}: {} miss the SLOs at the demand, so its fleet costs at least ${:.0} per month, above the cheapest option's ${best:.0}; its count search stopped there",
                    capacity::fleet_count(FleetUnit::of(&s).as_ref(), n),
                    cost(n + 1)
                ),
            )
        }
        Ok((Some((n, at, below)), _)) => StagedOption {
            result: OptionResult {
                index: c.index,
                settings: c.settings.clone(),
                hardware,
                simulations: sims,
                fleet: Some(sized(
                    &s,
                    n,
                    p,
                    at.attainment,
                    at.goodput_rps,
                    energy_of(&at, q),
                )),
                pruned: None,
                rechecked: false,
            },
            least_usd: q.energy_usd_per_kwh.map(|_| least_usd(&s, n, p, q)),
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
    cache: Option<&ProbeCache>,
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
                cache,
                &log,
            )
            .map(|(f, _)| (s, p, f))
        });
    result.simulations += runs.load(Ordering::Relaxed);
    match verified {
        Ok((s, p, (n, at, below))) => {
            let energy = energy_of(&at, q);
            result.fleet = Some(sized(&s, n, p, at.attainment, at.goodput_rps, energy));
            StagedOption {
                result,
                least_usd: q.energy_usd_per_kwh.map(|_| least_usd(&s, n, p, q)),
                found: Some((n, at, below)),
            }
        }
        Err(e) => {
            result.fleet = None;
            result.pruned = Some(e.0);
            StagedOption {
                result,
                found: None,
                least_usd: None,
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
    cache: Option<&ProbeCache>,
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
    let Ok(c) = plan_capacity_with(text, origin, &cq, cache, &log) else {
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
            energy_usd_per_kwh: None,
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
            plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, Some(&c), None, &log).unwrap();
        let first_run = std::mem::take(&mut *ran.lock().unwrap());
        assert!(first_run.contains(&0) && first_run.contains(&1));
        std::fs::remove_file(options.join("1.json")).unwrap();

        let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
        assert_eq!(c.done.keys().copied().collect::<Vec<_>>(), [0]);
        let resumed =
            plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, Some(&c), None, &log).unwrap();
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
        let whole = plan_deployment(
            &text,
            "q.toml",
            &grid,
            &q,
            Shard::ALL,
            Some(&c),
            None,
            &quiet,
        )
        .unwrap();
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
            let resumed = plan_deployment(
                &text,
                "q.toml",
                &grid,
                &q,
                Shard::ALL,
                Some(&c),
                None,
                &quiet,
            )
            .unwrap();
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
        let whole =
            plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, None, None, &quiet).unwrap();
        let part = |index| {
            let s = Shard { index, count: 2 };
            plan_deployment(&text, "q.toml", &grid, &q, s, None, None, &quiet).unwrap()
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

    /// The space's text with its longest axis cut by its last value, again
    /// and again, until it has at most `budget` options (a `zip` group is
    /// one axis).
    fn sub_space(text: &str, budget: usize) -> String {
        let mut t: toml::Table = text.parse().unwrap();
        let axes = t.get_mut("axes").unwrap().as_table_mut().unwrap();
        // A dimension's lists: one axis, or a zip group's axes together.
        fn lists(v: &mut toml::Value) -> Vec<&mut Vec<toml::Value>> {
            match v {
                toml::Value::Array(a) => vec![a],
                toml::Value::Table(z) => {
                    z.iter_mut().filter_map(|(_, l)| l.as_array_mut()).collect()
                }
                _ => Vec::new(),
            }
        }
        loop {
            let lens: Vec<usize> = axes
                .iter_mut()
                .map(|(_, v)| lists(v).first().map_or(1, |l| l.len()))
                .collect();
            if lens.iter().product::<usize>() <= budget {
                break;
            }
            let longest = *lens.iter().max().unwrap();
            let i = lens.iter().position(|&l| l == longest).unwrap();
            let (_, v) = axes.iter_mut().nth(i).unwrap();
            for l in lists(v) {
                l.pop();
            }
        }
        toml::to_string(&t).unwrap()
    }

    /// The bounded search against the exhaustive grid on a sub-space of
    /// every example space (at most four options, a 300-request horizon,
    /// a quarter of the demand of its usage line): the same winner with the
    /// same fleet,
    /// the same options pruned for not working, and every option the
    /// bounds left unsimulated dearer than the winner in the grid too.
    #[test]
    fn the_bounded_plan_equals_the_exhaustive_grid_on_every_example_space() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut spaces: Vec<_> = std::fs::read_dir(root.join("scenarios/spaces"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        spaces.sort();
        let quiet = |_: usize, _: &Probe| {};
        for space in spaces {
            let text = std::fs::read_to_string(&space).unwrap();
            let usage = text
                .lines()
                .find_map(|l| l.split("servesim plan ").nth(1))
                .unwrap();
            let words: Vec<&str> = usage.split_whitespace().collect();
            let demand: f64 = words[words.iter().position(|w| *w == "--demand").unwrap() + 1]
                .parse()
                .unwrap();
            let scenario = std::fs::read_to_string(root.join(words[0])).unwrap();
            let scenario: String = scenario
                .lines()
                .map(|l| match l.trim_start().strip_prefix("requests = ") {
                    Some(_) => "requests = 300".to_string(),
                    None => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n");
            let grid = Grid::from_toml_str(&sub_space(&text, 4), "space.toml").unwrap();
            // A quarter of the usage line's demand keeps the fleets, and so
            // the grid's counts, small.
            let q = PlanQuery {
                demand_rps: demand / 4.0,
                ..query()
            };
            let name = space.display();
            let cache = ProbeCache::default();
            let searched = plan_deployment(
                &scenario,
                "s.toml",
                &grid,
                &q,
                Shard::ALL,
                None,
                Some(&cache),
                &quiet,
            )
            .unwrap();
            let most = searched
                .options
                .iter()
                .filter_map(|o| o.fleet.as_ref())
                .map(|f| f.units.unwrap_or(f.replicas))
                .max()
                .unwrap_or(1);
            let all = super::super::exhaustive(&scenario, "s.toml", &grid, &q, most + 1).unwrap();
            assert_eq!(searched.best, all.best, "{name}");
            let of = |p: &DeployPlan, i: usize| {
                p.options.iter().find(|o| o.index == i).cloned().unwrap()
            };
            if let Some(b) = searched.best {
                assert_eq!(
                    of(&searched, b).fleet.map(|f| f.replicas),
                    of(&all, b).fleet.map(|f| f.replicas),
                    "{name}"
                );
            }
            let best = searched.options[0].fleet.as_ref().map(|f| f.usd_per_month);
            for o in &searched.options {
                let grid = of(&all, o.index);
                let skipped = o
                    .pruned
                    .as_deref()
                    .is_some_and(|r| r.starts_with(CANNOT_WIN));
                if skipped {
                    if let (Some(g), Some(best)) = (&grid.fleet, best) {
                        assert!(g.usd_per_month > best, "{name}: {o:?} against {grid:?}");
                    }
                } else if o.pruned.is_some() {
                    assert!(grid.fleet.is_none(), "{name}: {o:?} against {grid:?}");
                }
            }
        }
    }

    /// A price of electricity enters every option's cost and the bounds:
    /// at none the cheap, slow A100s win; at $20 per kWh the H100, which
    /// serves the demand on fewer GPUs drawing less energy in all, does —
    /// the answer the exhaustive grid gives with the same price, and each
    /// option's least cost stays below what it is found to cost.
    #[test]
    fn a_high_energy_price_can_change_the_chosen_option() {
        let (text, _) = inputs();
        let grid = Grid::from_toml_str(
            "[objective]\ngpu_hour_usd = { \"h100-sxm\" = 2.49, \"a100-80gb\" = 0.40 }\n[axes]\n\"hardware.preset\" = [\"h100-sxm\", \"a100-80gb\"]\n",
            "space.toml",
        )
        .unwrap();
        let quiet = |_: usize, _: &Probe| {};
        let plan = |energy| {
            let q = PlanQuery {
                energy_usd_per_kwh: energy,
                ..query()
            };
            let p = plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, None, None, &quiet)
                .unwrap();
            p.check().unwrap();
            (q, p)
        };
        let (_, cheap) = plan(None);
        assert_eq!(cheap.best, Some(1), "{cheap:?}");
        let f = cheap.options[0].fleet.as_ref().unwrap();
        assert_eq!(f.energy_usd_per_month, None);
        let (q, dear) = plan(Some(20.0));
        assert_eq!(dear.best, Some(0), "{dear:?}");
        assert_eq!(dear.energy_usd_per_kwh, Some(20.0));
        let base: toml::Table = text.parse().unwrap();
        let space = options(&base, &grid).unwrap();
        let price = price_of(&grid).unwrap();
        for o in &dear.options {
            let f = o.fleet.as_ref().unwrap();
            let kwh = f.energy_kwh_per_month.unwrap();
            let usd = f.energy_usd_per_month.unwrap();
            assert!((usd - kwh * 20.0).abs() < 1e-6, "{f:?}");
            let gpus = f.gpus as f64 * f.gpu_hour_usd * 730.0;
            assert!((f.usd_per_month - gpus - usd).abs() < 1e-6, "{f:?}");
            let (_, _, t) = space.iter().find(|(i, _, _)| *i == o.index).unwrap();
            let (s, p) = resolve(t, "q.toml", price).unwrap();
            let n = f.units.unwrap_or(f.replicas);
            // Every GPU draws at least its idle power, whatever its load.
            let idle = super::super::idle_w_per_count(&s).unwrap() * n as f64 * 0.73;
            assert!(kwh >= idle, "{kwh} kWh below the idle {idle}");
            assert!(super::super::least_usd(&s, n, p, &q) <= f.usd_per_month);
        }
        let all = super::super::exhaustive(&text, "q.toml", &grid, &q, 4).unwrap();
        assert_eq!(all.best, dear.best);
        // No board power, no energy price: such an option is pruned.
        let spec = text.replace(
            "[hardware]\npreset = \"h100-sxm\"",
            "[hardware.spec]\nbf16_tflops = 900.0\nmemory_gib = 80.0\nmemory_bw_tbyte_s = 3.0\ninterconnect_gbyte_s = 400.0\ninterconnect_latency_us = 5.0\npcie_gbyte_s = 64.0",
        );
        assert_ne!(spec, text);
        let flat = Grid::from_toml_str(
            "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"engine.max_num_seqs\" = [64]\n",
            "s.toml",
        )
        .unwrap();
        let p = plan_deployment(&spec, "q.toml", &flat, &q, Shard::ALL, None, None, &quiet);
        let p = p.unwrap();
        let why = p.options[0].pruned.as_deref().unwrap_or("");
        assert!(why.contains("no board power (tdp_w)"), "{p:?}");
    }

    /// The throughput ceiling is a bound: no option the exhaustive grid
    /// sizes needs fewer replicas than the bound's least count, at demands
    /// from one replica's worth to several.
    #[test]
    fn the_least_count_never_exceeds_the_exhaustive_grids() {
        let (text, grid) = inputs();
        for demand in [5.0, 20.0, 60.0] {
            let q = PlanQuery {
                demand_rps: demand,
                ..query()
            };
            let all = super::super::exhaustive(&text, "q.toml", &grid, &q, 8).unwrap();
            let base: toml::Table = text.parse().unwrap();
            let space = options(&base, &grid).unwrap();
            let price = price_of(&grid).unwrap();
            let mut bounded = 0;
            for o in &all.options {
                let Some(f) = &o.fleet else { continue };
                let (_, _, t) = space.iter().find(|(i, _, _)| *i == o.index).unwrap();
                let (s, _) = resolve(t, "q.toml", price).unwrap();
                if let OptionBound::Count { fewest, .. } = bound::bound(&s, q.sized_for_rps()) {
                    assert!(
                        fewest <= f.replicas,
                        "{demand} req/s: {o:?}: bound {fewest}"
                    );
                    bounded += 1;
                }
            }
            assert!(bounded > 0, "no option bounded at {demand} req/s");
        }
    }
}
