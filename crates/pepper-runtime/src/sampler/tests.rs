use super::*;
use crate::worker::Worker;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One simulated guest at a time: each needs two cores (the guest and the sampler),
/// and two at once on a 2-core machine deschedule both.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One phase of a simulated guest: paths with word `word`, each taking `per_path`
/// (zero: as fast as the loop runs), for `length`; `None`: idle (a host call), no path
/// ends at all. Every 16 paths it waits `waits` off its CPU (zero: never), as a guest
/// does that shares its core with other busy processes.
#[derive(Copy, Clone)]
struct Phase {
    word: Option<u64>,
    per_path: Duration,
    length: Duration,
    waits: Duration,
}

/// Ring entries of the simulated guests.
const ENTRIES: u32 = 4096;

/// A simulated guest's profiler memory (head at byte 0, the ring from byte 64), a view
/// of it for the sampler, and PEP's default sampler config for it, bursts every 1 ms.
fn simulated_memory() -> (Vec<AtomicU64>, MemView, SamplerConfig) {
    let mem: Vec<AtomicU64> = (0..8 + ENTRIES as usize)
        .map(|_| AtomicU64::new(0))
        .collect();
    let view = MemView {
        ptr: mem.as_ptr() as usize,
        len: mem.len() * 8,
    };
    let cfg = SamplerConfig::with(
        0,
        64,
        ENTRIES,
        PepParams::default(),
        Duration::from_millis(1),
    );
    (mem, view, cfg)
}

/// Runs a guest that repeats `phases` for 300 ms against the sampler, and returns the
/// true executions of each word and the sampler's estimates.
/// The sampler reads this thread's CPU clock, as it reads the guest thread's.
fn simulate(phases: &[Phase]) -> (HashMap<u64, f64>, HashMap<u64, f64>) {
    simulate_for(phases, Duration::from_millis(300))
}

/// [`simulate`] for `run` instead of 300 ms: a word that gets a few ticks a run needs
/// a longer one, or its estimate is a handful of bursts and as noisy as they are.
fn simulate_for(phases: &[Phase], run: Duration) -> (HashMap<u64, f64>, HashMap<u64, f64>) {
    let (truth, est, _) = simulate_timed(phases, run);
    (truth, est)
}

/// [`simulate_for`], and whether the sampler ticked on time: at least three in four of
/// the ticks the guest's CPU time called for (on a busy machine the sampler itself
/// waits for a core, and ticks late).
fn simulate_timed(phases: &[Phase], run: Duration) -> (HashMap<u64, f64>, HashMap<u64, f64>, bool) {
    let _turn = one_at_a_time();
    simulate_in_turn(phases, run)
}

/// [`simulate_timed`] for a caller that holds [`one_at_a_time`]'s turn already.
fn simulate_in_turn(
    phases: &[Phase],
    run: Duration,
) -> (HashMap<u64, f64>, HashMap<u64, f64>, bool) {
    let clock = crate::worker::ThreadCpuClock::current();
    let (mem, view, cfg) = simulated_memory();
    let cfg_interval = cfg.interval;
    let in_host = Arc::new(AtomicBool::new(false));
    let sampler = Worker::spawn("test-sampler", move |stop| {
        sample_loop(
            ((view, Vec::new()), None, clock, None),
            &cfg,
            stop,
            &in_host,
            None,
            &Default::default(),
        )
    });
    // SAFETY: the first word of `mem`, aligned and alive for the whole test; every access
    // to it is atomic (the sampler's too).
    let head = unsafe { AtomicU32::from_ptr(mem.as_ptr() as *mut u32) };
    let mut h = 0u32;
    let mut truth: HashMap<u64, f64> = HashMap::new();
    let ran_from = clock.and_then(|c| c.now());
    let start = Instant::now();
    'run: for phase in phases.iter().cycle() {
        let end = Instant::now() + phase.length;
        while Instant::now() < end {
            if start.elapsed() > run {
                break 'run;
            }
            let Some(word) = phase.word else {
                std::hint::spin_loop();
                continue;
            };
            for _ in 0..16 {
                let t = Instant::now();
                while t.elapsed() < phase.per_path {
                    std::hint::spin_loop();
                }
                *truth.entry(word).or_default() += 1.0;
                mem[8 + (h % ENTRIES) as usize].store(word, Ordering::Relaxed);
                h = h.wrapping_add(1);
                head.store(h, Ordering::Release);
            }
            if !phase.waits.is_zero() {
                std::thread::sleep(phase.waits);
            }
        }
    }
    let ran = clock
        .and_then(|c| c.now())
        .zip(ran_from)
        .map(|(now, from)| now - from);
    let res = sampler.finish().expect("the sampler finishes");
    assert_eq!(res.path_ends, h as u64);
    let est: HashMap<u64, f64> = res.words.iter().map(|&(w, c)| (w, c as f64)).collect();
    // Estimates are executions: they add up to the path ends counted.
    let total: f64 = est.values().sum();
    assert!((total / h as f64 - 1.0).abs() < 0.01, "{total} vs {h}");
    let due = ran.map_or(0, |ran| ran.as_micros() / cfg_interval.as_micros());
    (truth, est, res.ticks as u128 * 4 >= due * 3)
}

