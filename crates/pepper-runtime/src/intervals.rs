//! The sampler's interval work: the run cut into intervals, for phase analysis and for
//! profiling by intervals instead of bursts.
//!
//! Two kinds (see [`IntervalConfig`]):
//! - a **time line**: with PEP's ring always written, the sampler reads *every* path end
//!   from it at each tick (not just a burst), so each interval of a fixed number of path
//!   ends gets an exact per-function count; the online phase detector (Nagpurkar, Ch. 4)
//!   runs over the intervals as they close;
//! - **interval sampling** on the switch (Nagpurkar, Ch. 6): the run is cut into
//!   intervals of time, each one classified by its stack samples' innermost functions
//!   (free for the guest: clean code writes nothing), and the switch flag is held for
//!   whole intervals, periodic or one representative interval per new phase, while the
//!   sampler reads every path end the instrumented copies write.

use crate::flag::Flag;
use crate::memview::MemView;
use pepper_phases::{sampling::PhaseProfiles, Detector, DetectorConfig, Signature, Tracker};
use pepper_profile::{DetectedPhases, Interval, PhaseSpan, Timeline};
use pepper_sampling::SampleTable;
use std::time::Instant;

/// log2 of PEP's ring when the sampler reads every path end: 2^18 words (2 MiB) hold
/// 196,000 path ends past the copy margin, 250 µs' worth at 780 million path
/// ends a second, with room for a tick that comes late.
pub const EVERY_PATH_END_RING_LOG2: u32 = 18;

/// How often the sampler reads the ring between its ticks when it reads every path end:
/// 2^18 words hold 260 µs of a loop completing 750 million path ends a second (a tight
/// fixture loop; the workloads complete 150-300 million). Not more often: every wakeup
/// of the sampler may land on the guest's core.
pub(crate) const DRAIN_EVERY: std::time::Duration = std::time::Duration::from_micros(100);

/// The time line reads one path end in this many (see `Drain::read`) and counts it for
/// all of them; interval bounds stay exact.
pub const TIMELINE_STRIDE: u64 = 32;

/// What the sampler does with intervals.
#[derive(Clone, Debug)]
pub enum IntervalConfig {
    /// Cut an interval every `length` path ends (bounds exact, from the ring head); count
    /// each interval's path ends by function from `source`; run `detector` on each
    /// interval as it closes.
    Timeline {
        /// Path ends per interval.
        length: u64,
        /// The online phase detector to run on each closed interval.
        detector: Option<DetectorConfig>,
        /// Where the per-function counts come from.
        source: TimelineSource,
    },
    /// Instrument whole intervals of `length` (wall time, cut at the first sampler tick
    /// after it), chosen by `strategy`.
    Sampled {
        /// Wall time per interval.
        length: std::time::Duration,
        /// Which intervals are instrumented.
        strategy: Strategy,
    },
}

impl IntervalConfig {
    /// Whether the sampler reads every path end from PEP's ring (between its ticks too),
    /// which needs the ring of [`EVERY_PATH_END_RING_LOG2`].
    pub fn reads_every_path_end(&self) -> bool {
        !matches!(
            self,
            IntervalConfig::Timeline {
                source: TimelineSource::Bursts,
                ..
            }
        )
    }
}

/// Where a time line's per-function counts come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineSource {
    /// PEP's bursts: each burst's sampled path ends, with the weights PEP gives them,
    /// counted in the interval they fall in. Costs the guest nothing beyond PEP; each
    /// interval's vector is a sample (a 1M path-end interval gets several hundred
    /// sampled path ends from the ticks within it), so intervals should span a few
    /// ticks.
    Bursts,
    /// Every path end (one in [`TIMELINE_STRIDE`] read): the sampler drains a 2 MiB ring
    /// between its ticks. Exact counts for offline analysis and oracles; the large ring
    /// costs the guest a few percent (its stores leave the caches).
    Ring,
}

/// Which intervals interval sampling instruments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Strategy {
    /// Every `n`-th interval (the middle one of each `n`).
    Periodic(u32),
    /// Phases a [`Tracker`] finds at distance `threshold`: the `nth` interval of each
    /// new one, and every `every`-th interval of a phase again (0: never).
    PhaseAware {
        /// Manhattan distance within which an interval belongs to a phase.
        threshold: f64,
        /// Which interval of a new phase is profiled (2 or more).
        nth: u64,
        /// Every `every`-th interval of a phase is profiled again (0: never).
        every: u64,
    },
}

