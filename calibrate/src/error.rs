//! Errors of calibration and validation: a user's input problem (a flag, a
//! file, a key) said on one line, or a failure of the device underneath.

/// What went wrong, for the CLI to print on one line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: names the flag, file or key and what is allowed.
    #[error("{0}")]
    Input(String),
    /// The device or the tensor library failed (first line of its message:
    /// candle appends a backtrace when RUST_BACKTRACE is set).
    #[error("device error: {0}")]
    Candle(String),
    #[error("{0}")]
    Io(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// A bad-input error.
pub fn input(msg: impl Into<String>) -> Error {
    Error::Input(msg.into())
}

/// An I/O error with the path it concerns.
pub fn io(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

/// A user's file refused before it is read (not a regular file, or larger
/// than its kind's cap): bad input, naming the file.
impl From<sim::input_file::InputError> for Error {
    fn from(e: sim::input_file::InputError) -> Error {
        Error::Input(e.to_string())
    }
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Error {
        Error::Candle(first_line(&e))
    }
}

/// The first line of an error's message.
pub fn first_line(e: &dyn std::fmt::Display) -> String {
    e.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}
