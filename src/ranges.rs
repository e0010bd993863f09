//! The range of every numeric flag, applied by one rule to the whole
//! command tree ([`crate::cli::numeric_flags`]): a flag is looked up by its
//! name here and parsed by [`Decimal`] or [`Whole`] with its range, so
//! `--request-timeout-s 1e300` is refused by clap with the flag and the
//! range named instead of panicking in `Duration::from_secs_f64`, and a
//! new flag gets a range by adding a line, not a check in its command.
//! The ranges themselves are `sim::bounds`'s, shared with the library's
//! own checks and the environment's settings.

use sim::bounds::{self, Bound, Count};

/// The range of the decimal flag `id` (its field name). Every decimal flag
/// has one (a test walks the command tree): durations in seconds are the
/// flags whose name ends in `_s`.
pub fn decimal(id: &str) -> Option<Bound> {
    if id.ends_with("_s") {
        return Some(bounds::SECONDS);
    }
    Some(match id {
        "demand" => bounds::DEMAND_RPS,
        "rate" => bounds::RATE_RPS,
        "headroom" => bounds::HEADROOM_PERCENT,
        "attainment" => bounds::ATTAINMENT,
        "tolerance" => bounds::TOLERANCE,
        "gpu_hour_usd" => bounds::GPU_HOUR_USD,
        "api_input_usd_per_mtok" | "api_output_usd_per_mtok" => bounds::USD_PER_MTOK,
        "budget" => bounds::MINUTES,
        "speed" | "time_scale" => bounds::SPEED,
        "start" | "end" => bounds::OFFSET_SECONDS,
        "cancel_share" => bounds::SHARE,
        "max_regression" => MAX_REGRESSION_PERCENT,
        "temperature" => TEMPERATURE,
        "energy_price_kwh" => ENERGY_PRICE_USD_PER_KWH,
        "carbon_g_per_kwh" => CARBON_G_PER_KWH,
        _ => return None,
    })
}

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

/// The range of the whole-number flag `id`, when it has one beyond its
/// type's.
pub fn whole(id: &str) -> Option<Count> {
    Some(match id {
        "exhaustive" => bounds::EXHAUSTIVE_REPLICAS,
        "replicas" => bounds::REPLICAS,
        "spare" => bounds::SPARE_REPLICAS,
        "max_body_bytes" => BYTES,
        "requests" | "rows" | "max_requests" | "max_connections" => ITEMS,
        "max_waiting" | "per_client_limit" => QUEUE,
        _ => return None,
    })
}

/// A decimal flag's parser: a finite number in the flag's range (any
/// finite number when it has none).
#[derive(Clone)]
pub struct Decimal(pub Option<Bound>);

/// A whole-number flag's parser: the error states the range.
#[derive(Clone)]
pub struct Whole<T> {
    pub range: Count,
    pub _type: std::marker::PhantomData<T>,
}

impl<T> Whole<T> {
    /// The parser of a `T` flag in `range` (cut to what `T` holds).
    pub fn new(range: Option<Count>, type_max: u64) -> Whole<T> {
        let r = range.unwrap_or(Count {
            lo: 0,
            hi: type_max,
        });
        Whole {
            range: Count {
                lo: r.lo,
                hi: r.hi.min(type_max),
            },
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
        match (v, self.0) {
            (None, None) => Err(flag_error(
                cmd,
                arg,
                value,
                "must be a finite number".into(),
            )),
            (None, Some(b)) => Err(flag_error(
                cmd,
                arg,
                value,
                format!("must be a finite number in {}", b.describe()),
            )),
            (Some(v), None) => Ok(v),
            (Some(v), Some(b)) => b.check(v).map_err(|m| flag_error(cmd, arg, value, m)),
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
