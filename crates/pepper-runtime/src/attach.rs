//! Profiling attached to a store: the threads that read and write pepper's memory while a
//! guest runs. [`crate::Prepared::run`] attaches around the WASI command it runs; an
//! embedder attaches around the calls its own host makes into its own instance (its
//! `Store`, its `Linker`, its host functions, WASI or not).

use crate::flag::Flag;
use crate::memview::MemView;
use crate::worker::Worker;
use crate::{epochs, native, sampler, EphemeralConfig, SamplerConfig, SamplerResult, WindowTime};
use anyhow::{Context, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use wasmtime::{AsContext, AsContextMut, Instance, Module, Store, StoreContext, StoreContextMut};

/// What to start next to a guest: the profiling half of [`crate::RunConfig`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct AttachConfig {
    /// The instrumented module's export of pepper's memory (`pepper_wasm::COUNTERS_EXPORT`).
    pub counters_export: Option<String>,
    /// PEP's ring and/or stack sampling: the sampler thread.
    pub sampler: Option<SamplerConfig>,
    /// Ephemeral instrumentation: the thread that re-arms budgets every epoch.
    pub ephemeral: Option<EphemeralConfig>,
    /// Switchable instrumentation: set this flag once and leave it set.
    pub switch_on: Option<crate::FlagWord>,
    /// Ending the run early: a watcher thread collects what the run has so far.
    pub early_stop: Option<EarlyStop>,
}

/// Why a run was stopped early.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// SIGINT (Ctrl-C) or SIGTERM, with [`crate::stop_on_signals`] installed: the signal.
    Signal(i32),
    /// [`EarlyStop::after`] elapsed.
    Duration,
}

/// Stopping a run before the guest returns (Ctrl-C, a time limit): a watcher thread stops
/// the sampler, copies pepper's memory and hands both to `on_stop` while the guest keeps
/// running; `on_stop` decides what happens next (`pepper run` writes the profile and
/// ends the process).
#[derive(Clone)]
pub struct EarlyStop {
    /// Stop when a signal asks ([`crate::stop_on_signals`]).
    pub signals: bool,
    /// Stop after this long.
    pub after: Option<Duration>,
    /// Receives what was collected so far.
    pub on_stop: Arc<dyn Fn(Collected, StopReason) + Send + Sync>,
    /// Every this long, while the guest runs, hand what was collected so far to
    /// `on_snapshot` (the sampler keeps running).
    pub snapshot_every: Option<Duration>,
    /// Receives the snapshots.
    pub on_snapshot: Option<Arc<dyn Fn(Collected) + Send + Sync>>,
}

impl std::fmt::Debug for EarlyStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyStop")
            .field("signals", &self.signals)
            .field("after", &self.after)
            .field("snapshot_every", &self.snapshot_every)
            .finish_non_exhaustive()
    }
}

/// A store with pepper attached to one of its instances: the embedder's calls go
/// through it (`func.call(&mut profiled, ...)`: it is `AsContextMut`), and pepper's
/// threads read the instance's memory until [`Profiled::finish`].
///
/// Why it owns the store: pepper's threads read the store's memory while the guest runs,
/// which is sound only while the store lives; holding it here means it cannot go away (or
/// be swapped out) first.
pub struct Profiled<T: 'static> {
    // Field order matters: the threads stop (drop) before the store goes.
    attached: Attached,
    store: Store<T>,
}

