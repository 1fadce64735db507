//! PEP's bursts: at each tick, consecutive path ends drawn through the Arnold-Grove state
//! machine from the guest's ring, weighted by the guest's path-end rate at that moment.

use super::{MemView, SamplerConfig, SamplerResult};
use crate::flag::Flag;
use crate::native::{BurstTimes, NativeSampler};
use crate::pick::Pick;
use crate::worker::ThreadCpuClock;
use pepper_layout::Ring;

mod rings;
mod watch;
use pepper_sampling::{ArnoldGrove, Decision, SampleTable};
use rings::{heads, RingState};
use std::sync::Arc;
use std::time::{Duration, Instant};
use watch::*;

/// This tick's stack sample, taken during the switch's burst.
pub(super) trait BurstStack {
    /// Sends the sample's signal; its path window reads from ring head `set_at` on (the
    /// burst's first path end). False if it could not be sent.
    fn request(&mut self, set_at: u32) -> bool;
    /// Waits for the sample asked for to be copied; says when its signal handler started,
    /// if it ran.
    fn collect(&mut self) -> Option<Instant>;
}

/// PEP's half of the sampler: at each tick, a burst of consecutive path ends drawn through
/// the Arnold-Grove state machine, weighted, into the sample table.
pub(super) struct Bursts {
    ag: ArnoldGrove,
    table: SampleTable,
    /// Sampled words are copied here first and kept only if the guest cannot have
    /// overwritten them during the copy.
    buf: Vec<(u64, u64)>,
    /// The ring's length, and the margin kept so that words being written while the
    /// sampler copies are never read.
    n: u64,
    margin: u64,
    head32: u32,
    head: u64,
    /// Path ends before `seen` have been offered to the state machine.
    seen: u64,
    /// Path ends not yet represented by any sample (carried over passes that took none).
    unrepresented: u64,
    /// When the last weighted burst was taken, and the weight given out so far (rate
    /// weights are rescaled at the end so that they add up to the path ends counted).
    last_burst: Instant,
    total_weight: f64,
    pick: Pick,
    /// The last tick's sampled path ends `(seq, word)` and the weight of each (a time
    /// line from bursts counts them).
    taken: (Vec<(u64, u64)>, f64),
    /// The rate watch's reads of the head, `(head, when)`.
    reads: Vec<(u32, Instant)>,
    /// Switch: the flag this thread sets for each burst.
    flag: Option<Flag>,
    /// The guest thread's CPU clock, and its reading when the last weighted burst was
    /// taken: a burst stands for the guest's CPU time since the last one, not the wall
    /// time, which on a busy machine includes stretches the guest waited for a core.
    clock: Option<ThreadCpuClock>,
    last_burst_cpu: Option<Duration>,
    /// Switch: the guest thread's handler, which takes over a burst this thread has not
    /// measured in time (see `crate::native::burst`).
    signals: Option<Arc<NativeSampler>>,
    /// Inside a component with other instrumented modules: every module's ring, the
    /// primary's first (see [`Bursts::draw_rings`]); empty otherwise. The head the
    /// bursts watch is then the sum of every ring's.
    rings: Vec<RingState>,
}

