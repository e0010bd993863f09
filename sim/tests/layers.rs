//! The floors of `sim` (`shared/DESIGN.md`, "Inside `sim`: floors"): a module
//! imports only from its own floor or below. This test reads every source
//! file, collects its `crate::…` paths outside comments and test code, and
//! fails on a path that goes up a floor and is not in [`ALLOWED`].
//!
//! [`ALLOWED`] lists upward imports a move in progress still has (none now);
//! the test fails on a line that no longer matches anything, so the list
//! only shrinks. No circle of modules that import each other is allowed:
//! within a floor, imports go one way.
//!
//! Four more rules of the floors are checked here: `simulation/`'s handler
//! modules import by name (no `use super::*`); the raw TOML of a scenario
//! (`s.file`, `scenario.file`) is read nowhere outside `scenario/` and
//! `config/`; no type of the model floor holds a `Scenario` or its
//! `ScenarioFile` (a model is built from its slice of the plan and keeps
//! what it needs); and no type of the model or run floor holds a
//! configuration type (a `…Cfg`), but the resolved values of its slice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `sim` and its floor, lowest first.
const FLOORS: &[(&str, u8, &str)] = &[
    ("time", 0, "ground"),
    ("rng", 0, "ground"),
    ("engine", 0, "ground"),
    ("store", 0, "ground"),
    ("stats", 0, "ground"),
    ("sig_figs", 0, "ground"),
    ("bounds", 0, "ground"),
    ("input_file", 0, "ground"),
    ("catalog", 1, "knowledge"),
    ("config", 1, "knowledge"),
    ("parallel", 1, "knowledge"),
    ("memory", 1, "knowledge"),
    ("kv_groups", 1, "knowledge"),
    ("cost", 1, "knowledge"),
    ("profile", 1, "knowledge"),
    ("profiled", 1, "knowledge"),
    ("scenario", 2, "plan"),
    ("request", 3, "model"),
    ("attribution", 3, "model"),
    ("kv", 3, "model"),
    ("workload", 3, "model"),
    ("replica", 3, "model"),
    ("tenancy", 3, "model"),
    ("lifecycle", 3, "model"),
    ("autoscale", 3, "model"),
    ("cluster", 3, "model"),
    ("canary", 3, "model"),
    ("region", 3, "model"),
    ("output", 4, "run"),
    ("records", 4, "run"),
    ("guard", 4, "run"),
    ("steady_state", 4, "run"),
    ("simulation", 4, "run"),
    ("energy", 4, "run"),
    ("report", 5, "results"),
    ("sweep", 5, "results"),
    ("deployment", 5, "results"),
    ("accuracy", 5, "results"),
    ("from_bench", 5, "results"),
    ("breakeven", 5, "results"),
    ("emit", 5, "results"),
];

/// Upward imports allowed, as `file (relative to src) -> module`: none. A
/// move that cannot land in one step may list its import here while it
/// lasts. `LAYERS_PRINT=1 cargo test -p servesim-sim --test layers --
/// --nocapture` prints the upward imports and the circles.
const ALLOWED: &[&str] = &[];

fn floor_of(module: &str) -> Option<(u8, &'static str)> {
    FLOORS
        .iter()
        .find(|(m, _, _)| *m == module)
        .map(|&(_, f, name)| (f, name))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`cluster/router/mod.rs` ->
/// `cluster`, `time.rs` -> `time`); `None` for `lib.rs`.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    if rel.components().count() == 1 {
        let stem = first.trim_end_matches(".rs").to_string();
        (stem != "lib").then_some(stem)
    } else {
        Some(first)
    }
}

