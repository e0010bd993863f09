//! The cost model a resolved scenario prices its iterations with: its
//! calibration profile when it names one, the catalog roofline otherwise,
//! plus the draft's cost when it decodes speculatively. Built here, once
//! per scenario (and per pool), so every model object receives its cost
//! model rather than choosing one.

use super::Scenario;
use crate::catalog::ModelArch;
use crate::cost::comm::CommChoice;
use crate::cost::speculative::{DraftCost, SpeculativeCost};
use crate::cost::{CostModel, Roofline};
use crate::parallel::Parallelism;

impl Scenario {
    /// The roofline cost model of this scenario's replicas (model,
    /// hardware, dtypes, parallel layout), with its engine runtime.
    pub fn roofline(&self) -> Roofline {
        Roofline::with_parallelism(
            &self.model,
            &self.hardware,
            self.weight_dtype,
            self.kv_dtype,
            &self.parallel,
        )
        .with_runtime(self.file.engine.runtime)
        .with_launch_per_layer(self.file.engine.eager_launch_s_per_layer)
        .with_collectives(&self.hardware, &self.parallel, self.comm_choice())
        .with_expert_load(self.expert_load_ratio())
    }

    /// The engine's collective implementations (`[engine] all_reduce`,
    /// `moe_a2a`, `deepep_mode`).
    pub fn comm_choice(&self) -> CommChoice {
        let e = &self.file.engine;
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
        let f = &self.file.fleet;
        crate::parallel::eplb::load_ratio(
            self.model.num_experts,
            self.parallel.expert,
            f.expert_popularity_skew,
            f.eplb,
            f.num_redundant_experts,
        )
    }

    /// The cost model this scenario prices iterations with (see the
    /// module's doc). The simulated twin behind `servesim serve --engine
    /// sim` paces its clock by the same model.
    pub fn cost_model(&self) -> Box<dyn CostModel + '_> {
        let cost: Box<dyn CostModel> = match &self.profile {
            Some((path, p)) => Box::new(crate::profiled::Profiled::new(p, path)),
            None => Box::new(self.roofline()),
        };
        self.with_speculation(cost)
    }

    /// Wraps the target's cost model with the draft's cost when the
    /// scenario decodes speculatively.
    fn with_speculation<'a>(&self, target: Box<dyn CostModel + 'a>) -> Box<dyn CostModel + 'a> {
        let Some(sp) = &self.file.engine.speculative else {
            return target;
        };
        let draft_roofline = |m: &ModelArch| {
            Roofline::new(
                m,
                &self.hardware,
                self.weight_dtype,
                self.kv_dtype,
                self.file.fleet.tensor_parallel,
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
