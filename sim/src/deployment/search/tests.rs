use super::*;
use std::path::Path;
use std::sync::Mutex;

/// The quickstart with a short horizon, and a space of two GPUs.
fn inputs() -> (String, Grid) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("scenarios/quickstart.toml"))
        .unwrap()
        .replace("requests = 20000", "requests = 300");
    let grid = Grid::from_toml_str(
        "[objective]\ngpu_hour_usd = { \"h100-sxm\" = 2.49, \"h200\" = 3.49 }\n[axes]\n\"hardware.preset\" = [\"h100-sxm\", \"h200\"]\n",
        "space.toml",
    )
    .unwrap();
    (text, grid)
}

fn query() -> PlanQuery {
    PlanQuery {
        demand_rps: 20.0,
        headroom: 0.0,
        attainment: 0.99,
        tolerance: 0.05,
        energy_usd_per_kwh: None,
    }
}

/// A plan whose checkpoint lost an option (interrupted before it
/// finished) reruns only that option and gives the same plan.
#[test]
fn an_interrupted_plan_resumes_from_its_checkpointed_options() {
    let (text, grid) = inputs();
    let q = query();
    let dir = tempfile::tempdir().unwrap();
    let options = dir.path().join("options");
    let ran = Mutex::new(Vec::new());
    let log = |i: usize, _: &Probe| ran.lock().unwrap().push(i);
    let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
    let whole =
        plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, Some(&c), None, &log).unwrap();
    let first_run = std::mem::take(&mut *ran.lock().unwrap());
    assert!(first_run.contains(&0) && first_run.contains(&1));
    std::fs::remove_file(options.join("1.json")).unwrap();

    let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
    assert_eq!(c.done.keys().copied().collect::<Vec<_>>(), [0]);
    let resumed =
        plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, Some(&c), None, &log).unwrap();
    assert_eq!(resumed, whole);
    // Option 0 ran again only for the winner's headroom, if it won.
    let again = ran.lock().unwrap().clone();
    assert_eq!(
        again.iter().filter(|&&i| i == 0).count(),
        whole.headroom_simulations * usize::from(whole.best == Some(0)),
        "{again:?}"
    );
    assert!(again.contains(&1));
    // Another query does not reuse the checkpoint.
    let other: Checkpoint<StagedOption> =
        Checkpoint::open_in(&options, &text, &grid.text, "other").unwrap();
    assert!(other.done.is_empty());
}

/// A checkpointed option whose figures were edited (its cost, its
/// count without its cost) is not trusted: the resumed plan re-derives
/// or reruns it and gives the uninterrupted plan's answer.
#[test]
fn an_edited_checkpoint_resumes_into_the_plan_it_would_have_given() {
    let (text, grid) = inputs();
    let q = query();
    let dir = tempfile::tempdir().unwrap();
    let options = dir.path().join("options");
    let quiet = |_: usize, _: &Probe| {};
    let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
    let whole = plan_deployment(
        &text,
        "q.toml",
        &grid,
        &q,
        Shard::ALL,
        Some(&c),
        None,
        &quiet,
    )
    .unwrap();
    let edits: [fn(&mut serde_json::Value); 3] = [
        |v| v["result"]["fleet"]["usd_per_month"] = 1.0.into(),
        |v| v["result"]["fleet"]["usd_per_month"] = (-5000.0).into(),
        |v| v["result"]["fleet"]["gpu_hour_usd"] = 0.01.into(),
    ];
    for edit in edits {
        for i in 0..2 {
            let f = options.join(format!("{i}.json"));
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            if v["result"]["fleet"].is_null() {
                continue;
            }
            edit(&mut v);
            std::fs::write(&f, v.to_string()).unwrap();
        }
        let c = Checkpoint::open_in(&options, &text, &grid.text, "q").unwrap();
        let resumed = plan_deployment(
            &text,
            "q.toml",
            &grid,
            &q,
            Shard::ALL,
            Some(&c),
            None,
            &quiet,
        )
        .unwrap();
        assert_eq!(resumed, whole);
        resumed.check().unwrap();
    }
}

