//! A hybrid model's sequences in a running replica hold what vLLM's hybrid
//! KV cache manager holds (`crate::kv_groups`): past the window, a
//! sliding-window group's blocks stop growing while the full group's keep
//! growing, and a linear group's never grow.

use super::tests::{engine, replica, requests, run_to_end};
use super::*;
use crate::kv_groups::{KvGroups, WindowedGroups};
use proptest::prelude::*;

fn groups(window: u32, sliding: u32, state: u32, bs: u32) -> KvGroups {
    KvGroups {
        group_size: 1,
        full_groups: 1,
        sliding: (sliding > 0).then_some(WindowedGroups {
            groups: sliding,
            window,
            chunked: false,
        }),
        chunked: None,
        state_groups: state,
        block_size: bs,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// One sequence decodes alone: after every step, the blocks it holds
    /// beyond its full rows never pass the window's (plus a partial block)
    /// per sliding group and one per linear group, and at the end every
    /// block is back.
    #[test]
    fn window_and_state_blocks_stay_bounded(
        prompt in 1u32..600,
        output in 1u32..400,
        window in 1u32..300,
        sliding in 0u32..4,
        state in 0u32..3,
        bs in prop::sample::select(vec![1u32, 4, 16]),
        chunk in prop::sample::select(vec![64u32, 256, 4096]),
    ) {
        let g = groups(window, sliding, state, bs);
        let mut reqs = requests(1, prompt, output);
        let mut rep = replica(&engine(4, chunk, bs), 100_000);
        rep.set_kv_groups(Some(g));
        rep.enqueue(0);
        let cap = sliding as u64 * (window.div_ceil(bs) as u64 + 1) + state as u64;
        let mut t = SimTime(0);
        let mut peak_extra = 0;
        while let Some(_shape) = rep.form_batch(t, &mut reqs) {
            t = t.plus(1000);
            rep.finish_iteration(t, &mut reqs, &mut vec![], &mut Default::default());
            if let Some(s) = rep.st.running.first() {
                let rows = s.shared + s.blocks;
                prop_assert_eq!(rep.kv().used(), (rows + s.extra) as u64);
                if !s.prefilling() {
                    // Decoding: the window's blocks and the state only.
                    prop_assert!(s.extra as u64 <= cap, "{} > {cap}", s.extra);
                    peak_extra = peak_extra.max(s.extra);
                }
                prop_assert!(rows >= s.kv_tokens.div_ceil(bs));
            }
        }
        prop_assert_eq!(reqs[0].status, Status::Completed);
        prop_assert_eq!(rep.kv().used(), 0);
        prop_assert_eq!(rep.kv().granted(), rep.kv().freed());
        if sliding == 0 && output > 1 {
            // Linear state alone: exactly one block per group, whatever the length.
            prop_assert_eq!(peak_extra, state);
        }
    }
}

#[test]
fn windows_leave_room_a_set_aside_would_not() {
    // 64 blocks of 16 tokens; a full and a 32-token sliding group. Four
    // 200-token prompts: 13 full rows each and at most 3 window blocks in
    // decode, all four fit (4 × 16 = 64) and finish without preemption,
    // where charging every sequence its whole length twice would not.
    let g = groups(32, 1, 0, 16);
    let mut reqs = requests(4, 200, 8);
    let mut rep = replica(&engine(4, 4096, 16), 64);
    rep.set_kv_groups(Some(g));
    for i in 0..4 {
        rep.enqueue(i);
    }
    run_to_end(&mut rep, &mut reqs);
    assert!(reqs.iter().all(|r| r.status == Status::Completed));
    assert_eq!(rep.kv().used(), 0);
}