impl Bursts {
    /// `modules`: the memories of `cfg.modules`, in that order.
    pub(super) fn new(
        (mem, modules): (MemView, Vec<Option<MemView>>),
        cfg: &SamplerConfig,
        flag: Option<Flag>,
        clock: Option<ThreadCpuClock>,
        signals: Option<Arc<NativeSampler>>,
    ) -> Bursts {
        let n = cfg.entries as u64;
        let state = |mem: MemView, ring: Ring, flag, module| {
            let n = ring.entries as u64;
            RingState {
                mem,
                ring,
                flag,
                n,
                margin: (n / 4).max(8),
                table: SampleTable::with_capacity(cfg.table_capacity),
                from: mem.u32_at(ring.head),
                module,
            }
        };
        let mut rings = Vec::new();
        if cfg.entries > 0 && flag.is_some() && modules.iter().any(Option::is_some) {
            let primary = Ring {
                head: cfg.head,
                base: cfg.base,
                entries: cfg.entries,
            };
            rings.push(state(mem, primary, None, None));
            for (k, (m, view)) in cfg.modules.iter().zip(modules).enumerate() {
                let Some(view) = view else { continue };
                // A flag outside its memory: that module's ring is not read.
                match m.switch.map(|w| (Flag::new(w.flag, Some(view)), w.limit)) {
                    Some((Ok(f), limit)) => {
                        rings.push(state(view, m.ring, Some((f, limit)), Some(k)))
                    }
                    Some((Err(_), _)) => {}
                    None => rings.push(state(view, m.ring, None, Some(k))),
                }
            }
        }
        let head32 = if cfg.entries > 0 {
            heads(mem, cfg, &rings)
        } else {
            0
        };
        Bursts {
            ag: ArnoldGrove::new(cfg.params),
            table: SampleTable::with_capacity(cfg.table_capacity),
            buf: Vec::with_capacity((cfg.params.samples + cfg.params.stride) as usize + 1),
            n,
            margin: (n / 4).max(8),
            head32,
            head: head32 as u64,
            seen: head32 as u64,
            unrepresented: 0,
            last_burst: Instant::now(),
            total_weight: 0.0,
            pick: Pick(Pick::SEED),
            taken: (Vec::new(), 0.0),
            reads: Vec::new(),
            signals: signals.filter(|_| flag.is_some()),
            flag,
            clock,
            last_burst_cpu: clock.and_then(ThreadCpuClock::now),
            rings,
        }
    }

    /// The head the bursts watch: the ring's, or the sum of every ring's.
    fn head_now(&self, mem: MemView, cfg: &SamplerConfig) -> u32 {
        heads(mem, cfg, &self.rings)
    }

    /// Switch: sets or clears the flag of every module but the primary's (which is
    /// [`Bursts::flag`]): a burst runs every module's instrumented copies together, as the
    /// guest moves between modules.
    fn set_others(&self, on: bool) {
        for (flag, _) in self.rings.iter().filter_map(|r| r.flag.as_ref()) {
            flag.set(on);
        }
    }

    /// Whether every module's flag is still set: a module whose copies reached their
    /// limit has ended the burst.
    fn all_set(&self, primary: Flag) -> bool {
        primary.is_set()
            && (self.rings.iter())
                .filter_map(|r| r.flag.as_ref())
                .all(|(f, _)| f.is_set())
    }

    /// The guest thread's CPU time now, where it can be read.
    fn cpu(&self) -> Option<Duration> {
        self.clock.and_then(ThreadCpuClock::now)
    }

