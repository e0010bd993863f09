//! Human-readable output: the resolved configuration, the catalog, and the
//! summary table of a run.

use sim::catalog::{self, GIB};
use sim::report::{Dist, Summary};
use sim::sig_figs::rate;
use sim::Scenario;

fn gib(b: f64) -> String {
    format!("{:.2} GiB", b / GIB)
}

/// The fleet as every command names it ("2 replicas × TP 2 on H200 = 4
/// GPUs"); a fleet of pools by its totals, each pool on a line of its own.
pub fn fleet_shape(s: &Scenario) -> String {
    if !s.declares_pools() {
        return s.parallel.fleet_shape(s.replicas(), &s.hardware.name);
    }
    let gpus = s.gpus();
    format!(
        "{} replicas in {} pools = {gpus} GPU{}",
        s.replicas(),
        s.pools.len(),
        if gpus == 1 { "" } else { "s" }
    )
}

/// `servesim check`: what the scenario resolves to.
pub fn resolved(s: &Scenario) {
    let e = s.engine();
    let m = &s.model;
    let h = &s.hardware;
    let mem = &s.memory;
    outln!("scenario   {} ({})  seed {}", s.name(), s.origin, s.seed());
    if let Some(d) = s.description() {
        outln!("           {d}");
    }
    let attention = match m.mla() {
        Some(a) => format!(
            "{} heads with latent attention (MLA: caches {} + {} rotary per token and layer)",
            m.num_heads, a.kv_lora_rank, a.qk_rope_head_dim
        ),
        None => format!(
            "{} heads / {} KV heads × {}",
            m.num_heads, m.num_kv_heads, m.head_dim
        ),
    };
    outln!(
        "model      {}: {:.2}B params{}, {} layers, hidden {}, {attention}, MLP {}{}, vocab {}, context {}",
        m.name,
        m.total_params() / 1e9,
        if m.is_moe() {
            format!(" ({:.2}B active)", m.active_params() / 1e9)
        } else {
            String::new()
        },
        m.layers,
        m.hidden_size,
        m.intermediate_size,
        if m.gated_mlp { " (gated)" } else { "" },
        m.vocab_size,
        m.max_context
    );
    if m.is_moe() {
        outln!(
            "           mixture of experts: {} routed experts, {} per token{}, width {}; {} MoE layers{}",
            m.num_experts,
            m.experts_per_token,
            if m.num_shared_experts > 0 {
                format!(", {} shared", m.num_shared_experts)
            } else {
                String::new()
            },
            m.moe_intermediate_size.unwrap_or(m.intermediate_size),
            m.moe_layers(),
            if m.dense_layers() > 0 {
                format!(" after {} dense", m.dense_layers())
            } else {
                String::new()
            }
        );
    }
    outln!("           source: {}", s.model_source);
    outln!(
        "           weights {}  KV cache {}",
        s.weight_dtype,
        s.kv_dtype
    );
    outln!(
        "hardware   {}: {} TFLOP/s bf16{}, {} GiB at {} TB/s, link {} GB/s, {} per node{}",
        h.name,
        h.bf16_tflops,
        h.fp8_tflops
            .map(|v| format!(", {v} fp8"))
            .unwrap_or_default(),
        h.memory_gib,
        h.memory_bw_tbps,
        h.interconnect_gbps,
        h.gpus_per_node,
        h.network_gbps
            .map(|v| format!(", network {v} GB/s"))
            .unwrap_or_default()
    );
    outln!("           source: {}", h.source);
    let par = &s.parallel;
    outln!(
        "fleet      {}, router {}",
        fleet_shape(s),
        s.router().name()
    );
    if par.pipeline > 1 {
        let layers: Vec<String> = mem.stages.iter().map(|st| st.layers.to_string()).collect();
        outln!(
            "           pipeline: {} stages of {} layers, {} node(s), {} cross-node hop(s); up to {} micro-batches in flight (one per stage, as vLLM)",
            par.pipeline,
            layers.join(" + "),
            par.nodes(h.gpus_per_node),
            par.cross_node_hops(h.gpus_per_node),
            par.pipeline
        );
    }
    if par.attention_data.is_some() {
        outln!("           {}", par.describe_moe(m, h.gpus_per_node));
    } else if par.expert > 1 {
        outln!(
            "           expert parallel: {} groups of {} GPU(s) per stage, {} experts each; attention data-parallel over the groups; all-to-all dispatch + combine per MoE layer",
            par.expert,
            par.attention_tp(),
            m.num_experts / par.expert
        );
    }
    outln!(
        "engine     policy {}, max_num_seqs {}, max_batched_tokens {}, block_size {}, max_model_len {}",
        e.policy.name(),
        e.max_num_seqs,
        e.max_batched_tokens,
        e.block_size,
        s.max_model_len
    );
    let swap = if e.preemption == sim::scenario::PreemptionMode::Swap {
        format!(" ({} GiB host swap space per GPU)", e.swap_space_gib)
    } else {
        String::new()
    };
    outln!(
        "           preemption {}{swap}",
        format!("{:?}", e.preemption).to_lowercase()
    );
    if let Some(sp) = &e.speculative {
        let expected = sim::replica::speculative::Speculation::expected_tokens(
            sp.num_draft_tokens,
            sp.acceptance_rate,
        );
        let draft = match (&sp.draft_model, sp.draft_cost_fraction) {
            (Some(m), _) => format!("model {m} (its weights and KV share the memory below)"),
            (None, Some(fr)) => format!("head at {fr} × a target decode step"),
            _ => match sp.draft_layers {
                Some(n) => format!(
                    "{n} MTP/EAGLE layer(s) of the target's kind + its LM head (their weights and KV share the memory below)"
                ),
                None => String::new(),
            },
        };
        outln!(
            "           speculative decoding: k = {}, acceptance {} → {expected:.2} tokens/step expected, draft {draft}",
            sp.num_draft_tokens,
            sp.acceptance_rate,
        );
    }
    if par.pipeline > 1 {
        outln!(
            "memory per GPU of stage {} ({} layers; the stage with the fewest KV blocks):",
            mem.stage,
            mem.stages[mem.stage as usize].layers
        );
    } else {
        outln!("memory per GPU:");
    }
    outln!("           device           {}", gib(mem.device_bytes));
    outln!(
        "           usable           {} (gpu_memory_utilization {})",
        gib(mem.usable_bytes),
        e.gpu_memory_utilization
    );
    outln!("           weights          {}", gib(mem.weight_bytes));
    outln!("           activations      {}", gib(mem.activation_bytes));
    outln!("           runtime overhead {}", gib(mem.overhead_bytes));
    outln!("           KV cache         {}", gib(mem.kv_cache_bytes));
    if par.pipeline > 1 {
        for (i, st) in mem.stages.iter().enumerate() {
            outln!(
                "           stage {i}: {} layers, weights {}, activations {}, KV cache {} → {} blocks",
                st.layers,
                gib(st.weight_bytes),
                gib(st.activation_bytes),
                gib(st.kv_cache_bytes),
                st.kv_blocks
            );
        }
    }
    outln!(
        "KV cache   {} bytes/token/GPU → {} blocks of {} tokens per replica{} = {} tokens",
        mem.kv_bytes_per_token,
        mem.kv_blocks,
        mem.block_size,
        if par.expert > 1 {
            format!(
                " ({} groups × {}, one sequence within a group)",
                par.expert, mem.kv_blocks_per_group
            )
        } else {
            String::new()
        },
        mem.kv_tokens
    );
    // Models with windowed, linear or sparse layers: each kind's share.
    for (i, k) in mem.layer_kinds.iter().enumerate() {
        let what = if k.bytes_per_sequence > 0.0 {
            format!(
                "{} bytes/sequence/GPU whatever its length",
                k.bytes_per_sequence
            )
        } else {
            format!("{} bytes/token/GPU in the blocks", k.kv_bytes_per_token)
        };
        outln!(
            "{}{} × {}: {what}",
            if i == 0 { "layers     " } else { "           " },
            k.layers,
            k.kind
        );
    }
    if mem.sequence_reserve_bytes > 0.0 {
        outln!(
            "           set aside for max_num_seqs sequences: {} per GPU",
            gib(mem.sequence_reserve_bytes)
        );
    }
    if let Some(g) = &mem.kv_groups {
        // vLLM's hybrid KV cache manager: one pool, groups of layers.
        let mut per_seq = Vec::new();
        for w in [g.sliding, g.chunked].iter().flatten() {
            per_seq.push(format!(
                "{} {} group(s) free the blocks outside their {}-token {}",
                w.groups,
                if w.chunked { "chunked" } else { "sliding" },
                w.window,
                if w.chunked { "chunk" } else { "window" }
            ));
        }
        if g.state_groups > 0 {
            per_seq.push(format!(
                "{} linear group(s) hold one block of state each per sequence",
                g.state_groups
            ));
        }
        outln!(
            "kv groups  a block spans {} layers; {} full group(s) grow a block per {} tokens; {}",
            g.group_size,
            g.full_groups,
            g.block_size,
            per_seq.join("; ")
        );
    }
    let h = s.horizon();
    if h.requests.is_none() && h.duration_s.is_none() {
        outln!("horizon    until the workload ends (all its requests, drained)");
    } else {
        outln!(
            "horizon    {}{}",
            h.requests
                .map(|n| format!("{n} requests"))
                .unwrap_or_default(),
            h.duration_s
                .map(|d| format!("{}{d} s", if h.requests.is_some() { ", " } else { "" }))
                .unwrap_or_default()
        );
    }
    let w = s.workload();
    if let Some(t) = &w.trace {
        outln!(
            "workload   trace {} {} (relative to {})",
            t.format.name(),
            t.path,
            s.base_dir.display()
        );
    }
    if let Some(a) = &w.arrival {
        outln!("workload   arrivals {a}");
    }
    if let Some(p) = &w.prompt_tokens {
        outln!("           prompt   {p}");
    }
    if let Some(o) = &w.output_tokens {
        outln!("           output   {o}");
    }
    if let Some(p) = &w.length_pairs {
        outln!(
            "           lengths  (prompt, output) pairs from {} {}",
            p.trace.format.name(),
            p.trace.path
        );
    }
    for (i, t) in s.tenants().iter().enumerate() {
        outln!(
            "{}tenant {} (class {}, weight {}){}",
            if i == 0 { "tenants    " } else { "           " },
            t.name,
            t.priority.level(),
            t.weight,
            match &t.workload {
                Some(w) => match (&w.trace, &w.arrival) {
                    (Some(tr), _) => format!(": trace {} {}", tr.format.name(), tr.path),
                    (None, Some(a)) => format!(": arrivals {a}"),
                    _ => String::new(),
                },
                None => String::new(),
            }
        );
    }
    if s.has_tenants() {
        outln!("fairness   {}", s.fairness().policy.name());
    }
    match s.slo() {
        Some(slo) => outln!("slo        {}", slo.targets().describe(", ")),
        None => outln!("slo        none (goodput not reported)"),
    }
}

