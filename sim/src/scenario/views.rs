//! What the front ends show or check of a scenario as written: `servesim
//! check`'s description of it, and the live engine's refusals of settings it
//! does not run. Each read is named for what it is, so the crates above
//! `sim` (the CLI, `serve`, `calibrate`) never read the raw TOML
//! (`Scenario::file`); the reads shared with the tools that derive scenarios
//! are in `stated`.

use super::{FairnessCfg, Scenario, TenantCfg};

impl Scenario {
    /// `description`: the free text `check` shows under the name.
    pub fn description(&self) -> Option<&str> {
        self.file.description.as_deref()
    }

    /// `[[tenants]]`, in file order (empty: one anonymous tenant).
    pub fn tenants(&self) -> &[TenantCfg] {
        &self.file.tenants
    }

    /// `[fairness]`: how replicas order their waiting queues among tenants.
    pub fn fairness(&self) -> &FairnessCfg {
        &self.file.fairness
    }

    /// `servesim check`'s line for the canary rollout (none without
    /// `[canary]`).
    pub fn canary_check_lines(&self) -> Vec<String> {
        super::canary_cfg::check_lines(&self.file)
    }
}

#[cfg(test)]
mod tests {
    use crate::Scenario;

    #[test]
    fn the_views_read_what_the_file_states() {
        let s = Scenario::from_toml_str(
            r#"
name = "views"
description = "two tenants"
[horizon]
requests = 10
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fairness]
policy = "vtc"
[[tenants]]
name = "a"
[tenants.workload]
arrival = { process = "poisson", rate = 5.0 }
prompt_tokens = { dist = "fixed", value = 100 }
output_tokens = { dist = "fixed", value = 10 }
[[tenants]]
name = "b"
[tenants.workload]
arrival = { process = "poisson", rate = 2.0 }
prompt_tokens = { dist = "fixed", value = 200 }
output_tokens = { dist = "fixed", value = 20 }
"#,
            "<views>",
        )
        .unwrap();
        assert_eq!(s.description(), Some("two tenants"));
        let names: Vec<&str> = s.tenants().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(s.fairness().policy.name(), "vtc");
        assert!(s.canary_check_lines().is_empty());
    }
}
