//! The model presets: one Hugging Face `config.json` per preset, embedded as
//! data (`models/<key>.json`, read by [`parse_config`](super::parse_config)),
//! with where it comes from and under which license. The files carry the
//! published configs' architecture keys; keys the simulator does not read
//! are kept only where they help a reader check a file against its source.

use super::{parse_config, HfModel, ModelArch};

/// A model preset: the keys users type, its `config.json`, and its source.
pub struct ModelPreset {
    pub key: &'static str,
    pub aliases: &'static [&'static str],
    /// Display name.
    pub name: &'static str,
    /// Where the architecture numbers come from (shown with every result).
    pub source: &'static str,
    /// The published `config.json` the file follows.
    pub url: &'static str,
    /// The model's license, and how the file departs from the published one.
    pub license: &'static str,
    /// The embedded `config.json`.
    pub config: &'static str,
    /// The architecture the config describes.
    pub arch: fn() -> ModelArch,
}

impl ModelPreset {
    /// The preset's config read as any `config.json` is: the architecture,
    /// the family, and the weight dtype its `quantization_config` declares.
    pub fn load(&self) -> HfModel {
        load(self.config, self.name)
    }
}

/// Reads an embedded config (checked by the tests: every preset parses).
fn load(config: &str, name: &str) -> HfModel {
    let mut m = parse_config(config, name).expect("an embedded preset config parses");
    m.arch.name = name.to_string();
    m
}

macro_rules! preset {
    ($key:literal, $name:literal, [$($alias:literal),*], $source:literal, $url:literal, $license:literal) => {
        ModelPreset {
            key: $key,
            aliases: &[$($alias),*],
            name: $name,
            source: $source,
            url: $url,
            license: $license,
            config: include_str!(concat!("models/", $key, ".json")),
            arch: || load(include_str!(concat!("models/", $key, ".json")), $name).arch,
        }
    };
}

