//! The range of every numeric flag. Each numeric argument in `cli.rs` (and
//! the argument types it pulls in) names its parser here, e.g.
//! `#[arg(long, value_parser = ranges::DEMAND, allow_negative_numbers = true)]`,
//! so `--request-timeout-s 1e300` is refused by clap with the flag and the
//! range named instead of panicking in `Duration::from_secs_f64`, and
//! `--demand -1` reaches the range check instead of clap's "unexpected
//! argument" error. A test walks the command tree and fails on a decimal
//! flag without a range. The ranges themselves are `sim::bounds`'s, shared
//! with the library's own checks and the environment's settings.

use sim::bounds::{self, Bound, Count};

/// Durations, seconds (every flag whose name ends in `_s`).
pub const SECONDS: Decimal = Decimal(bounds::SECONDS);
/// A demand to size a fleet for, requests/s.
pub const DEMAND: Decimal = Decimal(bounds::DEMAND_RPS);
/// An arrival rate, requests/s.
pub const RATE: Decimal = Decimal(bounds::RATE_RPS);
/// Extra load above a demand, percent.
pub const HEADROOM: Decimal = Decimal(bounds::HEADROOM_PERCENT);
/// A share of requests that must meet the SLOs.
pub const ATTAINMENT: Decimal = Decimal(bounds::ATTAINMENT);
/// Relative precision of a rate search.
pub const TOLERANCE: Decimal = Decimal(bounds::TOLERANCE);
/// A price of one GPU for one hour, US dollars.
pub const GPU_HOUR_USD: Decimal = Decimal(bounds::GPU_HOUR_USD);
/// A hosted API's price per million tokens, US dollars.
pub const USD_PER_MTOK: Decimal = Decimal(bounds::USD_PER_MTOK);
/// A budget in minutes.
pub const MINUTES: Decimal = Decimal(bounds::MINUTES);
/// A speed-up of a replay or of the twin's clock.
pub const SPEED: Decimal = Decimal(bounds::SPEED);
/// Seconds from the first row of a trace (a window's ends).
pub const OFFSET_SECONDS: Decimal = Decimal(bounds::OFFSET_SECONDS);
/// A share of requests.
pub const SHARE: Decimal = Decimal(bounds::SHARE);
/// A quality regression allowed, percent.
pub const MAX_REGRESSION: Decimal = Decimal(MAX_REGRESSION_PERCENT);
/// A sampling temperature.
pub const SAMPLING_TEMPERATURE: Decimal = Decimal(TEMPERATURE);
/// A price of electricity, US dollars per kWh.
pub const ENERGY_PRICE: Decimal = Decimal(ENERGY_PRICE_USD_PER_KWH);
/// A grid's carbon intensity, grams of CO2 per kWh.
pub const CARBON: Decimal = Decimal(CARBON_G_PER_KWH);

/// Replicas of a fleet the searches consider.
pub const REPLICAS: Whole<u32> = Whole::new(bounds::REPLICAS, u32::MAX as u64);
/// Spare replicas added for failures.
pub const SPARE: Whole<u32> = Whole::new(bounds::SPARE_REPLICAS, u32::MAX as u64);
/// The largest fleet `plan --exhaustive` runs.
pub const EXHAUSTIVE: Whole<u32> = Whole::new(bounds::EXHAUSTIVE_REPLICAS, u32::MAX as u64);
/// Request bodies in bytes.
pub const BODY_BYTES: Whole<usize> = Whole::new(BYTES, usize::MAX as u64);
/// Requests and rows a command handles.
pub const ITEMS_U64: Whole<u64> = Whole::new(ITEMS, u64::MAX);
/// Connections a command opens.
pub const ITEMS_USIZE: Whole<usize> = Whole::new(ITEMS, usize::MAX as u64);
/// Queue lengths and per-client limits (0: none waiting).
pub const QUEUE_LENGTH: Whole<usize> = Whole::new(QUEUE, usize::MAX as u64);
/// At least one (a stride, a count that cannot be zero).
pub const POSITIVE_U64: Whole<u64> = Whole::new(
    Count {
        lo: 1,
        hi: u64::MAX,
    },
    u64::MAX,
);
/// Any `u64` (seeds, ids, token counts), with the range said on a bad value.
pub const ANY_U64: Whole<u64> = Whole::new(
    Count {
        lo: 0,
        hi: u64::MAX,
    },
    u64::MAX,
);
/// Any `usize` (sizes, thread counts), with the range said on a bad value.
pub const ANY_USIZE: Whole<usize> = Whole::new(
    Count {
        lo: 0,
        hi: u64::MAX,
    },
    usize::MAX as u64,
);

