//! Builds the model calibrate and validate run from what the user gave: a
//! preset or config.json with random weights, a safetensors file, or a GGUF
//! file (architecture, weights and tokenizer in one) — or from a profile.

use crate::config::ModelConfig;
use crate::device::OpenDevice;
use crate::error::{first_line, input, Result};
use crate::model::{random_weights, Model};
use crate::tokenizer::Tokenizer;
use candle_core::{DType, Device};
use sim::profile::{ProfileModel, WeightsInfo};
use std::path::Path;

/// A model ready to run, with where its weights came from.
pub struct Loaded {
    pub model: Model,
    pub weights: WeightsInfo,
    pub tokenizer: Option<Tokenizer>,
}

/// Parses `--dtype`.
pub fn parse_dtype(s: &str) -> Result<DType> {
    match s {
        "f32" => Ok(DType::F32),
        "f16" => Ok(DType::F16),
        "bf16" => Ok(DType::BF16),
        _ => Err(input(format!(
            "--dtype: unknown dtype {s:?}; allowed: f32, f16, bf16"
        ))),
    }
}

pub fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => "f32",
    }
}

/// Loads `--model` / `--weights` onto the device. Without weights the model
/// gets seeded random weights (timing does not depend on their values).
pub fn load(
    model: Option<&str>,
    weights: Option<&Path>,
    dtype: DType,
    dev: &OpenDevice,
    seed: u64,
) -> Result<Loaded> {
    dev.check_dtype(dtype)?;
    let Some(path) = weights else {
        let m = model.ok_or_else(|| {
            input("--model is required (a catalog preset or a config.json) unless --weights is a GGUF file")
        })?;
        let cfg = ModelConfig::resolve(m)?;
        let w = random_weights(&cfg, seed, &Device::Cpu)?;
        return Ok(Loaded {
            model: Model::from_tensors(&cfg, w, dtype, &dev.device, "random weights")?,
            weights: WeightsInfo::Random { seed },
            tokenizer: None,
        });
    };
    let origin = path.display().to_string();
    if !path.exists() {
        return Err(input(format!("--weights {origin}: no such file")));
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("gguf") => {
            let g = crate::gguf::read(path)?;
            if let Some(m) = model {
                let want = ModelConfig::resolve(m)?;
                let dims = |c: &ModelConfig| {
                    (
                        c.layers,
                        c.hidden_size,
                        c.num_heads,
                        c.num_kv_heads,
                        c.head_dim,
                        c.intermediate_size,
                        c.vocab_size,
                    )
                };
                if dims(&want) != dims(&g.config) {
                    return Err(input(format!(
                        "--weights {origin} does not match --model {m}: the file holds {} layers × hidden {} (heads {}/{}, MLP {}, vocab {}), the model has {} layers × hidden {} (heads {}/{}, MLP {}, vocab {})",
                        g.config.layers, g.config.hidden_size, g.config.num_heads, g.config.num_kv_heads,
                        g.config.intermediate_size, g.config.vocab_size,
                        want.layers, want.hidden_size, want.num_heads, want.num_kv_heads,
                        want.intermediate_size, want.vocab_size
                    )));
                }
            }
            Ok(Loaded {
                model: Model::from_tensors(&g.config, g.tensors, dtype, &dev.device, &origin)?,
                weights: WeightsInfo::Gguf { path: origin },
                tokenizer: g.tokenizer,
            })
        }
        Some("safetensors") => {
            let m = model.ok_or_else(|| {
                input(format!(
                    "--weights {origin}: a safetensors file needs --model (its config.json or preset)"
                ))
            })?;
            let cfg = ModelConfig::resolve(m)?;
            // No size cap for weights, but a FIFO or device is refused
            // before safetensors maps it.
            sim::input_file::check_file_type(path, "safetensors weights file")?;
            let tensors = candle_core::safetensors::load(path, &Device::Cpu).map_err(|e| {
                input(format!(
                    "{origin}: not a readable safetensors file: {}",
                    first_line(&e)
                ))
            })?;
            Ok(Loaded {
                model: Model::from_tensors(&cfg, tensors, dtype, &dev.device, &origin)?,
                weights: WeightsInfo::Safetensors { path: origin },
                tokenizer: None,
            })
        }
        _ => Err(input(format!(
            "--weights {origin}: unknown weights format; allowed: .safetensors, .gguf"
        ))),
    }
}

