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

/// An instant that may not have come yet (a request's first token, say):
/// [`SimTime`] with the end of the clock standing for "not yet", so that it
/// takes 8 bytes where `Option<SimTime>` takes 16 (a request holds three,
/// and a fleet of 10,000 replicas holds 720,000 requests at once). A run
/// never reaches the end of the clock (584 years); an instant saturated to
/// it is kept one nanosecond before it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp(u64);

impl Stamp {
    /// Not yet.
    pub const NONE: Stamp = Stamp(u64::MAX);

    /// The instant `t`.
    #[inline]
    pub fn at(t: SimTime) -> Stamp {
        Stamp(t.0.min(u64::MAX - 1))
    }

    #[inline]
    pub fn get(self) -> Option<SimTime> {
        (self.0 != u64::MAX).then_some(SimTime(self.0))
    }

    #[inline]
    pub fn is_some(self) -> bool {
        self.0 != u64::MAX
    }

    #[inline]
    pub fn is_none(self) -> bool {
        self.0 == u64::MAX
    }

    #[inline]
    pub fn map<U>(self, f: impl FnOnce(SimTime) -> U) -> Option<U> {
        self.get().map(f)
    }

    #[inline]
    pub fn map_or<U>(self, default: U, f: impl FnOnce(SimTime) -> U) -> U {
        self.get().map_or(default, f)
    }

    #[inline]
    pub fn unwrap_or(self, default: SimTime) -> SimTime {
        self.get().unwrap_or(default)
    }

    /// The instant; panics when it has not come (tests and checks).
    #[track_caller]
    pub fn unwrap(self) -> SimTime {
        self.get().expect("an instant that has not come")
    }
}

impl Default for Stamp {
    fn default() -> Stamp {
        Stamp::NONE
    }
}

impl From<Option<SimTime>> for Stamp {
    #[inline]
    fn from(t: Option<SimTime>) -> Stamp {
        t.map_or(Stamp::NONE, Stamp::at)
    }
}

impl From<SimTime> for Stamp {
    #[inline]
    fn from(t: SimTime) -> Stamp {
        Stamp::at(t)
    }
}

impl PartialEq<Option<SimTime>> for Stamp {
    fn eq(&self, other: &Option<SimTime>) -> bool {
        self.get() == *other
    }
}

impl fmt::Debug for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

/// Seconds (as a float from a scenario or a distribution) to whole nanoseconds.
#[inline]
pub fn secs_to_nanos(s: f64) -> Nanos {
    if s.is_nan() || s <= 0.0 {
        return 0;
    }
    let x = s * NANOS_PER_SEC as f64;
    // `x.round()` (half away from zero) without its libm call: the baseline
    // x86-64 target has no `roundsd` (SSE4.1), and every priced iteration
    // comes through here. Below 2^63 the cast truncates, `i as f64` is that
    // integer exactly, and `x - i` is x's fraction exactly (both lie on x's
    // grid of representable values), so adding one when the fraction is at
    // least one half is the same integer `round` gives. From 2^52 up every
    // `f64` is already an integer.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x < TWO_63 {
        let i = x as i64;
        (i + (x - i as f64 >= 0.5) as i64) as u64
    } else if x >= u64::MAX as f64 {
        u64::MAX
    } else {
        x as u64
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

    #[test]
    fn a_stamp_is_an_optional_instant_in_8_bytes() {
        assert_eq!(std::mem::size_of::<Stamp>(), 8);
        assert_eq!(Stamp::NONE.get(), None);
        assert_eq!(Stamp::default(), None);
        assert_eq!(Stamp::at(SimTime(7)), Some(SimTime(7)));
        assert_eq!(Stamp::from(Some(SimTime::ZERO)).get(), Some(SimTime::ZERO));
        assert_eq!(Stamp::from(None), Stamp::NONE);
        // The end of the clock is kept just before it, not lost.
        assert_eq!(Stamp::at(SimTime::MAX).get(), Some(SimTime(u64::MAX - 1)));
        assert_eq!(format!("{:?}", Stamp::at(SimTime(3))), "Some(SimTime(3))");
    }

    /// The libm-free rounding gives `f64::round`'s integer for every kind of
    /// value: halves and their neighbours, tiny, huge, the cast's limits.
    #[test]
    fn secs_to_nanos_rounds_as_f64_round() {
        let reference = |s: f64| -> Nanos {
            if s.is_nan() || s <= 0.0 {
                return 0;
            }
            let ns = (s * NANOS_PER_SEC as f64).round();
            if ns >= u64::MAX as f64 {
                u64::MAX
            } else {
                ns as u64
            }
        };
        let mut xs = vec![
            0.0,
            -0.0,
            f64::MIN_POSITIVE,
            5e-324,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            0.5e-9,
            0.5f64.next_down() / 1e9,
            2f64.powi(52) / 1e9,
            2f64.powi(53) / 1e9,
            2f64.powi(63) / 1e9,
            2f64.powi(64) / 1e9,
        ];
        for k in 0..2000u64 {
            let n = k as f64 + 0.5;
            for v in [n, n.next_down(), n.next_up(), k as f64] {
                xs.push(v / 1e9);
                xs.push(v);
            }
        }
        // A deterministic spread over many magnitudes.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let s = f64::from_bits(x >> 1);
            if s.is_finite() {
                xs.push(s);
            }
            xs.push((x >> 11) as f64 * 2f64.powi(-53) * 2f64.powi((x % 90) as i32 - 40));
        }
        for s in xs {
            assert_eq!(secs_to_nanos(s), reference(s), "{s:e}");
        }
    }
}