impl<T: 'static> Profiled<T> {
    /// Starts profiling `instance` (of the instrumented `module`) in `store`.
    ///
    /// Call it on the thread that will call into the guest: native stack samples
    /// interrupt that thread (one such thread per process at a time; a second attach
    /// meanwhile goes without stacks and says so), PEP's ticks are spaced by its CPU
    /// clock (a guest called from another thread would look off its CPU at every tick,
    /// and its profile would be nearly empty), and ephemeral windows read that clock to
    /// scale what they recorded. Do not grow pepper's memory (the
    /// module's `pepper:counters` export): its address must not move.
    pub fn new(
        mut store: Store<T>,
        instance: &Instance,
        module: &Module,
        cfg: &AttachConfig,
    ) -> Result<Profiled<T>> {
        let memory = counters_view(&mut store, instance, cfg);
        let code = native::CodeSource::Module(module);
        let memories = (memory, Vec::new());
        let attached = Attached::start_with(&mut store, memories, code, cfg, &OnceLock::new())?;
        Ok(Profiled { attached, store })
    }

    /// The embedder's store data.
    pub fn data(&self) -> &T {
        self.store.data()
    }

    /// The embedder's store data, mutably.
    pub fn data_mut(&mut self) -> &mut T {
        self.store.data_mut()
    }

    /// A copy of pepper's memory now, between calls into the guest: exact modes' counts
    /// so far (a snapshot; PEP's samples are the sampler thread's until `finish`).
    pub fn counters(&self) -> Option<Vec<u8>> {
        self.attached.counters()
    }

    /// Stops pepper's threads; returns the store and what they collected.
    pub fn finish(self) -> (Store<T>, Collected) {
        let Profiled { attached, store } = self;
        let collected = attached.finish();
        (store, collected)
    }
}

impl<T: 'static> AsContext for Profiled<T> {
    type Data = T;
    fn as_context(&self) -> StoreContext<'_, T> {
        self.store.as_context()
    }
}

impl<T: 'static> AsContextMut for Profiled<T> {
    fn as_context_mut(&mut self) -> StoreContextMut<'_, T> {
        self.store.as_context_mut()
    }
}

/// Profiling attached to one instance: its threads run until [`Attached::finish`] (or
/// drop). The store must outlive it (see [`Profiled`]).
pub(crate) struct Attached {
    // The watcher stops first: it may take the sampler.
    watcher: Option<Worker<()>>,
    memory: Option<MemView>,
    /// Inside a component: the other instrumented core modules' memories.
    modules: Vec<Option<MemView>>,
    sampler: Arc<Mutex<Option<sampler::Sampler>>>,
    armer: Option<epochs::Armer>,
}

/// What profiling collected.
#[derive(Debug, Default)]
pub struct Collected {
    /// A copy of pepper's memory (counters, hash tables, call-site counts).
    pub counters: Option<Vec<u8>>,
    /// Inside a component: copies of the other instrumented core modules' memories
    /// ([`crate::RunConfig::module_tags`]).
    pub module_counters: Vec<Option<Vec<u8>>>,
    /// What the sampler thread collected.
    pub samples: Option<SamplerResult>,
    /// Ephemeral instrumentation: the epochs armed.
    pub epochs: u64,
    /// Ephemeral in windows: how long they were open.
    pub windows: WindowTime,
    /// Ephemeral in windows: what the windows counted, split into random groups, each an
    /// image of pepper's memory holding its group's counts (they sum to `counters`); see
    /// `pepper_wasm::RunOutcome::window_groups`.
    pub window_groups: Vec<Vec<u8>>,
}

