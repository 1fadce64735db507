//! pepper's guest ABI: what an instrumented module keeps in pepper's memory and how a path
//! word is encoded. The rewriter (`pepper-wasm`) writes code against these definitions and
//! the runtime (`pepper-runtime`) reads memory with them, so neither needs the other's
//! internals: a [`Guest`] is everything the runtime must know about one instrumented module.

#![warn(missing_docs)]

mod index;
mod layout;
mod word;

pub use index::{FuncIndex, SiteIndex};
pub use layout::{
    read_u32, read_u64, tag, HashTable, MemoryLayout, Ring, SWITCH_LIMIT_OFFSET, TAG_BYTES,
    TAG_MAGIC,
};
pub use word::{pep_tag, pep_untag, PEP_TAG_SHIFT};

use pepper_profile::Mode;
use std::collections::HashMap;

/// Name of the exported memory that holds pepper's counters.
pub const COUNTERS_EXPORT: &str = "pepper:counters";

/// log2 of PEP's ring length with path windows, at least: each stack sample copies the
/// ring (4,096 path ends, 32 KB, a few microseconds of a fast interpreter). Four times
/// longer windows placed no more calls correctly and cost four times the copy; more,
/// shorter windows beat fewer, longer ones.
pub const PATH_WINDOW_RING_LOG2: u32 = 12;
/// PEP's ring with the switch is at least this long (log2 of its words): a burst the
/// guest's handler measures runs for a stretch of the guest's time, and the ring holds
/// whatever it writes in it.
pub const SWITCH_RING_LOG2: u32 = 15;

/// Bytes per shadow-stack frame: `[func + 1: u32][site: u32][node: u32][pad]`.
pub const FRAME_BYTES: u32 = 16;

/// The marker bit the sampler sets in a shadow-stack frame's function word (Whaley's
/// return-address marker, §5.2): a push writes a fresh word without it, so a marked frame
/// has not returned since the sampler saw it.
pub const MARK: u32 = 1 << 31;

/// What the guest keeps for calling contexts.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum ContextMode {
    /// Nothing.
    #[default]
    Off,
    /// Shadow stack for the sampler (Whaley's PCCT) plus exact per-call-site counts.
    Sampled,
    /// Every call also finds or creates its context node in an in-module hash table and
    /// counts there: the complete calling context tree with call counts.
    Exact,
    /// No stack in the guest: the host samples the guest thread's native stack. Call
    /// sites still count their calls unless the rewriter was told not to.
    Native,
}

impl ContextMode {
    /// Whether the guest keeps a shadow stack.
    pub fn shadow(self) -> bool {
        matches!(self, ContextMode::Sampled | ContextMode::Exact)
    }
}

/// A call instruction of the original module, as the host sampler sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// The function the call is in.
    pub caller: FuncIndex,
    /// The callee of a direct call.
    pub callee: Option<FuncIndex>,
}

/// Everything the runtime needs to know about one instrumented module: which mode it
/// counts in, where its data lives, and how to name what native stack samples find.
#[derive(Clone, Debug)]
pub struct Guest {
    /// What the module counts.
    pub mode: Mode,
    /// Where pepper's data lives in its memory.
    pub layout: MemoryLayout,
    /// Switchable instrumentation: where clean code checks the flag (`outer`, `loops`,
    /// `all`, `entries`); `None` when functions have one body.
    pub switch: Option<&'static str>,
    /// Ephemeral in windows: `layout.switch_flag` is one module-wide flag, not a budget
    /// per function.
    pub ephemeral_windows: bool,
    /// Which core module of its component this is, as its memory's tag says
    /// ([`tag`]); 0 for a plain module.
    pub slot: u32,
    /// What the guest keeps for calling contexts.
    pub contexts: ContextMode,
    /// Functions in the original module, imports included (pepper's own come after).
    pub num_funcs: usize,
    /// Imported functions (the first function indices).
    pub num_imports: usize,
    /// Every call site, by [`SiteIndex`].
    pub sites: Vec<CallSite>,
    /// Native contexts: the module offset of each call instruction in the *instrumented*
    /// module → its call site (native stack samples name sites by return address).
    pub site_offsets: HashMap<u64, SiteIndex>,
    /// Switchable instrumentation: each copy's function index → the function it copies.
    pub origins: HashMap<FuncIndex, FuncIndex>,
}

impl Guest {
    /// What pepper's memory of this module holds at `layout.tag`.
    pub fn tag(&self) -> [u8; TAG_BYTES] {
        tag(self.slot, self.layout.size)
    }
}
