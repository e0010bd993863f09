//! Reading a run's result files for charts: `requests.csv` and
//! `timeseries.csv` by column name (so added columns are harmless), and the
//! summary as JSON.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// A CSV file as named columns of text.
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<csv::StringRecord>,
}

impl Table {
    pub fn read(path: &Path) -> Result<Table, String> {
        // A folder, FIFO or device in a result file's place is said to be
        // one (a FIFO would block the open).
        sim::input_file::check_regular(path, "result file", sim::input_file::RESULT_MAX_BYTES)
            .map_err(|e| e.to_string())?;
        let mut r = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let header = r
            .headers()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .iter()
            .map(str::to_string)
            .collect();
        let rows = r
            .records()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let t = Table { header, rows };
        t.refuse_non_finite(path)?;
        Ok(t)
    }

    /// `requests.csv` with its rows in arrival (`id`) order: the file lists
    /// them as their requests ended, and a report's sums and ties should not
    /// depend on that.
    pub fn read_requests(path: &Path) -> Result<Table, String> {
        let mut t = Table::read(path)?;
        t.check_request_columns(path)?;
        t.check_request_rows(path)?;
        if let Some(id) = t.col("id") {
            t.rows
                .sort_by_cached_key(|r| r.get(id).and_then(|c| c.parse::<u64>().ok()));
        }
        Ok(t)
    }

    /// A result file never holds NaN or an infinity (an absent value is an
    /// empty cell): such a cell is a damaged or foreign file, and would
    /// poison every statistic read from it.
    fn refuse_non_finite(&self, path: &Path) -> Result<(), String> {
        for (line, r) in self.rows.iter().enumerate() {
            for (i, c) in r.iter().enumerate() {
                if c.parse::<f64>().is_ok_and(|v| !v.is_finite()) {
                    return Err(format!(
                        "{}: line {}: column `{}` holds {c:?}, which servesim never writes: the \
                         file is damaged or not a run's",
                        path.display(),
                        line + 2,
                        self.header.get(i).map_or("?", String::as_str)
                    ));
                }
            }
        }
        Ok(())
    }

    /// A `requests.csv` header lists the columns servesim writes in the
    /// order it writes them (`sim::output::REQUEST_COLUMNS`; unknown ones
    /// from a newer version are skipped): two names swapped, or one twice,
    /// would have every figure read from the wrong column.
    fn check_request_columns(&self, path: &Path) -> Result<(), String> {
        let cols = &sim::output::REQUEST_COLUMNS;
        let mut last: Option<(usize, &str)> = None;
        for h in &self.header {
            let Some(k) = cols.iter().position(|c| c == h) else {
                continue;
            };
            if let Some((j, prev)) = last {
                if k <= j {
                    return Err(format!(
                        "{}: header: column `{h}` comes after `{prev}`, but servesim writes {}: the header was edited or the file is not a run's",
                        path.display(),
                        if k == j {
                            format!("`{h}` once")
                        } else {
                            format!("`{h}` before `{prev}`")
                        }
                    ));
                }
            }
            last = Some((k, h));
        }
        Ok(())
    }

