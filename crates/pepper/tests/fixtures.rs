//! Hand-written `.wat` fixtures whose counts are known by construction. Each runs in all
//! mode: behaviour must not change (the fixtures trap if a result is wrong), the edge
//! profile derived from exact paths must equal the directly counted one, and PEP recording
//! every path end (plain and guided numbering) must equal exact paths.

mod common;
use common::*;
use pepper_profile::{BranchKind::*, PathPoint, Profile};

fn all_modes(name: &str) -> (Profile, Profile) {
    let f = fixture(name);
    let (c0, out0, _, _) = run("none", &f, &[], &[]);
    let (c1, out1, err1, paths) = run("exact-paths", &f, &[], &[]);
    let (c2, out2, _, edges) = run("exact-edges", &f, &[], &[]);
    assert_eq!(
        (c0, &out0),
        (c1, &out1),
        "exact-paths changed behaviour of {name}: {err1}"
    );
    assert_eq!(
        (c0, &out0),
        (c2, &out2),
        "exact-edges changed behaviour of {name}"
    );
    assert_same_edges(&paths, &edges);
    // Every function hashed, through a 2-entry path cache (evictions at nearly every path
    // end) and with no cache at all (a table call per path end, the classic scheme), and
    // still exactly the array counts; targeted mode too, whose cold test wraps the call.
    for (mode, cache) in [
        ("exact-paths", "1"),
        ("exact-paths", "0"),
        ("targeted", "0"),
    ] {
        let (c4, _, err4, hashed) = run(
            mode,
            &f,
            &["--array-max-paths", "0", "--hash-cache-log2", cache],
            &[],
        );
        assert_eq!(c0, c4, "{err4}");
        assert!(hashed
            .functions
            .iter()
            .all(|f| f.counting.as_deref() != Some("array")));
        assert_eq!(
            paths_by_key(&hashed),
            paths_by_key(&paths),
            "{mode} hashed, cache 2^{cache}, {name}"
        );
    }
    assert_pep_matches_exact(&f, &[], &[], &paths);
    // Targeted mode without a guide prunes nothing: exactly exact-paths, with obvious paths
    // counted on their defining edges or not.
    for flags in [&[][..], &["--obvious"][..]] {
        let (c3, out3, err3, tpp) = run("targeted", &f, flags, &[]);
        assert_eq!(
            (c0, &out0),
            (c3, &out3),
            "targeted {flags:?} changed behaviour: {err3}"
        );
        assert_eq!(
            paths_by_key(&tpp),
            paths_by_key(&paths),
            "targeted {flags:?}"
        );
    }
    (paths, edges)
}

/// Copies entered at an inner loop right inside an outer one keep the inner loop's state
/// (`all_modes` runs every switch placement with copies changing at random checks).
#[test]
fn switch_into_a_loop_at_the_start_of_another() {
    let (p, _) = all_modes("nested_entry.wat");
    assert_eq!(
        branch(&p, "_start", If, 0),
        vec![0, 1],
        "the sum checked once"
    );
}

#[test]
fn mod3_loop_takes_the_if_34_times() {
    let (p, _) = all_modes("mod3.wat");
    assert_eq!(branch(&p, "count", If, 0), vec![34, 66]);
    assert_eq!(branch(&p, "count", BrIf, 0), vec![99, 1]);
    // entry->header, 99 back edges, last iteration to exit.
    assert_eq!(path_executions(&p, "count"), 101);
}