    /// One tick's burst (`last`: the pass after the guest finished). With the switch,
    /// `stack` (this tick's stack sample, if one is due) runs while the instrumented
    /// copies do, given the ring head as it was when the flag was set.
    pub(super) fn tick(
        &mut self,
        mem: MemView,
        cfg: &SamplerConfig,
        last: bool,
        res: &mut SamplerResult,
        mut stack: Option<&mut dyn BurstStack>,
    ) {
        let signals = self.signals.clone().filter(|_| !last);
        if let Some(s) = signals.as_deref().filter(|s| !s.burst_idle()) {
            // A burst the handler took over and the last tick gave up waiting for.
            res.ticks += 1;
            match wait_for_burst(s) {
                Some(times) => self.take_guest_burst(mem, cfg, res, times),
                None => res.off_cpu_ticks += 1,
            }
            return;
        }
        // Switch: the guest runs instrumented code from its next check on; the first
        // path ends after that come from wherever the checks are, so the burst is drawn
        // only after a warm-up.
        // Whether the guest's handler may take this burst over.
        let mut begun = false;
        let switched = self.flag.filter(|_| !last).map(|flag| {
            self.renew(mem, cfg);
            flag.set(true);
            self.set_others(true);
            let from = (self.head_now(mem, cfg), Instant::now());
            begun = match (&signals, self.cpu()) {
                (Some(s), Some(cpu)) => s.begin_burst((from.0, cpu)),
                _ => false,
            };
            watch(
                &|| self.head_now(mem, cfg),
                from,
                SWITCH_WARM_UP,
                (SWITCH_WAIT, self.guest()),
                Pace::Nap(SWITCH_NAP),
                None,
            );
            self.renew(mem, cfg);
            (flag, from.0)
        });
        let switch_from = Instant::now();
        let cpu0 = self.cpu();
        let t0 = Instant::now();
        let mut h = self.head_now(mem, cfg);
        for r in &mut self.rings {
            r.from = r.mem.u32_at(r.ring.head);
        }
        let mut rate = None;
        // The guest hardly ran while its rate was watched (it waited for a core, or
        // slept in a host call): its rate is unknown, not zero.
        let mut off_cpu = false;
        // The path ends completed while the rate was watched: [watched_from, head).
        let mut watched_from = None;
        if !last && !self.ag.armed() {
            watched_from = Some(self.head + h.wrapping_sub(self.head32) as u64);
            let span = (cfg.params.samples + cfg.params.stride) as u64;
            // The stack sample's round trip (a signal: tens of microseconds on a VM)
            // overlaps the watch: the guest completes the burst's path ends while the
            // signal is on its way, where it used to run on in its instrumented copies
            // until a sample taken after the burst (zstd: the flag set 61 us per tick,
            // now 24). The sample's path window reads the burst's path ends up to there.
            let signalled = match (switched, stack.as_deref_mut()) {
                (Some((_, set_at)), Some(st)) => st.request(set_at),
                _ => false,
            };
            let mut reads = std::mem::take(&mut self.reads);
            reads.clear();
            let pace = match switched {
                Some(_) => Pace::Nap(SWITCH_NAP),
                None => Pace::Spin,
            };
            let (h1, t1, ran) = watch_rate(
                &|| self.head_now(mem, cfg),
                (h, t0),
                span,
                self.clock.zip(cpu0),
                pace,
                &mut reads,
            );
            let handler = stack.take_if(|_| signalled).and_then(|st| st.collect());
            // The signal stopped the guest well before its handler ran (on this VM the
            // head stood still for 10-20 us where the handler took 3-6): the rate is the
            // guest's up to the last read before the handler that found the head moving
            // (the whole watch if none did, as for a guest that completed nothing).
            let moving = handler.and_then(|started| {
                let mut last = None;
                let mut previous = h;
                for &(hr, tr) in reads.iter().take_while(|r| r.1 < started) {
                    if hr != previous {
                        (last, previous) = (Some((hr, tr)), hr);
                    }
                }
                last
            });
            let (h_rate, t_rate) = moving.unwrap_or((h1, t1));
            let (ends, mut time) = (h_rate.wrapping_sub(h), t_rate - t0);
            self.reads = reads;
            match ran {
                // A stack sample's signal stops the guest for most of the watch even on
                // an idle machine (its delivery is not the guest's CPU time): a guest
                // that ran at all before the handler did was on its CPU.
                Some(ran) if signalled => {
                    off_cpu = moving.is_none() && ends == 0 && ran < GUEST_RAN;
                }
                Some(ran) => {
                    let watched = t1 - t0;
                    if ran < GUEST_RAN.min(watched / 4) {
                        off_cpu = true;
                    } else if ran < watched * 3 / 4 {
                        // Descheduled for part of the watch: its path ends over the
                        // time it ran.
                        time = ran;
                    }
                }
                None => {}
            }
            (h, rate) = (h1, Some(per_second(ends, time)));
        }
        if let Some(s) = signals.as_deref().filter(|_| begun) {
            if !s.claim_burst() {
                // This thread was away too long: the guest's handler took the burst over
                // and measured it (or is measuring it) on the guest's own clock.
                res.ticks += 1;
                match wait_for_burst(s) {
                    Some(times) => self.take_guest_burst(mem, cfg, res, times),
                    None => res.off_cpu_ticks += 1,
                }
                return;
            }
        }
        if switched.is_some() {
            self.renew(mem, cfg);
        }
        let delta = h.wrapping_sub(self.head32) as u64;
        self.head += delta;
        self.head32 = h;
        self.unrepresented += delta;
        res.ticks += 1;
        self.taken.0.clear();
        if let Some((flag, set_at)) = switched.filter(|&(flag, _)| !self.all_set(flag)) {
            // The guest reached the burst's limit and ended it before the rate was
            // measured (this thread was descheduled meanwhile): the rate describes clean
            // code, which writes nothing. No burst this tick; the next one stands for
            // this tick's time too (weights are rate × time since the last burst).
            self.seen = self.head;
            self.end_switched(mem, cfg, (flag, set_at), switch_from, stack, res);
            return;
        }
        let mut begin = self.seen;
        if self.ag.on_tick() {
            let mut start = self.head.saturating_sub(self.ag.pending());
            // The burst starts at a path end drawn uniformly from those completed while
            // the rate was watched, so that its paths are a sample of the same stretch
            // the rate measures (see `watch_rate`), not of its last few hundred
            // nanoseconds.
            if let Some(from) = watched_from.filter(|&f| f < start) {
                start = from + self.pick.below(start - from + 1);
            }
            begin = begin.max(start);
        }
        if switched.is_some() {
            // Until the burst's path ends are written (or the guest is too slow to).
            let from = (self.head32, Instant::now());
            let left = (begin + self.ag.pending()).saturating_sub(self.head);
            let pace = Pace::Nap(SWITCH_NAP);
            let (h, ..) = watch(
                &|| self.head_now(mem, cfg),
                from,
                left,
                (SWITCH_WAIT, self.guest()),
                pace,
                None,
            );
            let delta = h.wrapping_sub(self.head32) as u64;
            self.head += delta;
            self.head32 = h;
            self.unrepresented += delta;
        }
        // A run whose every tick found the guest completing nothing (in host calls, or
        // descheduled by its own sampler when two runs share two cores) still gets the
        // exit burst, from the newest paths in the ring, standing for all its path ends:
        // a coarse profile rather than none.
        if !self.rings.is_empty() {
            // Several modules' rings (with the switch): the burst is the path ends of the
            // stretch since the rate watch began, in every ring (no exit burst: clean code
            // wrote none).
            let to: Vec<u32> = (self.rings.iter())
                .map(|r| r.mem.u32_at(r.ring.head))
                .collect();
            if let Some((flag, set_at)) = switched {
                self.end_switched(mem, cfg, (flag, set_at), switch_from, stack, res);
            }
            if !last {
                let stride = cfg.params.stride.max(1) as u64;
                self.draw_rings(res, (&to, stride), rate, off_cpu, (cpu0, t0));
            }
            self.seen = self.head;
            return;
        }
        let starved = last && self.total_weight == 0.0;
        if starved {
            begin = self.head.saturating_sub(self.ag.pending());
            self.unrepresented = self.head;
        }
        if let Some((flag, set_at)) = switched {
            // The burst's path ends are written: the guest goes back to clean code now,
            // before this thread reads them. Reading a thousand words the guest's core
            // just wrote takes that long again, and the guest used to spend it in its
            // instrumented copies (zstd: 2,230 of their path ends per tick for a burst
            // of 1,089 and a warm-up of 256). Clean code writes no path ends, so the
            // ring holds still while they are read (but for frames further up the
            // stack finishing their iterations: the check below drops overwritten words).
            self.end_switched(mem, cfg, (flag, set_at), switch_from, stack, res);
        }
        self.draw(mem, cfg, res, begin, rate, off_cpu, (cpu0, t0));
    }

