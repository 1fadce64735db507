//! Components: a WASI program turned into a `wasi:cli/command` component as a user would
//! (wit-component with the preview-1 adapter wasmtime ships) profiles like the core module
//! it came from, under WASI 0.2.

mod common;
use common::*;

#[path = "../../../bench/src/componentize.rs"]
mod componentize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `core` as a component: the program's module plus the preview-1 command adapter.
fn componentize(core: &Path) -> PathBuf {
    let wasm = std::fs::read(core).unwrap();
    let wasm = wat::parse_bytes(&wasm).unwrap();
    let component = componentize::componentize(&wasm).unwrap();
    let out = unique_path(format!(
        "{}.component.wasm",
        core.file_stem().unwrap().to_string_lossy()
    ));
    std::fs::write(&out, component).unwrap();
    out
}

/// Path counts by function, start and end kind and steps: code offsets left out, since
/// the program's module in the component has one more type (its `cabi_realloc`), which
/// moves every code offset by a few bytes.
fn paths_without_offsets(p: &pepper_profile::Profile) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for path in &p.paths {
        let kind =
            |e: &pepper_profile::PathPoint| format!("{e:?}").split(' ').next().map(String::from);
        let key = format!(
            "{} {:?} {:?} {:?}",
            path.func,
            kind(&path.start),
            kind(&path.end),
            path.steps
        );
        *m.entry(key).or_insert(0) += path.count;
    }
    m
}

/// How far two count maps are apart: the sum of differences over the first's total.
fn distance(a: &HashMap<String, u64>, b: &HashMap<String, u64>) -> f64 {
    let keys: std::collections::HashSet<&String> = a.keys().chain(b.keys()).collect();
    let diff: u64 = keys
        .iter()
        .map(|k| {
            a.get(*k)
                .copied()
                .unwrap_or(0)
                .abs_diff(b.get(*k).copied().unwrap_or(0))
        })
        .sum();
    diff as f64 / a.values().sum::<u64>().max(1) as f64
}

/// In every mode that counts exactly, the component's profile is the core module's: same
/// output and exit code, the same paths and branch counts, apart from the few the
/// adapter causes in the program (its allocations through the program's `malloc`, and
/// libc's answers to what WASI 0.2 says of stdio): under 0.1% of the counts.
fn same_as_core(core: &Path, extra: &[&str], guest: &[&str]) {
    let component = componentize(core);
    for mode in ["exact-paths", "exact-edges"] {
        let (c0, out0, _, p0) = run(mode, core, extra, guest);
        let (c1, out1, err1, p1) = run(mode, &component, extra, guest);
        assert_eq!((c0, &out0), (c1, &out1), "{mode}: {err1}");
        assert!(err1.contains("a component"), "{err1}");
        let d = distance(&paths_without_offsets(&p0), &paths_without_offsets(&p1));
        assert!(d < 0.001, "{mode}: paths {:.3}% apart", d * 100.0);
        let branches = |p: &pepper_profile::Profile| -> HashMap<String, u64> {
            let mut m = HashMap::new();
            for (k, b) in p.branches.iter().enumerate() {
                for (o, &c) in b.counts.iter().enumerate() {
                    m.insert(format!("{k}:{o}"), c);
                }
            }
            m
        };
        let d = distance(&branches(&p0), &branches(&p1));
        assert!(d < 0.001, "{mode}: branches {:.3}% apart", d * 100.0);
        // One more function in the program's module (its cabi_realloc) and nothing else;
        // the adapter's are counted too, under ids of their own.
        let program = (p1.functions.iter())
            .filter(|f| pepper_profile::module_of(f.index).is_none())
            .count();
        assert_eq!(p0.functions.len() + 1, program);
        assert!(p1.functions.len() > program, "the adapter is profiled too");
    }
    // PEP (the default) with calling contexts: the guest behaves the same and the
    // profile has paths and contexts.
    let (c0, out0, _, _) = run("none", core, extra, guest);
    // Stack samples every 50 µs: a loaded machine still takes some in a short run. The
    // run lasts a few milliseconds, so a machine busy with other tests can starve the
    // sampler thread for all of it (CI saw a run with no burst once): up to three tries
    // for a profile with paths; every try must behave as the core module does.
    let fast = [extra, &["--stack-interval", "50us", "--interval", "50us"]].concat();
    let mut tries = Vec::new();
    let (err, pep) = loop {
        let (c, out, err, pep) = run("pep", &component, &fast, guest);
        assert_eq!((c0, &out0), (c, &out), "pep: {err}");
        if !pep.paths.is_empty() || tries.len() == 2 {
            break (err, pep);
        }
        tries.push(err);
    };
    assert!(
        !pep.paths.is_empty(),
        "pep found no paths in three runs: {tries:?} {err}"
    );
    let contexts = pep.contexts.as_ref().expect("calling contexts");
    let sampled_wasm = contexts
        .sampling
        .as_ref()
        .is_some_and(|s| s.samples > s.in_host + s.empty);
    if pepper_runtime::NATIVE_STACKS && sampled_wasm {
        // Native stacks walk through the adapter: its `wasi:cli/run` export is the
        // program's caller, a frame named by its module, and the calls below it are
        // estimated from the program's exact call-site counts.
        // (A sample whose walk failed roots a detached subtree beside it.)
        let outermost: Vec<String> = (contexts.nodes.iter())
            .filter(|n| n.parent == Some(0) && !n.detached)
            .map(|n| pep.function_name(n.func))
            .collect();
        assert!(
            outermost
                .iter()
                .any(|name| name.contains("adapter") && name.ends_with("#run")),
            "outermost frames {outermost:?}"
        );
        assert!(contexts.nodes.iter().any(
            |n| n.parent == Some(0) && pepper_wasm::component::foreign_parts(n.func).is_some()
        ));
        let called = contexts.nodes.iter().filter(|n| n.calls > 1).count();
        assert!(called > 20, "only {called} contexts with calls");
    } else {
        assert!(contexts.nodes.len() > 1);
    }
    // Functions are named by their core module.
    let named = |n: &str| pep.functions.iter().any(|f| f.name.as_deref() == Some(n));
    assert!(named("main::main"), "{:?}", &pep.functions[..3]);
}

