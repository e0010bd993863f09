//! One probe: the scenario with only its offered load and fleet size
//! changed ([`Prober`]), its horizon extended to the fleet, simulated and
//! judged against the SLOs.

use super::{fleet_count, FleetUnit, Probe, ProbeCache};
use crate::config::keypath;
use crate::report::Summary;
use crate::sweep::SweepError;
use crate::{Scenario, Simulation};

/// Most time-series samples a probe takes (its series is not kept).
const PROBE_MAX_SAMPLES: f64 = 10_000.0;

/// Requests per replica a probe simulates at least.
pub const MIN_REQUESTS_PER_REPLICA: u64 = 200;

/// The recommended fleet is checked with a horizon this many times longer.
pub const VERIFY_HORIZON_FACTOR: f64 = 4.0;

/// Runs probes of one scenario with the rate and replica count replaced.
pub(super) struct Prober<'a> {
    pub(super) base: toml::Table,
    pub(super) origin: &'a str,
    pub(super) knob: Knob,
    /// The pools' unit, when the fleet has pools: a probe's count is units.
    pub(super) unit: Option<FleetUnit>,
    pub(super) target: f64,
    pub(super) on_probe: &'a (dyn Fn(&Probe) + Sync),
    /// Probes shared with the plan's other searches, if any.
    pub(super) cache: Option<&'a ProbeCache>,
}

/// Where a scenario's offered load is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Knob {
    /// `workload.arrival.rate` of an arrival process.
    ArrivalRate,
    /// `workload.trace.rate`: a trace replayed scaled to a mean rate.
    TraceRate,
}

impl Knob {
    fn key(self) -> &'static str {
        match self {
            Knob::ArrivalRate => "workload.arrival.rate",
            Knob::TraceRate => "workload.trace.rate",
        }
    }
}

/// The load knob of a scenario and the rate it offers as written. A trace
/// without a `rate` offers its replayed mean rate (the recorded one, sped up
/// by any `time_scale`), read from the file.
fn load_knob(base: &toml::Table, s: &Scenario) -> Result<(Knob, f64), SweepError> {
    let num = |k: &str| match keypath::get(base, k) {
        Some(toml::Value::Float(f)) => Some(*f),
        Some(toml::Value::Integer(i)) => Some(*i as f64),
        _ => None,
    };
    if let Some(r) = num(Knob::ArrivalRate.key()) {
        return Ok((Knob::ArrivalRate, r));
    }
    if let Some(trace) = &s.workload().trace {
        if let Some(r) = num(Knob::TraceRate.key()) {
            return Ok((Knob::TraceRate, r));
        }
        let ctx = crate::workload::Context::new(&s.origin, &s.base_dir, s.seed());
        let stats = crate::workload::trace::stats::trace_stats(trace, "workload.trace", &ctx)
            .map_err(|e| SweepError::new(e.to_string()))?;
        // The statistics are of the replay as configured (time_scale applied).
        let r = stats.rate_rps;
        if r.is_finite() && r > 0.0 {
            return Ok((Knob::TraceRate, r));
        }
    }
    Err(SweepError::new(format!(
        "{}: workload: capacity scales the offered load through `workload.arrival.rate` (an arrival process with a rate) or `workload.trace.rate` (a trace replay), and this workload has neither",
        s.origin
    )))
}

impl<'a> Prober<'a> {
    /// The prober of a scenario's text, with the scenario and the rate it
    /// offers as written. Regions are refused: each has its own demand.
    pub(super) fn of(
        scenario_toml: &str,
        origin: &'a str,
        target: f64,
        on_probe: &'a (dyn Fn(&Probe) + Sync),
    ) -> Result<(Prober<'a>, Scenario, f64), SweepError> {
        let s = Scenario::from_toml_str(scenario_toml, origin)?;
        if s.has_regions() {
            return Err(SweepError::new(format!(
                "{origin}: fleet.regions: capacity sizes a fleet for one demand, and regions each have their own; size each region's pools on its own scenario"
            )));
        }
        let base: toml::Table = scenario_toml
            .parse()
            .map_err(|e| SweepError::new(format!("{origin}: {e}")))?;
        let (knob, rate) = load_knob(&base, &s)?;
        let p = Prober {
            base,
            origin,
            knob,
            unit: FleetUnit::of(&s),
            target,
            on_probe,
            cache: None,
        };
        Ok((p, s, rate))
    }

