//! Where `calibrate` writes its profile: `--out` names a folder, as it does
//! for every other verb, and the profile is `<folder>/profile.toml` in it.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The profile's file name inside `--out`.
pub const PROFILE_FILE: &str = "profile.toml";

/// `out/profile.toml`. A `--out` ending in `.toml` stops here, before any
/// measuring or fitting, with the folder to give instead. The writer
/// creates the folder when it writes the profile.
pub fn profile_path(out: &Path) -> Result<PathBuf> {
    if out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
    {
        let folder = out.with_extension("");
        bail!(
            "--out {}: a folder, not a file (the profile is written as <folder>/{PROFILE_FILE}); give e.g. --out {}",
            out.display(),
            folder.display()
        );
    }
    Ok(out.join(PROFILE_FILE))
}

/// Writes `profile` to `path` whole (through a temporary and a rename),
/// creating its folder.
pub fn write_profile(path: &Path, profile: &sim::profile::Profile) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    sim::output::write_bytes_atomic(path, profile.to_toml_string().as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_is_a_folder_and_a_toml_file_is_refused_with_the_folder_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let p = profile_path(&dir.path().join("h100")).unwrap();
        assert_eq!(p, dir.path().join("h100").join("profile.toml"));
        let e = profile_path(&dir.path().join("h100.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a folder, not a file") && e.contains("--out"),
            "{e}"
        );
        assert!(!dir.path().join("h100.toml").exists());
    }
}