#[test]
fn a_fixture_component_gets_its_arguments_and_exits_through_the_adapter() {
    // The module exits with (arguments × 16 + variables) through `proc_exit`, which the
    // adapter turns into `wasi:cli/exit`: WASI 0.2 exits with success or failure only, so
    // the component's non-zero code arrives as 1 (as under `wasmtime run`).
    let f = fixture("argc.wat");
    let component = componentize(&f);
    let (c0, _, _, _) = run("exact-paths", &f, &[], &["a", "b"]);
    let (c1, _, err, p) = run("exact-paths", &component, &[], &["a", "b"]);
    assert_eq!(c0, 3 * 16);
    assert_eq!(c1, 1, "{err}");
    assert!(err.contains("core modules (main, "), "{err}");
    assert_eq!(p.run.exit_code, Some(1));
}

#[test]
fn a_real_program_as_a_component_profiles_like_its_module() {
    let Some(lua) = workload("lua") else {
        return;
    };
    same_as_core(&lua, &[], &["1"]);
}

/// A program built as a component from the start (Rust's wasm32-wasip2 target, when
/// rustup could install it: see bench/workloads/build.sh): it runs as it runs
/// uninstrumented, its exact paths name Rust functions by their module, and PEP's
/// calling contexts reach it through the component's own `wasi:cli/run`.
#[test]
fn a_program_built_as_a_component_profiles() {
    let p2 = root().join("bench/workloads/build/deflate-p2.component.wasm");
    if !p2.exists() {
        eprintln!(
            "skipping: {} was not built (no wasm32-wasip2 target)",
            p2.display()
        );
        return;
    }
    let (c0, out0, err0, _) = run("none", &p2, &[], &["1"]);
    assert_eq!(c0, 0, "{err0}");
    assert!(String::from_utf8_lossy(&out0).contains("bytes ->"));
    let (c, out, err, exact) = run("exact-paths", &p2, &[], &["1"]);
    assert_eq!((c, &out), (0, &out0), "{err}");
    assert!(err.contains("a component"), "{err}");
    let hottest = exact
        .functions
        .iter()
        .max_by_key(|f| {
            exact
                .paths
                .iter()
                .filter(|p| p.func == f.index)
                .map(|p| p.count)
                .sum::<u64>()
        })
        .unwrap();
    let name = hottest.name.as_deref().unwrap_or("");
    assert!(name.starts_with("main::miniz_oxide::"), "hottest: {name}");
    let (c, out, err, pep) = run("pep", &p2, &[], &["1"]);
    assert_eq!((c, &out), (0, &out0), "{err}");
    assert!(!pep.paths.is_empty() && pep.contexts.is_some(), "{err}");
}

