//! Result files that are never half-written, and output folders that one
//! run writes at a time.
//!
//! Every result file is written to a temporary name in its folder and
//! renamed into place once complete (rename within a folder is atomic on
//! POSIX file systems), so a reader, an interrupted run or a crash sees
//! either the previous file or the whole new one, never a cut row. A run
//! holds an advisory lock on its output folder (on `.servesim.lock`) from
//! before it starts until its files are in place; a second run on the same
//! folder is refused up front with the holder's process id. Creating the
//! lock file also proves the folder writable before any simulation time is
//! spent.

use fs4::{FileExt, TryLockError};
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

/// A run's exclusive hold on its output folder: an advisory lock (`flock`
/// on Unix, `LockFileEx` on Windows) on `.servesim.lock`, which holds the
/// holder's process id for the error a second run prints. The kernel
/// releases the lock when the process ends, however it ends, so a killed
/// run leaves nothing that blocks the next. Dropping it removes the file
/// and, when the run created the folder and wrote nothing, the folder.
#[derive(Debug)]
pub struct OutputLock {
    /// The open lock file; closing it releases the lock.
    file: Option<fs::File>,
    path: PathBuf,
    /// The folder did not exist before: a run that wrote nothing leaves none.
    created: Option<PathBuf>,
}

impl OutputLock {
    /// Creates `dir` if needed and takes its lock. Fails when the folder
    /// cannot be created or written, or another run holds the lock.
    pub fn acquire(dir: &Path) -> io::Result<OutputLock> {
        let created = (!dir.exists()).then(|| dir.to_path_buf());
        fs::create_dir_all(dir)?;
        let path = dir.join(LOCK_FILE);
        // A releasing run removes the file while it still holds the lock, so
        // a lock taken on a file that is no longer at `path` is on a name
        // nobody else sees: open the new one and lock again.
        for _ in 0..8 {
            let mut file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            // Through the trait: newer std has inherent `File::try_lock`.
            match FileExt::try_lock(&file) {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Err(held_by_another(&path)),
                Err(TryLockError::Error(e)) => return Err(e),
            }
            if !still_named(&file, &path)? {
                continue;
            }
            file.set_len(0)?;
            writeln!(file, "{}", std::process::id())?;
            discard_interrupted_writes(dir);
            return Ok(OutputLock {
                file: Some(file),
                path,
                created,
            });
        }
        Err(io::Error::other(format!(
            "cannot take the lock {}: other runs keep replacing it",
            path.display()
        )))
    }
}

/// The error for a folder another run holds, with its process id when the
/// lock file can be read (not on Windows, whose locks are mandatory).
fn held_by_another(path: &Path) -> io::Error {
    let pid = fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let who = match pid {
        Some(pid) => format!("another servesim run (process {pid})"),
        None => "another servesim run".to_string(),
    };
    io::Error::other(format!(
        "{who} is writing this folder; wait for it or choose another --out"
    ))
}

/// Whether `path` still names the open `file` (Unix: same device and inode).
#[cfg(unix)]
fn still_named(file: &fs::File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let open = file.metadata()?;
    match fs::metadata(path) {
        Ok(named) => Ok(open.dev() == named.dev() && open.ino() == named.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Elsewhere an open file cannot be removed, so the name is always its own.
#[cfg(not(unix))]
fn still_named(_: &fs::File, _: &Path) -> io::Result<bool> {
    Ok(true)
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // Removed before the lock is released, so that no run locks a file
        // that is about to disappear (see `acquire`).
        let removed = fs::remove_file(&self.path).is_ok();
        drop(self.file.take());
        if !removed {
            // Where an open file cannot be removed (Windows).
            let _ = fs::remove_file(&self.path);
        }
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
        let me = format!("another servesim run (process {})", std::process::id());
        assert!(e.to_string().contains(&me), "{e}");
        drop(first);
        assert!(!d.path().join(LOCK_FILE).exists());
        OutputLock::acquire(d.path()).unwrap();
    }

    #[test]
    fn an_interrupted_runs_temporaries_are_discarded_by_the_next() {
        let d = tempfile::tempdir().unwrap();
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
    fn a_lock_file_left_by_a_killed_run_does_not_block() {
        let d = tempfile::tempdir().unwrap();
        // A killed run's file, naming a live process (this one): nobody
        // holds its lock, so it is taken over whatever pid it names.
        fs::write(
            d.path().join(LOCK_FILE),
            format!("{}\n", std::process::id()),
        )
        .unwrap();
        let _lock = OutputLock::acquire(d.path()).unwrap();
        let pid = fs::read_to_string(d.path().join(LOCK_FILE)).unwrap();
        assert_eq!(pid, format!("{}\n", std::process::id()));
    }

    #[test]
    fn a_folder_the_run_created_and_left_empty_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("new");
        drop(OutputLock::acquire(&out).unwrap());
        assert!(!out.exists());
        let lock = OutputLock::acquire(&out).unwrap();
        write_bytes_atomic(&out.join("a.csv"), b"x\n").unwrap();
        drop(lock);
        let names: Vec<_> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.csv"]);
    }
}