impl Attached {
    /// Starts the threads, with a code map cached across runs of one module. The caller
    /// keeps `store` alive until `finish` ([`Profiled`], `Prepared::run`). `modules` are
    /// the memories of a component's other instrumented core modules.
    pub(crate) fn start_with<T: 'static>(
        store: &mut Store<T>,
        (memory, modules): (Option<MemView>, Vec<Option<MemView>>),
        code: native::CodeSource<'_>,
        cfg: &AttachConfig,
        code_map: &OnceLock<native::CodeMap>,
    ) -> Result<Attached> {
        if let Some(word) = cfg.switch_on {
            Flag::new(word, memory)?.set(true);
        }
        let armer = match &cfg.ephemeral {
            Some(e) => {
                let mem = memory.context("ephemeral: the module has no counters memory")?;
                Some(epochs::Armer::start(mem, &modules, e.clone()))
            }
            None => None,
        };
        let sampler = match &cfg.sampler {
            Some(sc) => Some(start_sampler(
                store,
                (memory, &modules),
                code,
                sc,
                code_map,
            )?),
            None => None,
        };
        let sampler = Arc::new(Mutex::new(sampler));
        let watcher = cfg.early_stop.clone().map(|stop| {
            let view = memory.unwrap_or(MemView { ptr: 0, len: 0 });
            watch(stop, view, modules.clone(), sampler.clone())
        });
        Ok(Attached {
            watcher,
            memory,
            modules,
            sampler,
            armer,
        })
    }

    /// A copy of pepper's memory now.
    pub(crate) fn counters(&self) -> Option<Vec<u8>> {
        self.memory.map(|m| m.copy())
    }

    /// What the threads have collected so far, leaving them running: pepper's memories
    /// now and the sampler's estimates (as it would finish now; `None` if it did not
    /// answer within `patience`).
    pub(crate) fn snapshot(&self, patience: Duration) -> Collected {
        let mailbox = (self.sampler.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(sampler::Sampler::snapshots);
        Collected {
            samples: mailbox.and_then(|m| m.take(patience)),
            counters: self.counters(),
            module_counters: copies(&self.modules),
            ..Default::default()
        }
    }

    /// Stops the threads and returns what they collected, with pepper's memory.
    pub(crate) fn finish(mut self) -> Collected {
        drop(self.watcher.take());
        let counters = self.counters();
        let sampler = take(&self.sampler);
        let mut armed = self
            .armer
            .take()
            .map_or_else(Default::default, epochs::Armer::finish);
        let window_groups = armed.window_groups(counters.as_deref());
        let samples = sampler.map(sampler::Sampler::finish);
        Collected {
            counters,
            module_counters: copies(&self.modules),
            samples,
            epochs: armed.epochs,
            windows: armed.windows,
            window_groups,
        }
    }
}

/// Copies of the memories that exist.
fn copies(memories: &[Option<MemView>]) -> Vec<Option<Vec<u8>>> {
    memories.iter().map(|m| m.map(|m| m.copy())).collect()
}

