//! Result files that are never half-written, and output folders that one
//! run writes at a time.
//!
//! Every result file is written to a temporary name in its folder and
//! renamed into place once complete (rename within a folder is atomic on
//! POSIX file systems), so a reader, an interrupted run or a crash sees
//! either the previous file or the whole new one, never a cut row. A run
//! holds a lock file (`.servesim.lock`, created with `create_new`, so two
//! runs cannot both create it) on its output folder from before it starts
//! until its files are in place; a second run on the same folder is refused
//! up front with the holder's process id. Creating the lock also proves the
//! folder writable before any simulation time is spent.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Name of the lock file in an output folder.
pub const LOCK_FILE: &str = ".servesim.lock";

/// Writes a file through a temporary name and renames it into place.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temp_name(path);
    let result = (|| {
        let mut w = BufWriter::new(fs::File::create(&tmp)?);
        fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes bytes atomically (see [`write_atomic`]).
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic(path, |w| w.write_all(bytes))
}

/// `name` → `.name.tmp-<pid>` in the same folder (same file system, so the
/// rename is atomic; the pid keeps two writers' temporaries apart).
pub(crate) fn temp_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// A held lock on an output folder; released (the file removed) on drop.
#[derive(Debug)]
pub struct OutputLock {
    path: PathBuf,
    /// The folder did not exist before: a run that wrote nothing leaves none.
    created: Option<PathBuf>,
}

impl OutputLock {
    /// Creates `dir` if needed and takes its lock. Fails when the folder
    /// cannot be created or written, or another live run holds the lock; a
    /// lock left by a process that no longer exists (a killed run) is taken
    /// over.
    pub fn acquire(dir: &Path) -> io::Result<OutputLock> {
        let created = (!dir.exists()).then(|| dir.to_path_buf());
        fs::create_dir_all(dir)?;
        let path = dir.join(LOCK_FILE);
        for _ in 0..2 {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    writeln!(f, "{}", std::process::id())?;
                    discard_interrupted_writes(dir);
                    return Ok(OutputLock { path, created });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let holder = fs::read_to_string(&path).unwrap_or_default();
                    let pid = holder.trim().parse::<u32>().ok();
                    if pid.is_some_and(process_alive) {
                        return Err(io::Error::other(format!(
                            "another servesim run (process {}) is writing this folder; wait for \
                             it or choose another --out (remove {} if that run is gone)",
                            pid.unwrap_or(0),
                            path.display()
                        )));
                    }
                    // A stale lock: its run was killed.
                    let _ = fs::remove_file(&path);
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!(
            "cannot take the lock {}",
            path.display()
        )))
    }
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        if let Some(d) = &self.created {
            // Removes the folder only when empty (a failed run's).
            let _ = fs::remove_dir(d);
        }
    }
}

/// Removes the temporaries of a run that was interrupted (Ctrl-C, killed)
/// mid-write: with the lock held no other run can be writing them, and the
/// files they would have replaced are still whole.
fn discard_interrupted_writes(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.contains(".tmp-") {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Whether a process id is alive (Linux: `/proc/<pid>` exists). Elsewhere
/// every holder counts as alive, the safe answer.
fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.csv");
        write_bytes_atomic(&p, b"old\n").unwrap();
        let e = write_atomic(&p, |w| {
            w.write_all(b"half a ro")?;
            Err(io::Error::other("interrupted"))
        });
        assert!(e.is_err());
        assert_eq!(fs::read_to_string(&p).unwrap(), "old\n");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_second_run_is_refused_while_the_first_holds_the_folder() {
        let d = tempfile::tempdir().unwrap();
        let first = OutputLock::acquire(d.path()).unwrap();
        let e = OutputLock::acquire(d.path()).unwrap_err();
        assert!(e.to_string().contains("another servesim run"), "{e}");
        drop(first);
        OutputLock::acquire(d.path()).unwrap();
    }

    #[test]
    fn an_interrupted_runs_temporaries_are_discarded_by_the_next() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join(LOCK_FILE), format!("{}\n", u32::MAX)).unwrap();
        fs::write(d.path().join(".requests.csv.tmp-4242"), "id,arr").unwrap();
        fs::write(d.path().join("requests.csv"), "whole\n").unwrap();
        let _lock = OutputLock::acquire(d.path()).unwrap();
        assert!(!d.path().join(".requests.csv.tmp-4242").exists());
        assert_eq!(
            fs::read_to_string(d.path().join("requests.csv")).unwrap(),
            "whole\n"
        );
    }

    #[test]
    fn a_stale_lock_is_taken_over() {
        let d = tempfile::tempdir().unwrap();
        // No process has id 0 on Linux... and u32::MAX is beyond pid_max.
        fs::write(d.path().join(LOCK_FILE), format!("{}\n", u32::MAX)).unwrap();
        OutputLock::acquire(d.path()).unwrap();
    }
}
