//! Where pepper's data lives in its own memory (`pepper:counters`), and reading it back.

/// Byte addresses of everything the rewriter put in pepper's memory; a field is 0 when the
/// mode does not use it.
#[derive(Copy, Clone, Debug, Default)]
pub struct MemoryLayout {
    /// u32: hash entries in use.
    pub hash_used: u32,
    /// u64: path executions dropped because the hash table was full.
    pub hash_overflow: u32,
    /// The path hash table's first entry.
    pub hash_base: u32,
    /// Entries in the path hash table.
    pub hash_capacity: u32,
    /// Entries in each hashed function's path cache (a power of two).
    pub hash_cache_entries: u32,
    /// PEP ring: u32 count of path ends written (the next slot is `head % entries`).
    pub ring_head: u32,
    /// PEP ring: the first u64 slot.
    pub ring_base: u32,
    /// PEP ring: slots (a power of two).
    pub ring_entries: u32,
    /// PEP every-K: u32 path ends since the last sample.
    pub every_counter: u32,
    /// Contexts: u32 shadow stack pointer (bytes, unmasked: depth × 16).
    pub stack_pointer: u32,
    /// Contexts: the shadow stack's first frame.
    pub stack_base: u32,
    /// Frames in the shadow stack ring (a power of two; 0 without contexts).
    pub stack_entries: u32,
    /// Contexts: u64 call counter per call site.
    pub site_counters: u32,
    /// Call log: u32 count of events written (the next slot is `head % entries`).
    pub call_log_head: u32,
    /// Call log: u32 events, `func` at entries and `site | RET` at returns.
    pub call_log_base: u32,
    /// Events in the call log ring (a power of two; 0 without a log).
    pub call_log_entries: u32,
    /// Exact contexts: the context table (same entry layout as the path hash table).
    pub cct: HashTable,
    /// Switch: u32 flag, non-zero while instrumented copies should run (0 without one),
    /// followed by the burst's limit ([`SWITCH_LIMIT_OFFSET`]).
    /// Ephemeral: the first of one i32 budget per defined function.
    pub switch_flag: u32,
    /// Ephemeral: one u64 entry counter per defined function.
    pub entry_counts: u32,
    /// Bytes of pepper's memory in use.
    pub size: u64,
    /// The memory's [`tag`] ([`TAG_BYTES`] bytes, written by a data segment).
    pub tag: u32,
}

/// How a tag starts: what no program's memory holds by chance at that address, in a
/// memory of exactly pepper's size.
pub const TAG_MAGIC: [u8; 8] = *b"pepper\0\x01";
/// Bytes of a tag.
pub const TAG_BYTES: usize = 16;

/// What pepper's memory of the core module in `slot` holds at [`MemoryLayout::tag`]:
/// [`TAG_MAGIC`], the slot and the memory's size in use. Inside a component, where the
/// host cannot look up a core instance's exports, this is how the runtime tells the
/// pepper memories of several instrumented core modules apart (and from the program's).
pub fn tag(slot: u32, size: u64) -> [u8; TAG_BYTES] {
    let mut t = [0; TAG_BYTES];
    t[..8].copy_from_slice(&TAG_MAGIC);
    t[8..12].copy_from_slice(&slot.to_le_bytes());
    t[12..].copy_from_slice(&(size as u32).to_le_bytes());
    t
}

/// Switch with PEP's ring: the u32 at `switch_flag + SWITCH_LIMIT_OFFSET` is the ring head
/// at which the instrumented copies end a burst themselves (clearing the flag at their
/// next outermost check), 0 for none. The sampler clears the flag when it has read the
/// burst; the limit bounds a burst whose sampler thread was descheduled meanwhile.
pub const SWITCH_LIMIT_OFFSET: u32 = 4;

/// An open-addressing table in profiler memory: `[key: u64][count: u64][func + 1: u32][pad]`
/// entries, a u32 count of entries in use and a u64 count of insertions refused when full.
#[derive(Copy, Clone, Debug, Default)]
pub struct HashTable {
    /// The first entry.
    pub base: u32,
    /// Entries.
    pub capacity: u32,
    /// Address of the u32 count of entries in use.
    pub used: u32,
    /// Address of the u64 count of refused insertions.
    pub overflow: u32,
}

/// A ring the guest appends to and a host thread reads: slot `head % entries` is next.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    /// Address of the u32 count of words written.
    pub head: u32,
    /// Address of the first slot.
    pub base: u32,
    /// Slots (a power of two).
    pub entries: u32,
}

impl MemoryLayout {
    /// Wasm pages of pepper's memory: it is declared with exactly this many, as minimum
    /// and maximum (it never grows), which is how a runtime tells it apart from the
    /// guest's memories where it cannot look it up by name (inside a component).
    pub fn pages(&self) -> u64 {
        self.size.div_ceil(65536).max(1)
    }

    /// PEP's ring of u64 path words.
    pub fn ring(&self) -> Ring {
        Ring {
            head: self.ring_head,
            base: self.ring_base,
            entries: self.ring_entries,
        }
    }

    /// The call log's ring of u32 events; `None` without one.
    pub fn call_log(&self) -> Option<Ring> {
        (self.call_log_entries > 0).then_some(Ring {
            head: self.call_log_head,
            base: self.call_log_base,
            entries: self.call_log_entries,
        })
    }
}

/// The little-endian u64 at `addr` of a copy of pepper's memory; 0 past its end.
pub fn read_u64(mem: &[u8], addr: u64) -> u64 {
    let a = addr as usize;
    mem.get(a..a.saturating_add(8))
        .map(|b| u64::from_le_bytes(b.try_into().expect("slice of 8 bytes")))
        .unwrap_or(0)
}

/// The little-endian u32 at `addr` of a copy of pepper's memory; 0 past its end.
pub fn read_u32(mem: &[u8], addr: u64) -> u32 {
    let a = addr as usize;
    mem.get(a..a.saturating_add(4))
        .map(|b| u32::from_le_bytes(b.try_into().expect("slice of 4 bytes")))
        .unwrap_or(0)
}
