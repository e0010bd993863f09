//! Numbers of `requests.csv` and `timeseries.csv` formatted without the
//! `format!` machinery: every row used to build ~25 `String`s through
//! `core::fmt` (integer padding, exact float formatting), which was 43 % of
//! the instructions of a 5,000-request run (`scenarios/shared/vidur-v1.toml`,
//! docs/speed-vs-vidur.md). The text is byte for byte what `format!` gives:
//! integers are plain digits; a time printed with `{:.N}` from integer
//! nanoseconds is rounded in integer arithmetic, which provably equals the
//! float path away from exact ties (see [`ns_fixed`]), and ties or huge
//! values take the float path itself. The tests compare both on edge cases
//! and on random values.

use std::fmt::Write as _;
use std::io::{self, Write};

/// Widest text produced: a `u64` has 20 digits; a time below 2^64 ns printed
/// in seconds or milliseconds with up to 6 decimals has at most 14 + 1 + 6.
const CAP: usize = 40;

/// One formatted field, on the stack.
pub struct Field {
    buf: [u8; CAP],
    len: usize,
}

impl Field {
    /// An empty field (a value the row does not have).
    pub const EMPTY: Field = Field {
        buf: [0; CAP],
        len: 0,
    };

    fn new() -> Field {
        Field {
            buf: [0; CAP],
            len: 0,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn push(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    /// Appends `v`'s decimal digits, left-padded with zeros to `width`:
    /// two digits per division, from the end backwards.
    fn digits(&mut self, mut v: u64, width: usize) {
        let n = (v.checked_ilog10().unwrap_or(0) as usize + 1).max(width);
        let end = self.len + n;
        let mut i = end;
        while v >= 100 {
            let d = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            self.buf[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
        }
        if v >= 10 {
            let d = v as usize * 2;
            i -= 2;
            self.buf[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
        } else {
            i -= 1;
            self.buf[i] = b'0' + v as u8;
        }
        self.buf[self.len..i].fill(b'0');
        self.len = end;
    }
}

/// "00", "01", … "99": the digit pairs [`Field::digits`] copies.
const PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

impl std::fmt::Write for Field {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > CAP {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `v` as `v.to_string()` writes it.
pub fn uint(v: u64) -> Field {
    let mut f = Field::new();
    f.digits(v, 0);
    f
}

/// `format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000)`: nanoseconds as
/// milliseconds with six decimals, exactly (`attribution::ns_as_ms`).
pub fn ns_as_ms(ns: u64) -> Field {
    let mut f = Field::new();
    if ns == 0 {
        // Most latency components of a request are zero.
        f.buf[..8].copy_from_slice(b"0.000000");
        f.len = 8;
        return f;
    }
    f.digits(ns / 1_000_000, 0);
    f.push(b'.');
    f.digits(ns % 1_000_000, 6);
    f
}

/// Below this, `ns as f64` is exact and the float path's error is far from
/// a rounding tie (see [`ns_fixed`]): 2^50 ns is 13 days.
const EXACT_NS: u64 = 1 << 50;

/// `format!("{:.decimals$}", ns as f64 / unit_ns as f64)`, where `unit_ns`
/// / 10^decimals is a whole number of nanoseconds `r` (the printed step):
/// seconds with 6 decimals, milliseconds with 3 (r = 1,000 ns), seconds
/// with 3 (r = 10^6 ns).
///
/// Why it is the same text: for ns < 2^50 the conversion is exact and the
/// division correctly rounded, so the float differs from ns / unit by less
/// than ns · 2^-53 < 1/8 ns. std prints the float's exact value rounded to
/// the step; that matches ns / unit rounded to the step unless a tie, at
/// (k + 1/2) · r, lies within 1/8 ns of ns — impossible unless ns sits on
/// the tie (2 · (ns mod r) = r), whose distance is otherwise ≥ 1/2 ns. Ties
/// and larger values use std's formatting.
pub fn ns_fixed(ns: u64, unit_ns: u64, decimals: u32) -> Field {
    let step = 10u64.pow(decimals);
    debug_assert!(unit_ns % step == 0, "the printed step is whole nanoseconds");
    let r = unit_ns / step;
    let rem = ns % r;
    if ns >= EXACT_NS || 2 * rem == r {
        let mut f = Field::new();
        let v = ns as f64 / unit_ns as f64;
        write!(f, "{v:.prec$}", prec = decimals as usize).expect("fits");
        return f;
    }
    let q = ns / r + u64::from(2 * rem > r);
    fixed(q, step, decimals)
}

/// `q` / `step` printed with `decimals` decimals (`step` = 10^decimals).
fn fixed(q: u64, step: u64, decimals: u32) -> Field {
    let mut f = Field::new();
    f.digits(q / step, 0);
    if decimals > 0 {
        f.push(b'.');
        f.digits(q % step, decimals as usize);
    }
    f
}

/// `format!("{:.3}", (d as f64 / n as f64) / 1e6)`: a mean time per token in
/// milliseconds, `d` nanoseconds over `n` ≥ 1 tokens (`Request::tpot`).
///
/// The float has two correctly rounded operations, so it is within a
/// relative 2.3·10^-16 of d / (n · 10^6); in microseconds (the printed
/// step) it is off by less than (q + 1) · 2^-50 where q is the whole part.
/// When the exact quotient's distance from a tie exceeds that, both round
/// the same way; otherwise (or for d ≥ 2^50) std formats the float.
pub fn per_token_ms(d: u64, n: u64) -> Field {
    debug_assert!(n >= 1);
    let den = n as u128 * 1000; // d / den is the value in microseconds
    let d128 = d as u128;
    let q = d128 / den;
    let rem = d128 % den;
    let dist2 = (2 * rem).abs_diff(den); // 2·den × distance from the tie
    if d >= EXACT_NS || n >= EXACT_NS || (dist2 << 50) <= 2 * den * (q + 1) {
        let mut f = Field::new();
        let v = (d as f64 / n as f64) / 1e6;
        write!(f, "{v:.3}").expect("fits");
        return f;
    }
    let q = q as u64 + u64::from(2 * rem > den);
    fixed(q, 1000, 3)
}

/// One CSV record written straight into `w`, field by field, as the `csv`
/// crate's default writer writes it (comma-separated, `\n`-terminated, a
/// field quoted only when it holds a comma, a quote, `\r` or `\n`, quotes
/// doubled) but without its per-field state machine and scan of numbers.
pub struct Row<'a, W: Write> {
    w: &'a mut W,
    first: bool,
}

impl<'a, W: Write> Row<'a, W> {
    pub fn new(w: &'a mut W) -> Self {
        Row { w, first: true }
    }

    /// A field that needs no quoting: digits, a decimal point, an identifier.
    pub fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        if !self.first {
            self.w.write_all(b",")?;
        }
        self.first = false;
        self.w.write_all(bytes)
    }

    /// Any text, quoted when the csv crate would quote it.
    pub fn text(&mut self, s: &str) -> io::Result<()> {
        if !s.bytes().any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n')) {
            return self.raw(s.as_bytes());
        }
        self.raw(b"\"")?;
        for (i, part) in s.split('"').enumerate() {
            if i > 0 {
                self.w.write_all(b"\"\"")?;
            }
            self.w.write_all(part.as_bytes())?;
        }
        self.w.write_all(b"\"")
    }

    /// Ends the record. (The csv crate writes a record of one empty field as
    /// `""`; the files written this way have many fields.)
    pub fn end(self) -> io::Result<()> {
        self.w.write_all(b"\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng;
    use rand::Rng;

    fn s(f: Field) -> String {
        String::from_utf8(f.as_bytes().to_vec()).unwrap()
    }

    fn check_ns(ns: u64) {
        assert_eq!(
            s(ns_fixed(ns, 1_000_000_000, 6)),
            format!("{:.6}", ns as f64 / 1e9),
            "{ns} s .6"
        );
        assert_eq!(
            s(ns_fixed(ns, 1_000_000, 3)),
            format!("{:.3}", ns as f64 / 1e6),
            "{ns} ms .3"
        );
        assert_eq!(
            s(ns_fixed(ns, 1_000_000_000, 3)),
            format!("{:.3}", ns as f64 / 1e9),
            "{ns} s .3"
        );
    }

    #[test]
    fn integers_and_exact_milliseconds_match_std() {
        for v in [0, 1, 9, 10, 99, 100, 12345, u32::MAX as u64, u64::MAX] {
            assert_eq!(s(uint(v)), v.to_string());
            assert_eq!(
                s(ns_as_ms(v)),
                format!("{}.{:06}", v / 1_000_000, v % 1_000_000)
            );
        }
    }

    #[test]
    fn times_match_std_at_ties_edges_and_random_values() {
        // Ties (std's half-to-even on the float) and their neighbours, at
        // small and large magnitudes, and past the exact range.
        for base in [0u64, 1_000, 7_000_000, 123_456_789_000, (1 << 50) - 10_000] {
            for off in [
                0u64, 1, 499, 500, 501, 999, 1000, 1500, 2500, 499_999, 500_000, 500_001,
            ] {
                check_ns(base + off);
            }
        }
        for ns in [1 << 50, (1 << 50) + 500, u64::MAX / 3, u64::MAX] {
            check_ns(ns);
        }
        let mut r = rng::stream(7, "output.fields.test");
        for _ in 0..200_000 {
            let bits = r.random_range(0..64u32);
            let ns = r.random::<u64>() >> bits;
            check_ns(ns);
            // Values that end exactly on or next to a tie of each step.
            let near = ns - ns % 1000 + 499 + r.random_range(0..3u64);
            check_ns(near.min(u64::MAX - 1));
        }
    }

    #[test]
    fn per_token_times_match_std() {
        let check = |d: u64, n: u64| {
            assert_eq!(
                s(per_token_ms(d, n)),
                format!("{:.3}", (d as f64 / n as f64) / 1e6),
                "{d} / {n}"
            );
        };
        for (d, n) in [
            (0, 1),
            (1, 1),
            (500, 1),
            (1500, 1),
            (2500, 1),
            (1000, 2),
            (1001, 2),
            (3, 2),
        ] {
            check(d, n);
        }
        check(u64::MAX, 1);
        check(1 << 50, 3);
        let mut r = rng::stream(8, "output.fields.test");
        for _ in 0..200_000 {
            let n = 1 + (r.random::<u64>() >> r.random_range(32..64u32));
            let d = r.random::<u64>() >> r.random_range(8..64u32);
            check(d, n);
            // A value whose quotient is exactly a tie: d = n·(1000q + 500).
            let q = r.random_range(0..1_000_000u64);
            check(n.min(1 << 20) * (1000 * q + 500), n.min(1 << 20));
        }
    }

    #[test]
    fn rows_are_written_as_the_csv_crate_writes_them() {
        let cases: [&[&str]; 5] = [
            &["1", "0.000458", "", "completed", ""],
            &["a,b", "say \"hi\"", "line\nbreak", "cr\rx", "\""],
            &["", "", "plain"],
            &["eu-west", "us east", "ünïcode,", "x\"\"y"],
            &[",", "\"\"", "\r\n", " spaced "],
        ];
        for fields in cases {
            let mut ours = Vec::new();
            let mut row = Row::new(&mut ours);
            for (i, f) in fields.iter().enumerate() {
                if i % 2 == 0 && !f.bytes().any(|b| b",\"\r\n".contains(&b)) {
                    row.raw(f.as_bytes()).unwrap();
                } else {
                    row.text(f).unwrap();
                }
            }
            row.end().unwrap();
            let mut theirs = csv::Writer::from_writer(Vec::new());
            theirs.write_record(fields).unwrap();
            let theirs = theirs.into_inner().unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(theirs).unwrap(),
                "{fields:?}"
            );
        }
    }
}
