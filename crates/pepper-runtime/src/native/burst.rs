//! PEP's switched bursts when the sampler thread is away: a one-shot timer aimed at the
//! guest thread, whose signal handler takes a burst over if the sampler thread has not
//! measured it in time, measures the guest's path-end rate against the guest's own CPU
//! clock, and clears the switch's flag.
//!
//! On an idle machine the sampler thread runs each burst itself: it sets the flag,
//! watches the ring head from its own core and clears the flag, all without interrupting
//! the guest. On a busy machine it waits for a core between any two of those steps, and
//! the guest ran its slower instrumented copies for as long as the sampler was away
//! (most of a run, in the worst runs), while the bursts themselves were lost (the
//! burst's limit, a count of path ends, ended them first in the fastest code, so the
//! profile lost that code most). The handler's takeover ends every burst within a stretch
//! of time, whatever code runs, and measures it there; each measurement is a signal,
//! which costs the guest microseconds, so it is the fallback, not the rule.
//!
//! A burst:
//! 1. the sampler thread moves the burst's limit past the ring head (the instrumented
//!    copies leave by themselves there), sets the flag and arms the timer [`TAKEOVER`]
//!    ahead ([`NativeSampler::begin_burst`]);
//! 2. if it has measured the rate by then, it says so ([`NativeSampler::claim_burst`])
//!    and the timer only clears the flag if the sampler has not by the time it fires;
//! 3. otherwise the handler takes the burst over: once the guest has written [`WARM_UP`]
//!    path ends in its instrumented copies (the first ones come from wherever the checks
//!    are), the head and the guest's CPU time start the rate measurement, and the timer
//!    is armed [`RATE_STEP`] ahead (until then it looks again every [`LOOK_STEP`], for up
//!    to [`ENTER_WAIT`] of the guest's CPU time; the limit is moved so that the measured
//!    stretch never laps itself); then the head and CPU time end it, and the flag is
//!    cleared. A guest that reached the limit and left by itself first has no rate: the
//!    sampler's next burst stands for its time. The sampler thread reads the
//!    measurements when it is back ([`NativeSampler::take_burst`]), and the burst's
//!    words from the ring: clean code writes none, and it begins the next burst only
//!    once it has read this one.
//!
//! [`NativeSampler::begin_burst`]: super::NativeSampler::begin_burst
//! [`NativeSampler::claim_burst`]: super::NativeSampler::claim_burst
//! [`NativeSampler::take_burst`]: super::NativeSampler::take_burst

use super::Slot;
use crate::memview::MemView;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How long after the flag is set the guest's handler takes a burst over that the sampler
/// thread has not measured: well past a burst's length on an idle machine (the timer's
/// signal, armed from the sampler's core, comes tens of microseconds late on a VM).
pub(crate) const TAKEOVER: Duration = Duration::from_micros(200);
/// How often the handler looks for the guest warmed up in its instrumented copies.
pub(crate) const LOOK_STEP: Duration = Duration::from_micros(12);
/// How long the handler measures the rate, from the look that found the guest warmed up.
/// Long against a signal's aftermath: on a VM each timer signal is an exit to the host,
/// after which the guest runs slowly for a stretch, and a window of a few times that
/// length measured a fraction of the guest's rate.
pub(crate) const RATE_STEP: Duration = Duration::from_micros(60);
/// Path ends the guest writes in its instrumented copies before the rate is measured.
pub(crate) const WARM_UP: u32 = 256;
/// The most guest CPU time a burst waits for the guest to warm up.
pub(crate) const ENTER_WAIT: Duration = Duration::from_micros(200);

const IDLE: u32 = 0;
/// Begun by the sampler thread, which has not measured it yet.
const SAMPLER: u32 = 1;
/// Measured by the sampler thread, which ends it.
const ENDING: u32 = 2;
/// Taken over by the handler.
const GUEST: u32 = 3;
/// Taken over and ended by the handler: its measurements wait for the sampler thread.
const DONE: u32 = 4;

