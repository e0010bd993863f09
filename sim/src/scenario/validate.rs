//! Validation of a parsed scenario file: every key's type-level rules
//! (positive, at least, consistent combinations), with key paths.

use super::*;

pub(super) fn positive(key: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("must be a positive number, got {v}")))
    }
}

pub(super) fn at_least(key: &str, v: u64, min: u64) -> Result<(), Invalid> {
    if v >= min {
        Ok(())
    } else {
        Err((key.into(), format!("must be at least {min}, got {v}")))
    }
}

pub(super) fn validate(f: &ScenarioFile) -> Result<(), Invalid> {
    if f.name.trim().is_empty() {
        return Err(("name".into(), "must not be empty".into()));
    }
    if f.name.contains(['/', '\\']) || f.name.starts_with('.') {
        return Err((
            "name".into(),
            format!(
                "{:?} is used as a folder name: no slashes, no leading dot",
                f.name
            ),
        ));
    }
    match (f.horizon.requests, f.horizon.duration_s) {
        // A trace ends by itself: without a horizon the run replays it all.
        (None, None) if f.workload.trace.is_some() => {}
        (None, None) => {
            return Err((
                "horizon".into(),
                "give `requests` (a count), `duration_s` (seconds), or both".into(),
            ))
        }
        (Some(n), _) => at_least("horizon.requests", n, 1)?,
        _ => {}
    }
    if let Some(d) = f.horizon.duration_s {
        positive("horizon.duration_s", d)?;
    }
    // Scale-to-zero (`autoscale.min_replicas = 0`) may start with none.
    if f.autoscale.as_ref().is_none_or(|a| a.min_replicas > 0) {
        at_least("fleet.replicas", f.fleet.replicas.into(), 1)?;
    }
    at_least("fleet.tensor_parallel", f.fleet.tensor_parallel.into(), 1)?;
    at_least(
        "fleet.pipeline_parallel",
        f.fleet.pipeline_parallel.into(),
        1,
    )?;
    at_least("fleet.expert_parallel", f.fleet.expert_parallel.into(), 1)?;
    if let Some(dp) = f.fleet.attention_data_parallel {
        at_least("fleet.attention_data_parallel", dp.into(), 1)?;
    }
    let fl = &f.fleet;
    if fl.num_redundant_experts > 0 && !fl.eplb {
        return Err((
            "fleet.num_redundant_experts".into(),
            "redundant experts are placed by EPLB: set fleet.eplb = true too".into(),
        ));
    }
    // A pool may give the expert parallelism the fleet leaves at 1, so the
    // MoE keys are checked against each pool's own layout in `parallel`.
    if fl.pools.is_empty() && fl.expert_parallel <= 1 {
        for (k, on) in [
            ("eplb", fl.eplb),
            ("expert_popularity_skew", fl.expert_popularity_skew != 0.0),
        ] {
            if on {
                return Err((
                    format!("fleet.{k}"),
                    "applies to expert parallelism (fleet.expert_parallel > 1); without it \
                     every GPU holds every expert's slice"
                        .into(),
                ));
            }
        }
    }
    let skew = fl.expert_popularity_skew;
    if !(skew.is_finite() && (0.0..=4.0).contains(&skew)) {
        return Err((
            "fleet.expert_popularity_skew".into(),
            format!(
                "must be a Zipf exponent in [0, 4] (0: every expert equally popular), got {}",
                super::ranges::num(skew)
            ),
        ));
    }
    if f.fleet.replicas > 100_000 {
        return Err(("fleet.replicas".into(), "at most 100000".into()));
    }
    fleet_cfg::validate_routing(
        f.fleet.report_interval_s,
        &f.fleet.prefix_affinity,
        &f.fleet.weighted,
        &f.fleet.session_affinity,
    )?;
    pools_cfg::validate_pools(f.fleet.replicas, &f.fleet.pools, &f.fleet.kv_transfer)?;
    super::regions_cfg::validate_regions(f)?;
    let e = &f.engine;
    at_least("engine.max_num_seqs", e.max_num_seqs.into(), 1)?;
    at_least("engine.max_batched_tokens", e.max_batched_tokens.into(), 1)?;
    at_least("engine.block_size", e.block_size.into(), 1)?;
    at_least(
        "engine.scheduler_recv_interval",
        e.scheduler_recv_interval.into(),
        1,
    )?;
    if let Some(l) = &e.eager_launch_s_per_layer {
        for (key, v) in [("dense", l.dense), ("moe", l.moe)] {
            if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                return Err((
                    format!("engine.eager_launch_s_per_layer.{key}"),
                    format!("must be seconds per layer in [0, 1], got {v}"),
                ));
            }
        }
    }
    if let Some(fe) = &e.front_end {
        for (key, v, unit) in [
            ("request_s", fe.request_s, "seconds per request in [0, 60]"),
            (
                "prompt_token_s",
                fe.prompt_token_s,
                "seconds per prompt token in [0, 0.01]",
            ),
        ] {
            let max = if key == "request_s" { 60.0 } else { 0.01 };
            if !(v.is_finite() && (0.0..=max).contains(&v)) {
                return Err((
                    format!("engine.front_end.{key}"),
                    format!("must be {unit}, got {v}"),
                ));
            }
        }
    }
    if let Some(l) = e.max_model_len {
        at_least("engine.max_model_len", l.into(), 2)?;
    }
    if !(e.swap_space_gib.is_finite() && e.swap_space_gib >= 0.0) {
        return Err((
            "engine.swap_space_gib".into(),
            format!("must be ≥ 0 GiB, got {}", e.swap_space_gib),
        ));
    }
    if let Some(sp) = &e.speculative {
        validate_speculative(sp)?;
    }
    if e.pinned_prefix_blocks > 0 && !e.prefix_caching {
        return Err((
            "engine.pinned_prefix_blocks".into(),
            "pins cached prefixes: set engine.prefix_caching = true".into(),
        ));
    }
    if !(e.gpu_memory_utilization > 0.0 && e.gpu_memory_utilization <= 1.0) {
        return Err((
            "engine.gpu_memory_utilization".into(),
            format!("must be in (0, 1], got {}", e.gpu_memory_utilization),
        ));
    }
    if !tenants_cfg::per_tenant_workloads(f) {
        workload_cfg::validate_workload(&f.workload)?;
    }
    if let Some(sp) = &f.workload.shared_prefix {
        at_least("workload.shared_prefix.variants", sp.variants.into(), 1)?;
        at_least("workload.shared_prefix.tokens", sp.tokens.into(), 1)?;
        if !(sp.zipf_exponent.is_finite() && sp.zipf_exponent >= 0.0) {
            return Err((
                "workload.shared_prefix.zipf_exponent".into(),
                format!("must be ≥ 0 (0 = uniform), got {}", sp.zipf_exponent),
            ));
        }
    }
    if let Some(c) = &f.workload.conversation {
        validate_len("workload.conversation.turns", &c.turns)?;
        validate_len(
            "workload.conversation.follow_up_tokens",
            &c.follow_up_tokens,
        )?;
        if !(c.think_time_s.is_finite() && c.think_time_s >= 0.0) {
            return Err((
                "workload.conversation.think_time_s".into(),
                format!("must be ≥ 0 seconds, got {}", c.think_time_s),
            ));
        }
    }
    if f.workload.conversation.is_some() && f.workload.output_tokens.is_none() {
        return Err((
            "workload.conversation".into(),
            "follow-up turns draw their answers from workload.output_tokens: give it".into(),
        ));
    }
    if let Some(s) = &f.slo {
        s.check("slo")?;
    }
    positive(
        "metrics.timeseries_interval_s",
        f.metrics.timeseries_interval_s,
    )?;
    if f.metrics.timeseries_interval_s < 1e-3 {
        return Err((
            "metrics.timeseries_interval_s".into(),
            "must be at least 0.001 s".into(),
        ));
    }
    ranges::check(f)?;
    tenants_cfg::validate_tenants(f)
}

