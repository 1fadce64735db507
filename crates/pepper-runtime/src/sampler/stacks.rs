//! Calling-context samples: the guest's machine stack (native) or its shadow stack in
//! pepper's memory, folded into Whaley's PCCT, with call and path windows replayed.

use super::{MemView, Native, SamplerResult, StackConfig};
use pepper_cct::{Frame, Pcct, Stack};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The calling-context half of the sampler: a stack sample at every `stack_every`-th
/// tick, from the guest's machine stack (native) or its shadow stack, into Whaley's PCCT,
/// with call windows replayed into it.
pub(super) struct StackSamples<'c> {
    config: &'c StackConfig,
    pcct: Pcct,
    /// Scratch for shadow-stack reads.
    cache: Vec<(usize, u32, u32)>,
    raw: Vec<(u64, u64)>,
    frames: Vec<(u32, u32, (u64, u64))>,
    previous: Vec<(u32, u32, (u64, u64))>,
    copied: crate::native::Copied,
    last_events_head: u32,
    last_words_head: u32,
    replay: pepper_cct::Replay,
    paths: PathWindows,
    last_sample: Instant,
    /// The guest thread's CPU clock, and its reading at the last sample: a sample weighs
    /// the guest's CPU time since the one before (wall time where the clock cannot be
    /// read), so that a sample after the guest waited for a core stands for the work it
    /// did, not for the wait.
    clock: Option<crate::worker::ThreadCpuClock>,
    last_cpu: Option<Duration>,
    in_host_samples: u64,
    /// Signal delivery times summed, and how many.
    delivery: (Duration, u64),
}

/// A native stack sample copied and not yet folded (see [`StackSamples::capture`]).
pub(super) struct Captured {
    weight: u64,
    /// The guest was in a host call (the store's call hook said so).
    host: bool,
}