    /// Takes the burst that starts at path end `begin` into the table, weighted by
    /// `rate` (path ends per second of the guest's time at `at`, its CPU clock and the
    /// wall clock then) over the guest's time since the last burst; `off_cpu`: the guest
    /// was not running while its rate was watched, and the burst is not taken.
    #[allow(clippy::too_many_arguments)]
    fn draw(
        &mut self,
        mem: MemView,
        cfg: &SamplerConfig,
        res: &mut SamplerResult,
        mut begin: u64,
        rate: Option<f64>,
        off_cpu: bool,
        (cpu0, t0): (Option<Duration>, Instant),
    ) {
        if self.head.saturating_sub(begin) > self.n - self.margin {
            let skip_to = self.head - (self.n - self.margin);
            if self.ag.armed() {
                // Samples the burst would have taken from the overwritten stretch.
                res.lost += (skip_to - begin).min(self.ag.pending());
            }
            begin = skip_to;
        }
        self.buf.clear();
        let mut seq = begin;
        while seq < self.head && self.ag.armed() {
            if self.ag.on_path_end() == Decision::Sample {
                let word = mem.u64_at(cfg.base + 8 * (seq % self.n) as u32);
                self.buf.push((seq, word));
            }
            seq += 1;
        }
        self.seen = self.head;
        // Re-read the head: a word older than (new head - n) may have been overwritten.
        let h2 = mem.u32_at(cfg.head);
        let head_now = self.head + h2.wrapping_sub(self.head32) as u64;
        let fresh = |s: u64| s + self.n > head_now;
        let overwritten = self.buf.iter().filter(|&&(s, _)| !fresh(s)).count();
        // Switch: a frame that enters its instrumented copy at a loop writes an empty word
        // at the loop's header (the path so far is nobody's). That is no path end of the
        // program: neither a sample nor a loss, and the burst stands for that many fewer
        // path ends (in loop-heavy code a visible share of a burst's words).
        let marks = self
            .buf
            .iter()
            .filter(|&&(s, word)| fresh(s) && word == 0)
            .count();
        let valid = self.buf.len() - overwritten - marks;
        res.lost += overwritten as u64;
        let Some(weight) = self.weigh(res, rate, off_cpu, (cpu0, t0), (valid, marks)) else {
            return;
        };
        for &(s, word) in &self.buf {
            if s + self.n > head_now && word != 0 {
                self.taken.0.push((s, word));
                if self.table.add(word, weight) {
                    res.taken += 1;
                } else {
                    res.lost += 1;
                }
            }
        }
    }

