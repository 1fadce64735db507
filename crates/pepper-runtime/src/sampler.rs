//! PEP's host sampler: a thread that wakes up every timer period and copies a burst of
//! consecutive completed paths out of the guest's ring buffer (PEP(SAMPLES, STRIDE) per
//! tick), without any check, call or flag in the guest.
//!
//! The guest appends every completed path's tagged word to a ring in pepper's memory and
//! bumps a u32 head counter (two plain stores). On each tick the sampler reads the head
//! and replays the Arnold-Grove state machine over the newest path ends it has not seen,
//! copying the sampled words; words the guest may have overwritten meanwhile (the head
//! moved by more than the ring length) are dropped and counted as lost. The hot path is
//! allocation-free: a preallocated copy buffer and a fixed-capacity table.

// Reading the guest's memory from another thread while it runs is inherently a raw-pointer
// affair: wasm stores are not Rust writes, so the sampler reads with atomic loads.
#![allow(unsafe_code)]

use crate::worker::{Stop, Worker};
use pepper_sampling::{ArnoldGrove, Decision, PepParams, SampleTable};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Where the ring lives in the profiler memory and how to sample it.
#[derive(Clone, Debug)]
pub struct SamplerConfig {
    /// Byte address of the u32 head counter.
    pub head: u32,
    /// Byte address of the ring (u64 words).
    pub base: u32,
    /// Ring length in words (a power of two).
    pub entries: u32,
    pub params: PepParams,
    pub interval: Duration,
    /// Distinct paths the sample table holds.
    pub table_capacity: usize,
}

impl SamplerConfig {
    /// Samples the ring at `head`/`base`/`entries` (from the rewriter's memory layout) with
    /// PEP(`params`) every `interval`, keeping up to 2^20 distinct paths.
    pub fn new(
        (head, base, entries): (u32, u32, u32),
        params: PepParams,
        interval: Duration,
    ) -> SamplerConfig {
        SamplerConfig {
            head,
            base,
            entries,
            params,
            interval,
            table_capacity: 1 << 20,
        }
    }
}

/// What the sampler collected.
#[derive(Clone, Debug, Default)]
pub struct SamplerResult {
    /// (path word, estimated executions), sorted by word: each sample stands for the path
    /// ends since the previous pass divided by the samples taken in this pass, so phases
    /// where paths end rarely are not overweighted by time-driven ticks.
    pub words: Vec<(u64, u64)>,
    pub ticks: u64,
    pub taken: u64,
    /// Path ends the guest completed in all.
    pub path_ends: u64,
    pub lost: u64,
}

/// A raw view of the profiler memory that may be read from another thread.
#[derive(Copy, Clone)]
struct MemView {
    ptr: usize,
    len: usize,
}

impl MemView {
    fn u32_at(&self, addr: u32) -> u32 {
        let a = addr as usize;
        assert!(a + 4 <= self.len && a.is_multiple_of(4));
        // SAFETY: in bounds and aligned (checked above); the memory outlives the sampler
        // (the runtime joins the thread before the store is dropped) and never moves
        // (pepper's memory is never grown). The guest writes it concurrently with plain
        // stores; an atomic load observes either the old or the new value.
        unsafe { AtomicU32::from_ptr((self.ptr + a) as *mut u32).load(Ordering::Acquire) }
    }

    fn u64_at(&self, addr: u32) -> u64 {
        let a = addr as usize;
        assert!(a + 8 <= self.len && a.is_multiple_of(8));
        // SAFETY: as for `u32_at`.
        unsafe { AtomicU64::from_ptr((self.ptr + a) as *mut u64).load(Ordering::Relaxed) }
    }
}

/// The running sampler thread.
pub struct Sampler(Worker<SamplerResult>);

impl Sampler {
    /// Starts sampling pepper's memory `memory`. The caller keeps the store (and so the
    /// memory) alive and finishes the sampler before dropping it; pepper's memory is never
    /// grown, so its address is stable.
    pub(crate) fn start(
        memory: &wasmtime::Memory,
        store: impl wasmtime::AsContext,
        cfg: SamplerConfig,
    ) -> Sampler {
        let mem = MemView {
            ptr: memory.data_ptr(&store) as usize,
            len: memory.data_size(&store),
        };
        Sampler(Worker::spawn("pepper-sampler", move |stop| {
            sample_loop(mem, &cfg, stop)
        }))
    }

    /// Stops the thread and returns what it collected.
    pub fn finish(self) -> SamplerResult {
        self.0.finish().unwrap_or_default()
    }
}

fn sample_loop(mem: MemView, cfg: &SamplerConfig, stop: &Stop) -> SamplerResult {
    let mut ag = ArnoldGrove::new(cfg.params);
    let mut table = SampleTable::with_capacity(cfg.table_capacity);
    let n = cfg.entries as u64;
    // Sampled words are copied here first and kept only if the guest cannot have
    // overwritten them during the copy.
    let mut buf: Vec<(u64, u64)> =
        Vec::with_capacity((cfg.params.samples + cfg.params.stride) as usize + 1);
    let mut res = SamplerResult::default();
    let mut head32 = mem.u32_at(cfg.head);
    let mut head: u64 = head32 as u64;
    // Path ends before `seen` have been offered to the state machine.
    let mut seen = head;
    // Keep a margin so that words being written while we copy are never read.
    let margin = (n / 4).max(8);
    // Path ends not yet represented by any sample (carried over passes that took none).
    let mut unrepresented: u64 = 0;
    loop {
        // One more pass after the guest finished: the tick "at exit" gives short runs a
        // burst too.
        let last = stop.sleep(cfg.interval);
        let h = mem.u32_at(cfg.head);
        let delta = h.wrapping_sub(head32) as u64;
        head += delta;
        head32 = h;
        unrepresented += delta;
        res.ticks += 1;
        let mut begin = seen;
        if ag.on_tick() {
            begin = begin.max(head.saturating_sub(ag.pending()));
        }
        if head.saturating_sub(begin) > n - margin {
            let skip_to = head - (n - margin);
            if ag.armed() {
                // Samples the burst would have taken from the overwritten stretch.
                res.lost += (skip_to - begin).min(ag.pending());
            }
            begin = skip_to;
        }
        buf.clear();
        let mut seq = begin;
        while seq < head && ag.armed() {
            if ag.on_path_end() == Decision::Sample {
                let word = mem.u64_at(cfg.base + 8 * (seq % n) as u32);
                buf.push((seq, word));
            }
            seq += 1;
        }
        seen = head;
        // Re-read the head: a word older than (new head - n) may have been overwritten.
        let h2 = mem.u32_at(cfg.head);
        let head_now = head + h2.wrapping_sub(head32) as u64;
        let valid = buf
            .iter()
            .filter(|&&(s, word)| s + n > head_now && word != 0)
            .count();
        res.lost += (buf.len() - valid) as u64;
        if valid > 0 {
            let weight = unrepresented as f64 / valid as f64;
            unrepresented = 0;
            for &(s, word) in &buf {
                if s + n > head_now && word != 0 {
                    if table.add(word, weight) {
                        res.taken += 1;
                    } else {
                        res.lost += 1;
                    }
                }
            }
        }
        if last {
            break;
        }
    }
    let h = mem.u32_at(cfg.head);
    res.path_ends = head + h.wrapping_sub(head32) as u64;
    res.words = table.estimates();
    res
}
