//! The handler's copies of guest rings: each native sample copies the newest words of
//! the call log (`--call-windows`) or of PEP's ring (path windows) with the frames, at the
//! same instant, since the guest thread is the one interrupted.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A word of a guest ring: u32 call-log events, u64 path words.
pub(crate) trait Word: Copy {
    type Atomic;
    fn atomic() -> Self::Atomic;
    fn load(a: &Self::Atomic) -> Self;
    fn ptr(a: &Self::Atomic) -> *mut Self;
}

/// `Word` for an integer and its atomic twin.
macro_rules! word {
    ($t:ty, $atomic:ty) => {
        impl Word for $t {
            type Atomic = $atomic;
            fn atomic() -> $atomic {
                <$atomic>::new(0)
            }
            fn load(a: &$atomic) -> $t {
                a.load(Ordering::Relaxed)
            }
            fn ptr(a: &$atomic) -> *mut $t {
                a.as_ptr()
            }
        }
    };
}
word!(u32, AtomicU32);
word!(u64, AtomicU64);

/// A ring in pepper's memory whose newest `N` words the handler copies at each sample.
pub(super) struct RingCopy<T: Word, const N: usize> {
    /// Host addresses of the ring's u32 head (a count of words written) and of its words,
    /// and its length (a power of two); zero until set.
    head_at: AtomicU64,
    base: AtomicU64,
    entries: AtomicU32,
    /// The head when the handler copied, and the newest `n` words, oldest first.
    head: AtomicU32,
    n: AtomicU32,
    /// The head the sampler has read up to: only the words written since are copied
    /// (set before each request; 0 copies the newest `N`).
    pub(super) from: AtomicU32,
    words: [T::Atomic; N],
}

impl<T: Word, const N: usize> RingCopy<T, N> {
    pub(super) fn new() -> Self {
        RingCopy {
            head_at: AtomicU64::new(0),
            base: AtomicU64::new(0),
            entries: AtomicU32::new(0),
            head: AtomicU32::new(0),
            n: AtomicU32::new(0),
            from: AtomicU32::new(0),
            words: std::array::from_fn(|_| T::atomic()),
        }
    }

    /// # Safety
    /// As for [`NativeSampler::read_ring`].
    pub(super) unsafe fn set(&self, memory: u64, (head, base, entries): (u32, u32, u32)) {
        self.base.store(memory + base as u64, Ordering::Relaxed);
        self.entries.store(entries, Ordering::Relaxed);
        self.head_at.store(memory + head as u64, Ordering::Release);
    }

    /// Copies the newest words (in the handler, while the guest is stopped, so nothing is
    /// overwritten during the copy): two block copies, where the ring wraps.
    ///
    /// # Safety
    /// The ring's addresses, if set, point into pepper's memory, which outlives the
    /// sampler; the sampler thread reads the copy only after the handler's release store
    /// of DONE.
    pub(super) unsafe fn copy(&self) {
        let entries = self.entries.load(Ordering::Relaxed) as usize;
        let head_at = self.head_at.load(Ordering::Relaxed);
        if entries == 0 || head_at == 0 {
            return;
        }
        let base = self.base.load(Ordering::Relaxed) as *const T;
        // SAFETY: (caller) aligned words inside pepper's memory; the guest, the only
        // writer, is the thread this handler interrupted.
        let head = unsafe { std::ptr::read_volatile(head_at as *const u32) };
        // Only what the sampler has not read yet: under the switch a sample comes early
        // in a burst, a few hundred path ends after the window's start, and copying the
        // whole 32 KB window took the guest thread's time and its L1 cache for nothing.
        let from = self.from.load(Ordering::Relaxed);
        let n = N.min(entries).min(head.wrapping_sub(from) as usize);
        let first = head.wrapping_sub(n as u32) as usize & (entries - 1);
        let tail = n.min(entries - first);
        let dst = T::ptr(&self.words[0]);
        // SAFETY: both stretches lie inside the ring, `words` has room for `n ≤ N` of
        // them, and atomics have their integer's layout.
        unsafe {
            std::ptr::copy_nonoverlapping(base.add(first), dst, tail);
            std::ptr::copy_nonoverlapping(base, dst.add(tail), n - tail);
        }
        self.head.store(head, Ordering::Relaxed);
        self.n.store(n as u32, Ordering::Relaxed);
    }

    /// The last copy, for the sampler thread.
    pub(super) fn read(&self, out: &mut Window<T>) {
        out.words.clear();
        let n = self.n.load(Ordering::Relaxed) as usize;
        out.words.extend(self.words[..n].iter().map(T::load));
        out.head = self.head.load(Ordering::Relaxed);
    }
}

/// Which guest ring a sample copies.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Ring {
    /// The call log (`--call-windows`), u32 events.
    CallLog,
    /// PEP's ring of path words (path windows), u64 words.
    PathWords,
}

/// The newest words of one guest ring, oldest first, and its head (words written so
/// far) at the sample.
#[derive(Debug, Default)]
pub(crate) struct Window<T> {
    pub words: Vec<T>,
    pub head: u32,
}

impl<T> Window<T> {
    /// The words written since the head `last` (of the previous window; updated), and
    /// how many that was (the copy may hold fewer).
    pub(crate) fn since(&self, last: &mut u32) -> (&[T], usize) {
        let n = self.head.wrapping_sub(*last) as usize;
        *last = self.head;
        (&self.words[self.words.len() - n.min(self.words.len())..], n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy holds only the words written since the sampler's last head, and the
    /// window the sampler reads from it is the one a copy of the newest `N` gives.
    #[test]
    #[allow(unsafe_code)]
    fn a_ring_copy_takes_only_the_unread_words() {
        // An 8-word ring (at byte 8) after 21 words: slots hold 13..=20 (word k at k % 8).
        let mut mem = [0u64; 9];
        for k in 13..21u64 {
            mem[1 + (k % 8) as usize] = k;
        }
        mem[0] = 21;
        let base = mem.as_ptr() as u64;
        let copy = |from: u32| {
            let c = RingCopy::<u64, 8>::new();
            // SAFETY: head and ring lie inside `mem`, which outlives the copy.
            unsafe {
                c.set(base, (0, 8, 8));
                c.from.store(from, Ordering::Relaxed);
                c.copy();
            }
            let mut w = Window::default();
            c.read(&mut w);
            w
        };
        assert_eq!(copy(0).words, (13..21).collect::<Vec<_>>());
        let unread = copy(18);
        assert_eq!(
            (unread.words.as_slice(), unread.head),
            (&[18, 19, 20][..], 21)
        );
        let (mut a, mut b) = (18, 18);
        assert_eq!(copy(0).since(&mut a), unread.since(&mut b));
        // Nothing new: nothing copied.
        assert!(copy(21).words.is_empty());
    }
}
