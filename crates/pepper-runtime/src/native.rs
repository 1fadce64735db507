//! Native stack samples of the guest thread, with no instrumentation at all: the sampler
//! thread interrupts the guest thread with a signal, the handler copies the frame-pointer
//! chain (Cranelift keeps frame pointers in wasm code, which is how wasmtime's own
//! backtraces work), and the sampler maps the addresses to wasm functions and call sites
//! with the compiled module's function table and address map. This is what Whaley's
//! profiler did on a suspended thread, and what perf and samply do; it costs one signal per
//! sample instead of a few instructions per call.
//!
//! Limits: x86-64 Linux only. A sample taken while the guest is in a host call (WASI)
//! lands in code without frame pointers, so it has no wasm context: it is counted as host
//! time under the root. New and old activations are told apart by comparing the frame
//! chain with the previous sample's (frame address and return address per depth), which
//! cannot see a fresh activation at the same place (Whaley §5.2 assumes every new activation gets a fresh return-address mark).

// Signal handlers and reading another thread's stack are raw-pointer affairs.
#![allow(unsafe_code)]

pub(crate) mod burst;
mod ring;

pub(crate) use burst::BurstTimes;
use pepper_cct::{Frame, Stack};
use ring::RingCopy;
pub(crate) use ring::{Ring, Window};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether native stack sampling works on this platform (the handler reads x86-64 Linux
/// registers).
pub const AVAILABLE: bool = cfg!(all(target_arch = "x86_64", target_os = "linux"));

/// Most frames one sample copies.
pub const MAX_FRAMES: usize = 512;
/// Most call-log events one sample copies (the newest ones; see `pepper_cct::window`).
pub const MAX_EVENTS: usize = 16384;
/// Most PEP path words one sample copies (the newest ones; see `pepper_cct::paths`): the
/// ring's default length, whatever the ring (a larger PEP burst makes a larger ring, not
/// a longer window: more, shorter windows measured better than fewer, longer ones).
pub const MAX_WORDS: usize = 1 << pepper_layout::PATH_WINDOW_RING_LOG2;

const IDLE: u32 = 0;
const REQUESTED: u32 = 1;
const DONE: u32 = 2;

/// Where the handler leaves a sample for the sampler thread.
pub(crate) struct Slot {
    state: AtomicU32,
    /// The guest thread's stack bounds (frame pointers outside are not followed).
    lo: u64,
    hi: u64,
    n: AtomicU32,
    /// pcs[0] is the interrupted instruction, then return addresses; fps alongside.
    pcs: [AtomicU64; MAX_FRAMES],
    fps: [AtomicU64; MAX_FRAMES],
    /// The guest's call log (`--call-windows`) and PEP's ring (path windows), if they are
    /// read: each sample copies their newest words with the frames (the same instant,
    /// since the guest thread is the one interrupted).
    log: RingCopy<u32, MAX_EVENTS>,
    ring: RingCopy<u64, MAX_WORDS>,
    /// When the handler started, in nanoseconds since `base` (the guest had stopped
    /// running its own code before).
    base: Instant,
    handler_ns: AtomicU64,
    /// When the sampler sent the signal, in the same unit.
    sent_ns: AtomicU64,
    /// PEP's switched bursts the handler takes over (see `burst`).
    burst: burst::BurstSlot,
}

static SLOT: AtomicPtr<Slot> = AtomicPtr::new(std::ptr::null_mut());
/// Handlers running right now: a slot is freed only once none can still be reading it.
static ACTIVE: AtomicU32 = AtomicU32::new(0);

/// How compiled code maps back to the module.
#[derive(Clone, Debug, Default)]
pub struct CodeMap {
    /// Runtime address of the module's compiled text.
    pub text: u64,
    pub text_len: u64,
    /// (text offset, length, function index), sorted by offset.
    pub functions: std::sync::Arc<[(u64, u64, u32)]>,
    /// (text offset, wasm module offset), sorted: wasmtime's address map. Building it
    /// takes milliseconds on a large module, so a compiled module builds it once and every
    /// run shares it.
    pub address_map: std::sync::Arc<[(u64, u64)]>,
    /// Module offset of a call instruction → pepper call-site id (shared with the run's
    /// `StackConfig`).
    pub sites: std::sync::Arc<std::collections::HashMap<u64, u32>>,
    /// Switchable instrumentation: the function each copy is a copy of.
    pub origins: std::sync::Arc<std::collections::HashMap<u32, u32>>,
}

/// What compiled code a run executes, for its [`CodeMap`].
#[derive(Clone, Copy)]
pub(crate) enum CodeSource<'a> {
    Module(&'a wasmtime::Module),
    /// A component, the index of its profiled core module, and where that module starts
    /// in the component (see [`CodeMap::from_component`]).
    Component(&'a wasmtime::component::Component, usize, u64),
}

impl CodeSource<'_> {
    pub(crate) fn code_map(self) -> CodeMap {
        match self {
            CodeSource::Module(m) => CodeMap::from_module(m),
            CodeSource::Component(c, program, at) => CodeMap::from_component(c, program, at),
        }
    }
}

impl CodeMap {
    pub fn from_module(module: &wasmtime::Module) -> CodeMap {
        let functions = module
            .functions()
            .map(|f| (f.offset as u64, f.len as u64, f.index.as_u32()));
        CodeMap::new(module.text(), functions, module.address_map(), 0)
    }

    /// A component's code: every core module's functions, the profiled module's
    /// (`program`, in the order its core modules appear) under their own indices and the
    /// others' as [`pepper_wasm::component::foreign_function`] ids, so that a stack through
    /// an adapter shows its frames. `program_at` is where the profiled module starts in
    /// the component: wasmtime's address map gives offsets in the component, call sites
    /// are offsets in the module.
    pub fn from_component(
        component: &wasmtime::component::Component,
        program: usize,
        program_at: u64,
    ) -> CodeMap {
        let functions = component.functions().filter_map(|f| {
            let (module, index) = (f.module.as_u32() as usize, f.index.as_u32());
            let id = match module == program {
                true => index,
                false => pepper_wasm::component::foreign_function(module, index)?,
            };
            Some((f.offset as u64, f.len as u64, id))
        });
        let text = component.text();
        CodeMap::new(text, functions, component.address_map(), program_at)
    }

    /// `functions` as (text offset, length, id); the address map's wasm offsets less
    /// `base` (entries below it are another module's).
    fn new(
        text: &[u8],
        functions: impl Iterator<Item = (u64, u64, u32)>,
        address_map: Option<impl Iterator<Item = (usize, Option<u32>)>>,
        base: u64,
    ) -> CodeMap {
        let mut functions: Vec<(u64, u64, u32)> = functions.collect();
        functions.sort_unstable();
        let address_map: Vec<(u64, u64)> = address_map
            .map(|m| {
                m.filter_map(|(t, w)| Some((t as u64, (w? as u64).checked_sub(base)?)))
                    .collect()
            })
            .unwrap_or_default();
        CodeMap {
            text: text.as_ptr() as u64,
            text_len: text.len() as u64,
            functions: functions.into(),
            address_map: address_map.into(),
            ..Default::default()
        }
    }

    fn function(&self, pc: u64) -> Option<u32> {
        let off = pc.checked_sub(self.text)?;
        if off >= self.text_len {
            return None;
        }
        let i = self
            .functions
            .partition_point(|f| f.0 <= off)
            .checked_sub(1)?;
        let (start, len, idx) = self.functions[i];
        (off < start + len).then(|| self.origins.get(&idx).copied().unwrap_or(idx))
    }

    /// The module offset of the wasm instruction whose code holds `pc`, in the profiled
    /// module's code only.
    pub(crate) fn offset(&self, pc: u64) -> Option<u64> {
        pepper_wasm::component::foreign_parts(self.function(pc)?)
            .is_none()
            .then_some(())?;
        let off = pc.checked_sub(self.text)?;
        let i = self
            .address_map
            .partition_point(|m| m.0 <= off)
            .checked_sub(1)?;
        Some(self.address_map[i].1)
    }

    /// The call site a return address returns to (the call is the instruction before).
    fn site(&self, ret: u64) -> Option<u32> {
        self.sites.get(&self.offset(ret.checked_sub(1)?)?).copied()
    }
}

/// The SIGPROF action that was there before pepper's (chained to, and restored when the
/// sampler ends): its handler address and flags. Written only by the one sampler that
/// holds `SLOT`, read by the handler.
static OLD_HANDLER: AtomicU64 = AtomicU64::new(libc::SIG_DFL as u64);
static OLD_FLAGS: AtomicU32 = AtomicU32::new(0);
/// Whether pepper's handler is installed now.
static INSTALLED: AtomicU32 = AtomicU32::new(0);

/// Installs the SIGPROF handler, keeping the one it replaces (called by the sampler that
/// holds `SLOT`, so never twice at once).
fn install() {
    // Pepper's handler may have stayed from an earlier run with bursts (see `drop`), or
    // been replaced since by someone else's: what is there now decides.
    // SAFETY: queries the current action only.
    let current = unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut now);
        now.sa_sigaction
    };
    if current == handler as *const () as usize {
        INSTALLED.store(1, Ordering::SeqCst);
        return;
    }
    // SAFETY: a plain sigaction with an async-signal-safe handler (atomics and reads of
    // validated stack addresses only).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPROF, &sa, &mut old) == 0 {
            OLD_HANDLER.store(old.sa_sigaction as u64, Ordering::SeqCst);
            OLD_FLAGS.store(old.sa_flags as u32, Ordering::SeqCst);
            INSTALLED.store(1, Ordering::SeqCst);
        }
    }
}