impl<'c> StackSamples<'c> {
    pub(super) fn new(
        config: &'c StackConfig,
        clock: Option<crate::worker::ThreadCpuClock>,
    ) -> StackSamples<'c> {
        StackSamples {
            config,
            pcct: Pcct::new(
                config.budget,
                config.bufsize,
                config.edge_mode,
                config.num_funcs,
            ),
            cache: Vec::with_capacity(config.bufsize + 4),
            raw: Vec::with_capacity(crate::native::MAX_FRAMES),
            frames: Vec::with_capacity(crate::native::MAX_FRAMES),
            previous: Vec::with_capacity(crate::native::MAX_FRAMES),
            copied: crate::native::Copied::default(),
            last_events_head: 0,
            last_words_head: 0,
            replay: pepper_cct::Replay::default(),
            paths: PathWindows::default(),
            last_sample: Instant::now(),
            clock,
            last_cpu: clock.and_then(crate::worker::ThreadCpuClock::now),
            in_host_samples: 0,
            delivery: (Duration::ZERO, 0),
        }
    }

    /// The next sample's path window reads no further back than ring head `head` (see
    /// `sample_loop`: under the switch, the start of the burst).
    pub(super) fn window_from(&mut self, head: u32) {
        self.last_words_head = head;
    }

    /// Takes one stack sample (its weight: the guest's CPU time since the previous one)
    /// and, with interval sampling, adds its functions to the interval's footprint.
    pub(super) fn take(
        &mut self,
        mem: MemView,
        in_host: &AtomicBool,
        native: Option<&Native>,
        intervals: Option<&mut crate::intervals::Intervals>,
    ) {
        if let Some(c) = self.capture(mem, in_host, native) {
            self.fold(c, native, intervals);
        }
    }

    /// The quick half of [`StackSamples::take`]: reads the stack (a shadow stack is folded
    /// at once); a native sample, copied with its windows, waits for [`StackSamples::fold`].
    /// Under the switch the copy is taken while a burst runs and folded after it.
    pub(super) fn capture(
        &mut self,
        mem: MemView,
        in_host: &AtomicBool,
        native: Option<&Native>,
    ) -> Option<Captured> {
        let pending = self.request(mem, in_host, native)?;
        self.collect(pending, native)
    }

    /// The first half of [`StackSamples::capture`]: a shadow stack is read (and folded)
    /// at once; a native sample is asked of the guest thread, to be waited for with
    /// [`StackSamples::collect`] (the guest runs on until its signal arrives).
    pub(super) fn request(
        &mut self,
        mem: MemView,
        in_host: &AtomicBool,
        native: Option<&Native>,
    ) -> Option<Captured> {
        let sc = self.config;
        let now = Instant::now();
        let wall = now - self.last_sample;
        self.last_sample = now;
        let cpu = self.clock.and_then(crate::worker::ThreadCpuClock::now);
        let since = match (cpu, self.last_cpu) {
            (Some(now), Some(then)) => now.saturating_sub(then),
            _ => wall,
        };
        self.last_cpu = cpu;
        let weight = since.as_micros().max(1) as u64;
        let host = in_host.load(Ordering::Acquire);
        self.in_host_samples += host as u64;
        let Some((sampler, _)) = native else {
            // A torn read (the guest returned below a frame being read) is read again.
            for _ in 0..4 {
                let mut stack = MemStack::read(mem, sc, host, &mut self.cache);
                if self.pcct.sample(&mut stack, weight) {
                    break;
                }
            }
            return None;
        };
        sampler
            .request((self.last_events_head, self.last_words_head))
            .then_some(Captured { weight, host })
    }

    /// The second half of [`StackSamples::capture`]: waits for the native sample asked
    /// for, and copies it.
    pub(super) fn collect(
        &mut self,
        pending: Captured,
        native: Option<&Native>,
    ) -> Option<Captured> {
        let (sampler, _) = native?;
        if !sampler.collect(&mut self.raw, &mut self.copied) {
            return None;
        }
        if let Some(d) = self.copied.delivery {
            self.delivery.0 += d;
            self.delivery.1 += 1;
        }
        Some(pending)
    }

    /// When the last native sample's signal handler started.
    pub(super) fn handler_started(&self) -> Option<Instant> {
        self.copied.handler
    }

    /// Folds a captured native sample into the tree, replaying its windows.
    pub(super) fn fold(
        &mut self,
        Captured { weight, host }: Captured,
        native: Option<&Native>,
        intervals: Option<&mut crate::intervals::Intervals>,
    ) {
        let sc = self.config;
        let Some((_, map)) = native else {
            return;
        };
        // Events and path words since the last window: the newest of them are replayed.
        let (events, since) = self.copied.events.since(&mut self.last_events_head);
        let (words, words_since) = self.copied.words.since(&mut self.last_words_head);
        if crate::native::wasm_frames(&self.raw, map, &mut self.frames) {
            if let Some(iv) = intervals {
                iv.stack_sample(self.frames.iter().map(|f| f.0));
            }
            let mut stack =
                crate::native::NativeStack::new(&self.frames, &self.previous, self.raw.len());
            self.pcct.sample(&mut stack, weight);
            self.pcct
                .replay_calls(events, &sc.sites, since as u64, &mut self.replay);
            if let Some(ps) = &sc.path_windows {
                // Where the leaf is: what its unfinished path may have called.
                let top = self
                    .frames
                    .last()
                    .zip(map.offset(self.raw[0].0))
                    .map_or(pepper_cct::Pos::UNKNOWN, |(&(func, _, _), offset)| {
                        ps.pos_at(func, offset)
                    });
                let w = (words, words_since);
                self.paths.replay(
                    &mut self.pcct,
                    ps.as_ref(),
                    w,
                    top,
                    &sc.sites,
                    &mut self.replay,
                );
            }
            std::mem::swap(&mut self.frames, &mut self.previous);
        } else {
            // In the host: its code has no frame pointers to follow back into the guest,
            // so the time goes to a `(host)` context of its own.
            const HOST: [(u32, u32, (u64, u64)); 1] = [(u32::MAX, pepper_cct::NO_SITE, (0, 0))];
            self.pcct
                .sample(&mut crate::native::NativeStack::new(&HOST, &[], 1), weight);
            self.previous.clear();
            if !host {
                self.in_host_samples += 1;
            }
        }
    }

    /// What `finish` would give now, leaving the sampler running.
    pub(super) fn snapshot(&self, res: &mut SamplerResult) {
        res.pcct = Some(self.pcct.clone());
        res.windows = self.replay.clone();
        res.in_host = self.in_host_samples;
        res.signal_delivery = self.delivery;
    }

    pub(super) fn finish(self, res: &mut SamplerResult) {
        res.pcct = Some(self.pcct);
        res.windows = self.replay;
        res.in_host = self.in_host_samples;
        res.signal_delivery = self.delivery;
    }
}