fn take(sampler: &Mutex<Option<sampler::Sampler>>) -> Option<sampler::Sampler> {
    sampler
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

/// The watcher: polls for a stop request every 20 ms and, on one, collects what the run
/// has so far. Stopped (and joined) by `Attached::finish` before the store goes away, so
/// its view of pepper's memory stays valid.
fn watch(
    stop: EarlyStop,
    memory: crate::memview::MemView,
    modules: Vec<Option<MemView>>,
    sampler: Arc<Mutex<Option<sampler::Sampler>>>,
) -> Worker<()> {
    let start = Instant::now();
    let mailbox = sampler
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
        .map(sampler::Sampler::snapshots);
    let mut next_snapshot = stop.snapshot_every.map(|d| start + d);
    Worker::spawn("pepper-watch", move |done| {
        let reason = loop {
            if done.sleep(Duration::from_millis(20)) {
                return;
            }
            if let Some(sig) = crate::interrupt::requested().filter(|_| stop.signals) {
                break StopReason::Signal(sig);
            }
            if stop.after.is_some_and(|d| start.elapsed() >= d) {
                break StopReason::Duration;
            }
            if let (Some(at), Some(every), Some(deliver)) =
                (next_snapshot, stop.snapshot_every, &stop.on_snapshot)
            {
                if Instant::now() >= at {
                    next_snapshot = Some(at + every);
                    let samples = mailbox
                        .as_ref()
                        .and_then(|m| m.take(Duration::from_secs(1)));
                    deliver(Collected {
                        counters: (memory.len > 0).then(|| memory.copy()),
                        module_counters: copies(&modules),
                        samples,
                        ..Default::default()
                    });
                }
            }
        };
        let samples = take(&sampler).map(sampler::Sampler::finish);
        let collected = Collected {
            counters: (memory.len > 0).then(|| memory.copy()),
            module_counters: copies(&modules),
            samples,
            ..Default::default()
        };
        (stop.on_stop)(collected, reason);
    })
}

/// The sampler thread, with native stacks when the configuration asks and the signal
/// handler is free.
fn start_sampler<T: 'static>(
    store: &mut Store<T>,
    (memory, modules): (Option<MemView>, &[Option<MemView>]),
    code: native::CodeSource<'_>,
    sc: &SamplerConfig,
    code_map: &OnceLock<native::CodeMap>,
) -> Result<sampler::Sampler> {
    let flag = sc.switch.map(|w| Flag::new(w.flag, memory)).transpose()?;
    let native_only = sc.entries == 0 && sc.stacks.as_ref().is_some_and(|s| s.native.is_some());
    anyhow::ensure!(
        memory.is_some() || native_only,
        "sampling: the module has no counters memory"
    );
    let in_host = Arc::new(AtomicBool::new(false));
    if sc.stacks.as_ref().is_some_and(|s| s.native.is_none()) {
        // Host time is attributed to the import being called, not lost and not charged
        // to the guest frame that called it. Native samples need no hook (a leaf outside
        // wasm code is the host), so they do not pay for one at every host call.
        let flag = in_host.clone();
        store.call_hook(move |_, hook| {
            flag.store(hook.entering_host(), Ordering::Release);
            Ok(())
        });
    }
    let mut sc = sc.clone();
    let native = match sc
        .stacks
        .as_ref()
        .and_then(|s| s.native.clone().zip(Some(s)))
    {
        Some((sites, s)) => {
            let mut map = code_map.get_or_init(|| code.code_map()).clone();
            map.sites = sites;
            map.origins = s.origins.clone();
            if !sc.modules.is_empty() {
                // The other modules' switch copies are named by what they copy too.
                let mut origins = (*s.origins).clone();
                for m in &sc.modules {
                    let id = |f| pepper_wasm::component::foreign_function(m.module, f);
                    origins.extend(
                        m.origins
                            .iter()
                            .filter_map(|&(c, f)| Some((id(c)?, id(f)?))),
                    );
                }
                map.origins = Arc::new(origins);
            }
            let n = native::NativeSampler::for_current_thread();
            if n.is_none() {
                // The signal handler serves one guest thread per process; a run on a
                // second thread meanwhile goes without stacks rather than read a shadow
                // stack its module does not keep.
                eprintln!(
                    "pepper: warning: native stack sampling is busy (another run in this \
                     process) or unavailable: this run records no calling contexts"
                );
                sc.stacks = None;
            }
            n.map(|n| (Arc::new(n), Arc::new(map)))
        }
        None => None,
    };
    // The switch's bursts are run by the guest thread's signal handler where there is
    // one: the native sampler's, or one of their own.
    let signals = (sc.switch.is_some() && sc.entries > 0)
        .then(|| match &native {
            Some((n, _)) => Some(n.clone()),
            None => native::NativeSampler::for_current_thread().map(Arc::new),
        })
        .flatten();
    Ok(sampler::Sampler::start(
        (
            memory.unwrap_or(MemView { ptr: 0, len: 0 }),
            modules.to_vec(),
        ),
        flag,
        sc,
        in_host,
        native,
        signals,
    ))
}

/// Pepper's memory in a core module's instance (its export), the only memory the
/// profiling threads read and write: never the program's.
pub(crate) fn counters_view<T: 'static>(
    store: &mut Store<T>,
    instance: &Instance,
    cfg: &AttachConfig,
) -> Option<MemView> {
    let memory = cfg
        .counters_export
        .as_deref()
        .and_then(|name| instance.get_memory(&mut *store, name))?;
    Some(MemView::of(Some(&memory), &*store))
}