/// Targeted mode counts a short loop's most frequent path in a local: every count still
/// equals exact-paths' (`all_modes`: unguided, and hashed, where no loop qualifies), also
/// with this run's own profile as the guide; the exits by `br` and by `return` both hand
/// the local over; the outer of two nested loops, a loop with a call and a loop split
/// between two paths keep recording.
#[test]
fn register_loops_count_exactly() {
    all_modes("tight_loops.wat");
    let f = fixture("tight_loops.wat");
    let (_, _, _, exact) = run("exact-paths", &f, &[], &[]);
    assert_targeted_exact_with(&f, &[], &exact, &[], "0.05");
    let file = unique_path("tight_loops.guide.json");
    exact.write(std::fs::File::create(&file).unwrap()).unwrap();
    let guide = ["--guide", file.to_str().unwrap()];
    let (_, _, _, tpp) = run("targeted", &f, &guide, &[]);
    let loops = |p: &Profile, name: &str| {
        p.functions
            .iter()
            .find(|x| x.name.as_deref() == Some(name))
            .and_then(|x| x.register_loops)
    };
    for (name, n) in [
        ("one_path", 1),
        ("rare_arm", 1),
        ("exits", 1),
        ("nested", 1),
        ("with_call", 0),
        ("two_paths", 0),
    ] {
        assert_eq!(loops(&tpp, name), Some(n), "{name}");
    }
    // Off: the same hot counts (checked against exact-paths by the helper above) and the
    // same cold executions, without register loops.
    let mut off = guide.to_vec();
    off.extend(["--loop-threshold", "0"]);
    let (_, _, _, plain) = run("targeted", &f, &off, &[]);
    assert!(plain
        .functions
        .iter()
        .all(|x| x.register_loops.unwrap_or(0) == 0));
    assert_eq!(paths_by_key(&plain), paths_by_key(&tpp));
    let cold = |p: &Profile| -> Vec<Option<u64>> {
        p.functions.iter().map(|x| x.cold_executions).collect()
    };
    assert_eq!(cold(&plain), cold(&tpp));
}

#[test]
fn nested_loops() {
    let (p, _) = all_modes("nested.wat");
    assert_eq!(branch(&p, "nested", BrIf, 0), vec![190, 10]);
    assert_eq!(branch(&p, "nested", BrIf, 1), vec![9, 1]);
    let ends_at_header = p
        .paths
        .iter()
        .filter(|x| matches!(x.end, PathPoint::LoopHeader { .. }))
        .count();
    assert!(ends_at_header >= 3, "paths end at both loop headers");
}

#[test]
fn br_table_counts_distinct_targets() {
    let (p, _) = all_modes("brtable.wat");
    let b = p.branches.iter().find(|b| b.kind == BrTable).unwrap();
    assert_eq!(b.counts, vec![15, 8, 7]);
    assert_eq!(
        b.outcomes,
        vec![
            "depth 0 (arms 0,2)",
            "depth 1 (arms 1)",
            "depth 2 (arms default)"
        ]
    );
}

/// An interpreter's dispatch, every case but the exit reached only by its own arm: the
/// exit arm's increment (or poison) runs before the `br_table`, the cases' increments (or
/// poison), corrected for it, at the cases' starts. A second `br_table` has two shared
/// targets: their arms go through landing pads. No tables; counts stay exact in every
/// mode, whichever arm is cold.
#[test]
fn dispatch_cases_number_their_own_paths() {
    let f = fixture("dispatch.wat");
    let (p, _) = all_modes("dispatch.wat");
    assert_eq!(branch(&p, "interp", BrTable, 0), vec![5, 10, 25, 1]);
    assert_eq!(branch(&p, "shared", BrTable, 0), vec![10, 10, 10]);
    // A 2% threshold keeps the loops' exits (1 in 30 and 1 in 41) hot: only arms the
    // guide never saw are cold.
    let mut guide = p.clone();
    branch_mut(&mut guide, "interp", BrTable, 0).counts = vec![0, 10, 25, 1];
    let cold = assert_targeted_exact_with(&f, &[], &guide, &[], "0.02");
    assert_eq!(cold, 5, "case 0's iterations are cold");
    // The shared arm cold: the br_table poisons the register for it, and every case
    // restores what it saved.
    branch_mut(&mut guide, "interp", BrTable, 0).counts = vec![5, 10, 25, 0];
    let cold = assert_targeted_exact_with(&f, &[], &guide, &[], "0.02");
    assert_eq!(cold, 1, "only the exit arm's path is cold");
    // A padded arm cold: its pad poisons the register.
    branch_mut(&mut guide, "interp", BrTable, 0).counts = vec![5, 10, 25, 1];
    branch_mut(&mut guide, "shared", BrTable, 0).counts = vec![10, 0, 10];
    let cold = assert_targeted_exact_with(&f, &[], &guide, &[], "0.02");
    assert_eq!(cold, 10, "the second arm's iterations are cold");
}

