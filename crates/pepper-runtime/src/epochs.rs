//! Ephemeral instrumentation's epochs (Traub, Schechter and Smith, "Ephemeral
//! Instrumentation for Lightweight Program Profiling": periodicity and persistence). The
//! guest's functions each have a budget word in pepper's memory; a function's clean code
//! moves into its instrumented copy while the budget is positive, and the copy spends one
//! unit per entry and per outermost loop iteration, so after `persistence` of them the
//! function is clean again. This thread re-arms every budget once per epoch.

use crate::memview::MemView;
use crate::worker::{Stop, Worker};
use std::time::Duration;

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
}

/// The running armer thread; `finish` says how many epochs it armed.
pub(crate) struct Armer(Worker<u64>);

impl Armer {
    /// Arms every budget now (so the first epoch starts with the guest) and then every
    /// epoch. The caller keeps pepper's memory alive until `finish`.
    pub(crate) fn start(mem: MemView, cfg: EphemeralConfig) -> Armer {
        arm(mem, &cfg);
        Armer(Worker::spawn("pepper-epochs", move |stop: &Stop| {
            let mut epochs = 1;
            while !stop.sleep(cfg.epoch) {
                arm(mem, &cfg);
                epochs += 1;
            }
            epochs
        }))
    }

    pub(crate) fn finish(self) -> u64 {
        self.0.finish().unwrap_or_else(|why| {
            eprintln!("pepper: warning: {why}; budgets were not re-armed after it");
            0
        })
    }
}

fn arm(mem: MemView, cfg: &EphemeralConfig) {
    for f in 0..cfg.functions {
        // The guest decrements with a plain load and store: a re-arm that lands between
        // them is lost, and the function waits for the next epoch. Rare, and harmless.
        mem.set_u32(cfg.budgets + 4 * f, cfg.persistence);
    }
}
