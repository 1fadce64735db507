//! Simplified Arnold-Grove sampling, PEP(SAMPLES, STRIDE) (PEP §4.4).
//!
//! After each timer tick, skip between 0 and STRIDE-1 path ends (the skip rotates through
//! 1..=STRIDE so that ticks falling at a fixed phase of a loop don't always pick the same
//! path), then record SAMPLES consecutive path ends. PEP(1, 1) is plain timer sampling.
//! Ticks during an active burst are ignored. Only path ends (loop headers, function exits)
//! are sampling opportunities, so every sample is a complete path.

/// PEP(SAMPLES, STRIDE).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PepParams {
    pub samples: u32,
    pub stride: u32,
}

impl Default for PepParams {
    /// PEP(64, 17): the paper's recommended configuration.
    fn default() -> Self {
        PepParams {
            samples: 64,
            stride: 17,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Skipping(u32),
    Sampling(u32),
}

/// What to do with one path end.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not sampled.
    Pass,
    /// Record this path.
    Sample,
}

/// The state machine of PEP Fig. 5 (simplified Arnold-Grove).
#[derive(Clone, Debug)]
pub struct ArnoldGrove {
    params: PepParams,
    state: State,
    next_stride: u32,
}

impl ArnoldGrove {
    pub fn new(params: PepParams) -> ArnoldGrove {
        ArnoldGrove {
            params: PepParams {
                samples: params.samples.max(1),
                stride: params.stride.max(1),
            },
            state: State::Idle,
            next_stride: 1,
        }
    }

    /// A timer tick: arm a burst unless one is in progress. Returns whether it armed.
    pub fn on_tick(&mut self) -> bool {
        if self.state != State::Idle {
            return false;
        }
        self.state = State::Skipping(self.next_stride - 1);
        self.next_stride = self.next_stride % self.params.stride + 1;
        true
    }

    /// Whether a burst is in progress (the guest's flag, in Jikes RVM terms).
    pub fn armed(&self) -> bool {
        self.state != State::Idle
    }

    /// A path end while armed (call only when [`armed`](Self::armed); otherwise a pass).
    pub fn on_path_end(&mut self) -> Decision {
        let (next, decision) = match self.state {
            State::Idle => (State::Idle, Decision::Pass),
            State::Skipping(0) | State::Sampling(0) => {
                let left = match self.state {
                    State::Skipping(_) => self.params.samples - 1,
                    _ => 0,
                };
                let next = if left > 0 {
                    State::Sampling(left)
                } else {
                    State::Idle
                };
                (next, Decision::Sample)
            }
            State::Skipping(k) => (State::Skipping(k - 1), Decision::Pass),
            State::Sampling(k) => (
                if k > 1 {
                    State::Sampling(k - 1)
                } else {
                    State::Idle
                },
                Decision::Sample,
            ),
        };
        self.state = next;
        decision
    }

    /// Path ends still needed to finish the current burst (0 when idle).
    pub fn pending(&self) -> u64 {
        match self.state {
            State::Idle => 0,
            State::Skipping(k) => k as u64 + self.params.samples as u64,
            State::Sampling(k) => k as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a schedule: `events` is a string of `T` (tick) and `.` (path end); returns the
    /// indices of the path ends sampled.
    fn run(params: PepParams, events: &str) -> Vec<usize> {
        let mut ag = ArnoldGrove::new(params);
        let mut out = Vec::new();
        let mut k = 0;
        for c in events.chars() {
            match c {
                'T' => {
                    ag.on_tick();
                }
                '.' => {
                    if ag.armed() && ag.on_path_end() == Decision::Sample {
                        out.push(k);
                    }
                    k += 1;
                }
                _ => unreachable!(),
            }
        }
        out
    }

    #[test]
    fn pep_1_1_is_timer_sampling() {
        // One sample per tick: the first path end after it.
        let p = PepParams {
            samples: 1,
            stride: 1,
        };
        assert_eq!(run(p, "..T...T.T.."), vec![2, 5, 6]);
    }

    #[test]
    fn pep_4_3_strides_then_takes_consecutive_samples() {
        // Fig. 5 shape, SAMPLES = 4, STRIDE = 3: the skip before the first sample rotates
        // 0, 1, 2, 0, ...; then 4 consecutive samples.
        let p = PepParams {
            samples: 4,
            stride: 3,
        };
        // tick 1: skip 0 -> samples 0,1,2,3
        // tick 2 (before end 6): skip 1 -> samples 7,8,9,10
        // tick 3 (before end 12): skip 2 -> samples 14,15,16,17
        // tick 4 (before end 20): skip 0 -> samples 20..23
        let ev = "T......T......T........T....";
        assert_eq!(
            run(p, ev),
            vec![0, 1, 2, 3, 7, 8, 9, 10, 14, 15, 16, 17, 20, 21, 22, 23]
        );
    }

    #[test]
    fn ticks_during_a_burst_are_ignored() {
        let p = PepParams {
            samples: 3,
            stride: 1,
        };
        // The second tick arrives mid-burst and is dropped; the third arms a new burst.
        assert_eq!(run(p, "T.T..T.."), vec![0, 1, 2, 3, 4]);
        let mut ag = ArnoldGrove::new(p);
        assert!(ag.on_tick());
        assert!(!ag.on_tick());
        assert_eq!(ag.pending(), 3);
    }

    #[test]
    fn pep_64_17_takes_64_after_skipping_up_to_16() {
        let p = PepParams::default();
        let mut ag = ArnoldGrove::new(p);
        for tick in 0..40u32 {
            assert!(ag.on_tick());
            let skip = tick % 17;
            assert_eq!(ag.pending(), skip as u64 + 64);
            let mut taken = Vec::new();
            for i in 0..200 {
                if ag.armed() && ag.on_path_end() == Decision::Sample {
                    taken.push(i);
                }
            }
            let want: Vec<u32> = (skip..skip + 64).collect();
            assert_eq!(taken, want, "tick {tick}");
        }
    }
}
