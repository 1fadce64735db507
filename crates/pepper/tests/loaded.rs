//! A profile tells the truth on a busy machine, and says where it is blind.

mod common;
use common::*;
use pepper_profile::compare::compare;
use std::process::{Child, Command, Stdio};

/// Busy processes competing with pepper for the machine's cores, stopped when dropped.
struct Busy(Vec<Child>);

impl Busy {
    fn start(n: usize) -> Busy {
        Busy(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("a busy shell loop starts")
                })
                .collect(),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A loop the bursts cannot enter (checks at entries only; the function is entered once,
/// before the first tick) takes most of the run: the path profile misses it, the stack
/// samples do not, and the profile says so on stderr, in its warnings, per function and
/// in the report. The same program with the instrumented code always on is not blind.
#[test]
fn a_function_the_bursts_miss_is_reported_blind() {
    let f = fixture("missed_loop.wat");
    let (c, _, err, p, out) = run_to("pep", &f, &["--switch", "entries"], &[]);
    assert_eq!(c, 0, "{err}");
    let hot = p
        .functions
        .iter()
        .find(|f| f.name.as_deref() == Some("hot"))
        .expect("a function `hot`");
    assert!(
        hot.under_sampled
            .as_deref()
            .is_some_and(|why| why.contains("`entries`")),
        "{:?}; warnings {:?}",
        hot.under_sampled,
        p.warnings
    );
    assert!(
        err.contains("under-sampled: `hot`"),
        "nothing said on stderr: {err}"
    );
    let report = pepper(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("[under-sampled"), "{text}");
    // Every path end in the ring: nothing is blind.
    let (c, _, err, p) = run("pep", &f, &["--switch", "off"], &[]);
    assert_eq!(c, 0, "{err}");
    assert!(
        p.functions.iter().all(|f| f.under_sampled.is_none()),
        "{:?}",
        p.warnings
    );
    assert!(!err.contains("under-sampled"), "{err}");
}

/// The default profile of a program with two loops of different costs, beside two busy
/// processes on a machine of two cores, against its exact path profile: the ticks follow
/// the guest's CPU time, so the loaded profile keeps the quiet one's accuracy. Each
/// attempt runs both profiles under the load; the best of three is judged, since a
/// machine this busy starves the sampler now and then.
#[test]
fn the_default_stays_accurate_beside_busy_processes() {
    let f = fixture("two_loops.wat");
    let (c, _, err, exact) = run("exact-paths", &f, &[], &[]);
    assert_eq!(c, 0, "{err}");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let busy = Busy::start(2);
        let (c, _, err, pep) = run("pep", &f, &[], &[]);
        drop(busy);
        assert_eq!(c, 0, "{err}");
        let a = compare(&exact, &pep);
        let (path, rel) = (
            a.path_accuracy.unwrap_or(0.0),
            a.edge_relative_overlap.unwrap_or(0.0),
        );
        if path >= 0.95 && rel >= 0.97 {
            return;
        }
        seen.push(format!(
            "path {path:.3}, edge relative {rel:.3}, sampling {:?}",
            pep.sampling
        ));
    }
    panic!("{seen:#?}");
}
