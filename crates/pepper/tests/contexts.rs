//! Calling contexts end to end: exact call counts on a fixture with known answers, the
//! sampled tree on a real workload, and exports read back by real readers (`go tool pprof`,
//! inferno, the Firefox format's JSON).

mod common;

use common::{fixture, pepper, root, run, run_to, switch_bursts, tempdir, unique_path};
use pepper_profile::{ContextKind, Contexts, Profile};
use std::collections::HashMap;
use std::process::Command;

/// Calls per context, keyed by the chain of function names.
fn calls_by_chain(p: &Profile) -> HashMap<String, u64> {
    let c = p.contexts.as_ref().expect("contexts recorded");
    (1..c.nodes.len())
        .map(|i| {
            let chain: Vec<String> = c
                .ancestry(i)
                .iter()
                .map(|&n| p.function_name(c.nodes[n].func))
                .collect();
            (chain.join(";"), c.nodes[i].calls)
        })
        .fold(HashMap::new(), |mut m, (k, v)| {
            *m.entry(k).or_default() += v;
            m
        })
}

fn site_calls(c: &Contexts, p: &Profile, caller: &str) -> Vec<u64> {
    c.call_sites
        .iter()
        .filter(|s| p.function_name(s.func) == caller)
        .map(|s| s.calls)
        .collect()
}

