//! One replica's resolved configuration: what a replica of a pool is made
//! of (model, hardware, dtypes, parallel layout, memory plan, engine
//! settings, calibration profile), what it can ever serve, and the cost
//! model its iterations are priced with — its calibration profile when it
//! names one, the catalog roofline otherwise, plus the draft's cost when it
//! decodes speculatively. Built once per pool at resolution, so every model
//! object receives its cost model rather than choosing one.

use super::{EngineCfg, EnginePlan, Scenario, ScenarioFile, ServeLimits};
use crate::catalog::{Dtype, HardwareSpec, ModelArch};
use crate::cost::comm::CommChoice;
use crate::cost::speculative::{DraftCost, SpeculativeCost};
use crate::cost::{CostModel, Roofline};
use crate::memory::MemoryPlan;
use crate::parallel::Parallelism;
use crate::profile::Profile;
use std::sync::Arc;

/// A replica as resolved from its pool's settings (the scenario's keys with
/// the pool's overrides): everything its construction, its memory and its
/// cost model read, and nothing of the fleet around it.
#[derive(Clone, Debug)]
pub struct ReplicaPlan {
    pub model: ModelArch,
    pub hardware: HardwareSpec,
    pub weight_dtype: Dtype,
    pub kv_dtype: Dtype,
    /// How the replica lays the model out over its GPUs.
    pub parallel: Parallelism,
    /// Weights, KV blocks and their size on each GPU.
    pub memory: MemoryPlan,
    /// The engine's settings (`[engine]` with the pool's overrides), which
    /// its cost model reads (runtime, collectives, speculation's draft).
    pub engine: EngineCfg,
    /// Its scheduler, resolved from them: what a `Replica` is built from.
    pub engine_plan: EnginePlan,
    /// The calibration profile that prices it, with its resolved path.
    pub profile: Option<(String, Arc<Profile>)>,
    /// What it can ever serve.
    pub limits: ServeLimits,
    /// Tensor-parallel degree a speculative draft model runs at.
    pub tensor_parallel: u32,
    /// Zipf skew of the experts' popularity (`fleet.expert_popularity_skew`).
    pub expert_popularity_skew: f64,
    /// Whether EPLB rebalances experts (`fleet.eplb`).
    pub eplb: bool,
    /// EPLB's redundant experts (`fleet.num_redundant_experts`).
    pub num_redundant_experts: u32,
}

impl Scenario {
    /// The replica this scenario's settings resolve to (see
    /// [`ReplicaPlan`]), resolved once with the scenario.
    pub fn replica_plan(&self) -> &ReplicaPlan {
        &self.replica
    }

    /// The roofline cost model of this scenario's replicas
    /// ([`ReplicaPlan::roofline`]).
    pub fn roofline(&self) -> Roofline {
        self.replica_plan().roofline()
    }

    /// The busiest EP rank's routed tokens over the mean rank's
    /// ([`ReplicaPlan::expert_load_ratio`]).
    pub fn expert_load_ratio(&self) -> f64 {
        self.replica_plan().expert_load_ratio()
    }

    /// The cost model this scenario prices iterations with
    /// ([`ReplicaPlan::cost_model`]). The simulated twin behind `servesim
    /// serve --engine sim` paces its clock by the same model.
    pub fn cost_model(&self) -> Box<dyn CostModel> {
        self.replica_plan().cost_model()
    }
}

