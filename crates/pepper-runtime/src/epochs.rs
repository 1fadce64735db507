//! Ephemeral instrumentation's epochs (Traub, Schechter and Smith, "Ephemeral
//! Instrumentation for Lightweight Program Profiling": periodicity and persistence). The
//! guest's functions each have a budget word in pepper's memory; a function's clean code
//! moves into its instrumented copy while the budget is positive, and the copy spends one
//! unit per entry and per outermost loop iteration, so after `persistence` of them the
//! function is clean again. This thread re-arms every budget once per epoch.
//!
//! In windows (`EphemeralConfig::window`) there is one flag for the whole module, and
//! this thread sets it for one window in every epoch: every function runs its
//! instrumented copy from its next check until the window closes. Each window opens at a
//! random point of its epoch ([`WindowPhase`]): stratified sampling in time, so a program
//! whose own period divides the epoch is not always seen at the same point of its cycle.
//! After each window it also reads what the window counted into one of several random
//! groups ([`groups`]), whose spread says how sure each branch's bias is.

mod groups;

use crate::memview::MemView;
use crate::pick::Pick;
use crate::worker::{Stop, ThreadCpuClock, Worker, SPIN_TAIL};
use std::time::{Duration, Instant};

/// Where the budgets are and how they are refilled.
#[derive(Clone, Debug)]
#[non_exhaustive]
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
    /// Windows: where in its epoch each window opens.
    pub phase: WindowPhase,
    /// Windows: the bytes of pepper's memory from address 0 that hold counters
    /// (`pepper_layout::MemoryLayout::size`), read after windows into random groups
    /// ([`groups`]); 0: not read.
    pub counter_bytes: u64,
    /// Inside a component: each other instrumented core module's window flag (or first
    /// budget) and defined functions, in its own memory (in the order of
    /// [`crate::RunConfig::module_tags`]), opened, closed and armed with the primary's.
    pub modules: Vec<(u32, u32)>,
}

/// Where in its epoch an ephemeral window opens.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum WindowPhase {
    /// At a uniformly random point that leaves the window inside the epoch (the default):
    /// every instant of the run is equally likely to be in a window, whatever the
    /// program's own rhythm.
    #[default]
    Random,
    /// At the start of every epoch: a fixed period, which a periodic program can alias
    /// with (kept to measure the difference).
    Start,
}

impl WindowPhase {
    /// How long after its epoch starts a window of `window` opens.
    fn offset(self, pick: &mut Pick, epoch: Duration, window: Duration) -> Duration {
        let room = epoch.saturating_sub(window).as_nanos() as u64;
        match self {
            WindowPhase::Start => Duration::ZERO,
            WindowPhase::Random => Duration::from_nanos(pick.below(room + 1)),
        }
    }
}

/// How long ephemeral windows were open.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WindowTime {
    /// Wall time.
    pub wall: Duration,
    /// The guest thread's CPU time in them. Over `guest_cpu`, the share of the guest's
    /// work the windows saw. Zero where the thread's CPU clock could not be read.
    pub cpu: Duration,
    /// The guest thread's CPU time from the first window on (zero as `cpu`).
    pub guest_cpu: Duration,
}

/// What the armer thread did.
#[derive(Default)]
pub(crate) struct Armed {
    pub(crate) epochs: u64,
    /// Windows: how long they were open.
    pub(crate) windows: WindowTime,
    /// Windows: what they counted, in random groups.
    pub(crate) groups: Option<groups::WindowGroups>,
}

impl Armed {
    /// The windows' random groups as images of pepper's memory, given its copy at the
    /// run's end (empty without windows or their groups).
    pub(crate) fn window_groups(&mut self, end: Option<&[u8]>) -> Vec<Vec<u8>> {
        match (self.groups.take(), end) {
            (Some(g), Some(end)) => g.into_images(end),
            _ => Vec::new(),
        }
    }
}

/// The running armer thread; `finish` says what it did.
pub(crate) struct Armer(Worker<Armed>);