/// Shards plan their options apart; merged, they give the whole plan's
/// answer.
#[test]
fn merged_shards_give_the_whole_plans_answer() {
    let (text, grid) = inputs();
    let q = query();
    let quiet = |_: usize, _: &Probe| {};
    let whole =
        plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, None, None, &quiet).unwrap();
    let part = |index| {
        let s = Shard { index, count: 2 };
        plan_deployment(&text, "q.toml", &grid, &q, s, None, None, &quiet).unwrap()
    };
    let (a, b) = (part(1), part(0));
    assert_eq!(a.shard, Some(Shard { index: 1, count: 2 }));
    assert!(a.options.iter().all(|o| o.index == 1));
    let names = ["a".to_string(), "b".to_string()];
    let merged = super::super::merge(vec![a.clone(), b], &names, &quiet).unwrap();
    assert_eq!(merged.best, whole.best);
    let fleet = |p: &DeployPlan| {
        p.options
            .iter()
            .find(|o| Some(o.index) == p.best)
            .and_then(|o| o.fleet.clone())
    };
    assert_eq!(fleet(&merged), fleet(&whole));
    assert_eq!(merged.shard, None);
    let e = super::super::merge(vec![a.clone()], &names, &quiet).unwrap_err();
    assert!(e.0.contains("shard 0/2 is missing"), "{e}");
    // An edited shard is refused with the option named: a cost that
    // does not follow from its count and price, an option not in the
    // space, an attainment below the target.
    let b = part(0);
    let edited = |edit: &dyn Fn(&mut OptionResult)| {
        let mut a = a.clone();
        edit(&mut a.options[0]);
        super::super::merge(vec![a, b.clone()], &names, &quiet)
            .unwrap_err()
            .0
    };
    let e = edited(&|o| o.fleet.as_mut().unwrap().usd_per_month = -1.0);
    assert!(e.contains("option 1") && e.contains("usd_per_month"), "{e}");
    let e = edited(&|o| o.index = 999);
    assert!(e.contains("option 999 is not in the space"), "{e}");
    let e = edited(&|o| o.fleet.as_mut().unwrap().attainment = 0.5);
    assert!(e.contains("below the 99.00 % target"), "{e}");
}

/// The space's text with its longest axis cut by its last value, again
/// and again, until it has at most `budget` options (a `zip` group is
/// one axis).
fn sub_space(text: &str, budget: usize) -> String {
    let mut t: toml::Table = text.parse().unwrap();
    let axes = t.get_mut("axes").unwrap().as_table_mut().unwrap();
    // A dimension's lists: one axis, or a zip group's axes together.
    fn lists(v: &mut toml::Value) -> Vec<&mut Vec<toml::Value>> {
        match v {
            toml::Value::Array(a) => vec![a],
            toml::Value::Table(z) => z.iter_mut().filter_map(|(_, l)| l.as_array_mut()).collect(),
            _ => Vec::new(),
        }
    }
    loop {
        let lens: Vec<usize> = axes
            .iter_mut()
            .map(|(_, v)| lists(v).first().map_or(1, |l| l.len()))
            .collect();
        if lens.iter().product::<usize>() <= budget {
            break;
        }
        let longest = *lens.iter().max().unwrap();
        let i = lens.iter().position(|&l| l == longest).unwrap();
        let (_, v) = axes.iter_mut().nth(i).unwrap();
        for l in lists(v) {
            l.pop();
        }
    }
    toml::to_string(&t).unwrap()
}