impl ReplicaPlan {
    /// The replica `file` describes, with what resolution made of its
    /// model, hardware, layout, memory, profile and limits.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn resolve(
        file: &ScenarioFile,
        model: &ModelArch,
        hardware: &HardwareSpec,
        weight_dtype: Dtype,
        kv_dtype: Dtype,
        parallel: Parallelism,
        memory: &MemoryPlan,
        profile: &Option<(String, Arc<Profile>)>,
        limits: ServeLimits,
    ) -> ReplicaPlan {
        let f = &file.fleet;
        ReplicaPlan {
            model: model.clone(),
            hardware: hardware.clone(),
            weight_dtype,
            kv_dtype,
            parallel,
            memory: memory.clone(),
            engine: file.engine.clone(),
            engine_plan: EnginePlan::resolve(&file.engine, file.engine.decode_runs),
            profile: profile.clone(),
            limits,
            tensor_parallel: f.tensor_parallel,
            expert_popularity_skew: f.expert_popularity_skew,
            eplb: f.eplb,
            num_redundant_experts: f.num_redundant_experts,
        }
    }

    /// GPUs of one replica.
    pub fn gpus(&self) -> u32 {
        self.parallel.gpus()
    }

    /// The roofline cost model of the replica (model, hardware, dtypes,
    /// parallel layout), with its engine runtime.
    pub fn roofline(&self) -> Roofline {
        Roofline::with_parallelism(
            &self.model,
            &self.hardware,
            self.weight_dtype,
            self.kv_dtype,
            &self.parallel,
        )
        .with_runtime(self.engine.runtime)
        .with_launch_per_layer(self.engine.eager_launch_s_per_layer)
        .with_collectives(&self.hardware, &self.parallel, self.comm_choice())
        .with_expert_load(self.expert_load_ratio())
    }

    /// The engine's collective implementations (`[engine] all_reduce`,
    /// `moe_a2a`, `deepep_mode`).
    pub fn comm_choice(&self) -> CommChoice {
        let e = &self.engine;
        CommChoice {
            all_reduce: e.all_reduce.unwrap_or(e.runtime.all_reduce()),
            moe_a2a: e.moe_a2a,
            deepep_mode: e.deepep_mode,
        }
    }

    /// A multi-token-prediction module (or EAGLE head) of `layers` layers
    /// of the target's last kind (an MoE layer for DeepSeek-V3's MTP) and
    /// the target's LM head, laid out and communicating as the target
    /// (`cost::speculative`). Its embedding projection and norms (under 1 %
    /// of a layer's weights) are left out.
    pub fn mtp_roofline(&self, layers: u32) -> Roofline {
        let mut m = self.model.clone();
        m.layers = layers;
        m.first_dense_layers = 0;
        let par = Parallelism {
            pipeline: 1,
            ..self.parallel
        };
        Roofline::with_parallelism(&m, &self.hardware, self.weight_dtype, self.kv_dtype, &par)
            .with_collectives(&self.hardware, &par, self.comm_choice())
            .with_expert_load(self.expert_load_ratio())
    }

    /// The busiest EP rank's routed tokens over the mean rank's, from the
    /// experts' popularity and EPLB (`parallel::eplb`); 1 without EP.
    pub fn expert_load_ratio(&self) -> f64 {
        crate::parallel::eplb::load_ratio(
            self.model.num_experts,
            self.parallel.expert,
            self.expert_popularity_skew,
            self.eplb,
            self.num_redundant_experts,
        )
    }

    /// The cost model the replica prices iterations with (see the
    /// module's doc).
    pub fn cost_model(&self) -> Box<dyn CostModel> {
        let cost: Box<dyn CostModel> = match &self.profile {
            Some((path, p)) => Box::new(crate::profiled::Profiled::new(p, path)),
            None => Box::new(self.roofline()),
        };
        self.with_speculation(cost)
    }

    /// Wraps the target's cost model with the draft's cost when the
    /// replica decodes speculatively.
    fn with_speculation(&self, target: Box<dyn CostModel>) -> Box<dyn CostModel> {
        let Some(sp) = &self.engine.speculative else {
            return target;
        };
        let draft_roofline = |m: &ModelArch| {
            Roofline::new(
                m,
                &self.hardware,
                self.weight_dtype,
                self.kv_dtype,
                self.tensor_parallel,
            )
        };
        let (draft, label) = match (&sp.draft_model, sp.draft_cost_fraction) {
            (Some(name), _) => {
                // Validated at load: the preset exists.
                let (m, _) = crate::catalog::model(name).expect("validated draft model");
                let label = format!("draft model {}", m.name);
                (DraftCost::Model(Box::new(draft_roofline(&m))), label)
            }
            (None, Some(f)) => (
                DraftCost::Fraction(f),
                format!("draft head at {f} × a target decode step"),
            ),
            (None, None) => {
                let n = sp.draft_layers.expect("validated: one draft kind");
                let label = format!(
                    "{n} MTP/EAGLE layer{} of the target's kind + its LM head",
                    if n == 1 { "" } else { "s" }
                );
                (DraftCost::Model(Box::new(self.mtp_roofline(n))), label)
            }
        };
        let k = sp.num_draft_tokens;
        Box::new(
            SpeculativeCost::new(
                target,
                draft,
                k,
                format!(
                    "k = {k}, {label}, sampling over {} logits",
                    self.model.vocab_size
                ),
            )
            .with_sampling(self.model.vocab_size, self.hardware.memory_bw_bytes_per_s()),
        )
    }
}
