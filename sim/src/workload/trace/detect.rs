//! Which trace format a file is in, read from the file itself: a CSV
//! header's columns, a JSON-lines record's keys, a folder's files, and the
//! extension where the content leaves a choice. `servesim trace stats`
//! uses it when no `--format` is given.

use crate::scenario::TraceFormat;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Bytes of the first record read at most (a record longer than this is
/// no trace's header).
const FIRST_RECORD_MAX: u64 = 1 << 20;

/// A detected format and what decided it (for the user to check).
#[derive(Clone, Debug, PartialEq)]
pub struct Detected {
    pub format: TraceFormat,
    pub because: String,
}

/// Columns (CSV) or keys (JSON lines) that name a built-in format: every
/// one of them must be present.
const CSV_FORMATS: &[(TraceFormat, &[&str])] = &[
    (
        TraceFormat::Azure,
        &["TIMESTAMP", "ContextTokens", "GeneratedTokens"],
    ),
    (
        TraceFormat::Burstgpt,
        &["Timestamp", "Model", "Request tokens", "Response tokens"],
    ),
    (
        TraceFormat::Requests,
        &["id", "arrival_s", "prompt_tokens", "output_tokens"],
    ),
];

const JSON_FORMATS: &[(TraceFormat, &[&str])] = &[
    (
        TraceFormat::Bailian,
        &[
            "chat_id",
            "parent_chat_id",
            "timestamp",
            "input_length",
            "output_length",
        ],
    ),
    (
        TraceFormat::Ragpulse,
        &[
            "timestamp",
            "input_length",
            "output_length",
            "hash_ids",
            "session_id",
        ],
    ),
    (
        TraceFormat::Mooncake,
        &["timestamp", "input_length", "output_length"],
    ),
];

fn names() -> String {
    TraceFormat::ALL
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The format of the trace at `path`. `columns` says whether a column
/// mapping was given, which makes an unrecognised CSV or JSON-lines file
/// the generic `csv` or `jsonl`. The error lists the formats.
pub fn detect(path: &Path, columns: bool) -> Result<Detected, String> {
    let shown = path.display();
    let choose = format!("give --format (one of: {})", names());
    if path.is_dir() {
        if path.join("0_trace.jsonl").is_file() {
            return Ok(Detected {
                format: TraceFormat::Ragpulse,
                because: "a folder with 0_trace.jsonl (give the file itself as well)".into(),
            });
        }
        let servegen = std::fs::read_dir(path)
            .map_err(|e| format!("{shown}: cannot read the folder: {e}"))?
            .filter_map(Result::ok)
            .any(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.starts_with("chunk-")
                    && (n.ends_with("-trace.csv") || n.ends_with("-dataset.json"))
            });
        if servegen {
            return Ok(Detected {
                format: TraceFormat::Servegen,
                because: "a folder of ServeGen chunk-N-trace.csv / chunk-N-dataset.json files"
                    .into(),
            });
        }
        return Err(format!(
            "{shown}: a folder holding neither ServeGen chunk-N files nor RAGPulse's 0_trace.jsonl, so its format is not known; {choose}"
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let mut first = Vec::new();
    let mut r = BufReader::new(file.take(FIRST_RECORD_MAX));
    loop {
        first.clear();
        let n = r
            .read_until(b'\n', &mut first)
            .map_err(|e| format!("{shown}: cannot read: {e}"))?;
        if n == 0 || !first.trim_ascii().is_empty() {
            break;
        }
    }
    if first.starts_with(b"\xEF\xBB\xBF") {
        first.drain(..3);
    }
    let first = String::from_utf8_lossy(first.trim_ascii()).into_owned();
    if first.is_empty() {
        return Err(format!(
            "{shown}: empty, so its format cannot be read from it; {choose}"
        ));
    }
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if first.starts_with('{') {
        let keys: Vec<String> = match serde_json::from_str::<serde_json::Value>(&first) {
            Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
            _ => {
                return Err(format!(
                    "{shown}: line 1 starts like JSON but is not a JSON object; {choose}"
                ))
            }
        };
        return by_names(
            &shown.to_string(),
            "keys",
            &keys,
            JSON_FORMATS,
            columns,
            TraceFormat::Jsonl,
            &choose,
        );
    }
    if ext == "jsonl" || ext == "json" {
        return Err(format!(
            "{shown}: a .{ext} file whose line 1 is not a JSON object; {choose}"
        ));
    }
    let header: Vec<String> = first
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_string())
        .collect();
    if header.len() < 2 {
        return Err(format!(
            "{shown}: line 1 is neither a CSV header nor a JSON object; {choose}"
        ));
    }
    by_names(
        &shown.to_string(),
        "columns",
        &header,
        CSV_FORMATS,
        columns,
        TraceFormat::Csv,
        &choose,
    )
}

fn by_names(
    shown: &str,
    what: &str,
    names: &[String],
    formats: &[(TraceFormat, &[&str])],
    columns: bool,
    generic: TraceFormat,
    choose: &str,
) -> Result<Detected, String> {
    let has = |n: &str| names.iter().any(|x| x == n);
    // The first whose names are all present: the lists run from the most
    // specific (Bailian's chat ids) to the least (Mooncake's three keys).
    if let Some((f, need)) = formats.iter().find(|(_, need)| need.iter().all(|n| has(n))) {
        return Ok(Detected {
            format: *f,
            because: format!("{what} {}", need.join(", ")),
        });
    }
    if columns {
        return Ok(Detected {
            format: generic,
            because: format!("{what} of no built-in format, with --columns"),
        });
    }
    let listed: Vec<&str> = names.iter().take(12).map(String::as_str).collect();
    Err(format!(
        "{shown}: {what} {} match no built-in format; {choose}, or --format {} with --columns arrival=...,prompt=...,output=...",
        listed.join(", "),
        generic.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios/traces")
            .join(name)
    }

    #[test]
    fn the_sample_traces_are_recognised_by_their_headers() {
        for (file, format) in [
            ("azure_sample.csv", TraceFormat::Azure),
            ("azure_conv_sample.csv", TraceFormat::Azure),
            ("burstgpt_sample.csv", TraceFormat::Burstgpt),
            ("requests_sample.csv", TraceFormat::Requests),
            ("mooncake_sample.jsonl", TraceFormat::Mooncake),
            ("bailian_sample.jsonl", TraceFormat::Bailian),
            ("ragpulse/0_trace.jsonl", TraceFormat::Ragpulse),
            ("servegen", TraceFormat::Servegen),
        ] {
            let d = detect(&at(file), false).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(d.format, format, "{file}: {}", d.because);
        }
        let d = detect(&at("azure_sample.csv"), false).unwrap();
        assert_eq!(
            d.because,
            "columns TIMESTAMP, ContextTokens, GeneratedTokens"
        );
    }

    #[test]
    fn a_generic_file_needs_columns_and_an_unknown_one_lists_the_formats() {
        assert_eq!(
            detect(&at("generic_sample.csv"), true).unwrap().format,
            TraceFormat::Csv
        );
        assert_eq!(
            detect(&at("generic_sample.jsonl"), true).unwrap().format,
            TraceFormat::Jsonl
        );
        let e = detect(&at("generic_sample.csv"), false).unwrap_err();
        assert!(
            e.ends_with("generic_sample.csv: columns ts_ms, user, in_tokens, out_tokens, blocks match no built-in format; give --format (one of: azure, burstgpt, mooncake, bailian, ragpulse, servegen, csv, jsonl, requests), or --format csv with --columns arrival=...,prompt=...,output=..."),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("t.csv");
        std::fs::write(&empty, "\n\n").unwrap();
        assert!(detect(&empty, false).unwrap_err().contains("empty"));
        let e = detect(dir.path(), false).unwrap_err();
        assert!(e.contains("give --format (one of: azure,"), "{e}");
    }
}
