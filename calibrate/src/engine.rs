//! The live engine (DESIGN.md, "One scheduler, two clocks"): one replica of
//! `sim`'s scheduler — the very `Replica` the simulator runs — deciding each
//! iteration, and the model running that iteration for real on the device.
//! Requests arrive on the wall clock; the clock, not a cost model, says when
//! an iteration ends. Each sequence keeps its own KV cache; the iteration's
//! prefill chunks and decodes run as one packed forward pass with greedy
//! sampling from the real logits.

use crate::device::OpenDevice;
use crate::error::{input, Result};
use crate::measure::run_step;
use crate::model::{Model, SeqCache, Step};
use sim::cost::BatchShape;
use sim::replica::{BatchEntry, Replica, TokenGaps};
use sim::request::{Request, RequestId};
use sim::time::{Nanos, SimTime};
use sim::workload::RequestSpec;
use std::time::{Duration, Instant};

/// One iteration as it ran: the scheduler's shape and the wall time it took.
#[derive(Clone, Copy, Debug)]
pub struct Iteration {
    /// When it started on the run's clock.
    pub start: SimTime,
    pub shape: BatchShape,
    /// From batch formation to the sampled tokens on the host, ns.
    pub wall_ns: Nanos,
}

/// What a live run produced.
pub struct LiveRun {
    /// Requests in arrival order with wall-clock token times.
    pub requests: Vec<Request>,
    /// Inter-token gaps as the scheduler reported them.
    pub itl: Vec<(Nanos, u32)>,
    /// Wall time from the first arrival instant (t = 0) to the last token.
    pub end: SimTime,
    pub iterations: Vec<Iteration>,
    pub prompts: Vec<Vec<u32>>,
    /// Generated tokens per request.
    pub outputs: Vec<Vec<u32>>,
    pub preemptions: u64,
}

