//! Where a run's `requests.csv` rows are, and how the file is written from
//! there, once or again: the rows the run kept, or the file the run
//! streamed while it went (finished on the first write, copied on a later
//! one).

use super::{write_atomic, RequestsCsv};
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Mutex;

/// Where a run's `requests.csv` rows are. A streamed run writes its rows
/// while it goes and holds none, so a second write of its result copies the
/// finished file rather than writing a file of only its header.
#[derive(Default)]
pub enum StreamedRows {
    /// The run kept its requests (`RunResult::requests`).
    #[default]
    Kept,
    /// Written while the run went; only the rest and the rename are left.
    Pending(RequestsCsv),
    /// Finished at this path by an earlier write.
    Written(std::path::PathBuf),
    /// An earlier write failed part-way, and the rows went with it.
    Lost,
}

/// A run's `requests.csv` rows as the run left them ([`StreamedRows`]),
/// behind a lock because writing the result files takes them from a shared
/// result.
#[derive(Default)]
pub struct RequestRows(Mutex<StreamedRows>);

impl RequestRows {
    /// The rows of a run that streamed them to `csv`, or (`None`) kept them.
    pub fn new(csv: Option<RequestsCsv>) -> RequestRows {
        RequestRows(Mutex::new(match csv {
            Some(csv) => StreamedRows::Pending(csv),
            None => StreamedRows::Kept,
        }))
    }

    /// `dir/requests.csv`: the streamed file's rest and rename (or, on a
    /// later write, a copy of that file), or, for rows the run kept, the
    /// file `write_kept` writes at the path it is given.
    pub fn write(
        &self,
        dir: &Path,
        write_kept: impl FnOnce(&Path) -> io::Result<()>,
    ) -> io::Result<()> {
        let path = dir.join("requests.csv");
        let mut rows = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &*rows {
            StreamedRows::Kept => {
                drop(rows);
                write_kept(&path)
            }
            StreamedRows::Pending(_) => {
                let StreamedRows::Pending(csv) = std::mem::replace(&mut *rows, StreamedRows::Lost)
                else {
                    unreachable!("matched as pending")
                };
                csv.finish(dir)?;
                *rows = StreamedRows::Written(path);
                Ok(())
            }
            StreamedRows::Written(first) => copy_rows(first, &path),
            StreamedRows::Lost => Err(io::Error::other(format!(
                "{}: this run's rows were streamed to a file whose writing failed; run again",
                path.display()
            ))),
        }
    }
}

/// A streamed run's finished `requests.csv` at `first`, copied to `path`
/// unless that is the same file.
fn copy_rows(first: &Path, path: &Path) -> io::Result<()> {
    if let (Ok(a), Ok(b)) = (fs::canonicalize(first), fs::canonicalize(path)) {
        if a == b {
            return Ok(());
        }
    }
    fs::File::open(first)
        .and_then(|mut src| write_atomic(path, |w| io::copy(&mut src, w).map(drop)))
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "{}: this run's rows were streamed to {} and cannot be copied: {e}",
                    path.display(),
                    first.display()
                ),
            )
        })
}
