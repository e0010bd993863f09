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
    if base_scenario.slo().is_none() {
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
mod tests;