/// Puts back the action `install` replaced.
fn restore() {
    if INSTALLED.swap(0, Ordering::SeqCst) == 0 {
        return;
    }
    // SAFETY: reinstalls the action the kernel gave `install`, unchanged.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = OLD_HANDLER.load(Ordering::SeqCst) as usize;
        sa.sa_flags = OLD_FLAGS.load(Ordering::SeqCst) as libc::c_int;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut());
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the calling thread's errno, put back before returning to the code the
    // signal interrupted (the clock and timer calls may set it).
    let errno = unsafe { *libc::__errno_location() };
    let slot = SLOT.load(Ordering::SeqCst);
    // SAFETY: as in `take_sample`: the slot outlives every handler that loaded it.
    let burst = unsafe { slot.as_ref() }.is_some_and(burst::step);
    let ours = take_sample(ctx) | burst;
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
    if !ours {
        chain(sig, info, ctx);
    }
}

/// A SIGPROF pepper did not ask for goes to the handler that was there before (another
/// profiler's); the default action (ending the process) and `SIG_IGN` are not run.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let old = OLD_HANDLER.load(Ordering::SeqCst) as usize;
    if old == libc::SIG_DFL || old == libc::SIG_IGN || old == handler as *const () as usize {
        return;
    }
    // SAFETY: `old` is the handler the process installed, called as it asked to be.
    unsafe {
        if OLD_FLAGS.load(Ordering::SeqCst) as libc::c_int & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(old);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(old);
            f(sig);
        }
    }
}

