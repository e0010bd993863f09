use super::*;
use crate::scenario::{BatchPolicyKind, EngineCfg};

pub fn engine(max_num_seqs: u32, max_batched_tokens: u32, block_size: u32) -> EngineCfg {
    EngineCfg {
        max_num_seqs,
        max_batched_tokens,
        block_size,
        ..EngineCfg::default()
    }
}

pub fn replica(e: &EngineCfg, blocks: u64) -> Replica {
    Replica::new(0, e, blocks, 1024.0, 1)
}

/// Runs a replica to completion with 1 µs iterations; returns the shapes.
pub fn run_to_end(rep: &mut Replica, reqs: &mut [Request]) -> Vec<BatchShape> {
    let mut t = SimTime(0);
    let mut shapes = vec![];
    while let Some(shape) = rep.form_batch(t, reqs) {
        shapes.push(shape);
        t = t.plus(1000);
        rep.finish_iteration(t, reqs, &mut vec![], &mut TokenGaps::default());
        assert!(shapes.len() < 1_000_000, "no progress");
    }
    shapes
}

pub fn requests(n: usize, prompt: u32, output: u32) -> Vec<Request> {
    (0..n)
        .map(|_| Request::new(SimTime(0), prompt, output))
        .collect()
}

pub fn assert_all_completed(rep: &Replica, reqs: &[Request]) {
    for r in reqs {
        assert_eq!(r.status, Status::Completed);
        assert_eq!(r.generated, r.output_tokens);
    }
    assert_eq!(rep.kv().used(), 0);
    assert_eq!(rep.kv().granted(), rep.kv().freed());
}

#[test]
fn admits_fcfs_within_token_budget_and_completes_exact_tokens() {
    let mut reqs = requests(3, 100, 3);
    let mut rep = replica(&engine(8, 250, 16), 1000);
    for i in 0..3 {
        rep.enqueue(i);
    }
    let shapes = run_to_end(&mut rep, &mut reqs);
    // Budget 250: two 100-token prompts fit in the first iteration, the third next.
    assert_eq!(shapes[0].prefill_seqs, 2);
    assert_eq!(shapes[1].prefill_seqs, 1);
    assert_eq!(shapes[1].decode_seqs, 2);
    assert_all_completed(&rep, &reqs);
}

#[test]
fn decode_out_of_blocks_preempts_most_recent_and_recomputes() {
    // 4 blocks of 4 tokens. Two requests of prompt 4 and output 6 each
    // need up to 3 blocks each: they cannot both finish without preemption.
    let mut reqs = requests(2, 4, 6);
    let mut rep = replica(&engine(8, 100, 4), 4);
    rep.enqueue(0);
    rep.enqueue(1);
    let shapes = run_to_end(&mut rep, &mut reqs);
    assert!(reqs[1].preemptions >= 1, "the later request is the victim");
    assert_eq!(reqs[0].preemptions, 0);
    // The recompute prefill covers prompt + generated tokens.
    assert!(shapes.iter().any(|s| s.prefill_tokens > 4));
    assert_all_completed(&rep, &reqs);
    let total: u64 = reqs.iter().map(|r| r.preemptions as u64).sum();
    assert_eq!(rep.preemptions(), total);
}

#[test]
fn swap_preemption_keeps_progress_and_moves_bytes_over_pcie() {
    let mut reqs = requests(2, 4, 6);
    let mut e = engine(8, 100, 4);
    e.preemption = PreemptionMode::Swap;
    let mut rep = replica(&e, 4);
    rep.enqueue(0);
    rep.enqueue(1);
    let shapes = run_to_end(&mut rep, &mut reqs);
    assert!(rep.swap_outs() >= 1);
    assert_eq!(
        rep.preemptions(),
        rep.swap_outs(),
        "all preemptions swapped"
    );
    // Swapped sequences are never re-prefilled.
    assert_eq!(shapes.iter().map(|s| s.prefill_tokens).sum::<u64>(), 8);
    // Out and back in: 2 × blocks × 1024 bytes each time.
    let swapped: f64 = shapes.iter().map(|s| s.swap_bytes).sum();
    assert!(swapped > 0.0 && swapped % 2048.0 == 0.0, "{swapped}");
    assert_all_completed(&rep, &reqs);
    assert_eq!(rep.host_blocks_held(), (0, 0));
}

