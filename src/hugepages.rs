//! Transparent huge pages for the runs that gain from them, 4 KiB pages for
//! the others.
//!
//! mimalloc asks the kernel to back its arena with 2 MiB pages
//! (`madvise(MADV_HUGEPAGE)`), so the first touch of each 2 MiB of heap
//! faults in and clears a whole huge page. A big fleet needs that: the 10 M
//! requests over 1,000 replicas of README's Speed section read at random
//! over 200 MiB, and took 26.1 and 26.8 s with huge pages against 32.1 and
//! 31.6 s without (the TLB's reach). A small run does not, and pays for
//! them whenever the kernel has no huge page ready. On the 2-core VM of the
//! measurements:
//! - Vidur's V1 (5,000 requests, one replica) right after a process that
//!   used 600 MiB took 77 ms (median of 20, 67 ms of it system time) with
//!   huge pages and 36 ms without; back to back, 35 and 38 ms.
//! - The Mooncake conversation run side by side with DynoSim (8 pairs each
//!   way) spent 0.19–0.30 s of system time in 5 of 8 runs with huge pages
//!   (0.01–0.08 s in the others), and 0.04–0.10 s in all 8 without.
//! - 1 M requests over 100 or 1,000 replicas, and 2 M over 10, ran about as
//!   fast either way.
//!
//! So the process starts with huge pages off ([`hold_off`], at load:
//! `prctl(PR_SET_THP_DISABLE)`, which the kernel checks at each fault, so
//! it holds for the arena mimalloc advises), `simulate` turns them back on
//! only when the fleet is big and the run long ([`wants_huge_pages`]), and
//! every other command gets back what the process inherited ([`restore`]).
//! `MIMALLOC_ALLOW_THP`, when set, decides instead (mimalloc reads it at
//! start), and other platforms keep what they have.

use sim::scenario::Scenario;

/// Replica objects from which a fleet's state outgrows the TLB's reach
/// with 4 KiB pages (the 1,000-replica fleet gained 20 % from huge pages).
const BIG_FLEET: u64 = 256;

/// Requests from which a big fleet's run is long enough to win back its
/// huge pages' faults (1 M over 1,000 replicas ran as fast either way).
const LONG_RUN: u64 = 2_000_000;

/// Whether a run over `replicas` replica objects, expected to take
/// `requests` requests (`None`: unknown, a trace without a count), keeps
/// huge pages.
pub fn wants_huge_pages(replicas: u64, requests: Option<u64>) -> bool {
    replicas >= BIG_FLEET && requests.is_none_or(|n| n >= LONG_RUN)
}

/// Replica objects the run simulates: every pool's, and with a life cycle
/// the autoscaler's maximum and the standby pool.
fn replicas(s: &Scenario) -> u64 {
    if s.pools.is_empty() {
        let f = &s.file;
        sim::lifecycle::config::slots(f).unwrap_or(f.fleet.replicas) as u64
    } else {
        // Each pool's replica objects, life-cycle slots included.
        s.pools.iter().map(|p| u64::from(p.replicas)).sum()
    }
}

/// What the process inherited (`PR_GET_THP_DISABLE`: 1 disabled, 0 not),
/// when [`hold_off`] changed it.
static INHERITED: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

/// Turns huge pages off from the process's start until a command chooses:
/// mimalloc's arena is advised for them, and the runtime's, the command
/// line's and the scenario's first allocations faulted in three 2 MiB pages
/// (6 MiB cleared, `/proc/vmstat` `thp_fault_alloc`) before [`choose_for`]
/// could say no, two of them before `main`. Held off, Vidur's V1 right
/// after a process that touched 600 MiB took 38.2 ms against 42.1 ms
/// (medians of 15 alternated runs; system time 12.7 against 19.8 ms, the
/// worst run 46 against 78 ms); back to back the two were within noise
/// (42.3 against 41.7 ms, 20 runs). So it runs when the program is loaded
/// ([`HOLD_OFF_AT_LOAD`]), before any allocation; it allocates nothing
/// itself.
#[cfg(target_os = "linux")]
fn hold_off() {
    // SAFETY: a NUL-terminated name; getenv reads the environment that
    // exec set up before any constructor runs.
    let overridden = unsafe { !libc::getenv(c"MIMALLOC_ALLOW_THP".as_ptr()).is_null() };
    if overridden {
        return;
    }
    if let Some(was) = get() {
        let _ = INHERITED.set(was);
        set(false);
    }
}