pub(super) fn validate_speculative(sp: &SpeculativeCfg) -> Result<(), Invalid> {
    let key = "engine.speculative";
    if sp.num_draft_tokens == 0 || sp.num_draft_tokens > 16 {
        return Err((
            format!("{key}.num_draft_tokens"),
            format!("must be in 1..=16, got {}", sp.num_draft_tokens),
        ));
    }
    if !(sp.acceptance_rate >= 0.0 && sp.acceptance_rate < 1.0) {
        return Err((
            format!("{key}.acceptance_rate"),
            format!("must be in [0, 1), got {}", sp.acceptance_rate),
        ));
    }
    if let Some(n) = sp.draft_layers {
        let kinds = [sp.draft_model.is_some(), sp.draft_cost_fraction.is_some()];
        if kinds.contains(&true) {
            return Err((
                key.into(),
                "give exactly one of `draft_model` (a catalog preset), `draft_cost_fraction` \
                 (EAGLE/MTP head cost as a fraction of a target decode step) or \
                 `draft_layers` (MTP/EAGLE layers of the target's kind)"
                    .into(),
            ));
        }
        if !(1..=8).contains(&n) {
            return Err((
                format!("{key}.draft_layers"),
                format!("must be 1 to 8 layers, got {n}"),
            ));
        }
        return Ok(());
    }
    match (&sp.draft_model, sp.draft_cost_fraction) {
        (Some(_), Some(_)) | (None, None) => Err((
            key.into(),
            "give exactly one of `draft_model` (a catalog preset), `draft_cost_fraction` \
             (EAGLE/MTP head cost as a fraction of a target decode step) or `draft_layers` \
             (MTP/EAGLE layers of the target's kind)"
                .into(),
        )),
        (Some(m), None) => match catalog::model(m) {
            Some(_) => Ok(()),
            None => Err((
                format!("{key}.draft_model"),
                format!(
                    "unknown model preset {m:?}; known: {}",
                    catalog::model_keys().join(", ")
                ),
            )),
        },
        (None, Some(f)) if !(f > 0.0 && f <= 1.0) => Err((
            format!("{key}.draft_cost_fraction"),
            format!("must be in (0, 1], got {f}"),
        )),
        (None, Some(_)) => Ok(()),
    }
}