/// The guest's shadow stack as the PCCT walks it. Frame `i` sits at
/// `base + (16 i & mask)`: its function word (`func + 1`, the marker in the top bit; 0 once
/// popped) and the call site it is calling from. Each frame is read once and remembered, so
/// the walk sees one snapshot; [`Stack::consistent`] checks that the snapshot is one real
/// stack, and a mark is only set, by compare-and-swap, on the very word that was read.
struct MemStack<'a> {
    mem: MemView,
    cfg: &'a StackConfig,
    depth: usize,
    /// The guest is in a host call: one more frame on top, the import it called.
    host: Option<u32>,
    /// (frame, function word, site word) as first read.
    seen: std::cell::RefCell<&'a mut Vec<(usize, u32, u32)>>,
}

impl<'a> MemStack<'a> {
    fn read(
        mem: MemView,
        cfg: &'a StackConfig,
        host: bool,
        cache: &'a mut Vec<(usize, u32, u32)>,
    ) -> MemStack<'a> {
        cache.clear();
        let depth = (mem.u32_at(cfg.pointer) / pepper_layout::FRAME_BYTES) as usize;
        let mut s = MemStack {
            mem,
            cfg,
            depth,
            host: None,
            seen: std::cell::RefCell::new(cache),
        };
        if host && depth > 0 {
            let site = s.snapshot(depth - 1).2;
            let callee = s.cfg.callees.get(site as usize).copied().flatten();
            s.host = Some(callee.unwrap_or(u32::MAX));
        }
        s
    }

    fn addr(&self, i: usize, field: u32) -> u32 {
        let mask = self.cfg.entries * pepper_layout::FRAME_BYTES - 1;
        self.cfg.base + ((i as u32).wrapping_mul(pepper_layout::FRAME_BYTES) & mask) + field
    }

    fn snapshot(&self, i: usize) -> (usize, u32, u32) {
        if let Some(&f) = self.seen.borrow().iter().find(|c| c.0 == i) {
            return f;
        }
        let f = (
            i,
            self.mem.u32_at(self.addr(i, 0)),
            self.mem.u32_at(self.addr(i, 4)),
        );
        self.seen.borrow_mut().push(f);
        f
    }
}