#[test]
fn early_returns_all_reach_the_exit() {
    let (p, _) = all_modes("early_return.wat");
    assert_eq!(branch(&p, "find", If, 0), vec![10, 95]);
    let index = p
        .functions
        .iter()
        .find(|f| f.name.as_deref() == Some("find"))
        .unwrap()
        .index;
    let exits: u64 = p
        .paths
        .iter()
        .filter(|x| x.func == index && x.end == PathPoint::FunctionExit)
        .map(|x| x.count)
        .sum();
    assert_eq!(exits, 15, "one completed exit path per call");
}

#[test]
fn multi_value_blocks_and_functions() {
    let (p, _) = all_modes("multivalue.wat");
    assert_eq!(branch(&p, "divmod", If, 0), vec![1, 1]);
    assert_eq!(branch(&p, "swapif", If, 0), vec![1, 1]);
    assert_eq!(branch(&p, "sumloop", BrIf, 0), vec![9, 1]);
}

#[test]
fn recursion_keeps_a_register_per_activation() {
    let (p, _) = all_modes("recursion.wat");
    assert_eq!(branch(&p, "fib", If, 0), vec![89, 88]);
    assert_eq!(path_executions(&p, "fib"), 177);
}

#[test]
fn trapping_guest_still_gets_a_profile() {
    let (code, _, stderr, p) = run("exact-paths", &fixture("trap.wat"), &[], &[]);
    assert_eq!(code, 134);
    assert!(
        p.run.trap.as_deref().unwrap().contains("unreachable"),
        "{:?}",
        p.run.trap
    );
    assert!(stderr.contains("trapped"));
    // entry->header plus four complete iterations; the fifth is cut by the trap.
    assert_eq!(path_executions(&p, "work"), 5);
}

#[test]
fn proc_exit_code_passes_through_with_profile() {
    let (code, _, _, p) = run("exact-paths", &fixture("exit.wat"), &[], &[]);
    assert_eq!(code, 3);
    assert_eq!(p.run.exit_code, Some(3));
    assert_eq!(branch(&p, "spin", BrIf, 0), vec![6, 1]);
}

#[test]
fn exception_handling_function_is_skipped_with_a_warning() {
    let (p, _) = all_modes("eh.wat");
    let g = p
        .functions
        .iter()
        .find(|f| f.name.as_deref() == Some("guarded"))
        .unwrap();
    assert!(!g.instrumented);
    assert!(g.skipped.as_deref().unwrap().contains("try_table"));
    assert!(p
        .warnings
        .iter()
        .any(|w| w.contains("guarded") && w.contains("try_table")));
    assert_eq!(branch(&p, "thrower", If, 0), vec![4, 4]);
}