    /// Extends the horizon to the fleet: enough requests per replica to
    /// reach a steady state (see the module's doc), times `factor`.
    fn size_horizon(
        &self,
        t: &mut toml::Table,
        replicas: u32,
        rate: f64,
        factor: f64,
    ) -> Result<(), SweepError> {
        let num = |t: &toml::Table, k: &str| match keypath::get(t, k) {
            Some(toml::Value::Float(f)) => Some(*f),
            Some(toml::Value::Integer(i)) => Some(*i as f64),
            _ => None,
        };
        let seqs = num(t, "engine.max_num_seqs").unwrap_or(256.0);
        let per_replica = (MIN_REQUESTS_PER_REPLICA as f64).max(2.0 * seqs);
        let need = per_replica * replicas as f64;
        let set = |t: &mut toml::Table, k: &str, v: toml::Value| {
            keypath::set(t, k, v).map_err(|m| SweepError::new(format!("{}: {m}", self.origin)))
        };
        if let Some(n) = num(t, "horizon.requests") {
            let n = (n * factor).max(need * factor).min(i64::MAX as f64 / 2.0);
            set(t, "horizon.requests", (n.ceil() as i64).into())?;
        }
        if let Some(d) = num(t, "horizon.duration_s") {
            let d = (d * factor).max(need * factor / rate);
            set(t, "horizon.duration_s", d.into())?;
        }
        Ok(())
    }

    pub(super) fn probe(
        &self,
        search: &str,
        replicas: u32,
        rate: f64,
    ) -> Result<Probe, SweepError> {
        self.probe_with(search, replicas, rate, 1.0)
    }

    /// A probe whose horizon is `factor` × the one sized for its fleet.
    pub(super) fn probe_with(
        &self,
        search: &str,
        replicas: u32,
        rate: f64,
        factor: f64,
    ) -> Result<Probe, SweepError> {
        let mut t = self.base.clone();
        let per_unit = self.unit.as_ref().map_or(1, |u| u.replicas);
        if self.knob == Knob::ArrivalRate {
            self.size_horizon(&mut t, replicas.saturating_mul(per_unit), rate, factor)?;
        }
        if self.knob == Knob::TraceRate {
            // `rate` replaces any `time_scale`: both set the replay speed.
            keypath::remove(&mut t, "workload.trace.time_scale");
        }
        let sized = match &self.unit {
            None => keypath::set(&mut t, "fleet.replicas", i64::from(replicas).into()),
            Some(u) => {
                // The pools' sum would no longer match a stated total.
                keypath::remove(&mut t, "fleet.replicas");
                u.pools.iter().enumerate().try_for_each(|(i, p)| {
                    let n = i64::from(p.replicas) * i64::from(replicas);
                    keypath::set(&mut t, &format!("fleet.pools.{i}.replicas"), n.into())
                })
            }
        };
        sized
            .and_then(|_| keypath::set(&mut t, self.knob.key(), rate.into()))
            .map_err(|m| SweepError::new(format!("{}: {m}", self.origin)))?;
        let at = format!(
            "{} at {} req/s",
            fleet_count(self.unit.as_ref(), replicas),
            crate::sig_figs::rate(rate)
        );
        let pool_replicas = self.unit.as_ref().map(|u| u.replicas * replicas);
        let simulate = || {
            let mut s = Scenario::from_table(t.clone(), self.origin)
                .map_err(|e| SweepError::new(format!("{at}: {e}")))?;
            // A probe at a very low rate spans a long simulated time; sample it
            // more sparsely rather than fill memory with a series nobody reads.
            // Ordinary probes keep the scenario's interval, so a probe's summary is
            // exactly what `simulate` reports for the same settings.
            let h = s.horizon();
            let span = h
                .duration_s
                .unwrap_or(f64::INFINITY)
                .min(h.requests.map_or(f64::INFINITY, |n| n as f64 / rate));
            s.cap_timeseries_samples(span, PROBE_MAX_SAMPLES);
            let r = Simulation::new(&s)
                .run(|_| {})
                .map_err(|e| SweepError::new(format!("{}: {at}: {e}", self.origin)))?;
            let mut p = probe_of(search, replicas, rate, &r.summary, self.target);
            p.pool_replicas = pool_replicas;
            Ok(p)
        };
        let mut p = match self.cache {
            // The scenario as the probe runs it, and the target it is
            // judged against, are everything its result depends on.
            Some(c) => {
                let key = format!(
                    "{}\n{}",
                    self.target,
                    toml::to_string(&t).unwrap_or_default()
                );
                c.get_or_run(key, simulate)?
            }
            None => simulate()?,
        };
        p.search = search.to_string();
        (self.on_probe)(&p);
        Ok(p)
    }
}