/// The bounded search against the exhaustive grid on a sub-space of
/// every example space (at most four options, a 300-request horizon,
/// a quarter of the demand of its usage line): the same winner with the
/// same fleet,
/// the same options pruned for not working, and every option the
/// bounds left unsimulated dearer than the winner in the grid too.
#[test]
fn the_bounded_plan_equals_the_exhaustive_grid_on_every_example_space() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut spaces: Vec<_> = std::fs::read_dir(root.join("scenarios/spaces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    spaces.sort();
    let quiet = |_: usize, _: &Probe| {};
    for space in spaces {
        let text = std::fs::read_to_string(&space).unwrap();
        let usage = text
            .lines()
            .find_map(|l| l.split("servesim plan ").nth(1))
            .unwrap();
        let words: Vec<&str> = usage.split_whitespace().collect();
        let demand: f64 = words[words.iter().position(|w| *w == "--demand").unwrap() + 1]
            .parse()
            .unwrap();
        let scenario = std::fs::read_to_string(root.join(words[0])).unwrap();
        let scenario: String = scenario
            .lines()
            .map(|l| match l.trim_start().strip_prefix("requests = ") {
                Some(_) => "requests = 300".to_string(),
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        let grid = Grid::from_toml_str(&sub_space(&text, 4), "space.toml").unwrap();
        // A quarter of the usage line's demand keeps the fleets, and so
        // the grid's counts, small.
        let q = PlanQuery {
            demand_rps: demand / 4.0,
            ..query()
        };
        let name = space.display();
        let cache = ProbeCache::default();
        let searched = plan_deployment(
            &scenario,
            "s.toml",
            &grid,
            &q,
            Shard::ALL,
            None,
            Some(&cache),
            &quiet,
        )
        .unwrap();
        let most = searched
            .options
            .iter()
            .filter_map(|o| o.fleet.as_ref())
            .map(|f| f.units.unwrap_or(f.replicas))
            .max()
            .unwrap_or(1);
        let all = super::super::exhaustive(&scenario, "s.toml", &grid, &q, most + 1).unwrap();
        assert_eq!(searched.best, all.best, "{name}");
        let of =
            |p: &DeployPlan, i: usize| p.options.iter().find(|o| o.index == i).cloned().unwrap();
        if let Some(b) = searched.best {
            assert_eq!(
                of(&searched, b).fleet.map(|f| f.replicas),
                of(&all, b).fleet.map(|f| f.replicas),
                "{name}"
            );
        }
        let best = searched.options[0].fleet.as_ref().map(|f| f.usd_per_month);
        for o in &searched.options {
            let grid = of(&all, o.index);
            let skipped = o
                .pruned
                .as_deref()
                .is_some_and(|r| r.starts_with(CANNOT_WIN));
            if skipped {
                if let (Some(g), Some(best)) = (&grid.fleet, best) {
                    assert!(g.usd_per_month > best, "{name}: {o:?} against {grid:?}");
                }
            } else if o.pruned.is_some() {
                assert!(grid.fleet.is_none(), "{name}: {o:?} against {grid:?}");
            }
        }
    }
}

/// A price of electricity enters every option's cost and the bounds:
/// at none the cheap, slow A100s win; at $20 per kWh the H100, which
/// serves the demand on fewer GPUs drawing less energy in all, does —
/// the answer the exhaustive grid gives with the same price, and each
/// option's least cost stays below what it is found to cost.
#[test]
fn a_high_energy_price_can_change_the_chosen_option() {
    let (text, _) = inputs();
    let grid = Grid::from_toml_str(
        "[objective]\ngpu_hour_usd = { \"h100-sxm\" = 2.49, \"a100-80gb\" = 0.40 }\n[axes]\n\"hardware.preset\" = [\"h100-sxm\", \"a100-80gb\"]\n",
        "space.toml",
    )
    .unwrap();
    let quiet = |_: usize, _: &Probe| {};
    let plan = |energy| {
        let q = PlanQuery {
            energy_usd_per_kwh: energy,
            ..query()
        };
        let p =
            plan_deployment(&text, "q.toml", &grid, &q, Shard::ALL, None, None, &quiet).unwrap();
        p.check().unwrap();
        (q, p)
    };
    let (_, cheap) = plan(None);
    assert_eq!(cheap.best, Some(1), "{cheap:?}");
    let f = cheap.options[0].fleet.as_ref().unwrap();
    assert_eq!(f.energy_usd_per_month, None);
    let (q, dear) = plan(Some(20.0));
    assert_eq!(dear.best, Some(0), "{dear:?}");
    assert_eq!(dear.energy_usd_per_kwh, Some(20.0));
    let base: toml::Table = text.parse().unwrap();
    let space = options(&base, &grid).unwrap();
    let price = price_of(&grid).unwrap();
    for o in &dear.options {
        let f = o.fleet.as_ref().unwrap();
        let kwh = f.energy_kwh_per_month.unwrap();
        let usd = f.energy_usd_per_month.unwrap();
        assert!((usd - kwh * 20.0).abs() < 1e-6, "{f:?}");
        let gpus = f.gpus as f64 * f.gpu_hour_usd * 730.0;
        assert!((f.usd_per_month - gpus - usd).abs() < 1e-6, "{f:?}");
        let (_, _, t) = space.iter().find(|(i, _, _)| *i == o.index).unwrap();
        let (s, p) = resolve(t, "q.toml", price).unwrap();
        let n = f.units.unwrap_or(f.replicas);
        // Every GPU draws at least its idle power, whatever its load.
        let idle = super::super::idle_w_per_count(&s).unwrap() * n as f64 * 0.73;
        assert!(kwh >= idle, "{kwh} kWh below the idle {idle}");
        assert!(super::super::least_usd(&s, n, p, &q) <= f.usd_per_month);
    }
    let all = super::super::exhaustive(&text, "q.toml", &grid, &q, 4).unwrap();
    assert_eq!(all.best, dear.best);
    // No board power, no energy price: such an option is pruned.
    let spec = text.replace(
        "[hardware]\npreset = \"h100-sxm\"",
        "[hardware.spec]\nbf16_tflops = 900.0\nmemory_gib = 80.0\nmemory_bw_tbyte_s = 3.0\ninterconnect_gbyte_s = 400.0\ninterconnect_latency_us = 5.0\npcie_gbyte_s = 64.0",
    );
    assert_ne!(spec, text);
    let flat = Grid::from_toml_str(
        "[objective]\ngpu_hour_usd = 2.0\n[axes]\n\"engine.max_num_seqs\" = [64]\n",
        "s.toml",
    )
    .unwrap();
    let p = plan_deployment(&spec, "q.toml", &flat, &q, Shard::ALL, None, None, &quiet);
    let p = p.unwrap();
    let why = p.options[0].pruned.as_deref().unwrap_or("");
    assert!(why.contains("no board power (tdp_w)"), "{p:?}");
}

/// The throughput ceiling is a bound: no option the exhaustive grid
/// sizes needs fewer replicas than the bound's least count, at demands
/// from one replica's worth to several.
#[test]
fn the_least_count_never_exceeds_the_exhaustive_grids() {
    let (text, grid) = inputs();
    for demand in [5.0, 20.0, 60.0] {
        let q = PlanQuery {
            demand_rps: demand,
            ..query()
        };
        let all = super::super::exhaustive(&text, "q.toml", &grid, &q, 8).unwrap();
        let base: toml::Table = text.parse().unwrap();
        let space = options(&base, &grid).unwrap();
        let price = price_of(&grid).unwrap();
        let mut bounded = 0;
        for o in &all.options {
            let Some(f) = &o.fleet else { continue };
            let (_, _, t) = space.iter().find(|(i, _, _)| *i == o.index).unwrap();
            let (s, _) = resolve(t, "q.toml", price).unwrap();
            if let OptionBound::Count { fewest, .. } = bound::bound(&s, q.sized_for_rps()) {
                assert!(
                    fewest <= f.replicas,
                    "{demand} req/s: {o:?}: bound {fewest}"
                );
                bounded += 1;
            }
        }
        assert!(bounded > 0, "no option bounded at {demand} req/s");
    }
}