/// Switch: a guest that completes paths (two kinds, 300 µs each in turn) all along but
/// writes them to the ring only while the flag is set, as the instrumented copies do.
/// The sampler sets the flag for each burst only, leaves it clear, and its estimates
/// (rate times time, with nothing counted outside bursts) keep the two kinds' shares.
/// The shares are judged on up to three runs: with the test's two threads and other
/// work on a two-core machine, the sampler gets few ticks in (share 0.000 once, with
/// one busy loop beside the tests).
#[test]
fn switched_bursts_set_the_flag_only_for_the_burst() {
    let _turn = one_at_a_time();
    let mut shares = Vec::new();
    for _ in 0..3 {
        let (got, truth) = switched_run();
        if (got - truth).abs() < 0.15 {
            return;
        }
        shares.push((got, truth));
    }
    panic!("shares (estimated, true) in each run: {shares:.3?}");
}

/// One run of [`switched_bursts_set_the_flag_only_for_the_burst`]: the estimated and
/// the true share of the first kind.
fn switched_run() -> (f64, f64) {
    const FLAG: u32 = 8;
    let (mem, view, mut cfg) = simulated_memory();
    cfg.switch = Some(SwitchWords {
        flag: FlagWord { at: FLAG },
        limit: FLAG + pepper_layout::SWITCH_LIMIT_OFFSET,
    });
    let flag = Some(Flag::at(view, FLAG));
    cfg.params = cfg.burst_params();
    let in_host = Arc::new(AtomicBool::new(false));
    let sampler = Worker::spawn("test-sampler", move |stop| {
        sample_loop(
            ((view, Vec::new()), flag, None, None),
            &cfg,
            stop,
            &in_host,
            None,
            &Default::default(),
        )
    });
    // SAFETY: words of `mem`, aligned and alive for the whole test; every access is
    // atomic (the sampler's too).
    let (head, flag) = unsafe {
        (
            AtomicU32::from_ptr(mem.as_ptr() as *mut u32),
            AtomicU32::from_ptr((mem.as_ptr() as usize + FLAG as usize) as *mut u32),
        )
    };
    let (mut h, mut all, mut on) = (0u32, [0f64; 2], Duration::ZERO);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        let kind = (start.elapsed().as_micros() / 300 % 2) as usize;
        let t = Instant::now();
        for _ in 0..16 {
            all[kind] += 1.0;
            if flag.load(Ordering::Acquire) != 0 {
                mem[8 + (h % ENTRIES) as usize].store(kind as u64 + 1, Ordering::Relaxed);
                h = h.wrapping_add(1);
                head.store(h, Ordering::Release);
            }
        }
        if flag.load(Ordering::Acquire) != 0 {
            on += t.elapsed();
        }
    }
    let res = sampler.finish().expect("the sampler finishes");
    assert_eq!(flag.load(Ordering::Acquire), 0, "the flag is left clear");
    assert_eq!(res.instrumented_ends, h as u64);
    assert!(res.taken > 0 && res.switched_on > Duration::ZERO);
    assert!(
        on < Duration::from_millis(150),
        "instrumented half the time: {on:?}"
    );
    let est: HashMap<u64, f64> = res.words.iter().map(|&(w, c)| (w, c as f64)).collect();
    (share(&est, 1), all[0] / (all[0] + all[1]))
}

