//! From what a probe's requests saw (send time, every token's arrival) to
//! timed batch shapes, the samples a profile is fitted on.
//!
//! A lone request's time to first token is one prefill (plus the
//! per-request overhead); the gap between its tokens `g` and `g + 1` is one
//! decode step on a context of `prompt + g + 1` (the new token included, as
//! `BatchShape::add_decode` counts it). With several requests open, a gap is
//! a pure decode step only while no other request is waiting or
//! prefilling; its batch is the requests that had their first token by the
//! gap's start and their last after its end. Token arrivals of one
//! iteration differ by a little network jitter, so the comparisons allow a
//! fifth of the gap.

use crate::observe::{Observed, Outcome};
use sim::profile::Sample;
use std::time::Duration;

/// One decode gap with the batch it belonged to.
#[derive(Clone, Debug, PartialEq)]
pub struct Gap {
    /// Sequences decoding in the step.
    pub batch: u32,
    /// Σ of their contexts (new token included).
    pub context: u64,
    pub ns: u64,
    /// When the step ended, since the probe's start.
    pub end: Duration,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// A sample of one shape from its repetitions (at most `MAX_TIMES` kept, by
/// a fixed stride, so a profile stays small).
pub fn sample(
    kind: &str,
    fitted: bool,
    prefill: Vec<[u32; 2]>,
    decode: Vec<u32>,
    mut times: Vec<u64>,
) -> Sample {
    const MAX_TIMES: usize = 64;
    if times.len() > MAX_TIMES {
        let stride = times.len() as f64 / MAX_TIMES as f64;
        times = (0..MAX_TIMES)
            .map(|i| times[(i as f64 * stride) as usize])
            .collect();
    }
    let mut sorted = times.clone();
    sorted.sort_unstable();
    Sample {
        kind: kind.to_string(),
        fitted,
        prefill,
        decode,
        idle_ms: 0.0,
        median_ns: median(&sorted),
        min_ns: sorted[0],
        max_ns: sorted[sorted.len() - 1],
        times_ns: times,
        host_ns: None,
    }
}

/// Median of sorted values (the lower middle for an even count).
pub fn median(sorted: &[u64]) -> u64 {
    sorted[(sorted.len() - 1) / 2]
}

/// Times to first token of the completed requests, ns.
pub fn ttfts(o: &Observed) -> Vec<u64> {
    o.observations
        .iter()
        .filter(|x| x.outcome == Outcome::Completed)
        .filter_map(|x| Some(ns(*x.token_times.first()?) - ns(x.sent?)))
        .collect()
}

/// Lone requests of `prompt` tokens: one prefill sample (TTFT) and one
/// batch-1 decode sample per gap position.
pub fn lone(o: &Observed, prompt: u32, fitted: bool) -> Vec<Sample> {
    let mut out = Vec::new();
    let t = ttfts(o);
    if !t.is_empty() {
        out.push(sample("prefill", fitted, vec![[prompt, 0]], vec![], t));
    }
    let most = o
        .observations
        .iter()
        .map(|x| x.token_times.len())
        .max()
        .unwrap_or(0);
    for g in 0..most.saturating_sub(1) {
        let times: Vec<u64> = o
            .observations
            .iter()
            .filter(|x| x.outcome == Outcome::Completed && x.token_times.len() > g + 1)
            .map(|x| ns(x.token_times[g + 1] - x.token_times[g]))
            .collect();
        if !times.is_empty() {
            out.push(sample(
                "decode",
                fitted,
                vec![],
                vec![prompt + g as u32 + 1],
                times,
            ));
        }
    }
    out
}

/// Every gap that is a pure decode step, with its batch and context.
pub fn decode_gaps(o: &Observed) -> Vec<Gap> {
    let reqs: Vec<(&[Duration], Duration, u32)> = o
        .specs
        .iter()
        .zip(&o.observations)
        .filter_map(|(s, x)| Some((x.token_times.as_slice(), x.sent?, s.prompt_tokens)))
        .collect();
    let mut gaps = Vec::new();
    for (times, _, _) in &reqs {
        for w in times.windows(2) {
            let (a, b) = (w[0], w[1]);
            let eps = (b - a) / 5;
            let mut batch = 0u32;
            let mut context = 0u64;
            let mut pure = true;
            for (qt, qsent, qprompt) in &reqs {
                let first = qt.first().copied();
                let last = qt.last().copied();
                let started = first.is_some_and(|f| f <= a + eps);
                if started && last.is_some_and(|l| l + eps >= b) {
                    batch += 1;
                    let had = qt.iter().take_while(|&&t| t <= a + eps).count() as u64;
                    context += *qprompt as u64 + had;
                } else if !started && *qsent < a {
                    // Sent before the step began and without a first token:
                    // waiting or prefilling (one sent later cannot be in it).
                    pure = false;
                    break;
                }
            }
            if pure && batch > 0 {
                gaps.push(Gap {
                    batch,
                    context,
                    ns: ns(b - a),
                    end: b,
                });
            }
        }
    }
    gaps
}

/// Decode samples from pure gaps: per batch size, up to four groups by
/// context (so the context slope shows within one probe), each with at
/// least three gaps. A group's shape spreads its mean context evenly over
/// its sequences (the cost is linear in their sum).
pub fn decode_samples(gaps: &[Gap], fitted: bool) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut batches: Vec<u32> = gaps.iter().map(|g| g.batch).collect();
    batches.sort_unstable();
    batches.dedup();
    for b in batches {
        let mut gs: Vec<&Gap> = gaps.iter().filter(|g| g.batch == b).collect();
        if gs.len() < 3 {
            continue;
        }
        gs.sort_by_key(|g| (g.context, g.end));
        let groups = (gs.len() / 8).clamp(1, 4);
        let per = gs.len().div_ceil(groups);
        for chunk in gs.chunks(per) {
            if chunk.len() < 3 {
                continue;
            }
            let mean = chunk.iter().map(|g| g.context as f64).sum::<f64>() / chunk.len() as f64;
            out.push(sample(
                "decode",
                fitted,
                vec![],
                spread(mean.round() as u64, b),
                chunk.iter().map(|g| g.ns).collect(),
            ));
        }
    }
    out
}