    /// What each of a burst's `valid` path ends stands for (`marks`: its loop-entry
    /// marks, which are no path ends), `None` when the burst is not taken: the guest was
    /// off its CPU while its rate was watched, or completed no path then.
    fn weigh(
        &mut self,
        res: &mut SamplerResult,
        rate: Option<f64>,
        off_cpu: bool,
        (cpu0, t0): (Option<Duration>, Instant),
        (valid, marks): (usize, usize),
    ) -> Option<f64> {
        if off_cpu {
            // No burst: the next one stands for this stretch of the guest's work too.
            res.off_cpu_ticks += 1;
            None
        } else if rate.is_some_and(|per_sec| per_sec <= 0.0) {
            // The guest completed no path while watched (in a host call, or not running):
            // its path-end rate at this moment is zero, so this tick's burst, which holds
            // the paths before it stopped, stands for nothing. Weighting it by the path
            // ends since the last burst instead (tick weights) overcounted the code that
            // runs just before host calls: bzip2's input loop got twice its flow.
            res.idle_ticks += 1;
            self.last_burst = t0;
            self.last_burst_cpu = cpu0;
            self.unrepresented = 0;
            None
        } else if valid > 0 {
            // The path ends this burst stands for: at the rate the guest completed them
            // at this moment, over the time since the last burst; or (no rate measured: a
            // burst left over from the previous tick) the path ends since the last burst.
            // The time since the last burst is the guest's CPU time where its clock can
            // be read: wall time also counts stretches it waited for a core.
            let since = match (cpu0, self.last_burst_cpu) {
                (Some(now), Some(then)) => now.saturating_sub(then),
                _ => t0 - self.last_burst,
            };
            let represented = match rate {
                Some(per_sec) => per_sec * since.as_secs_f64(),
                None => self.unrepresented as f64,
            } * valid as f64
                / (valid + marks) as f64;
            let weight = represented / valid as f64;
            self.last_burst = t0;
            self.last_burst_cpu = cpu0;
            self.total_weight += represented;
            self.unrepresented = 0;
            self.taken.1 = weight;
            Some(weight)
        } else {
            None
        }
    }