/// What the handler measured for one burst (head values are the ring's u32 counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BurstTimes {
    /// The head and the guest's CPU time when the flag was set.
    pub set: (u32, Duration),
    /// Where the rate measurement started (the guest was in its instrumented copies);
    /// `None` if it never got there within [`ENTER_WAIT`], or had left them already.
    pub measured_from: Option<(u32, Duration)>,
    /// The head and CPU time when the handler ended the burst.
    pub ended: (u32, Duration),
    /// The guest had reached the burst's limit and left its instrumented copies by itself
    /// before the handler ended the burst: no rate is known.
    pub left: bool,
}

/// The burst's part of the handler's slot.
pub(super) struct BurstSlot {
    state: AtomicU32,
    /// Pepper's memory and the words in it: the ring head, the flag, the limit; the
    /// limit is set this many path ends past the head.
    mem: AtomicUsize,
    mem_len: AtomicUsize,
    head: AtomicU32,
    flag: AtomicU32,
    limit: AtomicU32,
    lease: AtomicU32,
    /// The one-shot timer aimed at the guest thread (its `timer_t` plus one: the kernel's
    /// first timer id is 0), 0 without one.
    timer: AtomicUsize,
    /// When the timer's next expiry is due (CLOCK_MONOTONIC, ns): an earlier SIGPROF is
    /// someone else's as far as the burst goes.
    due_ns: AtomicU64,
    /// The burst's measurements: (head, CPU ns) at set, at the rate's start (head
    /// `u64::MAX`: not yet), at the end.
    set: (AtomicU64, AtomicU64),
    from: (AtomicU64, AtomicU64),
    ended: (AtomicU64, AtomicU64),
    /// The guest had left its instrumented copies by itself when the burst ended.
    left: std::sync::atomic::AtomicBool,
    /// The guest thread's kernel id: a SIGPROF on another thread (a process-wide one of
    /// another profiler's) is not the burst's.
    tid: std::sync::atomic::AtomicI32,
    /// When the flag was set (CLOCK_MONOTONIC, ns), and the looks for the guest in its
    /// instrumented copies so far.
    set_wall_ns: AtomicU64,
    looks: AtomicU32,
}

impl BurstSlot {
    pub(super) fn new() -> BurstSlot {
        let pair = || (AtomicU64::new(0), AtomicU64::new(0));
        BurstSlot {
            state: AtomicU32::new(IDLE),
            mem: AtomicUsize::new(0),
            mem_len: AtomicUsize::new(0),
            head: AtomicU32::new(0),
            flag: AtomicU32::new(0),
            limit: AtomicU32::new(0),
            lease: AtomicU32::new(0),
            timer: AtomicUsize::new(0),
            due_ns: AtomicU64::new(0),
            set: pair(),
            from: pair(),
            ended: pair(),
            set_wall_ns: AtomicU64::new(0),
            left: std::sync::atomic::AtomicBool::new(false),
            tid: std::sync::atomic::AtomicI32::new(0),
            looks: AtomicU32::new(0),
        }
    }

    /// Where the burst's words are; `head`, `flag` and `limit` are byte addresses in
    /// `mem`, checked here once so that the handler's accesses cannot fail.
    pub(super) fn set_words(&self, mem: MemView, (head, flag, limit): (u32, u32, u32), lease: u32) {
        for at in [head, flag, limit] {
            assert!(at as usize + 4 <= mem.len && at.is_multiple_of(4));
        }
        self.head.store(head, Ordering::Relaxed);
        self.flag.store(flag, Ordering::Relaxed);
        self.limit.store(limit, Ordering::Relaxed);
        self.lease.store(lease.max(1), Ordering::Relaxed);
        self.mem_len.store(mem.len, Ordering::Relaxed);
        self.mem.store(mem.ptr, Ordering::Release);
    }

