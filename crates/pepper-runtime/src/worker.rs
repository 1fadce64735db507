//! A background thread that runs until told to stop: pepper's sampler and the epoch
//! ticker both wake up periodically, so stopping sets a flag and unparks them, and the
//! thread is always joined (on `finish` or on drop) before the store it reads goes away.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) struct Worker<T> {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> Worker<T> {
    /// Spawns `body`, which runs until [`Stop::requested`] turns true.
    pub(crate) fn spawn(name: &str, body: impl FnOnce(&Stop) -> T + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Stop(stop.clone());
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(&flag))
            .expect("spawning a pepper thread");
        Worker {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the thread and returns its result, or what it panicked with.
    pub(crate) fn finish(mut self) -> Result<T, String> {
        self.stop_and_join()
            .unwrap_or_else(|| Err("the thread was already joined".into()))
    }
}

impl<T> Worker<T> {
    fn stop_and_join(&mut self) -> Option<Result<T, String>> {
        self.stop.store(true, Ordering::Release);
        let t = self.thread.take()?;
        let name = t.thread().name().unwrap_or("pepper thread").to_string();
        t.thread().unpark();
        Some(t.join().map_err(|e| {
            let why = e
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".into());
            format!("{name} panicked: {why}")
        }))
    }
}

impl<T> Drop for Worker<T> {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The worker's view of the stop flag.
pub(crate) struct Stop(Arc<AtomicBool>);

impl Stop {
    pub(crate) fn requested(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Sleeps for `period` or until stopped. Returns whether a stop was requested.
    pub(crate) fn sleep(&self, period: Duration) -> bool {
        self.sleep_until(Instant::now() + period)
    }

    /// Sleeps until `deadline` (at once if it has passed) or until stopped. Returns whether
    /// a stop was requested.
    pub(crate) fn sleep_until(&self, deadline: Instant) -> bool {
        while !self.requested() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::park_timeout(deadline - now);
        }
        true
    }

    /// Sleeps for `period` and ends within a microsecond or so of it: parks until
    /// [`SPIN_TAIL`] before the end, then spins. For waits whose length is the cost, such
    /// as ephemeral windows (a park overshoots by tens of microseconds on a VM, and the
    /// guest runs instrumented for all of it). The spin takes a core: where the guest may
    /// need it, see `epochs::wait_for_window`. Returns whether a stop was requested.
    pub(crate) fn sleep_precisely(&self, period: Duration) -> bool {
        let deadline = Instant::now() + period;
        if self.sleep_until(deadline.checked_sub(SPIN_TAIL).unwrap_or(deadline)) {
            return true;
        }
        while Instant::now() < deadline {
            if self.requested() {
                return true;
            }
            std::hint::spin_loop();
        }
        false
    }
}

/// How long before a precise sleep's end [`Stop::sleep_precisely`] stops parking: more
/// than a park overshoots by with the thread's timer slack at its least (see
/// [`least_timer_slack`]), 20-60 µs on that VM.
pub(crate) const SPIN_TAIL: Duration = Duration::from_micros(100);

/// Asks the kernel to wake this thread as close to its timers as it can (Linux's timer
/// slack, 50 µs by default, lets it batch wake-ups that late). Best effort: elsewhere, or
/// if refused, sleeps are as precise as they were.
pub(crate) fn least_timer_slack() {
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    // SAFETY: PR_SET_TIMERSLACK takes an integer and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// The CPU time one thread has used, readable from any thread (Linux: the thread's
/// CPU-time clock). Why: a sample of a thread's work taken by wall time overstates the
/// work while the thread waits for a CPU, and on a busy machine it waits most when
/// pepper's own threads wake up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreadCpuClock(#[cfg(target_os = "linux")] libc::clockid_t);

impl ThreadCpuClock {
    /// The calling thread's clock; `None` where threads have none.
    pub(crate) fn current() -> Option<ThreadCpuClock> {
        #[cfg(target_os = "linux")]
        #[allow(unsafe_code)]
        // SAFETY: writes one clock id for the calling thread, which is alive.
        unsafe {
            let mut id: libc::clockid_t = 0;
            if libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) == 0 {
                return Some(ThreadCpuClock(id));
            }
        }
        None
    }

    /// The thread's CPU time so far; `None` once the thread has exited.
    pub(crate) fn now(self) -> Option<Duration> {
        #[cfg(target_os = "linux")]
        #[allow(unsafe_code)]
        // SAFETY: fills one timespec of ours.
        unsafe {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            if libc::clock_gettime(self.0, &mut t) == 0 {
                return Some(Duration::new(t.tv_sec as u64, t.tv_nsec as u32));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another thread reads the guest's CPU time: it grows while the thread works, not
    /// while it sleeps.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_threads_cpu_clock_counts_its_work_not_its_sleep() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let clock = ThreadCpuClock::current().expect("a CPU clock on Linux");
            tx.send(clock).unwrap();
            let start = clock.now().unwrap();
            while clock.now().unwrap() - start < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            tx.send(clock).unwrap();
            wait.recv().unwrap();
            std::thread::sleep(Duration::from_millis(50));
        });
        let clock = rx.recv().unwrap();
        rx.recv().unwrap();
        let worked = clock.now().unwrap();
        assert!(worked >= Duration::from_millis(20), "{worked:?}");
        go.send(()).unwrap();
        let slept = Instant::now();
        let during = loop {
            let now = clock.now().unwrap();
            if slept.elapsed() >= Duration::from_millis(30) {
                break now - worked;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(
            during < Duration::from_millis(10),
            "{during:?} while asleep"
        );
        t.join().unwrap();
    }
}
