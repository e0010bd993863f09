//! Reading what `explain` needs from a result folder: the per-request rows of
//! `requests.csv` with their latency components (exact nanoseconds), and the
//! per-replica samples of `timeseries.csv`.

use crate::data::Table;
use sim::attribution::{Component, COLUMNS, N_COMPONENTS};
use std::path::Path;

/// One request as `requests.csv` records it.
#[derive(Clone, Debug)]
pub struct Row {
    pub id: u64,
    pub arrival_ns: u64,
    pub replica: Option<u32>,
    pub status: String,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    pub preemptions: u64,
    pub queue_wait_ns: Option<u64>,
    pub ttft_ns: Option<u64>,
    pub e2e_ns: Option<u64>,
    /// Components, ns; `None` where the run did not record them.
    pub comps: Option<[u64; N_COMPONENTS]>,
}

impl Row {
    pub fn get(&self, c: Component) -> u64 {
        self.comps.map_or(0, |a| a[c as usize])
    }

    /// The components of TTFT sum (0 without components).
    pub fn ttft_parts(&self) -> u64 {
        Component::ALL
            .iter()
            .filter(|c| c.before_first_token())
            .map(|&c| self.get(c))
            .sum()
    }

    /// Whether every component is known (the pre-first-token ones at least).
    pub fn attributed(&self) -> bool {
        self.comps.is_some()
    }
}

/// Parses a decimal number of milliseconds ("12.345678") into nanoseconds,
/// exactly for up to six decimals.
pub fn ms_to_ns(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let int: u64 = int.parse().ok()?;
    let mut f: String = frac.chars().take(6).collect();
    if !f.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    while f.len() < 6 {
        f.push('0');
    }
    Some(int * 1_000_000 + f.parse::<u64>().ok()?)
}

/// Reads `requests.csv`. Errors name the file, the line and the column.
pub fn requests(path: &Path) -> Result<Vec<Row>, String> {
    let t = Table::read_requests(path)?;
    let need = |c: &str| {
        t.col(c)
            .ok_or_else(|| format!("{}: no `{c}` column", path.display()))
    };
    let id = need("id")?;
    let arrival = need("arrival_s")?;
    let replica = need("replica")?;
    let status = need("status")?;
    let prompt = need("prompt_tokens")?;
    let output = need("output_tokens")?;
    let pre = need("preemptions")?;
    let qw = need("queue_wait_ms")?;
    let ttft = need("ttft_ms")?;
    let e2e = need("e2e_ms")?;
    let comp_cols: Option<Vec<usize>> = COLUMNS.iter().map(|c| t.col(c)).collect();
    let mut rows = Vec::with_capacity(t.rows.len());
    for (line, r) in t.rows.iter().enumerate() {
        let cell = |i: usize| r.get(i).unwrap_or("");
        let bad = |col: &str| {
            format!(
                "{}: line {}: column `{col}` is not a number: {:?}",
                path.display(),
                line + 2,
                r.get(t.col(col).unwrap_or(0)).unwrap_or("")
            )
        };
        let uint = |i: usize, col: &str| cell(i).parse::<u64>().map_err(|_| bad(col));
        let opt_ms = |i: usize, col: &str| -> Result<Option<u64>, String> {
            if cell(i).is_empty() {
                Ok(None)
            } else {
                ms_to_ns(cell(i)).map(Some).ok_or_else(|| bad(col))
            }
        };
        let arrival_s: f64 = cell(arrival).parse().map_err(|_| bad("arrival_s"))?;
        let comps = match &comp_cols {
            Some(cols) if !cell(cols[0]).is_empty() => {
                let mut a = [0u64; N_COMPONENTS];
                for (k, &i) in cols.iter().enumerate() {
                    a[k] = opt_ms(i, COLUMNS[k])?.unwrap_or(0);
                }
                Some(a)
            }
            _ => None,
        };
        rows.push(Row {
            id: uint(id, "id")?,
            arrival_ns: (arrival_s * 1e9).round() as u64,
            replica: cell(replica).parse().ok(),
            status: cell(status).to_string(),
            prompt_tokens: uint(prompt, "prompt_tokens")?,
            output_tokens: uint(output, "output_tokens")?,
            preemptions: uint(pre, "preemptions")?,
            queue_wait_ns: opt_ms(qw, "queue_wait_ms")?,
            ttft_ns: opt_ms(ttft, "ttft_ms")?,
            e2e_ns: opt_ms(e2e, "e2e_ms")?,
            comps,
        });
    }
    // The file lists rows as their requests ended; the analysis takes them
    // in arrival (id) order, so that its sums and ties do not depend on it.
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// One replica's sample of `timeseries.csv`.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub time_s: f64,
    pub waiting: f64,
    pub running: f64,
    pub kv_util: f64,
}

/// Samples of `timeseries.csv` per replica (index = replica id), in time order.
pub fn samples(path: &Path) -> Result<Vec<Vec<Sample>>, String> {
    let t = Table::read(path)?;
    let need = |c: &str| {
        t.col(c)
            .ok_or_else(|| format!("{}: no `{c}` column", path.display()))
    };
    let (ti, ri, wi, ru, ki) = (
        need("time_s")?,
        need("replica")?,
        need("waiting")?,
        need("running")?,
        need("kv_util")?,
    );
    let mut out: Vec<Vec<Sample>> = Vec::new();
    for r in &t.rows {
        let f = |i: usize| r.get(i).and_then(|c| c.parse::<f64>().ok()).unwrap_or(0.0);
        let Some(rep) = r.get(ri).and_then(|c| c.parse::<usize>().ok()) else {
            continue;
        };
        if out.len() <= rep {
            out.resize(rep + 1, Vec::new());
        }
        out[rep].push(Sample {
            time_s: f(ti),
            waiting: f(wi),
            running: f(ru),
            kv_util: f(ki),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_parse_to_exact_nanoseconds() {
        assert_eq!(ms_to_ns("12.345678"), Some(12_345_678));
        assert_eq!(ms_to_ns("0.5"), Some(500_000));
        assert_eq!(ms_to_ns("7"), Some(7_000_000));
        assert_eq!(ms_to_ns(""), None);
        assert_eq!(ms_to_ns("x.1"), None);
        assert_eq!(ms_to_ns("1.2e3"), None);
    }
}