impl Stack for MemStack<'_> {
    fn depth(&self) -> usize {
        self.depth + self.host.is_some() as usize
    }

    fn frame(&self, i: usize) -> Frame {
        if i == self.depth {
            return Frame {
                func: self.host.unwrap_or(u32::MAX),
                site: 0,
            };
        }
        let (_, w, site) = self.snapshot(i);
        Frame {
            func: (w & !pepper_layout::MARK).wrapping_sub(1),
            site,
        }
    }

    fn marked(&self, i: usize) -> bool {
        i < self.depth && self.snapshot(i).1 & pepper_layout::MARK != 0
    }

    fn mark(&mut self, i: usize) -> bool {
        if i >= self.depth {
            return true;
        }
        let w = self.snapshot(i).1;
        let mark = pepper_layout::MARK;
        w & mark != 0 || self.mem.cas_u32(self.addr(i, 0), w, w | mark)
    }

    /// Whether the snapshot is one real stack. Two checks:
    /// - every caller's call site (when it is a direct call) names the callee above it,
    ///   which rejects stacks glued from two moments (a frame read before the guest
    ///   returned below it, and one the guest pushed after);
    /// - the topmost frame read, or the one below it, is still there unchanged. A frame
    ///   cannot change while a frame above it lives and pops clear the popped word, so a
    ///   frame that survived the whole read vouches for every frame below it. Requiring
    ///   the leaf itself to survive would reject most samples of call-heavy code (a leaf
    ///   lives tens of nanoseconds, a cross-core read of the stack takes longer) and keep
    ///   only the long-lived leaves, a worse bias than the leaf's caller changing between
    ///   the leaf's read and its own (which the call-site check catches when the call is
    ///   direct).
    fn consistent(&self) -> bool {
        let seen = self.seen.borrow();
        let mark = pepper_layout::MARK;
        let func = |w: u32| (w & !mark).wrapping_sub(1);
        for &(i, w, _) in seen.iter() {
            if w == 0 {
                return false;
            }
            if let Some(&(_, _, site)) = seen.iter().find(|c| c.0 + 1 == i) {
                if let Some(Some(callee)) = self.cfg.callees.get(site as usize) {
                    if *callee != func(w) {
                        return false;
                    }
                }
            }
        }
        let unchanged = |&(i, w, site): &(usize, u32, u32)| {
            self.mem.u32_at(self.addr(i, 0)) & !mark == w & !mark
                && self.mem.u32_at(self.addr(i, 4)) == site
        };
        let mut by_depth: Vec<&(usize, u32, u32)> = seen.iter().collect();
        by_depth.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        by_depth.is_empty() || by_depth.iter().take(2).any(|c| unchanged(c))
    }
}

/// Path windows' state in the sampler thread: decoded path words (regenerating a path
/// takes microseconds; the same few thousand paths recur), found through a direct-mapped
/// cache (a few nanoseconds per word: a window is thousands of words), and the
/// conversion's buffers.
#[derive(Default)]
struct PathWindows {
    decoded: Vec<Option<pepper_cct::PathCalls>>,
    /// (word + 1, index in `decoded`) by the word's hash.
    cache: Vec<(u64, u32)>,
    records: Vec<u32>,
    events: Vec<u32>,
}

impl PathWindows {
    /// Cache slots (a power of two), and the most decoded paths kept before starting over.
    const SLOTS: usize = 1 << 16;
    const MAX_DECODED: usize = 1 << 16;

    /// Replays `words` (the newest path words, oldest first, standing for `since` path
    /// ends) from the last sample's stack into call windows; `top`: where the leaf is.
    fn replay(
        &mut self,
        pcct: &mut Pcct,
        ps: &dyn pepper_cct::PathDecoder,
        (words, since): (&[u64], usize),
        top: pepper_cct::Pos,
        sites: &[pepper_cct::SiteInfo],
        r: &mut pepper_cct::Replay,
    ) {
        if self.cache.is_empty() || self.decoded.len() >= Self::MAX_DECODED {
            self.decoded.clear();
            self.cache.clear();
            self.cache.resize(Self::SLOTS, (0, 0));
        }
        self.records.clear();
        for &w in words {
            let slot = (w.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize & (Self::SLOTS - 1);
            let (key, at) = self.cache[slot];
            let at = if key == w.wrapping_add(1) {
                at
            } else {
                self.decoded.push(ps.decode(w));
                let at = (self.decoded.len() - 1) as u32;
                self.cache[slot] = (w.wrapping_add(1), at);
                at
            };
            self.records.push(at);
        }
        let refs: Vec<Option<&pepper_cct::PathCalls>> = self
            .records
            .iter()
            .map(|&k| self.decoded[k as usize].as_ref())
            .collect();
        pcct.replay_paths(&refs, top, ps, sites, since as u64, r, &mut self.events);
    }
}
