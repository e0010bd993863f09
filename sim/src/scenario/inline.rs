//! Configuration values printed the way a scenario file writes them: a TOML
//! inline table (`{ dist = "normal", mean = 8000, sd = 1500 }`), so what
//! `check` shows can be pasted back into the file. The value goes through
//! its own `Serialize`, so the keys and their names are those the file
//! reads; keys left at their default of "absent" are left out.

use serde::Serialize;
use std::fmt;

/// `v` as a TOML inline table (or plain value), keys in the order the
/// type declares them.
pub fn inline_toml<T: Serialize + ?Sized>(v: &T) -> String {
    let mut out = String::new();
    match v.serialize(toml::ser::ValueSerializer::new(&mut out)) {
        Ok(()) => whole_numbers(&out),
        // Every configuration type serializes to TOML; one that did not
        // would still print, with the reason.
        Err(e) => format!("<{e}>"),
    }
}

/// Writes a whole float as an integer (`8000.0` → `8000`), as a file
/// writes `mean = 8000`: the scenario reads an integer where it wants a
/// float. Strings are left as they are.
fn whole_numbers(toml: &str) -> String {
    let mut out = String::with_capacity(toml.len());
    let mut chars = toml.chars().peekable();
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        let t = token.as_str();
        let digits = t.strip_prefix('-').unwrap_or(t);
        match digits.strip_suffix(".0") {
            Some(whole) if !whole.is_empty() && whole.bytes().all(|b| b.is_ascii_digit()) => {
                out.push_str(&t[..t.len() - 2])
            }
            _ => out.push_str(t),
        }
        token.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                flush(&mut token, &mut out);
                out.push(c);
                while let Some(d) = chars.next() {
                    out.push(d);
                    if d == '\\' && c == '"' {
                        if let Some(e) = chars.next() {
                            out.push(e);
                        }
                    } else if d == c {
                        break;
                    }
                }
            }
            c if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-') => token.push(c),
            _ => {
                flush(&mut token, &mut out);
                out.push(c);
            }
        }
    }
    flush(&mut token, &mut out);
    out
}

macro_rules! display_inline {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&inline_toml(self))
            }
        }
    )*};
}

display_inline!(
    super::LengthDist,
    super::ArrivalCfg,
    super::ThinkTime,
    super::ConversationCfg,
    super::TraceCfg
);

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn distributions_print_as_a_scenario_file_writes_them() {
        let d = LengthDist::Normal {
            mean: 8000.0,
            sd: 1500.0,
            min: Some(2000),
            max: Some(14000),
        };
        let s = d.to_string();
        assert_eq!(
            s,
            r#"{ dist = "normal", mean = 8000, sd = 1500, min = 2000, max = 14000 }"#
        );
        // What it prints reads back as the same distribution.
        let back: toml::Table = format!("x = {s}").parse().unwrap();
        let back: LengthDist = back["x"].clone().try_into().unwrap();
        assert_eq!(back, d);
        let d = LengthDist::Lognormal {
            mean: 512.5,
            cv: 0.25,
            min: None,
            max: None,
        };
        assert_eq!(
            d.to_string(),
            r#"{ dist = "lognormal", mean = 512.5, cv = 0.25 }"#
        );
        let a = ArrivalCfg::Closed {
            users: 48,
            think_time: Some(ThinkTime::Exponential { mean_s: 2.0 }),
            ramp_up_s: Some(5.0),
        };
        assert_eq!(
            a.to_string(),
            r#"{ process = "closed", users = 48, think_time = { dist = "exponential", mean_s = 2 }, ramp_up_s = 5 }"#
        );
        assert_eq!(
            ArrivalCfg::Poisson { rate: 0.75 }.to_string(),
            r#"{ process = "poisson", rate = 0.75 }"#
        );
    }
}
