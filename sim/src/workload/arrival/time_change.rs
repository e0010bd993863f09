//! Time-varying rates by time change: a renewal process of unit rate runs
//! in "operational time" τ, and each arrival τ maps to the clock through
//! the inverse of the cumulative rate Λ(t) = ∫₀ᵗ rate. With exponential
//! gaps this is the inversion method for a non-homogeneous Poisson process
//! (Çinlar, "Introduction to Stochastic Processes", 1975, §4.1); with Gamma
//! gaps it keeps the burstiness (CV) while the rate follows the schedule.

use super::ArrivalProcess;
use crate::rng::StreamRng;
use rand_distr::{Distribution, Exp, Gamma};

/// A cumulative rate function Λ, inverted monotonically.
pub trait CumulativeRate: Send {
    /// The t with Λ(t) = τ; calls come with non-decreasing τ. `None` when Λ
    /// never reaches τ (the schedule ends in silence).
    fn inverse(&mut self, tau: f64) -> Option<f64>;
}

/// Gaps of mean 1 and a given CV: exponential for CV 1, Gamma otherwise.
pub enum UnitGaps {
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
}

impl UnitGaps {
    pub fn new(cv: f64) -> UnitGaps {
        if cv == 1.0 {
            UnitGaps::Exp(Exp::new(1.0).expect("unit rate"))
        } else {
            let k = 1.0 / (cv * cv);
            UnitGaps::Gamma(Gamma::new(k, 1.0 / k).expect("validated cv"))
        }
    }

    pub fn sample(&self, rng: &mut StreamRng) -> f64 {
        match self {
            UnitGaps::Exp(d) => d.sample(rng),
            UnitGaps::Gamma(d) => d.sample(rng),
        }
    }
}

/// A unit-rate renewal process seen through a cumulative rate.
pub struct TimeChanged<L: CumulativeRate> {
    rate: L,
    gaps: UnitGaps,
    tau: f64,
    done: bool,
}

impl<L: CumulativeRate> TimeChanged<L> {
    pub fn new(rate: L, cv: f64) -> TimeChanged<L> {
        TimeChanged {
            rate,
            gaps: UnitGaps::new(cv),
            tau: 0.0,
            done: false,
        }
    }
}

impl<L: CumulativeRate> ArrivalProcess for TimeChanged<L> {
    fn next_arrival(&mut self, rng: &mut StreamRng) -> Option<f64> {
        if self.done {
            return None;
        }
        self.tau += self.gaps.sample(rng);
        let t = self.rate.inverse(self.tau);
        self.done = t.is_none();
        t
    }
}
