//! From a chosen deployment to something a platform team applies: the
//! engines' launch command lines (`vllm serve`, `python -m
//! sglang.launch_server`), a Kubernetes manifest (a Deployment, or a
//! LeaderWorkerSet when one replica spans nodes, with a Service and an HPA
//! when the scenario has a target autoscaler) and, for a disaggregated
//! fleet, a Dynamo `DynamoGraphDeployment` of the prefill and decode pools.
//! NVIDIA's aiconfigurator emits the deployment it recommends the same way.
//!
//! Every setting the simulation ran with is either written as the engine's
//! own flag ([`engine_args`], whose mapping `docs/deploy.md` tabulates) or
//! named in a note beside the output: nothing the plan chose is dropped
//! silently. The input is a resolved [`Scenario`] whose replica counts are
//! the ones to deploy (`plan` sets its sized fleet's, `sweep` its operating
//! point's).

pub mod chosen;
pub mod dynamo;
pub mod engine_args;
pub mod kubernetes;

use crate::scenario::{PoolRole, ReplicaPlan, Scenario};
use std::path::Path;

pub use engine_args::{Engine, Launch};

/// What `--emit` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    /// `vllm serve …` per pool (`vllm.sh`).
    Vllm,
    /// `python -m sglang.launch_server …` per pool (`sglang.sh`).
    Sglang,
    /// Kubernetes objects running the vLLM command (`kubernetes.yaml`).
    Kubernetes,
    /// A Dynamo `DynamoGraphDeployment` (`dynamo.yaml`): a frontend and
    /// one vLLM worker service per pool (prefill and decode workers when the
    /// fleet is disaggregated).
    Dynamo,
}

impl Format {
    pub const ALL: [Format; 4] = [
        Format::Vllm,
        Format::Sglang,
        Format::Kubernetes,
        Format::Dynamo,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Vllm => "vllm",
            Format::Sglang => "sglang",
            Format::Kubernetes => "kubernetes",
            Format::Dynamo => "dynamo",
        }
    }

    /// The file it writes.
    pub fn file(self) -> &'static str {
        match self {
            Format::Vllm => "vllm.sh",
            Format::Sglang => "sglang.sh",
            Format::Kubernetes => "kubernetes.yaml",
            Format::Dynamo => "dynamo.yaml",
        }
    }
}

/// One emitted file: its name in the output folder and its text.
#[derive(Clone, Debug, PartialEq)]
pub struct Emitted {
    pub file: String,
    pub text: String,
    /// Settings the format cannot express, one line each (also written as
    /// comments inside `text`).
    pub notes: Vec<String>,
}

/// One pool to deploy: its name, role, replica count and resolved settings.
#[derive(Clone, Copy, Debug)]
pub struct Pool<'a> {
    pub name: &'a str,
    pub role: PoolRole,
    pub replicas: u32,
    /// What each of its replicas is: model, hardware, layout, engine.
    pub replica: &'a ReplicaPlan,
    /// Its autoscaler (`[autoscale]` with the pool's own).
    pub autoscale: Option<&'a crate::scenario::lifecycle_cfg::AutoscaleCfg>,
    /// The scenario it belongs to (the model as written, the fleet).
    pub fleet: &'a Scenario,
}

/// The pools of `s` with their starting counts: its `[[fleet.pools]]`, or
/// its implicit pool, named after the scenario.
pub fn pools(s: &Scenario) -> Vec<Pool<'_>> {
    s.pools
        .iter()
        .map(|p| Pool {
            name: if p.declared { &p.name } else { s.name() },
            role: p.role,
            replicas: p.start,
            replica: &p.replica,
            autoscale: p.autoscale(),
            fleet: s,
        })
        .collect()
}

/// Whether `s` splits prefill and decode into pools of their own.
pub fn disaggregated(s: &Scenario) -> bool {
    s.pools.iter().any(|p| p.role == PoolRole::Prefill)
}

/// The Hugging Face repository a preset's `config.json` comes from
/// ("meta-llama/Llama-3.1-8B"), or the scenario's `config.json` path, or
/// the model's name with a note to replace it.
pub fn model_id(s: &Scenario) -> (String, Option<String>) {
    if let Some(id) = s
        .model_preset()
        .and_then(crate::catalog::model_preset)
        .and_then(|p| {
            p.url
                .strip_prefix("https://huggingface.co/")
                .and_then(|r| r.split("/blob/").next())
        })
    {
        return (id.to_string(), None);
    }
    if let Some(c) = s.model_config() {
        let dir = Path::new(c)
            .parent()
            .map(|d| d.display().to_string())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| ".".into());
        return (
            dir,
            Some(format!(
                "model: the folder of the scenario's config.json ({c}); point it at the checkpoint to serve"
            )),
        );
    }
    (
        s.model.name.clone(),
        Some(format!(
            "model: {:?} is the scenario's name for an inline architecture; replace it with the checkpoint to serve",
            s.model.name
        )),
    )
}

/// The files of `formats` for the deployment `s` describes.
pub fn emit(s: &Scenario, formats: &[Format]) -> Vec<Emitted> {
    formats
        .iter()
        .map(|&f| match f {
            Format::Vllm => engine_args::script(s, Engine::Vllm),
            Format::Sglang => engine_args::script(s, Engine::Sglang),
            Format::Kubernetes => kubernetes::manifest(s),
            Format::Dynamo => dynamo::graph(s),
        })
        .collect()
}

/// Writes each file into `dir` whole (renamed into place), creating `dir`.
pub fn write(dir: &Path, files: &[Emitted]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for f in files {
        crate::output::write_bytes_atomic(&dir.join(&f.file), f.text.as_bytes())?;
    }
    Ok(())
}

/// `# note: …` lines for a script or a YAML file.
fn comment_lines(notes: &[String]) -> String {
    notes.iter().map(|n| format!("# note: {n}\n")).collect()
}

#[cfg(test)]
mod tests;
