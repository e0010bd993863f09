//! Naive against tiled (online-softmax) attention at long context: wall time
//! and peak heap of one prefill chunk's attention over a long cache, on the
//! CPU. `cargo run -p servesim-calibrate --example attention_bench`
//! (figures in docs/calibration.md, "Tiled attention").
//!
//! The shape is one layer of Llama-3.2-1B (8 KV heads, group 4, head dim 64)
//! attending a 512-token prefill chunk to a cache of `context` tokens; peak
//! heap is counted by this program's allocator, from before the call.

use calibrate::model::Attention;
use candle_core::{Device, Tensor};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;
static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = NOW.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        NOW.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (kv, group, d, chunk) = (8usize, 4usize, 64usize, 512usize);
    let dev = Device::Cpu;
    println!("attention of a {chunk}-token prefill chunk, {kv} KV heads x group {group}, head dim {d}, f32, CPU");
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "context", "mode", "median ms", "peak MiB", "max |diff|", ""
    );
    for context in [1024usize, 4096, 16384] {
        let q =
            (Tensor::randn(0f32, 1.0, (kv, group * chunk, d), &dev)? * (1.0 / (d as f64).sqrt()))?;
        let k = Tensor::randn(0f32, 1.0, (kv, context, d), &dev)?;
        let v = Tensor::randn(0f32, 1.0, (kv, context, d), &dev)?;
        let want = Attention::Naive.attend(&q, &k, &v, None)?;
        for mode in [
            Attention::Naive,
            Attention::Tiled { block: 256 },
            Attention::Tiled { block: 1024 },
        ] {
            let mut times = Vec::new();
            let mut peak = 0;
            let mut diff = 0f32;
            for _ in 0..5 {
                let base = NOW.load(Ordering::Relaxed);
                PEAK.store(base, Ordering::Relaxed);
                let t = Instant::now();
                let out = mode.attend(&q, &k, &v, None)?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
                peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
                diff = (out - &want)?
                    .abs()?
                    .flatten_all()?
                    .max(0)?
                    .to_scalar::<f32>()?;
            }
            times.sort_by(f64::total_cmp);
            let name = match mode {
                Attention::Naive => "naive".to_string(),
                Attention::Tiled { block } => format!("tiled:{block}"),
            };
            println!(
                "{context:>8} {name:>10} {:>12.1} {:>12.1} {:>12.1e}",
                times[2],
                peak as f64 / (1 << 20) as f64,
                diff
            );
        }
    }
    Ok(())
}
