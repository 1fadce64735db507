//! The phase tracker of phase-aware profiling (Ch. 6 of the dissertation): each finished
//! interval is classified into a phase as it ends, and the profiler samples one
//! representative interval per phase.

use crate::Signature;

/// One phase the tracker knows.
#[derive(Clone, Debug)]
struct Known {
    centroid: Signature,
    intervals: u64,
    samples: u32,
}

/// Online phase classification (leader clustering in time order against each phase's
/// centroid, as [`crate::cluster`] does offline) with a representative rule: the
/// `nth` interval of each new phase is sampled (the dissertation's rule is the *third*,
/// §6.3.1: the first ones carry the transition into it), and, optionally, every
/// `every`-th interval of a phase again (a phase whose code drifts slowly stays under
/// the distance threshold while its profile moves away from its one sample). Which phase
/// the next interval belongs to is predicted to be the last one's (the dissertation
/// assumed a perfect predictor).
#[derive(Clone, Debug)]
pub struct Tracker {
    threshold: f64,
    nth: u64,
    every: u64,
    phases: Vec<Known>,
    last: Option<usize>,
}

impl Tracker {
    /// Intervals within `threshold` (Manhattan distance, [0, 2]) of a phase's centroid
    /// belong to it; a lower threshold finds more phases and samples more.
    /// With the dissertation's rule: the third interval of each phase, once.
    pub fn new(threshold: f64) -> Tracker {
        Tracker {
            threshold,
            nth: 3,
            every: 0,
            phases: Vec::new(),
            last: None,
        }
    }

    /// Samples the `nth` interval of each new phase (at least the second: a phase is
    /// known only once its first interval has ended).
    pub fn representative(mut self, nth: u64) -> Tracker {
        self.nth = nth.max(2);
        self
    }

    /// Also samples every `every`-th interval of each phase (0: never again).
    pub fn resample_every(mut self, every: u64) -> Tracker {
        self.every = every;
        self
    }

    /// Classifies a finished interval; returns its phase.
    pub fn classify(&mut self, sig: &Signature) -> usize {
        let best = self
            .phases
            .iter()
            .enumerate()
            .map(|(k, p)| (k, p.centroid.distance(sig)))
            .filter(|&(_, d)| d <= self.threshold)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let k = match best {
            Some((k, _)) => {
                let p = &mut self.phases[k];
                p.centroid = p.centroid.mean_with(p.intervals, sig);
                p.intervals += 1;
                k
            }
            None => {
                self.phases.push(Known {
                    centroid: sig.clone(),
                    intervals: 1,
                    samples: 0,
                });
                self.phases.len() - 1
            }
        };
        self.last = Some(k);
        k
    }

    /// Should the next interval be profiled? The next one is predicted to be in the
    /// last one's phase: when that phase has no sample yet and the next would be its
    /// `nth` interval or later, or the next is a multiple of `every`.
    pub fn wants_sample(&self) -> bool {
        self.last.map(|k| &self.phases[k]).is_some_and(|p| {
            let next = p.intervals + 1;
            (p.samples == 0 && next >= self.nth) || (self.every > 0 && next % self.every == 0)
        })
    }

    /// Records that an interval of `phase` was profiled.
    pub fn sampled(&mut self, phase: usize) {
        self.phases[phase].samples += 1;
    }

    /// Phases found so far.
    pub fn len(&self) -> usize {
        self.phases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.phases.is_empty()
    }

    /// Intervals of `phase` so far.
    pub fn intervals(&self, phase: usize) -> u64 {
        self.phases[phase].intervals
    }

    /// Profiled intervals of `phase`.
    pub fn samples(&self, phase: usize) -> u32 {
        self.phases[phase].samples
    }

    /// The profiled phase whose centroid is nearest `phase`'s (itself when profiled):
    /// whose profile stands in for a phase too short ever to be sampled.
    pub fn stand_in(&self, phase: usize) -> Option<usize> {
        let me = &self.phases[phase].centroid;
        (0..self.phases.len())
            .filter(|&k| self.phases[k].samples > 0)
            .min_by(|&a, &b| {
                let da = self.phases[a].centroid.distance(me);
                let db = self.phases[b].centroid.distance(me);
                da.total_cmp(&db).then(a.cmp(&b))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_the_third_interval_of_each_new_phase() {
        let a = Signature::new(&[(1, 10)]);
        let b = Signature::new(&[(2, 10)]);
        let mut t = Tracker::new(0.5);
        let mut sampled_at = Vec::new();
        let mut sample_next = false;
        for (i, s) in [&a, &a, &a, &a, &b, &b, &b, &b, &a, &a]
            .into_iter()
            .enumerate()
        {
            let p = t.classify(s);
            if sample_next {
                t.sampled(p);
                sampled_at.push(i);
            }
            sample_next = t.wants_sample();
        }
        assert_eq!(sampled_at, vec![2, 6]);
        assert_eq!((t.len(), t.intervals(0), t.intervals(1)), (2, 6, 4));
        assert_eq!(t.stand_in(1), Some(1));
    }

    #[test]
    fn second_interval_and_resampling() {
        let a = Signature::new(&[(1, 10)]);
        let mut t = Tracker::new(0.5).representative(2).resample_every(4);
        let mut sampled_at = Vec::new();
        let mut sample_next = false;
        for i in 0..10 {
            let p = t.classify(&a);
            if sample_next {
                t.sampled(p);
                sampled_at.push(i);
            }
            sample_next = t.wants_sample();
        }
        // The second interval, then the 4th and 8th of the phase.
        assert_eq!(sampled_at, vec![1, 3, 7]);
    }
}