/// The code a file contributes to the library: comments dropped, and
/// everything from a column-0 `#[cfg(test)]` on (test modules sit last).
fn library_code(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The top-level modules named by `crate::…` paths, `use crate::{a, b::c}`
/// groups included.
fn crate_modules(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // Split the group's top level on commas.
            let mut depth = 0usize;
            let mut start = 0usize;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.insert(ident(&group[start..j]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(&group[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.insert(ident(after));
        }
        rest = after;
    }
    found.retain(|m| !m.is_empty());
    found
}

/// Files that only tests compile: those of a `#[cfg(test)] mod name;`
/// declaration (`name.rs` beside a `mod.rs`, or in the folder of a
/// non-`mod.rs` parent), and the folders of such modules.
fn test_only(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for path in files {
        let text = std::fs::read_to_string(path).expect("source file");
        let dir = match path.file_stem().and_then(|s| s.to_str()) {
            Some("mod") | Some("lib") => path.parent().expect("parent").to_path_buf(),
            _ => path.with_extension(""),
        };
        let mut lines = text.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if line != "#[cfg(test)]" {
                continue;
            }
            let Some(decl) = lines.next() else { break };
            let decl = decl.strip_prefix("pub ").unwrap_or(decl);
            if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) {
                out.insert(dir.join(format!("{name}.rs")));
                out.insert(dir.join(name));
            }
        }
    }
    out
}

struct Tree {
    /// `file -> module` for every upward import.
    upward: BTreeMap<String, (String, String)>,
    /// Module -> modules it imports.
    edges: BTreeMap<String, BTreeSet<String>>,
}

fn read_tree() -> Tree {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let tests = test_only(&files);
    let mut upward = BTreeMap::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in files {
        let rel = path.strip_prefix(&src).expect("under src").to_path_buf();
        let Some(module) = module_of(&rel) else {
            continue;
        };
        if rel.file_name().is_some_and(|n| n == "tests.rs")
            || rel.components().any(|c| c.as_os_str() == "tests")
            || path.ancestors().any(|a| tests.contains(a))
        {
            continue;
        }
        let (from, _) = floor_of(&module).unwrap_or_else(|| {
            panic!(
                "module `{module}` ({}) has no floor in FLOORS",
                rel.display()
            )
        });
        let text = std::fs::read_to_string(&path).expect("source file");
        for target in crate_modules(&library_code(&text)) {
            if target == module {
                continue;
            }
            let Some((to, to_name)) = floor_of(&target) else {
                continue; // a re-export at the crate root, not a module
            };
            edges
                .entry(module.clone())
                .or_default()
                .insert(target.clone());
            if to > from {
                let key = format!("{} -> {target}", rel.display());
                upward.insert(key, (module.clone(), to_name.to_string()));
            }
        }
    }
    Tree { upward, edges }
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_import_goes_up_a_floor_beyond_the_allowlist() {
    let tree = read_tree();
    if std::env::var_os("LAYERS_PRINT").is_some() {
        for key in tree.upward.keys() {
            println!("    \"{key}\",");
        }
    }
    let allowed: BTreeSet<&str> = ALLOWED.iter().copied().collect();
    let new: Vec<String> = tree
        .upward
        .iter()
        .filter(|(key, _)| !allowed.contains(key.as_str()))
        .map(|(key, (from, to))| format!("{key} (a {from} file importing from the {to} floor)"))
        .collect();
    assert!(
        new.is_empty(),
        "imports that go up a floor (move the type down, or the code up):\n  {}",
        new.join("\n  ")
    );
    let gone: Vec<&str> = ALLOWED
        .iter()
        .copied()
        .filter(|a| !tree.upward.contains_key(*a))
        .collect();
    assert!(
        gone.is_empty(),
        "allowlist lines that no longer match an import (delete them):\n  {}",
        gone.join("\n  ")
    );
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let tree = read_tree();
    let circles = circles(&tree.edges);
    if std::env::var_os("LAYERS_PRINT").is_some() {
        for c in &circles {
            println!("circle: {}", c.join(" "));
        }
    }
    assert!(
        circles.is_empty(),
        "modules that import each other (make the imports go one way): {circles:?}"
    );
}

/// The library files of `simulation/`, as (path relative to src, code).
fn simulation_library_files() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    sources(&src, &mut all);
    let tests = test_only(&all);
    let mut files = Vec::new();
    sources(&src.join("simulation"), &mut files);
    files
        .into_iter()
        .filter(|p| {
            p.file_name().is_some_and(|n| n != "tests.rs")
                && !p.ancestors().any(|a| tests.contains(a))
        })
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("source file");
            (
                p.strip_prefix(&src).expect("under src").to_path_buf(),
                library_code(&text),
            )
        })
        .collect()
}

