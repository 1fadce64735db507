//! Ctrl-C and SIGTERM as a request to stop profiling early: the handlers only set a flag
//! (async-signal-safe), which a run's watcher thread polls (`attach`). A second signal
//! ends the process at once, as a user pressing Ctrl-C twice expects.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked to stop (0: none yet).
static REQUESTED: AtomicI32 = AtomicI32::new(0);

/// Makes SIGINT and SIGTERM request an early stop instead of killing the process at once.
/// Call it before starting a run whose `AttachConfig::early_stop` listens to signals.
pub fn stop_on_signals() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a plain sigaction with a handler that only touches an atomic and,
            // on a second signal, calls the async-signal-safe `_exit`.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = handler as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

extern "C" fn handler(sig: libc::c_int) {
    if REQUESTED.swap(sig, Ordering::SeqCst) != 0 {
        // SAFETY: `_exit` is async-signal-safe.
        unsafe { libc::_exit(128 + sig) };
    }
}

/// The signal that requested a stop, if one did.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
