//! The searches over one scenario's probes: the highest sustainable rate
//! (bracket, then bisect), the fewest replicas at a rate (gallop, then
//! bisect), and the long-horizon re-check of a find; and the two stages a
//! plan runs them in ([`size_short`], [`verify_long`]).

use super::probe::{Prober, VERIFY_HORIZON_FACTOR};
use super::{fleet_count, MaxLoad, Probe, ProbeCache, MAX_REPLICAS};
use crate::sweep::SweepError;
use std::collections::BTreeMap;

/// A fleet count a search found: the count, its probe, and the probe of
/// the count one below (none when the count is 1).
pub type Found = (u32, Probe, Option<Probe>);

/// The short-horizon stage of sizing a fleet for `rate` (a plan's first
/// stage): the highest load one replica (or unit) sustains, bracketed and
/// bisected to `tolerance`, then the fewest replicas meeting the SLOs at
/// `rate`, galloping from the estimate it gives. Returns the find and the
/// number of probes run. The long re-check is [`verify_long`].
///
/// With `within`, the count search stops once a count of `within` (or
/// more) is simulated and misses the SLOs: the fleet needs more than
/// `within`, and the find is `None` (a plan passes the most replicas at
/// which an option could still be the cheapest).
#[allow(clippy::too_many_arguments)]
pub fn size_short(
    scenario_toml: &str,
    origin: &str,
    attainment: f64,
    tolerance: f64,
    rate: f64,
    within: Option<u32>,
    cache: Option<&ProbeCache>,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<(Option<Found>, usize), SweepError> {
    let (mut p, s, base_rate) = Prober::of(scenario_toml, origin, attainment, on_probe)?;
    p.cache = cache;
    let written = if p.unit.is_some() {
        1
    } else {
        s.replicas().max(1)
    };
    let mut probes = Vec::new();
    let max_load = max_rate(&p, 1, base_rate / written as f64, tolerance, &mut probes)?;
    let guess = guess_replicas(origin, rate, max_load.per_replica_rps)?;
    let (seen, order) = (&mut BTreeMap::new(), &mut Vec::new());
    let ok = remembered(seen, order, |n| p.probe("demand", n, rate));
    let found = match fewest_meeting(guess, within, ok)? {
        Some((lo, hi)) => Some((hi, seen[&hi].clone(), (lo > 0).then(|| seen[&lo].clone()))),
        None if within.is_some() => None,
        None => {
            return Err(SweepError::new(format!(
                "{}: {MAX_REPLICAS} replicas do not meet the SLOs at {rate} req/s",
                p.origin
            )))
        }
    };
    Ok((found, probes.len() + order.len()))
}

/// The long-horizon re-check of a short find (see [`verify`]): the
/// verified find and the number of probes it ran.
pub fn verify_long(
    scenario_toml: &str,
    origin: &str,
    attainment: f64,
    rate: f64,
    found: Found,
    cache: Option<&ProbeCache>,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<(Found, usize), SweepError> {
    let (mut p, _, _) = Prober::of(scenario_toml, origin, attainment, on_probe)?;
    p.cache = cache;
    let mut probes = Vec::new();
    let f = verify(&p, "demand", rate, found, &mut probes)?;
    Ok((f, probes.len()))
}

/// One probe of `count` replicas (units with pools) at `rate` with the
/// scenario's horizon sized for the fleet, as the searches run it (a
/// plan's frontier runs its load points so), through `cache`.
#[allow(clippy::too_many_arguments)]
pub fn probe_at(
    scenario_toml: &str,
    origin: &str,
    attainment: f64,
    search: &str,
    count: u32,
    rate: f64,
    cache: Option<&ProbeCache>,
    on_probe: &(dyn Fn(&Probe) + Sync),
) -> Result<Probe, SweepError> {
    let (mut p, _, _) = Prober::of(scenario_toml, origin, attainment, on_probe)?;
    p.cache = cache;
    p.probe(search, count, rate)
}

/// Whether the long re-check may find a *smaller* fleet than a short
/// find: the short probe one below met the attainment target and missed
/// only the steady-state verdict. Otherwise the re-check only keeps or
/// grows the count, so the short find is a lower bound.
pub fn is_shaky(found: &Found, attainment: f64) -> bool {
    found
        .2
        .as_ref()
        .is_some_and(|b| !b.meets_slo && b.attainment >= attainment)
}

/// The replica count a search for `rate` starts from, at `per_replica`
/// req/s each; an error when it passes the largest fleet.
pub(super) fn guess_replicas(origin: &str, rate: f64, per_replica: f64) -> Result<u32, SweepError> {
    let need = rate / per_replica;
    if need.is_nan() || need > MAX_REPLICAS as f64 {
        return Err(SweepError::new(format!(
            "{origin}: {} req/s needs about {need:.3e} replicas at the {} req/s one sustains, beyond the {MAX_REPLICAS} a fleet may have",
            crate::sig_figs::rate(rate),
            crate::sig_figs::rate(per_replica)
        )));
    }
    let guess = need.ceil();
    Ok(if guess.is_finite() {
        guess.clamp(1.0, MAX_REPLICAS as f64) as u32
    } else {
        1
    })
}

/// Bracket the boundary by doubling or halving, then bisect.
pub(super) fn max_rate(
    p: &Prober,
    replicas: u32,
    start: f64,
    tol: f64,
    probes: &mut Vec<Probe>,
) -> Result<MaxLoad, SweepError> {
    // Halving 20 times spans a factor of a million below the start.
    const STEPS: u32 = 20;
    let mut run = |rate: f64| -> Result<Probe, SweepError> {
        let r = p.probe("rate", replicas, rate)?;
        probes.push(r.clone());
        Ok(r)
    };
    let first = run(start)?;
    let (mut lo, mut hi) = if first.meets_slo {
        let mut lo = first;
        loop {
            if lo.rate_rps > 1e9 {
                return Err(SweepError::new(format!(
                    "{}: still meets the SLOs at {} req/s: the horizon may be too short to load the fleet",
                    p.origin, crate::sig_figs::rate(lo.rate_rps)
                )));
            }
            let next = run(lo.rate_rps * 2.0)?;
            if !next.meets_slo {
                break (lo, next);
            }
            lo = next;
        }
    } else {
        let mut hi = first;
        let mut i = 0;
        loop {
            i += 1;
            if i > STEPS {
                return Err(SweepError::new(format!(
                    "{}: {} miss the SLOs even at {} req/s ({:.1} % attainment, TTFT p99 {:.1} ms, TPOT p99 {:.2} ms): the targets are below what a lone request takes",
                    p.origin, fleet_count(p.unit.as_ref(), replicas), crate::sig_figs::rate(hi.rate_rps), hi.attainment * 100.0, hi.ttft_p99_ms, hi.tpot_p99_ms
                )));
            }
            let next = run(hi.rate_rps / 2.0)?;
            if next.meets_slo {
                break (next, hi);
            }
            hi = next;
        }
    };
    while hi.rate_rps - lo.rate_rps > tol * hi.rate_rps {
        let mid = run((lo.rate_rps + hi.rate_rps) / 2.0)?;
        if mid.meets_slo {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(MaxLoad {
        replicas,
        rate_rps: lo.rate_rps,
        per_replica_rps: lo.rate_rps / replicas as f64,
        fails_at_rps: hi.rate_rps,
        at: lo,
    })
}

/// Re-simulates the fleet a search found with a [`VERIFY_HORIZON_FACTOR`]×
/// longer horizon, adding replicas (1, 2, 4, … then bisecting back) until
/// that long run meets the SLOs — or, when it does and the short probe one
/// below missed only the steady-state verdict, removing them the same way
/// while the long run still meets them. Returns the verified size, its
/// probe, and the probe below it.
pub(super) fn verify(
    p: &Prober,
    search: &str,
    rate: f64,
    found: (u32, Probe, Option<Probe>),
    probes: &mut Vec<Probe>,
) -> Result<(u32, Probe, Option<Probe>), SweepError> {
    let label = format!("verify {search}");
    let (n, _, below) = found;
    let mut seen = BTreeMap::new();
    let mut meets = remembered(&mut seen, probes, |k| {
        p.probe_with(&label, k, rate, VERIFY_HORIZON_FACTOR)
    });
    if meets(n)? {
        // The short probe one below met the target but not the steady-state
        // verdict (a short run's backlog still filling with long requests
        // reads as growing): over the long horizon a smaller fleet may meet
        // the SLOs too. Gallop down with long probes, then bisect, so the
        // answer never sits above a smaller fleet the long run passes.
        let shaky = below
            .as_ref()
            .is_some_and(|b| !b.meets_slo && b.attainment >= p.target);
        if !shaky {
            drop(meets);
            return Ok((n, seen.remove(&n).expect("probed"), below));
        }
    }
    // Otherwise the short probes passed a fleet that a long run fails:
    // the gallop goes up.
    let Some((lo, hi)) = fewest_meeting(n, None, meets)? else {
        return Err(SweepError::new(format!(
            "{}: {MAX_REPLICAS} replicas do not meet the SLOs at {rate} req/s over a long horizon",
            p.origin
        )));
    };
    let below = (lo > 0).then(|| seen[&lo].clone());
    Ok((hi, seen.remove(&hi).expect("probed"), below))
}

/// Whether a fleet of `n` meets the SLOs, by `probe`, each count probed
/// once: its probe is kept in `seen` and appended to `order` (the probes in
/// the order they ran).
fn remembered<'a>(
    seen: &'a mut BTreeMap<u32, Probe>,
    order: &'a mut Vec<Probe>,
    probe: impl Fn(u32) -> Result<Probe, SweepError> + 'a,
) -> impl FnMut(u32) -> Result<bool, SweepError> + 'a {
    move |n| {
        if let Some(r) = seen.get(&n) {
            return Ok(r.meets_slo);
        }
        let r = probe(n)?;
        let m = r.meets_slo;
        order.push(r.clone());
        seen.insert(n, r);
        Ok(m)
    }
}

/// The fewest replicas for which `meets` holds, assuming it holds from some
/// count on: gallop from `start` toward the boundary (1, 2, 4, … replicas
/// at a time, down while `start`'s side meets it, up while it does not),
/// then bisect the bracket. Returns `(lo, hi)`: `hi` meets, `lo` does not
/// (0: no smaller count does), or `None` when [`MAX_REPLICAS`] do not.
/// `meets(start)` is asked first; `meets` may be asked a count again (its
/// caller keeps what it ran). With `within`, the search ends (`None`) as
/// soon as a count of at least `within` does not meet it: its probes are
/// then the first of those it would run without.
fn fewest_meeting<E>(
    start: u32,
    within: Option<u32>,
    mut meets: impl FnMut(u32) -> Result<bool, E>,
) -> Result<Option<(u32, u32)>, E> {
    // Invariant once bracketed: `hi` meets, `lo` does not (0 = none).
    let (mut lo, mut hi);
    let mut step = 1;
    if meets(start)? {
        hi = start;
        loop {
            let cand = hi.saturating_sub(step);
            if cand == 0 {
                lo = 0;
                break;
            }
            if !meets(cand)? {
                lo = cand;
                break;
            }
            hi = cand;
            step *= 2;
        }
    } else {
        lo = start;
        loop {
            if within.is_some_and(|w| lo >= w) {
                return Ok(None);
            }
            let cand = lo.saturating_add(step);
            if cand > MAX_REPLICAS {
                return Ok(None);
            }
            if meets(cand)? {
                hi = cand;
                break;
            }
            lo = cand;
            step *= 2;
        }
    }
    while hi - lo > 1 {
        if within.is_some_and(|w| lo >= w) {
            return Ok(None);
        }
        let mid = lo + (hi - lo) / 2;
        if meets(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Some((lo, hi)))
}

pub(super) type ReplicaSearch = Result<(u32, Probe, Option<Probe>, Vec<Probe>), SweepError>;

/// Fewest replicas meeting the SLOs at `rate`: gallop from `guess` toward
/// the boundary (steps 1, 2, 4, …), then bisect until `n` meets the SLOs and
/// `n − 1` was simulated and does not (or `n` = 1).
pub(super) fn min_replicas(p: &Prober, search: &str, rate: f64, guess: u32) -> ReplicaSearch {
    let (mut seen, mut order) = (BTreeMap::new(), Vec::new());
    let ok = remembered(&mut seen, &mut order, |n| p.probe(search, n, rate));
    let Some((lo, hi)) = fewest_meeting(guess, None, ok)? else {
        return Err(SweepError::new(format!(
            "{}: {MAX_REPLICAS} replicas do not meet the SLOs at {rate} req/s",
            p.origin
        )));
    };
    let at = seen[&hi].clone();
    let below = (lo > 0).then(|| seen[&lo].clone());
    Ok((hi, at, below, order))
}
