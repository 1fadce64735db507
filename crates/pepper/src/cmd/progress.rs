//! What `pepper run` tells the user while it works (stderr; the guest owns stdout): the
//! elapsed time and the sampler's counts on a terminal, and each stage of the run.

use super::print_warnings;
use pepper_runtime::Note;
use std::time::Duration;

/// Elapsed time on a terminal while a run goes on (after the first second, every second,
/// on one line that the next message overwrites); nothing when stderr is not a terminal.
pub(super) struct Progress {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub(super) fn start(live: std::sync::Arc<pepper_runtime::LiveCounts>) -> Progress {
        use std::io::IsTerminal;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let t0 = std::time::Instant::now();
                let (mut shown, mut last) = (false, 0);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::park_timeout(Duration::from_millis(250));
                    let secs = t0.elapsed().as_secs();
                    if secs > last && !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        last = secs;
                        let counts = counts_line(&live);
                        eprint!(
                            "\r\x1b[Kpepper: running {secs} s{counts} (Ctrl-C writes the profile so far)"
                        );
                        shown = true;
                    }
                }
                if shown {
                    eprint!("\r\x1b[K");
                }
            })
        });
        Progress { stop, thread }
    }
}

/// `, 12,345 samples of 1.2 G path ends` once the sampler has counted any (PEP).
fn counts_line(live: &pepper_runtime::LiveCounts) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let (samples, ends) = (live.samples.load(Relaxed), live.path_ends.load(Relaxed));
    if ends == 0 {
        return String::new();
    }
    let ends = match ends {
        e if e >= 1_000_000_000 => format!("{:.1} G", e as f64 / 1e9),
        e if e >= 1_000_000 => format!("{:.1} M", e as f64 / 1e6),
        e => e.to_string(),
    };
    format!(", {samples} samples of {ends} path ends")
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Tells the user what a run is doing (stderr; the guest owns stdout).
pub(super) fn say(note: Note<'_>, large: bool, interval: Duration) {
    match note {
        Note::Stage(1) => {
            eprintln!("pepper: staged: stage 1, exact edge profile (guest output discarded)")
        }
        Note::Stage(_) => eprintln!("pepper: staged: stage 2, targeted paths"),
        Note::Instrumented { warnings } => print_warnings(warnings, 10),
        Note::StackInterval { asked, actual } => eprintln!(
            "pepper: stack samples every {actual:?} (--stack-interval {asked:?} rounded to \
             whole --interval ticks of {interval:?})"
        ),
        Note::Compiling if large => {
            eprintln!("pepper: compiling (cached after the first run)...")
        }
        Note::Compiling => {}
        Note::Trapped(t) => {
            eprintln!("pepper: guest trapped ({t}); writing the profile of what completed")
        }
        Note::NoNativeSamples => {
            eprintln!("pepper: warning: no native stack samples (x86-64 Linux only)")
        }
        Note::Component { profiled, modules } => match profiled.len() {
            1 => eprintln!(
                "pepper: a component: profiling its core module `{}` (of {modules}; \
                 the others run uninstrumented, and appear in calling contexts), WASI 0.2",
                profiled[0]
            ),
            n => eprintln!(
                "pepper: a component: profiling {n} of its {modules} core modules \
                 ({}), WASI 0.2",
                profiled.join(", ")
            ),
        },
        Note::OneModule { module, why } => eprintln!(
            "pepper: warning: {why}: profiling `{module}` only (choose another with --modules)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::counts_line;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn the_progress_line_says_samples_and_path_ends_once_there_are_any() {
        let live = pepper_runtime::LiveCounts::default();
        assert_eq!(counts_line(&live), "");
        live.samples.store(12_800, Relaxed);
        live.path_ends.store(1_530_000_000, Relaxed);
        assert_eq!(counts_line(&live), ", 12800 samples of 1.5 G path ends");
        live.path_ends.store(2_400_000, Relaxed);
        assert_eq!(counts_line(&live), ", 12800 samples of 2.4 M path ends");
    }
}
