//! PEP's path words: the path register carries its function's tag in its top bits, so a
//! word in the ring names both the function and the path (`(func + 1) << 44 | number`).

/// Paths per function must stay below `2^PEP_TAG_SHIFT` so that the function's tag fits
/// above the path number in one 64-bit word.
pub const PEP_TAG_SHIFT: u32 = 44;

/// The tag PEP puts above function `func`'s path numbers (`None` when `func` does not fit
/// in the 20 bits above the number).
pub fn pep_tag(func: u32) -> Option<u64> {
    ((func as u64 + 1) < (1 << (64 - PEP_TAG_SHIFT))).then(|| (func as u64 + 1) << PEP_TAG_SHIFT)
}

/// Splits a PEP path word into (function index, path number); `None` for an untagged word
/// (an empty ring slot).
pub fn pep_untag(word: u64) -> Option<(u32, u64)> {
    let f = word >> PEP_TAG_SHIFT;
    (f > 0).then(|| ((f - 1) as u32, word & ((1 << PEP_TAG_SHIFT) - 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_and_untag_are_inverse() {
        for func in [0, 1, 77, (1 << 20) - 2] {
            let word = pep_tag(func).unwrap() | 12345;
            assert_eq!(pep_untag(word), Some((func, 12345)));
        }
        assert_eq!(pep_tag((1 << 20) - 1), None);
        assert_eq!(pep_untag(12345), None);
    }
}
