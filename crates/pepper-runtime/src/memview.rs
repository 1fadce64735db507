//! A raw view of pepper's memory that the host's threads read (and, for the switch and
//! ephemeral budgets, write) while the guest runs: atomic accesses at checked addresses.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A raw view of the profiler memory that may be read from another thread.
#[derive(Copy, Clone)]
pub(crate) struct MemView {
    pub(crate) ptr: usize,
    pub(crate) len: usize,
}

impl MemView {
    /// A view of `memory`, which must stay alive and unmoved while the view is used
    /// (pepper's memory is never grown; the runtime joins its threads before the store
    /// goes away).
    pub(crate) fn of(memory: Option<&wasmtime::Memory>, store: impl wasmtime::AsContext) -> Self {
        memory.map_or(MemView { ptr: 0, len: 0 }, |m| MemView {
            ptr: m.data_ptr(&store) as usize,
            len: m.data_size(&store),
        })
    }

    pub(crate) fn u32_at(&self, addr: u32) -> u32 {
        let a = addr as usize;
        assert!(a + 4 <= self.len && a.is_multiple_of(4));
        // SAFETY: in bounds and aligned (checked above); the memory outlives the sampler
        // (the runtime joins the thread before the store is dropped) and never moves
        // (pepper's memory is never grown). The guest writes it concurrently with plain
        // stores; an atomic load observes either the old or the new value.
        unsafe { AtomicU32::from_ptr((self.ptr + a) as *mut u32).load(Ordering::Acquire) }
    }

    /// Compare-and-swap of a u32 the guest may be writing: false if it changed.
    pub(crate) fn cas_u32(&self, addr: u32, old: u32, new: u32) -> bool {
        let a = addr as usize;
        assert!(a + 4 <= self.len && a.is_multiple_of(4));
        // SAFETY: as for `u32_at`. The guest's plain 4-byte aligned stores are single
        // instructions, so the swap either sees the word the walk read or a newer one.
        unsafe {
            AtomicU32::from_ptr((self.ptr + a) as *mut u32)
                .compare_exchange(old, new, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        }
    }

    /// Stores a u32 the guest reads (the switch flag).
    pub(crate) fn set_u32(&self, addr: u32, value: u32) {
        let a = addr as usize;
        assert!(a + 4 <= self.len && a.is_multiple_of(4));
        // SAFETY: as for `u32_at`; the guest only reads this word.
        unsafe { AtomicU32::from_ptr((self.ptr + a) as *mut u32).store(value, Ordering::Release) }
    }

    /// Appends the `count` u64 words at `addr` to `out` (one bounds check for all).
    pub(crate) fn u64s_into(&self, addr: u32, count: usize, out: &mut Vec<u64>) {
        let a = addr as usize;
        assert!(a + 8 * count <= self.len && a.is_multiple_of(8));
        out.extend((0..count).map(|i| {
            // SAFETY: as for `u32_at`, for every word of the checked range.
            unsafe {
                AtomicU64::from_ptr((self.ptr + a + 8 * i) as *mut u64).load(Ordering::Relaxed)
            }
        }));
    }

    pub(crate) fn u64_at(&self, addr: u32) -> u64 {
        let a = addr as usize;
        assert!(a + 8 <= self.len && a.is_multiple_of(8));
        // SAFETY: as for `u32_at`.
        unsafe { AtomicU64::from_ptr((self.ptr + a) as *mut u64).load(Ordering::Relaxed) }
    }

    /// A copy of the whole memory, word by word (the guest may be writing it).
    pub(crate) fn copy(&self) -> Vec<u8> {
        let mut words = Vec::with_capacity(self.len / 8);
        if self.len > 0 {
            self.u64s_into(0, self.len / 8, &mut words);
        }
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}
