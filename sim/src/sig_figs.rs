//! How measured figures print for people. Rates print in significant
//! figures rather than a fixed number of decimals, so a low rate (0.0912
//! req/s) keeps the digits that tell two loads apart and a high one (10 000
//! req/s) shows no false decimals. The CLI, the reports and `compare` print
//! every rate through [`rate`]; the result files keep the full numbers.

/// Significant figures of a printed rate.
pub const RATE_DIGITS: u32 = 4;

/// `x` to `digits` significant figures (at least 1), with trailing zeros
/// after the point dropped: `sig(0.091234, 4)` is "0.09123", `sig(6.0, 4)`
/// is "6", `sig(19.614, 4)` is "19.61". A number with at least `digits`
/// digits before the point prints whole ("12346"), never in exponent form.
pub fn sig(x: f64, digits: u32) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == 0.0 {
        return "0".into();
    }
    let digits = digits.max(1) as i32;
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    let mut s = format!("{x:.decimals$}");
    // Rounding can carry into a new leading digit (9.9996 → "10.000"): the
    // extra decimal is then past the significant figures, and dropped
    // below with the other trailing zeros.
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// A rate (requests/s, tokens/s) as every command prints it:
/// [`RATE_DIGITS`] significant figures.
pub fn rate(x: f64) -> String {
    sig(x, RATE_DIGITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_keep_four_significant_figures() {
        // The low rates `capacity` printed as "0.09" for both the sustained
        // and the missed load.
        assert_eq!(rate(0.091234), "0.09123");
        assert_eq!(rate(0.094871), "0.09487");
        assert_eq!(rate(0.00012346), "0.0001235");
        assert_eq!(rate(6.0), "6");
        assert_eq!(rate(19.614), "19.61");
        assert_eq!(rate(120.56), "120.6");
        assert_eq!(rate(10_000.0), "10000");
        assert_eq!(rate(12_345.6), "12346");
        assert_eq!(rate(9.99996), "10");
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate(-2.5), "-2.5");
        assert_eq!(rate(-0.00001), "-0.00001");
        assert_eq!(rate(f64::INFINITY), "inf");
        assert_eq!(sig(0.5, 1), "0.5");
        assert_eq!(sig(1234.0, 2), "1234");
        assert_eq!(sig(0.123456, 0), "0.1");
    }
}