#[test]
fn swap_falls_back_to_recompute_without_host_space() {
    let mut reqs = requests(2, 4, 6);
    let mut e = engine(8, 100, 4);
    e.preemption = PreemptionMode::Swap;
    e.swap_space_gib = 0.0;
    let mut rep = replica(&e, 4);
    rep.enqueue(0);
    rep.enqueue(1);
    run_to_end(&mut rep, &mut reqs);
    assert!(rep.preemptions() >= 1);
    assert_eq!(rep.swap_outs(), 0);
    assert_all_completed(&rep, &reqs);
}

#[test]
fn batch_lists_what_the_iteration_runs() {
    let mut reqs = requests(2, 10, 3);
    let mut rep = replica(&engine(8, 100, 4), 100);
    rep.enqueue(0);
    rep.form_batch(SimTime(0), &mut reqs).unwrap();
    let b: Vec<BatchEntry> = rep.batch().collect();
    assert_eq!(
        b,
        vec![BatchEntry {
            id: 0,
            chunk: 10,
            kv_tokens: 0,
            decode: false
        }]
    );
    rep.finish_iteration(
        SimTime(5),
        &mut reqs,
        &mut vec![],
        &mut TokenGaps::default(),
    );
    rep.enqueue(1);
    rep.form_batch(SimTime(5), &mut reqs).unwrap();
    let b: Vec<BatchEntry> = rep.batch().collect();
    assert_eq!(
        b,
        vec![
            BatchEntry {
                id: 0,
                chunk: 0,
                kv_tokens: 10,
                decode: true
            },
            BatchEntry {
                id: 1,
                chunk: 10,
                kv_tokens: 0,
                decode: false
            },
        ]
    );
}

#[test]
fn max_num_seqs_caps_the_batch() {
    let mut reqs = requests(5, 10, 2);
    let mut rep = replica(&engine(2, 1000, 16), 100);
    for i in 0..5 {
        rep.enqueue(i);
    }
    let shapes = run_to_end(&mut rep, &mut reqs);
    assert!(shapes.iter().all(|s| s.seqs() <= 2));
    assert_all_completed(&rep, &reqs);
}

#[test]
fn every_policy_completes_everything_and_balances_blocks() {
    for policy in [
        BatchPolicyKind::Continuous,
        BatchPolicyKind::Vllm,
        BatchPolicyKind::Sarathi,
        BatchPolicyKind::Orca,
        BatchPolicyKind::Static,
    ] {
        let mut e = engine(4, 64, 4);
        e.policy = policy;
        let mut reqs: Vec<Request> = (0..9)
            .map(|i| Request::new(SimTime(0), 5 + 7 * i, 3 + 5 * (i % 4)))
            .collect();
        let mut rep = replica(&e, 40);
        for i in 0..9 {
            rep.enqueue(i);
        }
        run_to_end(&mut rep, &mut reqs);
        assert_all_completed(&rep, &reqs);
    }
}

/// Steps of 1 µs from `t`, enqueuing request 1 before the step numbered
/// `arrive_at`; returns the index of the step that prefilled it.
fn step_admitting_second(e: &EngineCfg, arrive_at: usize) -> usize {
    let mut reqs = requests(2, 32, 40);
    let mut rep = replica(e, 1000);
    rep.enqueue(0);
    let mut t = SimTime(0);
    for step in 0..60 {
        if step == arrive_at {
            rep.enqueue(1);
        }
        let shape = rep.form_batch(t, &mut reqs).expect("work left");
        t = t.plus(1000);
        rep.finish_iteration(t, &mut reqs, &mut vec![], &mut TokenGaps::default());
        if step >= arrive_at && shape.prefill_seqs > 0 {
            return step;
        }
    }
    panic!("request 1 never admitted");
}

#[test]
fn a_receive_interval_holds_arrivals_until_enough_decode_steps_ran() {
    let mut e = engine(8, 4096, 16);
    // Every step receives: the arrival is prefilled at the next step.
    assert_eq!(step_admitting_second(&e, 3), 3);
    // Every 5 decode steps: step 0 prefilled request 0 (a receive is due
    // after it), steps 1–5 decode, so the receive after step 5 (the 5th
    // decode since the one before step 1) takes the arrival of step 3.
    e.scheduler_recv_interval = 5;
    assert_eq!(step_admitting_second(&e, 3), 6);
    // Arriving right after a receive, it waits the whole interval.
    assert_eq!(step_admitting_second(&e, 7), 11);
    // An idle engine receives at once.
    let mut reqs = requests(1, 32, 4);
    let mut rep = replica(&e, 1000);
    rep.enqueue(0);
    assert_eq!(rep.outstanding(), 1);
    let shapes = run_to_end(&mut rep, &mut reqs);
    assert_eq!(shapes[0].prefill_seqs, 1);
    assert_all_completed(&rep, &reqs);
}
