//! Writing a run's result files: `summary.json` beside `requests.csv`,
//! `timeseries.csv` and (with pools) `pools.csv`, each written whole through
//! `output`'s atomic rename, the summary last.

use super::RunResult;
use crate::output::{self, write_atomic, write_bytes_atomic, RunIdentity};
use std::fs;
use std::io::Write;
use std::path::Path;

/// `summary.json`: the run's summary (whatever the run reports) and its
/// identity beside it.
#[derive(serde::Serialize)]
struct WithRun<'a, S: serde::Serialize> {
    #[serde(flatten)]
    summary: &'a S,
    run: RunIdentity,
}

/// Writes the three result files into `dir` (created if missing), each
/// through a temporary file renamed into place; `summary.json` goes last, so
/// a summary is only ever beside the records it summarizes. A result may be
/// written more than once: a streamed run's `requests.csv` is then copied
/// from where its rows went.
pub fn write_all(dir: &Path, result: &RunResult) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    // A folder whose summary.json is missing holds no complete run: remove
    // the old one first, write it back last.
    match fs::remove_file(dir.join("summary.json")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    write_requests_file(dir, result)?;
    write_series(dir, result)?;
    match &result.routing_trace {
        Some(t) => write_atomic(&dir.join("routing.csv"), |w| t.write_csv(w))?,
        // A routing.csv beside this summary would be read as this run's.
        None => match fs::remove_file(dir.join("routing.csv")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        },
    }
    let size = |name: &str| fs::metadata(dir.join(name)).map(|m| m.len());
    let with_run = WithRun {
        summary: &result.summary,
        run: RunIdentity {
            scenario_hash: format!("{:016x}", result.scenario_hash),
            seed: result.summary.seed,
            requests_csv_bytes: size("requests.csv")?,
            timeseries_csv_bytes: size("timeseries.csv")?,
            timeseries_rows: result.timeseries.len() as u64,
        },
    };
    let mut json = serde_json::to_string_pretty(&with_run).map_err(std::io::Error::other)?;
    json.push('\n');
    write_bytes_atomic(&dir.join("summary.json"), json.as_bytes())?;
    Ok(())
}

/// `requests.csv`: the streamed file's rest and rename (or, on a later
/// write, a copy of that file), or the whole file from the requests a run
/// kept.
fn write_requests_file(dir: &Path, result: &RunResult) -> std::io::Result<()> {
    result.streamed_requests.write(dir, |path| {
        write_atomic(path, |w| {
            let disagg = result.summary.kv_transfer.is_some();
            let regions: Vec<&str> = result
                .summary
                .regions
                .iter()
                .map(|r| r.name.as_str())
                .collect();
            output::write_requests(w, result.rows(), result.attribution, disagg, &regions)
        })
    })
}

/// `timeseries.csv`, and `pools.csv` when the fleet has pools.
fn write_series(dir: &Path, result: &RunResult) -> std::io::Result<()> {
    write_atomic(&dir.join("timeseries.csv"), |w| write_timeseries(w, result))?;
    if !result.summary.pools.is_empty() {
        let names: Vec<String> = result
            .summary
            .pools
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let roles: Vec<crate::scenario::PoolRole> =
            result.summary.pools.iter().map(|p| p.role_kind).collect();
        write_atomic(&dir.join("pools.csv"), |w| {
            crate::cluster::pool_series::write(w, &result.pool_series, &names, &roles)
        })?;
    }
    Ok(())
}

fn write_timeseries(w: &mut impl Write, result: &RunResult) -> std::io::Result<()> {
    // With a life cycle, each row also carries the tick's replica counts by
    // phase (`lifecycle::FleetSample::COLUMNS`); with `[canary]`, the
    // canary's traffic weight (percent) at the tick.
    let fleet = &result.fleet_series;
    let fleet_columns: &[&str] = if fleet.is_empty() {
        &[]
    } else {
        &crate::lifecycle::FleetSample::COLUMNS
    };
    let canary = result.summary.canary.as_ref();
    writeln!(
        w,
        "{}",
        output::timeseries_header(fleet_columns, canary.is_some())
    )?;
    let mut k = 0;
    let mut line = Vec::with_capacity(128);
    for row in result.timeseries.rows() {
        let row = row?;
        line.clear();
        output::push_timeseries_row(&mut line, &row);
        w.write_all(&line)?;
        if !fleet.is_empty() {
            while k + 1 < fleet.len() && fleet[k].time < row.time {
                k += 1;
            }
            for v in fleet[k].values() {
                write!(w, ",{v}")?;
            }
        }
        if let Some(c) = canary {
            write!(w, ",{}", c.weight_at(row.time))?;
        }
        writeln!(w)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Scenario, Simulation};

    /// A small run (100 requests) whose rows stream into `dir` as its
    /// requests end.
    fn streamed_run(dir: &Path) -> RunResult {
        let s = Scenario::from_toml_str(crate::scenario::tests::MINIMAL, "t.toml").unwrap();
        Simulation::new(&s)
            .stream_records(Some(dir))
            .unwrap()
            .run(|_| {})
            .unwrap()
    }

    #[test]
    fn a_streamed_result_written_again_copies_its_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let (first, second) = (tmp.path().join("a"), tmp.path().join("b"));
        fs::create_dir_all(&first).unwrap();
        let r = streamed_run(&first);
        write_all(&first, &r).unwrap();
        let rows = fs::read(first.join("requests.csv")).unwrap();
        assert_eq!(rows.iter().filter(|&&b| b == b'\n').count(), 101);
        // The same folder again, then another one: the rows stay, and the
        // other folder gets them too, not a file of only the header.
        write_all(&first, &r).unwrap();
        write_all(&second, &r).unwrap();
        for dir in [&first, &second] {
            assert_eq!(fs::read(dir.join("requests.csv")).unwrap(), rows);
            assert!(dir.join("summary.json").is_file());
        }
        // With the first file gone, a further write says where the rows were.
        fs::remove_dir_all(&first).unwrap();
        let e = write_all(&tmp.path().join("c"), &r)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("were streamed to") && e.contains("a/requests.csv"),
            "{e}"
        );
    }
}
