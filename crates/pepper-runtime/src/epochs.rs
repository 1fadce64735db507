//! Ephemeral instrumentation's epochs (Traub, Schechter and Smith, "Ephemeral
//! Instrumentation for Lightweight Program Profiling": periodicity and persistence). The
//! guest's functions each have a budget word in pepper's memory; a function's clean code
//! moves into its instrumented copy while the budget is positive, and the copy spends one
//! unit per entry and per outermost loop iteration, so after `persistence` of them the
//! function is clean again. This thread re-arms every budget once per epoch.
//!
//! In windows (`EphemeralConfig::window`) there is one flag for the whole module, and
//! this thread sets it for the window at the start of every epoch: every function runs
//! its instrumented copy from its next check until the window closes.

use crate::memview::MemView;
use crate::worker::{Stop, Worker};
use std::time::{Duration, Instant};

/// Where the budgets are and how they are refilled.
#[derive(Clone, Debug)]
pub struct EphemeralConfig {
    /// Byte address of the first budget word (u32 each, one per function).
    pub budgets: u32,
    /// Functions with a budget (one i32 each, from `budgets` on).
    pub functions: u32,
    /// What each budget is set to at every epoch (the paper's persistence).
    pub persistence: u32,
    /// Time between re-armings (the paper's periodicity: 10 ms).
    pub epoch: Duration,
    /// Windows: how long the module-wide flag at `budgets` stays set every epoch
    /// (`functions` and `persistence` unused).
    pub window: Option<Duration>,
}

/// The running armer thread; `finish` says how many epochs it armed, and for how long
/// windows were open.
pub(crate) struct Armer(Worker<(u64, Duration)>);

impl Armer {
    /// Arms every budget (or, in windows, opens the first window) now, so the first epoch
    /// starts with the guest, and again every epoch. The caller keeps pepper's memory
    /// alive until `finish`.
    pub(crate) fn start(mem: MemView, cfg: EphemeralConfig) -> Armer {
        if let Some(window) = cfg.window {
            mem.set_u32(cfg.budgets, 1);
            let opened = Instant::now();
            return Armer(Worker::spawn("pepper-epochs", move |stop: &Stop| {
                windows(mem, &cfg, window, stop, opened)
            }));
        }
        arm(mem, &cfg);
        Armer(Worker::spawn("pepper-epochs", move |stop: &Stop| {
            let mut epochs = 1;
            while !stop.sleep(cfg.epoch) {
                arm(mem, &cfg);
                epochs += 1;
            }
            (epochs, Duration::ZERO)
        }))
    }

    pub(crate) fn finish(self) -> (u64, Duration) {
        self.0.finish().unwrap_or_else(|why| {
            eprintln!("pepper: warning: {why}; epochs were not armed after it");
            (0, Duration::ZERO)
        })
    }
}

/// Windows: the flag set for `window` every epoch (the first window is open already, since
/// `opened`); returns the epochs and the time the windows were open.
fn windows(
    mem: MemView,
    cfg: &EphemeralConfig,
    window: Duration,
    stop: &Stop,
    mut opened: Instant,
) -> (u64, Duration) {
    crate::worker::least_timer_slack();
    let (mut epochs, mut on) = (1, Duration::ZERO);
    loop {
        let stopped = stop.sleep_precisely(window.saturating_sub(opened.elapsed()));
        mem.set_u32(cfg.budgets, 0);
        on += opened.elapsed();
        if stopped || stop.sleep(cfg.epoch.saturating_sub(window)) {
            return (epochs, on);
        }
        mem.set_u32(cfg.budgets, 1);
        opened = Instant::now();
        epochs += 1;
    }
}

fn arm(mem: MemView, cfg: &EphemeralConfig) {
    for f in 0..cfg.functions {
        // The guest decrements with a plain load and store: a re-arm that lands between
        // them is lost, and the function waits for the next epoch. Rare, and harmless.
        mem.set_u32(cfg.budgets + 4 * f, cfg.persistence);
    }
}
