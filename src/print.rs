//! Human-readable output: the resolved configuration, the catalog, and the
//! summary table of a run.

use sim::catalog::{self, GIB};
use sim::metrics::{Dist, Summary};
use sim::Scenario;

fn gib(b: f64) -> String {
    format!("{:.2} GiB", b / GIB)
}

/// `servesim check`: what the scenario resolves to.
pub fn resolved(s: &Scenario) {
    let f = &s.file;
    let m = &s.model;
    let h = &s.hardware;
    let mem = &s.memory;
    println!("scenario   {} ({})  seed {}", f.name, s.origin, f.seed);
    if let Some(d) = &f.description {
        println!("           {d}");
    }
    println!(
        "model      {}: {:.2}B params, {} layers, hidden {}, {} heads / {} KV heads × {}, MLP {}{}, vocab {}, context {}",
        m.name,
        m.total_params() / 1e9,
        m.layers,
        m.hidden_size,
        m.num_heads,
        m.num_kv_heads,
        m.head_dim,
        m.intermediate_size,
        if m.gated_mlp { " (gated)" } else { "" },
        m.vocab_size,
        m.max_context
    );
    println!("           source: {}", s.model_source);
    println!(
        "           weights {}  KV cache {}",
        s.weight_dtype, s.kv_dtype
    );
    println!(
        "hardware   {}: {} TFLOP/s bf16{}, {} GiB at {} TB/s, link {} GB/s",
        h.name,
        h.bf16_tflops,
        h.fp8_tflops
            .map(|v| format!(", {v} fp8"))
            .unwrap_or_default(),
        h.memory_gib,
        h.memory_bw_tbps,
        h.interconnect_gbps
    );
    println!("           source: {}", h.source);
    println!(
        "fleet      {} replica(s) × TP {} = {} GPUs, router {}",
        f.fleet.replicas,
        f.fleet.tensor_parallel,
        s.gpus(),
        f.fleet.router.name()
    );
    println!(
        "engine     max_num_seqs {}, max_batched_tokens {}, block_size {}, max_model_len {}",
        f.engine.max_num_seqs, f.engine.max_batched_tokens, f.engine.block_size, s.max_model_len
    );
    println!("memory per GPU:");
    println!("           device           {}", gib(mem.device_bytes));
    println!(
        "           usable           {} (gpu_memory_utilization {})",
        gib(mem.usable_bytes),
        f.engine.gpu_memory_utilization
    );
    println!("           weights          {}", gib(mem.weight_bytes));
    println!("           activations      {}", gib(mem.activation_bytes));
    println!("           runtime overhead {}", gib(mem.overhead_bytes));
    println!("           KV cache         {}", gib(mem.kv_cache_bytes));
    println!(
        "KV cache   {} bytes/token/GPU → {} blocks of {} tokens per replica = {} tokens",
        mem.kv_bytes_per_token, mem.kv_blocks, mem.block_size, mem.kv_tokens
    );
    let h = &f.horizon;
    if h.requests.is_none() && h.duration_s.is_none() {
        println!("horizon    until the workload ends (all its requests, drained)");
    } else {
        println!(
            "horizon    {}{}",
            h.requests
                .map(|n| format!("{n} requests"))
                .unwrap_or_default(),
            h.duration_s
                .map(|d| format!("{}{d} s", if h.requests.is_some() { ", " } else { "" }))
                .unwrap_or_default()
        );
    }
    let w = &f.workload;
    if let Some(t) = &w.trace {
        println!(
            "workload   trace {} {} (relative to {})",
            t.format.name(),
            t.path,
            s.base_dir.display()
        );
    }
    if let Some(a) = &w.arrival {
        println!("workload   arrivals {a:?}");
    }
    if let Some(p) = &w.prompt_tokens {
        println!("           prompt   {p:?}");
    }
    if let Some(o) = &w.output_tokens {
        println!("           output   {o:?}");
    }
    if let Some(p) = &w.length_pairs {
        println!(
            "           lengths  (prompt, output) pairs from {} {}",
            p.trace.format.name(),
            p.trace.path
        );
    }
    match &f.slo {
        Some(slo) => println!(
            "slo        TTFT ≤ {} ms, TPOT ≤ {} ms",
            slo.ttft_ms, slo.tpot_ms
        ),
        None => println!("slo        none (goodput not reported)"),
    }
}

