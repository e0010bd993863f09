//! The manual cannot drift from the code: docs/architecture.md's floors are
//! the layering test's table, and no comment or document carries work
//! history (commit ids, issue numbers). `SERVESIM_BLESS=1` rewrites the
//! generated part of docs/architecture.md.

mod common;
use common::*;
use std::path::{Path, PathBuf};

const BEGIN: &str =
    "<!-- floors: generated from FLOORS in sim/tests/layers.rs by tests/docs.rs -->\n";
const END: &str = "<!-- floors: end -->\n";

/// `(module, floor, floor name)` rows of `FLOORS` in sim/tests/layers.rs,
/// read as text (the table is that test's own).
fn floors() -> Vec<(String, u8, String)> {
    let text = read(&repo().join("sim/tests/layers.rs"));
    let start = text
        .find("const FLOORS")
        .expect("sim/tests/layers.rs has a FLOORS table");
    let body = &text[start..];
    let end = body.find("];").expect("FLOORS ends");
    body[..end]
        .lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("(\"")?;
            let (module, rest) = l.split_once("\", ")?;
            let (floor, rest) = rest.split_once(", \"")?;
            let (name, _) = rest.split_once('"')?;
            Some((module.to_string(), floor.parse().ok()?, name.to_string()))
        })
        .collect()
}

/// The first sentence of a module's `//!` documentation.
fn summary_of(module: &str) -> String {
    let src = repo().join("sim/src");
    let file = [
        src.join(format!("{module}.rs")),
        src.join(module).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.exists());
    let Some(file) = file else {
        return String::new();
    };
    let text = read(&file);
    let doc: Vec<&str> = text
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let doc = doc.join(" ");
    let sentence = match doc.find(". ") {
        Some(i) => &doc[..i],
        None => doc.trim_end_matches('.'),
    };
    sentence.replace('|', "\\|")
}

fn floors_table() -> String {
    let mut out = String::from(BEGIN);
    out.push_str("\n| floor | module | what it holds |\n| --- | --- | --- |\n");
    for (module, floor, name) in floors() {
        out.push_str(&format!(
            "| {floor} {name} | `{module}` | {} |\n",
            summary_of(&module)
        ));
    }
    out.push('\n');
    out.push_str(END);
    out
}

#[test]
fn architecture_floors_match_the_layering_test() {
    let rows = floors();
    assert!(rows.len() >= 30, "FLOORS read as {rows:?}");
    let path = repo().join("docs/architecture.md");
    let doc = read(&path);
    let (Some(a), Some(b)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/architecture.md lacks the generated floors section's markers");
    };
    let kept = &doc[a..b + END.len()];
    let generated = floors_table();
    if std::env::var_os("SERVESIM_BLESS").is_some() && kept != generated {
        let new = format!("{}{generated}{}", &doc[..a], &doc[b + END.len()..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert!(
        kept == generated,
        "docs/architecture.md's floors differ from FLOORS in sim/tests/layers.rs (or a \
         module's first doc line); rerun with SERVESIM_BLESS=1:\n{generated}"
    );
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "target" | "out" | ".git" | "traces") {
                sources(&p, out);
            }
        } else if ["rs", "md", "toml", "sh"]
            .iter()
            .any(|x| p.extension().is_some_and(|e| e == *x))
        {
            out.push(p);
        }
    }
}

/// The text of a file that is commentary: comment lines of code and
/// configuration, all of a Markdown page.
fn commentary(p: &Path) -> Vec<(usize, String)> {
    let text = read(p);
    let md = p.extension().is_some_and(|e| e == "md");
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let t = l.trim_start();
            let comment = if md {
                Some(t)
            } else if p.extension().is_some_and(|e| e == "rs") {
                t.strip_prefix("//")
            } else {
                t.strip_prefix('#')
            };
            comment.map(|c| (i + 1, c.to_string()))
        })
        .collect()
}

/// A word that looks like a commit id: 7 to 40 hex digits with a digit
/// and a letter, not a citation of another repository's commit
/// (`owner/repo commit 0633efae`).
fn commit_id_in(line: &str) -> Option<String> {
    let words: Vec<&str> = line
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    for (i, w) in words.iter().enumerate() {
        let hex = (7..=40).contains(&w.len())
            && w.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            && w.chars().any(|c| c.is_ascii_digit())
            && w.chars().any(|c| c.is_ascii_alphabetic())
            // 1.6666666666666666e7 is a number.
            && w.parse::<f64>().is_err();
        if !hex {
            continue;
        }
        let cited = i > 0
            && words[i - 1] == "commit"
            && line
                .split("commit")
                .next()
                .is_some_and(|before| before.contains('/'));
        if !cited {
            return Some(w.to_string());
        }
    }
    None
}

/// The word for a tracker's ticket followed by its number, with or
/// without `#`.
fn issue_number_in(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.match_indices("issue").any(|(i, _)| {
        let rest = lower[i + "issue".len()..].trim_start_matches([' ', '#']);
        rest.starts_with(|c: char| c.is_ascii_digit())
            && lower[i + "issue".len()..].starts_with([' ', '#'])
    })
}

#[test]
fn no_commit_ids_or_issue_numbers_in_comments_or_docs() {
    let mut files = Vec::new();
    sources(&repo(), &mut files);
    assert!(files.len() > 100, "{} files", files.len());
    let mut found = Vec::new();
    for f in &files {
        for (n, line) in commentary(f) {
            let rel = f.strip_prefix(repo()).unwrap_or(f).display().to_string();
            if let Some(id) = commit_id_in(&line) {
                found.push(format!("{rel}:{n}: commit-like id {id}"));
            }
            if issue_number_in(&line) {
                found.push(format!("{rel}:{n}: an issue number"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "comments and docs describe the project as it is, not its history:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_history_patterns_are_recognized() {
    assert_eq!(commit_id_in("as of fd0ef8e").as_deref(), Some("fd0ef8e"));
    assert_eq!(commit_id_in("microsoft/vidur commit 0633efae, data"), None);
    assert_eq!(commit_id_in("1234567 requests, deadbeef"), None);
    assert!(issue_number_in("Issue 4's figures"));
    assert!(issue_number_in("see issue #14"));
    assert!(!issue_number_in("an issue with 4 replicas"));
}