/// A price of electricity, US dollars per kWh (retail prices are cents).
const ENERGY_PRICE_USD_PER_KWH: Bound = Bound {
    lo: 0.0,
    lo_open: false,
    hi: 1000.0,
    hi_open: false,
    unit: "$/kWh",
};
/// A grid's carbon intensity, grams of CO2 per kWh (coal is about 1,000).
const CARBON_G_PER_KWH: Bound = Bound {
    lo: 0.0,
    lo_open: false,
    hi: 10_000.0,
    hi_open: false,
    unit: "g/kWh",
};
/// A quality regression allowed, percent.
const MAX_REGRESSION_PERCENT: Bound = Bound {
    lo: 0.0,
    lo_open: false,
    hi: 1e6,
    hi_open: false,
    unit: "%",
};
/// A sampling temperature (0: greedy).
const TEMPERATURE: Bound = Bound {
    lo: 0.0,
    lo_open: false,
    hi: 100.0,
    hi_open: false,
    unit: "",
};

/// Request bodies and other sizes in bytes: up to 1 GiB.
const BYTES: Count = Count { lo: 1, hi: 1 << 30 };
/// Requests, rows and connections a command handles: up to a billion.
const ITEMS: Count = Count {
    lo: 1,
    hi: 1_000_000_000,
};
/// Queue lengths and per-client limits (0: none waiting).
const QUEUE: Count = Count {
    lo: 0,
    hi: 1_000_000_000,
};

/// A decimal flag's parser: a finite number in the flag's range.
#[derive(Clone, Copy)]
pub struct Decimal(pub Bound);

/// A whole-number flag's parser: the error states the range.
#[derive(Clone, Copy)]
pub struct Whole<T> {
    pub range: Count,
    pub _type: std::marker::PhantomData<T>,
}

impl<T> Whole<T> {
    /// The parser of a `T` flag in `range` (cut to `type_max`, what `T` holds).
    pub const fn new(range: Count, type_max: u64) -> Whole<T> {
        let hi = if range.hi < type_max {
            range.hi
        } else {
            type_max
        };
        Whole {
            range: Count { lo: range.lo, hi },
            _type: std::marker::PhantomData,
        }
    }
}

/// "invalid value '1e300' for '--request-timeout-s <S>': must be in (0, 1e9] s".
pub fn flag_error(
    cmd: &clap::Command,
    arg: Option<&clap::Arg>,
    value: &std::ffi::OsStr,
    allowed: String,
) -> clap::Error {
    let flag = arg.map_or_else(|| "the value".to_string(), |a| a.to_string());
    clap::Error::raw(
        clap::error::ErrorKind::ValueValidation,
        format!(
            "invalid value '{}' for '{flag}': {allowed}\n",
            value.to_string_lossy()
        ),
    )
    .with_cmd(cmd)
}

impl clap::builder::TypedValueParser for Decimal {
    type Value = f64;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<f64, clap::Error> {
        let v = value
            .to_str()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite());
        let b = self.0;
        match v {
            None => Err(flag_error(
                cmd,
                arg,
                value,
                format!("must be a finite number in {}", b.describe()),
            )),
            Some(v) => b.check(v).map_err(|m| flag_error(cmd, arg, value, m)),
        }
    }
}

macro_rules! whole_parser {
    ($($t:ty),*) => {$(
        impl clap::builder::TypedValueParser for Whole<$t> {
            type Value = $t;
            fn parse_ref(
                &self,
                cmd: &clap::Command,
                arg: Option<&clap::Arg>,
                value: &std::ffi::OsStr,
            ) -> Result<$t, clap::Error> {
                let r = self.range;
                value
                    .to_str()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .filter(|v| (r.lo..=r.hi).contains(v))
                    .map(|v| v as $t)
                    .ok_or_else(|| {
                        let allowed = format!("must be a whole number in {}..={}", r.lo, r.hi);
                        flag_error(cmd, arg, value, allowed)
                    })
            }
        }
    )*};
}
whole_parser!(u32, u64, usize);
