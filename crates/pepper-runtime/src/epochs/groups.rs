//! Ephemeral windows in random groups, for how sure each branch's bias is.
//!
//! A window records a stretch of the run, and a branch's outcomes in one stretch are far
//! from independent: a loop whose bias drifts (bzip2's sort, scanning buckets it has
//! done more of as it goes) gives each window one value of it. A binomial margin on the
//! recorded outcomes then claims a precision the run does not have. The survey
//! statisticians' answer is the random groups method (Mahalanobis' interpenetrating
//! subsamples; Wolter, *Introduction to Variance Estimation*, ch. 2): split the sample
//! into groups at random, estimate from each, and let the spread of the groups' estimates
//! say how far the whole sample's may be off.
//!
//! Clean code counts nothing, so pepper's counters only move in windows (and in functions
//! that never switch, whose counts are exact anyway). After a window closes this thread
//! reads the counters and adds what moved since its last read to one group's copy. A
//! read costs a pass over the counters, so reads come at most every
//! [`PASS_SHARE`]⁻¹ times a pass's own time, and the windows between two reads (a batch)
//! go to the same group. Batches go to groups in a random order within each run of
//! [`GROUPS`] batches, so every group gets its share of every part of the run. The groups
//! sum to the counters at the end ([`WindowGroups::into_images`]).

use crate::memview::MemView;
use crate::pick::Pick;
use std::time::{Duration, Instant};

/// Groups the windows are split into (the t quantile for 15 degrees of freedom is
/// 2.13: more groups would narrow it little, and each costs a copy of the counters).
pub(crate) const GROUPS: usize = 16;

/// The share of this thread's time that reading counters may take.
const PASS_SHARE: u32 = 50;

/// Counters beyond this many bytes get no groups (binomial margins only): the groups
/// hold [`GROUPS`] copies of them.
const MAX_BYTES: u64 = 8 << 20;

/// The counters' deltas so far, per group.
pub(crate) struct WindowGroups {
    view: MemView,
    words: usize,
    /// The counters at the last read.
    last: Vec<u64>,
    scratch: Vec<u64>,
    groups: Vec<Vec<u64>>,
    /// Which group each batch of the current run of [`GROUPS`] goes to.
    order: [usize; GROUPS],
    /// Batches closed so far (the current one is number `batch`).
    batch: usize,
    /// The last read's end, and how long it took.
    read_at: Instant,
    pass: Duration,
}

impl WindowGroups {
    /// Groups over the first `bytes` of `view` (pepper's memory in use), the counters as
    /// they are now (before the first window) their zero; `None` for none or over
    /// [`MAX_BYTES`].
    pub(crate) fn new(view: MemView, bytes: u64, pick: &mut Pick) -> Option<WindowGroups> {
        if bytes == 0 || bytes > MAX_BYTES {
            return None;
        }
        let words = (bytes as usize / 8).min(view.len / 8);
        let mut last = Vec::with_capacity(words);
        let start = Instant::now();
        view.u64s_into(0, words, &mut last);
        let mut g = WindowGroups {
            view,
            words,
            last,
            scratch: Vec::with_capacity(words),
            groups: vec![Vec::new(); GROUPS],
            order: std::array::from_fn(|k| k),
            batch: 0,
            read_at: Instant::now(),
            pass: start.elapsed(),
        };
        g.shuffle(pick);
        Some(g)
    }

    /// A window has just closed: ends the current batch if reads are due.
    pub(crate) fn window_closed(&mut self, pick: &mut Pick) {
        if self.read_at.elapsed() < self.pass * PASS_SHARE {
            return;
        }
        let start = Instant::now();
        self.scratch.clear();
        self.view.u64s_into(0, self.words, &mut self.scratch);
        let now = std::mem::take(&mut self.scratch);
        self.add(&now);
        self.scratch = std::mem::replace(&mut self.last, now);
        self.batch += 1;
        if self.batch.is_multiple_of(GROUPS) {
            self.shuffle(pick);
        }
        self.read_at = Instant::now();
        self.pass = start.elapsed();
    }

    /// Adds `now - last` to the current batch's group.
    fn add(&mut self, now: &[u64]) {
        let g = &mut self.groups[self.order[self.batch % GROUPS]];
        if g.is_empty() {
            g.resize(self.words, 0);
        }
        for ((sum, &new), &old) in g.iter_mut().zip(now).zip(&self.last) {
            *sum = sum.wrapping_add(new.wrapping_sub(old));
        }
    }

    fn shuffle(&mut self, pick: &mut Pick) {
        for k in (1..GROUPS).rev() {
            let j = pick.below(k as u64 + 1) as usize;
            self.order.swap(k, j);
        }
    }

    /// Each group that got a batch, as an image of pepper's memory holding that group's
    /// counts, the counters' last state `end` (pepper's memory at the run's end) going to
    /// the batch still open: the images sum to `end` less the counters' start.
    pub(crate) fn into_images(mut self, end: &[u8]) -> Vec<Vec<u8>> {
        let end: Vec<u64> = end
            .chunks_exact(8)
            .take(self.words)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .collect();
        if end.len() == self.words {
            self.add(&end);
        }
        self.groups
            .into_iter()
            .filter(|g| !g.is_empty())
            .map(|g| g.iter().flat_map(|w| w.to_le_bytes()).collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every batch's increments land in one group, every group gets a batch in each run of
    /// `GROUPS`, and the groups sum to the counters' change.
    #[test]
    fn groups_split_the_counters_change_and_sum_to_it() {
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        let words: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
        words[0].store(7, Relaxed); // a counter's value before the first window is not counted
        let view = MemView {
            ptr: words.as_ptr() as usize,
            len: 32,
        };
        let mut pick = Pick(Pick::SEED);
        let mut g = WindowGroups::new(view, 32, &mut pick).unwrap();
        g.pass = Duration::ZERO; // a read after every window
        for batch in 0..2 * GROUPS as u64 {
            words[1].fetch_add(1, Relaxed);
            words[2].fetch_add(batch, Relaxed);
            g.window_closed(&mut pick);
            g.pass = Duration::ZERO;
        }
        words[3].store(5, Relaxed); // after the last read: the open batch
        let end: Vec<u8> = words
            .iter()
            .flat_map(|w| w.load(Relaxed).to_le_bytes())
            .collect();
        let images = g.into_images(&end);
        assert_eq!(images.len(), GROUPS);
        let read =
            |img: &Vec<u8>, k: usize| u64::from_le_bytes(img[8 * k..8 * k + 8].try_into().unwrap());
        for img in &images {
            assert_eq!(read(img, 0), 0);
            // Two batches each (one per run of GROUPS), one increment per batch.
            assert_eq!(read(img, 1), 2);
        }
        let sum = |k| images.iter().map(|img| read(img, k)).sum::<u64>();
        assert_eq!(sum(1), 2 * GROUPS as u64);
        assert_eq!(sum(2), (0..2 * GROUPS as u64).sum::<u64>());
        assert_eq!(sum(3), 5);
        // The batches went to the groups in a shuffled order, not in turn.
        let firsts: Vec<u64> = images.iter().map(|img| read(img, 2)).collect();
        let mut sorted = firsts.clone();
        sorted.sort_unstable();
        assert_ne!(firsts, sorted);
    }
}
