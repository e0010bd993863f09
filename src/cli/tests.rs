use super::*;

/// clap's own consistency checks over the whole command tree (conflicting
/// ids, required arguments with defaults, bad value parsers), which it
/// otherwise runs only when the faulty subcommand is first parsed.
#[test]
fn the_command_tree_passes_claps_checks() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}

fn error_of(args: &[&str]) -> String {
    use clap::CommandFactory;
    let mut full = vec!["servesim"];
    full.extend_from_slice(args);
    Cli::command()
        .try_get_matches_from(full)
        .unwrap_err()
        .to_string()
}

#[test]
fn negative_numbers_on_flags_name_the_flag_and_the_range() {
    let e = error_of(&["capacity", "s.toml", "--replicas", "-1"]);
    assert!(e.contains("--replicas") && e.contains("1..=100000"), "{e}");
    let e = error_of(&["bench", "--repeat", "-1"]);
    assert!(
        e.contains("--repeat") && e.contains("0..=4294967295"),
        "{e}"
    );
    let e = error_of(&["explain", "out", "--request", "-1"]);
    assert!(e.contains("--request") && e.contains("0..="), "{e}");
    let e = error_of(&["serve", "--max-tokens", "-5"]);
    assert!(e.contains("--max-tokens") && e.contains("0.."), "{e}");
    // A flag's own range survives the shared rule.
    let e = error_of(&[
        "validate",
        "--profile",
        "p.toml",
        "s.toml",
        "--live-runs",
        "0",
    ]);
    assert!(e.contains("--live-runs") && e.contains("1..=20"), "{e}");
    let e = error_of(&["serve", "--speed", "nan"]);
    assert!(e.contains("--speed") && e.contains("finite"), "{e}");
    // A negative decimal reaches the flag's range, which names it.
    let e = error_of(&["capacity", "s.toml", "--headroom", "-50"]);
    assert!(e.contains("--headroom") && e.contains("[0, 1000] %"), "{e}");
    use clap::{CommandFactory, FromArgMatches};
    let m = Cli::command()
        .try_get_matches_from(["servesim", "capacity", "s.toml", "--headroom", "50"])
        .unwrap();
    let cli = Cli::from_arg_matches(&m).unwrap();
    match cli.command {
        Command::Capacity(a) => assert_eq!(a.headroom, 50.0),
        other => panic!("{other:?}"),
    }
    // Flags keep their meaning: a path option still needs its value.
    let e = error_of(&["simulate", "s.toml", "--out", "--json"]);
    assert!(e.contains("--out"), "{e}");
    // A name is not taken from the next flag either.
    let e = error_of(&["cost", "--model", "--json"]);
    assert!(
        e.contains("--model") && e.contains("value is required"),
        "{e}"
    );
}

/// Every `after_help` example parses (tests/cli.rs runs those that can
/// run without a server, a GPU or files outside the repository).
#[test]
fn every_help_example_parses() {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, seen: &mut usize) {
        if let Some(help) = cmd.get_after_help() {
            for line in help
                .to_string()
                .lines()
                .filter_map(|l| l.strip_prefix("  "))
            {
                // A trailing "   (…)" is a remark, not an argument.
                let line = line.split("   (").next().unwrap_or(line);
                let line = match line.strip_prefix("cargo run --release -- ") {
                    Some(rest) => format!("servesim {rest}"),
                    None => line.to_string(),
                };
                let argv: Vec<&str> = line.split_whitespace().collect();
                assert_eq!(argv[0], "servesim", "{line}");
                if let Err(e) = Cli::try_parse_from(&argv) {
                    panic!("the example `{line}` does not parse:\n{e}");
                }
                *seen += 1;
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, seen);
        }
    }
    let mut seen = 0;
    walk(&Cli::command(), &mut seen);
    assert!(seen >= 40, "{seen} examples");
}

/// Validate, serve and observe take the scenario as their argument,
/// as every command whose main input is a scenario.
#[test]
fn the_scenario_is_an_argument() {
    for argv in [
        &["servesim", "validate", "s.toml", "--profile", "p.toml"][..],
        &["servesim", "serve", "s.toml"],
        &["servesim", "observe", "http://x", "s.toml"],
    ] {
        assert!(Cli::try_parse_from(argv).is_ok(), "{argv:?}");
    }
    let e = error_of(&["serve"]);
    assert!(e.contains("<SCENARIO>"), "{e}");
    let e = error_of(&["serve", "--scenario", "s.toml"]);
    assert!(e.contains("--scenario"), "{e}");
}

/// The served model's name is `--served-model-name` on every command
/// that talks to a server; the older spellings are hidden aliases.
#[test]
fn the_served_model_name_has_one_spelling() {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, found: &mut Vec<String>) {
        for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = a.get_long() {
                if long.starts_with("served-model") {
                    found.push(format!("{} --{long}", cmd.get_name()));
                }
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, found);
        }
    }
    let mut found = Vec::new();
    walk(&Cli::command(), &mut found);
    assert!(
        found.iter().all(|f| f.ends_with("--served-model-name")) && found.len() == 3,
        "{found:?}"
    );
    for argv in [
        &["servesim", "observe", "http://x", "s.toml", "--model", "m"][..],
        &[
            "servesim",
            "calibrate",
            "--engine",
            "http://x",
            "--served-model",
            "m",
            "--out",
            "p",
        ],
    ] {
        assert!(Cli::try_parse_from(argv).is_ok(), "{argv:?}");
    }
}