/// At most this many intervals are kept: beyond it neighbours merge in pairs and the
/// interval length doubles, so a long run's time line stays a few megabytes.
pub const MAX_INTERVALS: usize = 2048;

/// Reads every word the guest appends to PEP's ring, in order.
struct Drain {
    head32: u32,
    seq: u64,
    lost: u64,
    buf: Vec<u64>,
}

impl Drain {
    /// From the run's first path end: any the guest wrote and overwrote before the
    /// sampler started count as lost.
    fn new() -> Drain {
        Drain {
            head32: 0,
            seq: 0,
            lost: 0,
            buf: Vec::with_capacity(1 << EVERY_PATH_END_RING_LOG2),
        }
    }

    /// Calls `f(seq, words)` for the path ends since the last call whose number is a
    /// multiple of `stride` (`seq` numbers the first word, the others follow `stride`
    /// apart); words the guest may have overwritten are skipped and counted lost.
    ///
    /// Why a stride: the ring's cache lines were just written by the guest's core, and
    /// reading them all from the sampler's moves every line across: on this 2-vCPU EPYC
    /// the sampler then read zstd's 280 million path ends a second at about half that
    /// rate and lost half of them. One word in 32 (one line in four) keeps up, and
    /// per-function shares of a million path ends from 31,000 of them are within a
    /// fraction of a percent.
    fn read(
        &mut self,
        mem: MemView,
        (head_at, base, entries): (u32, u32, u32),
        stride: u64,
        mut f: impl FnMut(u64, &[u64]),
    ) {
        let h = mem.u32_at(head_at);
        let head = self.seq + h.wrapping_sub(self.head32) as u64;
        self.head32 = h;
        let n = entries as u64;
        let margin = (n / 4).max(8);
        let mut from = self.seq;
        if head - from > n - margin {
            let to = head - (n - margin);
            self.lost += to - from;
            from = to;
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        if stride <= 1 {
            // At most two contiguous stretches of the ring.
            let mut s = from;
            while s < head {
                let i = s % n;
                let len = (head - s).min(n - i);
                buf.clear();
                mem.u64s_into(base + 8 * i as u32, len as usize, &mut buf);
                f(s, &buf);
                s += len;
            }
        } else {
            let first = from.next_multiple_of(stride);
            buf.extend(
                (first..head)
                    .step_by(stride as usize)
                    .map(|s| mem.u64_at(base + 8 * (s % n) as u32)),
            );
            f(first, &buf);
        }
        self.buf = buf;
        // Words older than (head now − n) may have been overwritten while read.
        let now = head + mem.u32_at(head_at).wrapping_sub(h) as u64;
        let suspect = (now.saturating_sub(n))
            .saturating_sub(from)
            .min(head - from);
        self.lost += suspect;
        self.seq = head;
    }
}

/// Per-function counts of the interval being filled, indexed by the path word's tag
/// (function + 1; 0 is an empty ring slot, dropped).
#[derive(Default)]
struct Dense {
    counts: Vec<u64>,
    touched: Vec<u32>,
}

impl Dense {
    fn add(&mut self, func: u32, n: u64) {
        self.add_tag(func as usize + 1, n);
    }

    fn add_tag(&mut self, tag: usize, n: u64) {
        if tag >= self.counts.len() {
            self.counts.resize((tag + 1).next_power_of_two(), 0);
        }
        if self.counts[tag] == 0 {
            self.touched.push(tag as u32);
        }
        self.counts[tag] += n;
    }

    /// The counts by function, sorted, and a fresh start.
    fn take(&mut self) -> Vec<(u32, u64)> {
        self.touched.sort_unstable();
        let mut out = Vec::with_capacity(self.touched.len());
        for t in self.touched.drain(..) {
            let c = std::mem::take(&mut self.counts[t as usize]);
            if t > 0 {
                out.push((t - 1, c));
            }
        }
        out
    }
}

/// A time line's intervals being filled between two ticks: the current one's counts, and
/// the ones a path end's position has closed since the last tick (`cuts`, each with its
/// end), every `length` path ends.
struct Filling<'a> {
    current: &'a mut Dense,
    cuts: &'a mut Vec<(u64, Vec<(u32, u64)>)>,
    next_cut: u64,
    length: u64,
}