/// The interrupted thread's program counter, frame pointer and stack pointer, where the
/// walker knows the frame layout ([`AVAILABLE`]); elsewhere pepper builds, takes no
/// native samples, and contexts use the shadow stack (`--stacks shadow`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn registers(uc: &libc::ucontext_t) -> Option<(u64, u64, u64)> {
    let g = &uc.uc_mcontext.gregs;
    Some((
        g[libc::REG_RIP as usize] as u64,
        g[libc::REG_RBP as usize] as u64,
        g[libc::REG_RSP as usize] as u64,
    ))
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn registers(_: &libc::ucontext_t) -> Option<(u64, u64, u64)> {
    None
}

/// Copies the interrupted thread's stack into the slot; false when no sample was asked
/// for (the signal is someone else's).
fn take_sample(ctx: *mut libc::c_void) -> bool {
    let slot = SLOT.load(Ordering::SeqCst);
    if slot.is_null() || ctx.is_null() {
        return false;
    }
    // SAFETY: the slot outlives every handler that loaded it (the sampler clears SLOT and
    // waits for ACTIVE to drain before dropping it); `ctx` is the kernel's ucontext.
    unsafe {
        let slot = &*slot;
        if slot.state.load(Ordering::Acquire) != REQUESTED {
            return false;
        }
        // `Instant::now` is clock_gettime, async-signal-safe.
        let started = slot.base.elapsed().as_nanos() as u64;
        slot.handler_ns.store(started, Ordering::Relaxed);
        let uc = &*(ctx as *const libc::ucontext_t);
        let Some((mut pc, mut fp, sp)) = registers(uc) else {
            return false;
        };
        // Live frames lie between the stack pointer and the top of the stack; below the
        // stack pointer (of a main thread's growing stack) memory may not be mapped.
        let lo = slot.lo.max(sp);
        let mut n = 0;
        while n < MAX_FRAMES {
            slot.pcs[n].store(pc, Ordering::Relaxed);
            slot.fps[n].store(fp, Ordering::Relaxed);
            n += 1;
            // Follow the chain only within the stack, upward, aligned. (Host code built
            // without frame pointers leaves anything in the register: near 2^64, `fp + 16`
            // would wrap past the check.)
            if fp < lo || fp > slot.hi.saturating_sub(16) || !fp.is_multiple_of(8) {
                break;
            }
            let next = *(fp as *const u64);
            pc = *((fp + 8) as *const u64);
            if next <= fp {
                break;
            }
            fp = next;
        }
        slot.n.store(n as u32, Ordering::Relaxed);
        slot.log.copy();
        slot.ring.copy();
        slot.state.store(DONE, Ordering::Release);
    }
    true
}