/// `servesim check`: the workload's first request.
pub fn first_request(r: Option<&sim::workload::RequestSpec>) {
    match r {
        Some(r) => outln!(
            "           first request at {:.3} s: {} prompt + {} output tokens{}",
            r.arrival.as_secs_f64(),
            r.prompt_tokens,
            r.output_tokens,
            if r.prefix_hashes.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} prefix blocks of {} tokens",
                    r.prefix_hashes.len(),
                    r.hash_block_tokens
                )
            }
        ),
        None => outln!("           the workload has no requests"),
    }
}

pub fn hardware_catalog() {
    outln!(
        "{:<10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9} {:>5} {:>8}  source",
        "preset",
        "bf16 TF/s",
        "fp8 TF/s",
        "int8 TOPS",
        "mem GiB",
        "HBM TB/s",
        "link GB/s",
        "node",
        "net GB/s"
    );
    for p in catalog::HARDWARE {
        let h = (p.spec)();
        let opt = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_else(|| "-".into());
        outln!(
            "{:<10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9} {:>5} {:>8}  {}",
            p.key,
            h.bf16_tflops,
            opt(h.fp8_tflops),
            opt(h.int8_tops),
            h.memory_gib,
            h.memory_bw_tbps,
            h.interconnect_gbps,
            h.gpus_per_node,
            opt(h.network_gbps),
            h.source
        );
    }
}

