//! The live engine one iteration at a time, for a server (`servesim serve
//! --engine live`): the same pairing as [`crate::engine`] — `sim`'s
//! `Replica` deciding each iteration, the model running it for real — but
//! with requests submitted and cancelled while it runs instead of a
//! workload known up front. A server calls [`Online::step`] in a loop and
//! handles its clients' submissions and disconnects between steps, which is
//! where vLLM's engine core handles them too (`EngineCore.step` /
//! `abort_requests`): a cancelled sequence leaves the batch at the next
//! iteration, its KV blocks are freed and the model stops computing it.

use crate::device::OpenDevice;
use crate::engine::{run_batch, BatchState, Iteration};
use crate::error::{input, Result};

use crate::model::{Model, SeqCache};
use sim::replica::{BatchEntry, Replica, TokenGaps};
use sim::request::{Request, RequestId, Status};
use sim::time::SimTime;

/// What one iteration produced.
#[derive(Debug, Clone, Default)]
pub struct Stepped {
    /// The iteration as it ran (`None` when there was nothing to run).
    pub iteration: Option<Iteration>,
    /// Tokens sampled this iteration, by request, in batch order.
    pub sampled: Vec<(RequestId, u32)>,
    /// Requests that got their last token this iteration.
    pub completed: Vec<RequestId>,
}

/// One replica of the live engine serving requests as they come.
pub struct Online<'m> {
    dev: &'m OpenDevice,
    model: &'m Model,
    rep: Replica,
    reqs: Vec<Request>,
    caches: Vec<Option<SeqCache>>,
    prompts: Vec<Vec<u32>>,
    outputs: Vec<Vec<u32>>,
    /// Caches of finished sequences, reused (as engines reuse KV memory).
    pool: Vec<SeqCache>,
    /// Tokens each cache holds: the longest prompt + output served.
    capacity: usize,
    gaps: TokenGaps,
    completed: Vec<RequestId>,
}