/// Serves `specs` (arrival order) with prompts `prompts` on one replica
/// configured as `scenario` says. `progress` is told completed requests.
pub fn serve(
    dev: &OpenDevice,
    model: &Model,
    scenario: &sim::Scenario,
    specs: &[RequestSpec],
    prompts: Vec<Vec<u32>>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<LiveRun> {
    let mut rep = Replica::new(
        0,
        scenario.engine(),
        scenario.memory.kv_blocks,
        scenario.memory.block_bytes(),
        scenario.seed(),
    );
    let mut reqs: Vec<Request> = Vec::with_capacity(specs.len());
    let mut caches: Vec<Option<SeqCache>> = Vec::with_capacity(specs.len());
    let mut outputs: Vec<Vec<u32>> = vec![Vec::new(); specs.len()];
    let mut iterations = Vec::new();
    let mut itl = Vec::new();
    let mut gaps = TokenGaps::default();
    let mut completed: Vec<RequestId> = Vec::new();
    let mut done = 0usize;
    let mut next = 0usize;
    // KV caches for every sequence slot, allocated and touched before the
    // clock starts (as serving engines preallocate their KV pool) and reused.
    let longest = specs
        .iter()
        .map(|r| (r.prompt_tokens + r.output_tokens) as usize)
        .max()
        .unwrap_or(1);
    let slots = (scenario.engine().max_num_seqs as usize).min(specs.len());
    let mut pool: Vec<SeqCache> = (0..slots)
        .map(|_| SeqCache::new(model, longest))
        .collect::<Result<_>>()?;
    let start = Instant::now();
    let clock = || SimTime(start.elapsed().as_nanos() as u64);
    loop {
        let now = clock();
        while next < specs.len() && specs[next].arrival <= now {
            let mut r = Request::from_spec(specs[next].clone());
            r.replica = 0;
            reqs.push(r);
            caches.push(None);
            rep.enqueue(next as RequestId);
            next += 1;
        }
        let formed = if rep.has_work() {
            rep.form_batch(now, &mut reqs)
        } else {
            None
        };
        let Some(shape) = formed else {
            if next == specs.len() {
                if rep.has_work() {
                    return Err(input(
                        "the scheduler stopped with requests left and none arriving (not enough KV blocks?)",
                    ));
                }
                break;
            }
            // Idle until the next arrival.
            let wait = specs[next].arrival.since(clock());
            std::thread::sleep(Duration::from_nanos(wait));
            continue;
        };
        let batch: Vec<BatchEntry> = rep.batch().collect();
        run_batch(
            dev,
            model,
            &batch,
            BatchState {
                caches: &mut caches,
                pool: &mut pool,
                capacity: longest,
                prompts: &prompts,
                outputs: &mut outputs,
            },
        )?;
        let end = clock();
        iterations.push(Iteration {
            start: now,
            shape,
            wall_ns: end.since(now),
        });
        gaps.gaps.clear();
        completed.clear();
        rep.finish_iteration(end, &mut reqs, &mut completed, &mut gaps);
        itl.extend_from_slice(&gaps.gaps);
        for &id in &completed {
            if let Some(mut c) = caches[id as usize].take() {
                c.truncate(0);
                pool.push(c);
            }
            done += 1;
        }
        if !completed.is_empty() {
            progress(done, specs.len());
        }
    }
    let end = clock();
    for (i, r) in reqs.iter().enumerate() {
        if r.generated as usize != outputs[i].len() || outputs[i].len() != r.output_tokens as usize
        {
            return Err(input(format!(
                "live engine and scheduler disagree on request {i}: {} tokens sampled, {} counted, {} requested",
                outputs[i].len(),
                r.generated,
                r.output_tokens
            )));
        }
    }
    Ok(LiveRun {
        requests: reqs,
        itl,
        end,
        iterations,
        prompts,
        outputs,
        preemptions: rep.preemptions(),
    })
}

/// The live engine's per-sequence state one batch runs on.
pub(crate) struct BatchState<'a> {
    /// Each request's KV cache while it has one.
    pub caches: &'a mut [Option<SeqCache>],
    /// Caches made before the clock started, reused (cleared) at completion.
    pub pool: &'a mut Vec<SeqCache>,
    /// Tokens a cache made on the spot can hold.
    pub capacity: usize,
    pub prompts: &'a [Vec<u32>],
    /// Tokens sampled so far, by request.
    pub outputs: &'a mut [Vec<u32>],
}