/// The run's handlers sit in modules of their own (replica, pool, life
/// cycle, canary, regions, ...) that name what they use: a `use super::*`
/// would let a handler module reach into everything the run holds unseen.
/// Their tests too: [`simulation_tests_import_by_name`].
#[test]
fn simulation_modules_import_by_name() {
    let globs: Vec<String> = simulation_library_files()
        .into_iter()
        .filter(|(_, code)| code.lines().any(|l| l.trim() == "use super::*;"))
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert!(
        globs.is_empty(),
        "`use super::*` in simulation/ (import each item by name): {globs:?}"
    );
}

/// The tests of `simulation/` (test files and the test modules of library
/// files) name what they use as well: a glob import would hide which of the
/// run's parts a test reaches into, and a handler module's test would see
/// every other handler's items.
#[test]
fn simulation_tests_import_by_name() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src.join("simulation"), &mut files);
    let globs: Vec<String> = files
        .iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).expect("source file");
            text.lines().any(|l| l.trim() == "use super::*;")
        })
        .map(|p| {
            p.strip_prefix(&src)
                .expect("under src")
                .display()
                .to_string()
        })
        .collect();
    assert!(
        globs.is_empty(),
        "`use super::*` in simulation/, in test code too (import each item by name): {globs:?}"
    );
}

/// Reads of a scenario's raw TOML (`Scenario::file`) in `code`: a `.file`
/// field (not a `file()` call) of a receiver named `s`, `ps` or `…scenario…`,
/// the names the crate gives a `Scenario` or `PoolPlan::scenario`.
fn scenario_file_reads(code: &str) -> usize {
    file_fields(code)
        .filter(|&(_, receiver)| scenario_receiver(receiver))
        .count()
}

/// Each `.file` field access in `code` (not an identifier that goes on,
/// not a `file()` call): its byte offset and the identifier before it.
fn file_fields(code: &str) -> impl Iterator<Item = (usize, &str)> {
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    code.match_indices(".file").filter_map(move |(i, _)| {
        let after = bytes.get(i + ".file".len()).copied().unwrap_or(b' ');
        if ident(after) || after == b'(' {
            return None;
        }
        let mut j = i;
        while j > 0 && bytes[j - 1].is_ascii_whitespace() {
            j -= 1;
        }
        let end = j;
        while j > 0 && ident(bytes[j - 1]) {
            j -= 1;
        }
        Some((i, &code[j..end]))
    })
}

/// The names the crate gives a `Scenario` or `PoolPlan::scenario`.
fn scenario_receiver(receiver: &str) -> bool {
    receiver == "s" || receiver == "ps" || receiver.contains("scenario")
}

/// Resolution happens once, in `scenario/`: code outside it (and outside
/// `config/`, the TOML's own types) reads its slice of the resolved plan
/// (`RunPlan`, `PoolPlan`, `FleetPlan`, ...) or a named `Scenario` method,
/// never the raw TOML (`s.file.…`).
#[test]
fn no_raw_scenario_read_outside_the_plan() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let tests = test_only(&files);
    let mut found = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&src).expect("under src").to_path_buf();
        let top = rel.components().next().and_then(|c| c.as_os_str().to_str());
        if matches!(top, Some("scenario") | Some("config"))
            || rel.file_name().is_some_and(|n| n == "tests.rs")
            || path.ancestors().any(|a| tests.contains(a))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source file");
        let n = scenario_file_reads(&library_code(&text));
        if n > 0 {
            found.push(format!("{}: {n} read(s) of `s.file`", rel.display()));
        }
    }
    assert!(
        found.is_empty(),
        "raw scenario reads outside scenario/ (take the value from the plan, or add a named \
         `Scenario` method in scenario/):\n  {}",
        found.join("\n  ")
    );
}

/// The fields of the structs in `code` whose type names `Scenario` or
/// `ScenarioFile`, as `Struct.field` (`Struct.0` for a tuple struct's).
fn scenario_fields(code: &str) -> Vec<String> {
    fields_naming(code, |w| w == "Scenario" || w == "ScenarioFile")
}