/// A function with 70 stacked diamonds has 2^70 paths: more than a u64 register holds. It
/// must be truncated (never wrap) and still count every path segment exactly.
#[test]
fn more_than_2_pow_64_paths_are_truncated_and_exact() {
    let mut body = String::new();
    for k in 0..70 {
        body.push_str(&format!(
            "(if (i32.wrap_i64 (i64.and (i64.shr_u (local.get $x) (i64.const {})) (i64.const 1)))
               (then (local.set $s (i32.add (local.get $s) (i32.const {k}))))
               (else (local.set $s (i32.xor (local.get $s) (i32.const {k})))))\n",
            k % 64
        ));
    }
    let wat = format!(
        "(module (func $wide (param $x i64) (result i32) (local $s i32) {body} (local.get $s))
           (func (export \"_start\") (local $i i64)
             (loop $l
               (drop (call $wide (i64.mul (local.get $i) (i64.const 0x9E3779B97F4A7C15))))
               (local.set $i (i64.add (local.get $i) (i64.const 1)))
               (br_if $l (i64.lt_u (local.get $i) (i64.const 20))))))"
    );
    let path = unique_path("wide.wat");
    std::fs::write(&path, wat).unwrap();
    let (c, _, _, paths) = run("exact-paths", &path, &[], &[]);
    let (c2, _, _, edges) = run("exact-edges", &path, &[], &[]);
    assert_eq!((c, c2), (0, 0));
    assert_same_edges(&paths, &edges);
    let f = paths
        .functions
        .iter()
        .find(|f| f.name.as_deref() == Some("wide"))
        .unwrap();
    assert!(f.truncated_nodes > 0);
    assert!(f.num_paths.unwrap() <= 1 << 62);
    // Every call runs through every truncation point: t + 1 path segments per call.
    assert_eq!(
        path_executions(&paths, "wide"),
        20 * (f.truncated_nodes as u64 + 1)
    );
    let total: u64 = edges
        .branches
        .iter()
        .filter(|b| b.func == f.index)
        .map(|b| b.total())
        .sum();
    assert_eq!(total, 20 * 70);
}

/// TPP's back-edge cases (Fig. 6): a guide (this run's exact profile, edited) calls the only
/// back edge of one loop cold, one of two back edges of another, and a whole third loop.
/// Every path through a cold edge must reach the cold counter, never a hot path's number,
/// and every hot path must keep its exact count, with and without obvious paths.
#[test]
fn poisoned_paths_are_caught_in_every_back_edge_case() {
    let f = fixture("coldloops.wat");
    let (_, _, _, mut guide) = run("exact-paths", &f, &[], &[]);
    let set = |g: &mut Profile, func: &str, kind, nth: usize, counts: Vec<u64>| {
        let b = branch_mut(g, func, kind, nth);
        assert!(b.counts.iter().sum::<u64>() > 0, "{func} ran its branch");
        b.counts = counts;
    };
    set(&mut guide, "all_back_cold", BrIf, 0, vec![0, 1]);
    set(&mut guide, "two_back_edges", BrIf, 0, vec![0, 1]);
    set(&mut guide, "cold_loop", If, 0, vec![0, 9]);
    set(&mut guide, "cold_loop", BrIf, 0, vec![0, 0]);
    let cold = assert_targeted_exact_with(&f, &["--obvious"], &guide, &[], "0.05");
    // all_back_cold: 9 back edges; two_back_edges: back edge 1 taken 5 times (odd i < 10);
    // cold_loop: x = 6, 7, 8 enter the loop (x = 6 runs 6 iterations...): every iteration
    // path and every path that enters the loop is cold.
    assert!(cold >= 9 + 5 + 3, "cold executions: {cold}");
    let no_obvious = assert_targeted_exact_with(&f, &[], &guide, &[], "0.05");
    assert_eq!(cold, no_obvious, "obvious paths do not change what is cold");
}

/// Obvious paths are counted on their defining edges, not at their ends: a `proc_exit`
/// right after a loop must leave exactly exact-paths' counts.
#[test]
fn obvious_counts_match_exact_across_proc_exit() {
    let f = fixture("exit_after_loop.wat");
    let (code, _, _, exact) = run("exact-paths", &f, &[], &[]);
    assert_eq!(code, 5);
    let (code, _, _, tpp) = run("targeted", &f, &["--obvious"], &[]);
    assert_eq!(code, 5);
    let start = tpp
        .functions
        .iter()
        .find(|x| x.name.as_deref() == Some("_start"))
        .unwrap();
    assert!(
        start.obvious_paths.unwrap_or(0) > 0,
        "the loop path is obvious"
    );
    assert_eq!(paths_by_key(&tpp), paths_by_key(&exact));
    assert_eq!(
        path_executions(&tpp, "_start"),
        9,
        "entry path + 8 iterations"
    );
}

