//! Tests of native stack samples, the SIGPROF handler and bursts' takeover.

use super::*;

static FOREIGN: AtomicU32 = AtomicU32::new(0);

extern "C" fn foreign_handler(_sig: libc::c_int) {
    FOREIGN.fetch_add(1, Ordering::SeqCst);
}

fn current_sigprof() -> usize {
    // SAFETY: queries the current action only.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old);
        old.sa_sigaction
    }
}

/// The tests that hold the handler's one slot take turns.
static ONE_SLOT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Another profiler's SIGPROF handler keeps its signals while pepper samples (they
/// are chained to it) and gets its place back when pepper's sampler ends.
#[test]
#[allow(unsafe_code)]
fn sigprof_handlers_chain_and_are_restored() {
    if !AVAILABLE {
        return;
    }
    let _turn = ONE_SLOT.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: installs a handler that only increments an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = foreign_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut());
    }
    let sampler = NativeSampler::for_current_thread().expect("no other sampler here");
    assert_eq!(current_sigprof(), handler as *const () as usize);
    // SAFETY: a signal to this thread, which both handlers expect.
    unsafe { libc::raise(libc::SIGPROF) };
    assert_eq!(FOREIGN.load(Ordering::SeqCst), 1, "not chained");
    // pepper's own samples still work and do not reach the other handler.
    let (mut out, mut copied) = (Vec::new(), Copied::default());
    drop(std::thread::scope(|s| {
        s.spawn(|| sampler.request((0, 0)) && sampler.collect(&mut out, &mut copied))
            .join()
    }));
    drop(sampler);
    assert_eq!(current_sigprof(), foreign_handler as *const () as usize);
    // SAFETY: as above.
    unsafe { libc::raise(libc::SIGPROF) };
    assert_eq!(FOREIGN.load(Ordering::SeqCst), 2);
}

/// A burst the sampler thread does not claim in time is taken over by the guest
/// thread's handler, which measures the guest's path-end rate on the guest's own
/// clock and clears the flag; a burst the sampler claims and finishes is left alone.
#[test]
#[allow(unsafe_code)]
fn an_unclaimed_burst_is_measured_and_ended_by_the_guest() {
    use crate::memview::MemView;
    use crate::worker::ThreadCpuClock;
    use std::sync::atomic::AtomicBool;
    if !AVAILABLE {
        return;
    }
    let _turn = ONE_SLOT.lock().unwrap_or_else(|e| e.into_inner());
    const HEAD: u32 = 0;
    const FLAG: u32 = 8;
    const LIMIT: u32 = 12;
    let mut words = vec![0u32; 16];
    let view = MemView {
        ptr: words.as_mut_ptr() as usize,
        len: 64,
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = &stop;
        s.spawn(move || {
            let sampler = NativeSampler::for_current_thread().expect("the slot is free");
            tx.send((
                std::sync::Arc::new(sampler),
                ThreadCpuClock::current().unwrap(),
            ))
            .unwrap();
            // The guest: a path end every few spins while the flag is set, as its
            // instrumented copies would write them.
            while !stop.load(Ordering::Relaxed) {
                if view.u32_at(FLAG) == 1 {
                    for _ in 0..2 {
                        std::hint::spin_loop();
                    }
                    view.set_u32(HEAD, view.u32_at(HEAD).wrapping_add(1));
                }
            }
        });
        // The guest stops however this thread leaves the scope (a failed assertion
        // too), or the scope would wait for it forever.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(stop);
        let (sampler, clock) = rx.recv().unwrap();
        // SAFETY: `words` outlives the sampler (dropped inside this scope).
        assert!(unsafe { sampler.enable_bursts(view, (HEAD, FLAG, LIMIT), 1 << 30) });
        let begin = |sampler: &NativeSampler| {
            view.set_u32(FLAG, 1);
            sampler.begin_burst((view.u32_at(HEAD), clock.now().unwrap()))
        };
        // Claimed and finished at once: no takeover, the flag stays as the sampler
        // left it.
        assert!(begin(&sampler));
        assert!(sampler.claim_burst());
        sampler.finish_burst();
        std::thread::sleep(burst::TAKEOVER * 20);
        assert_eq!(view.u32_at(FLAG), 1, "a finished burst was ended again");
        assert!(sampler.burst_idle() && sampler.take_burst().is_none());
        // The guest's own rate, with the flag set, over 20 ms of its time.
        let (h, c) = (view.u32_at(HEAD), clock.now().unwrap());
        while clock.now().unwrap() - c < Duration::from_millis(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let truth =
            view.u32_at(HEAD).wrapping_sub(h) as f64 / (clock.now().unwrap() - c).as_secs_f64();
        view.set_u32(FLAG, 0);
        // Never claimed: the handler takes it over.
        assert!(begin(&sampler));
        let t0 = Instant::now();
        let times = loop {
            if let Some(t) = sampler.take_burst() {
                break t;
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "no takeover");
            std::thread::sleep(Duration::from_micros(100));
        };
        assert_eq!(view.u32_at(FLAG), 0, "the handler left the flag set");
        assert!(!sampler.claim_burst(), "claimed after the takeover");
        let (h1, c1) = times.measured_from.expect("a measured burst");
        let (h2, c2) = times.ended;
        assert_ne!(h1, times.set.0, "measured before the guest moved");
        let rate = h2.wrapping_sub(h1) as f64 / (c2 - c1).as_secs_f64();
        // The timer's signals cost the guest part of the measured time (on a VM,
        // where each one exits to the host, the guest runs slowly for a while
        // after it), and other tests share the cores: lower, never higher, and never
        // far off.
        assert!(
            rate > truth * 0.3 && rate < truth * 1.1,
            "measured {rate:.0}/s against {truth:.0}/s"
        );
        drop(sampler);
    });
    drop(words);
}

fn map() -> CodeMap {
    CodeMap {
        text: 1000,
        text_len: 300,
        functions: vec![(0, 100, 5), (100, 200, 6)].into(),
        address_map: vec![(0, 10), (150, 20), (170, 30)].into(),
        sites: std::sync::Arc::new([(20, 3)].into_iter().collect()),
        origins: Default::default(),
    }
}

#[test]
fn frames_map_to_functions_and_call_sites() {
    // Leaf in function 5 (text offset 40), called from function 6 whose return address
    // (text offset 160) follows the call at module offset 20 (site 3); below it, host
    // code (outside the text) ends the stack.
    let raw = [(1040, 0x7000), (1160, 0x7100), (9000, 0x7200)];
    let mut out = Vec::new();
    assert!(wasm_frames(&raw, &map(), &mut out));
    assert_eq!(
        out,
        vec![(6, 3, (0x7100, 9000)), (5, u32::MAX, (0x7000, 1160))]
    );
    // The previous sample had the same outer frame: it is old, the leaf new.
    let again = NativeStack::new(&out, &out[..1], raw.len());
    assert!(again.marked(0) && !again.marked(1));
}

#[test]
fn a_leaf_outside_the_module_is_a_host_sample() {
    let mut out = Vec::new();
    assert!(!wasm_frames(
        &[(50, 0x7000), (1160, 0x7100)],
        &map(),
        &mut out
    ));
    assert!(!wasm_frames(&[], &map(), &mut out));
    // Past the last function: not code of this module.
    assert_eq!(map().function(1000 + 299), Some(6));
    assert_eq!(map().function(1000 + 300), None);
}
