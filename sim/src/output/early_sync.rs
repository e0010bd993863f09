//! Writeback of a long file started while it is still being written.
//!
//! `requests.csv` is synced before it is renamed into place (`atomic`), so
//! that a crash never leaves a renamed file with rows missing. Linux keeps
//! freshly written pages in memory until they are 30 s old
//! (`vm.dirty_expire_centisecs`) or a tenth of memory is dirty, so a run
//! that writes its 2 GB file in half a minute left nearly all of it to that
//! last sync: 1–2 s of a 10 M-request run's 31 s spent waiting for the disk
//! after the simulation ended. Here a helper thread syncs the file's data
//! every [`EarlySync::EVERY`] bytes written, while the run goes on, so the
//! last sync finds little left to write. The file's bytes are the same; the
//! last sync still reports any error.

use std::fs::File;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// The helper syncing a file as it is written; inert until the first
/// [`Self::EVERY`] bytes (small files never start a thread).
#[derive(Debug, Default)]
pub(crate) struct EarlySync {
    /// Bytes written since the last sync was asked for.
    since: u64,
    /// Asks the helper for a sync (`None` until it starts, or when it
    /// could not).
    tx: Option<mpsc::SyncSender<()>>,
    handle: Option<JoinHandle<()>>,
    /// The helper could not start: the last sync does everything.
    failed: bool,
}

impl EarlySync {
    /// Bytes written between two syncs.
    pub(crate) const EVERY: u64 = 64 << 20;

    /// `file` has `bytes` more written to it.
    #[inline]
    pub(crate) fn wrote(&mut self, file: &File, bytes: usize) {
        self.since += bytes as u64;
        if self.since >= Self::EVERY {
            self.since = 0;
            self.ask(file);
        }
    }

    #[cold]
    fn ask(&mut self, file: &File) {
        if self.tx.is_none() && !self.failed {
            self.start(file);
        }
        if let Some(tx) = &self.tx {
            // A sync already waiting covers this one too.
            let _ = tx.try_send(());
        }
    }

    fn start(&mut self, file: &File) {
        let Ok(clone) = file.try_clone() else {
            self.failed = true;
            return;
        };
        let (tx, rx) = mpsc::sync_channel::<()>(1);
        let spawned = std::thread::Builder::new()
            .name("servesim-sync".into())
            .spawn(move || {
                for () in rx {
                    // An error here shows again at the last sync, which
                    // reports it.
                    let _ = clone.sync_data();
                }
            });
        match spawned {
            Ok(h) => {
                self.tx = Some(tx);
                self.handle = Some(h);
            }
            Err(_) => self.failed = true,
        }
    }

    /// Waits for the helper's sync in progress, if any (before the last
    /// sync, or before the file is removed).
    pub(crate) fn finish(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }

    /// Whether the helper thread started.
    #[cfg(test)]
    fn started(&self) -> bool {
        self.handle.is_some()
    }
}

impl Drop for EarlySync {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn starts_only_past_its_threshold_and_leaves_the_bytes_alone() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        let mut f = File::create(&path).expect("file");
        let mut s = EarlySync::default();
        let chunk = vec![b'x'; 1 << 20];
        let mut written = 0u64;
        while written + (chunk.len() as u64) < EarlySync::EVERY {
            f.write_all(&chunk).expect("write");
            s.wrote(&f, chunk.len());
            written += chunk.len() as u64;
        }
        assert!(!s.started(), "a thread before {} bytes", EarlySync::EVERY);
        for _ in 0..3 {
            f.write_all(&chunk).expect("write");
            s.wrote(&f, chunk.len());
            written += chunk.len() as u64;
        }
        assert!(s.started());
        s.finish();
        f.sync_all().expect("sync");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), written);
    }
}