impl<'m> Online<'m> {
    /// A replica configured as `scenario` says (engine and KV blocks),
    /// serving sequences of up to `capacity` tokens.
    pub fn new(
        dev: &'m OpenDevice,
        model: &'m Model,
        scenario: &sim::Scenario,
        capacity: usize,
    ) -> Online<'m> {
        Online {
            dev,
            model,
            rep: Replica::new(
                0,
                scenario.engine(),
                scenario.memory.kv_blocks,
                scenario.memory.block_bytes(),
                scenario.seed(),
            ),
            reqs: Vec::new(),
            caches: Vec::new(),
            prompts: Vec::new(),
            outputs: Vec::new(),
            pool: Vec::new(),
            capacity: capacity.max(1),
            gaps: TokenGaps::default(),
            completed: Vec::new(),
        }
    }

    /// Longest prompt + output a request may have.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The scheduler (queue lengths, KV blocks in use, preemptions).
    pub fn replica(&self) -> &Replica {
        &self.rep
    }

    /// Request `id`'s record.
    pub fn request(&self, id: RequestId) -> &Request {
        &self.reqs[id as usize]
    }

    /// Queues a request for `prompt` and `output_tokens` new tokens, arrived
    /// at `now`.
    pub fn submit(
        &mut self,
        now: SimTime,
        prompt: Vec<u32>,
        output_tokens: u32,
    ) -> Result<RequestId> {
        let vocab = self.model.cfg.vocab_size as u32;
        if let Some(&bad) = prompt.iter().find(|&&t| t >= vocab) {
            return Err(input(format!(
                "token id {bad} is outside the model's vocabulary of {vocab}"
            )));
        }
        if prompt.is_empty() || output_tokens == 0 {
            return Err(input(
                "a request needs a prompt and at least one output token",
            ));
        }
        if prompt.len() + output_tokens as usize > self.capacity {
            return Err(input(format!(
                "{} prompt + {output_tokens} output tokens exceed the {} a sequence may hold",
                prompt.len(),
                self.capacity
            )));
        }
        let id = self.reqs.len() as RequestId;
        let mut r = Request::new(now, prompt.len() as u32, output_tokens);
        r.replica = 0;
        self.reqs.push(r);
        self.caches.push(None);
        self.prompts.push(prompt);
        self.outputs.push(Vec::new());
        self.rep.enqueue(id);
        Ok(id)
    }

    /// Takes request `id` out of the queue or the batch and frees its KV
    /// blocks and cache; false when it is not held (finished, or cancelled).
    pub fn cancel(&mut self, id: RequestId, now: SimTime) -> bool {
        if self.reqs.get(id as usize).map(|r| r.status) != Some(Status::InFlight) {
            return false;
        }
        let held = self.rep.cancel(id, now, &mut self.reqs);
        self.release(id);
        held
    }

    fn release(&mut self, id: RequestId) {
        let i = id as usize;
        if let Some(mut c) = self.caches[i].take() {
            c.truncate(0);
            self.pool.push(c);
        }
        // A long-running server keeps each request's record, not its tokens.
        self.prompts[i] = Vec::new();
        self.outputs[i] = Vec::new();
    }

    /// Sequences holding a cache now (for tests: 0 once every request has
    /// finished or been cancelled).
    pub fn caches_in_use(&self) -> usize {
        self.caches.iter().filter(|c| c.is_some()).count()
    }

    /// Whether anything waits or runs.
    pub fn has_work(&self) -> bool {
        self.rep.has_work()
    }

    /// Forms the batch at `clock()`, runs it on the device and applies the
    /// outcome at `clock()` after it. Nothing to run: an empty [`Stepped`].
    pub fn step(&mut self, clock: &dyn Fn() -> SimTime) -> Result<Stepped> {
        let now = clock();
        let Some(shape) = (if self.rep.has_work() {
            self.rep.form_batch(now, &mut self.reqs)
        } else {
            None
        }) else {
            return Ok(Stepped::default());
        };
        let batch: Vec<BatchEntry> = self.rep.batch().collect();
        let sampled = run_batch(
            self.dev,
            self.model,
            &batch,
            BatchState {
                caches: &mut self.caches,
                pool: &mut self.pool,
                capacity: self.capacity,
                prompts: &self.prompts,
                outputs: &mut self.outputs,
            },
        )?;
        let end = clock();
        self.gaps.gaps.clear();
        self.completed.clear();
        self.rep
            .finish_iteration(end, &mut self.reqs, &mut self.completed, &mut self.gaps);
        let completed = std::mem::take(&mut self.completed);
        for &id in &completed {
            self.release(id);
        }
        Ok(Stepped {
            iteration: Some(Iteration {
                start: now,
                shape,
                wall_ns: end.since(now),
            }),
            sampled,
            completed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceSpec;
    use crate::model::tests::tiny_model;

    fn scenario() -> sim::Scenario {
        sim::Scenario::from_toml_str(
            r#"
name = "online"
[horizon]
requests = 3
[model]
architecture = { name = "tiny", layers = 2, hidden_size = 64, num_heads = 4, num_kv_heads = 2, head_dim = 16, intermediate_size = 96, vocab_size = 211, max_context = 256 }
[hardware]
preset = "h100"
[engine]
policy = "sarathi"
max_batched_tokens = 16
max_num_seqs = 4
block_size = 4
[workload]
arrival = { process = "poisson", rate = 1.0 }
prompt_tokens = { dist = "fixed", value = 8 }
output_tokens = { dist = "fixed", value = 4 }
"#,
            "online.toml",
        )
        .unwrap()
    }

    /// Requests submitted while others run get each sequence's tokens
    /// alone; a cancelled one leaves the batch, frees its blocks and its
    /// cache, and is computed no more.
    #[test]
    fn submitted_tokens_equal_alone_and_cancel_frees_everything() {
        let dev = OpenDevice::open(DeviceSpec::Cpu, None).unwrap();
        let m = tiny_model(3);
        let s = scenario();
        let mut on = Online::new(&dev, &m, &s, 64);
        let t0 = std::time::Instant::now();
        let clock = || SimTime(t0.elapsed().as_nanos() as u64);
        let prompts: Vec<Vec<u32>> = (0..3u32)
            .map(|i| (0..20).map(|j| (i * 37 + j * 11) % 211).collect())
            .collect();
        let a = on.submit(clock(), prompts[0].clone(), 6).unwrap();
        let victim = on.submit(clock(), prompts[1].clone(), 40).unwrap();
        let mut got: Vec<Vec<u32>> = vec![Vec::new(); 3];
        let mut b = None;
        let mut victim_steps_after_cancel = 0;
        let mut cancelled = false;
        for step in 0..200 {
            let st = on.step(&clock).unwrap();
            for &(id, t) in &st.sampled {
                got[id as usize].push(t);
                if cancelled && id == victim {
                    victim_steps_after_cancel += 1;
                }
            }
            if step == 1 {
                b = Some(on.submit(clock(), prompts[2].clone(), 5).unwrap());
            }
            if !cancelled && got[victim as usize].len() >= 3 {
                assert!(on.cancel(victim, clock()));
                assert!(!on.cancel(victim, clock()), "only once");
                cancelled = true;
            }
            if !on.has_work() {
                break;
            }
        }
        let b = b.unwrap();
        assert!(cancelled);
        assert_eq!(victim_steps_after_cancel, 0);
        assert_eq!(on.request(victim).status, Status::Cancelled);
        assert_eq!(on.replica().kv().used(), 0, "all blocks free");
        assert_eq!(on.caches_in_use(), 0);
        for (id, n) in [(a, 6), (b, 5)] {
            let alone = m.generate_alone(&prompts[id as usize], n).unwrap();
            assert_eq!(got[id as usize], alone, "request {id}");
            assert_eq!(on.request(id).status, Status::Completed);
        }
        let e = on.submit(clock(), vec![500], 1).unwrap_err().to_string();
        assert!(e.contains("outside the model's vocabulary"), "{e}");
        let e = on.submit(clock(), vec![1; 60], 5).unwrap_err().to_string();
        assert!(e.contains("exceed the 64"), "{e}");
    }
}
