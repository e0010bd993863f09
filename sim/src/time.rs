//! Simulated time: integer nanoseconds, so that event ordering never depends on
//! floating-point rounding (DESIGN.md, "Determinism").

use std::fmt;

/// A point on the simulated clock, in nanoseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

/// A span of simulated time, in nanoseconds.
pub type Nanos = u64;

pub const NANOS_PER_SEC: u64 = 1_000_000_000;
pub const NANOS_PER_MS: u64 = 1_000_000;

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// Converts seconds to the clock, rounding to the nearest nanosecond and
    /// saturating at the end of the clock (a run never lasts 584 years).
    pub fn from_secs_f64(s: f64) -> SimTime {
        SimTime(secs_to_nanos(s))
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }

    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_MS as f64
    }

    /// Adds a duration, saturating instead of wrapping.
    #[inline]
    pub fn plus(self, d: Nanos) -> SimTime {
        SimTime(self.0.saturating_add(d))
    }

    /// Time elapsed since `earlier` (zero if `earlier` is later).
    #[inline]
    pub fn since(self, earlier: SimTime) -> Nanos {
        self.0.saturating_sub(earlier.0)
    }
}

/// Seconds (as a float from a scenario or a distribution) to whole nanoseconds.
#[inline]
pub fn secs_to_nanos(s: f64) -> Nanos {
    if s.is_nan() || s <= 0.0 {
        0
    } else {
        let ns = (s * NANOS_PER_SEC as f64).round();
        if ns >= u64::MAX as f64 {
            u64::MAX
        } else {
            ns as u64
        }
    }
}

pub fn nanos_to_ms(n: Nanos) -> f64 {
    n as f64 / NANOS_PER_MS as f64
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip_and_saturate() {
        assert_eq!(SimTime::from_secs_f64(1.5).0, 1_500_000_000);
        assert_eq!(SimTime::from_secs_f64(-3.0).0, 0);
        assert_eq!(SimTime::from_secs_f64(f64::NAN).0, 0);
        assert_eq!(SimTime::from_secs_f64(1e30), SimTime::MAX);
        assert_eq!(SimTime(5).plus(u64::MAX), SimTime::MAX);
        assert_eq!(SimTime(5).since(SimTime(9)), 0);
        assert_eq!(nanos_to_ms(2_500_000), 2.5);
    }
}
