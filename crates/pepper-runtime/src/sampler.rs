//! PEP's host sampler: a thread that wakes up every period of the guest's CPU time and
//! copies a burst of consecutive completed paths out of the guest's ring buffer
//! (PEP(SAMPLES, STRIDE) per tick).
//!
//! The guest's instrumented code appends every completed path's tagged word to a ring in
//! pepper's memory and bumps a u32 head counter (two plain stores). With the switch (the
//! default), only the instrumented copies do, while a flag this thread sets for each burst
//! is up; a timer on the guest thread takes over a burst this thread is too late to
//! measure (`crate::native::burst`). On each tick the sampler reads the head
//! (and again every microsecond until a burst's worth of paths has completed: the guest's
//! path-end rate over that watch then weighs the burst, see `watch_rate`) and replays the
//! Arnold-Grove state machine from a path end drawn uniformly among those completed while
//! it watched (the newest ones when fewer than a burst completed), copying the sampled words;
//! words the guest may have overwritten meanwhile (the head moved by more than the ring
//! length) are dropped and counted as lost. The hot path is
//! allocation-free: a preallocated copy buffer, and a table that allocates only when it
//! doubles (a handful of times in a run).
//!
//! The same thread takes the calling-context samples, at the same ticks: from the guest's
//! shadow stack in pepper's memory or from the guest thread's machine stack
//! (`crate::native`), folded into Whaley's PCCT (`pepper_cct::Pcct`).
//!
//! This module schedules the ticks and owns the configuration and the memory view;
//! `bursts` takes PEP's bursts, `stacks` the stack samples, and `crate::intervals` the
//! time line and interval sampling.

// Reading the guest's memory from another thread while it runs is inherently a raw-pointer
// affair: wasm stores are not Rust writes, so the sampler reads with atomic loads.
#![allow(unsafe_code)]

mod bursts;
mod stack_config;
mod stacks;

pub use stack_config::StackConfig;

use crate::flag::{Flag, FlagWord};
pub(crate) use crate::memview::MemView;
use crate::worker::{Stop, Worker};
use bursts::Bursts;
use pepper_cct::{EdgeMode, Pcct};
use pepper_layout::{ContextMode, Guest, Ring};
use pepper_sampling::PepParams;
use stacks::StackSamples;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the ring lives in the profiler memory and how to sample it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SamplerConfig {
    /// Byte address of the u32 head counter.
    pub head: u32,
    /// Byte address of the ring (u64 words).
    pub base: u32,
    /// Ring length in words (a power of two).
    pub entries: u32,
    /// PEP(SAMPLES, STRIDE) per tick.
    pub params: PepParams,
    /// The tick period.
    pub interval: Duration,
    /// Distinct paths the sample table holds.
    pub table_capacity: usize,
    /// Calling contexts: also sample the guest's stack into a PCCT at every
    /// `stack_every`-th tick.
    pub stacks: Option<StackConfig>,
    /// Ticks per stack sample: PEP's bursts are cheap for the guest (its ring is written
    /// anyway) and gain accuracy from more ticks, while every native stack sample
    /// interrupts the guest, so stacks keep their own, longer period.
    pub stack_every: u32,
    /// Switchable instrumentation: the flag word that sends the guest into its
    /// instrumented copies. Each tick sets it, lets the guest run instrumented until the
    /// burst's path ends are written, and clears it (see `sample_loop`).
    pub switch: Option<SwitchWords>,
    /// Intervals: a time line read from the ring (on top of the bursts), or interval
    /// sampling on the switch (instead of them). See `crate::intervals`.
    pub intervals: Option<crate::IntervalConfig>,
    /// Counts kept up to date at every tick, for a progress display.
    pub live: Option<Arc<LiveCounts>>,
    /// Inside a component: the other instrumented core modules' rings, drawn from in the
    /// same bursts (their memories are found at run time, in this order; see
    /// [`crate::RunConfig::module_tags`]): a burst is every path end of a stretch of the
    /// guest's time, whichever module completed it.
    pub modules: Vec<ModuleRing>,
}

