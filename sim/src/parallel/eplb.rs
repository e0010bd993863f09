//! How evenly routed tokens fall on the expert-parallel ranks, with and
//! without DeepSeek's expert-parallel load balancer (EPLB).
//!
//! An MoE layer's step waits for its busiest EP rank, so what the cost model
//! needs is the ratio of the busiest rank's routed tokens to the mean rank's.
//! Experts are not equally popular: routers send some far more tokens than
//! others (DeepSeek-V3 report §2.1.2 and §3.4; Huang et al., "Towards MoE
//! Deployment: Mitigating Inefficiencies in Mixture-of-Expert (MoE)
//! Inference", 2023, measure heavily skewed expert activation). We describe
//! the popularity by a Zipf law, the share of the expert of popularity rank
//! i proportional to (i + 1)^−s (`fleet.expert_popularity_skew` = s; 0: every
//! expert alike), with popularity unrelated to expert ids: a fixed
//! pseudo-random permutation (seeded, so every run agrees) maps ranks to ids.
//!
//! - **Static placement** (engines' default expert map): EP rank r holds
//!   experts r·E/EP .. (r + 1)·E/EP − 1, hot or not.
//! - **EPLB** (deepseek-ai/EPLB `eplb.py`, the algorithm vLLM's and SGLang's
//!   `--enable-eplb` run): `replicate_experts` gives each of the R redundant
//!   slots to the expert with the highest load per replica, then
//!   `balanced_packing` places the E + R replicas (each carrying its
//!   expert's load over its replica count), heaviest first, on the rank with
//!   the least load that still has a free slot, (E + R)/EP slots per rank.

use crate::rng;
use rand::seq::SliceRandom;

/// Each expert's share of the routed tokens, by expert id, for `experts`
/// experts with Zipf skew `skew` (sums to 1).
pub fn popularity(experts: u32, skew: f64) -> Vec<f64> {
    let n = experts as usize;
    let weights: Vec<f64> = (0..n).map(|i| (i as f64 + 1.0).powf(-skew)).collect();
    let total: f64 = weights.iter().sum();
    let mut ids: Vec<usize> = (0..n).collect();
    ids.shuffle(&mut rng::stream(0, "expert-popularity"));
    let mut by_id = vec![0.0; n];
    for (rank, &id) in ids.iter().enumerate() {
        by_id[id] = weights[rank] / total;
    }
    by_id
}

/// Busiest over mean rank load with experts placed by id, E / EP per rank.
pub fn static_load_ratio(shares: &[f64], ep: u32) -> f64 {
    let ep = ep.max(1) as usize;
    let per = shares.len().div_ceil(ep).max(1);
    let ranks: Vec<f64> = shares.chunks(per).map(|c| c.iter().sum()).collect();
    max_over_mean(&ranks, ep)
}

/// Busiest over mean rank load after EPLB places `redundant` replicas and
/// packs the E + R slots onto `ep` ranks (see the module's doc).
pub fn eplb_load_ratio(shares: &[f64], ep: u32, redundant: u32) -> f64 {
    let ep = ep.max(1) as usize;
    // replicate_experts: each redundant slot to the hottest load per replica.
    let mut replicas = vec![1u32; shares.len()];
    for _ in 0..redundant {
        let hottest = (0..shares.len())
            .max_by(|&a, &b| {
                let (la, lb) = (
                    shares[a] / replicas[a] as f64,
                    shares[b] / replicas[b] as f64,
                );
                la.total_cmp(&lb).then(b.cmp(&a))
            })
            .expect("a model with experts");
        replicas[hottest] += 1;
    }
    // balanced_packing: heaviest replica first, onto the lightest rank with room.
    let mut items: Vec<f64> = shares
        .iter()
        .zip(&replicas)
        .flat_map(|(&s, &r)| std::iter::repeat_n(s / r as f64, r as usize))
        .collect();
    items.sort_by(|a, b| b.total_cmp(a));
    let per_rank = items.len().div_ceil(ep);
    let mut load = vec![0.0f64; ep];
    let mut slots = vec![0usize; ep];
    for w in items {
        let r = (0..ep)
            .filter(|&r| slots[r] < per_rank)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .expect("slots for every replica");
        load[r] += w;
        slots[r] += 1;
    }
    max_over_mean(&load, ep)
}

