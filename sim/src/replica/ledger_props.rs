//! Property tests of the block ledgers under random workloads: the
//! allocator and the prefix cache together, through every policy and
//! preemption mode (allocate / share / write / free / evict / swap), with
//! requests of several parallel samples forking the prompt's blocks
//! (`fork`: shared full blocks, copy-on-write of the partial one).
use super::tests::*;
use super::*;
use crate::kv::prefix_cache::mix;
use crate::scenario::BatchPolicyKind;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// A request whose first `shared` blocks come from prefix family
    /// `family` (so requests share prefixes), then its own blocks.
    Enqueue {
        family: u8,
        shared: u8,
        prompt: u16,
        output: u16,
        /// Parallel samples (vLLM's `n`).
        samples: u8,
    },
    Step,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0u8..3,
            0u8..6,
            1u16..120,
            1u16..40,
            prop_oneof![Just(1u8), 1u8..5]
        )
            .prop_map(|(family, shared, prompt, output, samples)| Op::Enqueue {
                family,
                shared,
                prompt,
                output,
                samples,
            }),
        Just(Op::Step),
        Just(Op::Step),
    ]
}

fn check_ledgers(rep: &Replica) -> Result<(), TestCaseError> {
    let kv = rep.kv();
    prop_assert_eq!(kv.granted(), kv.freed() + kv.used());
    prop_assert_eq!(
        kv.used(),
        rep.blocks_held(),
        "free + referenced + cached = total"
    );
    prop_assert!(kv.used() <= kv.total());
    let (held, ledger) = rep.host_blocks_held();
    prop_assert_eq!(held, ledger);
    // Forked groups: every sample's tokens are backed, the prompt's full
    // blocks are held once (refcount n), and past the fork each sample holds
    // the same number of private blocks (its copy of the partial block
    // included): no sample writes into a block another still reads.
    let bs = rep.st.cfg.block_size;
    for s in rep.st.running.iter().chain(rep.st.swapped.iter()) {
        let held = s.shared + s.blocks;
        prop_assert!(held >= s.group_blocks(s.kv_tokens, bs), "{:?}", s);
        if s.samples > 1 && s.kv_tokens > s.fork_tokens {
            let fork = s.fork_tokens / bs;
            prop_assert_eq!((held - fork) % s.samples, 0, "{:?}", s);
            let per_sample = fork + (held - fork) / s.samples;
            prop_assert!(per_sample * bs >= s.kv_tokens, "{:?}", s);
            // Less than n independent copies whenever a full block is shared.
            let alone = fork::independent_blocks(s.kv_tokens, bs, s.samples);
            prop_assert!(fork == 0 || s.group_blocks(s.kv_tokens, bs) < alone);
        }
    }
    if let Some(c) = rep.prefix_cache() {
        prop_assert!(c.check().is_ok(), "{:?}", c.check());
        // Every reference on a cached block belongs to a live sequence.
        let refs: u64 = rep
            .st
            .running
            .iter()
            .chain(rep.st.swapped.iter())
            .map(|s| s.shared as u64)
            .sum();
        prop_assert_eq!(refs, c.total_refs());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn ledgers_balance_and_nothing_leaks(
        ops in proptest::collection::vec(op(), 1..120),
        policy in 0usize..5,
        swap in any::<bool>(),
        caching in any::<bool>(),
        blocks in 12u64..48,
    ) {
        let mut e = engine(6, 64, 4);
        e.policy = [
            BatchPolicyKind::Continuous,
            BatchPolicyKind::Vllm,
            BatchPolicyKind::Sarathi,
            BatchPolicyKind::Orca,
            BatchPolicyKind::Static,
        ][policy];
        if swap {
            e.preemption = PreemptionMode::Swap;
            e.swap_space_gib = 64.0 * 1024.0 / crate::catalog::GIB; // 64 blocks of 1 KiB
        }
        e.prefix_caching = caching;
        e.pinned_prefix_blocks = if caching { 3 } else { 0 };
        let mut rep = replica(&e, blocks);
        let mut reqs: Vec<Request> = Vec::new();
        let mut t = SimTime(0);
        let step = |rep: &mut Replica, reqs: &mut Vec<Request>, t: &mut SimTime| -> bool {
            match rep.form_batch(*t, reqs) {
                Some(_) => {
                    *t = t.plus(1000);
                    rep.finish_iteration(*t, reqs, &mut vec![], &mut TokenGaps::default());
                    true
                }
                None => false,
            }
        };
        for op in ops {
            match op {
                Op::Enqueue { family, shared, prompt, output, samples } => {
                    let (p, o, ns) = (prompt as u32 + 4, output as u32, samples as u32);
                    // Only requests that fit one replica, as at arrival.
                    let pinnable = if caching { 3 } else { 0 };
                    let group = fork::group_blocks(p + o - 1, 4, ns, p) as u64;
                    if group > blocks - pinnable || p > 64 && policy != 2 {
                        continue;
                    }
                    let id = reqs.len() as u64;
                    let mut r = Request::new(t, p, o);
                    let n = ((p + o) / 4) as u64;
                    let mut h = family as u64 + 1;
                    r.set_prefix_hashes(
                        (0..n)
                            .map(|j| {
                                let salt = if j < shared as u64 { 0 } else { id + 100 };
                                h = mix(h ^ salt, j);
                                h
                            })
                            .collect(),
                    );
                    r.hash_block_tokens = 4;
                    r.set_pinnable_tokens(8);
                    r.set_samples(ns);
                    reqs.push(r);
                    rep.enqueue(id as u32);
                }
                Op::Step => {
                    step(&mut rep, &mut reqs, &mut t);
                }
            }
            check_ledgers(&rep)?;
        }
        let mut guard = 0;
        while step(&mut rep, &mut reqs, &mut t) {
            check_ledgers(&rep)?;
            guard += 1;
            prop_assert!(guard < 100_000, "no progress");
        }
        for r in &reqs {
            prop_assert_eq!(r.status, Status::Completed);
            prop_assert_eq!(r.generated, r.output_tokens);
        }
        // Only the cache may still hold blocks, none of them referenced;
        // evicting everything not pinned returns them all.
        let cached = rep.prefix_cache().map_or(0, |c| c.blocks());
        prop_assert_eq!(rep.kv().used(), cached);
        if let Some(c) = &mut rep.st.cache {
            prop_assert_eq!(c.total_refs(), 0);
            let pinned = c.pinned_blocks();
            let freed = c.evict(u64::MAX);
            rep.st.kv.release(freed);
            prop_assert_eq!(rep.kv().used(), pinned);
        }
    }
}