/// Switchable instrumentation: with the instrumented copies running only in bursts, a
/// long call-free loop and a call-heavy loop are both sampled, near their share of the path
/// ends (a burst can start inside the long loop at its header, not only where its function
/// is entered).
///
/// Near, and low: a burst stands for the clean code's time at the rate the instrumented
/// copies complete paths, and they slow the call-free loop (one store per path end where
/// it had none) more than the call-heavy one, so its share of the estimate comes out
/// somewhat below its true share, most with `all`.
#[test]
fn switched_bursts_sample_long_and_call_heavy_loops_in_proportion() {
    let f = fixture("switch_loops.wat");
    let (c0, _, err, exact) = run("exact-paths", &f, &[], &[]);
    assert_eq!(c0, 0, "{err}");
    let total = |p: &Profile| p.paths.iter().map(|p| p.count).sum::<u64>() as f64;
    let share = |p: &Profile| path_executions(p, "spin") as f64 / total(p);
    let truth = share(&exact);
    assert!((0.5..0.8).contains(&truth), "the fixture's mix: {truth}");
    for placement in ["outer", "shallow", "loops", "all"] {
        // A run whose sampler thread was starved by the rest of the machine (few ticks or
        // bursts, or ticks that found the guest not running) says nothing about
        // placement: retried.
        let starved = |s: &pepper_profile::Sampling| {
            s.instrumented_path_ends == 0
                || s.ticks < 50
                || switch_bursts(s) < 40
                || s.idle_ticks * 4 >= s.ticks
        };
        // Loose, and wider below the truth (the bias above): a run is ~250 ticks and shares
        // the machine with the other tests, so a run out of tolerance is tried again
        // (three judged runs at most); a loop that bursts cannot enter shows up as ~0
        // every time (as with checks at entries only).
        let near = |got: f64| (truth - 0.3..truth + 0.1).contains(&got);
        let mut shares = Vec::new();
        for _ in 0..6 {
            let (c, _, err, p) = run("pep", &f, &["--switch", placement], &[]);
            assert_eq!(c, 0, "{err}");
            if starved(p.sampling.as_ref().expect("sampling info")) {
                continue;
            }
            assert!(p.sampling.as_ref().is_some_and(|s| s.switched_on_us > 0));
            shares.push(share(&p));
            if near(shares[shares.len() - 1]) || shares.len() == 3 {
                break;
            }
        }
        if shares.is_empty() {
            eprintln!("--switch {placement}: the sampler was starved in every run; not judged");
            continue;
        }
        assert!(
            shares.iter().copied().any(near),
            "--switch {placement}: the long loop has {shares:.3?} of the sampled path ends in \
             each run, {truth:.3} of all"
        );
    }
}

/// Loop nests behind four and ten blocks, whose checks only enter the instrumented copy
/// (past `shallow`'s and `deep`'s detour limits): copies switched at random checks keep
/// every local (`all_modes`, which also runs `deep` with the flag set all along and
/// requires exact counts), and the shapes are what the test means.
#[test]
fn copies_entered_at_deep_nests_keep_their_state() {
    let f = fixture("nest_entries.wat");
    let wasm = pepper_wasm::read_module(&std::fs::read(&f).unwrap())
        .unwrap()
        .into_owned();
    let shapes = pepper_wasm::switch::shapes(&wasm).unwrap();
    use pepper_wasm::switch::SwitchPlacement::{Deep, Shallow};
    // deep4's and deep10's middle loops (index 1 in each): entered only under `shallow`;
    // `deep` leaves at deep4's.
    let enters_only = |k: usize, p| shapes[k].enters_only(p, 1);
    assert!(enters_only(0, Shallow) && !enters_only(0, Deep));
    assert!(enters_only(1, Shallow) && enters_only(1, Deep));
    all_modes("nest_entries.wat");
}