pub fn model_catalog() {
    outln!(
        "{:<15} {:>8} {:>8} {:>6} {:>7} {:>6} {:>5} {:>6} {:>7} {:>9} {:>8}  source",
        "preset",
        "params",
        "active",
        "layers",
        "hidden",
        "heads",
        "kv",
        "hdim",
        "inter",
        "experts",
        "context"
    );
    for p in catalog::MODELS {
        let m = (p.arch)();
        // MLA caches one latent, not per-head K/V: show it in the KV column.
        let kv = match m.mla() {
            Some(_) => "MLA".to_string(),
            None => m.num_kv_heads.to_string(),
        };
        let experts = if m.is_moe() {
            format!(
                "{}/{}{}",
                m.experts_per_token,
                m.num_experts,
                if m.num_shared_experts > 0 {
                    format!("+{}", m.num_shared_experts)
                } else {
                    String::new()
                }
            )
        } else {
            "-".into()
        };
        outln!(
            "{:<15} {:>7.2}B {:>7.2}B {:>6} {:>7} {:>6} {:>5} {:>6} {:>7} {:>9} {:>8}  {}",
            p.key,
            m.total_params() / 1e9,
            m.active_params() / 1e9,
            m.layers,
            m.hidden_size,
            m.num_heads,
            kv,
            m.head_dim,
            m.intermediate_size,
            experts,
            m.max_context,
            p.source
        );
    }
}

