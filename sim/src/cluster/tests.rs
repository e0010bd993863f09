//! Pools and disaggregation end to end through `Simulation`: the data path
//! conserves requests, blocks and bytes; TTFT ends on the prefill side; the
//! link queues; back-pressure holds KV on the prefill pool; the conditional
//! rule prefills locally; bad pool keys name their path.

use crate::report::RunResult;
use crate::scenario::Scenario;
use crate::simulation::Simulation;

const BASE: &str = r#"
name = "d"
seed = 3
[horizon]
requests = 300
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[engine]
policy = "sarathi"
max_batched_tokens = 4096
max_model_len = 16384
[workload]
arrival = { process = "poisson", rate = 8.0 }
prompt_tokens = { dist = "lognormal", mean = 6000, cv = 0.3, min = 512, max = 12000 }
output_tokens = { dist = "lognormal", mean = 100, cv = 0.3, min = 8, max = 400 }
"#;

const PD: &str = r#"
[[fleet.pools]]
name = "p"
role = "prefill"
replicas = 2
[[fleet.pools]]
name = "d"
role = "decode"
replicas = 2
"#;

fn load(extra: &str) -> Result<Scenario, crate::scenario::ScenarioError> {
    Scenario::from_toml_str(&format!("{BASE}{extra}"), "d.toml")
}

fn run(extra: &str) -> RunResult {
    let s = load(extra).unwrap();
    Simulation::new(&s).run(|_| {}).unwrap()
}

fn link(bw: f64, mode: &str, local: u32) -> String {
    format!(
        "{PD}[fleet.kv_transfer]\nbandwidth_gbyte_s = {bw}\nmode = \"{mode}\"\nlocal_prefill_max_tokens = {local}\n"
    )
}

#[test]
fn disaggregated_run_moves_every_prompt_and_conserves_bytes() {
    let r = run(&link(50.0, "whole", 0));
    let s = &r.summary;
    assert_eq!(s.counts.completed, 300);
    let t = s.kv_transfer.as_ref().unwrap();
    assert_eq!(t.transfers, 300);
    assert_eq!(t.bytes_sent, t.bytes_received);
    assert_eq!(s.pools.len(), 2);
    assert_eq!(s.gpus, 4);
    for q in &r.requests {
        let rec = q.kv_transfer().unwrap();
        // Prefilled on a prefill replica (0, 1), decoded on a decode one.
        assert!(rec.prefill_replica < 2 && q.replica >= 2, "{rec:?}");
        assert_eq!(rec.bytes, q.prompt_tokens as u64 * 131_072);
        // TTFT ends on the prefill side, before the KV moves.
        assert_eq!(q.first_token, rec.handoff);
        assert!(rec.done.unwrap() > rec.handoff.unwrap());
        // 50 GB/s: the copy alone takes bytes / bandwidth.
        let wire = rec.bytes as f64 / 50e9 * 1e9;
        assert!(
            (rec.link_ns as f64 - wire).abs() <= 1.0,
            "{} {wire}",
            rec.link_ns
        );
    }
}

#[test]
fn a_slower_link_delays_decoding_not_the_first_token() {
    let fast = run(&link(50.0, "whole", 0));
    let slow = run(&link(2.0, "whole", 0));
    // TTFT ends on the prefill replica, before the KV moves. (The prefill
    // router weighs the KV each replica holds for its link, so a slower
    // link places prompts differently; this one is saturated, and held KV
    // takes prefill memory, so TTFT is not the fast link's.)
    for q in fast.requests.iter().chain(&slow.requests) {
        assert_eq!(q.first_token, q.kv_transfer().unwrap().handoff);
    }
    let (f, s) = (&fast.summary, &slow.summary);
    let (tf, ts) = (
        f.kv_transfer.as_ref().unwrap(),
        s.kv_transfer.as_ref().unwrap(),
    );
    assert!(
        ts.link_utilization > 0.5 && tf.link_utilization < 0.1,
        "{ts:?} {tf:?}"
    );
    assert!(ts.link_queue_ms_mean > tf.link_queue_ms_mean);
    assert!(s.latency.tpot_ms.p99 > f.latency.tpot_ms.p99 * 1.5);
}