/// The fields of the structs in `code` whose type names a configuration
/// type (a `…Cfg`: the serde types of a scenario's keys), as
/// `Struct.field`.
fn config_fields(code: &str) -> Vec<String> {
    fields_naming(code, |w| w.len() > 3 && w.ends_with("Cfg"))
}

/// The fields of the structs in `code` whose type names a word `named`
/// accepts, as `Struct.field` (`Struct.0` for a tuple struct's).
fn fields_naming(code: &str, named: impl Fn(&str) -> bool) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let names_scenario = |ty: &str| ty.split(|c: char| !ident(c)).any(&named);
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("struct ") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "struct ".len()..];
        if before.is_some_and(ident) {
            continue;
        }
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|&c| ident(c))
            .collect();
        // The body: from the first `{` or `(` (after any generics) to its match.
        let Some(open) = rest.find(['{', '(', ';']) else {
            break;
        };
        let close_c = match rest.as_bytes()[open] {
            b'{' => '}',
            b'(' => ')',
            _ => continue,
        };
        let mut depth = 0usize;
        let mut fields = Vec::new();
        let mut start = open + 1;
        let mut prev = ' ';
        for (j, c) in rest[open..].char_indices() {
            let j = open + j;
            let arrow = c == '>' && prev == '-';
            prev = c;
            match c {
                '>' if arrow => {}
                '{' | '(' | '<' | '[' => depth += 1,
                '}' | ')' | '>' | ']' => {
                    depth -= 1;
                    if depth == 0 && c == close_c {
                        fields.push(&rest[start..j]);
                        break;
                    }
                }
                ',' if depth == 1 => {
                    fields.push(&rest[start..j]);
                    start = j + 1;
                }
                _ => {}
            }
        }
        for (k, field) in fields.iter().enumerate() {
            let field = field.trim();
            let (fname, ty) = match (close_c, field.split_once(':')) {
                ('}', Some((n, t))) => (n.split_whitespace().last().unwrap_or("").to_string(), t),
                _ => (k.to_string(), field),
            };
            if names_scenario(ty) {
                out.push(format!("{name}.{fname}"));
            }
        }
    }
    out
}

/// A model is built from its slice of the plan (`&PoolPlan`, `&RunPlan`,
/// ...) and keeps what it needs: no type of the model floor holds the
/// resolved `Scenario` or its raw `ScenarioFile`.
#[test]
fn no_model_type_holds_a_scenario() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let tests = test_only(&files);
    let mut held = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&src).expect("under src").to_path_buf();
        let Some(module) = module_of(&rel) else {
            continue;
        };
        if floor_of(&module).map(|(_, name)| name) != Some("model")
            || rel.file_name().is_some_and(|n| n == "tests.rs")
            || path.ancestors().any(|a| tests.contains(a))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source file");
        for f in scenario_fields(&library_code(&text)) {
            held.push(format!("{} ({f})", rel.display()));
        }
    }
    assert!(
        held.is_empty(),
        "model types holding a Scenario (keep their slice of the plan instead):\n  {}",
        held.join("\n  ")
    );
}

/// Model and run types that still keep a configuration type, as
/// `file (relative to src): Struct.field`: the list only shrinks (the test
/// fails on an entry that no longer matches), as [`ALLOWED`] does.
const CFG_HELD_ALLOWED: &[&str] = &[
    "cluster/disagg.rs: LinkModel.cfg",
    "cluster/router/prefix_affinity.rs: PrefixAffinity.cfg",
    "cluster/router/weighted.rs: Weighted.w",
    "tenancy/mod.rs: Tenancy.fairness",
    "tenancy/mod.rs: Tenancy.retry",
    "workload/shared_prefix.rs: SharedPrefix.cfg",
];