/// A component's two instrumented modules: the guest writes path ends to module A's ring
/// (word 1) and, three times as often, to module B's (word 2), each only while its own
/// module's flag is set. The sampler sets and clears both flags together, draws every
/// burst from both rings, and keeps each ring's words apart: module A's estimates in
/// `words`, B's in `module_words`, one to three. Judged on up to three runs, as
/// [`switched_bursts_set_the_flag_only_for_the_burst`].
#[test]
fn a_burst_spans_every_modules_ring() {
    let _turn = one_at_a_time();
    let mut shares = Vec::new();
    for _ in 0..3 {
        let share = two_ring_run();
        if (share - 0.25).abs() < 0.05 {
            return;
        }
        shares.push(share);
    }
    panic!("module A's estimated share in each run: {shares:.3?}");
}

/// One run of [`a_burst_spans_every_modules_ring`]: module A's estimated share.
fn two_ring_run() -> f64 {
    const FLAG: u32 = 8;
    let (mem_a, view_a, mut cfg) = simulated_memory();
    let (mem_b, view_b, _) = simulated_memory();
    let words = SwitchWords {
        flag: FlagWord { at: FLAG },
        limit: FLAG + pepper_layout::SWITCH_LIMIT_OFFSET,
    };
    cfg.switch = Some(words);
    cfg.params = cfg.burst_params();
    cfg.modules = vec![ModuleRing {
        module: 1,
        ring: Ring {
            head: 0,
            base: 64,
            entries: ENTRIES,
        },
        switch: Some(words),
        origins: Vec::new(),
    }];
    let flag = Some(Flag::at(view_a, FLAG));
    let in_host = Arc::new(AtomicBool::new(false));
    let sampler = Worker::spawn("test-sampler", move |stop| {
        sample_loop(
            ((view_a, vec![Some(view_b)]), flag, None, None),
            &cfg,
            stop,
            &in_host,
            None,
            &Default::default(),
        )
    });
    // SAFETY: words of `mem_a` and `mem_b`, aligned and alive for the whole test; every
    // access is atomic (the sampler's too).
    let word = |mem: &[AtomicU64], at: u32| unsafe {
        AtomicU32::from_ptr((mem.as_ptr() as usize + at as usize) as *mut u32)
    };
    let (head_a, flag_a) = (word(&mem_a, 0), word(&mem_a, FLAG));
    let (head_b, flag_b) = (word(&mem_b, 0), word(&mem_b, FLAG));
    let (mut h, mut only_one) = ([0u32; 2], 0u32);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        for k in 0..4 {
            let (mem, head, flag, module) = match k {
                0 => (&mem_a, head_a, flag_a, 0),
                _ => (&mem_b, head_b, flag_b, 1),
            };
            if flag_a.load(Ordering::Acquire) != flag_b.load(Ordering::Acquire) {
                only_one += 1;
            }
            if flag.load(Ordering::Acquire) != 0 {
                let at = 8 + (h[module] % ENTRIES) as usize;
                mem[at].store(module as u64 + 1, Ordering::Relaxed);
                h[module] = h[module].wrapping_add(1);
                head.store(h[module], Ordering::Release);
            }
        }
    }
    let res = sampler.finish().expect("the sampler finishes");
    assert_eq!(
        flag_a.load(Ordering::Acquire) + flag_b.load(Ordering::Acquire),
        0
    );
    assert!(h[0] > 0 && h[1] > 0, "both modules ran instrumented: {h:?}");
    // The flags change one after the other: the guest sees them apart only briefly.
    assert!(
        only_one < h[0] + h[1],
        "{only_one} checks found one flag set"
    );
    assert_eq!(res.module_words.len(), 1);
    let a: f64 = res.words.iter().map(|w| w.1 as f64).sum();
    let b: f64 = res.module_words[0].iter().map(|w| w.1 as f64).sum();
    assert!(
        res.words.iter().all(|w| w.0 == 1),
        "A's ring holds word 1 only"
    );
    assert!(res.module_words[0].iter().all(|w| w.0 == 2));
    a / (a + b).max(1.0)
}

fn share(of: &HashMap<u64, f64>, word: u64) -> f64 {
    of.get(&word).copied().unwrap_or(0.0) / of.values().sum::<f64>()
}