    /// A burst the guest thread's handler took over and measured (see
    /// `crate::native::burst`): the samples are drawn from the path ends completed while
    /// it measured the guest's rate, weighted by that rate over the guest's CPU time since
    /// the last burst.
    fn take_guest_burst(
        &mut self,
        mem: MemView,
        cfg: &SamplerConfig,
        res: &mut SamplerResult,
        times: BurstTimes,
    ) {
        res.guest_bursts += 1;
        res.switched_on += times.ended.1.saturating_sub(times.set.1);
        let h = mem.u32_at(cfg.head);
        let delta = h.wrapping_sub(self.head32) as u64;
        self.head += delta;
        self.head32 = h;
        self.unrepresented += delta;
        self.taken.0.clear();
        let now = Instant::now();
        // The unwrapped sequence number of ring head `x`, read no later than `h`.
        let seq = |x: u32| self.head.saturating_sub(h.wrapping_sub(x) as u64);
        if times.left {
            // The guest reached the burst's limit and left its instrumented copies before
            // the handler measured it: no burst this tick, and the next one stands for
            // this tick's time too, as when this thread finds the same.
            self.seen = self.head;
            return;
        }
        let Some((h1, c1)) = times.measured_from else {
            // The guest did not warm up in its instrumented copies while the handler
            // waited (a host call, or code far from any check): its rate at this moment
            // is unknown, and taken as zero.
            res.idle_ticks += 1;
            self.last_burst = now;
            self.last_burst_cpu = Some(times.set.1);
            self.unrepresented = 0;
            self.seen = self.head;
            return;
        };
        let (h2, c2) = times.ended;
        let rate = per_second(h2.wrapping_sub(h1), c2.saturating_sub(c1));
        let (from, to) = (seq(h1), seq(h2));
        let mut begin = self.seen;
        if self.ag.on_tick() {
            let mut start = to.saturating_sub(self.ag.pending());
            if from < start {
                start = from + self.pick.below(start - from + 1);
            }
            begin = begin.max(start);
        }
        self.draw(mem, cfg, res, begin, Some(rate), false, (Some(c1), now));
    }

    /// The guest's CPU clock and its reading now, for [`watch`].
    fn guest(&self) -> Option<(ThreadCpuClock, Duration)> {
        self.clock.zip(self.cpu())
    }

    /// Switch: moves the burst's limit (`pepper_layout::SWITCH_LIMIT_OFFSET`) to
    /// [`BURST_LEASE`] path ends past the guest's head. The limit is a lease this thread
    /// renews at every step of a burst: the instrumented copies leave on their own once
    /// the guest has written that many path ends since the last renewal, so a sampler
    /// descheduled in the middle of a burst (a busy machine) leaves the guest in its
    /// slower copies for a few microseconds, not until it runs again. With the guest's
    /// takeover, which bounds a burst in time, it is [`TAKEOVER_LEASE`].
    fn renew(&self, mem: MemView, cfg: &SamplerConfig) {
        if let Some(words) = cfg.switch {
            // With the guest's takeover, which ends a burst after a stretch of time, the
            // limit only keeps a burst from wrapping the head around: a count of path
            // ends runs out first in the fastest code, and lost its bursts most.
            let lease = match self.signals {
                Some(_) => TAKEOVER_LEASE,
                None => BURST_LEASE.max(self.n),
            };
            let limit = mem.u32_at(cfg.head).wrapping_add(lease as u32);
            mem.set_u32(words.limit, limit.max(1));
            for r in &self.rings {
                if let Some((_, limit_at)) = r.flag {
                    let lease = BURST_LEASE.max(r.n) as u32;
                    let limit = r.mem.u32_at(r.ring.head).wrapping_add(lease);
                    r.mem.set_u32(limit_at, limit.max(1));
                }
            }
        }
    }

