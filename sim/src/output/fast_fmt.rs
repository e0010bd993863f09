//! Number formatting for `requests.csv` rows without allocation or the
//! general `fmt` machinery: a 10-million-request run writes about 300
//! million numbers, and formatting them through `format!` (a fresh `String`
//! each, Grisu with a Dragon4 fallback for fixed precision) was a fifth of
//! the run's time. Each function appends to a byte buffer exactly the text
//! `format!` gives (a property test compares them), so the file is the same
//! byte for byte.

/// Appends `x` in decimal (as `format!("{x}")`). The digits are pushed
/// last first and turned around in place: no copy of a variable length
/// (a call to `memcpy` per number).
#[inline]
pub fn push_u64(buf: &mut Vec<u8>, mut x: u64) {
    let start = buf.len();
    loop {
        buf.push(b'0' + (x % 10) as u8);
        x /= 10;
        if x == 0 {
            break;
        }
    }
    buf[start..].reverse();
}

/// Appends `x` with exactly `digits` digits, zero-padded on the left (`x`
/// must have no more).
#[inline]
fn push_padded(buf: &mut Vec<u8>, mut x: u64, digits: usize) {
    let start = buf.len();
    for _ in 0..digits {
        buf.push(b'0' + (x % 10) as u8);
        x /= 10;
    }
    debug_assert_eq!(x, 0);
    buf[start..].reverse();
}

/// Appends `ns` nanoseconds as milliseconds with six decimals, exactly
/// (`attribution::ns_as_ms`: `format!("{}.{:06}", ns / 1e6, ns % 1e6)`).
#[inline]
pub fn push_ns_as_ms(buf: &mut Vec<u8>, ns: u64) {
    push_u64(buf, ns / 1_000_000);
    buf.push(b'.');
    push_padded(buf, ns % 1_000_000, 6);
}

/// Appends `v` with `prec` decimals (≤ 9), as `format!("{v:.prec$}")`:
/// the binary value rounded to the nearest decimal, ties to even. A
/// double is m·2^e exactly, so v·10^prec = m·10^prec / 2^-e, a quotient and
/// remainder of integers below 2^83 (Steele & White, "How to print
/// floating-point numbers accurately", PLDI 1990, do the same with bignums
/// for the general case, which falls back to `format!` here: negative,
/// not finite, or from 10^15 on).
#[inline]
pub fn push_fixed(buf: &mut Vec<u8>, v: f64, prec: u32) {
    debug_assert!(prec <= 9);
    if !(v.is_finite() && v.is_sign_positive() && v < 1e15) {
        use std::io::Write;
        let _ = write!(buf, "{v:.*}", prec as usize);
        return;
    }
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    // v = m · 2^-s, with s ≥ 1 since v < 2^52.
    let (m, s) = if exp == 0 {
        (frac, 1074)
    } else {
        (frac | 1 << 52, 1075 - exp)
    };
    let p10 = 10u64.pow(prec);
    let n = m as u128 * p10 as u128;
    let q = if s > 83 {
        // n < 2^83 ≤ half of 2^s: rounds to 0.
        0
    } else {
        let (mut q, r, half) = (n >> s, n & ((1u128 << s) - 1), 1u128 << (s - 1));
        if r > half || (r == half && q & 1 == 1) {
            q += 1;
        }
        q
    };
    let p10 = p10 as u128;
    push_u64(buf, (q / p10) as u64);
    if prec > 0 {
        buf.push(b'.');
        push_padded(buf, (q % p10) as u64, prec as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fixed(v: f64, prec: u32) -> String {
        let mut b = Vec::new();
        push_fixed(&mut b, v, prec);
        String::from_utf8(b).expect("ascii")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// The values `requests.csv` formats (seconds and milliseconds from
        /// integer nanoseconds, ratios) and any double at all.
        #[test]
        fn fixed_equals_format(ns in any::<u64>(), d in 1u64..5000, bits in any::<u64>(), prec in 0u32..10) {
            let ns = ns >> (ns % 64);
            for v in [ns as f64 / 1e9, ns as f64 / 1e6, ns as f64 / d as f64 / 1e6, f64::from_bits(bits)] {
                prop_assert_eq!(fixed(v, prec), format!("{v:.*}", prec as usize));
            }
        }

        /// Exact ties (k + ½)·10^-prec that a double holds: to even.
        #[test]
        fn ties_round_to_even(k in 0u64..1 << 20, t in 1u32..30, prec in 0u32..10) {
            let v = k as f64 / (1u64 << t) as f64;
            prop_assert_eq!(fixed(v, prec), format!("{v:.*}", prec as usize));
        }

        #[test]
        fn integers_equal_format(x in any::<u64>(), shift in 0u32..64) {
            let x = x >> shift;
            let mut b = Vec::new();
            push_u64(&mut b, x);
            push_ns_as_ms(&mut b, x);
            prop_assert_eq!(String::from_utf8(b).expect("ascii"),
                format!("{x}{}", crate::attribution::ns_as_ms(x)));
        }
    }

    #[test]
    fn edge_values() {
        for v in [
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.0078125,
            0.0625,
            5e-324,
            999_999.999_999_5,
            1e15,
            f64::MAX,
            f64::NAN,
            f64::INFINITY,
            -1.25,
        ] {
            for prec in [0, 3, 6, 9] {
                assert_eq!(fixed(v, prec), format!("{v:.*}", prec as usize), "{v}");
            }
        }
    }
}