/// One probe as the searches run it: `scenario_toml` with `replicas` at
/// `rate`, its horizon sized for the fleet and times `factor`, judged
/// against `attainment` (exhaustive checks of the searches use it).
pub fn probe_once(
    scenario_toml: &str,
    origin: &str,
    replicas: u32,
    rate: f64,
    factor: f64,
    attainment: f64,
) -> Result<Probe, SweepError> {
    let quiet = |_: &Probe| {};
    let (p, _, _) = Prober::of(scenario_toml, origin, attainment, &quiet)?;
    p.probe_with("exhaustive", replicas, rate, factor)
}

/// What a run missed of its SLOs, in words (empty when it met them).
fn missed(s: &Summary, slo: &crate::stats::SloReport, target: f64) -> String {
    let mut why = Vec::new();
    if s.counts.completed == 0 {
        why.push("no request completed".to_string());
    }
    if !s.load.is_stable() {
        why.push("the backlog kept growing".to_string());
    }
    if slo.attainment < target {
        why.push(format!(
            "{:.2} % of requests met the per-request targets, below {:.2} %",
            slo.attainment * 100.0,
            target * 100.0
        ));
    }
    for v in slo.percentiles.iter().filter(|v| !v.met) {
        why.push(match v.value_ms {
            Some(x) => format!(
                "{} is {x:.1} ms, above its {} ms target",
                v.key, v.target_ms
            ),
            None => format!("{} has no samples (target {} ms)", v.key, v.target_ms),
        });
    }
    why.join("; ")
}

fn probe_of(search: &str, replicas: u32, rate: f64, s: &Summary, target: f64) -> Probe {
    let slo = s.slo.clone().unwrap_or_default();
    Probe {
        missed: missed(s, &slo, target),
        search: search.to_string(),
        replicas,
        pool_replicas: None,
        rate_rps: rate,
        attainment: slo.attainment,
        ttft_p99_ms: s.latency.ttft_ms.p99,
        tpot_p99_ms: s.latency.tpot_ms.p99,
        goodput_rps: slo.goodput_rps,
        completed: s.counts.completed,
        stable: s.load.is_stable(),
        requests: s.counts.arrived,
        percentiles_met: slo.percentiles_met,
        // A steady run whose good share reaches the target and whose
        // percentile targets (if any) hold.
        meets_slo: s.counts.completed > 0
            && s.load.is_stable()
            && slo.attainment >= target
            && slo.percentiles_hold(),
        figures: figures(s).map(std::sync::Arc::new),
        reused: false,
    }
}

/// The summary's fields a plan's frontier and energy cost read (see
/// [`Probe::figures`]), under the same names as in `summary.json`.
fn figures(s: &Summary) -> Option<serde_json::Value> {
    let all = serde_json::to_value(s).ok()?;
    let mut out = serde_json::Map::new();
    for k in ["gpus", "hardware", "pools", "throughput", "energy"] {
        if let Some(v) = all.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    let latency: serde_json::Map<_, _> = ["ttft_ms", "tpot_ms"]
        .iter()
        .filter_map(|k| Some((k.to_string(), all.get("latency")?.get(k)?.clone())))
        .collect();
    out.insert("latency".into(), latency.into());
    if let Some(g) = all.pointer("/lifecycle/mean_billed_gpus") {
        out.insert(
            "lifecycle".into(),
            serde_json::json!({ "mean_billed_gpus": g }),
        );
    }
    Some(out.into())
}