impl<'a> Filling<'a> {
    fn new(
        current: &'a mut Dense,
        cuts: &'a mut Vec<(u64, Vec<(u32, u64)>)>,
        interval_start: u64,
        length: u64,
    ) -> Filling<'a> {
        let next_cut = cuts.last().map_or(interval_start, |c| c.0) + length;
        Filling {
            current,
            cuts,
            next_cut,
            length,
        }
    }

    /// Closes every interval that ends at or before path end `seq`.
    fn cut_before(&mut self, seq: u64) {
        while seq >= self.next_cut {
            self.cuts.push((self.next_cut, self.current.take()));
            self.next_cut += self.length;
        }
    }

    /// Path end `seq`, PEP word `word`, standing for `n` path ends of its function.
    fn add(&mut self, seq: u64, word: u64, n: u64) {
        self.cut_before(seq);
        self.current
            .add_tag((word >> pepper_layout::PEP_TAG_SHIFT) as usize, n);
    }
}

/// The sampler's interval state.
pub(crate) struct Intervals {
    cfg: IntervalConfig,
    ring: (u32, u32, u32),
    flag: Option<Flag>,
    drain: Drain,
    current: Dense,
    interval_start: (u64, Instant),
    intervals: Vec<Interval>,
    length: u64,
    detector: Option<Detector>,
    spans: Vec<PhaseSpan>,
    open: Option<u32>,
    /// Times the stored intervals were merged in pairs: the detector's interval `k` is
    /// stored interval `k >> halvings`.
    halvings: u32,
    // Interval sampling.
    tracker: Tracker,
    profiles: PhaseProfiles<u64>,
    pending: Option<SampleTable>,
    index: u64,
    /// Scratch: the functions of the stack sample being added.
    seen: Vec<u32>,
    /// Path ends lost before the current interval began.
    pending_lost: u64,
    /// Time line: intervals filled between ticks, closed at the next tick.
    cuts: Vec<(u64, Vec<(u32, u64)>)>,
}

impl Intervals {
    pub(crate) fn new(cfg: IntervalConfig, ring: (u32, u32, u32), flag: Option<Flag>) -> Intervals {
        let (length, detector, tracker) = match &cfg {
            IntervalConfig::Timeline {
                length, detector, ..
            } => (*length, detector.map(Detector::new), Tracker::new(0.0)),
            IntervalConfig::Sampled { strategy, length } => (
                length.as_micros() as u64,
                None,
                match *strategy {
                    // One phase: every interval stands for all of them.
                    Strategy::Periodic(_) => Tracker::new(2.0),
                    Strategy::PhaseAware {
                        threshold,
                        nth,
                        every,
                    } => Tracker::new(threshold)
                        .representative(nth)
                        .resample_every(every),
                },
            ),
        };
        let drain = Drain::new();
        Intervals {
            interval_start: (drain.seq, Instant::now()),
            cfg,
            ring,
            flag,
            drain,
            current: Dense::default(),
            intervals: Vec::new(),
            length: length.max(1),
            detector,
            spans: Vec::new(),
            open: None,
            halvings: 0,
            tracker,
            profiles: PhaseProfiles::default(),
            pending: None,
            index: 0,
            seen: Vec::new(),
            pending_lost: 0,
            cuts: Vec::new(),
        }
    }

    /// Interval sampling replaces PEP's bursts; a time line comes on top of them.
    pub(crate) fn replaces_bursts(&self) -> bool {
        matches!(self.cfg, IntervalConfig::Sampled { .. })
    }

    /// Whether the sampler reads every path end (between its ticks too).
    pub(crate) fn drains(&self) -> bool {
        self.cfg.reads_every_path_end()
    }