/// A guest that alternates, every 300 µs, between code that completes paths fast
/// (word 1) and code that takes 1 µs per path (word 2): most path ends are fast ones,
/// but half the time goes to slow ones, and a tick's interval holds both. Returns the
/// true share of fast path ends and the sampler's estimate of it.
fn fast_share() -> (f64, f64) {
    let phase = |word, per_path| Phase {
        word: Some(word),
        per_path: Duration::from_micros(per_path),
        length: Duration::from_micros(300),
        waits: Duration::ZERO,
    };
    let (truth, est) = simulate(&[phase(1, 0), phase(2, 1)]);
    (share(&truth, 1), share(&est, 1))
}

/// A guest whose fast loop (word 1, 300 µs) is followed by a few microseconds of other
/// paths (word 3) and then 300 µs without any path end, like a loop that ends in a
/// host call. Half the ticks land in the pause, where the newest paths in the ring
/// are word 3's. Those ticks' bursts must weigh nothing (the guest's rate then is
/// zero): weighted by the path ends since the previous tick, word 3 came out at about
/// half of all path ends, against a true share under 2%.
#[test]
fn bursts_taken_while_the_guest_completes_nothing_weigh_nothing() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: the guest and the sampler need two cores");
        return;
    }
    let phases = [
        Phase {
            word: Some(1),
            per_path: Duration::ZERO,
            length: Duration::from_micros(300),
            waits: Duration::ZERO,
        },
        Phase {
            word: Some(3),
            per_path: Duration::ZERO,
            length: Duration::from_micros(3),
            waits: Duration::ZERO,
        },
        Phase {
            word: None,
            per_path: Duration::ZERO,
            length: Duration::from_micros(300),
            waits: Duration::ZERO,
        },
    ];
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (truth, rate) = simulate(&phases);
        let (t3, r3) = (share(&truth, 3), share(&rate, 3));
        // (About 0.016 of the path ends; more when the fast loop ran slowly.)
        assert!(t3 < 0.05, "word 3 is not rare: {t3}");
        if r3 < t3 + 0.03 {
            return;
        }
        seen.push(format!("word 3: truth {t3:.3}, rate weights {r3:.3}"));
    }
    panic!("{seen:#?}");
}