/// A component's other instrumented core module, as PEP's bursts read it.
#[derive(Clone, Debug)]
pub struct ModuleRing {
    /// Its position among the component's core modules.
    pub module: usize,
    /// Its ring.
    pub ring: Ring,
    /// The switch's flag and limit in its memory (`None` on the ring).
    pub switch: Option<SwitchWords>,
    /// Its switch copies' function indices and the functions they copy (native stacks
    /// name a frame by what it copies).
    pub origins: Vec<(u32, u32)>,
}

impl ModuleRing {
    /// Core module `module`'s ring, `None` when it keeps none.
    pub fn of(module: usize, guest: &Guest) -> Option<ModuleRing> {
        (guest.layout.ring_entries > 0).then_some(())?;
        Some(ModuleRing {
            module,
            ring: guest.layout.ring(),
            switch: guest.switch.map(|_| SwitchWords::of(guest)),
            origins: guest.origins.iter().map(|(c, f)| (c.0, f.0)).collect(),
        })
    }
}

/// Switchable instrumentation's words for PEP's bursts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SwitchWords {
    /// The module-wide flag.
    pub flag: FlagWord,
    /// The burst's limit, in pepper's memory (`pepper_layout::SWITCH_LIMIT_OFFSET`).
    pub limit: u32,
}

impl SwitchWords {
    /// The switch's words in `guest`.
    pub fn of(guest: &pepper_layout::Guest) -> SwitchWords {
        SwitchWords {
            flag: FlagWord::of(guest),
            limit: guest.layout.switch_flag + pepper_layout::SWITCH_LIMIT_OFFSET,
        }
    }
}

/// What the sampler has counted so far, readable while the guest runs (`pepper run`'s
/// progress line).
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// PEP samples taken.
    pub samples: AtomicU64,
    /// Path ends the guest completed.
    pub path_ends: AtomicU64,
}

impl SamplerConfig {
    /// Samples the ring at `head`/`base`/`entries` (from the rewriter's memory layout) with
    /// PEP(`params`) every `interval`, keeping up to 2^20 distinct paths.
    pub fn new(ring: Ring, params: PepParams, interval: Duration) -> SamplerConfig {
        let Ring {
            head,
            base,
            entries,
        } = ring;
        SamplerConfig::with(head, base, entries, params, interval)
    }

    fn with(
        head: u32,
        base: u32,
        entries: u32,
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
            stacks: None,
            stack_every: 1,
            switch: None,
            intervals: None,
            live: None,
            modules: Vec::new(),
        }
    }

    /// The host sampler an instrumented module needs: PEP's ring (unless PEP runs in the
    /// guest, `ring` false), with bursts every `interval`, and/or the stacks, sampled every
    /// `stack_interval` (rounded to a whole number of ticks when both run); `None` when
    /// neither is there.
    pub fn for_module(
        module: &pepper_wasm::Instrumented,
        ring: bool,
        params: PepParams,
        (interval, stack_interval): (Duration, Duration),
    ) -> Option<SamplerConfig> {
        let guest = &module.guest;
        let stacks = StackConfig::for_guest(guest);
        if guest.mode == pepper_profile::Mode::Pep && ring {
            let mut c = SamplerConfig::new(guest.layout.ring(), params, interval);
            c.switch = guest.switch.map(|_| SwitchWords::of(guest));
            c.params = c.burst_params();
            c.stacks = stacks.map(|mut s| {
                if s.native.is_some() && s.call_log.is_none() {
                    s.path_windows = module.path_decoder();
                }
                s
            });
            c.stack_every = (stack_interval.as_secs_f64() / interval.as_secs_f64().max(1e-9))
                .round()
                .clamp(1.0, u32::MAX as f64) as u32;
            Some(c)
        } else {
            stacks.map(|s| SamplerConfig::stacks_only(s, stack_interval))
        }
    }

    /// PEP(SAMPLES, STRIDE) as the sampler runs it: with the switch, a burst takes every
    /// path end of the SAMPLES × STRIDE it spans, since the instrumented copies write them
    /// all to the ring anyway and run the same time either way; skipping them with the
    /// stride only threw samples away.
    pub fn burst_params(&self) -> PepParams {
        match self.switch {
            Some(_) => PepParams {
                samples: self.params.samples.saturating_mul(self.params.stride),
                stride: 1,
            },
            None => self.params,
        }
    }

    /// The period of stack samples.
    pub fn stack_interval(&self) -> Duration {
        self.interval * self.stack_every
    }

    /// Samples only the shadow stack (no PEP ring).
    pub fn stacks_only(stacks: StackConfig, interval: Duration) -> SamplerConfig {
        SamplerConfig {
            stacks: Some(stacks),
            ..SamplerConfig::with(0, 0, 0, PepParams::default(), interval)
        }
    }
}