/// What a native sample copies besides the frames: the call log's newest events and
/// PEP's newest path words.
#[derive(Debug, Default)]
pub(crate) struct Copied {
    pub events: Window<u32>,
    pub words: Window<u64>,
    /// When the signal handler started (the guest had stopped running its own code
    /// before).
    pub handler: Option<Instant>,
    /// How long the signal took from the sampler's send to the handler's start.
    pub delivery: Option<Duration>,
}

/// Samples one thread's native stack on request, and takes over PEP's switched bursts
/// on it when the sampler thread is late (see `burst`).
pub(crate) struct NativeSampler {
    slot: Box<Slot>,
    thread: libc::pthread_t,
    /// The thread's kernel id, which a timer aimed at it names.
    tid: libc::pid_t,
}

impl NativeSampler {
    /// Prepares to sample the calling thread (the guest's).
    pub(crate) fn for_current_thread() -> Option<NativeSampler> {
        if !AVAILABLE {
            return None;
        }
        // SAFETY: plain pthread queries about the calling thread.
        let (lo, hi) = unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
                return None;
            }
            let mut addr: *mut libc::c_void = std::ptr::null_mut();
            let mut size: libc::size_t = 0;
            let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            if ok != 0 {
                return None;
            }
            (addr as u64, addr as u64 + size as u64)
        };
        let slot = Box::new(Slot {
            state: AtomicU32::new(IDLE),
            lo,
            hi,
            n: AtomicU32::new(0),
            pcs: std::array::from_fn(|_| AtomicU64::new(0)),
            fps: std::array::from_fn(|_| AtomicU64::new(0)),
            log: RingCopy::new(),
            ring: RingCopy::new(),
            base: Instant::now(),
            handler_ns: AtomicU64::new(0),
            sent_ns: AtomicU64::new(0),
            burst: burst::BurstSlot::new(),
        });
        // One sampled thread per process at a time: the signal handler has one slot.
        SLOT.compare_exchange(
            std::ptr::null_mut(),
            &*slot as *const Slot as *mut Slot,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .ok()?;
        install();
        // SAFETY: querying the calling thread's ids.
        let (thread, tid) = unsafe { (libc::pthread_self(), libc::gettid()) };
        Some(NativeSampler { slot, thread, tid })
    }

    /// Lets the guest thread take over PEP's switched bursts (see `burst`): `words` are
    /// the ring head, the flag and the burst's limit in pepper's memory `mem`, and a
    /// burst the handler measures leaves its instrumented copies by itself after `lease`
    /// path ends. False if the timer cannot be made (the sampler thread then runs every
    /// burst alone).
    ///
    /// # Safety
    /// `mem` must be pepper's memory, mapped for as long as this sampler samples.
    pub(crate) unsafe fn enable_bursts(
        &self,
        mem: crate::memview::MemView,
        words: (u32, u32, u32),
        lease: u32,
    ) -> bool {
        if self.slot.burst.timer().is_some() {
            return true;
        }
        // SAFETY: a timer of this process aimed at the guest thread, which outlives it
        // (deleted in `drop`, before the runtime lets the thread go).
        let timer = unsafe {
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = libc::SIGPROF;
            sev.sigev_notify_thread_id = self.tid;
            let mut timer: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut timer) != 0 {
                return false;
            }
            timer
        };
        self.slot.burst.set_words(mem, words, lease);
        self.slot.burst.set_thread(self.tid);
        self.slot.burst.set_timer(timer);
        true
    }

    /// Begins a burst the handler takes over if the sampler thread has not claimed it
    /// in time (see `burst`): the ring head and the guest's CPU time when the flag was
    /// set. False if one is still under way.
    pub(crate) fn begin_burst(&self, set: (u32, Duration)) -> bool {
        self.slot.burst.begin(set)
    }

    /// The sampler thread has measured the burst: true if the handler had not taken it
    /// over; false if it had (then [`NativeSampler::take_burst`] gives the handler's
    /// measurements once it ends).
    pub(crate) fn claim_burst(&self) -> bool {
        self.slot.burst.claim()
    }

    /// The sampler thread ends a burst it claimed.
    pub(crate) fn finish_burst(&self) {
        self.slot.burst.finish()
    }

    /// The last burst's measurements once it has ended (the slot is then free).
    pub(crate) fn take_burst(&self) -> Option<BurstTimes> {
        self.slot.burst.take()
    }

    /// Whether no burst is asked for or running.
    pub(crate) fn burst_idle(&self) -> bool {
        self.slot.burst.idle()
    }

    /// Lets every sample also copy the newest words of a guest ring: `memory` is pepper's
    /// memory (host address, length), `(head, base, entries)` the ring's layout in it.
    /// Call before the first sample.
    ///
    /// # Safety
    /// `memory` must be pepper's memory, mapped for as long as this sampler samples.
    pub(crate) unsafe fn read_ring(
        &self,
        ring: Ring,
        (memory, len): (u64, usize),
        layout: (u32, u32, u32),
    ) {
        let (head, base, entries) = layout;
        let word = match ring {
            Ring::CallLog => 4,
            Ring::PathWords => 8,
        };
        assert!(base as usize + word * entries as usize <= len && head as usize + 4 <= len);
        // SAFETY: the layout lies inside pepper's memory (checked above), which the
        // caller keeps alive and unmoved.
        unsafe {
            match ring {
                Ring::CallLog => self.slot.log.set(memory, layout),
                Ring::PathWords => self.slot.ring.set(memory, layout),
            }
        }
    }

    /// Interrupts the guest thread, whose signal handler copies its frame chain and the
    /// newest call-log events and PEP path words; [`NativeSampler::collect`] waits for
    /// them (the guest runs on until the signal arrives). The two heads are those of the
    /// call log and of PEP's ring that the sampler has read up to: only newer words are
    /// copied. False if the signal could not be sent.
    pub(crate) fn request(&self, (events_from, words_from): (u32, u32)) -> bool {
        self.slot.log.from.store(events_from, Ordering::Relaxed);
        self.slot.ring.from.store(words_from, Ordering::Relaxed);
        let sent = self.slot.base.elapsed().as_nanos() as u64;
        self.slot.sent_ns.store(sent, Ordering::Relaxed);
        self.slot.state.store(REQUESTED, Ordering::Release);
        // SAFETY: the thread is alive: the runtime stops the sampler before `_start`
        // returns to it.
        if unsafe { libc::pthread_kill(self.thread, libc::SIGPROF) } != 0 {
            self.slot.state.store(IDLE, Ordering::Release);
            return false;
        }
        true
    }

    /// After a [`NativeSampler::request`]: waits for the handler and reads its copy, the
    /// frame chain into `out` as (pc, frame pointer) pairs, leaf first, the words into
    /// `copied`. False if the thread did not answer in time.
    pub(crate) fn collect(&self, out: &mut Vec<(u64, u64)>, copied: &mut Copied) -> bool {
        out.clear();
        let t0 = Instant::now();
        while self.slot.state.load(Ordering::Acquire) != DONE {
            if t0.elapsed() > Duration::from_millis(50) {
                // Leave it REQUESTED: a late handler then writes into a slot that is still
                // alive and nobody reads.
                return false;
            }
            // The handler runs when the guest thread is next scheduled; on a busy machine
            // spinning (or yielding, which the scheduler takes for spinning when another
            // process is busy) would take the core it needs: after the few microseconds
            // a handler takes on an idle machine, this thread sleeps between looks.
            if t0.elapsed() < Duration::from_micros(20) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        let n = self.slot.n.load(Ordering::Relaxed) as usize;
        for k in 0..n {
            out.push((
                self.slot.pcs[k].load(Ordering::Relaxed),
                self.slot.fps[k].load(Ordering::Relaxed),
            ));
        }
        self.slot.log.read(&mut copied.events);
        self.slot.ring.read(&mut copied.words);
        let started = self.slot.handler_ns.load(Ordering::Relaxed);
        copied.handler = Some(self.slot.base + Duration::from_nanos(started));
        let sent = self.slot.sent_ns.load(Ordering::Relaxed);
        copied.delivery = Some(Duration::from_nanos(started.saturating_sub(sent)));
        self.slot.state.store(IDLE, Ordering::Release);
        true
    }
}