#[test]
fn layer_wise_transfer_hides_the_copy_behind_the_prefill() {
    let whole = run(&link(10.0, "whole", 0));
    let layered = run(&link(10.0, "layer-wise", 0));
    let w = whole.summary.kv_transfer.unwrap();
    let l = layered.summary.kv_transfer.unwrap();
    assert!(l.transfer_ms_mean < w.transfer_ms_mean / 2.0, "{l:?} {w:?}");
    assert_eq!(l.bytes_sent, w.bytes_sent);
}

#[test]
fn conditional_disaggregation_prefills_short_prompts_on_the_decode_replica() {
    let r = run(&link(50.0, "whole", 6000));
    let t = r.summary.kv_transfer.as_ref().unwrap();
    let local = r
        .requests
        .iter()
        .filter(|q| q.kv_transfer().is_none())
        .count() as u64;
    assert_eq!(t.local_prefills, local);
    assert!(local > 50 && t.transfers > 50, "{t:?}");
    for q in &r.requests {
        match q.kv_transfer() {
            None => assert!(q.prompt_tokens <= 6000 && q.replica >= 2),
            Some(_) => assert!(q.prompt_tokens > 6000),
        }
    }
}

#[test]
fn a_full_decode_pool_holds_kv_on_the_prefill_side() {
    // Decode replicas with little KV memory: handed-off caches wait for it.
    let extra = format!(
        "{}[fleet.pools.engine]\nmax_num_seqs = 2\n",
        link(50.0, "whole", 0)
    );
    // TOML attaches `[fleet.pools.engine]` to the last pool, the decode one:
    // two sequences per decode replica cannot keep up with the prefills.
    let r = run(&extra);
    let t = r.summary.kv_transfer.as_ref().unwrap();
    assert!(t.decode_wait_ms_p99 > 100.0, "{t:?}");
    let pre = &r.summary.pools[0];
    let dec = &r.summary.pools[1];
    assert_eq!(pre.role, "prefill");
    assert!(
        pre.kv_util_max > 0.3 && pre.kv_util_mean > 5.0 * dec.kv_util_mean,
        "prefill memory fills: {pre:?} {dec:?}"
    );
    assert_eq!(r.summary.counts.completed, 300);
}

#[test]
fn disaggregated_runs_are_deterministic() {
    let a = run(&link(5.0, "layer-wise", 2000));
    let b = run(&link(5.0, "layer-wise", 2000));
    assert_eq!(a.summary, b.summary);
}

#[test]
fn one_colocated_pool_is_the_plain_fleet() {
    let plain = run("[fleet]\nreplicas = 3\n");
    let pooled = run("[[fleet.pools]]\nname = \"all\"\nreplicas = 3\n");
    let ttft = |r: &RunResult| r.requests.iter().map(|q| q.ttft()).collect::<Vec<_>>();
    assert_eq!(ttft(&plain), ttft(&pooled));
    assert_eq!(pooled.summary.pools.len(), 1);
    assert!(plain.summary.pools.is_empty() && plain.summary.kv_transfer.is_none());
}

