//! The allowed range of every number a user gives outside a scenario file:
//! command-line flags, environment settings and the queries of the
//! searches (`capacity`, `plan`). One table of ranges and one check, so a
//! flag, the setting it mirrors and the library call behind both refuse the
//! same values with the same words.
//!
//! Each range is far beyond any real use, so it only refuses typos and
//! absurd values, but it is finite: `std::time::Duration::from_secs_f64`
//! panics past 1.8·10¹⁹ s, a demand of 10³⁰⁰ req/s would size a fleet of
//! 10²⁹⁸ replicas, and a price of 10³⁰⁶ prints "$inf per month".

/// A closed or half-open interval of decimal values, with its unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub lo: f64,
    /// Whether `lo` itself is refused (`(0, …]`: a positive value).
    pub lo_open: bool,
    pub hi: f64,
    /// Whether `hi` itself is refused.
    pub hi_open: bool,
    /// Unit words after the range ("s", "requests/s", "%"); may be empty.
    pub unit: &'static str,
}

impl Bound {
    const fn new(lo: f64, lo_open: bool, hi: f64, hi_open: bool, unit: &'static str) -> Bound {
        Bound {
            lo,
            lo_open,
            hi,
            hi_open,
            unit,
        }
    }

    /// Whether `v` lies in the range (NaN never does).
    pub fn holds(&self, v: f64) -> bool {
        let above = if self.lo_open {
            v > self.lo
        } else {
            v >= self.lo
        };
        let below = if self.hi_open {
            v < self.hi
        } else {
            v <= self.hi
        };
        above && below
    }

    /// "(0, 1e9] s".
    pub fn describe(&self) -> String {
        let unit = if self.unit.is_empty() {
            String::new()
        } else {
            format!(" {}", self.unit)
        };
        format!(
            "{}{}, {}{}{unit}",
            if self.lo_open { '(' } else { '[' },
            show(self.lo),
            show(self.hi),
            if self.hi_open { ')' } else { ']' },
        )
    }

    /// `v`, or "must be in (0, 1e9] s, got 1e300".
    pub fn check(&self, v: f64) -> Result<f64, String> {
        if self.holds(v) {
            Ok(v)
        } else {
            Err(format!("must be in {}, got {}", self.describe(), show(v)))
        }
    }

    /// [`Bound::check`] with the name of the flag or key in front.
    pub fn check_named(&self, name: &str, v: f64) -> Result<f64, String> {
        self.check(v).map_err(|m| format!("{name} {m}"))
    }
}

/// A number as a person reads it: plain when moderate, else scientific.
pub fn show(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-3..1e7).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// A range of whole numbers (counts: replicas, simulations, requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count {
    pub lo: u64,
    pub hi: u64,
}

impl Count {
    /// `v`, or "must be a whole number in 1..=1024, got 1000000".
    pub fn check(&self, v: u64) -> Result<u64, String> {
        if (self.lo..=self.hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!(
                "must be a whole number in {}..={}, got {v}",
                self.lo, self.hi
            ))
        }
    }
}

/// Durations, seconds: up to ~31.7 years, as a scenario's times
/// (`scenario::ranges::MAX_SECONDS`), far inside what `Duration` holds.
pub const SECONDS: Bound = Bound::new(0.0, true, 1e9, false, "s");
/// Durations in minutes (budgets), the same span as [`SECONDS`].
pub const MINUTES: Bound = Bound::new(0.0, true, 1e9 / 60.0, false, "minutes");
/// A demand the searches size a fleet for, requests/s. The lower end keeps
/// the first light probe (a thousandth of the demand) inside the range a
/// scenario's arrival rate takes; the upper end is that range's.
pub const DEMAND_RPS: Bound = Bound::new(1e-3, false, 1e7, false, "requests/s");
/// Arrival rates, requests/s (a trace replayed at a rate), as in a scenario.
pub const RATE_RPS: Bound = Bound::new(1e-6, false, 1e7, false, "requests/s");
/// Extra load above a demand, percent: up to eleven times the demand.
pub const HEADROOM_PERCENT: Bound = Bound::new(0.0, false, 1000.0, false, "%");
/// A share of requests that must meet the SLOs.
pub const ATTAINMENT: Bound = Bound::new(0.0, true, 1.0, false, "");
/// A share of requests (cancelled, ...).
pub const SHARE: Bound = Bound::new(0.0, false, 1.0, false, "");
/// Relative precision of a rate search.
pub const TOLERANCE: Bound = Bound::new(0.0, true, 1.0, true, "");
/// A price of one GPU for one hour, US dollars: a thousand times today's
/// dearest rental.
pub const GPU_HOUR_USD: Bound = Bound::new(0.0, true, 1e4, false, "US dollars per GPU-hour");
/// A hosted API's price per million tokens, US dollars (free is allowed).
pub const USD_PER_MTOK: Bound = Bound::new(0.0, false, 1e6, false, "US dollars per million tokens");
/// A speed-up of a replay or of the twin's clock.
pub const SPEED: Bound = Bound::new(1e-6, false, 1e6, false, "");
/// Seconds from the start of a trace (a window's ends).
pub const OFFSET_SECONDS: Bound = Bound::new(0.0, false, 1e9, false, "s");
/// Memory for a run's records and time series, GiB (`SERVESIM_MEMORY_GIB`).
pub const MEMORY_GIB: Bound = Bound::new(0.0, true, 1e6, false, "GiB");

