//! JSON helpers shared by the readers: Python's `json.dump` writes
//! `Infinity` and `NaN` for non-finite floats (vLLM's `request_rate` of
//! `inf`, an empty percentile), which strict JSON parsers refuse; they are
//! turned into strings before parsing so a reader sees `"inf"` / `"nan"`.

use serde_json::Value;

/// Parses `text`, accepting Python's bare `Infinity`, `-Infinity` and
/// `NaN` tokens outside strings.
pub fn parse_lenient(text: &str) -> Result<Value, serde_json::Error> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(first) => {
            let fixed = quote_non_finite(text);
            if fixed == text {
                return Err(first);
            }
            serde_json::from_str(&fixed).map_err(|_| first)
        }
    }
}

fn quote_non_finite(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let token = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| rest.starts_with(t));
        match token {
            Some(t) => {
                out.push('"');
                out.push_str(match t {
                    "-Infinity" => "-inf",
                    "Infinity" => "inf",
                    _ => "nan",
                });
                out.push('"');
                rest = &rest[t.len()..];
            }
            None => {
                if c == '"' {
                    in_string = true;
                }
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// The value at `path` (object keys).
pub fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |node, k| node.get(k))
}

/// A number at `path`: a JSON number, or a numeric string (`"inf"` is
/// infinite).
pub fn num(v: &Value, path: &[&str]) -> Option<f64> {
    as_num(at(v, path)?)
}

/// A JSON number or numeric string as f64.
pub fn as_num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// A non-empty string at `path`.
pub fn text(v: &Value, path: &[&str]) -> Option<String> {
    match at(v, path)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Array(a) => a.iter().find_map(|x| x.as_str()).map(str::to_string),
        _ => None,
    }
}

/// The first value under `key` anywhere inside `v` (depth first, in the
/// file's key order), for settings a tool nests differently by version.
pub fn find<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m
            .get(key)
            .filter(|x| !x.is_null())
            .or_else(|| m.values().find_map(|x| find(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find(x, key)),
        _ => None,
    }
}

/// Integers in an array (per-request token counts).
pub fn u32s(v: &Value) -> Option<Vec<u32>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect()
}

/// Milliseconds per `unit` as tools write it.
pub fn unit_ms(unit: &str) -> Option<f64> {
    Some(match unit.trim().to_ascii_lowercase().as_str() {
        "ms" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "second" | "seconds" => 1e3,
        "us" | "µs" | "microseconds" => 1e-3,
        "ns" | "nanoseconds" => 1e-6,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_non_finite_floats_parse_outside_strings_only() {
        let v =
            parse_lenient(r#"{"a": Infinity, "b": "NaN text", "c": [NaN, -Infinity]}"#).unwrap();
        assert_eq!(num(&v, &["a"]), Some(f64::INFINITY));
        assert_eq!(text(&v, &["b"]).as_deref(), Some("NaN text"));
        assert!(as_num(&v["c"][0]).unwrap().is_nan());
        assert_eq!(as_num(&v["c"][1]), Some(f64::NEG_INFINITY));
        assert!(parse_lenient("{\"a\": Inf}").is_err());
    }
}
