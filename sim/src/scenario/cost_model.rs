//! The cost model a resolved scenario prices its iterations with: its
//! calibration profile when it names one, the catalog roofline otherwise,
//! plus the draft's cost when it decodes speculatively. Built here, once
//! per scenario (and per pool), so every model object receives its cost
//! model rather than choosing one.

use super::Scenario;
use crate::catalog::ModelArch;
use crate::cost::speculative::{DraftCost, SpeculativeCost};
use crate::cost::{CostModel, Roofline};

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
            (None, None) => unreachable!("validated: one draft kind"),
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
