use super::*;
use crate::testing::{branch, node, path, profile, tree};

/// A profile from the switch says that its totals are low estimates; one from the
/// ring, whose totals are counted, does not.
#[test]
fn switch_profiles_say_their_totals_run_low() {
    let mut p = profile(vec![branch(0, &[3, 1])], vec![path(0, 4, &[(0, 0)])]);
    p.mode = Mode::Pep;
    p.sampling = Some(crate::Sampling {
        design: "ring".into(),
        samples: 64,
        stride: 17,
        interval_us: 250,
        ticks: 1,
        taken: 4,
        path_ends: 400,
        weights: "rate".into(),
        ..Default::default()
    });
    let ring = text(&p, &ReportOptions::default());
    assert!(
        ring.contains("counts below are estimated executions"),
        "{ring}"
    );
    assert!(!ring.contains("run low"), "{ring}");
    let s = p.sampling.as_mut().unwrap();
    s.switch = "outer".into();
    s.instrumented_path_ends = 40;
    let switched = text(&p, &ReportOptions::default());
    assert!(
        switched.contains("switch (outer): instrumented copies on for"),
        "{switched}"
    );
    p.sampling.as_mut().unwrap().switch_flag = "program".into();
    let t = text(&p, &ReportOptions::default());
    assert!(
        t.contains("switch (outer, flag in the program's memory): instrumented"),
        "{t}"
    );
    assert!(
        switched
            .contains("estimated executions run low (instrumented code is slower than the clean"),
        "{switched}"
    );
    // Calibrated to counted entries: the totals follow the counts.
    p.sampling.as_mut().unwrap().calibrated = 7;
    let calibrated = text(&p, &ReportOptions::default());
    assert!(
        calibrated.contains("calibrated: 7 functions' paths scaled to the entries"),
        "{calibrated}"
    );
    assert!(!calibrated.contains("run low"), "{calibrated}");
}

/// Ephemeral windows say how long they were open and the scale their counts took,
/// not PEP's bursts.
#[test]
fn ephemeral_windows_say_how_much_of_the_run_they_saw() {
    let mut p = profile(vec![branch(0, &[30, 10])], vec![]);
    p.mode = Mode::Ephemeral;
    p.run.run_ms = 400.0;
    p.sampling = Some(crate::Sampling {
        design: "ephemeral-windows".into(),
        interval_us: 2000,
        ticks: 200,
        switched_on_us: 10_000,
        ..Default::default()
    });
    let t = text(&p, &ReportOptions::default());
    assert!(
        t.contains(
            "ephemeral windows, every function's branches recorded while a window was \
             open: 10.0 ms over 200 epochs of 2000 us (2.5% of the run; branch counts: \
             recorded times 40.0)"
        ),
        "{t}"
    );
    assert!(!t.contains("PEP("), "{t}");
    // Each sampled bias says how sure it is; exact ones say nothing.
    assert!(!t.contains('±'), "{t}");
    p.branches[0].bias_margin = Some(0.116);
    let t = text(&p, &ReportOptions::default());
    assert!(t.contains("(±11.6 points)"), "{t}");
}

/// A sampled tree's line says how long native samples' signals took to reach the
/// guest, when that was measured, and nothing about it otherwise.
#[test]
fn sampled_contexts_say_what_their_signals_took() {
    let mut p = profile(vec![], vec![]);
    let mut t = tree(
        crate::ContextKind::Sampled,
        vec![
            node(None, u32::MAX, None, 0, 0),
            node(Some(0), 0, None, 1, 250),
        ],
        &[(0, 250)],
    );
    t.sampling = Some(crate::ContextSampling {
        interval_us: 250,
        samples: 1,
        ..Default::default()
    });
    p.contexts = Some(t.clone());
    let shadow = text(&p, &ReportOptions::default());
    assert!(shadow.contains("1 samples, 0 in host calls)"), "{shadow}");
    t.sampling.as_mut().unwrap().signal_delivery_ns = 18_400;
    p.contexts = Some(t);
    let native = text(&p, &ReportOptions::default());
    assert!(
        native.contains("0 in host calls, each signal 18.4 us to reach the guest)"),
        "{native}"
    );
}