fn max_over_mean(loads: &[f64], ep: usize) -> f64 {
    let total: f64 = loads.iter().sum();
    let max = loads.iter().copied().fold(0.0, f64::max);
    if total <= 0.0 {
        1.0
    } else {
        max / (total / ep as f64)
    }
}

/// The busiest EP rank's routed tokens over the mean rank's for `experts`
/// experts of popularity skew `skew` on `ep` ranks, with `redundant` EPLB
/// slots (EPLB runs when `eplb`). Exactly 1 for one rank, and for uniform
/// popularity under static placement (every rank holds E / EP equal experts).
pub fn load_ratio(experts: u32, ep: u32, skew: f64, eplb: bool, redundant: u32) -> f64 {
    if ep <= 1 || experts == 0 || (skew == 0.0 && !eplb) {
        return 1.0;
    }
    let shares = popularity(experts, skew);
    if eplb {
        eplb_load_ratio(&shares, ep, redundant)
    } else {
        static_load_ratio(&shares, ep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_experts_balance_and_skew_loads_the_busiest_rank() {
        assert_eq!(load_ratio(256, 32, 0.0, false, 0), 1.0);
        assert_eq!(load_ratio(256, 1, 1.2, false, 0), 1.0);
        let p = popularity(256, 1.0);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        // The permutation is fixed: same shares every call.
        assert_eq!(p, popularity(256, 1.0));
        let skewed = load_ratio(256, 32, 1.0, false, 0);
        assert!(skewed > 1.5, "{skewed}");
        // More skew, more imbalance.
        assert!(load_ratio(256, 32, 1.5, false, 0) > skewed);
    }

    #[test]
    fn eplb_packs_hot_experts_apart_and_redundant_slots_lower_the_ratio() {
        // Two ranks, four experts of shares 0.4, 0.3, 0.2, 0.1 by id: the
        // static map puts 0.7 on rank 0 (ratio 1.4); packing heaviest-first
        // gives {0.4, 0.1} and {0.3, 0.2} (ratio 1.0).
        let shares = [0.4, 0.3, 0.2, 0.1];
        assert!((static_load_ratio(&shares, 2) - 1.4).abs() < 1e-12);
        assert!((eplb_load_ratio(&shares, 2, 0) - 1.0).abs() < 1e-12);
        // One hot expert of share 0.7 among 0.1s on 2 ranks of 2 slots: it
        // shares its rank with one 0.1 (ratio 0.8 / 0.5 = 1.6); two
        // redundant slots (3 per rank) split it
        // into thirds of 0.2333: ranks {0.2333, 0.2333, 0.1} and
        // {0.2333, 0.1, 0.1}: 0.5667 / 0.5 = 1.1333.
        let hot = [0.7, 0.1, 0.1, 0.1];
        assert!((eplb_load_ratio(&hot, 2, 0) - 1.6).abs() < 1e-12);
        let r = eplb_load_ratio(&hot, 2, 2);
        assert!((r - (0.7 / 3.0 * 2.0 + 0.1) / 0.5).abs() < 1e-12, "{r}");
        // DeepSeek-R1-like: 256 experts over 32 ranks with skew 1.
        let (none, eplb, eplb32) = (
            load_ratio(256, 32, 1.0, false, 0),
            load_ratio(256, 32, 1.0, true, 0),
            load_ratio(256, 32, 1.0, true, 32),
        );
        assert!(
            eplb < none && eplb32 < eplb && eplb32 >= 1.0,
            "{none} {eplb} {eplb32}"
        );
    }
}
