//! Parsing of trace fields: times to integer nanoseconds (exactly, from the
//! decimal text, so the 7 fractional digits of Azure's wall-clock stamps
//! survive epoch-sized values that an f64 would round) and token counts.

use crate::scenario::TimeUnit;

/// Nanoseconds per unit (wall-clock times are in seconds).
pub fn unit_ns(u: TimeUnit) -> i64 {
    match u {
        TimeUnit::S | TimeUnit::Datetime => 1_000_000_000,
        TimeUnit::Ms => 1_000_000,
        TimeUnit::Us => 1_000,
        TimeUnit::Ns => 1,
    }
}

fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

/// A decimal number of `unit_ns`-nanosecond units (`-12.5`, `3e2`), to the
/// nearest nanosecond.
pub fn decimal_ns(s: &[u8], unit_ns: i64) -> Option<i64> {
    let s = trim(s);
    plain_decimal_ns(s, unit_ns).or_else(|| general_decimal_ns(s, unit_ns))
}

/// [`decimal_ns`] of any field (trimmed), in 128-bit arithmetic.
fn general_decimal_ns(s: &[u8], unit_ns: i64) -> Option<i64> {
    if s.iter().any(|&c| c == b'e' || c == b'E') {
        let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
        return f64_ns(v, unit_ns);
    }
    let (neg, s) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (int, frac) = match s.iter().position(|&c| c == b'.') {
        Some(p) => (&s[..p], &s[p + 1..]),
        None => (s, &s[..0]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut whole: i128 = 0;
    for &c in int {
        if !c.is_ascii_digit() || whole > i64::MAX as i128 {
            return None;
        }
        whole = whole * 10 + (c - b'0') as i128;
    }
    // Up to 18 fractional digits are exact; more only round.
    let (mut f, mut scale) = (0i128, 1i128);
    for &c in frac {
        if !c.is_ascii_digit() {
            return None;
        }
        if scale < 1_000_000_000_000_000_000 {
            f = f * 10 + (c - b'0') as i128;
            scale *= 10;
        }
    }
    let u = unit_ns as i128;
    let ns = whole * u + (f * u * 2 + scale) / (scale * 2);
    let ns = if neg { -ns } else { ns };
    i64::try_from(ns).ok()
}

/// [`decimal_ns`] of the usual field, unsigned `digits[.digits]` with at
/// most 18 whole and 9 fractional digits, in 64-bit arithmetic: the same
/// rounding formula, whose terms cannot overflow there (f·u·2 < 2·10¹⁸),
/// without the 128-bit multiplies and division the general path pays per
/// row. `None` sends anything else (signs, exponents, long fractions, an
/// overflow) to the general path.
#[inline]
fn plain_decimal_ns(s: &[u8], unit_ns: i64) -> Option<i64> {
    if !(1..=1_000_000_000).contains(&unit_ns) || s.is_empty() || s.len() > 28 {
        return None;
    }
    // One pass: whole digits up to the first other byte (wrapping, so a
    // too-long run is only rejected below), then the fraction.
    let mut whole = 0u64;
    let mut i = 0;
    while i < s.len() {
        let d = s[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        whole = whole.wrapping_mul(10).wrapping_add(d as u64);
        i += 1;
    }
    if i > 18 {
        return None;
    }
    let (mut f, mut scale) = (0u64, 1u64);
    if i < s.len() {
        if s[i] != b'.' || s.len() - i - 1 > 9 || s.len() == 1 {
            return None;
        }
        for &c in &s[i + 1..] {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            f = f * 10 + d as u64;
            scale *= 10;
        }
    }
    let u = unit_ns as u64;
    let part = (f * u * 2 + scale) / (scale * 2);
    let ns = (whole as i64).checked_mul(unit_ns)?;
    ns.checked_add(part as i64)
}

/// A float number of units, to the nearest nanosecond.
pub fn f64_ns(v: f64, unit_ns: i64) -> Option<i64> {
    let ns = (v * unit_ns as f64).round();
    (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Hinnant,
/// "chrono-Compatible Low-Level Date Algorithms", `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn num(s: &[u8]) -> Option<i64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0i64, |a, &c| a * 10 + (c - b'0') as i64))
}

/// `YYYY-MM-DD HH:MM:SS[.fraction][Z|±HH:MM]` (or with a `T`) as
/// nanoseconds since the Unix epoch; without an offset the time is UTC.
pub fn datetime_ns(s: &[u8]) -> Option<i64> {
    let s = trim(s);
    if s.len() < 19
        || s[4] != b'-'
        || s[7] != b'-'
        || !matches!(s[10], b' ' | b'T')
        || s[13] != b':'
        || s[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(&s[0..4])?, num(&s[5..7])?, num(&s[8..10])?);
    let (h, mi, sec) = (num(&s[11..13])?, num(&s[14..16])?, num(&s[17..19])?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac_ns = 0i64;
    if rest.first() == Some(&b'.') {
        let end = rest[1..]
            .iter()
            .position(|c| !c.is_ascii_digit())
            .map_or(rest.len(), |p| p + 1);
        let digits = &rest[1..end];
        if digits.is_empty() {
            return None;
        }
        let mut text = b"0.".to_vec();
        text.extend_from_slice(digits);
        frac_ns = decimal_ns(&text, 1_000_000_000)?;
        rest = &rest[end..];
    }
    let offset_s = match rest {
        [] | [b'Z'] => 0,
        [sign @ (b'+' | b'-'), hh @ ..] => {
            let (oh, om) = match hh {
                [a, b, b':', c, d] | [a, b, c, d] => (num(&[*a, *b])?, num(&[*c, *d])?),
                [a, b] => (num(&[*a, *b])?, 0),
                _ => return None,
            };
            let o = oh * 3600 + om * 60;
            if *sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// What a time field should look like, given the field that did not parse:
/// a well-formed wall-clock time outside what the clock holds (nanoseconds
/// since 1970 in an i64) is told so.
pub fn time_expected_for(unit: TimeUnit, got: &[u8]) -> &'static str {
    if matches!(unit, TimeUnit::Datetime) && datetime_ns(got).is_none() {
        // The same text in a year the clock holds parses: the date is the cause.
        let t = trim(got);
        if t.len() >= 19 && t[..4].iter().all(u8::is_ascii_digit) {
            let mut moved = t.to_vec();
            moved[..4].copy_from_slice(b"2000");
            if datetime_ns(&moved).is_some() {
                return "a wall-clock time from 1677-09-21 00:12:43 to 2262-04-11 23:47:16 UTC \
                        (nanoseconds since 1970 in 64 bits); this one is well formed but outside";
            }
        }
    }
    time_expected(unit)
}

/// A time field in `unit`.
pub fn time_ns(s: &[u8], unit: TimeUnit) -> Option<i64> {
    match unit {
        TimeUnit::Datetime => datetime_ns(s),
        u => decimal_ns(s, unit_ns(u)),
    }
}

/// What a time field should look like, for error messages.
pub fn time_expected(unit: TimeUnit) -> &'static str {
    match unit {
        TimeUnit::Datetime => "a wall-clock time like 2023-11-16 18:17:03.9799600",
        TimeUnit::S => "a time in seconds",
        TimeUnit::Ms => "a time in milliseconds",
        TimeUnit::Us => "a time in microseconds",
        TimeUnit::Ns => "a time in nanoseconds",
    }
}

/// A token count: a whole number (a trailing `.0…` is accepted, as written
/// by tools that store counts as floats).
pub fn count(s: &[u8]) -> Option<u64> {
    // The usual field, 1 to 19 bare digits, in one pass; anything else
    // (padding, a `.0` tail, a bad byte) takes the general path below.
    if (1..=19).contains(&s.len()) {
        let plain = s.iter().try_fold(0u64, |a, &c| {
            let v = c.wrapping_sub(b'0');
            (v <= 9).then_some(a * 10 + v as u64)
        });
        if plain.is_some() {
            return plain;
        }
    }
    let s = trim(s);
    let s = match s.iter().position(|&c| c == b'.') {
        Some(p) if s[p + 1..].iter().all(|&c| c == b'0') => &s[..p],
        Some(_) => return None,
        None => s,
    };
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |a, &c| a * 10 + (c - b'0') as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_exact() {
        assert_eq!(decimal_ns(b"61.114", 1_000_000_000), Some(61_114_000_000));
        assert_eq!(decimal_ns(b" 82 ", 1_000_000_000), Some(82_000_000_000));
        assert_eq!(decimal_ns(b"1500", 1_000_000), Some(1_500_000_000));
        assert_eq!(decimal_ns(b"-0.5", 1_000_000_000), Some(-500_000_000));
        assert_eq!(decimal_ns(b"1e3", 1_000), Some(1_000_000));
        assert_eq!(decimal_ns(b"0.0000000015", 1_000_000_000), Some(2));
        for bad in [&b""[..], b".", b"1.2.3", b"abc", b"1,5"] {
            assert_eq!(decimal_ns(bad, 1), None, "{bad:?}");
        }
    }

    #[test]
    fn the_plain_decimal_path_agrees_with_the_general_one() {
        let mut fields: Vec<String> = [
            "0",
            "0.0",
            "5.",
            ".5",
            "4.314579",
            "61.114",
            "999999999999999999",
            "999999999999999999.999999999",
            "9223372036.854775807",
            "9223372037",
            "1.000000001",
            "0.0000000015",
            "12.3456789",
            "7.5",
            "1a",
            "",
            ".",
            "-1.5",
            "+2",
            "1e3",
            "12.",
            "0.1234567891",
            "1234567890123456789",
            "1..2",
            "1.2.3",
            "99999999999999999999999999",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let (w, f) = (x >> 40, (x >> 8) & 0xff_ffff);
            fields.push(format!("{w}.{f:0width$}", width = (x % 10) as usize));
        }
        for f in &fields {
            for u in [1, 1_000, 1_000_000, 1_000_000_000] {
                let b = f.as_bytes();
                assert_eq!(decimal_ns(b, u), general_decimal_ns(b, u), "{f} in {u} ns");
            }
        }
    }

    #[test]
    fn wall_clock_times_keep_every_digit() {
        // A valid date the clock cannot hold is told apart from a bad one.
        let far = b"9999-12-31 23:59:59.9999999";
        assert_eq!(datetime_ns(far), None);
        assert!(time_expected_for(TimeUnit::Datetime, far).contains("outside"));
        assert!(!time_expected_for(TimeUnit::Datetime, b"2023-13-01 00:00:00").contains("outside"));
        let a = datetime_ns(b"2023-11-16 18:17:03.9799600").unwrap();
        let b = datetime_ns(b"2023-11-16 18:17:04.0437580").unwrap();
        assert_eq!(b - a, 63_798_000);
        // 2023-11-16 is day 19677 since the epoch.
        assert_eq!(
            datetime_ns(b"2023-11-16 00:00:00").unwrap(),
            19_677 * 86_400 * 1_000_000_000
        );
        assert_eq!(datetime_ns(b"1970-01-01T00:00:01Z"), Some(1_000_000_000));
        assert_eq!(datetime_ns(b"1970-01-01 01:00:00+01:00"), Some(0));
        assert_eq!(
            datetime_ns(b"2024-02-29 12:00:00.5"),
            Some(datetime_ns(b"2024-02-29 12:00:00").unwrap() + 500_000_000)
        );
        for bad in [
            &b"2023-13-01 00:00:00"[..],
            b"2023-11-16",
            b"2023-11-16 18:17",
            b"2023/11/16 18:17:03",
            b"2023-11-16 18:17:03.",
            b"2023-11-16 18:17:03 x",
        ] {
            assert_eq!(datetime_ns(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn counts_are_whole_numbers() {
        assert_eq!(count(b"4808"), Some(4808));
        assert_eq!(count(b" 12.0 "), Some(12));
        for bad in [&b""[..], b"-1", b"1.5", b"12a", b"99999999999999999999"] {
            assert_eq!(count(bad), None);
        }
    }
}
