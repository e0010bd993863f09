//! Resolution of a scenario file into a runnable [`Scenario`]: TOML
//! parsing with key paths, presets, the memory plan, profiles.

use super::*;

/// Settings given on the command line (`--seed`, `--step-by-step`,
/// `--lenient`). They edit the scenario's TOML table before resolution, so
/// they are validated like the file's own keys and reach every pool, which
/// resolves from the same table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// `seed`.
    pub seed: Option<u64>,
    /// `[engine] decode_runs = false`, in every pool too.
    pub step_by_step: bool,
    /// `lenient = true` on every trace `[workload]` reads.
    pub lenient: bool,
}

impl Overrides {
    /// Applies the overrides to a parsed scenario table.
    pub fn apply(&self, t: &mut toml::Table) -> Result<(), Invalid> {
        use crate::config::keypath;
        let set = |t: &mut toml::Table, k: &str, v: toml::Value| {
            keypath::set(t, k, v).map_err(|m| (k.to_string(), m))
        };
        if let Some(seed) = self.seed {
            let v = i64::try_from(seed).map_err(|_| {
                (
                    "seed".to_string(),
                    format!(
                        "--seed must be at most {} (a TOML integer), got {seed}",
                        i64::MAX
                    ),
                )
            })?;
            set(t, "seed", v.into())?;
        }
        if self.step_by_step {
            set(t, "engine.decode_runs", false.into())?;
            let pools = keypath::get(t, "fleet.pools")
                .and_then(toml::Value::as_array)
                .map_or(0, Vec::len);
            for i in 0..pools {
                if keypath::get(t, &format!("fleet.pools.{i}.engine")).is_some() {
                    set(
                        t,
                        &format!("fleet.pools.{i}.engine.decode_runs"),
                        false.into(),
                    )?;
                }
            }
        }
        if self.lenient {
            // Every place a trace table may sit in `[workload]` (a trace
            // given otherwise is left for validation to name).
            for at in [
                "workload.trace",
                "workload.length_pairs.trace",
                "workload.prompt_tokens.trace",
                "workload.output_tokens.trace",
            ] {
                if keypath::get(t, at).is_some_and(toml::Value::is_table) {
                    set(t, &format!("{at}.lenient"), true.into())?;
                }
            }
        }
        Ok(())
    }
}

