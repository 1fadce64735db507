//! `pepper run`'s flags: what reaches the sampler and the profile (stack periods, the
//! switch's default), and `wasmtime run`'s habits (guest arguments, environment,
//! preopens, `--invoke`).

mod common;
use common::*;

/// The profile says which estimate its bursts hold, and the report says how an older
/// profile's (weighted by the path ends since each tick) were weighted.
#[test]
fn burst_weights_are_recorded() {
    let program = fixture("nested.wat");
    let (_, _, _, mut default, file) = run_to("pep", &program, &[], &[]);
    let (_, _, _, every) = run("pep", &program, &["--every", "7"], &[]);
    let weights = |p: &pepper_profile::Profile| p.sampling.as_ref().unwrap().weights.clone();
    assert_eq!(weights(&default), "rate");
    assert_eq!(weights(&every), "", "the in-guest design has no bursts");
    default.sampling.as_mut().unwrap().weights = "ticks".into();
    default.write_file(&file).unwrap();
    let report = pepper(&["report", file.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&report.stdout)
            .contains("weighted by the path ends since the last tick"),
        "{}",
        String::from_utf8_lossy(&report.stdout)
    );
}

#[test]
fn stack_samples_keep_their_own_period_and_say_when_it_is_rounded() {
    let program = fixture("nested.wat");
    let stack_us = |p: &pepper_profile::Profile| {
        p.contexts
            .as_ref()
            .map(|c| c.sampling.as_ref().unwrap().interval_us)
    };
    // By default a stack sample comes with every PEP tick.
    let (code, _, stderr, p) = run("pep", &program, &[], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(p.sampling.as_ref().unwrap().interval_us, 1_000);
    assert!(!stderr.contains("stack samples every"), "{stderr}");
    if p.contexts.is_some() {
        assert_eq!(stack_us(&p), Some(1_000));
    }
    let (_, _, stderr, p) = run("pep", &program, &["--interval", "10ms"], &[]);
    assert!(!stderr.contains("stack samples every"), "{stderr}");
    if p.contexts.is_some() {
        assert_eq!(stack_us(&p), Some(10_000));
    }
    // A period of its own, kept; one shorter than a tick becomes a tick, and the run
    // says so.
    let (_, _, _, p) = run("pep", &program, &["--stack-interval", "3ms"], &[]);
    if p.contexts.is_some() {
        assert_eq!(stack_us(&p), Some(3_000));
    }
    let flags = ["--interval", "10ms", "--stack-interval", "1ms"];
    let (code, _, stderr, p) = run("pep", &program, &flags, &[]);
    assert_eq!(code, 0, "{stderr}");
    if p.contexts.is_some() {
        assert_eq!(stack_us(&p), Some(10_000));
        assert!(
            stderr.contains("stack samples every 10ms (--stack-interval 1ms"),
            "{stderr}"
        );
    }
}

/// `wasmtime run`'s habits: guest arguments right after the module (with or without `--`,
/// flags included), `--env NAME` passing the host's value through.
#[test]
fn guest_arguments_and_environment_as_wasmtime_run_takes_them() {
    let argc = fixture("argc.wat");
    let status = |args: &[&str]| {
        let out = unique_path("argc.json");
        let mut all = vec!["run", "--mode", "exact-paths", "-o", out.to_str().unwrap()];
        all.extend_from_slice(args);
        let o = pepper(&all);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let a = argc.to_str().unwrap();
    // argv[0] and three arguments, no environment: 4 * 16.
    assert_eq!(status(&[a, "x", "-c", "--mode"]).0, Some(64));
    assert_eq!(status(&[a, "--", "x", "-c", "--mode"]).0, Some(64));
    // One variable passed through (PATH is set wherever tests run), one set here.
    assert_eq!(
        status(&["--env", "PATH", "--env", "A=1", a]).0,
        Some(16 + 2)
    );
    let (code, err) = status(&["--env", "PEPPER_TEST_SURELY_UNSET", a]);
    assert_eq!(code, Some(16));
    assert!(err.contains("not set on the host"), "{err}");
}

/// `--dir HOST::GUEST::ro` preopens a directory the guest cannot write; without `::ro` it
/// can.
#[test]
fn read_only_directories_refuse_writes() {
    let program = fixture("create_file.wat");
    for (suffix, writable) in [("", true), ("::ro", false)] {
        let dir = unique_path("preopen.d");
        std::fs::create_dir_all(&dir).unwrap();
        let out = unique_path("create_file.json");
        let spec = format!("{}::/d{suffix}", dir.display());
        let o = pepper(&[
            "run",
            "-o",
            out.to_str().unwrap(),
            "--dir",
            &spec,
            program.to_str().unwrap(),
        ]);
        let made = dir.join("made-by-guest").exists();
        assert_eq!(
            made,
            writable,
            "{spec}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code() == Some(0), writable, "{spec}");
    }
}

/// `--invoke FUNC ARGS` runs a module without `_start`: the export gets the arguments by its
/// parameter types, its results are printed, and its paths are profiled; a bad argument or
/// a missing `_start` is pepper's error (125), named.
#[test]
fn invoke_runs_an_export_with_arguments() {
    let library = fixture("library.wat");
    let lib = library.to_str().unwrap();
    let (code, stdout, stderr, p, _) =
        run_to("exact-paths", &library, &["--invoke", "sum"], &["100"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(String::from_utf8_lossy(&stdout), "5050\n");
    // Entry to the loop header once, 101 iterations (i = 0..=100), the exit once.
    let mut counts: Vec<u64> = p.paths.iter().map(|x| x.count).collect();
    counts.sort_unstable();
    assert_eq!(counts, [1, 1, 101], "{:?}", p.paths);
    let out = unique_path("library.json");
    let out = out.to_str().unwrap();
    let invoke =
        |export: &str, arg: &str| pepper(&["run", "-o", out, "--invoke", export, lib, arg]);
    let o = invoke("pair", "1.5");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "3\n7\n");
    let o = pepper(&["run", "-o", out, lib]);
    assert_eq!(o.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--invoke"));
    let o = invoke("sum", "x");
    assert_eq!(o.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&o.stderr).contains("argument \"x\" of `sum`"));
}

/// PEP runs on the switch unless asked otherwise or unless what the run records needs
/// every path end in the ring (`--every`, `--timeline`) or copies cannot be made (shadow
/// stacks); `--switch off` and explicit placements are obeyed, and interval sampling
/// refuses `--switch off` rather than running without the clean code it needs.
#[test]
fn pep_defaults_to_the_switch_where_it_can_run() {
    let f = fixture("mod3.wat");
    let switch = |extra: &[&str]| {
        let (c, _, err, p) = run("pep", &f, extra, &[]);
        assert_eq!(c, 0, "{extra:?}: {err}");
        p.sampling.expect("PEP records its sampling").switch
    };
    assert_eq!(switch(&[]), "deep");
    assert_eq!(switch(&["--switch", "outer"]), "outer");
    assert_eq!(switch(&["--switch", "loops"]), "loops");
    assert_eq!(switch(&["--switch", "off"]), "");
    assert_eq!(switch(&["--every", "10"]), "");
    assert_eq!(switch(&["--timeline"]), "");
    assert_eq!(switch(&["--stacks", "shadow"]), "");
    let o = pepper(&[
        "run",
        "--periodic-intervals",
        "4",
        "--switch",
        "off",
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2 + 123), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("drop --switch off"));
}

/// Ephemeral windows open every 1 ms unless told otherwise, budgets every 10 ms (the
/// paper's epoch); the windows' copies need the switch, and budgets count at `outer`'s
/// checks, so `--switch off`, and any placement with `--persistence`, are refused.
#[test]
fn ephemeral_epochs_default_by_design_and_placements_are_checked() {
    let f = fixture("mod3.wat");
    let epoch_us = |extra: &[&str]| {
        let (c, _, err, p) = run("ephemeral", &f, extra, &[]);
        assert_eq!(c, 0, "{extra:?}: {err}");
        p.sampling
            .expect("ephemeral records its epochs")
            .interval_us
    };
    assert_eq!(epoch_us(&[]), 1_000);
    assert_eq!(epoch_us(&["--switch", "deep"]), 1_000);
    assert_eq!(epoch_us(&["--persistence", "10"]), 10_000);
    assert_eq!(epoch_us(&["--epoch", "5ms"]), 5_000);
    for (extra, says) in [
        (&["--switch", "off"][..], "--switch off is not available"),
        (
            &["--switch", "deep", "--persistence", "10"][..],
            "--switch is for windows",
        ),
    ] {
        let mut args = vec!["run", "--mode", "ephemeral"];
        args.extend_from_slice(extra);
        args.push(f.to_str().unwrap());
        let o = pepper(&args);
        assert_eq!(o.status.code(), Some(2 + 123), "{extra:?}: {o:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{o:?}");
    }
}