impl Armer {
    /// Arms every budget (or, in windows, opens the first window) now, so the first epoch
    /// starts with the guest, and again every epoch. Called on the guest's thread (windows
    /// read its CPU clock). `mem` is pepper's memory, which holds the budgets or the flag
    /// and the counters the windows' groups read. The caller keeps it alive until
    /// `finish`. `modules` are the memories of `cfg.modules`.
    pub(crate) fn start(mem: MemView, modules: &[Option<MemView>], cfg: EphemeralConfig) -> Armer {
        // A window is one flag; budgets are one word per function.
        let words = |functions: u32| match cfg.window {
            Some(_) => 1,
            None => functions as usize,
        };
        let others = Flags(
            (modules.iter().zip(&cfg.modules))
                .filter_map(|(m, &(at, functions))| Some(((*m)?, at, functions)))
                .filter(|&(m, at, functions)| at as usize + 4 * words(functions) <= m.len)
                .collect(),
        );
        if let Some(window) = cfg.window {
            let clock = ThreadCpuClock::current();
            let mut pick = Pick(Pick::SEED);
            let groups = groups::WindowGroups::new(mem, cfg.counter_bytes, &mut pick);
            // A flag found set (the guest's own value, as `--switch-chaos` keeps one)
            // opens no windows.
            let open = mem.cas_u32(cfg.budgets, 0, 1);
            others.swap(open, (0, 1));
            let opened = Opened::now(clock);
            return Armer(Worker::spawn(
                "pepper-epochs",
                move |stop: &Stop| match open {
                    true => windows(
                        (mem, &others),
                        &cfg,
                        window,
                        stop,
                        clock,
                        opened,
                        pick,
                        groups,
                    ),
                    false => Armed::default(),
                },
            ));
        }
        arm(mem, &cfg);
        others.arm(cfg.persistence);
        Armer(Worker::spawn("pepper-epochs", move |stop: &Stop| {
            let mut epochs = 1;
            while !stop.sleep(cfg.epoch) {
                arm(mem, &cfg);
                others.arm(cfg.persistence);
                epochs += 1;
            }
            Armed {
                epochs,
                ..Armed::default()
            }
        }))
    }

    pub(crate) fn finish(self) -> Armed {
        self.0.finish().unwrap_or_else(|why| {
            eprintln!("pepper: warning: {why}; epochs were not armed after it");
            Armed::default()
        })
    }
}

/// When a window opened, by the wall clock and by the guest's CPU clock.
#[derive(Clone, Copy)]
struct Opened {
    wall: Instant,
    cpu: Option<Duration>,
}

impl Opened {
    fn now(clock: Option<ThreadCpuClock>) -> Opened {
        Opened {
            wall: Instant::now(),
            cpu: clock.and_then(ThreadCpuClock::now),
        }
    }
}

/// Waits until the guest has run `window` of its own CPU time since its window `opened`
/// (by the wall clock where its CPU clock cannot be read), or for `cap` of wall time at
/// most (a guest asleep in a host call runs nothing either way). Returns whether a stop
/// was requested.
///
/// A precise wait ends by spinning, and a spin takes a core: on a busy machine, the one
/// the guest waits for, so that the guest ran almost none of its windows. So the wait
/// spins only while the guest keeps running, and parks when the guest is found off its
/// core, giving it this thread's. The guest's clock is read once per check, not in the
/// spin: each read is a system call that takes the lock of the guest's run queue.
fn wait_for_window(
    stop: &Stop,
    window: Duration,
    cap: Duration,
    opened: Opened,
    clock: Option<ThreadCpuClock>,
) -> bool {
    let (Some(clock), Some(start)) = (clock, opened.cpu) else {
        return stop.sleep_precisely(window.saturating_sub(opened.wall.elapsed()));
    };
    // The last check, by both clocks, and the checks in a row that found the guest off
    // its core.
    let (mut wall0, mut cpu0, mut misses) = (opened.wall, start, 0);
    loop {
        let Some(now) = clock.now() else {
            return stop.sleep_precisely(window.saturating_sub(opened.wall.elapsed()));
        };
        let checked = Instant::now();
        let ran = now.saturating_sub(start);
        if ran >= window || opened.wall.elapsed() >= cap {
            return stop.requested();
        }
        let left = window - ran;
        // Whether the guest ran at least half of the time since the last check. One miss
        // is no sign of a busy machine (waking up, this thread can land on the guest's
        // core and hold it until the guest moves); two in a row are.
        let since = checked - wall0;
        if since >= SPIN_CHECK {
            misses = if now.saturating_sub(cpu0) < since / 2 {
                misses + 1
            } else {
                0
            };
        }
        (wall0, cpu0) = (checked, now);
        // The guest's CPU time cannot pass faster than the wall clock: parking for all but
        // the tail of what is left never overshoots, and neither does a spin to the next
        // check or to the earliest the window can end.
        let stopped = if left > SPIN_TAIL {
            stop.sleep_until(checked + (left - SPIN_TAIL))
        } else if misses >= 2 {
            misses = 0;
            stop.sleep_until(checked + left)
        } else {
            spin_until(stop, checked + left.min(SPIN_CHECK))
        };
        if stopped {
            return true;
        }
    }
}

