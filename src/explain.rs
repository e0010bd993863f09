//! `servesim explain DIR [--json] [--request ID]`: prints the analysis of
//! `reports::explain` for a result folder.

use anyhow::{anyhow, Result};
use reports::explain;
use std::path::Path;

pub fn run(dir: &Path, json: bool, request: Option<u64>) -> Result<()> {
    // A sweep's folder stands for the run of its operating point.
    let (dir, note) = explain::run_dir(dir).map_err(|e| anyhow!(e))?;
    if let Some(n) = note {
        eprintln!("{n}");
    }
    let dir = dir.as_path();
    match request {
        Some(id) => {
            let run = explain::Run::load(dir).map_err(|e| anyhow!(e))?;
            let t = explain::request(&run, id).ok_or_else(|| {
                anyhow!(
                    "{}: no request with id {id} (ids run from 0 to {})",
                    dir.join("requests.csv").display(),
                    run.rows.len().saturating_sub(1)
                )
            })?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&t)?);
            } else {
                outln!("{}", explain::render_request(&t).trim_end());
            }
        }
        None => {
            let e = explain::explain(dir).map_err(|e| anyhow!(e))?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&e)?);
            } else {
                outln!("{}", explain::render(&e).trim_end());
            }
        }
    }
    Ok(())
}