pub(super) fn validate_len(key: &str, d: &LengthDist) -> Result<(), Invalid> {
    let clamp = |min: Option<u32>, max: Option<u32>| -> Result<(), Invalid> {
        if let Some(m) = min {
            at_least(&format!("{key}.min"), m.into(), 1)?;
        }
        if let (Some(lo), Some(hi)) = (min, max) {
            if lo > hi {
                return Err((format!("{key}.max"), format!("max {hi} is below min {lo}")));
            }
        }
        if let Some(hi) = max {
            at_least(&format!("{key}.max"), hi.into(), 1)?;
        }
        Ok(())
    };
    match *d {
        LengthDist::Fixed { value } => at_least(&format!("{key}.value"), value.into(), 1),
        LengthDist::Uniform { min, max } => {
            at_least(&format!("{key}.min"), min.into(), 1)?;
            clamp(Some(min), Some(max))
        }
        LengthDist::Normal { mean, sd, min, max } => {
            positive(&format!("{key}.mean"), mean)?;
            if !(sd.is_finite() && sd >= 0.0) {
                return Err((format!("{key}.sd"), format!("must be ≥ 0, got {sd}")));
            }
            clamp(min, max)
        }
        LengthDist::Lognormal { mean, cv, min, max } => {
            positive(&format!("{key}.mean"), mean)?;
            positive(&format!("{key}.cv"), cv)?;
            clamp(min, max)
        }
        LengthDist::Zipf {
            exponent,
            n,
            min,
            max,
        } => {
            positive(&format!("{key}.exponent"), exponent)?;
            at_least(&format!("{key}.n"), n.into(), 1)?;
            clamp(min, max)
        }
        LengthDist::Empirical { min, max, .. } => {
            workload_cfg::validate_empirical(key, d)?;
            clamp(min, max)
        }
    }
}

