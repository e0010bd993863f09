//! Reading a user's input file whole (a scenario, a grid or plan space, a
//! profile, a result file) in bounded time and memory.
//!
//! The file's type is checked from its metadata before it is opened: a FIFO
//! with no writer would block the open itself, and a device (`/dev/zero`)
//! or a growing pipe has no end, so only regular files are read. Its size
//! is checked against a cap for its kind before reading, and the read
//! itself stops one byte past the cap, so a file that grows while it is
//! read is refused too.

use std::fmt;
use std::io::Read;
use std::path::Path;

/// Configuration files written by hand or by a tool: scenarios, grid and
/// plan spaces, profiles (a profile's raw samples included). The largest
/// example is under 100 KiB.
pub const CONFIG_MAX_BYTES: u64 = 16 << 20;
/// Result files read back whole (`summary.json`, `sweep.json`, `plan.json`,
/// `capacity.json`, checkpoints): a sweep of the largest grid writes tens of
/// MiB.
pub const RESULT_MAX_BYTES: u64 = 1 << 30;

/// Why an input file was not read: the path and the reason, as the user
/// reads it ("s.toml: cannot read scenario file: it is a FIFO ...").
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    pub path: String,
    pub reason: String,
}

impl InputError {
    fn at(path: &Path, reason: String) -> InputError {
        InputError {
            path: path.display().to_string(),
            reason,
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

impl std::error::Error for InputError {}

/// What a path is when it is not a regular file, in words.
fn kind_of(m: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if m.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// Checks that `path` is a regular file (streamed inputs such as traces,
/// whose readers bound each line instead of the whole file).
pub fn check_file_type(path: &Path, what: &str) -> Result<(), InputError> {
    check_regular(path, what, u64::MAX).map(|_| ())
}

/// Checks that `path` is a regular file of at most `max_bytes` and returns
/// its size; the error says what `what` (e.g. "scenario file") is instead.
pub fn check_regular(path: &Path, what: &str, max_bytes: u64) -> Result<u64, InputError> {
    let m = std::fs::metadata(path)
        .map_err(|e| InputError::at(path, format!("cannot read {what}: {e}")))?;
    if !m.is_file() {
        return Err(InputError::at(
            path,
            format!(
                "cannot read {what}: it is {}, not a regular file",
                kind_of(&m)
            ),
        ));
    }
    if m.len() > max_bytes {
        return Err(too_big(path, what, max_bytes));
    }
    Ok(m.len())
}

fn too_big(path: &Path, what: &str, max_bytes: u64) -> InputError {
    InputError::at(
        path,
        format!(
            "{what} is larger than {}, the most read for one; is it the right file?",
            if max_bytes >= 1 << 20 {
                format!("{} MiB", max_bytes >> 20)
            } else {
                format!("{max_bytes} bytes")
            }
        ),
    )
}

/// The bytes of the regular file `path`, at most `max_bytes` of them.
pub fn read_bytes(path: &Path, what: &str, max_bytes: u64) -> Result<Vec<u8>, InputError> {
    let len = check_regular(path, what, max_bytes)?;
    let f = std::fs::File::open(path)
        .map_err(|e| InputError::at(path, format!("cannot read {what}: {e}")))?;
    let mut buf = Vec::with_capacity(len as usize);
    f.take(max_bytes + 1)
        .read_to_end(&mut buf)
        .map_err(|e| InputError::at(path, format!("cannot read {what}: {e}")))?;
    if buf.len() as u64 > max_bytes {
        return Err(too_big(path, what, max_bytes));
    }
    Ok(buf)
}

/// The UTF-8 text of the regular file `path`, at most `max_bytes` long.
pub fn read_text(path: &Path, what: &str, max_bytes: u64) -> Result<String, InputError> {
    let bytes = read_bytes(path, what, max_bytes)?;
    String::from_utf8(bytes).map_err(|e| {
        InputError::at(
            path,
            format!(
                "cannot read {what}: not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// A configuration file's text (scenario, space, grid, profile).
pub fn read_config(path: &Path, what: &str) -> Result<String, InputError> {
    read_text(path, what, CONFIG_MAX_BYTES)
}

/// A result file's text (`summary.json`, `plan.json`, ...).
pub fn read_result(path: &Path, what: &str) -> Result<String, InputError> {
    read_text(path, what, RESULT_MAX_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.toml");
        std::fs::write(&p, "name = \"x\"\n").unwrap();
        assert_eq!(read_config(&p, "scenario file").unwrap(), "name = \"x\"\n");
        let e = read_text(&p, "scenario file", 4).unwrap_err();
        assert!(e.reason.contains("larger than"), "{e}");
        let e = read_config(d.path(), "scenario file").unwrap_err();
        assert!(e.reason.contains("a folder"), "{e}");
        let e = read_config(&d.path().join("none"), "scenario file").unwrap_err();
        assert!(e.reason.contains("cannot read scenario file"), "{e}");
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(read_config(&p, "scenario file")
            .unwrap_err()
            .reason
            .contains("UTF-8"));
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_fifos_are_refused_without_blocking() {
        let e = read_config(Path::new("/dev/zero"), "scenario file").unwrap_err();
        assert!(e.reason.contains("a device"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let ok = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            // No writer: opening it would block forever.
            let e = read_config(&fifo, "profile").unwrap_err();
            assert!(e.reason.contains("FIFO"), "{e}");
        }
    }
}