/// [`hold_off`] as a constructor of priority 101 (the first that GCC leaves
/// to programs; 0–100 are the implementation's): the linker orders
/// `.init_array.NNNNN` entries by priority ahead of plain `.init_array`
/// ones, where mimalloc's own constructor (which sets up its arena) and
/// the Rust runtime's are, so it runs first.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array.00101"]
static HOLD_OFF_AT_LOAD: extern "C" fn() = {
    extern "C" fn at_load() {
        hold_off();
    }
    at_load
};

/// Gives a command that does not choose ([`choose_for`]) the setting the
/// process inherited, as if [`hold_off`] had not run.
pub fn restore() {
    if let Some(&was) = INHERITED.get() {
        set(was == 0);
    }
}

/// Sets huge pages on or off for the rest of the process as `s` wants
/// them (see the module comment).
pub fn choose_for(s: &Scenario) {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    let requests = sim::guard::estimate(s).requests;
    set(wants_huge_pages(replicas(s), requests));
}

/// Allows or forbids transparent huge pages for this process's future page
/// faults; a kernel that refuses leaves them as they were.
#[cfg(target_os = "linux")]
fn set(on: bool) {
    // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process's memory
    // map; it reads no pointer.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, libc::c_ulong::from(!on), 0, 0, 0);
    }
}

#[cfg(not(target_os = "linux"))]
fn set(_: bool) {}

/// Whether huge pages are off for this process (1) or not (0); `None`
/// where the kernel cannot say.
#[cfg(target_os = "linux")]
fn get() -> Option<i32> {
    // SAFETY: PR_GET_THP_DISABLE reads a flag of this process; no pointer.
    let v = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
    (v >= 0).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_big_fleet_on_a_long_run_keeps_huge_pages() {
        // Vidur's V1; the Mooncake trace on 8 replicas (no count).
        assert!(!wants_huge_pages(1, Some(5_000)));
        assert!(!wants_huge_pages(8, None));
        // The README's 10 M fleet; its 1 M version; 2 M over 10 replicas.
        assert!(wants_huge_pages(1_000, Some(10_000_000)));
        assert!(!wants_huge_pages(1_000, Some(1_000_000)));
        assert!(!wants_huge_pages(10, Some(2_000_000)));
        assert!(wants_huge_pages(BIG_FLEET, Some(LONG_RUN)));
        assert!(wants_huge_pages(BIG_FLEET, None));
        assert!(!wants_huge_pages(BIG_FLEET - 1, None));
    }

    #[test]
    fn replicas_count_every_pool_and_the_autoscalers_room() {
        let count = |name: &str| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("scenarios")
                .join(name);
            replicas(&Scenario::load(&path).expect("example scenario"))
        };
        assert_eq!(count("quickstart.toml"), 4);
        // Two pools of 4.
        assert_eq!(count("heterogeneous.toml"), 8);
        // One replica at the start, room for the autoscaler's 6.
        assert_eq!(count("autoscale-step.toml"), 6);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_takes_the_setting() {
        let enabled = || {
            std::fs::read_to_string("/proc/self/status")
                .expect("status")
                .lines()
                .find_map(|l| l.strip_prefix("THP_enabled:").map(|v| v.trim() == "1"))
        };
        // Kernels before 5.0 do not report it.
        let Some(before) = enabled() else { return };
        set(false);
        assert_eq!(enabled(), Some(false));
        set(true);
        assert_eq!(enabled(), Some(true));
        set(before);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn huge_pages_are_held_off_from_load() {
        // The constructor ran before this test binary's `main` (its first
        // allocation) and kept what the process inherited.
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() || get().is_none() {
            return;
        }
        assert!(INHERITED.get().is_some(), "hold_off did not run at load");
    }
}