    /// Switch: the end of a tick's burst. A stack sample not taken yet (`stack`, given
    /// the head when the flag was set: a tick that measured no rate) is taken with the
    /// lease renewed and the flag still set, so that the guest is still in its
    /// instrumented copies for the sample's path window; then the flag is cleared and the
    /// time it was set is counted.
    fn end_switched(
        &self,
        mem: MemView,
        cfg: &SamplerConfig,
        (flag, set_at): (Flag, u32),
        since: Instant,
        stack: Option<&mut dyn BurstStack>,
        res: &mut SamplerResult,
    ) {
        self.renew(mem, cfg);
        if let Some(st) = stack {
            if st.request(set_at) {
                st.collect();
            }
        }
        if let Some(s) = &self.signals {
            s.finish_burst();
        }
        flag.set(false);
        self.set_others(false);
        res.switched_on += since.elapsed();
    }

    /// The last tick's sampled path ends `(seq, word)`, and what each stands for.
    pub(super) fn last_taken(&self) -> (&[(u64, u64)], f64) {
        (&self.taken.0, self.taken.1)
    }

    /// Path ends counted so far (the ring's head, unwrapped).
    pub(super) fn path_ends(&self) -> u64 {
        self.head
    }

    /// The path ends counted in all, and the table's estimates.
    /// What `finish` would give now, leaving the sampler running.
    pub(super) fn snapshot(&self, mem: MemView, cfg: &SamplerConfig, res: &mut SamplerResult) {
        let mut copy = Bursts {
            table: self.table.clone(),
            ag: self.ag.clone(),
            buf: Vec::new(),
            pick: self.pick.clone(),
            taken: (Vec::new(), 0.0),
            reads: Vec::new(),
            signals: None,
            rings: self.rings.clone(),
            ..*self
        };
        copy.finish_into(mem, cfg, res);
    }

    pub(super) fn finish(mut self, mem: MemView, cfg: &SamplerConfig, res: &mut SamplerResult) {
        self.finish_into(mem, cfg, res);
    }

    fn finish_into(&mut self, mem: MemView, cfg: &SamplerConfig, res: &mut SamplerResult) {
        let ring = cfg.entries > 0;
        let h = if ring { self.head_now(mem, cfg) } else { 0 };
        res.path_ends = self.head + h.wrapping_sub(self.head32) as u64;
        if cfg.switch.is_some() {
            // Clean code counts nothing: the rate estimates are all there is.
            res.instrumented_ends = res.path_ends;
            res.path_ends = self.total_weight.round() as u64;
        } else if self.total_weight > 0.0 {
            // Rate weights are estimates, brought to the counted total.
            let scale = res.path_ends as f64 / self.total_weight;
            self.table.scale(scale);
            self.rings.iter_mut().for_each(|r| r.table.scale(scale));
        }
        res.words = self.table.estimates();
        if !self.rings.is_empty() {
            res.words = self.rings[0].table.estimates();
            res.module_words = vec![Vec::new(); cfg.modules.len()];
            for r in &self.rings[1..] {
                if let Some(k) = r.module {
                    res.module_words[k] = r.table.estimates();
                }
            }
        }
    }
}

/// Waits for the burst the guest thread runs to end ([`BURST_PATIENCE`] at most): it
/// takes the guest a few tens of microseconds of its time, in which this thread sleeps.
fn wait_for_burst(signals: &NativeSampler) -> Option<BurstTimes> {
    let t0 = Instant::now();
    std::thread::sleep(crate::native::burst::RATE_STEP);
    loop {
        if let Some(times) = signals.take_burst() {
            return Some(times);
        }
        if t0.elapsed() > BURST_PATIENCE {
            return None;
        }
        std::thread::sleep(SWITCH_NAP);
    }
}

/// The longest the sampler thread waits for the guest thread to run a burst.
const BURST_PATIENCE: Duration = Duration::from_millis(20);

/// `ends` path ends in `time` as a rate (0 in no time).
fn per_second(ends: u32, time: Duration) -> f64 {
    match time.is_zero() {
        true => 0.0,
        false => ends as f64 / time.as_secs_f64(),
    }
}