fn dist_row(name: &str, d: &Dist) {
    if d.count == 0 {
        // Nothing was measured: say so rather than print zeros.
        outln!(
            "  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            name,
            "—",
            "—",
            "—",
            "—",
            "—",
            "—"
        );
        return;
    }
    outln!(
        "  {:<12} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
        name,
        d.mean,
        d.p50,
        d.p90,
        d.p95,
        d.p99,
        d.max
    );
}

/// What a run will hold in memory (`check`).
pub fn memory_estimate(e: &sim::guard::MemoryEstimate) {
    let n = |v: Option<u64>| v.map_or("unknown".to_string(), |v| v.to_string());
    outln!(
        "memory     about {} requests (streamed) and {} time-series rows: {:.2} GiB of {:.1} GiB allowed",
        n(e.requests),
        n(e.timeseries_rows),
        e.bytes as f64 / (1u64 << 30) as f64,
        sim::guard::memory_budget() as f64 / (1u64 << 30) as f64
    );
    if let Some(d) = e.disk_bytes {
        outln!(
            "disk       about {:.2} GiB of result files (requests.csv, timeseries.csv, pools.csv)",
            d as f64 / (1u64 << 30) as f64
        );
    }
}

/// The summary table printed by `simulate`.
pub fn summary(s: &Scenario, sum: &Summary) {
    let c = &sum.counts;
    outln!(
        "{} — {}, {}, router {}",
        sum.scenario,
        sum.model,
        fleet_shape(s),
        sum.router
    );
    outln!("costs: {}", sum.cost_source);
    outln!(
        "simulated {:.1} s, seed {}: {} arrived, {} completed, {} rejected{}, {} in flight",
        sum.duration_s,
        sum.seed,
        c.arrived,
        c.completed,
        c.rejected,
        if c.rejected_by_reason.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                c.rejected_by_reason
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        c.in_flight
    );
    outln!();
    outln!(
        "  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "latency ms",
        "mean",
        "p50",
        "p90",
        "p95",
        "p99",
        "max"
    );
    let l = &sum.latency;
    dist_row("queue wait", &l.queue_wait_ms);
    dist_row("TTFT", &l.ttft_ms);
    dist_row("TPOT", &l.tpot_ms);
    dist_row("ITL", &l.itl_ms);
    dist_row("E2E", &l.e2e_ms);
    outln!();
    let t = &sum.throughput;
    outln!(
        "throughput   {} req/s, {} input tok/s, {} output tok/s ({} per GPU)",
        rate(t.requests_per_s),
        rate(t.input_tokens_per_s),
        rate(t.output_tokens_per_s),
        rate(t.output_tokens_per_s_per_gpu)
    );
    let ld = &sum.load;
    outln!(
        "load         offered {}, achieved {} req/s: {}{}",
        ld.offered_rps
            .map_or("(no rate)".to_string(), |r| format!("{} req/s", rate(r))),
        rate(ld.achieved_rps),
        ld.verdict,
        if ld.is_stable() {
            String::new()
        } else if ld.is_overloaded() {
            format!(
                " (requests in the system grew from {:.1} to {:.1} over the run, {} in flight at the end: latencies depend on the horizon)",
                ld.in_system_early, ld.in_system_late, ld.in_flight_at_end
            )
        } else if ld.is_rejecting() && sum.counts.completed == 0 {
            format!(
                " (all {} requests rejected: the fleet served nothing)",
                sum.counts.rejected
            )
        } else if ld.is_rejecting() {
            format!(
                " ({} of {} requests rejected, {} completed: the latencies describe the few it served)",
                sum.counts.rejected, sum.counts.arrived, sum.counts.completed
            )
        } else if sum.counts.completed == 0 {
            format!(
                " (no request completed, {} in flight at the end: lengthen the horizon for steady-state figures)",
                ld.in_flight_at_end
            )
        } else {
            format!(
                " (the warm-up, {:.1} s, takes over half the arrival window: lengthen the horizon for steady-state figures)",
                ld.warmup_s
            )
        }
    );
    if let Some(slo) = &sum.slo {
        slo_lines(slo);
    }
    let e = &sum.engine;
    outln!(
        "engine       policy {}: {} iterations, mean batch {:.1} seqs / {:.0} tokens, busy {:.1} %{}",
        e.policy,
        e.iterations,
        e.mean_batch_size,
        e.mean_batch_tokens,
        e.busy_fraction * 100.0,
        e.spec_tokens_per_step
            .map(|t| format!(", {t:.2} tokens per speculative step"))
            .unwrap_or_default()
    );
    outln!(
        "KV cache     {} blocks × {} tokens per replica; use mean {:.1} %, max {:.1} %; {} preemptions by {} ({} swapped, {} requests)",
        sum.kv_blocks_per_replica,
        s.engine().block_size,
        e.kv_util_mean * 100.0,
        e.kv_util_max * 100.0,
        e.preemptions,
        e.preemption_mode,
        e.swap_outs,
        e.preempted_requests
    );
    if let Some(en) = &sum.energy {
        outln!(
            "energy       {} kWh: {:.0} W per GPU on average, {:.0} W for the fleet{} (TDP when busy, idle power otherwise)",
            sim::sig_figs::sig(en.energy_kwh, 3),
            en.avg_power_w_per_gpu,
            en.fleet_avg_power_w,
            en.joules_per_output_token
                .map(|j| format!(", {} J per output token", sim::sig_figs::sig(j, 3)))
                .unwrap_or_default()
        );
    }
    if let Some(l) = &sum.lifecycle {
        crate::fleet_print::lifecycle(l);
    }
    crate::fleet_print::regions(sum);
    for line in sim::cluster::fleet::summary_lines(&sum.pools, sum.kv_transfer.as_ref()) {
        outln!("{line}");
    }
    for line in sum.canary.iter().flat_map(|c| c.lines()) {
        outln!("{line}");
    }
    if let Some(t) = &sum.tenancy {
        tenants(t);
    }
}

