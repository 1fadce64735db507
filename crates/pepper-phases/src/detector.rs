//! The online phase detector (Ch. 4 of the dissertation): a current window (CW) of the
//! newest intervals, a trailing window (TW) of the ones before, a model that turns the two
//! into a similarity and an analyzer that turns the similarity into *in phase* (P) or *in
//! transition* (T). One interval is consumed per step (skipFactor 1, which §4.3.2 found
//! significantly more accurate than skipping a whole window), except with
//! [`Window::FixedInterval`], the prior work's comparison of adjacent fixed intervals.

use crate::{Counts, Label, Signature};
use std::collections::{HashMap, VecDeque};

/// How the trailing window behaves (§4.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The TW keeps its size; the oldest interval drops off.
    Constant,
    /// In a phase the TW grows to hold the whole phase; at its end it is reset.
    Adaptive,
    /// Constant, TW = CW, one comparison per CW (adjacent fixed intervals).
    FixedInterval,
}

/// How two windows become one similarity in [0, 1] (§4.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// Working sets: |WS(CW) ∩ WS(TW)| / |WS(CW)|, where a window's working set is the
    /// elements holding at least 1% of its weight (pepper's elements are functions, and
    /// nearly every function runs in every window at some count; the dissertation's
    /// elements were single branches).
    Unweighted,
    /// Σ min of the two windows' normalised weights.
    Weighted,
}

/// How a similarity becomes P or T (§4.1.3).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Analyzer {
    /// P when the similarity is at least τ.
    Threshold(f64),
    /// Enters a phase at `enter` (the dissertation leaves the entry rule open), stays in
    /// it while the similarity is at least the phase's running mean minus `delta`.
    Average { enter: f64, delta: f64 },
}

/// One detector configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectorConfig {
    pub window: Window,
    /// Intervals in the current window.
    pub cw: usize,
    /// Intervals in the trailing window (its starting size, for `Adaptive`).
    pub tw: usize,
    pub model: Model,
    pub analyzer: Analyzer,
    /// Report a phase's start retroactively at its anchor (§4.3.5: one past the newest
    /// trailing-window interval unlike the current window, "RN"), rather than when the
    /// detector notices it.
    pub anchor: bool,
}

impl DetectorConfig {
    /// The dissertation's recommendation (§4.3: CW = ½ MPL, adaptive trailing window,
    /// anchored starts) with what pepper's sweep of every configuration found best: the
    /// weighted model, which function-level elements favour, and a 0.9 threshold.
    pub fn recommended(mpl: usize) -> DetectorConfig {
        let cw = (mpl / 2).max(1);
        DetectorConfig {
            window: Window::Adaptive,
            cw,
            tw: cw,
            model: Model::Weighted,
            analyzer: Analyzer::Threshold(0.9),
            anchor: true,
        }
    }

    /// A short name for tables: `adaptive cw4 tw4 weighted threshold 0.8 anchored`.
    pub fn name(&self) -> String {
        let (w, rest) = self.policies();
        format!("{w} cw{} tw{} {rest}", self.cw, self.tw)
    }

    /// The name without window sizes: `adaptive weighted threshold 0.8 anchored`.
    pub fn policy_name(&self) -> String {
        let (w, rest) = self.policies();
        format!("{w} {rest}")
    }

    /// The window policy's name, and the model's, analyzer's and anchoring's.
    fn policies(&self) -> (&'static str, String) {
        let w = match self.window {
            Window::Constant => "constant",
            Window::Adaptive => "adaptive",
            Window::FixedInterval => "fixed-interval",
        };
        let m = match self.model {
            Model::Unweighted => "unweighted",
            Model::Weighted => "weighted",
        };
        let a = match self.analyzer {
            Analyzer::Threshold(t) => format!("threshold {t}"),
            Analyzer::Average { enter, delta } => format!("average {enter}-{delta}"),
        };
        let anchor = if self.anchor { " anchored" } else { "" };
        (w, format!("{m} {a}{anchor}"))
    }
}

/// A window's running sum.
#[derive(Default)]
struct Sum {
    counts: HashMap<u32, u64>,
    total: u64,
}

impl Sum {
    fn add(&mut self, c: &Counts) {
        for &(e, n) in c {
            *self.counts.entry(e).or_default() += n;
            self.total += n;
        }
    }

    fn remove(&mut self, c: &Counts) {
        for &(e, n) in c {
            if let Some(v) = self.counts.get_mut(&e) {
                *v -= n;
                if *v == 0 {
                    self.counts.remove(&e);
                }
            }
            self.total -= n;
        }
    }

    fn clear(&mut self) {
        self.counts.clear();
        self.total = 0;
    }

    fn share(&self, e: u32) -> f64 {
        self.counts
            .get(&e)
            .map_or(0.0, |&n| n as f64 / self.total as f64)
    }