/// What the sampler collected.
#[derive(Clone, Debug, Default)]
pub struct SamplerResult {
    /// Why the sampler thread stopped early (it panicked); `None` when it ran to the end.
    pub failure: Option<String>,
    /// (path word, estimated executions), sorted by word, weighted as
    /// [`SamplerConfig::weights`] says and adding up to `path_ends`.
    pub words: Vec<(u64, u64)>,
    /// Ticks the sampler took.
    pub ticks: u64,
    /// Path words sampled.
    pub taken: u64,
    /// Path ends the guest completed in all.
    pub path_ends: u64,
    /// Samples the guest overwrote before they were read, or beyond the table.
    pub lost: u64,
    /// Ticks at which the guest ran but completed no path while the rate was watched
    /// (in a host call): their bursts weigh nothing.
    pub idle_ticks: u64,
    /// Ticks at which the guest hardly ran while watched (it waited for a core, or slept
    /// in a host call): no burst, and the next one stands for its work meanwhile.
    pub off_cpu_ticks: u64,
    /// Switch: bursts the guest thread's handler took over and measured, this thread
    /// being away (see `crate::native::burst`).
    pub guest_bursts: u64,
    /// The calling context tree, when the shadow stack was sampled.
    pub pcct: Option<Pcct>,
    /// Samples taken while the guest was in a host call.
    pub in_host: u64,
    /// Native stack samples: their signals' delivery times summed, and how many.
    pub signal_delivery: (Duration, u64),
    /// Call windows replayed into the tree.
    pub windows: pepper_cct::Replay,
    /// Switchable instrumentation: how long the flag was set, and the path ends the
    /// instrumented copies wrote (with the switch, `path_ends` is an estimate).
    pub switched_on: Duration,
    /// Path ends the instrumented copies wrote (switch).
    pub instrumented_ends: u64,
    /// Inside a component: the other modules' sampled words, as `words`, in the order of
    /// [`SamplerConfig::modules`].
    pub module_words: Vec<Vec<(u64, u64)>>,
    /// The time line, detected phases and interval sampling's estimate.
    pub intervals: Option<crate::IntervalResult>,
}

/// A native stack sampler for the guest thread and the map of the module it runs.
pub(crate) type Native = (
    Arc<crate::native::NativeSampler>,
    Arc<crate::native::CodeMap>,
);

/// The running sampler thread, and its mailbox for snapshots.
pub struct Sampler(Worker<SamplerResult>, Arc<Snapshots>);

/// A request for what the sampler has collected so far, answered at its next tick while it
/// keeps running (`--snapshot-every`).
#[derive(Default)]
pub(crate) struct Snapshots {
    requested: AtomicBool,
    answer: std::sync::Mutex<Option<SamplerResult>>,
    ready: std::sync::Condvar,
}

impl Snapshots {
    /// Asks for a snapshot and waits up to `timeout` for it.
    pub(crate) fn take(&self, timeout: Duration) -> Option<SamplerResult> {
        let mut answer = self.answer.lock().unwrap_or_else(|e| e.into_inner());
        *answer = None;
        self.requested
            .store(true, std::sync::atomic::Ordering::Release);
        let (mut answer, _) = self
            .ready
            .wait_timeout_while(answer, timeout, |a| a.is_none())
            .unwrap_or_else(|e| e.into_inner());
        answer.take()
    }

