//! Number formatting for `requests.csv` rows without allocation or the
//! general `fmt` machinery: a 10-million-request run writes about 300
//! million numbers, and formatting them through `format!` (a fresh `String`
//! each, Grisu with a Dragon4 fallback for fixed precision) was a fifth of
//! the run's time. Each function appends to a byte buffer exactly the text
//! `format!` gives (property tests compare them), so the file is the same
//! byte for byte.
//!
//! Whole numbers go through the `itoa` crate. A fixed number of decimals
//! (zero-padded, which `itoa` does not do) is made two digits at a time from
//! a table of the pairs 00..99 into a small array on the stack, which is then
//! copied whole — a copy of a fixed length is a few moves, where one of the
//! number's own length is a call to `memcpy` — and the buffer cut back to
//! the number's end.

/// The decimal digit pairs "00", "01", … "99".
const PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// 10^k for k ≤ 19.
const POW10: [u64; 20] = {
    let mut p = [1u64; 20];
    let mut k = 1;
    while k < 20 {
        p[k] = p[k - 1] * 10;
        k += 1;
    }
    p
};

/// The longest fraction these functions write at once: a point and 9
/// decimals, rounded up to a power of two.
const MAX_TEXT: usize = 16;

/// Fills `out` with the last `out.len()` decimal digits of `x`,
/// zero-padded on the left.
#[inline]
fn fill_digits(out: &mut [u8], mut x: u64) {
    let mut i = out.len();
    while i >= 2 {
        let k = (x % 100) as usize * 2;
        x /= 100;
        out[i - 2..i].copy_from_slice(&PAIRS[k..k + 2]);
        i -= 2;
    }
    if i == 1 {
        out[0] = b'0' + (x % 10) as u8;
    }
}

/// Appends the first `len` bytes of `text` (the whole array is copied, a
/// fixed-length copy, and the excess cut off).
#[inline]
fn push_text(buf: &mut Vec<u8>, text: &[u8; MAX_TEXT], len: usize) {
    let end = buf.len() + len;
    buf.extend_from_slice(text);
    buf.truncate(end);
}

/// Appends `x` in decimal (as `format!("{x}")`).
#[inline]
pub fn push_u64(buf: &mut Vec<u8>, x: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
}

/// Appends a point and the last `D` digits of `frac`, zero-padded.
#[inline]
fn push_fraction<const D: usize>(buf: &mut Vec<u8>, frac: u64) {
    let mut text = [b'.'; MAX_TEXT];
    fill_digits(&mut text[1..1 + D], frac);
    push_text(buf, &text, 1 + D);
}

/// Appends `q / 10^D` with exactly `D` decimals (`1 ≤ D ≤ 9`): `q`'s
/// digits with a point before the last `D`, and at least one before it.
/// `D` is a constant so that the divisions by 10^D and by 100 in the
/// fraction are multiplications, and its digit loop unrolled.
#[inline]
fn push_point<const D: usize>(buf: &mut Vec<u8>, q: u64) {
    debug_assert!((1..=9).contains(&D));
    push_u64(buf, q / POW10[D]);
    push_fraction::<D>(buf, q % POW10[D]);
}

/// [`push_point`] for a number of decimals known only at run time
/// (`0 ≤ d ≤ 9`; none: no point).
fn push_point_dyn(buf: &mut Vec<u8>, q: u64, d: u32) {
    match d {
        0 => push_u64(buf, q),
        1 => push_point::<1>(buf, q),
        2 => push_point::<2>(buf, q),
        3 => push_point::<3>(buf, q),
        4 => push_point::<4>(buf, q),
        5 => push_point::<5>(buf, q),
        6 => push_point::<6>(buf, q),
        7 => push_point::<7>(buf, q),
        8 => push_point::<8>(buf, q),
        _ => push_point::<9>(buf, q),
    }
}

/// Appends `ns` nanoseconds as milliseconds with six decimals, exactly
/// (`attribution::ns_as_ms`: `format!("{}.{:06}", ns / 1e6, ns % 1e6)`).
#[inline]
pub fn push_ns_as_ms(buf: &mut Vec<u8>, ns: u64) {
    if ns == 0 {
        // Most latency components of most requests.
        buf.extend_from_slice(b"0.000000");
    } else {
        push_point::<6>(buf, ns);
    }
}

/// Integer nanoseconds below this take [`push_ns_fixed`]'s integer path
/// (2^50 ns: 13 days).
const NS_EXACT: u64 = 1 << 50;

