//! A weight table for sampled paths: it allocates only when it doubles (a handful of times
//! per run, up to a fixed capacity), so the sampler's hot path otherwise never allocates.

/// Open addressing with linear probing over `u64` keys (pepper's tagged path words, never
/// `u64::MAX`), each with a sample count and an accumulated weight (the executions the
/// samples stand for). When full, further new keys are counted in
/// [`SampleTable::dropped`].
///
/// The table may hold a million distinct paths, but a run usually samples a few thousand,
/// so it starts small and doubles when 3/4 full, up to its capacity: a handful of
/// reallocations in a whole run, on the sampler thread, never in the guest. Allocating the
/// full size up front cost every run about 20 milliseconds once the allocator had recycled
/// the previous run's table (zeroing 48 MB of reused heap), on a core the guest shares.
#[derive(Clone, Debug)]
pub struct SampleTable {
    /// `key + 1`, or 0 for an empty slot.
    keys: Box<[u64]>,
    counts: Box<[u64]>,
    weights: Box<[f64]>,
    used: usize,
    /// Most slots the table grows to.
    max_slots: usize,
    dropped: u64,
}

const EMPTY: u64 = 0;
/// Slots a table starts with (or fewer, when that is its capacity).
const INITIAL_SLOTS: usize = 1 << 12;

impl SampleTable {
    /// A table for up to `capacity` distinct keys (rounded up to a power of two, kept at
    /// most 3/4 full).
    pub fn with_capacity(capacity: usize) -> SampleTable {
        let max_slots = (capacity.max(1) * 4 / 3 + 1).next_power_of_two();
        let slots = max_slots.min(INITIAL_SLOTS);
        SampleTable {
            keys: vec![EMPTY; slots].into_boxed_slice(),
            counts: vec![0; slots].into_boxed_slice(),
            weights: vec![0.0; slots].into_boxed_slice(),
            used: 0,
            max_slots,
            dropped: 0,
        }
    }

    /// The slot holding `stored` (a key plus one), or the empty slot where it would go.
    fn probe(&self, stored: u64) -> usize {
        let key = stored.wrapping_sub(1);
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (key >> 29);
        let mask = self.keys.len() - 1;
        let mut i = (h as usize) & mask;
        while self.keys[i] != stored && self.keys[i] != EMPTY {
            i = (i + 1) & mask;
        }
        i
    }

    /// Adds one sample of `key` standing for `weight` executions. Returns false if the
    /// table is full and the sample dropped.
    pub fn add(&mut self, key: u64, weight: f64) -> bool {
        debug_assert_ne!(key, u64::MAX);
        let stored = key.wrapping_add(1);
        let mut i = self.probe(stored);
        if self.keys[i] == EMPTY {
            if (self.used + 1) * 4 > self.keys.len() * 3 {
                if self.keys.len() >= self.max_slots {
                    self.dropped += 1;
                    return false;
                }
                self.grow();
                i = self.probe(stored);
            }
            self.keys[i] = stored;
            self.used += 1;
        }
        self.counts[i] += 1;
        self.weights[i] += weight;
        true
    }

    /// Doubles the slots and re-inserts every key.
    fn grow(&mut self) {
        let slots = 2 * self.keys.len();
        let keys = std::mem::replace(&mut self.keys, vec![EMPTY; slots].into_boxed_slice());
        let counts = std::mem::replace(&mut self.counts, vec![0; slots].into_boxed_slice());
        let weights = std::mem::replace(&mut self.weights, vec![0.0; slots].into_boxed_slice());
        for (k, &stored) in keys.iter().enumerate() {
            if stored != EMPTY {
                let i = self.probe(stored);
                self.keys[i] = stored;
                self.counts[i] = counts[k];
                self.weights[i] = weights[k];
            }
        }
    }

    /// Samples lost because the table was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn len(&self) -> usize {
        self.used
    }

    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// (key, samples) pairs, sorted by key.
    pub fn entries(&self) -> Vec<(u64, u64)> {
        self.collect(|i| self.counts[i])
    }

    /// Multiplies every weight by `factor`.
    pub fn scale(&mut self, factor: f64) {
        for w in &mut self.weights {
            *w *= factor;
        }
    }

    /// (key, estimated executions) pairs, sorted by key: the accumulated weight rounded,
    /// at least 1 for every sampled key.
    pub fn estimates(&self) -> Vec<(u64, u64)> {
        self.collect(|i| (self.weights[i].round() as u64).max(1))
    }

    fn collect(&self, value: impl Fn(usize) -> u64) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = (0..self.keys.len())
            .filter(|&i| self.keys[i] != EMPTY)
            .map(|i| (self.keys[i] - 1, value(i)))
            .collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #[test]
        fn counts_like_a_map(keys in proptest::collection::vec(prop_oneof![0u64..50, u64::MAX - 50..u64::MAX], 0..400)) {
            let mut t = SampleTable::with_capacity(128);
            let mut m = BTreeMap::new();
            for k in keys {
                prop_assert!(t.add(k, 2.0));
                *m.entry(k).or_insert(0u64) += 1;
            }
            let want: Vec<(u64, u64)> = m.into_iter().collect();
            prop_assert_eq!(&t.entries(), &want);
            let doubled: Vec<(u64, u64)> = want.iter().map(|&(k, c)| (k, 2 * c)).collect();
            prop_assert_eq!(t.estimates(), doubled);
        }
    }

    #[test]
    fn growing_keeps_every_count_and_weight() {
        // From 4,096 slots to 32,768: three doublings, each re-inserting every key.
        let mut t = SampleTable::with_capacity(1 << 20);
        let mut m: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut x: u64 = 7;
        for n in 0..60_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Repeats as well as new keys, and keys near the top of the range.
            let key = if n % 3 == 0 {
                x % 500
            } else {
                x >> 1 | 1 << 63
            } % 20_000
                + (n % 2) * (u64::MAX - 20_001);
            assert!(t.add(key, 3.0));
            let e = m.entry(key).or_default();
            e.0 += 1;
            e.1 += 3;
        }
        assert!(t.keys.len() > INITIAL_SLOTS, "the test must cross a growth");
        assert_eq!(t.len(), m.len());
        let counts: Vec<(u64, u64)> = m.iter().map(|(&k, &(c, _))| (k, c)).collect();
        let weights: Vec<(u64, u64)> = m.iter().map(|(&k, &(_, w))| (k, w)).collect();
        assert_eq!(t.entries(), counts);
        assert_eq!(t.estimates(), weights);
    }

    #[test]
    fn full_table_drops_and_counts() {
        let mut t = SampleTable::with_capacity(3);
        let cap = t.max_slots * 3 / 4;
        for k in 0..cap as u64 {
            assert!(t.add(k, 1.0));
        }
        assert!(!t.add(1000, 1.0));
        assert!(t.add(0, 1.0), "existing keys still count");
        assert_eq!(t.dropped(), 1);
        assert_eq!(t.len(), cap);
    }
}