/// A guest beside busy neighbours: one busy thread per core compete with it and with
/// the sampler, so both wait for a core at times no one chooses, as on a loaded
/// machine. The guest alternates between fast paths (word 1) and paths five times
/// slower (word 2), 3 ms each. Rate-weighted bursts estimate word 2's share of path
/// ends as on an idle machine (tick weights would drift toward its share of time).
/// Preemption at random times biases neither CPU-clock nor wall-clock ticks, so this
/// does not tell them apart; the sleeping guest below is what does.
#[test]
fn a_guest_beside_busy_neighbours_is_estimated_as_on_an_idle_machine() {
    let phases = [
        Phase {
            word: Some(1),
            per_path: Duration::from_nanos(200),
            length: Duration::from_millis(3),
            waits: Duration::ZERO,
        },
        Phase {
            word: Some(2),
            per_path: Duration::from_micros(1),
            length: Duration::from_millis(3),
            waits: Duration::ZERO,
        },
    ];
    // The neighbours spin only during this test's turn: the other simulations must not
    // run beside them.
    let _turn = one_at_a_time();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let neighbours: Vec<_> = (0..cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut seen = Vec::new();
    let mut judged = false;
    for _ in 0..3 {
        let (truth, est, _) = simulate_in_turn(&phases, Duration::from_secs(1));
        let (t2, e2) = (share(&truth, 2), share(&est, 2));
        if (0.8 * t2..=1.25 * t2).contains(&e2) {
            judged = true;
            break;
        }
        seen.push(format!("word 2: truth {t2:.3}, estimated {e2:.3}"));
    }
    stop.store(true, Ordering::Relaxed);
    for n in neighbours {
        n.join().unwrap();
    }
    assert!(judged, "{seen:#?}");
}

/// A guest that alternates between code it runs without a pause (word 1) and code
/// during which it keeps waiting for its core (word 2: 16 paths, then 150 µs off its
/// CPU), as a guest beside other busy processes does. Ticks spaced by the guest's CPU
/// time land on each word in proportion to the time the guest runs it, and a tick that
/// finds it waiting is no sample, so word 2's small share of path ends is
/// estimated as such. With ticks at wall-clock times and CPU-time weights, each burst
/// in word 2 stood for the work done in word 1 before it, and word 2 came out at two to
/// four times its share.
///
/// Judged on runs in which the sampler ticked on time. Beside a busy process the
/// sampler ticks late, its ticks and rate watches line up with the guest's sleeps, and
/// word 2 comes out several times its share. A wasm guest does not sleep in the middle
/// of its code, though: its waits are host calls, and a guest preempted at random is
/// what the test beside busy neighbours checks.
#[test]
fn a_guest_waiting_for_its_core_is_not_idle() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: the guest and the sampler need two cores");
        return;
    }
    let phases = [
        Phase {
            word: Some(1),
            per_path: Duration::from_nanos(200),
            length: Duration::from_millis(3),
            waits: Duration::ZERO,
        },
        Phase {
            word: Some(2),
            per_path: Duration::from_nanos(200),
            length: Duration::from_millis(3),
            waits: Duration::from_micros(150),
        },
    ];
    // Word 2 gets a few ticks a second: the runs judged add up, truth and estimate
    // summed over them.
    let mut seen = Vec::new();
    let (mut truth, mut estimated) = (HashMap::new(), HashMap::new());
    for _ in 0..5 {
        let (t, e, on_time) = simulate_timed(&phases, Duration::from_secs(1));
        if !on_time {
            seen.push("not judged: the sampler ticked late".to_string());
            continue;
        }
        for (sum, run) in [(&mut truth, t), (&mut estimated, e)] {
            for (word, n) in run {
                *sum.entry(word).or_insert(0.0) += n;
            }
        }
        let (t2, e2) = (share(&truth, 2), share(&estimated, 2));
        if (0.5 * t2..=1.6 * t2).contains(&e2) {
            return;
        }
        seen.push(format!("word 2 so far: truth {t2:.3}, estimated {e2:.3}"));
    }
    if truth.is_empty() {
        eprintln!("not judged, the machine was busy: {seen:#?}");
        return;
    }
    panic!("{seen:#?}");
}

/// A guest that completes its paths before the first tick and then completes none:
/// every tick is idle, and no path end is new at exit. The exit burst still samples
/// the newest paths, standing for all of them (before, such a run had no samples,
/// which is what a second concurrent run on a 2-core machine got when its own sampler
/// kept descheduling it).
#[test]
fn a_run_whose_every_tick_is_idle_still_gets_the_exit_burst() {
    let phases = [
        Phase {
            word: Some(5),
            per_path: Duration::ZERO,
            length: Duration::from_micros(200),
            waits: Duration::ZERO,
        },
        Phase {
            word: None,
            per_path: Duration::ZERO,
            length: Duration::from_secs(1),
            waits: Duration::ZERO,
        },
    ];
    let (truth, est) = simulate(&phases);
    assert_eq!(truth.keys().collect::<Vec<_>>(), [&5]);
    assert_eq!(
        est.keys().collect::<Vec<_>>(),
        [&5],
        "the exit burst was taken"
    );
}

/// Rate weights estimate the share of path ends, not of time: the fast phase and the
/// slow one last as long, and the fast one completes most of the path ends (a share of
/// time would put it near one half). The guest and the sampler need a core each: when
/// other work deschedules the guest during a rate measurement the rate is measured over
/// its pause, so the test tries three times before it fails, and says so on a single
/// core.
#[test]
fn rate_weights_count_paths_not_time() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: the guest and the sampler need two cores");
        return;
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (truth, rate) = fast_share();
        if truth < 0.9 {
            // The fast phase ran slowly (a busy machine): a share of path ends and a
            // share of time cannot be told apart by this run.
            seen.push(format!("not judged: fast share {truth:.3}"));
            continue;
        }
        if (rate - truth).abs() < 0.08 {
            return;
        }
        seen.push(format!("rate weights {rate:.3} (truth {truth:.3})"));
    }
    if seen.iter().all(|s| s.starts_with("not judged")) {
        eprintln!("not judged: the machine was too busy to simulate the guest: {seen:?}");
        return;
    }
    panic!("{seen:#?}");
}