    fn signature(&self) -> Signature {
        let mut v: Vec<(u32, u64)> = self.counts.iter().map(|(&e, &n)| (e, n)).collect();
        v.sort_unstable();
        Signature::new(&v)
    }
}

/// What one step of the detector decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub in_phase: bool,
    /// A phase started: its first interval (the anchor, or this interval).
    pub started: Option<usize>,
    /// The phase ended before this interval.
    pub ended: bool,
}

/// The detector over a stream of intervals.
pub struct Detector {
    cfg: DetectorConfig,
    cw: VecDeque<(usize, Vec<(u32, u64)>)>,
    tw: VecDeque<(usize, Vec<(u32, u64)>)>,
    cw_sum: Sum,
    tw_sum: Sum,
    in_phase: bool,
    mean: (f64, u64),
    next: usize,
    since_eval: usize,
    /// The interval at which the last phase ended: an anchor never reaches back past it,
    /// so two phases stay two.
    last_end: Option<usize>,
}

/// Elements below this share of a window are not in its working set.
const WORKING_SET_SHARE: f64 = 0.01;

impl Detector {
    pub fn new(cfg: DetectorConfig) -> Detector {
        let mut cfg = cfg;
        cfg.cw = cfg.cw.max(1);
        cfg.tw = if cfg.window == Window::FixedInterval {
            cfg.cw
        } else {
            cfg.tw.max(1)
        };
        Detector {
            cfg,
            cw: VecDeque::new(),
            tw: VecDeque::new(),
            cw_sum: Sum::default(),
            tw_sum: Sum::default(),
            in_phase: false,
            mean: (0.0, 0),
            next: 0,
            since_eval: 0,
            last_end: None,
        }
    }

    pub fn config(&self) -> &DetectorConfig {
        &self.cfg
    }

    /// Consumes the next interval.
    pub fn push(&mut self, counts: &Counts) -> Step {
        let idx = self.next;
        self.next += 1;
        self.cw.push_back((idx, counts.to_vec()));
        self.cw_sum.add(counts);
        if self.cw.len() > self.cfg.cw {
            let old = self.cw.pop_front().expect("cw is not empty");
            self.cw_sum.remove(&old.1);
            self.tw_sum.add(&old.1);
            self.tw.push_back(old);
            let grows = self.cfg.window == Window::Adaptive && self.in_phase;
            while !grows && self.tw.len() > self.cfg.tw {
                let gone = self.tw.pop_front().expect("tw is not empty");
                self.tw_sum.remove(&gone.1);
            }
        }
        let quiet = Step {
            in_phase: self.in_phase,
            started: None,
            ended: false,
        };
        if self.cw.len() < self.cfg.cw || self.tw.len() < self.cfg.tw {
            return quiet;
        }
        if self.cfg.window == Window::FixedInterval {
            self.since_eval += 1;
            if self.since_eval < self.cfg.cw {
                return quiet;
            }
            self.since_eval = 0;
        }
        let sim = self.similarity();
        let now = match self.cfg.analyzer {
            Analyzer::Threshold(t) => sim >= t,
            Analyzer::Average { enter, delta } => {
                if self.in_phase && self.mean.1 > 0 {
                    sim >= self.mean.0 - delta
                } else {
                    sim >= enter
                }
            }
        };
        let mut step = Step {
            in_phase: now,
            started: None,
            ended: false,
        };
        match (self.in_phase, now) {
            (false, true) => {
                step.started = Some(if self.cfg.anchor { self.anchor() } else { idx });
                self.mean = (0.0, 0);
            }
            (true, false) => {
                step.ended = true;
                self.last_end = Some(idx);
                self.tw.clear();
                self.tw_sum.clear();
                while self.cw.len() > 1 {
                    let gone = self.cw.pop_front().expect("cw is not empty");
                    self.cw_sum.remove(&gone.1);
                }
            }
            (true, true) => {
                let (m, n) = self.mean;
                self.mean = ((m * n as f64 + sim) / (n + 1) as f64, n + 1);
            }
            (false, false) => {}
        }
        self.in_phase = now;
        step
    }

    fn similarity(&self) -> f64 {
        match self.cfg.model {
            Model::Weighted => self.cw_sum.signature().overlap(&self.tw_sum.signature()),
            Model::Unweighted => {
                let ws: Vec<u32> = self
                    .cw_sum
                    .counts
                    .keys()
                    .copied()
                    .filter(|&e| self.cw_sum.share(e) >= WORKING_SET_SHARE)
                    .collect();
                if ws.is_empty() {
                    return 0.0;
                }
                let common = ws
                    .iter()
                    .filter(|&&e| self.tw_sum.share(e) >= WORKING_SET_SHARE)
                    .count();
                common as f64 / ws.len() as f64
            }
        }
    }