pub const MODELS: &[ModelPreset] = &[
    preset!(
        "llama-3.1-8b",
        "Llama-3.1-8B",
        ["meta-llama/llama-3.1-8b", "meta-llama/llama-3.1-8b-instruct"],
        "meta-llama/Llama-3.1-8B config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/meta-llama--Meta-Llama-3.1-8B_config.json",
        "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
        "Llama 3.1 Community License"
    ),
    preset!(
        "llama-3.1-70b",
        "Llama-3.1-70B",
        ["meta-llama/llama-3.1-70b", "meta-llama/llama-3.1-70b-instruct"],
        "meta-llama/Llama-3.1-70B config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/meta-llama--Meta-Llama-3.1-70B_config.json",
        "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json",
        "Llama 3.1 Community License"
    ),
    preset!(
        "llama-3.1-405b",
        "Llama-3.1-405B",
        ["meta-llama/llama-3.1-405b", "meta-llama/llama-3.1-405b-instruct"],
        "meta-llama/Llama-3.1-405B config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/meta-llama--Meta-Llama-3.1-405B_config.json",
        "https://huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json",
        "Llama 3.1 Community License"
    ),
    preset!(
        "llama-2-7b",
        "Llama-2-7B",
        ["meta-llama/llama-2-7b-hf"],
        "meta-llama/Llama-2-7b-hf config.json",
        "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
        "Llama 2 Community License"
    ),
    preset!(
        "llama-2-70b",
        "Llama-2-70B",
        ["meta-llama/llama-2-70b-hf"],
        "meta-llama/Llama-2-70b-hf config.json",
        "https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json",
        "Llama 2 Community License"
    ),
    preset!(
        "qwen2.5-7b",
        "Qwen2.5-7B",
        ["qwen/qwen2.5-7b", "qwen/qwen2.5-7b-instruct"],
        "Qwen/Qwen2.5-7B config.json",
        "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json",
        "Apache-2.0 (max_position_embeddings as the Instruct config: 32768)"
    ),
    preset!(
        "qwen2.5-72b",
        "Qwen2.5-72B",
        ["qwen/qwen2.5-72b", "qwen/qwen2.5-72b-instruct"],
        "Qwen/Qwen2.5-72B config.json",
        "https://huggingface.co/Qwen/Qwen2.5-72B-Instruct/blob/main/config.json",
        "Qwen License (max_position_embeddings as the Instruct config: 32768)"
    ),
    preset!(
        "mistral-7b",
        "Mistral-7B-v0.3",
        ["mistral-7b-v0.3", "mistralai/mistral-7b-v0.3"],
        "mistralai/Mistral-7B-v0.3 config.json",
        "https://huggingface.co/mistralai/Mistral-7B-v0.3/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "llama-3.2-1b",
        "Llama-3.2-1B",
        ["meta-llama/llama-3.2-1b", "meta-llama/llama-3.2-1b-instruct"],
        "meta-llama/Llama-3.2-1B config.json",
        "https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json",
        "Llama 3.2 Community License"
    ),
    preset!(
        "smollm2-135m",
        "SmolLM2-135M",
        ["huggingfacetb/smollm2-135m", "huggingfacetb/smollm2-135m-instruct"],
        "HuggingFaceTB/SmolLM2-135M config.json",
        "https://huggingface.co/HuggingFaceTB/SmolLM2-135M/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "mixtral-8x7b",
        "Mixtral-8x7B",
        ["mistralai/mixtral-8x7b-v0.1", "mistralai/mixtral-8x7b-instruct-v0.1"],
        "mistralai/Mixtral-8x7B-v0.1 config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/mistralai--Mixtral-8x7B-v0.1_config.json",
        "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "deepseek-v3",
        "DeepSeek-V3",
        ["deepseek-ai/deepseek-v3", "deepseek-ai/deepseek-v3-base"],
        "deepseek-ai/DeepSeek-V3 config.json (MTP module excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/deepseek-ai--DeepSeek-V3_config.json",
        "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
        "MIT (code) / DeepSeek Model License; quantization_config left out: the preset keeps the scenario's weight_dtype (bf16 by default)"
    ),
    preset!(
        "deepseek-v3.1",
        "DeepSeek-V3.1",
        ["deepseek-ai/deepseek-v3.1", "deepseek-ai/deepseek-v3.1-base"],
        "deepseek-ai/DeepSeek-V3.1 config.json (MTP module excluded): the architecture of DeepSeek-V3, as its config shows; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/nvidia--DeepSeek-V3.1-NVFP4_config.json (identical to DeepSeek-V3's but for quantization_config)",
        "https://huggingface.co/deepseek-ai/DeepSeek-V3.1/blob/main/config.json",
        "MIT; quantization_config left out: the preset keeps the scenario's weight_dtype (bf16 by default)"
    ),
    preset!(
        "deepseek-r1",
        "DeepSeek-R1",
        ["deepseek-ai/deepseek-r1", "deepseek-ai/deepseek-r1-0528"],
        "deepseek-ai/DeepSeek-R1 config.json (MTP module excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/deepseek-ai--DeepSeek-R1_config.json",
        "https://huggingface.co/deepseek-ai/DeepSeek-R1/blob/main/config.json",
        "MIT"
    ),
    preset!(
        "deepseek-v3.2",
        "DeepSeek-V3.2",
        ["deepseek-ai/deepseek-v3.2", "deepseek-v32"],
        "deepseek-ai/DeepSeek-V3.2 config.json (MTP module excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/deepseek-ai--DeepSeek-V3.2_config.json",
        "https://huggingface.co/deepseek-ai/DeepSeek-V3.2/blob/main/config.json",
        "MIT"
    ),
    preset!(
        "kimi-k2.5",
        "Kimi-K2.5",
        ["moonshotai/kimi-k2.5"],
        "moonshotai/Kimi-K2.5 config.json (text model; vision tower excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/moonshotai--Kimi-K2.5_config.json",
        "https://huggingface.co/moonshotai/Kimi-K2.5/blob/main/config.json",
        "Modified MIT; INT4 experts with group-32 scales are counted at int4's group-128 bytes"
    ),
    preset!(
        "glm-5",
        "GLM-5",
        ["zai-org/glm-5"],
        "zai-org/GLM-5 config.json (MTP layer excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/zai-org--GLM-5_config.json",
        "https://huggingface.co/zai-org/GLM-5/blob/main/config.json",
        "MIT"
    ),
    preset!(
        "minimax-m2.5",
        "MiniMax-M2.5",
        ["minimaxai/minimax-m2.5"],
        "MiniMaxAI/MiniMax-M2.5 config.json (MTP modules excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/MiniMaxAI--MiniMax-M2.5_config.json",
        "https://huggingface.co/MiniMaxAI/MiniMax-M2.5/blob/main/config.json",
        "Modified MIT"
    ),
    preset!(
        "gpt-oss-20b",
        "gpt-oss-20b",
        ["openai/gpt-oss-20b"],
        "openai/gpt-oss-20b config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/openai--gpt-oss-20b_config.json",
        "https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "gpt-oss-120b",
        "gpt-oss-120b",
        ["openai/gpt-oss-120b"],
        "openai/gpt-oss-120b config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/openai--gpt-oss-120b_config.json",
        "https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "qwen3-8b",
        "Qwen3-8B",
        ["qwen/qwen3-8b"],
        "Qwen/Qwen3-8B config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-8B_config.json",
        "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "qwen3-32b",
        "Qwen3-32B",
        ["qwen/qwen3-32b"],
        "Qwen/Qwen3-32B config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-32B_config.json",
        "https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "qwen3-235b-a22b",
        "Qwen3-235B-A22B",
        ["qwen/qwen3-235b-a22b", "qwen/qwen3-235b-a22b-instruct-2507"],
        "Qwen/Qwen3-235B-A22B config.json; checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-235B-A22B_config.json",
        "https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "qwen3.5-397b-a17b",
        "Qwen3.5-397B-A17B",
        ["qwen/qwen3.5-397b-a17b"],
        "Qwen/Qwen3.5-397B-A17B config.json (text model; vision tower and MTP layer excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3.5-397B-A17B_config.json",
        "https://huggingface.co/Qwen/Qwen3.5-397B-A17B/blob/main/config.json",
        "Apache-2.0"
    ),
    preset!(
        "llama-4-scout",
        "Llama-4-Scout-17B-16E",
        ["meta-llama/llama-4-scout-17b-16e", "meta-llama/llama-4-scout-17b-16e-instruct"],
        "meta-llama/Llama-4-Scout-17B-16E-Instruct config.json (text model; vision tower excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json",
        "https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E-Instruct/blob/main/config.json",
        "Llama 4 Community License"
    ),
    preset!(
        "llama-4-maverick",
        "Llama-4-Maverick-17B-128E",
        ["meta-llama/llama-4-maverick-17b-128e", "meta-llama/llama-4-maverick-17b-128e-instruct"],
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct config.json (text model; vision tower excluded); checked against ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/model_configs/meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json",
        "https://huggingface.co/meta-llama/Llama-4-Maverick-17B-128E-Instruct/blob/main/config.json",
        "Llama 4 Community License"
    ),
    preset!(
        "gemma-3-27b",
        "Gemma-3-27B",
        ["google/gemma-3-27b-it", "google/gemma-3-27b-pt"],
        "google/gemma-3-27b-it config.json (text model; vision tower excluded)",
        "https://huggingface.co/google/gemma-3-27b-it/blob/main/config.json",
        "Gemma Terms of Use"
    ),
];