/// Parses scenario text into its table; syntax errors name the line.
fn parse_table(text: &str, origin: &str) -> Result<toml::Table, ScenarioError> {
    text.parse().map_err(|e: toml::de::Error| {
        let line = e
            .span()
            .map(|s| format!("line {}: ", line_of(text, s.start)))
            .unwrap_or_default();
        ScenarioError::new(
            origin,
            "",
            format!(
                "{line}TOML syntax error: {}",
                e.message().trim().replace('\n', "; ")
            ),
        )
    })
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        Self::load_with(path, &Overrides::default())
    }

    /// Reads a scenario file, applies command-line `overrides` to its table
    /// and validates the result.
    pub fn load_with(path: &Path, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
        let origin = path.display().to_string();
        let text = crate::input_file::read_config(path, "scenario file")
            .map_err(|e| ScenarioError::new(&origin, "", e.reason))?;
        let mut table = parse_table(&text, &origin)?;
        overrides
            .apply(&mut table)
            .map_err(|(k, m)| ScenarioError::new(&origin, k, m))?;
        Self::from_table(table, &origin)
    }

    /// Parses and validates scenario text; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        Self::from_table(parse_table(text, origin)?, origin)
    }

    /// Validates an already-parsed table (sweeps edit the table, then call this).
    pub fn from_table(table: toml::Table, origin: &str) -> Result<Scenario, ScenarioError> {
        let (file, mut notes) = Self::file_of_table(table, origin)?;
        let mut s = Self::from_file(file, origin)?;
        if let Some((path, p)) = &s.profile {
            notes.extend(p.warnings(path));
        }
        s.notes = notes;
        Ok(s)
    }

    /// The checks of a table that need no resolution: its keys, their
    /// types and enum names (pool roles, policies), and every value's range.
    /// A plan's options must all pass them (a typo in a space is the user's
    /// to fix), while a model that does not fit its option's hardware only
    /// prunes that option.
    pub fn check_values(table: toml::Table, origin: &str) -> Result<(), ScenarioError> {
        let (file, _) = Self::file_of_table(table, origin)?;
        let err = |key: &str, msg: String| ScenarioError::new(origin, key, msg);
        validate(&file).map_err(|(k, m)| err(&k, m))?;
        crate::scenario::lifecycle_cfg::validate(&file).map_err(|(k, m)| err(&k, m))?;
        crate::scenario::canary_cfg::validate(&file).map_err(|(k, m)| err(&k, m))
    }

    /// The table deserialized, with the notes of its unit normalization.
    fn file_of_table(
        mut table: toml::Table,
        origin: &str,
    ) -> Result<(ScenarioFile, Vec<String>), ScenarioError> {
        let notes =
            units::normalize(&mut table).map_err(|(k, m)| ScenarioError::new(origin, k, m))?;
        pools_cfg::check_table(&table).map_err(|(k, m)| ScenarioError::new(origin, k, m))?;
        let given: Vec<String> = BATCHING_KEYS
            .iter()
            .filter(|k| crate::config::keypath::get(&table, &format!("engine.{k}")).is_some())
            .map(|k| k.to_string())
            .collect();
        let mut file: ScenarioFile =
            serde_path_to_error::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
                let path = e.path().to_string();
                let key = if path == "." { String::new() } else { path };
                let msg = e.into_inner().message().trim().replace('\n', "; ");
                let msg = enum_hint::hint(&table, &key, &msg).unwrap_or(msg);
                ScenarioError::new(origin, key, msg)
            })?;
        file.engine_keys_given = Some(given);
        Ok((file, notes))
    }

    /// Validates the values and resolves presets: the scenario and its
    /// pools, at least one (a fleet without `[[fleet.pools]]` is one
    /// implicit colocated pool, see [`pool_plan::implicit`]).
    pub fn from_file(file: ScenarioFile, origin: &str) -> Result<Scenario, ScenarioError> {
        let declared = !file.fleet.pools.is_empty();
        let mut s = Self::resolve_flat(file, origin)?;
        s.pools = if declared {
            pool_plan::resolve(&s.file, origin)?
        } else {
            vec![pool_plan::implicit(&s)]
        };
        Ok(s)
    }

    /// The scenario's own resolution, its pools left out: what each pool
    /// resolves as (the parent's keys with the pool's overrides).
    pub(super) fn resolve_flat(
        mut file: ScenarioFile,
        origin: &str,
    ) -> Result<Scenario, ScenarioError> {
        let err = |key: &str, msg: String| ScenarioError::new(origin, key, msg);
        validate(&file).map_err(|(k, m)| err(&k, m))?;
        crate::scenario::lifecycle_cfg::validate(&file).map_err(|(k, m)| err(&k, m))?;
        crate::scenario::canary_cfg::validate(&file).map_err(|(k, m)| err(&k, m))?;
        if !file.fleet.pools.is_empty() {
            // The pools make the fleet (validated: `replicas` left out or equal).
            file.fleet.replicas = file.fleet.pools.iter().map(|p| p.replicas).sum();
        }

        let profile = load_profile(&file.hardware, origin).map_err(|(k, m)| err(&k, m))?;
        let batching = apply_profile_batching(&mut file, profile.as_ref());
        if let (Some(_), Some((path, _))) = (&batching, &profile) {
            validate(&file).map_err(|(k, m)| {
                err(
                    &k,
                    format!("{m} (with the batching the profile {path} records; set it in [engine] to override)"),
                )
            })?;
        }
        if file.model.config.is_some()
            && (file.model.preset.is_some() || file.model.architecture.is_some())
        {
            return Err(err(
                "model.config",
                "give one of `preset`, `[model.architecture]` or `config`, not several".into(),
            ));
        }
        let mut checkpoint_dtype: Option<Dtype> = None;
        let (model, model_source) = match (&file.model.preset, &file.model.architecture) {
            (None, None) if file.model.config.is_some() => {
                let rel = file.model.config.as_deref().expect("checked");
                let dir = Path::new(origin).parent().unwrap_or(Path::new(""));
                let path = dir.join(rel);
                let hf = catalog::read_config(&path).map_err(|m| err("model.config", m))?;
                checkpoint_dtype = hf.weight_dtype;
                let mut a = hf.arch;
                a.name = Path::new(rel)
                    .parent()
                    .and_then(|d| d.file_name())
                    .map(|d| d.to_string_lossy().to_string())
                    .unwrap_or_else(|| rel.to_string());
                (
                    a,
                    format!("{} ({} family, config.json)", path.display(), hf.family),
                )
            }
            (None, None) if profile.is_some() => {
                let (path, p) = profile.as_ref().expect("checked");
                (
                    p.model.arch(),
                    format!("calibration profile {path} ({})", p.model.source),
                )
            }
            (Some(_), Some(_)) => {
                return Err(err(
                    "model",
                    "give either `preset` or `[model.architecture]`, not both".into(),
                ))
            }
            (None, None) => {
                return Err(err(
                    "model",
                    format!(
                        "missing `preset` (one of: {}) or an inline `[model.architecture]`",
                        catalog::model_keys().join(", ")
                    ),
                ))
            }
            (Some(p), None) => match catalog::model_preset(p) {
                Some(preset) => {
                    let hf = preset.load();
                    checkpoint_dtype = hf.weight_dtype;
                    (hf.arch, preset.source.to_string())
                }
                None => {
                    return Err(err(
                        "model.preset",
                        format!(
                            "unknown model preset {p:?}; known: {}",
                            catalog::model_keys().join(", ")
                        ),
                    ))
                }
            },
            (None, Some(a)) => {
                validate_arch(a).map_err(|(k, m)| err(&format!("model.architecture.{k}"), m))?;
                let mut a = a.clone();
                if a.name.is_empty() {
                    a.name = "custom".into();
                }
                (a, "inline [model.architecture]".to_string())
            }
        };

        if let Some((path, p)) = &profile {
            check_profile_model(&model, p, path).map_err(|(k, m)| err(&k, m))?;
        }
        let hardware = match (&file.hardware.preset, &file.hardware.spec) {
            (None, None) if profile.is_some() => {
                let (path, p) = profile.as_ref().expect("checked");
                p.hardware(path)
            }
            (Some(_), Some(_)) => {
                return Err(err(
                    "hardware",
                    "give either `preset` or `[hardware.spec]`, not both".into(),
                ))
            }
            (None, None) => {
                return Err(err(
                    "hardware",
                    format!(
                        "missing `preset` (one of: {}), an inline `[hardware.spec]` or a calibration `profile`",
                        catalog::hardware_keys().join(", ")
                    ),
                ))
            }
            (Some(p), None) => catalog::hardware(p).ok_or_else(|| {
                err(
                    "hardware.preset",
                    format!(
                        "unknown hardware preset {p:?}; known: {}",
                        catalog::hardware_keys().join(", ")
                    ),
                )
            })?,
            (None, Some(s)) => {
                validate_hw(s).map_err(|(k, m)| err(&format!("hardware.spec.{k}"), m))?;
                let mut s = s.clone();
                if s.name.is_empty() {
                    s.name = "custom".into();
                }
                if s.source.is_empty() {
                    s.source = "inline [hardware.spec]".into();
                }
                s
            }
        };

        // The scenario's dtype, else the checkpoint's, else bf16. fp32 is
        // allowed for completeness (e.g. CPU calibration).
        let mut weight_dtype = file
            .model
            .weight_dtype
            .or(checkpoint_dtype)
            .unwrap_or(Dtype::Bf16);
        let mut kv_dtype = match file.model.kv_dtype {
            Some(d @ (Dtype::Bf16 | Dtype::Fp16 | Dtype::Fp8 | Dtype::Fp32)) => d,
            // TensorRT-LLM keeps an NVFP4 KV cache on Blackwell, whose FP4
            // units read it; vLLM and SGLang offer FP8 at most.
            Some(Dtype::Nvfp4) if hardware.fp4_tflops.is_some() => Dtype::Nvfp4,
            Some(d) => {
                return Err(err(
                    "model.kv_dtype",
                    format!(
                        "KV cache dtype {d} is not supported on {}; allowed: bf16, fp16, fp8, \
                         fp32{}",
                        hardware.name,
                        if hardware.fp4_tflops.is_some() {
                            ", nvfp4"
                        } else {
                            " (nvfp4 on chips with FP4 units)"
                        }
                    ),
                ))
            }
            None if weight_dtype == Dtype::Fp16 => Dtype::Fp16,
            None if weight_dtype == Dtype::Fp32 => Dtype::Fp32,
            None => Dtype::Bf16,
        };

        if let Some((_, p)) = &profile {
            // The profile measured one dtype for weights and cache alike.
            let d = p.model.dtype().expect("validated profile dtype");
            weight_dtype = d;
            kv_dtype = d;
            let f = &file.fleet;
            if f.tensor_parallel != 1 || f.pipeline_parallel != 1 || f.expert_parallel != 1 {
                return Err(err(
                    "fleet",
                    "a calibration profile measures one device: tensor_parallel, \
                     pipeline_parallel and expert_parallel must be 1"
                        .into(),
                ));
            }
        }
        if model.linear_attention.is_some() {
            let pool_on = file.fleet.pools.iter().any(|p| {
                p.engine
                    .as_ref()
                    .and_then(|e| e.get("prefix_caching"))
                    .and_then(|v| v.as_bool())
                    == Some(true)
            });
            if file.engine.prefix_caching || pool_on {
                return Err(err(
                    "engine.prefix_caching",
                    format!(
                        "{} has linear-attention layers, whose recurrent state summarises a whole \
                         prefix and cannot be shared block by block; vLLM turns prefix caching \
                         off for such hybrid models. Set engine.prefix_caching = false",
                        model.name
                    ),
                ));
            }
        }
        let parallel = Parallelism {
            tensor: file.fleet.tensor_parallel,
            pipeline: file.fleet.pipeline_parallel,
            expert: file.fleet.expert_parallel,
            attention_data: file.fleet.attention_data_parallel,
            redundant_experts: file.fleet.num_redundant_experts,
        };
        // With DP attention, heads split over the attention TP group only
        // (checked with the layout below).
        let tp = file.fleet.tensor_parallel;
        if parallel.attention_data.is_none() && model.num_heads % tp != 0 {
            return Err(err(
                "fleet.tensor_parallel",
                format!(
                    "{} attention heads of {} cannot be split over {tp} GPUs; use a divisor of {}",
                    model.num_heads, model.name, model.num_heads
                ),
            ));
        }
        if parallel.attention_data.is_none()
            && model.num_kv_heads % tp != 0
            && tp % model.num_kv_heads != 0
        {
            return Err(err(
                "fleet.tensor_parallel",
                format!(
                    "{} KV heads of {} cannot be split or replicated over {tp} GPUs",
                    model.num_kv_heads, model.name
                ),
            ));
        }

        let max_model_len = match file.engine.max_model_len {
            Some(l) if l > model.max_context => {
                return Err(err(
                    "engine.max_model_len",
                    format!(
                        "{l} exceeds the context length of {} ({})",
                        model.name, model.max_context
                    ),
                ))
            }
            Some(l) => l,
            None => model.max_context,
        };

        parallel
            .validate(&model, &hardware)
            .map_err(|(k, m)| err(&k, m))?;
        let e = &file.engine;
        if e.deepep_mode != Default::default() && e.moe_a2a != crate::config::MoeA2aKind::Deepep {
            return Err(err(
                "engine.deepep_mode",
                "selects DeepEP's kernels: set engine.moe_a2a = \"deepep\" too, or leave it out"
                    .into(),
            ));
        }
        // Each pool resolves on its own, so a pool without EP is checked there.
        if file.fleet.pools.is_empty() && e.moe_a2a != Default::default() && parallel.expert <= 1 {
            return Err(err(
                "engine.moe_a2a",
                format!(
                    "{} dispatches tokens to expert-parallel ranks; this layout has none \
                     (fleet.expert_parallel = 1): leave it out or set it per pool",
                    e.moe_a2a.name()
                ),
            ));
        }

        let mut memory = match &profile {
            Some((_, p)) => p.memory_plan(&file.engine),
            None => MemoryPlan::new(
                &model,
                &hardware,
                weight_dtype,
                kv_dtype,
                &parallel,
                &file.engine,
            ),
        };
        if memory.kv_groups.is_some()
            && file.engine.preemption == crate::config::PreemptionMode::Swap
        {
            // vLLM's hybrid KV cache manager is a V1 engine's, and V1
            // preempts by recomputation only.
            return Err(err(
                "engine.preemption",
                format!(
                    "{} has sliding-window, chunked or linear-attention layers, whose blocks                      vLLM's hybrid KV cache manager (V1) keeps; V1 preempts by recomputation                      only. Set engine.preemption = \"recompute\"",
                    model.name
                ),
            ));
        }
        let mut resident_draft: Option<(String, f64)> = None;
        if let Some(sp) = &file.engine.speculative {
            // A draft model runs beside the target on its tensor-parallel
            // GPUs; MTP / EAGLE heads (a fraction of the target's step) ride
            // any layout the target has.
            let plain_tp =
                parallel.pipeline == 1 && parallel.expert == 1 && parallel.attention_data.is_none();
            if sp.draft_model.is_some() && !plain_tp {
                return Err(err(
                    "engine.speculative.draft_model",
                    "a separate draft model is modelled beside tensor parallelism only; \
                     set fleet.pipeline_parallel and fleet.expert_parallel to 1 and leave \
                     fleet.attention_data_parallel out, or give draft_cost_fraction (MTP / \
                     EAGLE heads) instead"
                        .into(),
                ));
            }
            if parallel.pipeline > 1 {
                return Err(err(
                    "engine.speculative",
                    "speculative decoding is not modelled with pipeline stages; set \
                     fleet.pipeline_parallel to 1"
                        .into(),
                ));
            }
            if let Some((draft, _)) = sp.draft_model.as_ref().and_then(|m| catalog::model(m)) {
                if draft.num_heads % tp != 0 {
                    return Err(err(
                        "engine.speculative.draft_model",
                        format!(
                            "draft {} has {} heads, not divisible by tensor_parallel = {tp}",
                            draft.name, draft.num_heads
                        ),
                    ));
                }
                // KV heads split over the TP group, replicated below one per GPU.
                let kv_heads = (draft.num_kv_heads as f64 / tp as f64).ceil();
                let draft_kv =
                    2.0 * draft.layers as f64 * kv_heads * draft.head_dim as f64 * kv_dtype.bytes();
                let draft_weights = draft.total_params() * weight_dtype.bytes() / tp as f64;
                memory.add_resident_model(draft_weights, draft_kv);
                resident_draft = Some((draft.name.clone(), draft_weights));
            }
            if let Some(n) = sp.draft_layers {
                // An MTP module / EAGLE head: n layers like the stage's
                // (their weights and KV per token, a layer's share of the
                // plan's), resident beside the target.
                let layers = memory.stages[memory.stage as usize].layers.max(1) as f64;
                let share = n as f64 / layers;
                let weights = memory.weight_bytes * share;
                memory.add_resident_model(weights, memory.kv_bytes_per_token * share);
                resident_draft = Some((format!("{n} MTP/EAGLE layer(s)"), weights));
            }
        }
        if file.engine.pinned_prefix_blocks >= memory.kv_blocks.max(1) {
            return Err(err(
                "engine.pinned_prefix_blocks",
                format!(
                    "{} pinned blocks would take the whole KV cache of {} blocks; pin fewer",
                    file.engine.pinned_prefix_blocks, memory.kv_blocks
                ),
            ));
        }
        memory
            .check_fits(
                &model,
                &hardware,
                weight_dtype,
                max_model_len,
                file.engine.max_model_len.is_some(),
            )
            .map_err(|(k, m)| match &resident_draft {
                // The draft's weights are in the figures: name it, and the
                // key that brought it.
                Some((draft, bytes)) => err(
                    "engine.speculative.draft_model",
                    format!(
                        "with the speculative draft {draft} ({:.1} GiB of weights per GPU) beside \
                         it: {m}; pick a smaller draft or more GPUs",
                        bytes / (1u64 << 30) as f64
                    ),
                ),
                None => err(&k, m),
            })?;

        let limits = ServeLimits {
            max_model_len,
            max_batched_tokens: file.engine.max_batched_tokens,
            kv_blocks: memory
                .kv_blocks
                .saturating_sub(file.engine.pinned_prefix_blocks),
        };
        let replica = ReplicaPlan::resolve(
            &file,
            &model,
            &hardware,
            weight_dtype,
            kv_dtype,
            parallel,
            &memory,
            &profile,
            limits,
        );
        Ok(Scenario {
            limits,
            replica,
            pools: Vec::new(),
            origin: origin.to_string(),
            model,
            model_source,
            hardware,
            weight_dtype,
            kv_dtype,
            max_model_len,
            memory,
            parallel,
            base_dir: base_dir_of(origin),
            profile,
            file,
            notes: Vec::new(),
            batching,
        })
    }

    pub fn name(&self) -> &str {
        &self.file.name
    }

    pub fn seed(&self) -> u64 {
        self.file.seed
    }

    /// The engine settings its replicas run (`[engine]`; in a pool's own
    /// scenario, with the pool's overrides).
    pub fn engine(&self) -> &super::EngineCfg {
        &self.file.engine
    }

    /// The long-run offered arrival rate, requests/s (see
    /// [`ScenarioFile::offered_rate`]).
    pub fn offered_rate(&self) -> Option<f64> {
        self.file.offered_rate()
    }

    /// A stable digest of the scenario (its table as TOML, seed included),
    /// the same on every machine and thread count. How the engine is
    /// stepped (`decode_runs`, which `--step-by-step` turns off, in every
    /// pool too) gives the same files either way, so it is left out.
    pub fn digest(&self) -> u64 {
        let mut file = self.file.clone();
        file.engine.decode_runs = true;
        for p in &mut file.fleet.pools {
            if let Some(e) = &mut p.engine {
                e.remove("decode_runs");
            }
        }
        let text = toml::to_string(&file).unwrap_or_default();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in text.as_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }

    /// GPUs in the fleet: its pools' at their starting replica counts.
    pub fn gpus(&self) -> u32 {
        if self.pools.is_empty() {
            // A pool's own scenario (see `resolve_flat`).
            return self.file.fleet.replicas * self.parallel.gpus();
        }
        self.pools.iter().map(PoolPlan::gpus).sum()
    }

    /// Whether the fleet is made of `[[fleet.pools]]` (rather than one
    /// implicit pool): `pools.csv` and the summary's pools are written then.
    pub fn declares_pools(&self) -> bool {
        self.pools.iter().any(|p| p.declared)
    }
}