/// Ephemeral in windows on known biases: every function's copy runs only while a window
/// is open, so what it records is a time sample of the run; the biases still match exact
/// edges, and the counts, scaled by the guest's CPU time over the windows', are near the
/// exact totals where a function runs through many windows.
#[test]
fn ephemeral_windows_estimate_known_biases_from_part_of_the_run() {
    let f = fixture("biased.wat");
    let (c0, _, err, exact) = run("exact-edges", &f, &[], &[]);
    assert_eq!(c0, 0, "{err}");
    let share = |c: &[u64]| c[0] as f64 / (c[0] + c[1]).max(1) as f64;
    let total = |c: &[u64]| c.iter().sum::<u64>();
    // The estimates are a time sample: the bounds below are judged on up to three runs,
    // and hold in one; everything else holds in each.
    let mut misses = Vec::new();
    for _ in 0..3 {
        let (c, _, err, eph) = run(
            "ephemeral",
            &f,
            // 300 us every 1 ms: `leaf` and `_start` run through about 30 windows.
            &["--window", "300us", "--epoch", "1ms"],
            &[],
        );
        assert_eq!(c, 0, "{err}");
        let s = eph.sampling.as_ref().expect("windows recorded");
        assert_eq!(s.design, "ephemeral-windows");
        assert!(s.ticks >= 3, "only {} epochs", s.ticks);
        // The guest's CPU time, in windows and in all, read from its thread's clock (on
        // Linux): a window the guest spent descheduled saw none of its work.
        if cfg!(target_os = "linux") {
            assert!(
                s.switched_on_cpu_us > 0 && s.guest_cpu_us > s.switched_on_cpu_us,
                "{s:?}"
            );
        }
        // Windows are meant to cover 300 us of each 1 ms epoch, but one ends only when
        // the armer thread wakes, late on a loaded machine (half the run once in CI), so
        // the scale is only required to be well above one.
        let scale = s.window_scale(eph.run.run_ms).expect("window time");
        assert!(scale > 1.2, "windows saw 1/{scale} of the run: {s:?}");
        let mut missed = Vec::new();
        for func in ["leaf", "_start", "spin"] {
            let (got, want) = (branch(&eph, func, If, 0), branch(&exact, func, If, 0));
            if (share(&got) - share(&want)).abs() >= 0.05 {
                missed.push(format!("{func}: {got:?} against {want:?}"));
            }
            // Recorded in windows only: fewer outcomes than the run had.
            let idx = function_index(&eph, func);
            let b = eph.branches.iter().find(|b| b.func == idx).unwrap();
            let recorded = b.recorded.expect("ephemeral records");
            assert!(recorded < total(&want), "{func}: recorded {recorded}");
            // `spin` runs 5 ms: a run whose epoch thread the rest of the machine starved
            // (CI's parallel tests) may open no window in it, which says nothing of the
            // estimate; tried again, as the bounds below are.
            if recorded == 0 {
                missed.push(format!("{func}: no window met it"));
                continue;
            }
            // Scaled to the run by the guest's time over the windows'.
            let scaled = recorded as f64 * scale;
            assert!(
                (total(&got) as f64 - scaled).abs() <= 0.001 * scaled + 2.0,
                "{func}: {got:?} scaled from {recorded} recorded by {scale:.3}"
            );
            // A time sample at the instrumented copies' pace. `leaf` and `_start` run
            // the whole run long (measured: 0.91-1.02 of their exact totals, 0.87-1.02
            // with two busy loops beside the run). `spin`'s 5 ms meets about three
            // windows, and its tight loop runs about four times slower instrumented (a
            // counter's load and store each iteration): 0.03-0.82 measured, so only
            // required not to be overstated.
            let (low, high) = if func == "spin" {
                (0.0, 1.5)
            } else {
                (0.7, 1.3)
            };
            let ratio = total(&got) as f64 / total(&want) as f64;
            if !(low..high).contains(&ratio) {
                missed.push(format!("{func}: {ratio} of the exact total"));
            }
        }
        if missed.is_empty() {
            return;
        }
        misses.push(missed);
    }
    panic!("no run within bounds: {misses:#?}");
}

