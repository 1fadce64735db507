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
//! cannot see a fresh activation at the same place (the digest's M1).

// Signal handlers and reading another thread's stack are raw-pointer affairs.
#![allow(unsafe_code)]

use pepper_cct::{Frame, Stack};
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
pub const MAX_WORDS: usize = 1 << pepper_wasm::PATH_WINDOW_RING_LOG2;

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
    /// The guest's call log, if it keeps one: host addresses of its head word and ring,
    /// and the ring's length (a power of two). Set before the first sample.
    log: LogAt,
    /// The head when the handler copied the log, and the newest `events_n` events,
    /// oldest first: the same instant as the frames, since the guest thread is the one
    /// interrupted.
    events_head: AtomicU32,
    events_n: AtomicU32,
    events: [AtomicU32; MAX_EVENTS],
    /// PEP's ring, if path windows read it: the same for its u64 path words.
    ring: LogAt,
    words_head: AtomicU32,
    words_n: AtomicU32,
    words: [AtomicU64; MAX_WORDS],
}

/// Host addresses of a ring's u32 head (a count of words written) and of its words, and
/// its length (a power of two); zero until set.
#[derive(Default)]
struct LogAt {
    head: AtomicU64,
    base: AtomicU64,
    entries: AtomicU32,
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
}

impl CodeMap {
    pub fn from_module(module: &wasmtime::Module) -> CodeMap {
        let text = module.text();
        let mut functions: Vec<(u64, u64, u32)> = module
            .functions()
            .map(|f| (f.offset as u64, f.len as u64, f.index.as_u32()))
            .collect();
        functions.sort_unstable();
        let address_map: Vec<(u64, u64)> = module
            .address_map()
            .map(|m| m.filter_map(|(t, w)| Some((t as u64, w? as u64))).collect())
            .unwrap_or_default();
        CodeMap {
            text: text.as_ptr() as u64,
            text_len: text.len() as u64,
            functions: functions.into(),
            address_map: address_map.into(),
            sites: Default::default(),
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
        (off < start + len).then_some(idx)
    }

    /// The module offset of the wasm instruction whose code holds `pc`.
    pub(crate) fn offset(&self, pc: u64) -> Option<u64> {
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

/// Installs the SIGPROF handler (once per process).
fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a plain sigaction with an async-signal-safe handler (atomics and reads
        // of validated stack addresses only).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut());
        }
    });
}

extern "C" fn handler(_sig: libc::c_int, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    take_sample(ctx);
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
}