#[test]
fn bad_pool_keys_name_their_path() {
    let cases = [
        (
            format!("{PD}[fleet.kv_transfer]\nbandwidth_gbyte_s = 0"),
            "fleet.kv_transfer.bandwidth_gbyte_s",
        ),
        (
            format!("{PD}[fleet.kv_transfer]\nlatency_us = -1"),
            "fleet.kv_transfer.latency_us",
        ),
        ("[[fleet.pools]]\nname = \"a\"\nreplicas = 0".into(), "fleet.pools[0].replicas"),
        (
            "[fleet.kv_transfer]\nbandwidth_gbyte_s = 25".into(),
            "fleet.kv_transfer",
        ),
        (
            "[[fleet.pools]]\nname = \"a\"\nreplicas = 1\n[[fleet.pools]]\nname = \"a\"\nreplicas = 1".into(),
            "fleet.pools[1].name",
        ),
        (
            "[[fleet.pools]]\nname = \"a\"\nreplicas = 1\nrouter = \"random\"".into(),
            "fleet.pools[0].router",
        ),
        (
            "[[fleet.pools]]\nname = \"a\"\nrole = \"prefill\"\nreplicas = 1".into(),
            "fleet.pools",
        ),
        (
            format!("[fleet]\nreplicas = 3\n{PD}"),
            "fleet.replicas",
        ),
        (
            format!("{PD}[[fleet.pools]]\nname = \"c\"\nreplicas = 1"),
            "fleet.pools",
        ),
        (
            "[[fleet.pools]]\nname = \"a\"\nreplicas = 1\nhardware = \"tpu\"".into(),
            "fleet.pools[0].hardware",
        ),
        (
            "[[fleet.pools]]\nname = \"a\"\nreplicas = 1\ntensor_parallel = 3".into(),
            "fleet.pools[0].tensor_parallel",
        ),
        (
            "[[fleet.pools]]\nname = \"a\"\nreplicas = 1\n[fleet.pools.engine]\nmax_num_seqs = 0".into(),
            "fleet.pools[0].engine.max_num_seqs",
        ),
        (
            "[[fleet.pools]]\nname = \"a\"\nreplicas = 1\n[fleet.pools.engine]\nmax_seqs = 4".into(),
            "fleet.pools[0].engine",
        ),
        (
            "[[fleet.pools]]\nname = \"a\"\nreplicas = 1\nrole = \"both\"".into(),
            "fleet.pools[0].role",
        ),
    ];
    for (text, key) in cases {
        let e = load(&text).unwrap_err();
        assert!(e.key.starts_with(key), "{text}: {e}");
        assert!(e.to_string().contains("d.toml"), "{e}");
    }
    // A pool whose hardware cannot hold the model says so.
    let e = load("[[fleet.pools]]\nname = \"small\"\nreplicas = 1\nhardware = \"l4\"\n[fleet.pools.engine]\nmax_model_len = 100000")
        .unwrap_err();
    assert!(e.key.starts_with("fleet.pools[0]"), "{e}");
    assert!(e.message.contains("small"), "{e}");
}

#[test]
fn a_follow_up_turn_cached_on_its_decode_replica_prefills_there() {
    // Multi-turn chat with prefix caching: a follow-up's prompt is the
    // conversation so far, which its decode replica cached when the last
    // turn finished there; only the new tokens are left to prefill.
    let s = Scenario::from_toml_str(
        &format!(
            r#"
name = "c"
seed = 5
[horizon]
requests = 400
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
router = "session-affinity"
[engine]
prefix_caching = true
max_model_len = 32768
[workload]
arrival = {{ process = "poisson", rate = 4.0 }}
prompt_tokens = {{ dist = "fixed", value = 3000 }}
output_tokens = {{ dist = "fixed", value = 50 }}
conversation = {{ turns = {{ dist = "fixed", value = 4 }}, think_time_s = 2.0, follow_up_tokens = {{ dist = "fixed", value = 200 }} }}
{PD}[fleet.kv_transfer]
local_prefill_max_tokens = 1000
"#
        ),
        "c.toml",
    )
    .unwrap();
    let r = Simulation::new(&s).run(|_| {}).unwrap();
    let local: Vec<_> = r
        .requests
        .iter()
        .filter(|q| q.kv_transfer().is_none())
        .collect();
    let remote = r.requests.len() - local.len();
    // First turns (3000 new tokens) go through the prefill pool; most
    // follow-ups (long prompts, 200 new tokens) stay on their decode replica.
    assert!(
        remote > 50 && local.len() > 150,
        "{remote} remote, {} local",
        local.len()
    );
    assert!(local
        .iter()
        .all(|q| q.prompt_tokens > 1000 && q.replica >= 2));
    assert_eq!(
        r.summary.kv_transfer.unwrap().local_prefills,
        local.len() as u64
    );
}
