//! The switch's flag word as pepper's threads write it: in pepper's memory, or in the
//! program's memory 0 where the module leaves a word there free
//! (`pepper_layout::Guest::guest_flag`: checks then need no base address of pepper's
//! memory, most of what clean code pays).

use crate::memview::MemView;
use anyhow::{Context, Result};

/// Where a module-wide switch flag is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FlagWord {
    /// Its byte address.
    pub at: u32,
    /// In the program's memory 0 (exported as `pepper_layout::GUEST_MEMORY_EXPORT`), not
    /// in pepper's.
    pub in_guest_memory: bool,
}

impl FlagWord {
    /// The module-wide flag of `guest` (PEP's bursts, ephemeral windows).
    pub fn of(guest: &pepper_layout::Guest) -> FlagWord {
        FlagWord {
            at: guest.guest_flag.unwrap_or(guest.layout.switch_flag),
            in_guest_memory: guest.guest_flag.is_some(),
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
    /// The flag `word` in whichever of `views` holds it.
    pub(crate) fn new(word: FlagWord, views: crate::attach::Views) -> Result<Flag> {
        let view = views.holding(word.in_guest_memory).context("switch")?;
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

    /// Sets the flag (`on`) or clears it, swapping only 0 for 1 or 1 for 0: false, and
    /// the word left as it is, when it holds anything else. In the program's memory that
    /// means the program wrote it (through a null pointer, say), and its value is kept.
    /// The guest's own clear is the same swap.
    pub(crate) fn set(&self, on: bool) -> bool {
        let (from, to) = (u32::from(!on), u32::from(on));
        self.view.cas_u32(self.at, from, to) || self.view.u32_at(self.at) == to
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
    /// (the guest ended the burst first), is no overwrite; any other value is the
    /// program's, and stays.
    #[test]
    fn only_zero_and_one_are_swapped() {
        let mut words = vec![0u32; 4];
        // Every access below goes through the view, as the guest's and the threads' do.
        let view = MemView {
            ptr: words.as_mut_ptr() as usize,
            len: 16,
        };
        let flag = Flag::at(view, 8);
        assert!(flag.set(true) && flag.is_set());
        assert!(flag.set(true), "set twice");
        assert!(flag.set(false) && !flag.is_set());
        assert!(flag.set(false), "cleared twice");
        assert_eq!(view.u32_at(8), 0);
        // The program writes 7 there.
        view.set_u32(8, 7);
        assert!(!flag.set(true) && !flag.set(false));
        assert_eq!(view.u32_at(8), 7, "the program's value was overwritten");
        assert!(
            flag.is_set(),
            "7 reads as set, as the guest's checks read it"
        );
        drop(words);
    }
}
