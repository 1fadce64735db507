//! A small deterministic random source for the sampler's choices (where a burst starts,
//! when an ephemeral window opens): a xorshift generator, seeded the same way every run
//! (like the Arnold-Grove skip it extends), so a run's choices repeat.

#[derive(Clone)]
pub(crate) struct Pick(pub(crate) u64);

impl Pick {
    /// The seed both users start from (any non-zero word).
    pub(crate) const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

    /// Uniform in `0..n` (`n` > 0; the modulo bias is below 2^-40 for the ranges here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
