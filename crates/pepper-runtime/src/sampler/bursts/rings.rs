//! PEP's bursts over several core modules' rings (a component's instrumented modules):
//! one burst is the path ends every ring holds in one stretch of the guest's time.

use super::{Bursts, MemView, SamplerConfig, SamplerResult};
use crate::flag::Flag;
use pepper_layout::Ring;
use pepper_sampling::SampleTable;
use std::time::{Duration, Instant};

/// One module's ring in bursts over several ([`Bursts::rings`]).
#[derive(Clone)]
pub(super) struct RingState {
    pub(super) mem: MemView,
    pub(super) ring: Ring,
    /// The switch's flag in this module's memory (the primary's is [`Bursts::flag`]) and
    /// the address of its limit.
    pub(super) flag: Option<(Flag, u32)>,
    /// Words, and the margin kept below the head (as [`Bursts::n`], `margin`).
    pub(super) n: u64,
    pub(super) margin: u64,
    pub(super) table: SampleTable,
    /// Its head where this tick's stretch begins.
    pub(super) from: u32,
    /// Which of [`SamplerConfig::modules`] it is (`None`: the primary).
    pub(super) module: Option<usize>,
}

impl Bursts {
    /// A burst over several modules' rings ([`Bursts::rings`]): the path ends each ring
    /// holds from its head at the start of the tick's rate watch (`RingState::from`) to
    /// `to`, weighted as one burst (the rate is every ring's together). Of a stretch of
    /// more than [`RING_DRAW`] path ends in all, the same share of every ring's is taken,
    /// its newest words (on the ring, without the switch, a fast guest overwrites the
    /// older ones within microseconds), every `stride`-th of them (PEP's stride: one on
    /// the switch); words the guest may have overwritten while they were read are lost,
    /// as in [`Bursts::draw`].
    pub(super) fn draw_rings(
        &mut self,
        res: &mut SamplerResult,
        (to, stride): (&[u32], u64),
        rate: Option<f64>,
        off_cpu: bool,
        (cpu0, t0): (Option<Duration>, Instant),
    ) {
        // The state machine's burst is this stretch.
        while self.ag.armed() {
            self.ag.on_path_end();
        }
        let mut words: Vec<(usize, u64)> = Vec::new();
        let (mut marks, mut lost) = (0usize, 0u64);
        let lens: Vec<u64> = (self.rings.iter().zip(to))
            .map(|(r, &to)| to.wrapping_sub(r.from) as u64)
            .collect();
        let share = (RING_DRAW as f64 / lens.iter().sum::<u64>().max(1) as f64).min(1.0);
        for (k, (r, &to)) in self.rings.iter().zip(to).enumerate() {
            let keep = r.n - r.margin;
            let wanted = (lens[k] as f64 * share).ceil() as u64;
            // A ring too short for its share keeps what it can; the rest is lost.
            lost += wanted.saturating_sub(keep);
            let take = wanted.min(keep);
            let from = to.wrapping_sub(take as u32);
            let start = words.len();
            for i in (0..take as u32).step_by(stride as usize) {
                let seq = from.wrapping_add(i);
                let at = r.ring.base + 8 * (seq as u64 % r.n) as u32;
                words.push((k, r.mem.u64_at(at)));
            }
            // Re-read the head: a word `n` or more behind it may have been overwritten
            // (the first words read, every `stride`-th from `from`).
            let behind = r.mem.u32_at(r.ring.head).wrapping_sub(from) as u64;
            let read = (words.len() - start) as u64;
            let overwritten = (behind + 1).saturating_sub(r.n).div_ceil(stride).min(read);
            lost += overwritten;
            words.drain(start..start + overwritten as usize);
            marks += words[start..].iter().filter(|w| w.1 == 0).count();
        }
        res.lost += lost;
        let valid = words.len() - marks;
        let Some(weight) = self.weigh(res, rate, off_cpu, (cpu0, t0), (valid, marks)) else {
            return;
        };
        for (k, word) in words.into_iter().filter(|w| w.1 != 0) {
            if self.rings[k].table.add(word, weight) {
                res.taken += 1;
            } else {
                res.lost += 1;
            }
        }
    }
}

/// The most path ends a burst over several rings reads ([`Bursts::draw_rings`]).
const RING_DRAW: u64 = 4096;

/// The ring's head, or the wrapping sum of the heads of `rings` (the wrapping deltas of a
/// sum are the sum of the rings' while they add up to less than 2^32).
pub(super) fn heads(mem: MemView, cfg: &SamplerConfig, rings: &[RingState]) -> u32 {
    match rings.is_empty() {
        true => mem.u32_at(cfg.head),
        false => (rings.iter()).fold(0u32, |s, r| s.wrapping_add(r.mem.u32_at(r.ring.head))),
    }
}