impl Drop for NativeSampler {
    fn drop(&mut self) {
        SLOT.store(std::ptr::null_mut(), Ordering::SeqCst);
        // A handler that loaded the pointer before it was cleared finishes within
        // microseconds; one that starts now sees no slot.
        while ACTIVE.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        let timer = self.slot.burst.timer();
        if let Some(timer) = timer {
            // SAFETY: the timer `enable_bursts` made; no handler uses it any more.
            unsafe { libc::timer_delete(timer) };
        }
        // A signal still on its way (a sample that timed out, a burst timer's expiry,
        // which deleting the timer does not take back) must find a handler that ignores
        // it: after bursts, pepper's handler stays, chaining to the one it replaced.
        // Otherwise the process gets the handler it had before.
        if self.slot.state.load(Ordering::Acquire) != REQUESTED && timer.is_none() {
            restore();
        }
    }
}

/// The wasm frames of one native sample, outermost first, as the PCCT walks them; a frame
/// is old when the previous sample had the same frame (address and return address) at the
/// same depth and everything below it matched too.
pub(crate) struct NativeStack<'a> {
    /// (function, call site it calls from, frame identity)
    frames: &'a [(u32, u32, (u64, u64))],
    old: usize,
    /// The copy stopped at `MAX_FRAMES`: the outermost frames are missing.
    truncated: bool,
}