/// Replicas of a fleet the searches consider.
pub const REPLICAS: Count = Count { lo: 1, hi: 100_000 };
/// Spare replicas added for failures.
pub const SPARE_REPLICAS: Count = Count { lo: 0, hi: 100_000 };
/// The largest fleet `plan --exhaustive` runs every count up to: it runs
/// options × count × 2 simulations, so past a thousand the comparison it
/// is for would take days.
pub const EXHAUSTIVE_REPLICAS: Count = Count { lo: 1, hi: 1024 };

/// Settings read from the environment, each with its range: checked at
/// start-up like a flag (`check_environment`).
pub const ENVIRONMENT: [(&str, Bound); 1] = [("SERVESIM_MEMORY_GIB", MEMORY_GIB)];

/// Every numeric environment setting that is set, checked: the first bad
/// one's error names the variable, the range and the value.
pub fn check_environment() -> Result<(), String> {
    check_environment_with(|k| std::env::var_os(k))
}

/// [`check_environment`] over `get` (tests give their own environment).
pub fn check_environment_with(
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(), String> {
    for (name, bound) in ENVIRONMENT {
        let Some(raw) = get(name) else { continue };
        let text = raw.to_string_lossy();
        let v = text.trim().parse::<f64>().map_err(|_| {
            format!(
                "environment setting {name}={text:?}: not a number; it must be in {} (unset it for the default)",
                bound.describe()
            )
        })?;
        bound.check(v).map_err(|m| {
            format!("environment setting {name}={text:?}: {m} (unset it for the default)")
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_names_its_range_and_refuses_its_open_ends_nan_and_infinities() {
        assert_eq!(SECONDS.check(1.5), Ok(1.5));
        let e = SECONDS.check(1e300).unwrap_err();
        assert!(e.contains("(0, 1e9] s") && e.contains("1e300"), "{e}");
        assert!(SECONDS.check(0.0).is_err());
        assert!(SECONDS.check(f64::NAN).is_err());
        assert!(SECONDS.check(f64::INFINITY).is_err());
        assert!(TOLERANCE.check(1.0).is_err());
        assert_eq!(HEADROOM_PERCENT.check(0.0), Ok(0.0));
        // Every duration the ranges admit converts without a panic.
        let _ = std::time::Duration::from_secs_f64(SECONDS.hi);
        let _ = std::time::Duration::from_secs_f64(MINUTES.hi * 60.0);
        let e = EXHAUSTIVE_REPLICAS.check(1_000_000).unwrap_err();
        assert!(e.contains("1..=1024"), "{e}");
    }

    #[test]
    fn environment_settings_are_checked_like_flags() {
        let env = |v: &'static str| move |_: &str| Some(std::ffi::OsString::from(v));
        assert!(check_environment_with(env("8")).is_ok());
        assert!(check_environment_with(|_| None).is_ok());
        for bad in ["0", "-1", "nan", "abc", "inf"] {
            let e = check_environment_with(env(bad)).unwrap_err();
            assert!(
                e.contains("SERVESIM_MEMORY_GIB") && e.contains("(0, 1000000] GiB"),
                "{bad}: {e}"
            );
        }
    }
}