/// Spins until `deadline`; returns whether a stop was requested.
fn spin_until(stop: &Stop, deadline: Instant) -> bool {
    while Instant::now() < deadline {
        if stop.requested() {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

/// How long a spin runs before [`wait_for_window`] judges whether the guest kept running
/// beside it.
const SPIN_CHECK: Duration = Duration::from_micros(10);

/// Windows: the flag set once every epoch until the guest has run `window` of its CPU
/// time (see [`wait_for_window`]), epochs counted from `opened` (when the first window,
/// open already, opened). The flag, in pepper's memory, is only ever swapped from the
/// value this thread left in it; a flag found otherwise ends the windows. With the
/// guest's CPU `clock`, each window's CPU time is read as it opens and closes. Each
/// closed window goes to `groups`.
#[allow(clippy::too_many_arguments)]
fn windows(
    (mem, others): (MemView, &Flags),
    cfg: &EphemeralConfig,
    window: Duration,
    stop: &Stop,
    clock: Option<ThreadCpuClock>,
    mut opened: Opened,
    mut pick: Pick,
    mut groups: Option<groups::WindowGroups>,
) -> Armed {
    crate::worker::least_timer_slack();
    let first = opened;
    let cpu = || clock.and_then(ThreadCpuClock::now);
    // `on_cpu` turns unknown for good once any read of the clock fails.
    let (mut epochs, mut on, mut on_cpu) = (1u32, Duration::ZERO, Some(Duration::ZERO));
    loop {
        let stopped = wait_for_window(stop, window, cfg.epoch, opened, clock);
        let closed = mem.cas_u32(cfg.budgets, 1, 0);
        others.swap(true, (1, 0));
        on += opened.wall.elapsed();
        let closed_cpu = cpu();
        on_cpu = match (on_cpu, closed_cpu, opened.cpu) {
            (Some(sum), Some(now), Some(then)) => Some(sum + now.saturating_sub(then)),
            _ => None,
        };
        // The next epoch's window; at once if this thread fell behind.
        let at = first.wall + cfg.epoch * epochs + cfg.phase.offset(&mut pick, cfg.epoch, window);
        let armed = |groups| {
            // The guest's CPU time from the first window on (zero, like the windows',
            // where it is unknown).
            let (guest_cpu, cpu) = match (cpu().or(closed_cpu), first.cpu, on_cpu) {
                (Some(now), Some(first), Some(on)) => (now.saturating_sub(first), on),
                _ => Default::default(),
            };
            Armed {
                epochs: epochs.into(),
                windows: WindowTime {
                    wall: on,
                    cpu,
                    guest_cpu,
                },
                groups,
            }
        };
        if !closed {
            return armed(groups);
        }
        if let Some(g) = &mut groups {
            g.window_closed(&mut pick);
        }
        if stopped || stop.sleep_until(at) {
            return armed(groups);
        }
        if !mem.cas_u32(cfg.budgets, 0, 1) {
            return armed(groups);
        }
        others.swap(true, (0, 1));
        opened = Opened::now(clock);
        epochs += 1;
    }
}

/// A component's other modules' window flags (or budgets), each in its own memory, with
/// their defined functions.
struct Flags(Vec<(MemView, u32, u32)>);

impl Flags {
    /// Swaps every flag `from` → `to` if `now`.
    fn swap(&self, now: bool, (from, to): (u32, u32)) {
        for &(m, at, _) in self.0.iter().filter(|_| now) {
            m.cas_u32(at, from, to);
        }
    }

    /// Sets every module's budgets to `persistence`.
    fn arm(&self, persistence: u32) {
        for &(m, at, functions) in &self.0 {
            for f in 0..functions {
                m.set_u32(at + 4 * f, persistence);
            }
        }
    }
}

fn arm(mem: MemView, cfg: &EphemeralConfig) {
    for f in 0..cfg.functions {
        // The guest decrements with a plain load and store: a re-arm that lands between
        // them is lost, and the function waits for the next epoch. Rare, and harmless.
        mem.set_u32(cfg.budgets + 4 * f, cfg.persistence);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random windows open anywhere that keeps them inside their epoch, and cover it
    /// evenly; `Start` windows open as their epoch starts.
    #[test]
    fn window_offsets_stay_in_the_epoch_and_spread_over_it() {
        let (epoch, window) = (Duration::from_millis(2), Duration::from_micros(50));
        let room = epoch - window;
        let mut pick = Pick(Pick::SEED);
        let mut quarters = [0u32; 4];
        for _ in 0..4000 {
            let at = WindowPhase::Random.offset(&mut pick, epoch, window);
            assert!(at <= room, "{at:?} leaves the window past its epoch");
            quarters[(4 * at.as_nanos() / (room.as_nanos() + 1)) as usize] += 1;
        }
        assert!(
            quarters.iter().all(|&q| (850..1150).contains(&q)),
            "{quarters:?}"
        );
        assert_eq!(
            WindowPhase::Start.offset(&mut pick, epoch, window),
            Duration::ZERO
        );
        // A window as long as its epoch has no room to move.
        assert_eq!(
            WindowPhase::Random.offset(&mut pick, epoch, epoch),
            Duration::ZERO
        );
    }
}