/// Rebuilds the model a profile measured (its weights: the same seed, or
/// the same file).
pub fn from_profile(p: &ProfileModel, dev: &OpenDevice) -> Result<Loaded> {
    let dtype = parse_dtype(&p.dtype)?;
    let cfg = ModelConfig::from_profile(p);
    match &p.weights {
        WeightsInfo::Random { seed } => {
            dev.check_dtype(dtype)?;
            let w = random_weights(&cfg, *seed, &Device::Cpu)?;
            Ok(Loaded {
                model: Model::from_tensors(&cfg, w, dtype, &dev.device, "random weights")?,
                weights: p.weights.clone(),
                tokenizer: None,
            })
        }
        WeightsInfo::Gguf { path } => load(None, Some(Path::new(path)), dtype, dev, 0),
        WeightsInfo::Served { url, .. } => Err(input(format!(
            "the profile measured the engine served at {url} through its API: it has no weights to load; run the live engine from a profile of `calibrate --device`"
        ))),
        WeightsInfo::Benchmarked { model } => Err(input(format!(
            "the profile was fitted to benchmark results of {model} (`calibrate --from-bench`): it has no weights to load; run the live engine from a profile of `calibrate --device`"
        ))),
        WeightsInfo::Safetensors { path } => {
            dev.check_dtype(dtype)?;
            sim::input_file::check_file_type(Path::new(path), "safetensors weights file")?;
            let tensors = candle_core::safetensors::load(path, &Device::Cpu).map_err(|e| {
                input(format!(
                    "{path}: not a readable safetensors file: {}",
                    first_line(&e)
                ))
            })?;
            Ok(Loaded {
                model: Model::from_tensors(&cfg, tensors, dtype, &dev.device, path)?,
                weights: p.weights.clone(),
                tokenizer: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceSpec;

    #[test]
    fn weights_errors_name_the_flag_and_the_file() {
        let dev = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
        let e = load(None, None, DType::F32, &dev, 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--model is required"), "{e}");
        let e = load(
            Some("smollm2-135m"),
            Some(Path::new("/nonexistent/w.gguf")),
            DType::F32,
            &dev,
            1,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("no such file"), "{e}");
        let e = parse_dtype("f64").unwrap_err().to_string();
        assert!(e.contains("allowed: f32, f16, bf16"), "{e}");
        let e = load(Some("smollm2-135m"), None, DType::BF16, &dev, 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no bf16 matrix multiply"), "{e}");
    }

    #[test]
    fn a_safetensors_file_of_another_model_is_refused_by_tensor_name() {
        let dir = std::env::temp_dir().join(format!("servesim-st-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = crate::model::tests::tiny_config();
        let w = random_weights(&cfg, 1, &Device::Cpu).unwrap();
        let p = dir.join("w.safetensors");
        candle_core::safetensors::save(&w, &p).unwrap();
        let json = dir.join("config.json");
        // The same model but one more layer than the file holds.
        std::fs::write(
            &json,
            r#"{"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
                "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 211,
                "max_position_embeddings": 256}"#,
        )
        .unwrap();
        let dev = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
        let e = load(Some(json.to_str().unwrap()), Some(&p), DType::F32, &dev, 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("weights do not match the config"), "{e}");
        assert!(e.contains("model.layers.2."), "{e}");
        // With the right config it loads and runs.
        std::fs::write(
            &json,
            std::fs::read_to_string(&json)
                .unwrap()
                .replace("\"num_hidden_layers\": 3", "\"num_hidden_layers\": 2"),
        )
        .unwrap();
        let l = load(Some(json.to_str().unwrap()), Some(&p), DType::F32, &dev, 1).unwrap();
        assert_eq!(l.model.generate_alone(&[1, 2, 3], 2).unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