/// Durations, counts and sizes past their range are refused by the
/// parser with the flag and the range, before any command runs (a
/// duration past `Duration`'s range would panic; a count would
/// allocate or run for days).
#[test]
fn durations_counts_and_sizes_are_range_checked_with_the_flag_named() {
    for (args, flag, range) in [
        (
            &["observe", "http://x", "s.toml", "--max-duration-s", "1e300"][..],
            "--max-duration-s",
            "(0, 1e9] s",
        ),
        (
            &[
                "observe",
                "http://x",
                "s.toml",
                "--request-timeout-s",
                "1e20",
            ],
            "--request-timeout-s",
            "(0, 1e9] s",
        ),
        (
            &["serve", "--idle-timeout-s", "1e300"],
            "--idle-timeout-s",
            "(0, 1e9] s",
        ),
        (
            &["serve", "--body-timeout-s", "-1"],
            "--body-timeout-s",
            "(0, 1e9] s",
        ),
        (
            &["serve", "--request-timeout-s", "0"],
            "--request-timeout-s",
            "(0, 1e9] s",
        ),
        (
            &["serve", "--max-body-bytes", "1e12"],
            "--max-body-bytes",
            "1..=1073741824",
        ),
        (
            &[
                "plan",
                "s.toml",
                "--space",
                "sp.toml",
                "--demand",
                "70",
                "--exhaustive",
                "1000000",
            ],
            "--exhaustive",
            "1..=1024",
        ),
        (
            &[
                "plan",
                "s.toml",
                "--space",
                "sp.toml",
                "--demand",
                "70",
                "--headroom",
                "1000000",
            ],
            "--headroom",
            "[0, 1000] %",
        ),
        (
            &["plan", "s.toml", "--space", "sp.toml", "--demand", "1e300"],
            "--demand",
            "requests/s",
        ),
        (
            &["capacity", "s.toml", "--gpu-hour-usd", "1e306"],
            "--gpu-hour-usd",
            "(0, 10000]",
        ),
    ] {
        let e = error_of(args);
        assert!(e.contains(flag) && e.contains(range), "{args:?}: {e}");
        assert!(!e.contains("-- -"), "{args:?}: clap's tip: {e}");
    }
}

/// Every decimal flag of every command has a range (so a new one cannot
/// reach `Duration::from_secs_f64` or a search unchecked): each refuses
/// 1e308 and NaN, and takes a leading `-` to its range check.
#[test]
fn every_decimal_flag_has_a_range() {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, path: &[String], missing: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            if a.get_value_parser().type_id() != std::any::TypeId::of::<f64>() {
                continue;
            }
            let flag = format!("--{}", a.get_long().expect("decimal flags are options"));
            let refused = |v: &str| {
                let mut argv = vec!["servesim".to_string()];
                argv.extend(path.iter().cloned());
                argv.extend([flag.clone(), v.to_string()]);
                matches!(
                    Cli::command().try_get_matches_from(argv),
                    Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation
                )
            };
            if !(refused("1e308") && refused("nan") && refused("-1000000000000")) {
                missing.push(format!("servesim {} {flag}", path.join(" ")));
            }
        }
        for sub in cmd.get_subcommands() {
            let mut p = path.to_vec();
            p.push(sub.get_name().to_string());
            walk(sub, &p, missing);
        }
    }
    let mut missing = Vec::new();
    walk(&Cli::command(), &[], &mut missing);
    assert!(
        missing.is_empty(),
        "decimal flags without a range from crate::ranges: {missing:?}"
    );
}

/// The verbs without `--json`, each with why it has no result to print as
/// JSON. Every other verb prints its result as one JSON document under
/// `--json` (tests/cli.rs runs them).
const NO_JSON: &[(&str, &str)] = &[
    (
        "catalog",
        "lists the embedded presets: inputs, not a result",
    ),
    ("bench", "a timing of this build on this machine, as text"),
    (
        "trace bench",
        "a timing of the readers on this machine, as text",
    ),
    ("report", "writes charts and pages from a result folder"),
    (
        "calibrate",
        "its result is the profile (TOML) it writes to --out",
    ),
    ("serve", "serves until stopped"),
    ("help-markdown", "prints docs/cli.md"),
];

/// `--json` on every verb that prints a result: a new verb gets the flag
/// or a line in [`NO_JSON`] saying why not.
#[test]
fn every_verb_that_prints_a_result_has_json() {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, path: &str, found: &mut Vec<(String, bool)>) {
        let subs: Vec<&clap::Command> = cmd
            .get_subcommands()
            .filter(|c| c.get_name() != "help")
            .collect();
        // A verb that runs: a leaf, or one whose subcommands are optional
        // (`sweep SCENARIO` beside `sweep merge`).
        if !path.is_empty() && (subs.is_empty() || !cmd.is_subcommand_required_set()) {
            let json = cmd.get_arguments().any(|a| a.get_long() == Some("json"));
            found.push((path.to_string(), json));
        }
        for sub in subs {
            let p = if path.is_empty() {
                sub.get_name().to_string()
            } else {
                format!("{path} {}", sub.get_name())
            };
            walk(sub, &p, found);
        }
    }
    let mut found = Vec::new();
    walk(&Cli::command(), "", &mut found);
    assert!(found.len() >= 20, "{found:?}");
    let missing: Vec<&str> = found
        .iter()
        .filter(|(verb, json)| !json && !NO_JSON.iter().any(|(v, _)| v == verb))
        .map(|(verb, _)| verb.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "verbs that print a result without --json: {missing:?}"
    );
    let stale: Vec<&str> = NO_JSON
        .iter()
        .map(|(v, _)| *v)
        .filter(|v| !found.iter().any(|(verb, json)| verb == v && !json))
        .collect();
    assert!(
        stale.is_empty(),
        "NO_JSON lines for verbs that have --json or are gone: {stale:?}"
    );
}
