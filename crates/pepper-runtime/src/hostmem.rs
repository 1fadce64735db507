//! Linear memories pepper allocates itself, so that it can find pepper's memory inside a
//! component.
//!
//! wasmtime's component API gives the host no access to the core instances inside a
//! component, so the counters memory an instrumented core module exports cannot be looked
//! up by name. The engine that runs components creates every linear memory through
//! [`HostMemories`] instead ([`wasmtime::Config::with_host_memory`]), which notes each one's
//! address, size and limits. A pepper memory has an exact, fixed size (the rewriter
//! declares it with equal minimum and maximum) and a tag naming its core module
//! ([`pepper_layout::tag`]): that is how each instrumented module's memory is found.

#![allow(unsafe_code)]

use std::sync::{Arc, Mutex};

/// One memory created through [`HostMemories`].
#[derive(Copy, Clone, Debug)]
struct Created {
    thread: std::thread::ThreadId,
    base: usize,
    minimum: usize,
    maximum: Option<usize>,
}

/// The memory creator of the engine that runs components.
#[derive(Default, Debug)]
pub(crate) struct HostMemories {
    created: Mutex<Vec<Created>>,
}

impl HostMemories {
    /// Pepper's memories of one instrumented core module among the live ones created on
    /// this thread (a store's memories are created on the thread that instantiates, and
    /// go when the store goes): the fixed-size memories of `bytes` bytes that hold `tag`
    /// at `at` (its data segment wrote it at instantiation). Several when the component
    /// instantiates that module several times; none when it never does.
    pub(crate) fn find_tagged(
        &self,
        bytes: usize,
        at: u32,
        tag: &[u8; pepper_layout::TAG_BYTES],
    ) -> Vec<crate::memview::MemView> {
        let me = std::thread::current().id();
        let created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        if at as usize + tag.len() > bytes {
            return Vec::new();
        }
        created
            .iter()
            .filter(|c| c.thread == me && c.minimum == bytes && c.maximum == Some(bytes))
            .filter(|c| {
                let mut found = [0u8; pepper_layout::TAG_BYTES];
                // SAFETY: the memory is live (it leaves the registry before it is unmapped,
                // under the lock held here) and `bytes` long, and the tag lies within. Only
                // pepper's own threads write a pepper memory besides the guest, and none
                // has started: the tag is the data segment's.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (c.base + at as usize) as *const u8,
                        found.as_mut_ptr(),
                        found.len(),
                    )
                };
                &found == tag
            })
            .map(|c| crate::memview::MemView {
                ptr: c.base,
                len: bytes,
            })
            .collect()
    }
}

/// A wrapper to hand the registry to wasmtime while keeping it.
#[derive(Clone, Debug)]
pub(crate) struct Creator(pub Arc<HostMemories>);

// SAFETY: every memory is a fresh anonymous mapping of `reserved + guard` bytes (or of
// the largest size the memory may reach, plus the guard, when wasmtime leaves the
// reservation to us), zero-filled by the kernel, of which only the first `minimum` bytes
// are accessible; growth makes more of it accessible in place and never beyond the
// reservation, so the base never moves and the guard stays unmapped for bounds checks
// wasmtime elides.
unsafe impl wasmtime::MemoryCreator for Creator {
    fn new_memory(
        &self,
        _ty: wasmtime::MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn wasmtime::LinearMemory>, String> {
        const FOUR_GIB: usize = 1 << 32;
        let capacity = reserved_size_in_bytes
            .unwrap_or_else(|| maximum.unwrap_or(FOUR_GIB).clamp(minimum, FOUR_GIB));
        let mem = Mmapped::new(capacity, guard_size_in_bytes, minimum, self.0.clone())?;
        self.0
            .created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Created {
                thread: std::thread::current().id(),
                base: mem.base as usize,
                minimum,
                maximum,
            });
        Ok(Box::new(mem))
    }
}

/// An anonymous mapping: `capacity` bytes of which `size` are readable and writable, then
/// `guard` bytes never accessible.
#[derive(Debug)]
struct Mmapped {
    base: *mut u8,
    size: usize,
    capacity: usize,
    mapped: usize,
    registry: Arc<HostMemories>,
}