    /// Whether a snapshot is asked for (leaving the request in place).
    fn is_requested(&self) -> bool {
        self.requested.load(std::sync::atomic::Ordering::Acquire)
    }

    fn wanted(&self) -> bool {
        self.requested
            .swap(false, std::sync::atomic::Ordering::AcqRel)
    }

    fn answer(&self, res: SamplerResult) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(res);
        self.ready.notify_all();
    }
}

impl Sampler {
    /// Starts sampling pepper's memory `memory`. The caller keeps the store (and so the
    /// memory) alive and finishes the sampler before dropping it; pepper's memory is never
    /// grown, so its address is stable.
    /// `in_host` is set by the store's call hook while the guest is in a host call.
    /// `modules` are the memories of [`SamplerConfig::modules`] (`None` for a module the
    /// component never instantiated).
    pub(crate) fn start(
        (mem, modules): (MemView, Vec<Option<MemView>>),
        flag: Option<Flag>,
        cfg: SamplerConfig,
        in_host: Arc<AtomicBool>,
        native: Option<Native>,
        signals: Option<Arc<crate::native::NativeSampler>>,
    ) -> Sampler {
        if let (Some((sampler, _)), Some(sc), true) = (&native, &cfg.stacks, mem.len > 0) {
            let path_words = sc
                .path_windows
                .as_ref()
                .map(|_| (cfg.head, cfg.base, cfg.entries));
            let rings = [
                (
                    crate::native::Ring::CallLog,
                    sc.call_log.map(|r| (r.head, r.base, r.entries)),
                ),
                (crate::native::Ring::PathWords, path_words),
            ];
            for (ring, layout) in rings {
                if let Some(layout) = layout {
                    // SAFETY: pepper's memory, which the caller keeps alive and unmoved
                    // until the sampler is finished.
                    unsafe { sampler.read_ring(ring, (mem.ptr as u64, mem.len), layout) };
                }
            }
        }
        // Switch: the guest thread's handler takes over bursts this thread is too late to
        // measure (see `crate::native::burst`); one may write the ring up to its margin.
        // The guest's takeover of a burst watches one ring.
        let signals = signals.filter(|_| cfg.modules.is_empty()).filter(|s| {
            let (Some(words), true) = (cfg.switch, flag.is_some() && cfg.entries > 0) else {
                return false;
            };
            let lease = cfg.entries - (cfg.entries / 4).max(8).min(cfg.entries / 2);
            // SAFETY: pepper's memory, which the caller keeps alive and unmoved until the
            // sampler is finished.
            unsafe { s.enable_bursts(mem, (cfg.head, words.flag.at, words.limit), lease) }
        });
        let snapshots = Arc::new(Snapshots::default());
        let mailbox = snapshots.clone();
        // Called on the guest's thread: its CPU clock judges whether it ran.
        let clock = crate::worker::ThreadCpuClock::current();
        Sampler(
            Worker::spawn("pepper-sampler", move |stop| {
                let guest = ((mem, modules), flag, clock, signals);
                sample_loop(guest, &cfg, stop, &in_host, native, &mailbox)
            }),
            snapshots,
        )
    }

    /// Its mailbox for snapshots.
    pub(crate) fn snapshots(&self) -> Arc<Snapshots> {
        self.1.clone()
    }

    /// Stops the thread and returns what it collected; a sampler that failed returns
    /// nothing but the failure, which is also said on stderr (the run goes on: the
    /// guest's own results must not be lost to a profiler bug).
    pub fn finish(self) -> SamplerResult {
        self.0.finish().unwrap_or_else(|why| {
            eprintln!("pepper: warning: {why}; the profile has no samples");
            SamplerResult {
                failure: Some(why),
                ..Default::default()
            }
        })
    }
}

/// This tick's stack sample when the switch's burst takes it (see `Bursts::tick`).
struct InBurst<'s, 'c> {
    stacks: &'s mut StackSamples<'c>,
    mem: MemView,
    in_host: &'s AtomicBool,
    native: Option<&'s Native>,
    pending: Option<stacks::Captured>,
    captured: Option<stacks::Captured>,
}