    /// The guest thread's kernel id.
    pub(super) fn set_thread(&self, tid: libc::pid_t) {
        self.tid.store(tid, Ordering::Relaxed);
    }

    pub(super) fn set_timer(&self, timer: libc::timer_t) {
        self.timer.store(timer as usize + 1, Ordering::Release);
    }

    pub(super) fn timer(&self) -> Option<libc::timer_t> {
        match self.timer.load(Ordering::Acquire) {
            0 => None,
            t => Some((t - 1) as libc::timer_t),
        }
    }

    fn view(&self) -> Option<MemView> {
        match self.mem.load(Ordering::Acquire) {
            0 => None,
            ptr => Some(MemView {
                ptr,
                len: self.mem_len.load(Ordering::Relaxed),
            }),
        }
    }

    /// Begins a burst (the ring head `h0` and the guest's CPU time `c0` when the flag was
    /// set) and arms the takeover. False while one is under way.
    pub(super) fn begin(&self, (h0, c0): (u32, Duration)) -> bool {
        let Some(timer) = self.timer().filter(|_| self.view().is_some()) else {
            return false;
        };
        if self.state.load(Ordering::Acquire) != IDLE {
            return false;
        }
        self.set.0.store(h0 as u64, Ordering::Relaxed);
        self.set.1.store(c0.as_nanos() as u64, Ordering::Relaxed);
        self.from.0.store(u64::MAX, Ordering::Relaxed);
        self.looks.store(0, Ordering::Relaxed);
        self.left.store(false, Ordering::Relaxed);
        let now = clock_ns(libc::CLOCK_MONOTONIC);
        self.set_wall_ns.store(now, Ordering::Relaxed);
        // When it is due comes first: a stale signal of the last burst's timer must not
        // find this one begun with the last one's due time.
        self.due_ns
            .store(now + TAKEOVER.as_nanos() as u64, Ordering::Relaxed);
        self.state.store(SAMPLER, Ordering::Release);
        settime(timer, TAKEOVER);
        true
    }

    /// The sampler thread has measured the burst: true if the handler had not taken it
    /// over (the timer then only ends it if the sampler does not first).
    pub(super) fn claim(&self) -> bool {
        self.state
            .compare_exchange(SAMPLER, ENDING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The sampler thread ends a burst it claimed: the timer is disarmed.
    pub(super) fn finish(&self) {
        if self
            .state
            .compare_exchange(ENDING, IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            if let Some(timer) = self.timer() {
                settime(timer, Duration::ZERO);
            }
        }
    }

    /// Whether no burst is asked for or running.
    pub(super) fn idle(&self) -> bool {
        self.state.load(Ordering::Acquire) == IDLE
    }

    /// The finished burst's measurements, leaving the slot free for the next one.
    pub(super) fn take(&self) -> Option<BurstTimes> {
        if self.state.load(Ordering::Acquire) != DONE {
            return None;
        }
        let pair = |p: &(AtomicU64, AtomicU64)| {
            (
                p.0.load(Ordering::Relaxed) as u32,
                Duration::from_nanos(p.1.load(Ordering::Relaxed)),
            )
        };
        let measured = self.from.0.load(Ordering::Relaxed) != u64::MAX;
        let left = self.left.load(Ordering::Relaxed);
        let times = BurstTimes {
            set: pair(&self.set),
            measured_from: (measured && !left).then(|| pair(&self.from)),
            left,
            ended: pair(&self.ended),
        };
        self.state.store(IDLE, Ordering::Release);
        Some(times)
    }
}

/// The calling thread's CPU time, and CLOCK_MONOTONIC, in ns (both async-signal-safe).
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: fills one timespec of ours.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Arms the one-shot timer `step` from now, remembering when it is due.
fn arm(b: &BurstSlot, timer: libc::timer_t, step: Duration) {
    let due = clock_ns(libc::CLOCK_MONOTONIC) + step.as_nanos() as u64;
    b.due_ns.store(due, Ordering::Relaxed);
    settime(timer, step);
}

/// Sets the one-shot `timer` to expire `after` from now (zero: disarms it).
fn settime(timer: libc::timer_t, after: Duration) {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: timer_settime is async-signal-safe; the timer lives as long as the slot.
    unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) };
}