#[test]
fn exact_contexts_count_every_call_in_its_context() {
    let (code, _, stderr, p) = run("exact-calls", &fixture("calls.wat"), &[], &[]);
    assert_eq!(code, 0, "{stderr}");
    let c = p.contexts.as_ref().unwrap();
    assert_eq!(c.kind, ContextKind::Exact);
    let calls = calls_by_chain(&p);
    let main = "_start;main";
    let get = |k: &str| *calls.get(&format!("{main}{k}")).unwrap_or(&0);
    // The two call sites of `work` in main are two contexts (10 and 5 calls), each calling
    // `leaf` from two sites in work.
    let work: Vec<u64> = c
        .nodes
        .iter()
        .filter(|n| p.function_name(n.func) == "work")
        .map(|n| n.calls)
        .collect();
    let mut work_sorted = work.clone();
    work_sorted.sort();
    assert_eq!(work_sorted, vec![5, 10]);
    assert_eq!(get(";work;leaf"), 30, "leaf under work: 2 × 15 calls");
    // Recursion keeps full context: fib(6) has a chain 6 deep.
    // fib(6)'s call tree has 1, 2, 4, 8, 8, 2 activations at depths 1 to 6.
    let depths: Vec<u64> = (1..=6).map(|d| get(&";fib".repeat(d))).collect();
    assert_eq!(depths, vec![1, 2, 4, 8, 8, 2]);
    let fib_total: u64 = calls
        .iter()
        .filter(|(k, _)| k.ends_with("fib"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(fib_total, 25);
    // A tail call replaces its caller's frame: leaf appears under main directly.
    assert_eq!(get(";leaf"), 1);
    assert_eq!(get(";tail"), 1);
    // Per-site counters agree with the tree.
    assert_eq!(site_calls(c, &p, "work"), vec![15, 15]);
    assert_eq!(site_calls(c, &p, "main"), vec![10, 5, 1, 1]);
}

/// PEP without call-site counters estimates each site's calls from the paths it sampled:
/// recording every path end (`--every 1`), the estimates are the exact counts.
#[test]
fn pep_without_call_counters_estimates_site_calls_from_its_paths() {
    let f = fixture("calls.wat");
    let sites = |mode: &str, extra: &[&str]| {
        let (code, _, stderr, p) = run(mode, &f, extra, &[]);
        assert_eq!(code, 0, "{stderr}");
        let c = p.contexts.expect("contexts recorded");
        c.call_sites.iter().map(|s| s.calls).collect::<Vec<_>>()
    };
    let exact = sites("exact-calls", &[]);
    assert!(exact.iter().any(|&c| c > 1), "{exact:?}");
    assert_eq!(sites("pep", &["--every", "1", "--no-call-counts"]), exact);
}

#[test]
fn pep_collects_native_contexts_by_default() {
    // Bursts every 50 µs, stacks every 200 µs: one stack sample per four ticks.
    let p = sampled_contexts_on_lua("pep", &["--interval", "50us"]);
    let ticks = p.sampling.as_ref().unwrap().ticks;
    let s = p.contexts.as_ref().unwrap().sampling.clone().unwrap();
    assert_eq!(s.interval_us, 200);
    if pepper_runtime::NATIVE_STACKS {
        // Every fourth tick samples the stack, and the last one (at exit); a sample that
        // finds no guest frame is not counted.
        assert!(
            s.samples <= ticks / 4 + 1 && s.samples >= ticks / 8,
            "{ticks} ticks, {s:?}"
        );
    }
}

#[test]
fn call_windows_place_calls_in_their_contexts_on_a_real_workload() {
    let p = sampled_contexts_on_lua("calls", &["--call-windows"]);
    if !pepper_runtime::NATIVE_STACKS {
        return;
    }
    // Windows replayed thousands of calls, and most of them ran to their start (cut
    // short only at events the stack did not explain).
    let s = p.contexts.as_ref().unwrap().sampling.as_ref().unwrap();
    assert!(s.window_calls > 1000, "{s:?}");
    assert!(s.window_weighted >= s.window_calls, "{s:?}");
    assert!(s.window_cut * 2 < s.samples, "{s:?}");
}

/// On the switch, stacks are sampled during bursts and their path windows replay
/// the burst's path ends as calls: windows place calls, as without the switch.
#[test]
fn path_windows_replay_bursts_on_the_switch() {
    if !pepper_runtime::NATIVE_STACKS {
        return;
    }
    // A run whose sampler thread was starved by the rest of the machine (few ticks, or
    // most of them finding the guest not running) says nothing about windows: the
    // instrumented copies end a burst on their own when the sampler falls behind, and a
    // stack sampled after that has no window. So does a run on a machine busy enough that
    // every burst ended that way (24 samples, none with a window, once with both cores
    // taken by other work): a run is retried until one places calls. Runs with few
    // bursts or stack samples (an idle machine takes about 80 of each) are starved.
    let starved = |s: &pepper_profile::Sampling, stacks: u64| {
        s.ticks < 20 || switch_bursts(s) < 10 || s.idle_ticks * 4 >= s.ticks || stacks < 40
    };
    let mut fed = Vec::new();
    for _ in 0..3 {
        let p = sampled_contexts_on_lua("pep", &["--switch", "shallow"]);
        let s = p.contexts.as_ref().unwrap().sampling.clone().unwrap();
        if starved(p.sampling.as_ref().expect("sampling info"), s.samples) {
            continue;
        }
        if s.window_calls > 0 {
            assert!(s.window_weighted >= s.window_calls, "{s:?}");
            return;
        }
        fed.push(s);
    }
    assert!(fed.is_empty(), "no window placed a call: {fed:#?}");
    eprintln!("the sampler was starved in every run; not judged");
}

#[test]
fn shadow_stack_contexts_on_a_real_workload() {
    // (Another mode than the test above: each mode writes its own profile file.)
    sampled_contexts_on_lua("calls", &["--stacks", "shadow"]);
}

/// Runs the Lua workload in `mode` with contexts (`extra` picks the stack source): same
/// output as uninstrumented, a sampled tree rooted at `_start`, the interpreter loop among
/// the hottest functions, and call estimates consistent with the exact site counts.
fn sampled_contexts_on_lua(mode: &str, extra: &[&str]) -> Profile {
    // One sampled Lua run at a time: on a 2-core machine, parallel runs (each a guest and a
    // sampler thread) starve each other's samplers.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let wasm = root().join("bench/workloads/build/lua.wasm");
    if !wasm.exists() {
        panic!("{} missing: run bench/workloads/build.sh", wasm.display());
    }
    let plain = Command::new(env!("CARGO_BIN_EXE_pepper"))
        .args(["run", "--mode", "none", "-o"])
        .arg(unique_path("lua-none.json"))
        .arg(&wasm)
        .args(["--", "20"])
        .output()
        .unwrap();
    let mut flags = vec!["--stack-interval", "200us"];
    flags.extend_from_slice(extra);
    let (code, stdout, stderr, p) = run(mode, &wasm, &flags, &["20"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, plain.stdout, "instrumented guest output differs");
    let c = p
        .contexts
        .as_ref()
        .expect("PEP collects contexts by default");
    assert_eq!(c.kind, ContextKind::Sampled);
    let s = c.sampling.as_ref().unwrap();
    assert!(s.samples > 10, "{s:?}");
    // The interpreter loop is hot and its context runs from _start down. (Top 15: a
    // loaded test machine leaves some runs with few samples. With one busy loop beside
    // the tests, a starved sampler took 17-21 where an idle machine takes 80-180, each
    // standing for milliseconds: such a run does not rank functions.)
    let hot = &c.hot_functions[..c.hot_functions.len().min(15)];
    assert!(
        s.samples < 50
            || hot
                .iter()
                .any(|h| p.function_name(h.func) == "luaV_execute"),
        "{:?} {s:?}",
        hot.iter()
            .map(|h| (p.function_name(h.func), h.self_us))
            .collect::<Vec<_>>()
    );
    let calls = calls_by_chain(&p);
    assert!(calls
        .keys()
        .any(|k| k.starts_with("_start") && k.contains(";main;")));
    // Estimated calls: every site's contexts share out at most its exact count (up to
    // rounding), and together they account for most calls (contexts estimated below half a
    // call are not added).
    let mut per_site: HashMap<u32, (u64, u64)> = HashMap::new();
    for n in &c.nodes {
        if let Some(site) = n.site {
            let e = per_site.entry(site).or_default();
            e.0 += n.calls;
            e.1 += 1;
        }
    }
    let (mut est, mut exact) = (0, 0);
    for (site, (total, contexts)) in per_site {
        let n = c.call_sites[site as usize].calls;
        assert!(
            total <= n + n / 20 + contexts,
            "site {site}: {total} vs {n}"
        );
        est += total;
        exact += n;
    }
    assert!(est * 100 >= exact * 85, "estimated {est} of {exact} calls");
    p
}

fn go() -> Option<std::path::PathBuf> {
    let found = Command::new("go").arg("version").output().is_ok();
    if !found && std::env::var_os("PEPPER_REQUIRE_READERS").is_some() {
        panic!("`go` (Debian package golang-go) is required: scripts/test.sh installs it");
    }
    found.then(|| "go".into())
}

#[test]
fn exports_are_read_by_real_readers() {
    let dir = tempdir();
    // A copy under another name: the test above profiles the same fixture in parallel.
    let program = dir.join("calls-export.wat");
    std::fs::copy(fixture("calls.wat"), &program).unwrap();
    let (code, _, stderr, _, profile) = run_to("exact-calls", &program, &[], &[]);
    assert_eq!(code, 0, "{stderr}");
    let export = |format: &str, out: &str| {
        let o = pepper(&[
            "export",
            "--format",
            format,
            "-o",
            dir.join(out).to_str().unwrap(),
            profile.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        dir.join(out)
    };

    // Folded stacks: exact call counts per context (one line per call-site chain, so
    // equal name chains add up).
    let folded = std::fs::read_to_string(export("folded", "calls.folded")).unwrap();
    let mut by_chain: HashMap<&str, u64> = HashMap::new();
    for line in folded.lines() {
        let (chain, n) = line.rsplit_once(' ').unwrap();
        *by_chain.entry(chain).or_default() += n.parse::<u64>().unwrap();
    }
    assert_eq!(by_chain["_start;main;work;leaf"], 30, "{folded}");
    assert_eq!(by_chain["_start;main;fib;fib"], 2, "{folded}");

    // inferno renders them.
    let svg = std::fs::read_to_string(export("flamegraph", "calls.svg")).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.contains("<svg"),
        "not an SVG"
    );
    assert!(
        svg.contains("work") && svg.contains("calls"),
        "names missing"
    );

    // The Firefox processed format: JSON with one thread whose string table has our names.
    let fx: serde_json::Value =
        serde_json::from_slice(&std::fs::read(export("firefox", "calls.firefox.json")).unwrap())
            .unwrap();
    let thread = &fx["threads"][0];
    assert!(
        thread["stringArray"].to_string().contains("leaf"),
        "{thread}"
    );
    assert!(fx["meta"]["version"].as_u64().is_some());

    // pprof: go tool pprof reads it and sees the calls.
    let pb = export("pprof", "calls.pb.gz");
    let Some(go) = go() else {
        eprintln!("skipping the pprof reader check: `go` not found");
        return;
    };
    let o = Command::new(go)
        .args(["tool", "pprof", "-raw"])
        .arg(&pb)
        .env("HOME", &dir)
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(raw.contains("calls/count"), "{raw}");
    assert!(raw.contains("leaf") && raw.contains("fib"), "{raw}");
    let o = Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=3"])
        .arg(&pb)
        .env("HOME", &dir)
        .output()
        .unwrap();
    let top = String::from_utf8_lossy(&o.stdout);
    // leaf: 30 under work + 1 by tail call = 31 calls, the most of any function.
    assert!(
        top.lines()
            .any(|l| l.contains("leaf") && l.trim_start().starts_with("31 ")),
        "{top}"
    );
}

#[test]
fn a_trapping_or_exiting_guest_still_gets_its_contexts() {
    for (fixture_name, code) in [("trap.wat", 134), ("exit.wat", 3)] {
        for mode in ["exact-calls", "calls"] {
            let (got, _, stderr, p) = run(mode, &fixture(fixture_name), &[], &[]);
            assert_eq!(got, code, "{fixture_name} {mode}: {stderr}");
            let c = p
                .contexts
                .as_ref()
                .unwrap_or_else(|| panic!("{fixture_name} {mode}"));
            if mode == "exact-calls" {
                // The calls made before the trap or exit are counted.
                assert!(c.nodes.iter().any(|n| n.calls > 0), "{fixture_name}: {c:?}");
            }
        }
    }
}

/// A guest that overflows its stack, or exhausts its memory and then traps, still leaves a
/// complete, readable profile, with calling contexts sampled from its deep stack.
#[test]
fn a_guest_out_of_stack_or_memory_still_gets_its_profile() {
    for fixture_name in ["stack_overflow.wat", "memory_exhaustion.wat"] {
        for mode in ["pep", "exact-paths"] {
            let (got, _, stderr, p) = run(mode, &fixture(fixture_name), &[], &[]);
            assert_eq!(got, 134, "{fixture_name} {mode}: {stderr}");
            assert!(p.run.trap.is_some(), "{fixture_name} {mode}");
            if mode == "exact-paths" {
                assert!(
                    !p.paths.is_empty(),
                    "{fixture_name}: completed paths counted"
                );
            }
        }
    }
}