/// The folder of the scenario file named by `origin` ("." when the origin
/// is not a file, e.g. "<string>").
pub(super) fn base_dir_of(origin: &str) -> PathBuf {
    if origin.starts_with('<') {
        return PathBuf::from(".");
    }
    match Path::new(origin).parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Loads the profile `[hardware] profile` names, relative to the scenario's
/// folder, and checks it is the only hardware source given.
pub(super) fn load_profile(
    hw: &HardwareCfg,
    origin: &str,
) -> Result<Option<(String, std::sync::Arc<Profile>)>, Invalid> {
    let Some(rel) = &hw.profile else {
        return Ok(None);
    };
    if hw.preset.is_some() || hw.spec.is_some() {
        return Err((
            "hardware".into(),
            "give one of `preset`, `[hardware.spec]` or `profile`, not several".into(),
        ));
    }
    let dir = Path::new(origin).parent().unwrap_or(Path::new(""));
    let path = dir.join(rel);
    let p = Profile::load(&path).map_err(|e| ("hardware.profile".to_string(), e.to_string()))?;
    Ok(Some((path.display().to_string(), std::sync::Arc::new(p))))
}

/// The `[engine]` batching keys a calibration profile may supply.
const BATCHING_KEYS: [&str; 3] = ["policy", "max_batched_tokens", "max_num_seqs"];

/// Sets each `[engine]` batching key the file leaves out to what the
/// profile's engine probe recorded (`EngineBatching`), so a run priced by a
/// served engine's costs also forms its iterations; a key the file sets
/// wins. Returns the line saying which applied, `None` when the profile
/// records no batching.
fn apply_profile_batching(
    file: &mut ScenarioFile,
    profile: Option<&(String, std::sync::Arc<Profile>)>,
) -> Option<String> {
    let (path, p) = profile?;
    let b = p.engine.as_ref()?.batching.as_ref()?;
    let given = file.engine_keys_given.clone()?;
    let e = &mut file.engine;
    let (mut from_profile, mut from_file) = (Vec::new(), Vec::new());
    let mut take = |key: &str, recorded: Option<String>, current: String| match recorded {
        Some(_) if given.iter().any(|g| g == key) => from_file.push(format!("{key} = {current}")),
        Some(v) => from_profile.push(format!("{key} = {v}")),
        None => from_file.push(format!("{key} = {current}")),
    };
    take(
        "policy",
        b.policy.map(|p| p.name().to_string()),
        e.policy.name().to_string(),
    );
    take(
        "max_batched_tokens",
        b.max_batched_tokens.map(|v| v.to_string()),
        e.max_batched_tokens.to_string(),
    );
    take(
        "max_num_seqs",
        b.max_num_seqs.map(|v| v.to_string()),
        e.max_num_seqs.to_string(),
    );
    let given = |k: &str| given.iter().any(|g| g == k);
    if let Some(v) = b.policy.filter(|_| !given("policy")) {
        e.policy = v;
    }
    if let Some(v) = b
        .max_batched_tokens
        .filter(|_| !given("max_batched_tokens"))
    {
        e.max_batched_tokens = v;
    }
    if let Some(v) = b.max_num_seqs.filter(|_| !given("max_num_seqs")) {
        e.max_num_seqs = v;
    }
    // Pools resolve from a copy of this file: applied once, here.
    file.engine_keys_given = Some(BATCHING_KEYS.iter().map(|k| k.to_string()).collect());
    let mut line = String::new();
    if !from_profile.is_empty() {
        line = format!(
            "{} from the profile {path} ({})",
            from_profile.join(", "),
            b.source
        );
    }
    if !from_file.is_empty() {
        if !line.is_empty() {
            line.push_str("; ");
        }
        line.push_str(&format!(
            "{} from the scenario's [engine] or its defaults",
            from_file.join(", ")
        ));
    }
    Some(line)
}

/// A scenario that names a model besides its profile must name the one the
/// profile measured.
pub(super) fn check_profile_model(
    model: &ModelArch,
    p: &Profile,
    path: &str,
) -> Result<(), Invalid> {
    let want = p.model.arch();
    let dims = |m: &ModelArch| {
        (
            m.layers,
            m.hidden_size,
            m.num_heads,
            m.num_kv_heads,
            m.head_dim,
            m.intermediate_size,
            m.vocab_size,
        )
    };
    if dims(model) != dims(&want) || model.is_moe() || model.mla().is_some() {
        return Err((
            "model".into(),
            format!(
                "the profile {path} measured {} ({} layers, hidden {}), not {}; drop the model \
                 preset/architecture to use the profile's model",
                want.name, want.layers, want.hidden_size, model.name
            ),
        ));
    }
    Ok(())
}

pub(super) fn line_of(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].matches('\n').count() + 1
}