/// The handler's part for bursts: when the timer is due, ends a burst the sampler thread
/// measured, or takes over and moves on one it has not. Returns whether the signal was the
/// burst's.
pub(super) fn step(slot: &Slot) -> bool {
    let b = &slot.burst;
    let (Some(mem), Some(timer)) = (b.view(), b.timer()) else {
        return false;
    };
    let state = b.state.load(Ordering::Acquire);
    if !matches!(state, SAMPLER | ENDING | GUEST) {
        return false;
    }
    // SAFETY: gettid is a plain system call about the calling thread.
    if unsafe { libc::gettid() } != b.tid.load(Ordering::Relaxed) {
        return false;
    }
    let wall = clock_ns(libc::CLOCK_MONOTONIC);
    if wall < b.due_ns.load(Ordering::Relaxed) {
        return false;
    }
    let head_at = b.head.load(Ordering::Relaxed);
    let lease = b.lease.load(Ordering::Relaxed);
    let limit_at = b.limit.load(Ordering::Relaxed);
    let flag_at = b.flag.load(Ordering::Relaxed);
    match state {
        ENDING => {
            // The sampler measured the burst but has not ended it: the guest leaves its
            // instrumented copies now (the sampler's own clear then changes nothing).
            mem.cas_u32(flag_at, 1, 0);
            return true;
        }
        // Taken over, unless the sampler claimed it meanwhile (the signal was still
        // the burst's).
        SAMPLER
            if b.state
                .compare_exchange(SAMPLER, GUEST, Ordering::AcqRel, Ordering::Acquire)
                .is_err() =>
        {
            return true;
        }
        _ => {}
    }
    let h = mem.u32_at(head_at);
    let cpu = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let (h0, c0) = (
        b.set.0.load(Ordering::Relaxed) as u32,
        b.set.1.load(Ordering::Relaxed),
    );
    let measuring = b.from.0.load(Ordering::Relaxed) != u64::MAX;
    // Not warmed up in the instrumented copies yet: look again (less and less often
    // while the head does not move at all: a guest asleep in a host call is not woken
    // thousands of times), for up to ENTER_WAIT of its time, or a multiple of that in
    // wall time while it does not run.
    let waited = (
        cpu.saturating_sub(c0),
        wall.saturating_sub(b.set_wall_ns.load(Ordering::Relaxed)),
    );
    let patience = ENTER_WAIT.as_nanos() as u64;
    let warm = h.wrapping_sub(h0) >= WARM_UP;
    if !measuring && !warm && waited.0 < patience && waited.1 < patience * 25 {
        let looks = match h == h0 {
            true => b.looks.fetch_add(1, Ordering::Relaxed).min(6),
            false => 0,
        };
        arm(b, timer, LOOK_STEP * (1 << looks));
        return true;
    }
    if !measuring && h != h0 && mem.u32_at(flag_at) != 0 {
        mem.set_u32(limit_at, h.wrapping_add(lease).max(1));
        b.from.0.store(h as u64, Ordering::Relaxed);
        arm(b, timer, RATE_STEP);
        // The measurement starts once this handler is done with the clock and timer.
        b.from
            .1
            .store(clock_ns(libc::CLOCK_THREAD_CPUTIME_ID), Ordering::Relaxed);
        return true;
    }
    // A flag already clear: the guest reached the limit and left by itself, at a time
    // this handler does not know.
    let left = !mem.cas_u32(flag_at, 1, 0);
    b.left.store(left, Ordering::Relaxed);
    b.ended.0.store(h as u64, Ordering::Relaxed);
    b.ended.1.store(cpu, Ordering::Relaxed);
    b.state.store(DONE, Ordering::Release);
    true
}