    /// A time line from bursts: one tick's sampled path ends `(seq, word)`, each standing
    /// for `weight` path ends, and the ring head (`head`, path ends so far); closes the
    /// intervals the head has passed (`last`: the pass after the guest finished).
    pub(crate) fn burst(&mut self, words: &[(u64, u64)], weight: f64, head: u64, last: bool) {
        let mut fill = Filling::new(
            &mut self.current,
            &mut self.cuts,
            self.interval_start.0,
            self.length,
        );
        let n = weight.round().max(1.0) as u64;
        for &(seq, w) in words {
            fill.add(seq, w, n);
        }
        fill.cut_before(head);
        self.drain.seq = head;
        self.close_cuts(last);
    }

    /// A stack sample's functions, outermost first (interval sampling's footprint: every
    /// function on the stack, once per sample; see `IntervalConfig::Sampled`).
    pub(crate) fn stack_sample(&mut self, funcs: impl Iterator<Item = u32>) {
        if !self.replaces_bursts() {
            return;
        }
        let start = self.seen.len();
        for f in funcs.filter(|&f| f != u32::MAX) {
            if !self.seen[start..].contains(&f) {
                self.seen.push(f);
                self.current.add(f, 1);
            }
        }
        self.seen.truncate(start);
    }

    /// Reads the path ends written since the last read (between ticks).
    pub(crate) fn drain(&mut self, mem: MemView) {
        if !self.drains() {
            return;
        }
        match &self.cfg {
            IntervalConfig::Timeline { .. } => self.read_timeline(mem),
            IntervalConfig::Sampled { .. } => self.read_pending(mem),
        }
    }

    /// One sampler tick; `last` is the pass after the guest finished.
    pub(crate) fn tick(&mut self, mem: MemView, last: bool) {
        if !self.drains() {
            // (A time line from bursts is fed by `burst` after the tick's burst.)
            return;
        }
        match self.cfg {
            IntervalConfig::Timeline { .. } => self.tick_timeline(mem, last),
            IntervalConfig::Sampled { length, strategy } => {
                self.tick_sampled(mem, last, length, strategy)
            }
        }
    }

    /// Reads path ends into the interval being filled, keeping the ones that filled
    /// intervals in `self.cuts`.
    fn read_timeline(&mut self, mem: MemView) {
        let mut fill = Filling::new(
            &mut self.current,
            &mut self.cuts,
            self.interval_start.0,
            self.length,
        );
        self.drain
            .read(mem, self.ring, TIMELINE_STRIDE, |first, words| {
                for (k, &w) in words.iter().enumerate() {
                    fill.add(first + k as u64 * TIMELINE_STRIDE, w, TIMELINE_STRIDE);
                }
            });
    }

    fn tick_timeline(&mut self, mem: MemView, last: bool) {
        self.read_timeline(mem);
        self.close_cuts(last);
    }

    /// Closes the intervals filled since the last tick, sharing its time among them.
    fn close_cuts(&mut self, last: bool) {
        let cuts = std::mem::take(&mut self.cuts);
        let now = Instant::now();
        let n = cuts.len() as u32 + last as u32;
        // Intervals closed within one tick share its time.
        let share = |t: Instant| (now - t).as_micros() as u64 / n.max(1) as u64;
        let wall = share(self.interval_start.1);
        for (end, counts) in cuts {
            self.close(end, wall, counts, None, false);
        }
        if last && self.drain.seq > self.interval_start.0 {
            let counts = self.current.take();
            self.close(self.drain.seq, wall, counts, None, false);
        }
        self.interval_start.1 = now;
    }

