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