/// Appends `ns / 10^K` (nanoseconds in the unit of 10^K ns) with `PREC`
/// decimals, `PREC < K ≤ 9`, exactly as `format!("{v:.PREC$}")` writes
/// `v = ns as f64 / 10^K as f64` — the value `SimTime::as_secs_f64` and
/// `time::nanos_to_ms` give — without the float.
///
/// Why the integers give the same text: the last decimal kept is a unit of
/// `u = 10^(K-PREC)` ns (a multiple of 10), so the exact quotient
/// `ns / 10^K` lies at least 1 ns (10^-K in the value) from the nearest
/// halfway point between two outcomes unless `ns mod u` is `u/2` exactly.
/// Below 2^50 ns, `ns as f64` is exact and the correctly rounded division is
/// off the exact quotient by at most half an ulp, below 2^50 / 10^K · 2^-53
/// < 10^-K: it rounds to the same outcome as the exact quotient, which is
/// `ns / u` rounded half up. An exact halfway point (and anything from
/// 2^50 ns on) is left to [`push_fixed`] with the float itself.
#[inline]
pub fn push_ns_fixed<const K: usize, const PREC: usize>(buf: &mut Vec<u8>, ns: u64) {
    debug_assert!(PREC < K && K <= 9);
    let u = POW10[K - PREC];
    let (q, r) = (ns / u, ns % u);
    if ns >= NS_EXACT || r == u / 2 {
        push_fixed(buf, ns as f64 / POW10[K] as f64, PREC as u32);
        return;
    }
    let q = q + (r > u / 2) as u64;
    if PREC == 0 {
        push_u64(buf, q);
    } else {
        push_point::<PREC>(buf, q);
    }
}

/// Appends `v` with `prec` decimals (≤ 9), as `format!("{v:.prec$}")`:
/// the binary value rounded to the nearest decimal, ties to even. A
/// double is m·2^e exactly, so v·10^prec = m·10^prec / 2^-e, a quotient and
/// remainder of integers below 2^83 (Steele & White, "How to print
/// floating-point numbers accurately", PLDI 1990, do the same with bignums
/// for the general case, which falls back to `format!` here: negative,
/// not finite, or from 10^15 on). When m·10^prec and the shift fit in 64
/// bits (a few decimals of a moderate value: every `tpot_ms`), the same
/// is done in `u64`, without the 128-bit division.
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
    let p10 = POW10[prec as usize];
    if let (Some(n), true) = (m.checked_mul(p10), s < 64) {
        let (mut q, r, half) = (n >> s, n & ((1u64 << s) - 1), 1u64 << (s - 1));
        if r > half || (r == half && q & 1 == 1) {
            q += 1;
        }
        push_point_dyn(buf, q, prec);
        return;
    }
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
        let mut text = [0u8; MAX_TEXT];
        text[0] = b'.';
        fill_digits(&mut text[1..1 + prec as usize], (q % p10) as u64);
        push_text(buf, &text, 1 + prec as usize);
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

        /// Integer nanoseconds as seconds and milliseconds (the units of
        /// `requests.csv` and `timeseries.csv`), ties and huge values
        /// included: the text of the float `as_secs_f64`/`nanos_to_ms` give.
        #[test]
        fn ns_fixed_equals_format(ns in any::<u64>(), shift in 0u32..64, tie in 0usize..4) {
            let mut ns = ns >> shift;
            if tie > 0 {
                // An exact halfway point of a unit of 10, 10^3 or 10^6 ns.
                ns = ns / 10_000_000 * 10_000_000 + [5, 500, 500_000][tie - 1];
            }
            let mut b = Vec::new();
            push_ns_fixed::<9, 6>(&mut b, ns);
            push_ns_fixed::<6, 3>(&mut b, ns);
            push_ns_fixed::<9, 3>(&mut b, ns);
            push_ns_fixed::<6, 0>(&mut b, ns);
            push_ns_fixed::<9, 8>(&mut b, ns);
            let (s, ms) = (ns as f64 / 1e9, ns as f64 / 1e6);
            prop_assert_eq!(String::from_utf8(b).expect("ascii"),
                format!("{s:.6}{ms:.3}{s:.3}{ms:.0}{s:.8}"));
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

    /// Around every power of two and of ten.
    #[test]
    fn integers_around_powers() {
        let mut xs = vec![0, u64::MAX];
        for k in 0..64 {
            xs.extend([(1u64 << k) - 1, 1 << k, (1 << k) + 1]);
        }
        for p in POW10 {
            xs.extend([p - 1, p, p + 1]);
        }
        for x in xs {
            let mut b = Vec::new();
            push_u64(&mut b, x);
            assert_eq!(b, x.to_string().as_bytes(), "{x}");
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
        // The longest texts, and the ends of the integer path.
        let mut b = Vec::new();
        push_u64(&mut b, u64::MAX);
        push_ns_as_ms(&mut b, u64::MAX);
        assert_eq!(
            b,
            format!("{}{}", u64::MAX, crate::attribution::ns_as_ms(u64::MAX)).as_bytes()
        );
        for ns in [
            0,
            1,
            499,
            500,
            501,
            999_999_500,
            NS_EXACT - 1,
            NS_EXACT,
            NS_EXACT + 500,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            push_ns_fixed::<6, 3>(&mut b, ns);
            assert_eq!(b, format!("{:.3}", ns as f64 / 1e6).as_bytes(), "{ns}");
        }
    }
}
