//! The manual cannot drift: the README's quick start shows what the binary
//! prints, so a change to the printed summary fails here until the README
//! says the same.

mod common;
use common::*;

/// The fenced block that follows `marker` in `text`.
fn block_after<'a>(text: &'a str, marker: &str) -> &'a str {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("README has no {marker:?}"));
    let rest = &text[at..];
    let start = rest.find("```text\n").expect("a ```text block follows") + "```text\n".len();
    let len = rest[start..].find("```").expect("the block ends");
    &rest[start..start + len]
}

#[test]
fn readme_quick_start_prints_what_the_binary_prints() {
    let readme = read(&repo().join("README.md"));
    let shown = block_after(&readme, "prints (stdout of a real run):");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("quickstart");
    let o = simulate(&repo().join("scenarios/quickstart.toml"), &out, &[]);
    // The results line names the folder the run wrote: the README's run
    // wrote the default `out/quickstart`.
    let printed = stdout(&o).replace(out.to_str().unwrap(), "out/quickstart");
    let lines = |s: &str| -> Vec<String> { s.lines().map(|l| l.trim_end().to_string()).collect() };
    assert_eq!(
        lines(&printed),
        lines(shown),
        "README.md's quick-start block differs from what `servesim simulate \
         scenarios/quickstart.toml` prints; paste the new output into README.md"
    );
}