/// The per-tenant table of a run with `[[tenants]]`.
fn tenants(t: &sim::tenancy::TenancyReport) {
    outln!();
    outln!(
        "tenants      fairness {}; Jain's index over weight-normalised service {:.3}",
        t.fairness,
        t.jain_index
    );
    outln!(
        "  {:<14} {:>5} {:>6} {:>9} {:>9} {:>7} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8}",
        "tenant",
        "class",
        "weight",
        "completed",
        "rejected",
        "retries",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p99",
        "SLO met"
    );
    for x in &t.tenants {
        outln!(
            "  {:<14} {:>5} {:>6} {:>9} {:>9} {:>7} {:>8} {:>10} {:>9.1} {:>9.1} {:>9.1} {:>8}",
            x.name,
            x.priority,
            x.weight,
            x.counts.completed,
            x.counts.rejected,
            x.retries,
            rate(x.requests_per_s),
            rate(x.output_tokens_per_s),
            x.latency.ttft_ms.p50,
            x.latency.ttft_ms.p99,
            x.latency.tpot_ms.p99,
            x.slo
                .as_ref()
                .map(|s| format!("{:.1} %", s.attainment * 100.0))
                .unwrap_or_else(|| "-".into())
        );
        if !x.counts.rejected_by_reason.is_empty() {
            outln!(
                "  {:<14} rejected: {}",
                "",
                x.counts
                    .rejected_by_reason
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
}

/// The run's SLO lines: attainment and goodput against the per-request
/// thresholds, then each percentile target against the run's value.
fn slo_lines(slo: &sim::report::SloReport) {
    let thresholds = [slo.ttft_ms, slo.tpot_ms, slo.e2e_ms];
    if thresholds.iter().any(Option::is_some) {
        let shares: Vec<String> = [
            ("TTFT", slo.ttft_attainment),
            ("TPOT", slo.tpot_attainment),
            ("E2E", slo.e2e_attainment),
        ]
        .iter()
        .filter_map(|(n, a)| a.map(|a| format!("{n} {:.1} %", a * 100.0)))
        .collect();
        outln!(
            "SLO          {}: {:.1} % met ({}); goodput {} req/s ({} per GPU)",
            sim::report::describe_slo(thresholds, &Default::default(), " & "),
            slo.attainment * 100.0,
            shares.join(", "),
            rate(slo.goodput_rps),
            rate(slo.goodput_rps_per_gpu)
        );
    } else {
        outln!(
            "SLO          no per-request threshold: {:.1} % of ended requests completed; goodput (every completed request) {} req/s ({} per GPU)",
            slo.attainment * 100.0,
            rate(slo.goodput_rps),
            rate(slo.goodput_rps_per_gpu)
        );
    }
    if slo.percentiles.is_empty() {
        return;
    }
    let verdicts: Vec<String> = slo
        .percentiles
        .iter()
        .map(|v| {
            let (metric, p) = v
                .key
                .trim_end_matches("_ms")
                .split_once("_p")
                .unwrap_or((&v.key, ""));
            let name = format!("{} p{p}", metric.to_uppercase());
            match v.value_ms {
                Some(x) if v.met => format!("{name} {x:.1} ms ≤ {} ms held", v.target_ms),
                Some(x) => format!("{name} {x:.1} ms > {} ms missed", v.target_ms),
                None => format!(
                    "{name} not measured (no samples), {} ms missed",
                    v.target_ms
                ),
            }
        })
        .collect();
    let missed = slo.percentiles.iter().filter(|v| !v.met).count();
    outln!(
        "SLO targets  {}: {}",
        verdicts.join("; "),
        if missed == 0 {
            "all hold".to_string()
        } else {
            format!("{missed} of {} missed", slo.percentiles.len())
        }
    );
}

/// `servesim check --json`: what the scenario resolves to and the
/// estimates `check` prints, as one JSON document (bytes and seconds in
/// base units).
pub fn check_json(
    s: &Scenario,
    est: &sim::guard::MemoryEstimate,
    capacity: &sim::simulation::estimate::CapacityEstimate,
    disk_warning: Option<String>,
) -> serde_json::Value {
    let m = &s.model;
    let h = &s.hardware;
    let mem = &s.memory;
    let e = s.engine();
    let groups: Vec<serde_json::Value> = capacity
        .groups
        .iter()
        .map(|g| {
            serde_json::json!({
                "name": g.name,
                "replicas": g.replicas,
                "decode_batch": g.batch,
                "kv_room_sequences": g.kv_room,
                "max_num_seqs": g.max_num_seqs,
                "decode_step_s": g.step_s,
                "prefill_s": g.prefill_s,
                "per_replica_rps": g.per_replica_rps,
            })
        })
        .collect();
    serde_json::json!({
        "scenario": s.name(),
        "origin": s.origin,
        "seed": s.seed(),
        "model": {
            "name": m.name,
            "params": m.total_params(),
            "active_params": m.active_params(),
            "layers": m.layers,
            "max_context": m.max_context,
            "source": s.model_source,
            "weight_dtype": s.weight_dtype.name(),
            "kv_dtype": s.kv_dtype.name(),
        },
        "hardware": {
            "name": h.name,
            "memory_gib": h.memory_gib,
            "source": h.source,
        },
        "fleet": {
            "shape": fleet_shape(s),
            "replicas": s.replicas(),
            "gpus": s.gpus(),
            "router": s.router().name(),
            "parallel": s.parallel,
            "pools": s.pools.len(),
        },
        "engine": {
            "policy": e.policy.name(),
            "max_num_seqs": e.max_num_seqs,
            "max_batched_tokens": e.max_batched_tokens,
            "block_size": e.block_size,
            "max_model_len": s.max_model_len,
        },
        "memory_per_gpu": {
            "device_bytes": mem.device_bytes,
            "usable_bytes": mem.usable_bytes,
            "weight_bytes": mem.weight_bytes,
            "activation_bytes": mem.activation_bytes,
            "overhead_bytes": mem.overhead_bytes,
            "kv_cache_bytes": mem.kv_cache_bytes,
            "kv_bytes_per_token": mem.kv_bytes_per_token,
            "kv_blocks_per_replica": mem.kv_blocks,
            "kv_tokens_per_replica": mem.kv_tokens,
        },
        "run_estimate": {
            "requests": est.requests,
            "timeseries_rows": est.timeseries_rows,
            "memory_bytes": est.bytes,
            "memory_budget_bytes": sim::guard::memory_budget(),
            "disk_bytes": est.disk_bytes,
        },
        "capacity": {
            "mean_prompt_tokens": capacity.mean_prompt,
            "mean_output_tokens": capacity.mean_output,
            "offered_rps": capacity.offered_rps,
            "capacity_rps": capacity.capacity_rps,
            "groups": groups,
        },
        "batching": s.batching,
        "notes": s.notes,
        "warnings": disk_warning.into_iter().chain(
            capacity.lines().into_iter().filter_map(|l| l.trim_start().strip_prefix("warning").map(|w| w.trim().to_string()))
        ).collect::<Vec<String>>(),
    })
}
