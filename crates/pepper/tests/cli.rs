//! CLI behaviour: version and module checks, bad input, golden report output.

mod common;
use common::*;

#[test]
fn report_refuses_a_different_module() {
    let (_, _, _, _, prof) = run_to("exact-paths", &fixture("mod3.wat"), &[], &[]);
    let o = pepper(&[
        "report",
        "--module",
        fixture("nested.wat").to_str().unwrap(),
        prof.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("recorded for module"), "{err}");
    let ok = pepper(&[
        "report",
        "--module",
        fixture("mod3.wat").to_str().unwrap(),
        prof.to_str().unwrap(),
    ]);
    assert!(ok.status.success());
}

#[test]
fn report_refuses_newer_or_foreign_files() {
    let dir = tempdir();
    let newer = dir.join("newer.json");
    std::fs::write(&newer, r#"{"format":"pepper-profile","version":99}"#).unwrap();
    let o = pepper(&["report", newer.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("newer than this pepper"));
    let foreign = dir.join("foreign.json");
    std::fs::write(&foreign, r#"{"hello":1}"#).unwrap();
    let o = pepper(&["report", foreign.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a pepper profile"));
}

#[test]
fn invalid_wasm_is_a_clear_error_not_a_panic() {
    let bad = unique_path("bad.wasm");
    std::fs::write(&bad, b"\0asm\x01\0\0\0\x01\x05garbage").unwrap();
    let o = pepper(&["run", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(125));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: ") && err.contains(&*bad.file_name().unwrap().to_string_lossy()),
        "{err}"
    );
    assert!(!err.contains("panicked"));
}

#[test]
fn instrumented_module_is_written_and_validates() {
    let out = unique_path("mod3.instrumented.wasm");
    let o = pepper(&[
        "instrument",
        "--mode",
        "exact-paths",
        fixture("mod3.wat").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(validate_and_run(&out), Some(0));
}

/// Validates an instrumented module and runs it elsewhere (here, through pepper with no
/// further rewriting); returns its exit code.
fn validate_and_run(module: &std::path::Path) -> Option<i32> {
    let bytes = std::fs::read(module).unwrap();
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&bytes)
        .unwrap();
    let stem = module.file_stem().unwrap().to_string_lossy();
    let profile = unique_path(format!("{stem}.none.json"));
    let o = pepper(&[
        "run",
        "--mode",
        "none",
        "-o",
        profile.to_str().unwrap(),
        module.to_str().unwrap(),
    ]);
    o.status.code()
}

/// `instrument` takes the guide options of `run`: a targeted module with obvious paths,
/// guided by an earlier profile, validates and runs.
#[test]
fn instrument_targeted_with_a_guide() {
    let (_, _, _, guide) = run("exact-paths", &fixture("coldloops.wat"), &[], &[]);
    let g = unique_path("coldloops.guide.json");
    guide.write(std::fs::File::create(&g).unwrap()).unwrap();
    let out = unique_path("coldloops.targeted.wasm");
    let o = pepper(&[
        "instrument",
        "--mode",
        "targeted",
        "--guide",
        g.to_str().unwrap(),
        "--obvious",
        fixture("coldloops.wat").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("ignored"), "the guide was used: {err}");
    assert_eq!(
        validate_and_run(&out),
        Some(0),
        "the fixture checks its results"
    );
}

/// Golden file for the JSON report (timings and paths blanked). `BLESS=1` rewrites it.
#[test]
fn json_report_matches_golden() {
    let (_, _, _, _, prof) = run_to("exact-paths", &fixture("brtable.wat"), &[], &[]);
    let o = pepper(&["report", "--format", "json", prof.to_str().unwrap()]);
    assert!(o.status.success());
    let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["run"] = serde_json::Value::Null;
    v["module"]["path"] = serde_json::Value::Null;
    let got = serde_json::to_string_pretty(&v).unwrap() + "\n";
    let golden = root().join("tests/golden/brtable.report.json");
    if std::env::var_os("BLESS").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &got).unwrap();
    }
    let want =
        std::fs::read_to_string(&golden).expect("golden exists (run with BLESS=1 to create)");
    assert_eq!(got, want);
}

#[test]
fn a_guide_from_another_module_is_reported_and_ignored() {
    // (Each test writes its own files: tests run in parallel in one temp directory.)
    let (_, _, _, _, guide) = run_to("exact-paths", &fixture("recursion.wat"), &[], &[]);
    let (c, _, err, p) = run(
        "pep",
        &fixture("mod3.wat"),
        &["--every", "1", "--guide", guide.to_str().unwrap()],
        &[],
    );
    assert_eq!(c, 0);
    assert!(
        err.contains("ignored, using the static estimate instead")
            && err.contains("recorded for module"),
        "{err}"
    );
    assert_eq!(p.sampling.unwrap().guide, None);
    // A file that is not a profile is refused the same way.
    let junk = unique_path("junk.json");
    std::fs::write(&junk, "{}").unwrap();
    let (c, _, err, _) = run(
        "pep",
        &fixture("mod3.wat"),
        &["--guide", junk.to_str().unwrap()],
        &[],
    );
    assert_eq!(c, 0);
    assert!(err.contains("not a pepper profile"), "{err}");
}

#[test]
fn compare_scores_pep_every_path_as_perfect() {
    let (_, _, _, _, exact) = run_to("exact-paths", &fixture("nested.wat"), &[], &[]);
    let (_, _, _, _, pep) = run_to("pep", &fixture("nested.wat"), &["--every", "1"], &[]);
    let o = pepper(&[
        "compare",
        "--format",
        "json",
        exact.to_str().unwrap(),
        pep.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "path_accuracy",
        "edge_relative_overlap",
        "edge_absolute_overlap",
    ] {
        assert_eq!(v[k].as_f64(), Some(1.0), "{k}: {v}");
    }
    let text = pepper(&["compare", exact.to_str().unwrap(), pep.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("path accuracy") && text.contains("100.0%"),
        "{text}"
    );
    // Profiles of different modules are refused.
    let (_, _, _, _, other) = run_to("exact-paths", &fixture("early_return.wat"), &[], &[]);
    let o = pepper(&["compare", exact.to_str().unwrap(), other.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("different modules"));
}

/// `pepper merge` of real profiles: three copies of one deterministic run triple every
/// count (branches, paths, call sites, contexts) and leave the shape alone; profiles of
/// different modules are refused with both file names.
#[test]
fn merge_sums_real_profiles_and_refuses_other_modules() {
    let mut calls_paths = None;
    for (mode, extra) in [("exact-paths", &[][..]), ("exact-calls", &[][..])] {
        let (code, _, stderr, single, one) = run_to(mode, &fixture("calls.wat"), extra, &[]);
        assert_eq!(code, 0, "{stderr}");
        calls_paths.get_or_insert(one.clone());
        let merged = unique_path(format!("calls.{mode}.merged.json"));
        let one = one.to_str().unwrap();
        let o = pepper(&["merge", one, one, one, "-o", merged.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let m = pepper_profile::Profile::read(std::fs::File::open(&merged).unwrap()).unwrap();
        let triple = |v: &[u64]| v.iter().map(|c| c * 3).collect::<Vec<_>>();
        assert_eq!(m.branches.len(), single.branches.len());
        for (a, b) in m.branches.iter().zip(&single.branches) {
            assert_eq!(a.counts, triple(&b.counts));
        }
        let counts = |p: &pepper_profile::Profile| {
            let mut v: Vec<_> = p
                .paths
                .iter()
                .map(|p| (p.func, p.number, p.count))
                .collect();
            v.sort();
            v
        };
        let expected: Vec<_> = counts(&single)
            .into_iter()
            .map(|(f, n, c)| (f, n, 3 * c))
            .collect();
        assert_eq!(counts(&m), expected);
        if let Some(c) = &single.contexts {
            let mc = m.contexts.as_ref().expect("contexts survive the merge");
            assert_eq!(mc.nodes.len(), c.nodes.len());
            let calls = |c: &pepper_profile::Contexts| {
                (1..c.nodes.len())
                    .map(|n| c.nodes[n].calls)
                    .collect::<Vec<_>>()
            };
            assert_eq!(calls(mc), triple(&calls(c)));
            assert!(calls(c).iter().any(|&n| n > 0), "the fixture makes calls");
        } else {
            assert!(!single.paths.is_empty(), "the fixture has paths");
        }
        // The merged file is a profile like any other.
        let r = pepper(&["report", merged.to_str().unwrap()]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    }
    let (_, _, _, _, b) = run_to("exact-paths", &fixture("nested.wat"), &[], &[]);
    let a = calls_paths.unwrap();
    let never = unique_path("never.json");
    let o = pepper(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        never.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot merge")
            && err.contains(&*b.file_name().unwrap().to_string_lossy())
            && err.contains("of module"),
        "{err}"
    );
    assert!(!never.exists());
}

/// Eight `pepper run`s of one program at once write eight complete, separate profiles with
/// the counts of a run alone.
#[test]
fn concurrent_processes_write_separate_correct_profiles() {
    let program = fixture("nested.wat");
    let (_, _, _, alone) = run("exact-paths", &program, &[], &[]);
    let outs: Vec<_> = (0..8)
        .map(|_| unique_path("nested.concurrent.json"))
        .collect();
    let children: Vec<_> = outs
        .iter()
        .map(|out| {
            std::process::Command::new(env!("CARGO_BIN_EXE_pepper"))
                .args(["run", "--mode", "exact-paths", "-o"])
                .arg(out)
                .arg(&program)
                .env("XDG_CACHE_HOME", tempdir().join("cache"))
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let counts = |p: &pepper_profile::Profile| {
        let mut v: Vec<_> = p
            .paths
            .iter()
            .map(|x| (x.func, x.number, x.count))
            .collect();
        v.sort();
        v
    };
    for out in &outs {
        let p = pepper_profile::Profile::read(std::fs::File::open(out).unwrap()).unwrap();
        assert_eq!(counts(&p), counts(&alone), "{}", out.display());
    }
}

/// An output pepper cannot write is found before the guest runs (a full device too: see
/// the hardening tests).
#[test]
fn unwritable_outputs_are_errors() {
    let o = pepper(&[
        "run",
        "-o",
        "/nonexistent-pepper-dir/p.json",
        fixture("exit.wat").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    // exit.wat exits 3: a run would have passed that through.
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(err.contains("cannot write the profile"), "{err}");
}

/// A guest that never returns: Ctrl-C (SIGINT) and `--duration` both end the run with the
/// profile of what ran so far written and readable, and exit statuses that say which.
#[test]
fn interrupted_runs_keep_their_profile() {
    let program = fixture("forever.wat");
    let out = unique_path("forever.json");
    let o = pepper(&[
        "run",
        "--mode",
        "exact-paths",
        "--duration",
        "200ms",
        "-o",
        out.to_str().unwrap(),
        program.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(124),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let p = pepper_profile::Profile::read(std::fs::File::open(&out).unwrap()).unwrap();
    assert!(
        p.paths.iter().map(|x| x.count).sum::<u64>() > 1000,
        "{:?}",
        p.paths
    );
    assert!(p.run.trap.as_deref().unwrap_or("").contains("--duration"));

    let out = unique_path("forever.sigint.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pepper"))
        .args(["run", "-o"])
        .arg(&out)
        .arg(&program)
        .env("XDG_CACHE_HOME", tempdir().join("cache"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A signal that arrives while pepper still compiles is held until the run starts,
    // so the timing of this one does not matter.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let p = pepper_profile::Profile::read(std::fs::File::open(&out).unwrap()).unwrap();
    assert!(
        p.sampling.as_ref().is_some_and(|s| s.path_ends > 0),
        "{:?}",
        p.sampling
    );
}

/// Profiles without calling contexts export too: each function with its branch executions
/// (edge profiles) or path executions (path profiles), in every format.
#[test]
fn every_profile_kind_exports() {
    let (_, _, _, _, edges) = run_to("exact-edges", &fixture("mod3.wat"), &[], &[]);
    for format in ["pprof", "flamegraph", "firefox"] {
        let out = unique_path(format!("mod3.{format}.out"));
        let o = pepper(&[
            "export",
            "--format",
            format,
            "-o",
            out.to_str().unwrap(),
            edges.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(std::fs::metadata(&out).unwrap().len() > 0, "{format}");
    }
    let o = pepper(&[
        "export",
        "--format",
        "folded",
        "-o",
        "-",
        edges.to_str().unwrap(),
    ]);
    // `count`'s `if` and loop `br_if` run 100 times each.
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l == "count 200"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let (_, _, _, paths, file) = run_to("exact-paths", &fixture("mod3.wat"), &[], &[]);
    let o = pepper(&[
        "export",
        "--format",
        "folded",
        "-o",
        "-",
        file.to_str().unwrap(),
    ]);
    let count = paths
        .functions
        .iter()
        .find(|f| f.name.as_deref() == Some("count"))
        .unwrap()
        .index;
    let executions: u64 = paths
        .paths
        .iter()
        .filter(|x| x.func == count)
        .map(|x| x.count)
        .sum();
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l == format!("count {executions}")),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// `--snapshot-every` writes readable profiles while the guest runs (the file is replaced
/// whole each time), and SIGTERM then ends the run with the final one.
#[test]
fn snapshots_are_written_while_the_guest_runs() {
    let out = unique_path("forever.snapshots.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pepper"))
        .args([
            "run",
            "--mode",
            "exact-paths",
            "--snapshot-every",
            "50ms",
            "-o",
        ])
        .arg(&out)
        .arg(fixture("forever.wat"))
        .env("XDG_CACHE_HOME", tempdir().join("cache"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    while seen.len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if let Ok(f) = std::fs::File::open(&out) {
            let p = pepper_profile::Profile::read(f).expect("a snapshot is a whole profile");
            assert!(p.run.trap.as_deref().unwrap_or("").contains("snapshot"));
            let n: u64 = p.paths.iter().map(|x| x.count).sum();
            if seen.last() != Some(&n) {
                seen.push(n);
            }
        }
    }
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert_eq!(child.wait().unwrap().code(), Some(143));
    assert!(
        seen.len() >= 2 && seen[1] > seen[0],
        "snapshots grow: {seen:?}"
    );
    let last = pepper_profile::Profile::read(std::fs::File::open(&out).unwrap()).unwrap();
    assert!(last.run.trap.as_deref().unwrap_or("").contains("signal 15"));
}

/// Completion scripts for the usual shells name pepper's subcommands and options.
#[test]
fn shell_completions() {
    for shell in ["bash", "zsh", "fish"] {
        let o = pepper(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(
            script.contains("report") && script.contains("snapshot-every"),
            "{shell}"
        );
    }
}

/// `pepper view` serves the HTML report on localhost: the page at `/`, 404 elsewhere,
/// and its address alone on stdout.
#[test]
fn view_serves_the_report_on_localhost() {
    use std::io::{Read, Write};
    let (_, _, _, _, profile) = run_to("exact-paths", &fixture("mod3.wat"), &[], &[]);
    let (mut child, addr) = spawn_view(&profile, 2);
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        // Sent in two pieces, as clients may: the server reads up to the blank line.
        s.write_all(format!("GET {path} HTTP/1.1\r\n").as_bytes())
            .unwrap();
        s.write_all(b"Host: localhost\r\n\r\n").unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    };
    let page = get("/");
    assert!(
        page.starts_with("HTTP/1.1 200 OK"),
        "{}",
        &page[..80.min(page.len())]
    );
    assert!(
        page.contains("<html") && page.contains("count"),
        "not the report"
    );
    assert!(get("/favicon.ico").starts_with("HTTP/1.1 404"));
    assert!(
        child.wait().unwrap().success(),
        "view stops after --requests"
    );
}

/// `pepper hints FLAG PROFILE MODULE -o OUT`, which must succeed; returns its stderr.
fn hints_to(
    flag: &str,
    profile: &std::path::Path,
    module: &std::path::Path,
    out: &std::path::Path,
) -> String {
    let o = pepper(&[
        "hints",
        flag,
        profile.to_str().unwrap(),
        module.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

/// Runs `module` uninstrumented with branch hints on; its fixture exits 0 when it computed
/// what it should.
fn exits_zero_with_hints_on(module: &std::path::Path) {
    let o = pepper(&[
        "run",
        "--mode",
        "none",
        "--branch-hints",
        // The profile goes to the temp dir, not to `X.pepper.json` in the working
        // directory (the crate's own).
        "-o",
        unique_path("hints-on.pepper.json").to_str().unwrap(),
        module.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `pepper hints --layout` swaps the arms of an `if` whose `then` arm the profile calls
/// unlikely, and the laid-out module still computes the same result.
#[test]
fn hints_layout_swaps_an_unlikely_if_and_keeps_behaviour() {
    let f = fixture("unlikely_then.wat");
    let (code, _, err, _, prof) = run_to("exact-edges", &f, &[], &[]);
    assert_eq!(code, 0, "{err}");
    let out = unique_path("unlikely_then.laid.wasm");
    let err = hints_to("--layout", &prof, &f, &out);
    assert!(err.contains("swapped the arms of 1 unlikely ifs"), "{err}");
    let laid = std::fs::read(&out).unwrap();
    let hints = pepper_wasm::hints::read(&laid).unwrap();
    assert!(
        hints.iter().any(|h| h.likely),
        "the swapped if is now likely: {hints:?}"
    );
    exits_zero_with_hints_on(&out);
}

/// `pepper hints --inline` copies the hot callees into their call sites (never a function
/// into itself), and the inlined module still computes the same sums: a callee's own local
/// starts at zero on every inlined run, `return` and branches to the function's label
/// leave the copy with their values, several results come back.
#[test]
fn hints_inline_copies_hot_callees_and_keeps_behaviour() {
    let f = fixture("hot_calls.wat");
    let (code, _, err, profile, prof) = run_to("exact-edges", &f, &["--contexts", "on"], &[]);
    assert_eq!(code, 0, "{err}");
    let sites = &profile.contexts.as_ref().expect("call counts").call_sites;
    assert!(sites.iter().any(|s| s.calls == 2000), "{sites:?}");
    let out = unique_path("hot_calls.inlined.wasm");
    let err = hints_to("--inline", &prof, &f, &out);
    // bump, clamp, pair and fact from _start; not fact's call of itself.
    assert!(err.contains("inlined 4 call sites"), "{err}");
    assert!(err.contains("1 unsupported"), "{err}");
    let inlined = std::fs::read(&out).unwrap();
    let calls = |wasm: &[u8]| {
        let mut n = 0;
        for p in wasmparser::Parser::new(0).parse_all(wasm) {
            if let wasmparser::Payload::CodeSectionEntry(body) = p.unwrap() {
                let mut ops = body.get_operators_reader().unwrap();
                while !ops.eof() {
                    n += usize::from(matches!(
                        ops.read().unwrap(),
                        wasmparser::Operator::Call { .. }
                    ));
                }
            }
        }
        n
    };
    // Before: five in _start (exit among them), fact's own. After: exit, the inlined
    // fact's call, fact's own.
    assert_eq!(calls(&wat::parse_file(&f).unwrap()), 6);
    assert_eq!(calls(&inlined), 3);
    exits_zero_with_hints_on(&out);
}

/// Every command's help teaches in words: `pepper run --help` stays short enough to
/// read, and no help quotes a measured figure (numbers go stale; the tables hold them).
/// `compare`'s help is left out: its percentages define its metrics' thresholds.
#[test]
fn help_is_short_and_quotes_no_figures() {
    let help = |args: &[&str]| {
        let o = pepper(args);
        assert!(o.status.success(), "{args:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let run = help(&["run", "--help"]);
    let words = run.split_whitespace().count();
    assert!(words <= 1500, "`pepper run --help` has {words} words");
    for cmd in [
        "run",
        "serve",
        "instrument",
        "report",
        "merge",
        "export",
        "hints",
    ] {
        let text = help(&[cmd, "--help"]);
        let figure = (text.lines()).find(|l| {
            l.split_whitespace()
                .any(|w| w.trim_end_matches([',', '.', ')', ';']).ends_with('%') && w.len() > 1)
        });
        assert!(
            figure.is_none(),
            "`pepper {cmd} --help` quotes a figure: {figure:?}"
        );
    }
}
