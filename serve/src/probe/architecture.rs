//! Which catalog architecture a served model is, and whether the preset the
//! user named belongs to the same class (dense, mixture-of-experts, latent
//! attention): a profile fitted on one class must not price another.

use super::server::Server;
use super::EngineArgs;
use anyhow::{bail, Result};
use sim::catalog::ModelArch;

/// The catalog preset the served name matches (`org/Name-Instruct.Q4.gguf`
/// tried under the catalog's spellings of a checkpoint name), if any.
pub(super) fn match_served(served: &str) -> Option<(String, ModelArch)> {
    sim::catalog::checkpoint_name_candidates(served)
        .into_iter()
        .find_map(|t| sim::catalog::model(&t).map(|(m, _)| (t, m)))
}

/// The architecture: `--model`, else the served name matched to a preset.
pub(super) fn architecture(a: &EngineArgs, s: &Server) -> Result<(ModelArch, String)> {
    let known = || sim::catalog::model_keys().join(", ");
    if let Some(p) = &a.arch {
        return match sim::catalog::model(p) {
            Some((m, _)) => Ok((m, format!("catalog preset {p}"))),
            None => bail!("unknown model preset {p:?} for --model; known: {}", known()),
        };
    }
    if let Some((t, m)) = match_served(&s.served) {
        return Ok((
            m,
            format!(
                "catalog preset {t}, matched from the served name {:?}",
                s.served
            ),
        ));
    }
    bail!(
        "{} serves {:?}, which no catalog preset matches; name its architecture with --model (one of: {})",
        a.url,
        s.served,
        known()
    )
}

/// An architecture's class as a profile's costs depend on it: dense or a
/// mixture of experts, with grouped-query or latent (MLA) attention.
pub(super) fn class(m: &ModelArch) -> &'static str {
    match (m.is_moe(), m.mla().is_some()) {
        (false, false) => "dense",
        (true, false) => "mixture-of-experts",
        (false, true) => "dense with latent attention (MLA)",
        (true, true) => "mixture-of-experts with latent attention (MLA)",
    }
}

/// Names of served models that are mixtures of experts although no preset
/// matches them (Mixtral, DeepSeek V2/V3/R1, Qwen's `-A3B`/`-A22B`, ...).
pub(super) fn named_moe(served: &str) -> bool {
    let n = served.to_ascii_lowercase();
    [
        "moe",
        "mixtral",
        "deepseek-v2",
        "deepseek-v3",
        "deepseek-r1",
        "dbrx",
        "-a3b",
        "-a22b",
        "-a14b",
        "olmoe",
        "gpt-oss",
        "kimi-k2",
        "llama-4",
    ]
    .iter()
    .any(|k| n.contains(k))
}

/// Checks the served model against the chosen architecture: its name's
/// preset (or its name, for mixtures of experts) must be of the same
/// class, and llama.cpp's reported width and parameter count must match.
/// `Err` names what disagrees; `Ok` says what was checked.
pub(super) fn check_architecture(a: &EngineArgs, s: &Server, m: &ModelArch) -> Result<String> {
    let name = a.arch.as_deref().unwrap_or("the matched preset");
    let mut disagree = Vec::new();
    let mut checked = Vec::new();
    if let Some((t, served)) = match_served(&s.served) {
        checked.push(format!("its name matches preset {t}"));
        if class(&served) != class(m) {
            disagree.push(format!(
                "the served {:?} is preset {t}, a {} model, and {} is {}",
                s.served,
                class(&served),
                name,
                class(m)
            ));
        }
    } else if named_moe(&s.served) != m.is_moe() {
        checked.push("its name".into());
        disagree.push(format!(
            "the served {:?} is named as a {} model, and {} is {}",
            s.served,
            if named_moe(&s.served) {
                "mixture-of-experts"
            } else {
                "dense"
            },
            name,
            class(m)
        ));
    }
    if let Some(w) = s.hidden_size {
        checked.push(format!("its width {w}"));
        if w != m.hidden_size as u64 {
            disagree.push(format!(
                "the server reports a hidden size of {w} (meta.n_embd), {} has {}",
                name, m.hidden_size
            ));
        }
    }
    if let Some(n) = s.params {
        checked.push(format!("its {n} parameters"));
        let ratio = n as f64 / m.total_params().max(1.0);
        if !(0.5..=2.0).contains(&ratio) {
            disagree.push(format!(
                "the server reports {:.2e} parameters (meta.n_params), {} has {:.2e}",
                n as f64,
                name,
                m.total_params()
            ));
        }
    }
    if !disagree.is_empty() {
        bail!(
            "{} does not serve a model of the chosen architecture: {}; a profile fitted so would describe another model (costs, weights, KV per token); name the served model's preset with --model, or give --force to write it anyway",
            a.url,
            disagree.join("; ")
        );
    }
    Ok(if checked.is_empty() {
        format!("the served model {:?} could not be checked against {}: the server names no preset and reports no size", s.served, name)
    } else {
        format!(
            "the served model matches {}'s class ({}): {}",
            name,
            class(m),
            checked.join(", ")
        )
    })
}