    fn tick_sampled(
        &mut self,
        mem: MemView,
        last: bool,
        length: std::time::Duration,
        strategy: Strategy,
    ) {
        self.read_pending(mem);
        let now = Instant::now();
        if now - self.interval_start.1 < length && !last {
            return;
        }
        let footprint = self.current.take();
        let phase = self.tracker.classify(&Signature::new(&footprint));
        let lost = self.drain.lost - self.pending_lost;
        self.pending_lost = self.drain.lost;
        let profiled = self.pending.take().map(|t| {
            let mut entries = t.entries();
            self.tracker.sampled(phase);
            let read = entries.iter().map(|e| e.1).sum::<u64>();
            if lost > 0 && read > 0 {
                // Path ends the sampler could not read in time stand for the ones it read.
                let scale = (read + lost) as f64 / read as f64;
                for e in &mut entries {
                    e.1 = (e.1 as f64 * scale).round() as u64;
                }
            }
            self.profiles.add(phase, entries);
            read + lost
        });
        let wall = (now - self.interval_start.1).as_micros() as u64;
        self.interval_start.1 = now;
        self.close(0, wall, footprint, Some(phase as u32), profiled.is_some());
        if let Some(i) = self.intervals.last_mut() {
            i.path_ends = profiled.unwrap_or(0);
        }
        self.index += 1;
        let next = match strategy {
            Strategy::Periodic(n) => {
                let n = n.max(1) as u64;
                self.index % n == n / 2
            }
            Strategy::PhaseAware { .. } => self.tracker.wants_sample(),
        };
        if next && !last {
            self.pending = Some(SampleTable::with_capacity(1 << 20));
        }
        if let Some(flag) = self.flag {
            flag.set(next && !last);
        }
    }

    /// Reads path ends into the profiled interval's table (outside profiled intervals:
    /// the instrumented copies finishing their loop iteration after the flag was cleared,
    /// which are dropped).
    fn read_pending(&mut self, mem: MemView) {
        let ring = self.ring;
        let pending = &mut self.pending;
        self.drain.read(mem, ring, 1, |_, words| {
            if let Some(t) = pending.as_mut() {
                for &w in words.iter().filter(|&&w| w != 0) {
                    t.add(w, 1.0);
                }
            }
        });
    }

    /// Appends a finished interval ending at path end `end` (time line) and runs the
    /// detector on it.
    fn close(
        &mut self,
        end: u64,
        wall_us: u64,
        counts: Vec<(u32, u64)>,
        phase: Option<u32>,
        profiled: bool,
    ) {
        let start = self.interval_start.0;
        self.interval_start.0 = end;
        if let Some(d) = self.detector.as_mut() {
            let k = self.intervals.len() as u32;
            let step = d.push(&counts);
            if let Some(s) = step.started {
                self.open = Some((s >> self.halvings) as u32);
            }
            if step.ended {
                if let Some(s) = self.open.take() {
                    self.spans.push(span(s, k, &self.intervals, start));
                }
            }
        }
        self.intervals.push(Interval {
            start,
            path_ends: end.saturating_sub(start),
            wall_us,
            counts,
            phase,
            profiled,
        });
        if self.intervals.len() > MAX_INTERVALS {
            self.halve();
        }
    }

    /// Merges neighbouring intervals in pairs and doubles the length.
    fn halve(&mut self) {
        let old = std::mem::take(&mut self.intervals);
        for pair in old.chunks(2) {
            let mut counts: std::collections::BTreeMap<u32, u64> = Default::default();
            for i in pair {
                for &(f, c) in &i.counts {
                    *counts.entry(f).or_default() += c;
                }
            }
            self.intervals.push(Interval {
                start: pair[0].start,
                path_ends: pair.iter().map(|i| i.path_ends).sum(),
                wall_us: pair.iter().map(|i| i.wall_us).sum(),
                counts: counts.into_iter().collect(),
                phase: pair[0].phase,
                profiled: pair.iter().any(|i| i.profiled),
            });
        }
        self.length *= 2;
        self.halvings += 1;
        for s in &mut self.spans {
            s.start /= 2;
            s.end = s.end.div_ceil(2);
        }
        self.open = self.open.map(|s| s / 2);
    }

    /// What the profile records, and (interval sampling) the path words' estimated
    /// executions.
    pub(crate) fn finish(mut self) -> IntervalResult {
        let n = self.intervals.len() as u32;
        if let Some(s) = self.open.take() {
            let end = self.drain.seq;
            self.spans.push(span(s, n, &self.intervals, end));
        }
        let (clock, counts) = match self.cfg {
            IntervalConfig::Timeline {
                source: TimelineSource::Bursts,
                ..
            } => ("path-ends", "burst-samples"),
            IntervalConfig::Timeline { .. } => ("path-ends", "path-ends"),
            IntervalConfig::Sampled { .. } => ("time", "stack-samples"),
        };
        let words = self.replaces_bursts().then(|| {
            self.profiles
                .estimate(&self.tracker)
                .into_iter()
                .map(|(w, c)| (w, c.round() as u64))
                .filter(|&(_, c)| c > 0)
                .collect()
        });
        IntervalResult {
            timeline: Timeline {
                clock: clock.into(),
                length: self.length,
                counts: counts.into(),
                lost: self.drain.lost,
                intervals: self.intervals,
            },
            phases: self.detector.map(|d| DetectedPhases {
                detector: d.config().name(),
                mpl: (2 * d.config().cw) as u32,
                phases: self.spans,
            }),
            words,
        }
    }
}

