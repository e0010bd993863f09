//! Probes shared by every search of one plan: a probe is a deterministic
//! function of its scenario (the option's settings with the fleet size,
//! load and horizon the search chose) and the attainment target, so two
//! searches asking for the same probe get one simulation. Options that
//! scale to the same fleet (a unit of 1 prefill + 1 decode pool at two
//! units and a 2 + 2 unit at one), an option's count search and the load
//! points of its frontier at the demand, or the headroom search and the
//! sizing it measures, share their runs.
//!
//! Each probe is simulated once however many threads ask for it at once
//! (the first computes, the others wait for its result), so the number of
//! simulations a plan runs does not depend on timing: it is the number of
//! distinct probes its searches asked for.

use super::Probe;
use crate::sweep::SweepError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

type Slot = Arc<OnceLock<Result<Probe, SweepError>>>;

/// A plan's probes by their scenario, and how many were asked for and run.
#[derive(Default)]
pub struct ProbeCache {
    slots: Mutex<HashMap<String, Slot>>,
    asked: AtomicUsize,
    run: AtomicUsize,
}

impl ProbeCache {
    /// The probe of `key` (its scenario text and target), simulated by
    /// `simulate` only if no search asked for it before. A reused probe
    /// says so in its `reused` flag.
    pub(super) fn get_or_run(
        &self,
        key: String,
        simulate: impl FnOnce() -> Result<Probe, SweepError>,
    ) -> Result<Probe, SweepError> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        let slot = self
            .slots
            .lock()
            .expect("probe cache lock")
            .entry(key)
            .or_default()
            .clone();
        let mut ran = false;
        let r = slot.get_or_init(|| {
            ran = true;
            self.run.fetch_add(1, Ordering::Relaxed);
            simulate()
        });
        let mut p = r.clone()?;
        p.reused = !ran;
        Ok(p)
    }

    /// Probes the searches asked for.
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::Relaxed)
    }

    /// Probes simulated (the rest were reused).
    pub fn simulated(&self) -> usize {
        self.run.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_asked_twice_runs_once_even_from_many_threads() {
        use rayon::prelude::*;
        let cache = ProbeCache::default();
        let runs = AtomicUsize::new(0);
        let probe = |rate: f64| Probe {
            search: "rate".into(),
            replicas: 1,
            pool_replicas: None,
            rate_rps: rate,
            attainment: 1.0,
            ttft_p99_ms: 1.0,
            tpot_p99_ms: 1.0,
            goodput_rps: rate,
            completed: 1,
            stable: true,
            requests: 1,
            percentiles_met: None,
            meets_slo: true,
            missed: String::new(),
            figures: None,
            reused: false,
        };
        let got: Vec<Probe> = (0..64)
            .into_par_iter()
            .map(|i| {
                let key = format!("k{}", i % 4);
                cache
                    .get_or_run(key, || {
                        runs.fetch_add(1, Ordering::Relaxed);
                        Ok(probe((i % 4) as f64))
                    })
                    .unwrap()
            })
            .collect();
        assert_eq!(runs.load(Ordering::Relaxed), 4);
        assert_eq!((cache.asked(), cache.simulated()), (64, 4));
        assert_eq!(got.iter().filter(|p| !p.reused).count(), 4);
        for (i, p) in got.iter().enumerate() {
            assert_eq!(p.rate_rps, (i % 4) as f64);
        }
        // A failed probe is remembered as failed.
        let e = cache.get_or_run("bad".into(), || Err(SweepError::new("no")));
        assert!(e.is_err());
        let e = cache.get_or_run("bad".into(), || Ok(probe(9.0)));
        assert_eq!(e.unwrap_err().0, "no");
    }
}