    /// The invariants of every `requests.csv` row: latencies are not
    /// negative, the first token comes before the last (TTFT ≤ E2E) and
    /// after admission (queue wait ≤ TTFT), and a row's latency components
    /// add up to its E2E latency (to the microsecond: each is written with
    /// six decimals of a millisecond from integer nanoseconds).
    fn check_request_rows(&self, path: &Path) -> Result<(), String> {
        let ms_cols: Vec<(usize, &str)> = self
            .header
            .iter()
            .enumerate()
            .filter(|(_, h)| h.ends_with("_ms") || h.as_str() == "arrival_s")
            .map(|(i, h)| (i, h.as_str()))
            .collect();
        let comps: Option<Vec<usize>> = sim::attribution::COLUMNS
            .iter()
            .map(|c| self.col(c))
            .collect();
        let (ttft, e2e, qw) = (
            self.col("ttft_ms"),
            self.col("e2e_ms"),
            self.col("queue_wait_ms"),
        );
        for (line, r) in self.rows.iter().enumerate() {
            let at = |i: Option<usize>| {
                i.and_then(|i| r.get(i))
                    .filter(|c| !c.is_empty())
                    .and_then(|c| c.parse::<f64>().ok())
            };
            let bad = |m: String| {
                format!(
                    "{}: line {}: {m}: the file was edited or damaged; rerun the command that wrote it",
                    path.display(),
                    line + 2
                )
            };
            for &(i, h) in &ms_cols {
                if let Some(v) = at(Some(i)) {
                    if v < 0.0 {
                        return Err(bad(format!("`{h}` is negative ({v})")));
                    }
                }
            }
            if let (Some(t), Some(e)) = (at(ttft), at(e2e)) {
                if t > e + 1e-6 {
                    return Err(bad(format!(
                        "`ttft_ms` {t} is after `e2e_ms` {e} (the first token cannot come after the last)"
                    )));
                }
            }
            if let (Some(q), Some(t)) = (at(qw), at(ttft)) {
                if q > t + 1e-6 {
                    return Err(bad(format!(
                        "`queue_wait_ms` {q} is longer than `ttft_ms` {t}"
                    )));
                }
            }
            if let (Some(cols), Some(e)) = (&comps, at(e2e)) {
                let parts: Option<Vec<f64>> = cols.iter().map(|&i| at(Some(i))).collect();
                if let Some(parts) = parts {
                    let sum: f64 = parts.iter().sum();
                    if (sum - e).abs() > 1e-3 {
                        return Err(bad(format!(
                            "the latency components (`attr_*_ms`) add up to {sum:.6} ms, not its `e2e_ms` {e}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    pub fn col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }
}

/// Checks that `dir/name` (`requests.csv`, `timeseries.csv`) is the file
/// its `summary.json` was written beside: the summary's `run` block records
/// each file's size. A folder without the block (an older servesim) is
/// taken as it is.
pub fn check_belongs(dir: &Path, name: &str) -> Result<(), String> {
    let summary = dir.join("summary.json");
    let file = dir.join(name);
    if !summary.exists() || !file.exists() {
        return Ok(());
    }
    // A folder or FIFO in the file's place is that, not another run's file.
    sim::input_file::check_file_type(&file, "result file").map_err(|e| e.to_string())?;
    let s = read_json(&summary)?;
    let key = match name {
        "requests.csv" => "requests_csv_bytes",
        "timeseries.csv" => "timeseries_csv_bytes",
        _ => return Ok(()),
    };
    let Some(want) = s
        .get("run")
        .and_then(|r| r.get(key))
        .and_then(Value::as_u64)
    else {
        return Ok(());
    };
    let got = std::fs::metadata(&file)
        .map_err(|e| format!("{}: {e}", file.display()))?
        .len();
    if got != want {
        return Err(format!(
            "{}: {got} bytes, but the run in {} (scenario {}, seed {}, hash {}) wrote {want}: \
             the file belongs to another run; put back its own or rerun `servesim simulate`",
            file.display(),
            summary.display(),
            text(&s, "scenario"),
            text(&s, "seed"),
            text(&s, "run.scenario_hash"),
        ));
    }
    Ok(())
}

/// Reads a JSON file (a `summary.json`).
pub fn read_json(path: &Path) -> Result<Value, String> {
    let text = sim::input_file::read_result(path, "result file").map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}

/// The number at a dotted path of a JSON tree.
pub fn num(v: &Value, path: &str) -> Option<f64> {
    path.split('.')
        .try_fold(v, |v, seg| v.get(seg))
        .and_then(Value::as_f64)
}

/// The string at a dotted path of a JSON tree ("" when absent).
pub fn text(v: &Value, path: &str) -> String {
    path.split('.')
        .try_fold(v, |v, seg| v.get(seg))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

/// One sampling tick of `timeseries.csv`: per-replica rows gathered.
pub struct Tick {
    pub time_s: f64,
    pub waiting: Vec<f64>,
    pub running: Vec<f64>,
    pub kv_util: Vec<f64>,
    /// Columns beyond the per-replica ones (e.g. an autoscaler's
    /// `replicas_requested`), the largest value on the tick's rows.
    pub extra: BTreeMap<String, f64>,
}

/// Columns of `timeseries.csv` read per replica; any other numeric column is
/// kept in [`Tick::extra`].
const PER_REPLICA: [&str; 6] = [
    "time_s",
    "replica",
    "waiting",
    "running",
    "kv_blocks_used",
    "kv_util",
];

/// Groups `timeseries.csv` rows by tick (rows of one tick are consecutive).
pub fn ticks(t: &Table) -> Result<Vec<Tick>, String> {
    let need = |c: &str| {
        t.col(c)
            .ok_or_else(|| format!("timeseries.csv has no `{c}` column"))
    };
    let (ti, wi, ri, ki) = (
        need("time_s")?,
        need("waiting")?,
        need("running")?,
        need("kv_util")?,
    );
    let extras: Vec<(usize, &String)> = t
        .header
        .iter()
        .enumerate()
        .filter(|(_, h)| !PER_REPLICA.contains(&h.as_str()))
        .collect();
    let f = |r: &csv::StringRecord, i: usize| r.get(i).and_then(|c| c.parse::<f64>().ok());
    let mut out: Vec<Tick> = Vec::new();
    let mut last_time: Option<String> = None;
    for r in &t.rows {
        let time = r.get(ti).unwrap_or_default();
        if last_time.as_deref() != Some(time) {
            out.push(Tick {
                time_s: time.parse().unwrap_or(0.0),
                waiting: Vec::new(),
                running: Vec::new(),
                kv_util: Vec::new(),
                extra: BTreeMap::new(),
            });
            last_time = Some(time.to_string());
        }
        let tick = out.last_mut().expect("pushed above");
        tick.waiting.push(f(r, wi).unwrap_or(0.0));
        tick.running.push(f(r, ri).unwrap_or(0.0));
        tick.kv_util.push(f(r, ki).unwrap_or(0.0));
        for &(i, name) in &extras {
            if let Some(v) = f(r, i) {
                let e = tick.extra.entry(name.clone()).or_insert(v);
                *e = e.max(v);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_group_replica_rows_and_keep_extra_columns() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ts.csv");
        std::fs::write(
            &p,
            "time_s,replica,waiting,running,kv_blocks_used,kv_util,replicas_requested\n\
             0.000,0,1,2,10,0.1000,3\n0.000,1,3,4,20,0.2000,3\n1.000,0,0,5,30,0.3000,4\n1.000,1,0,6,40,0.4000,4\n",
        )
        .unwrap();
        let t = Table::read(&p).unwrap();
        let ticks = ticks(&t).unwrap();
        assert_eq!(ticks.len(), 2);
        assert_eq!(ticks[0].waiting, [1.0, 3.0]);
        assert_eq!(ticks[1].running, [5.0, 6.0]);
        assert_eq!(ticks[1].time_s, 1.0);
        assert_eq!(ticks[1].extra["replicas_requested"], 4.0);
        assert!(!ticks[0].extra.contains_key("replica"));
        assert_eq!(t.col("kv_util"), Some(5));
        assert_eq!(t.col("nope"), None);
    }
}
