//! Code a sampled profile can only see if the switch reaches it: a loop nest behind many
//! blocks and a recursion without loops, each entered in clean code and running for a
//! whole call. PEP's bursts and ephemeral windows must both find it, in about the share of
//! the run it takes. Their own test binary, and one at a time: they judge where time
//! samples land, which other tests running beside them on a small machine skew.

mod common;
use common::*;
use pepper_profile::Profile;
use std::sync::Mutex;

/// One test's sampled runs at a time.
static TURN: Mutex<()> = Mutex::new(());

/// What one fixture must show.
struct Reach {
    fixture: &'static str,
    /// The function whose work the samples must reach.
    func: &'static str,
    /// The exact share of path ends the fixture's mix gives `func`.
    truth: std::ops::Range<f64>,
    /// The most of the run's path ends PEP's instrumented copies may run: bursts end in
    /// the guest, so a frame a burst found must go back to clean code.
    ran: f64,
    /// Whether ephemeral windows, at their default placement, must reach it too.
    windows: bool,
}

impl Reach {
    fn check(&self) {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let f = fixture(self.fixture);
        let (c0, _, err, exact) = run("exact-paths", &f, &[], &[]);
        assert_eq!(c0, 0, "{err}");
        let (_, _, _, edges) = run("exact-edges", &f, &[], &[]);
        let total = |p: &Profile| p.paths.iter().map(|p| p.count).sum::<u64>() as f64;
        let share = |p: &Profile| path_executions(p, self.func) as f64 / total(p);
        let truth = share(&exact);
        assert!(self.truth.contains(&truth), "the fixture's mix: {truth}");
        // Time samples on a shared machine: judged on up to three runs each. Code the
        // checks cannot reach shows up as ~0 in every run. The copies' pace biases the
        // share down (a burst samples instrumented code, which runs slower), and more so
        // on a loaded machine: a third of the exact share is the bound.
        let pep_ok = |s: f64| (truth / 3.0..truth + 0.15).contains(&s);
        let mut shares = Vec::new();
        for _ in 0..3 {
            let (c, _, err, p) = run("pep", &f, &[], &[]);
            assert_eq!(c, 0, "{err}");
            let s = p.sampling.as_ref().expect("sampled");
            let ran = s.instrumented_path_ends as f64 / total(&exact);
            assert!(
                ran < self.ran,
                "{}: the instrumented copies ran {ran:.3} of the path ends",
                self.fixture
            );
            shares.push(share(&p));
            if pep_ok(shares[shares.len() - 1]) {
                break;
            }
        }
        assert!(
            shares.iter().copied().any(pep_ok),
            "PEP: {} has {shares:.3?} of the sampled path ends, {truth:.3} of all",
            self.func
        );
        if !self.windows {
            return;
        }
        // Windows, at the default placement: the function's branch executions, scaled
        // from the windows, near the exact count. The copies' pace keeps the estimate
        // below one: a window records at the instrumented copy's speed (about a fifth of
        // the exact count in some runs since the flag moved to pepper's memory). A nest
        // the windows never reach records nothing there.
        let branches = |p: &Profile| {
            let idx = function_index(p, self.func);
            (p.branches.iter().filter(|b| b.func == idx))
                .map(|b| b.total())
                .sum::<u64>() as f64
        };
        let mut ratios = Vec::new();
        for _ in 0..3 {
            let (c, _, err, eph) = run("ephemeral", &f, &[], &[]);
            assert_eq!(c, 0, "{err}");
            ratios.push(branches(&eph) / branches(&edges));
            if (0.15..2.0).contains(&ratios[ratios.len() - 1]) {
                break;
            }
        }
        assert!(
            ratios.iter().any(|r| (0.15..2.0).contains(r)),
            "ephemeral: {}'s estimated branch executions are {ratios:.3?} of the exact",
            self.func
        );
    }
}

/// A loop nest behind twelve blocks, inside a loop whose header a frame passes once a
/// call: a frame entering it in clean code would otherwise run it clean to the end, and
/// both PEP and ephemeral would miss most of it. A burst's frame leaves the instrumented
/// copy at the nest's next check, into `F_resume`, so the instrumented code runs a small
/// share of the path ends; without that copy it would run on to the end of the call.
#[test]
fn bursts_and_windows_reach_a_loop_nest_behind_many_blocks() {
    Reach {
        fixture: "deep_loop.wat",
        func: "deep",
        truth: 0.5..0.9,
        ran: 0.25,
        windows: true,
    }
    .check();
}

/// Two long innermost loops without calls inside a loop whose header a frame passes
/// once a call (a comparison inlined into a function's round loop): with checks only at
/// loops that hold loops or call, PEP gave them almost none of their path ends and
/// their time to the code after them. `deep` checks every loop; a burst's frame leaves
/// the copy at the loop's next check.
#[test]
fn bursts_and_windows_reach_innermost_loops_inside_a_rare_loop() {
    Reach {
        fixture: "inner_loops.wat",
        func: "rounds",
        truth: 0.5..0.95,
        ran: 0.25,
        // Ephemeral's `nests` placement leaves innermost loops without a check.
        windows: false,
    }
    .check();
}

/// `fib(31)` called from a loop whose header passes once a call: a recursion passes no
/// loop header, and direct calls from clean code reach a callee without an entry check,
/// so without recursion checks PEP gave `fib` no path end at all and windows estimated
/// several times its branch executions (a window found the frame at the caller's header
/// and the call then ran instrumented to its end). With them, `fib`'s entry checks, and
/// instrumented copies calling it at `F`, a burst ends at the recursion's next call.
#[test]
fn bursts_and_windows_reach_a_recursion() {
    Reach {
        fixture: "hot_recursion.wat",
        func: "fib",
        truth: 0.2..0.8,
        ran: 0.4,
        windows: true,
    }
    .check();
}