/// Looks a model preset up by key or alias, case-insensitively.
pub fn model_preset(name: &str) -> Option<&'static ModelPreset> {
    let n = name.to_ascii_lowercase();
    MODELS
        .iter()
        .find(|p| p.key == n || p.aliases.contains(&n.as_str()))
}

/// The names under which a recorded or served model id may be a preset, in
/// the order to try them: as written; without a checkpoint-format suffix
/// (`-FP8`, `-NVFP4`, …, which names the quantization, not the
/// architecture); without its organisation (a re-published checkpoint such
/// as `nvidia/DeepSeek-R1-NVFP4` keeps the original's architecture); without
/// a GGUF file's `.Q4_1.gguf` tail; and without an `-Instruct`/`-Chat`/`-it`
/// tuning suffix. Shared by `calibrate --engine` (the served name) and
/// `accuracy` (the benchmark file's model id).
pub fn checkpoint_name_candidates(id: &str) -> Vec<String> {
    fn strip_ci<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
        let cut = s.len().checked_sub(suffix.len())?;
        (s.is_char_boundary(cut) && s[cut..].eq_ignore_ascii_case(suffix)).then(|| &s[..cut])
    }
    let mut c = vec![id.to_string()];
    let extend = |c: &mut Vec<String>, f: &dyn Fn(&str) -> Vec<String>| {
        let more: Vec<String> = c.iter().flat_map(|n| f(n)).collect();
        c.extend(more);
    };
    extend(&mut c, &|n| {
        [
            "-fp8-dynamic",
            "-fp8",
            "-nvfp4",
            "-mxfp4",
            "-fp4",
            "-awq",
            "-gptq",
        ]
        .iter()
        .filter_map(|sfx| strip_ci(n, sfx).map(str::to_string))
        .collect()
    });
    extend(&mut c, &|n| {
        n.rsplit_once('/')
            .map(|(_, repo)| vec![repo.to_string()])
            .unwrap_or_default()
    });
    extend(&mut c, &|n| {
        strip_ci(n, ".gguf")
            .and_then(|f| f.split('.').next())
            .map(|stem| vec![stem.to_string()])
            .unwrap_or_default()
    });
    extend(&mut c, &|n| {
        ["-instruct", "-chat", "-it"]
            .iter()
            .filter_map(|sfx| strip_ci(n, sfx).map(str::to_string))
            .collect()
    });
    let mut seen = std::collections::BTreeSet::new();
    c.retain(|n| seen.insert(n.to_ascii_lowercase()));
    c
}

/// Looks a model preset up by key or alias, case-insensitively: its
/// architecture and source.
pub fn model(name: &str) -> Option<(ModelArch, &'static str)> {
    model_preset(name).map(|p| ((p.arch)(), p.source))
}

pub fn model_keys() -> Vec<&'static str> {
    MODELS.iter().map(|p| p.key).collect()
}