// SAFETY: the mapping is owned by this value; wasmtime serializes access to a memory
// through its store.
unsafe impl Send for Mmapped {}
unsafe impl Sync for Mmapped {}

fn page_up(n: usize) -> usize {
    let page = 4096;
    n.div_ceil(page) * page
}

impl Mmapped {
    fn new(
        capacity: usize,
        guard: usize,
        size: usize,
        registry: Arc<HostMemories>,
    ) -> Result<Mmapped, String> {
        let mapped = capacity
            .checked_add(guard)
            .ok_or("memory reservation overflows")?
            .max(4096);
        // SAFETY: a new private anonymous mapping, not yet accessible.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "reserving {mapped} bytes for a memory: {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut m = Mmapped {
            base: base as *mut u8,
            size: 0,
            capacity,
            mapped,
            registry,
        };
        m.make_accessible(size)?;
        Ok(m)
    }

    fn make_accessible(&mut self, size: usize) -> Result<(), String> {
        if size > self.capacity {
            return Err(format!(
                "a memory cannot grow to {size} bytes (reserved {})",
                self.capacity
            ));
        }
        let (from, to) = (page_up(self.size), page_up(size));
        if to > from {
            // SAFETY: within the mapping (`to` <= page_up(capacity) <= mapped, as the
            // reservation is a multiple of the page size).
            let r = unsafe {
                libc::mprotect(
                    self.base.add(from) as *mut libc::c_void,
                    to - from,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if r != 0 {
                return Err(format!(
                    "growing a memory to {size} bytes: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        self.size = size;
        Ok(())
    }
}

// SAFETY: see `Creator`.
unsafe impl wasmtime::LinearMemory for Mmapped {
    fn byte_size(&self) -> usize {
        self.size
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        self.make_accessible(new_size).map_err(wasmtime::Error::msg)
    }

    fn as_ptr(&self) -> *mut u8 {
        self.base
    }
}

impl Drop for Mmapped {
    fn drop(&mut self) {
        let base = self.base as usize;
        self.registry
            .created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|c| c.base != base);
        // SAFETY: the whole mapping made in `new`, no longer used by anyone.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.mapped) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::{LinearMemory, MemoryCreator};

    #[test]
    fn memories_of_one_size_are_told_apart_by_their_tags() {
        let registry = Arc::new(HostMemories::default());
        let creator = Creator(registry.clone());
        let ty = wasmtime::MemoryType::new(1, Some(1));
        let page = 65536;
        let mut mems: Vec<_> = (0..3)
            .map(|_| creator.new_memory(ty.clone(), page, Some(page), None, 0))
            .collect::<Result<_, _>>()
            .unwrap();
        let write = |m: &dyn LinearMemory, tag: [u8; 16]| {
            // SAFETY: 80 bytes into a fresh 64 KiB memory nobody else uses.
            unsafe { std::ptr::copy_nonoverlapping(tag.as_ptr(), m.as_ptr().add(64), 16) }
        };
        // Memory 1 is a program's of the same size, without a tag.
        write(&*mems[0], pepper_layout::tag(1, 1000));
        write(&*mems[2], pepper_layout::tag(2, 1000));
        let find = |slot, bytes| {
            (registry
                .find_tagged(bytes, 64, &pepper_layout::tag(slot, 1000))
                .iter())
            .map(|v| v.ptr)
            .collect::<Vec<_>>()
        };
        assert_eq!(find(1, page), [mems[0].as_ptr() as usize]);
        assert_eq!(find(2, page), [mems[2].as_ptr() as usize]);
        assert!(find(3, page).is_empty(), "no such slot");
        assert!(find(1, 2 * page).is_empty(), "another size");
        // A tag past the memory's end is not read.
        assert!(registry.find_tagged(page, page as u32, &[0; 16]).is_empty());
        // Another thread's memories are not its.
        let elsewhere = std::thread::scope(|s| s.spawn(|| find(1, page)).join().unwrap());
        assert!(elsewhere.is_empty());
        // A memory that is gone is not found.
        drop(mems.remove(0));
        assert!(find(1, page).is_empty());
    }
}