/// Rebuilt from their slice of the plan, models and the run keep resolved
/// values, not the serde types of the scenario's keys: no type of the model
/// or run floor holds a `…Cfg` (a config type read while the run goes is
/// configuration read after resolution).
#[test]
fn no_model_or_run_type_holds_a_configuration_type() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let tests = test_only(&files);
    let mut held = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&src).expect("under src").to_path_buf();
        let Some(module) = module_of(&rel) else {
            continue;
        };
        if !matches!(
            floor_of(&module).map(|(_, name)| name),
            Some("model" | "run")
        ) || rel.file_name().is_some_and(|n| n == "tests.rs")
            || path.ancestors().any(|a| tests.contains(a))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source file");
        for f in config_fields(&library_code(&text)) {
            held.push(format!("{}: {f}", rel.display()));
        }
    }
    let fresh: Vec<&String> = held
        .iter()
        .filter(|h| !CFG_HELD_ALLOWED.contains(&h.as_str()))
        .collect();
    let gone: Vec<&&str> = CFG_HELD_ALLOWED
        .iter()
        .filter(|a| !held.iter().any(|h| h == **a))
        .collect();
    if std::env::var_os("LAYERS_PRINT").is_some() {
        eprintln!("configuration types held:\n  {}", held.join("\n  "));
    }
    assert!(
        fresh.is_empty(),
        "model or run types holding a configuration type (keep resolved values from \
         their slice of the plan, built in scenario/):\n  {}",
        fresh
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    assert!(
        gone.is_empty(),
        "CFG_HELD_ALLOWED entries that no longer match (remove them):\n  {}",
        gone.iter().map(|s| **s).collect::<Vec<_>>().join("\n  ")
    );
}

#[test]
fn the_field_reader_sees_configuration_types() {
    let code = "pub struct A { cfg: CanaryCfg, plan: CanaryPlan, n: Option<EngineCfg> }\n\
                struct B(Vec<RegionCfg>, Cfg);";
    assert_eq!(config_fields(code), ["A.cfg", "A.n", "B.0"]);
}

/// The plan's slices (`scenario/*_plan.rs`: `PoolPlan`, `ReplicaPlan`,
/// `RoutingPlan`, ...) are what models are built from: a slice that held a
/// `Scenario` would hand the whole configuration on to its model.
#[test]
fn no_plan_slice_holds_a_scenario() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scenario");
    let mut held = Vec::new();
    let mut slices = 0;
    for entry in std::fs::read_dir(&dir).expect("scenario folder") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.ends_with("_plan.rs") {
            continue;
        }
        slices += 1;
        let text = std::fs::read_to_string(&path).expect("source file");
        for f in scenario_fields(&library_code(&text)) {
            held.push(format!("scenario/{name} ({f})"));
        }
    }
    assert!(
        slices >= 2 && dir.join("pool_plan.rs").exists() && dir.join("replica_plan.rs").exists(),
        "the plan's slices moved: {slices} files in {}",
        dir.display()
    );
    assert!(
        held.is_empty(),
        "plan slices holding a Scenario (keep the resolved values instead):\n  {}",
        held.join("\n  ")
    );
}

#[test]
fn the_field_reader_sees_scenario_fields_only() {
    let code = "pub struct A<'a> { pub s: &'a Scenario, n: u32 }\n\
                struct B(Box<ScenarioFile>, u8);\n\
                struct C { map: BTreeMap<String, (u32, u64)>, plan: PoolPlan, f: fn(&Scenario) -> u8 }\n\
                struct D;\nfn f(s: &Scenario) {}\nlet x = ScenarioError { a: Scenario::x() };";
    assert_eq!(scenario_fields(code), ["A.s", "B.0", "C.f"]);
}

#[test]
fn the_file_read_counter_sees_scenario_receivers_only() {
    let code = "let a = s.file.seed; let b = self.scenario\n    .file\n    .x;\n\
                let c = self.file.flush(); let d = reader.file(); let e = p.scenario.file;";
    assert_eq!(scenario_file_reads(code), 3);
}

#[test]
fn the_reader_sees_grouped_and_plain_paths_but_not_comments() {
    let code = library_code(
        "use crate::{time::SimTime, cost::{A, B}};\n\
         // use crate::sweep::X;\n\
         fn f() { crate::rng::stream(); }\n\
         #[cfg(test)]\nmod tests { use crate::simulation::X; }\n",
    );
    let found: Vec<String> = crate_modules(&code).into_iter().collect();
    assert_eq!(found, ["cost", "rng", "time"]);
}