fn take_sample(ctx: *mut libc::c_void) {
    let slot = SLOT.load(Ordering::SeqCst);
    if slot.is_null() || ctx.is_null() {
        return;
    }
    // SAFETY: the slot outlives every handler that loaded it (the sampler clears SLOT and
    // waits for ACTIVE to drain before dropping it); `ctx` is the kernel's ucontext.
    unsafe {
        let slot = &*slot;
        if slot.state.load(Ordering::Acquire) != REQUESTED {
            return;
        }
        let uc = &*(ctx as *const libc::ucontext_t);
        let mut pc = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
        let mut fp = uc.uc_mcontext.gregs[libc::REG_RBP as usize] as u64;
        // Live frames lie between the stack pointer and the top of the stack; below the
        // stack pointer (of a main thread's growing stack) memory may not be mapped.
        let sp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as u64;
        let lo = slot.lo.max(sp);
        let mut n = 0;
        while n < MAX_FRAMES {
            slot.pcs[n].store(pc, Ordering::Relaxed);
            slot.fps[n].store(fp, Ordering::Relaxed);
            n += 1;
            // Follow the chain only within the stack, upward, aligned.
            if fp < lo || fp + 16 > slot.hi || !fp.is_multiple_of(8) {
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
        copy_log(slot);
        slot.state.store(DONE, Ordering::Release);
    }
}

/// Copies the newest call-log events and PEP path words (in the handler, while the guest
/// is stopped, so nothing is overwritten during the copy).
///
/// # Safety
/// The ring addresses, if set, point into pepper's memory, which outlives the sampler.
unsafe fn copy_log(slot: &Slot) {
    // SAFETY: (caller); atomics have their integer's layout, and the sampler thread reads
    // these only after the handler's release store of DONE.
    unsafe {
        let (head, n) = copy_newest(&slot.log, MAX_EVENTS, slot.events[0].as_ptr());
        slot.events_head.store(head, Ordering::Relaxed);
        slot.events_n.store(n as u32, Ordering::Relaxed);
        let (head, n) = copy_newest(&slot.ring, MAX_WORDS, slot.words[0].as_ptr());
        slot.words_head.store(head, Ordering::Relaxed);
        slot.words_n.store(n as u32, Ordering::Relaxed);
    }
}

/// Copies the newest `max` words of the ring at `at` to `dst`, oldest first (two block
/// copies: where the ring wraps); returns the ring's head and how many were copied (none
/// when it is not set).
///
/// # Safety
/// As for [`copy_log`]; `T` is the ring's word type and `dst` holds `max` of them.
unsafe fn copy_newest<T: Copy>(at: &LogAt, max: usize, dst: *mut T) -> (u32, usize) {
    let entries = at.entries.load(Ordering::Relaxed) as usize;
    let head_at = at.head.load(Ordering::Relaxed);
    if entries == 0 || head_at == 0 {
        return (0, 0);
    }
    let base = at.base.load(Ordering::Relaxed) as *const T;
    // SAFETY: (caller) aligned words inside pepper's memory; the guest, the only writer,
    // is the thread this handler interrupted.
    let head = unsafe { std::ptr::read_volatile(head_at as *const u32) };
    let n = max.min(entries).min(head as usize);
    let first = head.wrapping_sub(n as u32) as usize & (entries - 1);
    let tail = n.min(entries - first);
    // SAFETY: both stretches lie inside the ring and `dst` has room for `n ≤ max` words.
    unsafe {
        std::ptr::copy_nonoverlapping(base.add(first), dst, tail);
        std::ptr::copy_nonoverlapping(base, dst.add(tail), n - tail);
    }
    (head, n)
}

/// What a native sample copies besides the frames, oldest first, with the head (words
/// written so far) at that instant: the call log's newest events and PEP's newest path
/// words.
#[derive(Debug, Default)]
pub(crate) struct Copied {
    pub events: Vec<u32>,
    pub events_head: u32,
    pub words: Vec<u64>,
    pub words_head: u32,
}

/// Samples one thread's native stack on request.
pub(crate) struct NativeSampler {
    slot: Box<Slot>,
    thread: libc::pthread_t,
}

impl NativeSampler {
    /// Prepares to sample the calling thread (the guest's).
    pub(crate) fn for_current_thread() -> Option<NativeSampler> {
        if !AVAILABLE {
            return None;
        }
        install();
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
            log: LogAt::default(),
            events_head: AtomicU32::new(0),
            events_n: AtomicU32::new(0),
            events: std::array::from_fn(|_| AtomicU32::new(0)),
            ring: LogAt::default(),
            words_head: AtomicU32::new(0),
            words_n: AtomicU32::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        });
        // One sampled thread per process at a time: the signal handler has one slot.
        SLOT.compare_exchange(
            std::ptr::null_mut(),
            &*slot as *const Slot as *mut Slot,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .ok()?;
        // SAFETY: querying the calling thread's id.
        let thread = unsafe { libc::pthread_self() };
        Some(NativeSampler { slot, thread })
    }

    /// Lets every sample also copy the guest's call log (`ring` false) or PEP's ring of
    /// path words (`ring` true): `memory` is pepper's memory's host address, `(head, base,
    /// entries)` the ring's layout in it. Call before the first sample.
    ///
    /// # Safety
    /// `memory` must be the start of pepper's memory, mapped for as long as this sampler
    /// samples, and the layout must lie inside it.
    pub(crate) unsafe fn set_log(
        &self,
        memory: u64,
        ring: bool,
        (head, base, entries): (u32, u32, u32),
    ) {
        let at = if ring {
            &self.slot.ring
        } else {
            &self.slot.log
        };
        at.base.store(memory + base as u64, Ordering::Relaxed);
        at.entries.store(entries, Ordering::Relaxed);
        at.head.store(memory + head as u64, Ordering::Release);
    }

    /// Interrupts the guest thread and copies its frame chain into `out` as
    /// (pc, frame pointer) pairs, leaf first, and the newest call-log events and PEP path
    /// words into `copied`. False if the thread did not answer in time.
    pub(crate) fn sample(&self, out: &mut Vec<(u64, u64)>, copied: &mut Copied) -> bool {
        out.clear();
        self.slot.state.store(REQUESTED, Ordering::Release);
        // SAFETY: the thread is alive: the runtime stops the sampler before `_start`
        // returns to it.
        if unsafe { libc::pthread_kill(self.thread, libc::SIGPROF) } != 0 {
            self.slot.state.store(IDLE, Ordering::Release);
            return false;
        }
        let t0 = Instant::now();
        while self.slot.state.load(Ordering::Acquire) != DONE {
            if t0.elapsed() > Duration::from_millis(50) {
                // Leave it REQUESTED: a late handler then writes into a slot that is still
                // alive and nobody reads.
                return false;
            }
            // The handler runs when the guest thread is next scheduled; on a busy machine
            // spinning would take the core it needs.
            std::thread::yield_now();
        }
        let n = self.slot.n.load(Ordering::Relaxed) as usize;
        for k in 0..n {
            out.push((
                self.slot.pcs[k].load(Ordering::Relaxed),
                self.slot.fps[k].load(Ordering::Relaxed),
            ));
        }
        let s = &self.slot;
        copied.events.clear();
        let m = s.events_n.load(Ordering::Relaxed) as usize;
        copied
            .events
            .extend(s.events[..m].iter().map(|e| e.load(Ordering::Relaxed)));
        copied.events_head = s.events_head.load(Ordering::Relaxed);
        copied.words.clear();
        let m = s.words_n.load(Ordering::Relaxed) as usize;
        copied
            .words
            .extend(s.words[..m].iter().map(|w| w.load(Ordering::Relaxed)));
        copied.words_head = s.words_head.load(Ordering::Relaxed);
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
mod tests {
    use super::*;

    fn map() -> CodeMap {
        CodeMap {
            text: 1000,
            text_len: 300,
            functions: vec![(0, 100, 5), (100, 200, 6)].into(),
            address_map: vec![(0, 10), (150, 20), (170, 30)].into(),
            sites: std::sync::Arc::new([(20, 3)].into_iter().collect()),
        }
    }

    #[test]
    fn frames_map_to_functions_and_call_sites() {
        // Leaf in function 5 (text offset 40), called from function 6 whose return address
        // (text offset 160) follows the call at module offset 20 (site 3); below it, host
        // code (outside the text) ends the stack.
        let raw = [(1040, 0x7000), (1160, 0x7100), (9000, 0x7200)];
        let mut out = Vec::new();
        assert!(wasm_frames(&raw, &map(), &mut out));
        assert_eq!(
            out,
            vec![(6, 3, (0x7100, 9000)), (5, u32::MAX, (0x7000, 1160))]
        );
        // The previous sample had the same outer frame: it is old, the leaf new.
        let again = NativeStack::new(&out, &out[..1], raw.len());
        assert!(again.marked(0) && !again.marked(1));
    }

    #[test]
    fn a_leaf_outside_the_module_is_a_host_sample() {
        let mut out = Vec::new();
        assert!(!wasm_frames(
            &[(50, 0x7000), (1160, 0x7100)],
            &map(),
            &mut out
        ));
        assert!(!wasm_frames(&[], &map(), &mut out));
        // Past the last function: not code of this module.
        assert_eq!(map().function(1000 + 299), Some(6));
        assert_eq!(map().function(1000 + 300), None);
    }
}