/// A detected phase [s, e) with its bounds in path ends (`end` when `e` is the interval
/// still being closed).
fn span(s: u32, e: u32, intervals: &[Interval], end: u64) -> PhaseSpan {
    PhaseSpan {
        start: s,
        end: e,
        start_path_end: intervals.get(s as usize).map_or(end, |i| i.start),
        end_path_end: intervals.get(e as usize).map_or(end, |i| i.start),
    }
}

/// What the interval work produced.
#[derive(Clone, Debug, Default)]
pub struct IntervalResult {
    /// The intervals, for the profile.
    pub timeline: Timeline,
    /// What the online detector found.
    pub phases: Option<DetectedPhases>,
    /// Interval sampling: estimated executions per path word (sorted).
    pub words: Option<Vec<(u64, u64)>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time line from bursts: each sampled path end counts its weight in the interval
    /// its position falls in, and intervals close at exact bounds as the head passes
    /// them, with or without samples.
    #[test]
    fn burst_samples_land_in_the_interval_of_their_position() {
        let cfg = IntervalConfig::Timeline {
            length: 100,
            detector: None,
            source: TimelineSource::Bursts,
        };
        let mut iv = Intervals::new(cfg, (0, 0, 0), None);
        assert!(!iv.drains());
        let word = |func: u64| (func + 1) << 44 | 7;
        // Tick 1: two samples of function 3 in [0, 100), one of function 4 in [100, 200).
        iv.burst(
            &[(40, word(3)), (99, word(3)), (100, word(4))],
            10.0,
            150,
            false,
        );
        // Tick 2: nothing sampled; the head passes 200 and 300.
        iv.burst(&[], 0.0, 320, false);
        // Tick 3 (at exit): function 5 in [300, 320 + ...).
        iv.burst(&[(310, word(5))], 2.4, 330, true);
        let t = iv.finish().timeline;
        assert_eq!(t.counts, "burst-samples");
        let bounds: Vec<(u64, u64)> = t.intervals.iter().map(|i| (i.start, i.path_ends)).collect();
        assert_eq!(bounds, [(0, 100), (100, 100), (200, 100), (300, 30)]);
        let counts: Vec<&[(u32, u64)]> = t.intervals.iter().map(|i| &i.counts[..]).collect();
        assert_eq!(counts, [&[(3, 20)][..], &[(4, 10)], &[], &[(5, 2)]]);
    }

    #[test]
    fn a_long_time_line_merges_neighbours_and_keeps_detected_spans() {
        let cfg = IntervalConfig::Timeline {
            length: 10,
            detector: Some(DetectorConfig::recommended(4)),
            source: TimelineSource::Ring,
        };
        let mut iv = Intervals::new(cfg, (0, 0, 0), None);
        // Two long phases: function 1, then function 2.
        for k in 0..=MAX_INTERVALS as u64 {
            let f = if k < 1000 { 1 } else { 2 };
            iv.close((k + 1) * 10, 5, vec![(f, 10)], None, false);
        }
        assert_eq!(iv.length, 20);
        assert_eq!(iv.intervals.len(), MAX_INTERVALS / 2 + 1);
        assert_eq!(iv.intervals[0].path_ends, 20);
        assert_eq!(iv.intervals[0].wall_us, 10);
        let r = iv.finish();
        let spans = r.phases.expect("detector ran").phases;
        assert_eq!(spans.len(), 2, "{spans:?}");
        // The first phase ends where function 2 starts: interval 1000 before merging.
        assert_eq!(spans[0].end, 500);
        assert_eq!(spans[0].end_path_end, 10_000);
        assert_eq!(spans[1].start_path_end, 10_000);
    }
}
