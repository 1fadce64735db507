//! The switch's flag word as pepper's threads write it. It is always a word of pepper's
//! own memory: the threads write it while the guest runs, and nothing of pepper's may be
//! where the program can read or write.

use crate::memview::MemView;
use anyhow::{Context, Result};

/// Where a module-wide switch flag is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FlagWord {
    /// Its byte address in pepper's memory.
    pub at: u32,
}

impl FlagWord {
    /// The module-wide flag of `guest` (PEP's bursts, ephemeral windows).
    pub fn of(guest: &pepper_layout::Guest) -> FlagWord {
        FlagWord {
            at: guest.layout.switch_flag,
        }
    }
}

/// A flag word this process can write while the guest runs.
#[derive(Copy, Clone)]
pub(crate) struct Flag {
    view: MemView,
    at: u32,
}

impl Flag {
    /// The flag `word` in pepper's memory `counters`.
    pub(crate) fn new(word: FlagWord, counters: Option<MemView>) -> Result<Flag> {
        let view = counters.context("switch: the module has no counters memory")?;
        anyhow::ensure!(
            (word.at as usize) + 4 <= view.len && word.at.is_multiple_of(4),
            "switch: the flag at {} is outside its memory of {} bytes",
            word.at,
            view.len
        );
        Ok(Flag { view, at: word.at })
    }

    /// A flag at `at` of `view` (tests).
    #[cfg(test)]
    pub(crate) fn at(view: MemView, at: u32) -> Flag {
        Flag { view, at }
    }

    /// Sets the flag (`on`) or clears it, swapping only 0 for 1 or 1 for 0, so that a
    /// value the guest's own code keeps there (`--switch-chaos`'s generator) stays. The
    /// guest's own clear, at a burst's limit, is the same swap.
    pub(crate) fn set(&self, on: bool) {
        let (from, to) = (u32::from(!on), u32::from(on));
        self.view.cas_u32(self.at, from, to);
    }

    /// Whether the flag is set.
    pub(crate) fn is_set(&self) -> bool {
        self.view.u32_at(self.at) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag swaps 0 and 1 only: setting an already set flag, or clearing a clear one
    /// (the guest ended the burst first), changes nothing; any other value stays.
    #[test]
    fn only_zero_and_one_are_swapped() {
        let mut words = vec![0u32; 4];
        // Every access below goes through the view, as the guest's and the threads' do.
        let view = MemView {
            ptr: words.as_mut_ptr() as usize,
            len: 16,
        };
        let flag = Flag::at(view, 8);
        flag.set(true);
        assert!(flag.is_set());
        flag.set(true);
        assert!(flag.is_set(), "set twice");
        flag.set(false);
        assert!(!flag.is_set());
        flag.set(false);
        assert_eq!(view.u32_at(8), 0, "cleared twice");
        // The guest's chaos generator keeps 7 there.
        view.set_u32(8, 7);
        flag.set(true);
        flag.set(false);
        assert_eq!(view.u32_at(8), 7, "the guest's value was overwritten");
        drop(words);
    }
}