/// Ephemeral windows on a program with a 2 ms rhythm, as long as the windows' epoch: a
/// window opens at a random point of its epoch, so the windows see both halves of the
/// program's period and estimate its 50% branch as such. Windows at one fixed point of
/// each epoch would all see the same half (a bias of 0 or 1).
#[test]
fn ephemeral_windows_do_not_alias_with_a_periodic_program() {
    let f = fixture("periodic.wat");
    // Best of three: a window lasts a stretch of the guest's CPU time, so one whose guest
    // waits for a core (other tests run beside this one) can span both halves in wall
    // time, and a run with several such windows shows a narrower spread between them.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (c, _, err, eph) = run("ephemeral", &f, &["--epoch", "2ms"], &[]);
        assert_eq!(c, 0, "{err}");
        let s = eph.sampling.as_ref().expect("windows recorded");
        assert!(s.ticks >= 50, "only {} windows", s.ticks);
        let got = branch(&eph, "phase", If, 0);
        let share = got[0] as f64 / (got[0] + got[1]).max(1) as f64;
        // How sure that is: the windows are some 200 samples of the program's rhythm,
        // not the tens of thousands of independent outcomes they recorded. The margin
        // from the windows' random groups says so (0.09-0.10 measured on about 70,000
        // outcomes), where a binomial one would claim under 0.01.
        let idx = function_index(&eph, "phase");
        let b = eph.branches.iter().find(|b| b.func == idx).unwrap();
        let (recorded, margin) = (b.recorded.unwrap(), b.bias_margin.unwrap());
        let binomial = 1.96 * (0.25 / recorded as f64).sqrt();
        // About 200 windows, each seeing one half (a 50 µs window rarely spans both):
        // binomial, so 0.3-0.7 is more than five standard deviations either way.
        if (0.3..=0.7).contains(&share) && (0.03..0.3).contains(&margin) && margin > 4.0 * binomial
        {
            return;
        }
        seen.push(format!(
            "the windows saw {got:?} of `phase`'s outcomes ({share:.3} in its first half); \
             margin {margin:.4} on {recorded} outcomes (binomial {binomial:.4})"
        ));
    }
    panic!("{seen:#?}");
}

/// Ephemeral windows mostly find `$work` inside its long loop and enter its instrumented
/// copy at the loop's header. That entry's first path end belongs to no path; counted
/// as path 0 (the early return, never taken), it gave real branches outcomes they never
/// had (Lua's `fmod` 40% one way where every call went the other). Array and hashed
/// counting alike.
#[test]
fn ephemeral_copies_entered_at_a_loop_count_no_false_path() {
    let f = fixture("entered_loop.wat");
    for extra in [&[][..], &["--array-max-paths", "0"][..]] {
        // A run whose windows met no call of `$work` says nothing about entries (a
        // window is open at about 5% of its 1,000 calls; one run met none, on a machine
        // busy compiling): tried again, three runs at most. Every run must count no
        // false path.
        let mut tries = 0;
        let (eph, early) = loop {
            tries += 1;
            let (c, _, err, eph) = run("ephemeral", &f, extra, &[]);
            assert_eq!(c, 0, "{err}");
            let early = branch(&eph, "work", If, 0);
            assert_eq!(
                early[0], 0,
                "{extra:?}: the early return was never taken: {early:?}"
            );
            if early[1] > 0 || tries == 3 {
                break (eph, early);
            }
        };
        assert!(
            early[1] > 0,
            "{extra:?}: no entry recorded in {tries} runs: {early:?}, {:?}",
            eph.sampling
        );
        // The loop's own branches were recorded, in the windows' share of the run.
        let inner = branch(&eph, "work", If, 1);
        let share = inner[0] as f64 / (inner[0] + inner[1]).max(1) as f64;
        assert!((0.2..=0.3).contains(&share), "{extra:?}: {inner:?}");
    }
}