pub(super) fn validate_arch(a: &ModelArch) -> Result<(), Invalid> {
    for (k, v) in [
        ("layers", a.layers),
        ("hidden_size", a.hidden_size),
        ("num_heads", a.num_heads),
        ("num_kv_heads", a.num_kv_heads),
        ("head_dim", a.head_dim),
        ("intermediate_size", a.intermediate_size),
        ("vocab_size", a.vocab_size),
        ("max_context", a.max_context),
    ] {
        at_least(k, v.into(), 1)?;
    }
    if a.num_heads % a.num_kv_heads != 0 {
        return Err((
            "num_kv_heads".into(),
            format!(
                "must divide num_heads ({}) for grouped-query attention, got {}",
                a.num_heads, a.num_kv_heads
            ),
        ));
    }
    a.validate_moe_and_mla()?;
    a.validate_layer_kinds()?;
    Ok(())
}

pub(super) fn validate_hw(s: &HardwareSpec) -> Result<(), Invalid> {
    positive("bf16_tflops", s.bf16_tflops)?;
    if let Some(v) = s.fp8_tflops {
        positive("fp8_tflops", v)?;
    }
    if let Some(v) = s.int8_tops {
        positive("int8_tops", v)?;
    }
    if let Some(v) = s.fp4_tflops {
        positive("fp4_tflops", v)?;
    }
    positive("memory_gib", s.memory_gib)?;
    positive("memory_bw_tbyte_s", s.memory_bw_tbps)?;
    positive("interconnect_gbyte_s", s.interconnect_gbps)?;
    if !(s.interconnect_latency_us.is_finite() && s.interconnect_latency_us >= 0.0) {
        return Err((
            "interconnect_latency_us".into(),
            format!("must be ≥ 0, got {}", s.interconnect_latency_us),
        ));
    }
    if let Some(v) = s.allreduce_latency_us {
        if !(v.is_finite() && v >= 0.0) {
            return Err((
                "allreduce_latency_us".into(),
                format!("must be ≥ 0, got {v}"),
            ));
        }
    }
    if let Some(v) = s.allreduce_busbw_gbps {
        positive("allreduce_busbw_gbyte_s", v)?;
    }
    positive("pcie_gbyte_s", s.pcie_gbps)?;
    at_least("gpus_per_node", s.gpus_per_node.into(), 1)?;
    match (s.network_gbps, s.network_latency_us) {
        (Some(bw), Some(lat)) => {
            positive("network_gbyte_s", bw)?;
            if !(lat.is_finite() && lat >= 0.0) {
                return Err((
                    "network_latency_us".into(),
                    format!("must be ≥ 0, got {lat}"),
                ));
            }
        }
        (None, None) => {}
        (Some(_), None) => {
            return Err((
                "network_latency_us".into(),
                "give it together with network_gbyte_s (the scale-out network needs both)".into(),
            ))
        }
        (None, Some(_)) => {
            return Err((
                "network_gbyte_s".into(),
                "give it together with network_latency_us (the scale-out network needs both)"
                    .into(),
            ))
        }
    }
    validate_power(s)
}

/// Board power: a positive TDP, and an idle figure from 0 up to it (given
/// only with a TDP, which it is the floor of).
fn validate_power(s: &HardwareSpec) -> Result<(), Invalid> {
    match (s.tdp_w, s.idle_w) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err((
            "idle_w".into(),
            "give it together with tdp_w (idle power is the floor of the load power)".into(),
        )),
        (Some(tdp), idle) => {
            positive("tdp_w", tdp)?;
            match idle {
                Some(i) if !(i.is_finite() && (0.0..=tdp).contains(&i)) => Err((
                    "idle_w".into(),
                    format!("must be from 0 to tdp_w ({tdp}), got {i}"),
                )),
                _ => Ok(()),
            }
        }
    }
}