/// A component of two core modules, the one calling the other (`two-modules.wat`): the
/// exact modes count both, with the counts the fixture's comment derives, each function
/// named by its module; `--modules` picks which are profiled.
#[test]
fn every_core_module_of_a_component_is_counted() {
    use pepper_profile::BranchKind::{BrIf, If};
    let f = fixture("two-modules.wat");
    for mode in ["exact-paths", "exact-edges"] {
        let (c, _, err, p) = run(mode, &f, &[], &[]);
        assert_eq!(c, 0, "{mode}: {err}");
        assert!(err.contains("profiling 2 of its 2 core modules"), "{err}");
        assert_eq!(
            branch(&p, "lib::hot", If, 0),
            [5_000_000, 5_000_000],
            "{mode}"
        );
        assert_eq!(branch(&p, "lib::hot", BrIf, 0), [15_000_000, 10_000_000]);
        assert_eq!(branch(&p, "main::run", BrIf, 0), [9_999_999, 1], "{mode}");
        let names: Vec<&str> = p.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["main", "lib"]);
        assert_eq!(
            pepper_profile::module_of(function_index(&p, "lib::hot")),
            Some(0),
            "lib is the component's first core module"
        );
        if mode == "exact-paths" {
            assert_eq!(path_executions(&p, "lib::hot"), 35_000_000);
            assert_eq!(path_executions(&p, "main::run"), 10_000_001);
        }
    }
    // The sampled modes see both modules too: PEP's bursts take every path end of a
    // stretch of the run whichever module wrote it, and ephemeral windows open in both
    // (budgets are armed in both). lib::hot's loop is taken three times in five and runs 2.5
    // times as often as main's.
    let modes: [(&str, &[&str]); 3] = [
        ("pep", &[]),
        ("ephemeral", &[]),
        ("ephemeral", &["--persistence", "1000"]),
    ];
    for (mode, extra) in modes {
        let (c, _, err, p) = run(mode, &f, extra, &[]);
        assert_eq!(c, 0, "{mode} {extra:?}: {err}");
        assert!(err.contains("profiling 2 of its 2 core modules"), "{err}");
        let (lib, main) = (
            branch(&p, "lib::hot", BrIf, 0),
            branch(&p, "main::run", BrIf, 0),
        );
        let taken = lib[0] as f64 / (lib[0] + lib[1]).max(1) as f64;
        assert!((taken - 0.6).abs() < 0.05, "{mode} {extra:?}: {lib:?}");
        let ratio = (lib[0] + lib[1]) as f64 / (main[0] + main[1]).max(1) as f64;
        assert!(
            (ratio - 2.5).abs() < 0.5,
            "{mode} {extra:?}: {lib:?} against {main:?}"
        );
    }
    // One module by name: it is the primary, with plain indices and no module list.
    let (c, _, err, p) = run("exact-edges", &f, &["--modules", "lib"], &[]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(branch(&p, "lib::hot", BrIf, 0), [15_000_000, 10_000_000]);
    assert!(p.modules.is_empty() && p.functions.len() == 1, "{p:?}");
    let out = pepper(&["run", "--modules", "nope", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("no core module named nope") && err.contains("lib, main"),
        "{err}"
    );
}

/// CPython as componentize-py links it (bench/workloads/families/python.sh): fourteen
/// core modules, the interpreter in `libpython3.14.so`. Every module with code is
/// profiled, and the program prints what it prints uninstrumented; the interpreter's
/// loop is the hottest function in exact edges, in PEP's paths and in the stack samples'
/// self time, each named by its module.
#[test]
fn a_python_component_is_profiled_in_every_module() {
    let py = root().join("bench/workloads/build/pybench.component.wasm");
    if !py.exists() {
        eprintln!("skipping: {} was not built", py.display());
        return;
    }
    let eval = "libpython3.14.so::_PyEval_EvalFrameDefault";
    let (c0, out0, err0, _) = run("none", &py, &[], &["1"]);
    assert_eq!(c0, 0, "{err0}");
    for mode in ["exact-edges", "pep"] {
        let (c, out, err, p) = run(mode, &py, &[], &["1"]);
        assert_eq!((c, &out), (0, &out0), "{mode}: {err}");
        assert!(p.modules.len() > 10, "{mode}: {:?}", p.modules);
        let hottest = (p.functions.iter())
            .max_by_key(|f| {
                (p.branches.iter())
                    .filter(|b| b.func == f.index)
                    .map(|b| b.total())
                    .sum::<u64>()
            })
            .unwrap();
        assert_eq!(p.function_name(hottest.index), eval, "{mode}");
        if let Some(c) = p
            .contexts
            .as_ref()
            .filter(|_| pepper_runtime::NATIVE_STACKS)
        {
            let top = c.hot_functions.iter().max_by_key(|h| h.self_us).unwrap();
            assert_eq!(p.function_name(top.func), eval, "{mode}");
        }
    }
}

/// `pepper instrument` and `pepper hints` take a component and give one back, with the
/// program's module rewritten and everything else as it was.
#[test]
fn instrument_and_hints_give_components_back() {
    let Some(lua) = workload("lua") else {
        return;
    };
    let component = componentize(&lua);
    let valid = |bytes: &[u8]| {
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
            .validate_all(bytes)
            .unwrap();
        assert!(wasmparser::Parser::is_component(bytes));
    };
    let out = unique_path("lua.instrumented.component.wasm");
    let o = pepper(&[
        "instrument",
        component.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    valid(&std::fs::read(&out).unwrap());
    let (_, _, _, _, profile) = run_to("exact-edges", &component, &[], &["1"]);
    let hinted = unique_path("lua.hinted.component.wasm");
    let o = pepper(&[
        "hints",
        profile.to_str().unwrap(),
        component.to_str().unwrap(),
        "-o",
        hinted.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&hinted).unwrap();
    valid(&bytes);
    let core = pepper_wasm::component::Unit::parse(&bytes).unwrap().core;
    let has_hints = wasmparser::Parser::new(0).parse_all(&core).any(|p| {
        matches!(p, Ok(wasmparser::Payload::CustomSection(c)) if c.name() == "metadata.code.branch_hint")
    });
    assert!(has_hints, "the program's module carries the hints");
}

#[test]
fn a_nested_component_is_refused_with_a_message() {
    let f = unique_path("nested.component.wat");
    std::fs::write(&f, "(component (component (core module)))").unwrap();
    let out = pepper(&["run", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("nests a component"), "{err}");
}