/// Ephemeral instrumentation on known biases: the estimates match exact edges, each
/// function's copy records about `--persistence` executions per epoch and then stops
/// (counted), and every epoch arms it again.
#[test]
fn ephemeral_estimates_known_biases_and_rearms_every_epoch() {
    let f = fixture("biased.wat");
    let (c0, _, err, exact) = run("exact-edges", &f, &[], &[]);
    assert_eq!(c0, 0, "{err}");
    let p = 50u64;
    let (c, _, err, eph) = run("ephemeral", &f, &["--persistence", "50"], &[]);
    assert_eq!(c, 0, "{err}");
    let epochs = eph.sampling.as_ref().expect("epochs recorded").ticks;
    let leaf = branch(&eph, "leaf", If, 0);
    let start = branch(&eph, "_start", If, 0);
    let share = |c: &[u64]| c[0] as f64 / (c[0] + c[1]).max(1) as f64;
    assert!((share(&branch(&exact, "leaf", If, 0)) - 0.75).abs() < 1e-9);
    assert!((share(&leaf) - 0.75).abs() < 0.05, "leaf {leaf:?}");
    assert!((share(&start) - 0.1).abs() < 0.05, "_start {start:?}");
    // Entries are counted exactly, so the leaf's total is exact.
    assert_eq!(leaf.iter().sum::<u64>(), 20_000_000);
    // The start loop's iterations are counted at its header: totals within rounding.
    let total = start.iter().sum::<u64>() as f64;
    assert!((total - 2e7).abs() < 2e5, "_start total {total}");
    // A loop without calls is counted at its header by every copy: exact but for the
    // iteration a check that moves into the instrumented copy counts twice (one per epoch).
    let spin = branch(&eph, "spin", If, 0);
    let total = spin.iter().sum::<u64>();
    assert!(
        total.abs_diff(5_000_000) <= 2 * epochs + 2,
        "spin total {total}"
    );
    assert!((share(&spin) - 0.125).abs() < 0.05, "spin {spin:?}");
    let recorded = |func: &str| {
        let idx = function_index(&eph, func);
        let b = eph.branches.iter().find(|b| b.func == idx).unwrap();
        (b.recorded.expect("ephemeral records"), b.bias_margin)
    };
    let (rec, margin) = recorded("leaf");
    assert!(margin.is_some_and(|m| m > 0.0 && m < 0.2), "{margin:?}");
    // Off after P executions per epoch (one more where a check and a re-arm race), and
    // on again every epoch: more than one epoch's worth, never more than all of them.
    assert!(epochs >= 3, "only {epochs} epochs");
    assert!(rec > p, "recorded {rec}: never re-armed");
    assert!(
        rec <= (epochs + 1) * (p + 1),
        "recorded {rec} in {epochs} epochs"
    );
}

/// A frame that enters its instrumented copy at a loop writes an empty word at the loop's
/// header (the path so far is nobody's). The sampler skips those words: they are neither
/// samples nor lost samples. Switching at random checks (`--switch-chaos`) makes them
/// about half of what the ring holds; they used to be reported as lost samples. The
/// best of three runs is judged: a sampler starved by the rest of the test suite lets the
/// guest overwrite real samples too.
#[test]
fn hand_over_words_are_not_lost_samples() {
    let f = fixture("two_loops.wat");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (c, _, err, p) = run("pep", &f, &["--switch", "outer", "--switch-chaos"], &[]);
        assert_eq!(c, 0, "{err}");
        let s = p.sampling.expect("sampling info");
        assert!(s.taken > 0, "{s:?}");
        if s.lost * 20 < s.taken {
            return;
        }
        seen.push(format!("lost {} of {} taken", s.lost, s.taken));
    }
    panic!("{seen:#?}");
}
