//! Arrival processes: when open-loop requests arrive. Each process is one
//! file; [`build`] picks one from the scenario's `workload.arrival`.
//! Gaps are never clamped: a process with a high CV produces the near-zero
//! gaps (bursts) that make it bursty.

mod diurnal;
mod gamma;
mod onoff;
mod piecewise;
mod poisson;
mod time_change;
pub mod weibull;

pub use diurnal::Diurnal;
pub use gamma::GammaRenewal;
pub use onoff::OnOff;
pub use piecewise::Piecewise;
pub use poisson::Poisson;
pub use time_change::{CumulativeRate, TimeChanged, UnitGaps};
pub use weibull::WeibullRenewal;

use crate::rng::StreamRng;
use crate::scenario::ArrivalCfg;

/// A point process on the simulated clock.
pub trait ArrivalProcess: Send {
    /// The next arrival, seconds from the start (non-decreasing), or `None`
    /// when the process has no more arrivals.
    fn next_arrival(&mut self, rng: &mut StreamRng) -> Option<f64>;
}

/// The process of an open-loop `workload.arrival` (validated). A closed loop
/// is not an arrival process (see `ClosedLoop`); asking for one is a bug.
pub fn build(cfg: &ArrivalCfg) -> Box<dyn ArrivalProcess> {
    match cfg {
        ArrivalCfg::Poisson { rate } => Box::new(Poisson::new(*rate)),
        ArrivalCfg::Gamma { rate, cv } => Box::new(GammaRenewal::new(*rate, *cv)),
        ArrivalCfg::Weibull { rate, cv } => Box::new(WeibullRenewal::new(*rate, *cv)),
        ArrivalCfg::OnOff {
            on_rate,
            off_rate,
            mean_on_s,
            mean_off_s,
        } => Box::new(OnOff::new(*on_rate, *off_rate, *mean_on_s, *mean_off_s)),
        ArrivalCfg::Piecewise {
            schedule,
            period_s,
            cv,
        } => Box::new(TimeChanged::new(
            Piecewise::new(schedule, *period_s),
            cv.unwrap_or(1.0),
        )),
        ArrivalCfg::Diurnal {
            mean_rate,
            amplitude,
            period_s,
            peak_s,
            cv,
        } => Box::new(TimeChanged::new(
            Diurnal::new(*mean_rate, *amplitude, *period_s, *peak_s),
            cv.unwrap_or(1.0),
        )),
        ArrivalCfg::Closed { .. } => unreachable!("a closed loop has no arrival process"),
    }
}

/// Sample mean and coefficient of variation of the gaps of `n` arrivals
/// (test helper).
#[cfg(test)]
pub(crate) fn gap_stats(p: &mut dyn ArrivalProcess, rng: &mut StreamRng, n: usize) -> (f64, f64) {
    let mut prev = 0.0;
    let (mut s, mut s2) = (0.0, 0.0);
    for _ in 0..n {
        let t = p.next_arrival(rng).expect("endless process");
        let g = t - prev;
        prev = t;
        s += g;
        s2 += g * g;
    }
    let mean = s / n as f64;
    let var = s2 / n as f64 - mean * mean;
    (mean, var.sqrt() / mean)
}