/// `servesim check`: the workload's first request.
pub fn first_request(r: Option<&sim::workload::RequestSpec>) {
    match r {
        Some(r) => println!(
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
        None => println!("           the workload has no requests"),
    }
}

pub fn hardware_catalog() {
    println!(
        "{:<10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9}  source",
        "preset", "bf16 TF/s", "fp8 TF/s", "int8 TOPS", "mem GiB", "HBM TB/s", "link GB/s"
    );
    for p in catalog::HARDWARE {
        let h = (p.spec)();
        let opt = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_else(|| "-".into());
        println!(
            "{:<10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9}  {}",
            p.key,
            h.bf16_tflops,
            opt(h.fp8_tflops),
            opt(h.int8_tops),
            h.memory_gib,
            h.memory_bw_tbps,
            h.interconnect_gbps,
            h.source
        );
    }
}

pub fn model_catalog() {
    println!(
        "{:<15} {:>8} {:>6} {:>7} {:>6} {:>4} {:>6} {:>7} {:>8}  source",
        "preset", "params", "layers", "hidden", "heads", "kv", "hdim", "inter", "context"
    );
    for p in catalog::MODELS {
        let m = (p.arch)();
        println!(
            "{:<15} {:>7.2}B {:>6} {:>7} {:>6} {:>4} {:>6} {:>7} {:>8}  {}",
            p.key,
            m.total_params() / 1e9,
            m.layers,
            m.hidden_size,
            m.num_heads,
            m.num_kv_heads,
            m.head_dim,
            m.intermediate_size,
            m.max_context,
            p.source
        );
    }
}

fn dist_row(name: &str, d: &Dist) {
    println!(
        "  {:<12} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
        name, d.mean, d.p50, d.p90, d.p95, d.p99, d.max
    );
}

/// The summary table printed by `simulate`.
pub fn summary(s: &Scenario, sum: &Summary) {
    let c = &sum.counts;
    println!(
        "{} — {} on {} × {} (TP {}), {} GPUs, router {}",
        sum.scenario,
        sum.model,
        sum.replicas,
        sum.hardware,
        sum.tensor_parallel,
        sum.gpus,
        sum.router
    );
    println!("costs: {}", sum.cost_source);
    println!(
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
    println!();
    println!(
        "  {:<12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "latency ms", "mean", "p50", "p90", "p95", "p99", "max"
    );
    let l = &sum.latency;
    dist_row("queue wait", &l.queue_wait_ms);
    dist_row("TTFT", &l.ttft_ms);
    dist_row("TPOT", &l.tpot_ms);
    dist_row("ITL", &l.itl_ms);
    dist_row("E2E", &l.e2e_ms);
    println!();
    let t = &sum.throughput;
    println!(
        "throughput   {:.2} req/s, {:.0} input tok/s, {:.0} output tok/s ({:.0} per GPU)",
        t.requests_per_s,
        t.input_tokens_per_s,
        t.output_tokens_per_s,
        t.output_tokens_per_s_per_gpu
    );
    if let Some(slo) = &sum.slo {
        println!(
            "SLO          TTFT ≤ {} ms & TPOT ≤ {} ms: {:.1} % met (TTFT {:.1} %, TPOT {:.1} %); goodput {:.2} req/s ({:.3} per GPU)",
            slo.ttft_ms,
            slo.tpot_ms,
            slo.attainment * 100.0,
            slo.ttft_attainment * 100.0,
            slo.tpot_attainment * 100.0,
            slo.goodput_rps,
            slo.goodput_rps_per_gpu
        );
    }
    let e = &sum.engine;
    println!(
        "engine       {} iterations, mean batch {:.1} seqs / {:.0} tokens, busy {:.1} %",
        e.iterations,
        e.mean_batch_size,
        e.mean_batch_tokens,
        e.busy_fraction * 100.0
    );
    println!(
        "KV cache     {} blocks × {} tokens per replica; use mean {:.1} %, max {:.1} %; {} preemptions ({} requests)",
        sum.kv_blocks_per_replica,
        s.file.engine.block_size,
        e.kv_util_mean * 100.0,
        e.kv_util_max * 100.0,
        e.preemptions,
        e.preempted_requests
    );
}
