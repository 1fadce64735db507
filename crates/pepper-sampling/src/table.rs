//! A fixed-capacity weight table for sampled paths: the sampler's hot path never allocates.

/// Open addressing with linear probing over `u64` keys (pepper's tagged path words, never
/// `u64::MAX`), each with a sample count and an accumulated weight (the executions the
/// samples stand for). When full, further new keys are counted in
/// [`SampleTable::dropped`].
#[derive(Clone, Debug)]
pub struct SampleTable {
    keys: Box<[u64]>,
    counts: Box<[u64]>,
    weights: Box<[f64]>,
    used: usize,
    dropped: u64,
}

const EMPTY: u64 = u64::MAX;

impl SampleTable {
    /// A table for up to `capacity` distinct keys (rounded up to a power of two, kept at
    /// most 3/4 full).
    pub fn with_capacity(capacity: usize) -> SampleTable {
        let slots = (capacity.max(1) * 4 / 3 + 1).next_power_of_two();
        SampleTable {
            keys: vec![EMPTY; slots].into_boxed_slice(),
            counts: vec![0; slots].into_boxed_slice(),
            weights: vec![0.0; slots].into_boxed_slice(),
            used: 0,
            dropped: 0,
        }
    }

    fn slot(&self, key: u64) -> usize {
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (key >> 29);
        (h as usize) & (self.keys.len() - 1)
    }

    /// Adds one sample of `key` standing for `weight` executions. Returns false if the
    /// table is full and the sample dropped.
    pub fn add(&mut self, key: u64, weight: f64) -> bool {
        debug_assert_ne!(key, EMPTY);
        let mask = self.keys.len() - 1;
        let mut i = self.slot(key);
        loop {
            if self.keys[i] == key {
                self.counts[i] += 1;
                self.weights[i] += weight;
                return true;
            }
            if self.keys[i] == EMPTY {
                if (self.used + 1) * 4 > self.keys.len() * 3 {
                    self.dropped += 1;
                    return false;
                }
                self.keys[i] = key;
                self.counts[i] = 1;
                self.weights[i] = weight;
                self.used += 1;
                return true;
            }
            i = (i + 1) & mask;
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

    /// (key, estimated executions) pairs, sorted by key: the accumulated weight rounded,
    /// at least 1 for every sampled key.
    pub fn estimates(&self) -> Vec<(u64, u64)> {
        self.collect(|i| (self.weights[i].round() as u64).max(1))
    }

    fn collect(&self, value: impl Fn(usize) -> u64) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = (0..self.keys.len())
            .filter(|&i| self.keys[i] != EMPTY)
            .map(|i| (self.keys[i], value(i)))
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
        fn counts_like_a_map(keys in proptest::collection::vec(0u64..50, 0..400)) {
            let mut t = SampleTable::with_capacity(64);
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
    fn full_table_drops_and_counts() {
        let mut t = SampleTable::with_capacity(3);
        let cap = t.keys.len() * 3 / 4;
        for k in 0..cap as u64 {
            assert!(t.add(k, 1.0));
        }
        assert!(!t.add(1000, 1.0));
        assert!(t.add(0, 1.0), "existing keys still count");
        assert_eq!(t.dropped(), 1);
        assert_eq!(t.len(), cap);
    }
}