impl bursts::BurstStack for InBurst<'_, '_> {
    fn request(&mut self, set_at: u32) -> bool {
        self.stacks.window_from(set_at);
        self.pending = self.stacks.request(self.mem, self.in_host, self.native);
        self.pending.is_some()
    }

    fn collect(&mut self) -> Option<Instant> {
        self.captured = self.stacks.collect(self.pending.take()?, self.native);
        self.captured.as_ref()?;
        self.stacks.handler_started()
    }
}

/// Longest a tick waits for the guest to run its period, as a multiple of the period: a
/// guest asleep in a host call still gets its ticks (snapshots are answered at ticks).
const TICK_PATIENCE: u32 = 100;

/// Sleeps until the guest thread has run for `period` of CPU time since the last tick
/// (`last`, updated), or stopped; with no CPU clock, for `period` of wall time. Returns
/// whether a stop was requested.
///
/// Why: ticks at wall-clock times land on the guest's code in proportion to the wall
/// time it spends there, which on a busy machine includes the time it waited for a core;
/// where it waits most then gets the most bursts, each standing for work done elsewhere.
/// Ticks spaced by the guest's own CPU time land on its code in proportion to the time
/// it runs it, loaded or not, as a CPU-time profiling timer does.
fn sleep_guest_time(
    stop: &Stop,
    period: Duration,
    clock: Option<crate::worker::ThreadCpuClock>,
    last: &mut Option<Duration>,
    snapshots: &Snapshots,
) -> bool {
    let Some((clock, from)) = clock.zip(*last) else {
        return stop.sleep(period);
    };
    let started = Instant::now();
    let mut wait = period;
    loop {
        if stop.sleep(wait) {
            return true;
        }
        let Some(now) = clock.now() else {
            return false;
        };
        let ran = now.saturating_sub(from);
        if ran >= period || started.elapsed() >= period * TICK_PATIENCE || snapshots.is_requested()
        {
            *last = Some(now);
            return false;
        }
        // What the guest has left to run, or a little while if it is not running.
        wait = (period - ran).max(MIN_TICK_WAIT);
    }
}

/// The shortest sleep while waiting for the guest to run its tick's period.
/// What the sampler thread reads and drives of the guest: pepper's memory (and a
/// component's other modules' memories), the switch's flag, the guest thread's CPU clock
/// and its signal handler.
type Driven = (
    (MemView, Vec<Option<MemView>>),
    Option<Flag>,
    Option<crate::worker::ThreadCpuClock>,
    Option<Arc<crate::native::NativeSampler>>,
);

const MIN_TICK_WAIT: Duration = Duration::from_micros(50);