/// Turns raw (pc, fp) pairs, leaf first, into wasm frames outermost first; `None` when the
/// leaf is not in wasm code (the guest is in the host).
pub(crate) fn wasm_frames(
    raw: &[(u64, u64)],
    map: &CodeMap,
    out: &mut Vec<(u32, u32, (u64, u64))>,
) -> bool {
    out.clear();
    let Some(&(leaf_pc, _)) = raw.first() else {
        return false;
    };
    if map.function(leaf_pc).is_none() {
        return false;
    }
    // raw[k] is (pc in frame k, frame pointer of frame k). For k ≥ 1 that pc is the
    // return address of frame k's call, so it names the call site frame k calls from; a
    // frame is identified by its frame pointer and its own return address (raw[k + 1].0).
    for k in 0..raw.len() {
        let (pc, fp) = raw[k];
        let Some(func) = map.function(pc) else {
            // Trampolines between the host and wasm; the host below ends the stack.
            continue;
        };
        let site = if k == 0 {
            u32::MAX
        } else {
            map.site(pc).unwrap_or(u32::MAX)
        };
        let ret = raw.get(k + 1).map_or(0, |r| r.0);
        out.push((func, site, (fp, ret)));
    }
    out.reverse();
    true
}

impl<'a> NativeStack<'a> {
    /// `raw_len` is how many raw frames the handler copied (`MAX_FRAMES`: it stopped
    /// short of the bottom).
    pub(crate) fn new(
        frames: &'a [(u32, u32, (u64, u64))],
        previous: &[(u32, u32, (u64, u64))],
        raw_len: usize,
    ) -> NativeStack<'a> {
        let old = frames
            .iter()
            .zip(previous)
            .take_while(|(a, b)| a.2 == b.2 && a.0 == b.0)
            .count();
        NativeStack {
            frames,
            old,
            truncated: raw_len >= MAX_FRAMES,
        }
    }
}

impl Stack for NativeStack<'_> {
    fn depth(&self) -> usize {
        self.frames.len()
    }
    fn frame(&self, i: usize) -> Frame {
        Frame {
            func: self.frames[i].0,
            site: self.frames[i].1,
        }
    }
    fn marked(&self, i: usize) -> bool {
        i < self.old
    }
    fn mark(&mut self, _i: usize) -> bool {
        true
    }
    fn truncated(&self) -> bool {
        self.truncated
    }
}

#[cfg(test)]
mod tests;