    /// RN anchoring: one past the newest trailing interval unlike the current window
    /// ("noisy"); the trailing window then starts there (Move).
    fn anchor(&mut self) -> usize {
        let noise = match self.cfg.analyzer {
            Analyzer::Threshold(t) => t,
            Analyzer::Average { enter, .. } => enter,
        };
        let cw = self.cw_sum.signature();
        let keep = self
            .tw
            .iter()
            .rposition(|(_, c)| Signature::new(c).overlap(&cw) < noise)
            .map_or(0, |i| i + 1);
        for _ in 0..keep {
            let gone = self.tw.pop_front().expect("within the tw");
            self.tw_sum.remove(&gone.1);
        }
        let front = self
            .tw
            .front()
            .or(self.cw.front())
            .map(|(i, _)| *i)
            .expect("windows are full");
        front.max(self.last_end.map_or(0, |e| e + 1))
    }
}

/// Runs a detector over a whole time line: per interval, the number of the detected
/// phase it is in (or `None`), with anchored starts applied retroactively.
pub fn detect(cfg: DetectorConfig, intervals: &[&Counts]) -> Vec<Label> {
    let mut d = Detector::new(cfg);
    let mut out = Vec::with_capacity(intervals.len());
    let mut phase = 0;
    for c in intervals {
        let step = d.push(c);
        if let Some(s) = step.started {
            phase += 1;
            let i = out.len();
            out[s.min(i)..i].fill(Some(phase));
        }
        out.push(step.in_phase.then_some(phase));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{finder, score};

    /// Planted: 12 of A, 12 of B, 12 of A, with a few noise intervals at the switches.
    fn planted() -> (Vec<Vec<(u32, u64)>>, Vec<Label>) {
        let mut v = Vec::new();
        let mut truth = Vec::new();
        for (block, len) in [(0u32, 12), (9, 1), (1, 12), (9, 1), (0, 12)] {
            for k in 0..len {
                let c = match block {
                    0 => vec![(1, 100 + k), (2, 40)],
                    1 => vec![(5, 90), (6, 60 + k)],
                    _ => vec![(1, 30), (5, 30), (7, 40)],
                };
                v.push(c);
                truth.push((block != 9).then_some(truth.len() as u32 / 13));
            }
        }
        (v, truth)
    }

    #[test]
    fn every_policy_finds_long_planted_phases() {
        let (v, truth) = planted();
        let refs: Vec<&Counts> = v.iter().map(|c| &c[..]).collect();
        for window in [Window::Constant, Window::Adaptive, Window::FixedInterval] {
            for model in [Model::Weighted, Model::Unweighted] {
                let cfg = DetectorConfig {
                    window,
                    cw: 2,
                    tw: 2,
                    model,
                    analyzer: Analyzer::Threshold(0.8),
                    anchor: true,
                };
                let got = detect(cfg, &refs);
                let s = score(&truth, &got, &vec![1; got.len()]);
                assert!(s.score > 0.75, "{}: {s:?} {got:?}", cfg.name());
                // Adjacent fixed intervals see a switch only at their own granularity.
                if window != Window::FixedInterval {
                    assert_eq!(s.sensitivity, 1.0, "{}: {got:?}", cfg.name());
                }
            }
        }
    }

    #[test]
    fn anchoring_starts_phases_earlier() {
        let (v, truth) = planted();
        let refs: Vec<&Counts> = v.iter().map(|c| &c[..]).collect();
        let mut cfg = DetectorConfig::recommended(8);
        cfg.anchor = false;
        let late = score(&truth, &detect(cfg, &refs), &vec![1; truth.len()]);
        cfg.anchor = true;
        let anchored = score(&truth, &detect(cfg, &refs), &vec![1; truth.len()]);
        assert!(
            anchored.correlation > late.correlation,
            "{anchored:?} {late:?}"
        );
        // And the offline finder agrees with the planted truth.
        let sigs: Vec<Signature> = v.iter().map(|c| Signature::new(c)).collect();
        let ids = finder::cluster(&sigs, 0.5);
        let found: Vec<bool> = finder::oracle(&ids, 4)
            .iter()
            .map(Option::is_some)
            .collect();
        assert_eq!(found, truth.iter().map(Option::is_some).collect::<Vec<_>>());
    }

    #[test]
    fn average_analyzer_leaves_a_phase_when_similarity_drops() {
        let mut d = Detector::new(DetectorConfig {
            window: Window::Constant,
            cw: 1,
            tw: 1,
            model: Model::Weighted,
            analyzer: Analyzer::Average {
                enter: 0.6,
                delta: 0.05,
            },
            anchor: false,
        });
        let a = [(1u32, 10u64)];
        let b = [(2u32, 10u64)];
        assert!(!d.push(&a).in_phase);
        assert!(d.push(&a).in_phase);
        assert!(d.push(&a).in_phase);
        let s = d.push(&b);
        assert!(!s.in_phase && s.ended);
    }
}