/// `total` context over `seqs` sequences, as even as integers allow.
pub fn spread(total: u64, seqs: u32) -> Vec<u32> {
    let s = seqs.max(1) as u64;
    (0..s)
        .map(|i| (total / s + u64::from(i < total % s)) as u32)
        .collect()
}

/// The mixed iteration of a prefill joining decodes: the decoders' gaps
/// that end when the joining request's first token arrives (within a
/// fifth of a gap). `joiner` indexes the joining request.
pub fn mixed_sample(o: &Observed, joiner: usize) -> Option<Sample> {
    let jx = &o.observations[joiner];
    let first = *jx.token_times.first()?;
    let prompt = o.specs[joiner].prompt_tokens;
    let mut times = Vec::new();
    let mut contexts = Vec::new();
    for (i, (s, x)) in o.specs.iter().zip(&o.observations).enumerate() {
        if i == joiner {
            continue;
        }
        for (g, w) in x.token_times.windows(2).enumerate() {
            let eps = (w[1] - w[0]) / 5;
            if w[1] + eps >= first && w[1] <= first + eps {
                times.push(ns(w[1] - w[0]));
                contexts.push(s.prompt_tokens + g as u32 + 1);
                break;
            }
        }
    }
    if times.is_empty() {
        return None;
    }
    Some(sample("mixed", false, vec![[prompt, 0]], contexts, times))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Observation;
    use sim::workload::RequestSpec;

    fn ms(x: f64) -> Duration {
        Duration::from_secs_f64(x / 1e3)
    }

    fn req(prompt: u32, sent: f64, tokens: &[f64]) -> (RequestSpec, Observation) {
        (
            RequestSpec {
                prompt_tokens: prompt,
                output_tokens: tokens.len() as u32,
                ..RequestSpec::default()
            },
            Observation {
                sent: Some(ms(sent)),
                token_times: tokens.iter().map(|&t| ms(t)).collect(),
                tokens: tokens.len() as u32,
                end: tokens.last().map(|&t| ms(t)),
                outcome: Outcome::Completed,
                ..Observation::default()
            },
        )
    }

    fn observed(v: Vec<(RequestSpec, Observation)>) -> Observed {
        let (specs, observations) = v.into_iter().unzip();
        Observed {
            specs,
            observations,
            wall: Duration::ZERO,
        }
    }

    #[test]
    fn a_lone_request_gives_its_ttft_and_batch_one_steps_by_context() {
        let o = observed(vec![
            req(100, 0.0, &[30.0, 40.0, 51.0]),
            req(100, 60.0, &[92.0, 102.0, 113.0]),
        ]);
        let s = lone(&o, 100, true);
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].kind.as_str(), s[0].prefill.clone()),
            ("prefill", vec![[100, 0]])
        );
        assert_eq!(s[0].times_ns, [30_000_000, 32_000_000]);
        assert_eq!(s[1].decode, [101]);
        assert_eq!(s[1].median_ns, 10_000_000);
        assert_eq!(s[2].decode, [102]);
        assert_eq!(s[2].median_ns, 11_000_000);
    }

    #[test]
    fn gaps_count_only_pure_decode_steps_with_their_batch_and_context() {
        // Two requests sent at 0, first tokens at 20 (one prefill
        // iteration), steps of 10 ms; a third sent at 35 gets its first
        // token at 60 after prefilling in the step 50..60, then all three
        // decode in 12 ms steps.
        let o = observed(vec![
            req(10, 0.0, &[20.0, 30.0, 40.0, 50.0, 60.0, 72.0, 84.0]),
            req(10, 0.0, &[20.0, 30.0, 40.0, 50.0, 60.0, 72.0, 84.0]),
            req(50, 35.0, &[60.0, 72.0, 84.0, 96.0]),
        ]);
        let g = decode_gaps(&o);
        let of = |batch: u32| g.iter().filter(move |x| x.batch == batch);
        // Batch 2: gaps 20..30 and 30..40 (the third was not sent yet);
        // 40..50 and 50..60 had it waiting or prefilling.
        let two: Vec<(u64, u64)> = of(2).map(|x| (x.context, x.ns)).collect();
        assert_eq!(
            two,
            [
                (22, 10_000_000),
                (24, 10_000_000),
                (22, 10_000_000),
                (24, 10_000_000)
            ]
        );
        // Batch 3: 60..72 and 72..84 (contexts 15+15+51, then +1 each).
        let three: Vec<u64> = of(3).map(|x| x.context).collect();
        assert_eq!(three, [81, 84, 81, 84, 81, 84]);
        assert!(of(3).all(|x| x.ns == 12_000_000));
        // The last gap of the third request is batch 1.
        assert_eq!(of(1).map(|x| x.context).collect::<Vec<_>>(), [53]);
        let s = decode_samples(&g, true);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(s[0].decode, [12, 11]);
        assert_eq!(s[1].decode, [28, 28, 27]);
        assert_eq!(s[1].median_ns, 12_000_000);
    }

    #[test]
    fn the_mixed_step_is_the_decoders_gap_that_ends_with_the_joiners_first_token() {
        let o = observed(vec![
            req(16, 0.0, &[20.0, 30.0, 40.0, 75.0, 85.0]),
            req(16, 0.0, &[20.0, 30.0, 40.0, 75.0, 85.0]),
            req(500, 41.0, &[75.2, 85.0]),
        ]);
        let s = mixed_sample(&o, 2).unwrap();
        assert_eq!(s.kind, "mixed");
        assert_eq!(s.prefill, [[500, 0]]);
        assert_eq!(s.decode, [19, 19]);
        assert_eq!(s.median_ns, 35_000_000);
        assert!(!s.fitted);
    }

    #[test]
    fn samples_keep_a_bounded_number_of_times() {
        let s = sample("decode", true, vec![], vec![5], (0..1000).collect());
        assert_eq!(s.times_ns.len(), 64);
        assert_eq!((s.min_ns, s.max_ns), (0, 984));
        assert_eq!(spread(10, 3), [4, 3, 3]);
    }
}