/// The sampler thread's work, on pepper's memory and the switch's flag (when
/// `cfg.switch` asks for one).
fn sample_loop(
    ((mem, modules), flag, clock, signals): Driven,
    cfg: &SamplerConfig,
    stop: &Stop,
    in_host: &AtomicBool,
    native: Option<Native>,
    snapshots: &Snapshots,
) -> SamplerResult {
    let mut stacks = cfg.stacks.as_ref().map(|s| StackSamples::new(s, clock));
    let ring = cfg.entries > 0;
    let mut res = SamplerResult::default();
    let mut bursts = Bursts::new((mem, modules), cfg, flag, clock, signals);
    let mut tick_no: u64 = 0;
    let mut last_tick_cpu = clock.and_then(crate::worker::ThreadCpuClock::now);
    let mut intervals =
        cfg.intervals.clone().filter(|_| ring).map(|ic| {
            crate::intervals::Intervals::new(ic, (cfg.head, cfg.base, cfg.entries), flag)
        });
    loop {
        if snapshots.wanted() {
            // What the run has so far (a time line's intervals are not part of it).
            let mut now = res.clone();
            if ring {
                bursts.snapshot(mem, cfg, &mut now);
            }
            if let Some(st) = &stacks {
                st.snapshot(&mut now);
            }
            snapshots.answer(now);
        }
        // One more pass after the guest finished: the tick "at exit" gives short runs a
        // burst too.
        let last = match intervals.as_mut().filter(|iv| iv.drains()) {
            // Reading every path end: between ticks too, so that a fast guest does not
            // lap the ring.
            Some(iv) => {
                let until = Instant::now() + cfg.interval;
                loop {
                    let left = until.saturating_duration_since(Instant::now());
                    if stop.sleep(left.min(crate::intervals::DRAIN_EVERY)) {
                        break true;
                    }
                    if left <= crate::intervals::DRAIN_EVERY {
                        break false;
                    }
                    iv.drain(mem);
                }
            }
            None => sleep_guest_time(stop, cfg.interval, clock, &mut last_tick_cpu, snapshots),
        };
        tick_no += 1;
        let stack_tick = last || tick_no.is_multiple_of(cfg.stack_every.max(1) as u64);
        // Switch with path windows: the stack is sampled during the burst, while the
        // instrumented copies run, and its window reads that burst's path ends only
        // (before them, clean code ran and wrote none).
        let in_burst = !last && ring && intervals.is_none() && cfg.switch.is_some();
        let burst_window = in_burst
            && native.is_some()
            && cfg
                .stacks
                .as_ref()
                .is_some_and(|s| s.path_windows.is_some());
        if let Some(st) = stacks.as_mut().filter(|_| stack_tick && !burst_window) {
            if ring && cfg.switch.is_some() {
                // Outside a burst the ring's newest words may be older than clean code
                // that ran since: no window.
                st.window_from(mem.u32_at(cfg.head));
            }
            st.take(mem, in_host, native.as_ref(), intervals.as_mut());
        }
        if !ring {
            if last {
                break;
            }
            continue;
        }
        if let Some(iv) = intervals.as_mut() {
            iv.tick(mem, last);
            if iv.replaces_bursts() {
                if last {
                    break;
                }
                continue;
            }
        }
        // (Only the copy is taken while the flag is set: replaying the window takes
        // longer than the burst, and would keep the guest in its instrumented copies.)
        let mut burst_stack =
            stacks
                .as_mut()
                .filter(|_| stack_tick && burst_window)
                .map(|stacks| InBurst {
                    stacks,
                    mem,
                    in_host,
                    native: native.as_ref(),
                    pending: None,
                    captured: None,
                });
        bursts.tick(
            mem,
            cfg,
            last,
            &mut res,
            burst_stack
                .as_mut()
                .map(|s| s as &mut dyn bursts::BurstStack),
        );
        let captured = burst_stack.and_then(|s| s.captured);
        if let Some(iv) = intervals.as_mut().filter(|iv| !iv.drains()) {
            let (words, weight) = bursts.last_taken();
            iv.burst(words, weight, bursts.path_ends(), last);
        }
        if let (Some(st), Some(c)) = (stacks.as_mut(), captured) {
            st.fold(c, native.as_ref(), None);
        }
        if let Some(live) = &cfg.live {
            live.samples.store(res.taken, Ordering::Relaxed);
            live.path_ends.store(bursts.path_ends(), Ordering::Relaxed);
        }
        if last {
            break;
        }
    }
    bursts.finish(mem, cfg, &mut res);
    if let Some(ir) = intervals.map(crate::intervals::Intervals::finish) {
        if let Some(words) = &ir.words {
            // Interval sampling: the profiled intervals' path ends, scaled per phase.
            res.words = words.clone();
            res.path_ends = words.iter().map(|w| w.1).sum();
            let profiled = ir.timeline.intervals.iter().filter(|i| i.profiled);
            res.taken = profiled.clone().map(|i| i.path_ends).sum();
            res.switched_on = Duration::from_micros(profiled.map(|i| i.wall_us).sum());
        }
        res.intervals = Some(ir);
    }
    if let Some(st) = stacks {
        st.finish(&mut res);
    }
    res
}

#[cfg(test)]
mod tests;
