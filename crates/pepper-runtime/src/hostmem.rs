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

/// How to find a pepper memory inside a component: its fixed size and the tag its data
/// segment writes ([`pepper_layout::tag`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MemoryTag {
    /// The memory's size in bytes (its minimum and maximum).
    pub bytes: usize,
    /// Where the tag is.
    pub at: u32,
    /// What it holds.
    pub tag: [u8; pepper_layout::TAG_BYTES],
}

impl MemoryTag {
    /// The core module it names (its position among the component's).
    pub fn slot(&self) -> u32 {
        u32::from_le_bytes(self.tag[8..12].try_into().expect("4 bytes"))
    }

    /// The tag of an instrumented module's memory.
    pub fn of(guest: &pepper_layout::Guest) -> MemoryTag {
        MemoryTag {
            bytes: (guest.layout.pages() * 65536) as usize,
            at: guest.layout.tag,
            tag: guest.tag(),
        }
    }
}

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
    kept: Mutex<Kept>,
}

/// Serving ([`HostMemories::keep`]): pepper's memories kept past their instances.
#[derive(Default, Debug)]
struct Kept {
    /// The sizes of pepper's memories.
    sizes: Vec<usize>,
    /// Each thread's kept memories, by size and by order of creation within an instance.
    memories: Vec<(std::thread::ThreadId, usize, usize, Mmapped)>,
    /// How many memories of each size this thread's current instance has taken.
    taken: Vec<(std::thread::ThreadId, usize, usize)>,
}

impl HostMemories {
    /// From now on, a memory of one of `sizes` bytes (pepper's, fixed at that size) is
    /// kept past its instance and handed to the next instance on the same thread, whose
    /// n-th memory of that size gets the n-th kept one (call [`HostMemories::new_instance`]
    /// before each instantiation). So pepper's counters add up over every instance a
    /// server runs, and its profiling threads read the same memories all along.
    pub(crate) fn keep(&self, sizes: Vec<usize>) {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).sizes = sizes;
    }

    /// The next instance on this thread begins: it takes the kept memories from the first.
    pub(crate) fn new_instance(&self) {
        let me = std::thread::current().id();
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.taken.retain(|t| t.0 != me);
    }

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
        let me = std::thread::current().id();
        let mut kept = self.0.kept.lock().unwrap_or_else(|e| e.into_inner());
        if maximum == Some(minimum) && kept.sizes.contains(&minimum) {
            let n = match kept.taken.iter_mut().find(|t| (t.0, t.1) == (me, minimum)) {
                Some(t) => {
                    t.2 += 1;
                    t.2 - 1
                }
                None => {
                    kept.taken.push((me, minimum, 1));
                    0
                }
            };
            let found = (kept.memories.iter()).find(|m| (m.0, m.1, m.2) == (me, minimum, n));
            let mem = match found {
                Some(m) => &m.3,
                None => {
                    let mem = Mmapped::new(capacity, guard_size_in_bytes, minimum, self.0.clone())?;
                    self.0.register(&mem, minimum, maximum);
                    kept.memories.push((me, minimum, n, mem));
                    &kept.memories.last().expect("just pushed").3
                }
            };
            return Ok(Box::new(Borrowed {
                base: mem.base,
                size: mem.size,
                capacity: mem.capacity,
            }));
        }
        drop(kept);
        let mem = Mmapped::new(capacity, guard_size_in_bytes, minimum, self.0.clone())?;
        self.0.register(&mem, minimum, maximum);
        Ok(Box::new(mem))
    }
}

impl HostMemories {
    /// Notes a new memory of this thread.
    fn register(&self, mem: &Mmapped, minimum: usize, maximum: Option<usize>) {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Created {
                thread: std::thread::current().id(),
                base: mem.base as usize,
                minimum,
                maximum,
            });
    }

    /// Unmaps the memories [`HostMemories::keep`] kept: call it once no instance and no
    /// profiling thread uses them any more.
    pub(crate) fn release_kept(&self) {
        let memories =
            std::mem::take(&mut self.kept.lock().unwrap_or_else(|e| e.into_inner()).memories);
        drop(memories);
    }
}

/// A kept memory lent to one instance ([`HostMemories::keep`]): it is fixed in size,
/// and going away with its instance leaves the mapping to its keeper.
#[derive(Debug)]
struct Borrowed {
    base: *mut u8,
    size: usize,
    capacity: usize,
}

// SAFETY: the mapping lives in `HostMemories::kept` until `release_kept`, which runs
// when no instance uses it; wasmtime serializes access to a memory through its store.
unsafe impl Send for Borrowed {}
unsafe impl Sync for Borrowed {}

// SAFETY: see `Creator`: the kept mapping was made by `Mmapped::new` for a memory of
// this fixed size, with the same reservation and guard.
unsafe impl wasmtime::LinearMemory for Borrowed {
    fn byte_size(&self) -> usize {
        self.size
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        match new_size == self.size {
            true => Ok(()),
            false => Err(wasmtime::Error::msg("pepper's memory does not grow")),
        }
    }

    fn as_ptr(&self) -> *mut u8 {
        self.base
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
    fn kept_memories_go_to_the_next_instance_in_order() {
        let registry = Arc::new(HostMemories::default());
        let creator = Creator(registry.clone());
        let page = 65536;
        registry.keep(vec![page]);
        let new = |min: usize| {
            let ty = wasmtime::MemoryType::new(1, Some(1));
            creator.new_memory(ty, min, Some(min), None, 0).unwrap()
        };
        let instance = || {
            registry.new_instance();
            let mems = [new(page), new(2 * page), new(page)];
            mems.iter().map(|m| m.as_ptr() as usize).collect::<Vec<_>>()
        };
        let first = instance();
        // SAFETY: the first kept memory, 64 KiB, used by no instance now.
        unsafe { *(first[0] as *mut u8) = 7 };
        let second = instance();
        assert_eq!(
            (first[0], first[2]),
            (second[0], second[2]),
            "kept, in order"
        );
        assert_ne!(first[0], first[2]);
        assert!(
            ![second[0], second[2]].contains(&second[1]),
            "another size is not kept"
        );
        // SAFETY: as above.
        assert_eq!(unsafe { *(second[0] as *const u8) }, 7, "counts carry over");
        // Another thread's instances have memories of their own.
        let elsewhere = std::thread::scope(|s| s.spawn(instance).join().unwrap());
        assert_ne!(elsewhere[0], first[0]);
        registry.release_kept();
        assert!(registry.find_tagged(page, 64, &[0; 16]).is_empty());
    }

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