/// Runs one batch the scheduler formed: each member's cache (from the pool,
/// or a new one: recompute-preempted sequences keep their slot, so the pool
/// can run dry under memory pressure) cut back to what the scheduler says is
/// cached, its new tokens (the prompt chunk, or the last output token) in one
/// forward pass; a decode, or the chunk that completes the prefill, appends
/// its sampled token to `outputs`. Returns those (request, token) pairs.
/// `validate` and `serve --engine live` (`online`) both step this way.
pub(crate) fn run_batch(
    dev: &OpenDevice,
    model: &Model,
    batch: &[BatchEntry],
    st: BatchState<'_>,
) -> Result<Vec<(RequestId, u32)>> {
    let mut inputs: Vec<Vec<u32>> = Vec::with_capacity(batch.len());
    for e in batch {
        let id = e.id as usize;
        let cache = match &mut st.caches[id] {
            Some(c) => c,
            slot => {
                let c = match st.pool.pop() {
                    Some(c) => c,
                    None => SeqCache::new(model, st.capacity)?,
                };
                slot.insert(c)
            }
        };
        // A recompute preemption dropped the sequence's blocks: its cache
        // restarts from what the scheduler says is cached.
        cache.truncate(e.kv_tokens as usize);
        if cache.len() != e.kv_tokens as usize {
            return Err(input(format!(
                "live engine out of step with the scheduler: request {id} has {} cached tokens, the scheduler says {}",
                cache.len(),
                e.kv_tokens
            )));
        }
        let (p, o) = (&st.prompts[id], &st.outputs[id]);
        let known = |i: usize| if i < p.len() { p[i] } else { o[i - p.len()] };
        let from = e.kv_tokens as usize;
        let n = if e.decode { 1 } else { e.chunk as usize };
        inputs.push((from..from + n).map(known).collect());
    }
    // Borrow each batch member's cache once.
    let mut slots: Vec<Option<&mut SeqCache>> = st.caches.iter_mut().map(|c| c.as_mut()).collect();
    let mut steps: Vec<Step<'_>> = Vec::with_capacity(batch.len());
    for (e, toks) in batch.iter().zip(&inputs) {
        let cache = slots[e.id as usize]
            .take()
            .expect("cache of a batch member");
        steps.push(Step {
            cache,
            tokens: toks,
        });
    }
    let tokens = run_step(dev, model, &mut steps)?;
    let mut sampled = Vec::new();
    for ((e, tok), inp) in batch.iter().zip(tokens).zip(&inputs) {
        let id = e.id as usize;
        let target = st.prompts[id].len() + st.outputs[id].len();
        if e.decode || e.kv_tokens as usize + inp.len() >= target {
            st.outputs[id].push(tok);
            sampled.push((e.id, tok));
        }
    }
    Ok(sampled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceSpec;
    use crate::model::tests::tiny_model;

    fn scenario(policy: &str, blocks_hint: &str) -> sim::Scenario {
        let text = format!(
            r#"
name = "live"
seed = 5
[horizon]
requests = 6
[model]
architecture = {{ name = "tiny", layers = 2, hidden_size = 64, num_heads = 4, num_kv_heads = 2, head_dim = 16, intermediate_size = 96, vocab_size = 211, max_context = 256 }}
[hardware]
preset = "h100"
[engine]
policy = "{policy}"
max_batched_tokens = 40
max_num_seqs = 4
block_size = 4
{blocks_hint}
[workload]
arrival = {{ process = "poisson", rate = 200.0 }}
prompt_tokens = {{ dist = "uniform", min = 5, max = 30 }}
output_tokens = {{ dist = "uniform", min = 2, max = 9 }}
"#
        );
        sim::Scenario::from_toml_str(&text, "live.toml").unwrap()
    }

    /// Requests served through the live loop get exactly the tokens each
    /// sequence gets alone — chunked prefills, mixed batches and all.
    #[test]
    fn served_tokens_equal_each_sequence_alone() {
        let dev = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
        let m = tiny_model(11);
        for policy in ["sarathi", "continuous", "vllm"] {
            let s = scenario(policy, "");
            let ctx = sim::workload::Context::new(&s.origin, &s.base_dir, s.seed());
            let mut src = sim::workload::build(s.workload(), &ctx).unwrap();
            let specs: Vec<RequestSpec> = (0..6).map(|_| src.next_request().unwrap()).collect();
            let prompts: Vec<Vec<u32>> = specs
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    (0..r.prompt_tokens)
                        .map(|j| (i as u32 * 31 + j * 7) % 211)
                        .collect()
                })
                .collect();
            let mut s = s;
            let mut specs = specs;
            if policy == "continuous" {
                // 10 blocks of 4 tokens and everyone at once: sequences
                // preempt each other and recompute.
                s.memory.kv_blocks = 10;
                for r in &mut specs {
                    r.arrival = SimTime::ZERO;
                }
            }
            let run = serve(&dev, &m, &s, &specs, prompts.clone(), &mut |_, _| {}).unwrap();
            if policy == "continuous" {
                assert!(run.preemptions > 0, "memory pressure preempts");
            }
            assert!(run.iterations.len() > 6, "{policy}");
            assert!(
                run.iterations.iter().any(|it| it.shape.seqs() > 1),
                "{policy}: some batching"
            );
            for (i, r) in run.requests.iter().enumerate() {
                assert!(r.finished.unwrap() >= r.first_token.unwrap());
                let alone = m
                    .generate_alone(&prompts[i], r.output_tokens as usize)
                    .unwrap();
                assert_eq!(run.outputs[i], alone, "{policy}: request {i}");
            }
        }
    }
}