/// The code of a file without its comments, test code included.
fn code_without_comments(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The top-level keys of a scenario file: the fields of `ScenarioFile`, as
/// `scenario/mod.rs` declares them.
fn scenario_file_fields() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scenario/mod.rs");
    let text = std::fs::read_to_string(&path).expect("scenario/mod.rs");
    let start = text
        .find("pub struct ScenarioFile {")
        .expect("ScenarioFile in scenario/mod.rs");
    let body = &text[start..];
    let body = &body[..body.find("\n}").expect("end of ScenarioFile")];
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split_once(':').map(|(name, _)| name.trim().to_string()))
        .filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect()
}

/// Reads and edits of a scenario's raw TOML in `code`: what
/// [`scenario_file_reads`] counts, and any `.file.<key>` whose key is one
/// of `fields` (the top-level keys of a scenario file), whatever the
/// receiver is called (`s1.file.engine`, `base.file.fleet`).
fn raw_scenario_reads(code: &str, fields: &[String]) -> usize {
    let mut keyed = 0;
    for (i, receiver) in file_fields(code) {
        // The receiver's rule is `scenario_file_reads`'s: count the rest.
        if scenario_receiver(receiver) {
            continue;
        }
        let rest = code[i + ".file".len()..].trim_start();
        let Some(rest) = rest.strip_prefix('.') else {
            continue;
        };
        let key: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if fields.contains(&key) {
            keyed += 1;
        }
    }
    scenario_file_reads(code) + keyed
}

/// The crates above `sim` (the CLI, `serve`, `calibrate`, `reports`), their
/// tests included, take what they show or run from the resolved plan or a
/// named `Scenario` method (`scenario/stated.rs`, `scenario/views.rs`), and
/// change a scenario by editing its TOML before resolution (the
/// command-line `Overrides`, a table's `keypath::set`, the text itself):
/// never through the raw TOML a resolved `Scenario` keeps (`s.file.…`).
#[test]
fn no_raw_scenario_read_in_the_crates_above_sim() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf();
    let fields = scenario_file_fields();
    assert!(
        ["engine", "fleet", "workload", "horizon"]
            .iter()
            .all(|k| fields.iter().any(|f| f == k)),
        "ScenarioFile's keys not found in scenario/mod.rs: {fields:?}"
    );
    let mut files = Vec::new();
    let mut scanned = 0;
    for dir in [
        "src",
        "tests",
        "serve/src",
        "serve/tests",
        "calibrate/src",
        "calibrate/tests",
        "reports/src",
        "reports/tests",
    ] {
        let dir = root.join(dir);
        if dir.is_dir() {
            sources(&dir, &mut files);
            scanned += 1;
        }
    }
    assert!(
        scanned >= 6 && files.len() > 50,
        "the crates above sim moved: {scanned} folders, {} files under {}",
        files.len(),
        root.display()
    );
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("source file");
        let n = raw_scenario_reads(&code_without_comments(&text), &fields);
        if n > 0 {
            let rel = path.strip_prefix(&root).expect("under the workspace");
            found.push(format!("{}: {n} read(s) of `.file`", rel.display()));
        }
    }
    assert!(
        found.is_empty(),
        "raw scenario reads above sim (read the plan or a named `Scenario` method in \
         sim/src/scenario/; edit the TOML before resolution):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_raw_read_counter_sees_any_receiver_of_a_scenario_key() {
    let fields: Vec<String> = ["engine", "fleet", "seed"].map(String::from).to_vec();
    let code = "let a = s.file.seed; let b = s1.file.engine.max_num_seqs = 1;\n\
                let c = base\n    .file\n    .fleet; let d = f.file.display(); let e = x.file;\n\
                let g = scenario.file; let h = entry.file.len();";
    assert_eq!(raw_scenario_reads(code, &fields), 4);
    let found = scenario_file_fields();
    assert!(found.iter().any(|f| f == "tenants"), "{found:?}");
    assert!(!found.iter().any(|f| f == "pub"), "{found:?}");
}
