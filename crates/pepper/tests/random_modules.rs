//! The rewriter against random modules (wasm-smith): whatever a generator of valid
//! WebAssembly produces, every instrumented module must validate without the rewriter's
//! safety net (no function left uninstrumented because its rewrite was invalid), behave
//! exactly like the original (results, traps, exported memories and globals after every
//! call), and yield a profile without panicking, also after traps. When no call trapped,
//! the exact modes must agree with each other: exact-edges' counted edges equal the edge
//! profile derived from exact paths, and PEP recording every path end in the guest
//! (`every 1`) and targeted mode without a guide count exactly exact-paths' paths.
//!
//! Hand-written fixtures cover what we thought of; this covers what a generator finds:
//! unreachable code (stack-polymorphic operators), labels carrying values to every kind of
//! branch, multi-value blocks, tail calls, tables, several memories.

mod common;
#[path = "random_modules/damaged.rs"]
mod damaged;
#[path = "random_modules/modules.rs"]
mod modules;
use common::paths_by_key;
use modules::*;
use pepper_profile::{Mode, Profile};
use pepper_wasm::switch::SwitchPlacement;
use pepper_wasm::{ContextMode, InstrumentOptions, RunOutcome};
use std::collections::HashMap;
use wasmtime::{Engine, Extern, Instance, Module, Store, Val, ValType};

/// How many random modules one test run checks (each in every variant).
const MODULES: u64 = 240;

/// Seeds that once failed (a fuzzing campaign found them), checked on every run.
const REGRESSIONS: [u64; 5] = [
    // `--switch loops`/`all`: a forced `if` condition of 2 and'ed with 1 took the else arm.
    7824, 9461,
    // Recursion that overflows the original's stack: an instrumented module overflows at a
    // shallower depth (see `assert_same`).
    210790,
    // Ephemeral windows always on missed a function called only from one left without
    // copies (a `try_table`): its clean code had no entry check.
    1135, 1283,
];

/// The seeds one run covers: `PEPPER_RANDOM_SEEDS=START..END` runs a longer campaign (a
/// fuzzing run), CI the first [`MODULES`] and the [`REGRESSIONS`].
fn seeds() -> Vec<u64> {
    std::env::var("PEPPER_RANDOM_SEEDS")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once("..")?;
            Some((a.parse().ok()?..b.parse().ok()?).collect())
        })
        .unwrap_or_else(|| (0..MODULES).chain(REGRESSIONS).collect())
}
/// The burst limit of the "limited" variant: a ring head most runs pass.
const LIMIT: u32 = 40;

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Checks the count of every direct `call` to an instrumented function (read from its own
/// counter or from the one it shares, `counted_at`) against the calls the exact tree
/// counted in the callee's contexts under that site; returns how many such sites ran and
/// counted in another's counter.
fn site_calls_match_tree(p: &Profile, wasm: &[u8], counted_at: &[u32], seed: u64) -> usize {
    let contexts = p.contexts.as_ref().expect("exact contexts");
    // A direct call (`call`, not `return_call`, which replaces its caller's context)
    // enters its callee's context under the site; whatever that callee tail-calls enters
    // another context under the same site.
    let mut in_tree = vec![0u64; contexts.call_sites.len()];
    for n in &contexts.nodes {
        if let Some(s) = n
            .site
            .filter(|&s| contexts.call_sites[s as usize].callee == Some(n.func))
        {
            in_tree[s as usize] += n.calls;
        }
    }
    let mut shared = 0;
    // Only instrumented functions enter contexts of their own.
    let call = |s: &&pepper_profile::CallSite| wasm[s.offset as usize] == 0x10;
    let instrumented: std::collections::HashSet<u32> = p
        .functions
        .iter()
        .filter(|f| f.instrumented)
        .map(|f| f.index)
        .collect();
    let sites = contexts.call_sites.iter();
    for s in sites.filter(call) {
        if !s.callee.is_some_and(|f| instrumented.contains(&f)) {
            continue;
        }
        assert_eq!(
            s.calls, in_tree[s.id as usize],
            "seed {seed}: call site {} counted differently from the exact tree",
            s.id
        );
        shared += usize::from(s.calls > 0 && counted_at[s.id as usize] != s.id);
    }
    shared
}

fn branch_counts(p: &Profile) -> Vec<(u32, u64, Vec<u64>)> {
    p.branches
        .iter()
        .map(|b| (b.func, b.offset, b.counts.clone()))
        .collect()
}

#[test]
fn random_modules_behave_identically_and_profile_consistently() {
    let engine = pepper_runtime::engine(&Default::default()).unwrap();
    let hinting =
        pepper_runtime::engine(&pepper_runtime::EngineOptions::default().with_branch_hints(true))
            .unwrap();
    let mut hinted_modules = 0;
    let mut swapped_ifs = 0;
    let mut inlined_sites = 0;
    let variants: Vec<(&str, InstrumentOptions)> = vec![
        ("exact-paths", InstrumentOptions::default()),
        (
            // Every function hashed through a two-entry cache: evictions all the time.
            "exact-paths hashed",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.array_max_paths = 0;
                instrument.hash_cache_log2 = 1;
                instrument
            },
        ),
        ("exact-edges", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::ExactEdges;
            instrument
        }),
        ("pep every 1", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::Pep;
            instrument.pep_every = Some(1);
            instrument
        }),
        ("pep every 1, switch all, always on", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::Pep;
            instrument.pep_every = Some(1);
            instrument.switch = Some(SwitchPlacement::All);
            instrument
        }),
        (
            // Copies change at random checks: entries, every loop header, mid-burst,
            // inside calls, around traps and exceptions.
            "pep every 1, switch all, random",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Pep;
                instrument.pep_every = Some(1);
                instrument.switch = Some(SwitchPlacement::All);
                instrument.switch_chaos = true;
                instrument
            },
        ),
        ("pep ring, switch loops at random, native contexts", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::Pep;
            instrument.contexts = ContextMode::Native;
            instrument.switch = Some(SwitchPlacement::Loops);
            instrument.switch_chaos = true;
            instrument
        }),
        (
            // Copies enter and leave at inner loops too.
            "pep every 1, switch shallow at random",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Pep;
                instrument.pep_every = Some(1);
                instrument.switch = Some(SwitchPlacement::Shallow);
                instrument.switch_chaos = true;
                instrument
            },
        ),
        (
            // Copies enter and leave at loops behind up to eight constructs.
            "pep every 1, switch deep at random",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Pep;
                instrument.pep_every = Some(1);
                instrument.switch = Some(SwitchPlacement::Deep);
                instrument.switch_chaos = true;
                instrument
            },
        ),
        (
            // A burst that ends in the guest: on from the start, off once the ring head
            // has passed its limit.
            "pep ring, switch outer, limited",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Pep;
                instrument.switch = Some(SwitchPlacement::Outer);
                instrument
            },
        ),
        (
            // Clean code checks outermost headers only; the instrumented copy leaves at
            // inner ones, into clean code entered there.
            "pep every 1, switch outer at random",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Pep;
                instrument.pep_every = Some(1);
                instrument.switch = Some(SwitchPlacement::Outer);
                instrument.switch_chaos = true;
                instrument
            },
        ),
        (
            // Clean code never armed: header counts in locals for call-free loops.
            "ephemeral",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Ephemeral;
                instrument.ephemeral_windows = false;
                instrument
            },
        ),
        (
            // Copies change at random checks, flushing register header counts.
            "ephemeral, random",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Ephemeral;
                instrument.ephemeral_windows = false;
                instrument.switch_chaos = true;
                instrument
            },
        ),
        (
            // Windows: one flag, set before any call and never cleared, so every function
            // runs its instrumented copy all along.
            "ephemeral windows, always on",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Ephemeral;
                instrument.ephemeral_windows = true;
                instrument
            },
        ),
        ("ephemeral windows, random", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::Ephemeral;
            instrument.ephemeral_windows = true;
            instrument.switch_chaos = true;
            instrument
        }),
        (
            // Copies enter and leave at inner loops too.
            "ephemeral windows at shallow, random",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Ephemeral;
                instrument.ephemeral_windows = true;
                instrument.switch = Some(SwitchPlacement::Shallow);
                instrument.switch_chaos = true;
                instrument
            },
        ),
        (
            // Copies entered at loop nests behind many blocks, left into `F_resume`.
            "ephemeral windows at deep, random",
            {
                let mut instrument = InstrumentOptions::default();
                instrument.mode = Mode::Ephemeral;
                instrument.ephemeral_windows = true;
                instrument.switch = Some(SwitchPlacement::Deep);
                instrument.switch_chaos = true;
                instrument
            },
        ),
        ("pep ring, native contexts with call log", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::Pep;
            instrument.contexts = ContextMode::Native;
            instrument.call_log_log2 = Some(6);
            instrument
        }),
        ("targeted, no guide", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::Targeted;
            instrument.obvious = true;
            instrument
        }),
        ("none, shadow stack", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::None;
            instrument.contexts = ContextMode::Sampled;
            instrument
        }),
        ("none, exact contexts", {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::None;
            instrument.contexts = ContextMode::Exact;
            instrument
        }),
    ];
    let (mut checked, mut compared, mut calls) = (0, 0, 0);
    let (mut executions, mut paths, mut given) = (0, 0, 0);
    let mut shared_sites = 0;
    let mut switched = 0;
    let mut switch_hints = 0;
    let mut limited_ended = 0;
    let mut nest_entries = 0;
    let mut low_addresses = 0;
    let mut edge_windows = 0;
    for seed in seeds() {
        let Some(wasm) = random_module(seed) else {
            continue;
        };
        // `PEPPER_RANDOM_DUMP=DIR` keeps every module, to look at a failing seed.
        if let Some(dir) = std::env::var_os("PEPPER_RANDOM_DUMP") {
            std::fs::write(
                std::path::Path::new(&dir).join(format!("seed-{seed}.wasm")),
                &wasm,
            )
            .unwrap();
        }
        let observed = exports(&wasm);
        let funcs: Vec<String> = observed
            .iter()
            .filter(|(_, k, _)| *k == wasmparser::ExternalKind::Func)
            .map(|(n, _, _)| n.clone())
            .collect();
        let Ok(m) = Module::new(&engine, &wasm) else {
            continue; // a proposal this engine does not enable
        };
        let funcs: Vec<String> = funcs
            .into_iter()
            .filter(|n| {
                let ty = m.get_export(n).and_then(|e| e.func().cloned()).unwrap();
                let callable = ty.params().all(|t| zero(&t).is_some());
                callable
            })
            .collect();
        let Ok((original, _)) = run(&engine, &wasm, &funcs, &observed, None) else {
            continue; // instantiation traps (an active segment out of bounds)
        };
        checked += 1;
        calls += funcs.len();
        nest_entries += usize::from(has_nest_entries(&wasm));
        low_addresses += usize::from(touches_address_zero(&wasm));
        let trapped = original
            .iter()
            .any(|o| !matches!(o.outcome, Outcome::Returned(_)));
        let mut profiles: HashMap<&str, Profile> = HashMap::new();
        let mut counted_at = Vec::new();
        for (label, opts) in &variants {
            let inst = pepper_wasm::instrument(&wasm, opts)
                .unwrap_or_else(|e| panic!("seed {seed}, {label}: {e}"));
            for w in &inst.plan.warnings {
                assert!(
                    !w.contains("internal rewriter error"),
                    "seed {seed}, {label}: {w}"
                );
            }
            // "always on": the flag is set before any call, so the instrumented copies
            // run everything; "limited": until the ring head passes 40, then the
            // instrumented copies clear the flag at their next outermost check.
            let flag = inst.plan.layout.switch_flag;
            let switch_on = if label.ends_with("always on") {
                Some((flag, 0))
            } else if label.ends_with("limited") {
                Some((flag, LIMIT))
            } else {
                None
            };
            // The switch's checks are hinted unlikely, every hint on an `if`.
            let hints = pepper_wasm::hints::read(&inst.wasm)
                .unwrap_or_else(|e| panic!("seed {seed}, {label}: {e}"));
            assert_eq!(hints.len(), inst.plan.switch_hints, "seed {seed}, {label}");
            assert!(hints.iter().all(|h| !h.likely), "seed {seed}, {label}");
            switch_hints += hints.len();
            let engine = match inst.wants_branch_hinting() {
                true => &hinting,
                false => &engine,
            };
            let (got, counters) = run(engine, &inst.wasm, &funcs, &observed, switch_on)
                .unwrap_or_else(|e| panic!("seed {seed}, {label}: {e}"));
            assert_same(&got, &original, &format!("seed {seed}, {label}"));
            if let (Some((at, LIMIT)), Some(c)) = (switch_on, &counters) {
                // The guest itself ended the burst (the flag is clear).
                let word = |a: u32| u32::from_le_bytes(c[a as usize..][..4].try_into().unwrap());
                limited_ended += (word(at) == 0) as usize;
            }
            if *label == "exact-paths" {
                in_a_component(seed, &wasm, &inst.wasm);
            }
            if *label == "none, exact contexts" {
                counted_at = inst.plan.counted_at.clone();
            }
            let outcome = RunOutcome {
                module: pepper_profile::ModuleInfo {
                    path: format!("seed-{seed}.wasm"),
                    sha256: String::new(),
                    size: wasm.len() as u64,
                },
                run: Default::default(),
                warnings: Vec::new(),
                sampling: None,
                contexts: None,
                window_groups: Vec::new(),
            };
            if opts.mode == Mode::ExactEdges && !trapped {
                given += inst.plan.given_entries.order.len();
            }
            let profile = inst.plan.profile(counters.as_deref(), outcome, &|_| None);
            profiles.insert(label, profile);
        }
        // Path modes count completed paths only, so they agree even when a call trapped.
        let exact = &profiles["exact-paths"];
        // Hints from the exact profile (every executed if/br_if, either way) change
        // nothing a program does, compiled with hints on; instrumenting the hinted module
        // keeps only hints that still point at an if/br_if.
        let every = {
            let mut hint = pepper_wasm::hints::HintOptions::default();
            hint.min_bias = 0.5;
            hint.min_count = 1;
            hint.unlikely_br_if = true;
            hint
        };
        let (hints, _) = pepper_wasm::hints::choose(&wasm, &exact.branches, &every)
            .unwrap_or_else(|e| panic!("seed {seed}: hints: {e}"));
        let hinted = pepper_wasm::hints::write(&wasm, &hints).unwrap();
        assert_eq!(
            pepper_wasm::hints::read(&hinted).unwrap(),
            hints,
            "seed {seed}"
        );
        let (got, _) = run(&hinting, &hinted, &funcs, &observed, None)
            .unwrap_or_else(|e| panic!("seed {seed}, hinted: {e}"));
        assert_same(&got, &original, &format!("seed {seed}, hinted"));
        // Swapping the arms of unlikely ifs changes no behaviour either, and the hints
        // that move with their instructions still point at ifs and br_ifs.
        let (laid, moved, layout) = pepper_wasm::hints::lay_out(&wasm, &hints)
            .unwrap_or_else(|e| panic!("seed {seed}: layout: {e}"));
        let laid = pepper_wasm::hints::write(&laid, &moved).unwrap();
        assert_eq!(pepper_wasm::hints::read(&laid).unwrap().len(), hints.len());
        let (got, _) = run(&hinting, &laid, &funcs, &observed, None)
            .unwrap_or_else(|e| panic!("seed {seed}, laid out: {e}"));
        assert_same(&got, &original, &format!("seed {seed}, if arms swapped"));
        swapped_ifs += layout.swapped;
        // Inlining every direct call site changes no behaviour, and the hints, moved and
        // copied into the inlined bodies, still point at ifs and br_ifs.
        let everything = {
            let mut inline_ = pepper_wasm::inline::InlineOptions::default();
            inline_.min_share = 0.0;
            inline_.min_calls = 0;
            inline_.max_callee_bytes = usize::MAX;
            inline_.max_growth = f64::INFINITY;
            inline_
        };
        let (inlined, moved, summary) =
            pepper_wasm::inline::inline(&wasm, &direct_calls(&wasm), &hints, &everything)
                .unwrap_or_else(|e| panic!("seed {seed}: inline: {e}"));
        let inlined = pepper_wasm::hints::write(&inlined, &moved).unwrap();
        assert_eq!(
            pepper_wasm::hints::read(&inlined).unwrap().len(),
            moved.len()
        );
        let (got, _) = run(&hinting, &inlined, &funcs, &observed, None)
            .unwrap_or_else(|e| panic!("seed {seed}, inlined: {e}"));
        assert_same(&got, &original, &format!("seed {seed}, inlined"));
        inlined_sites += summary.inlined;
        // The input's hints and the switch's checks' go into one section.
        let switched_opts = {
            let mut instrument = InstrumentOptions::default();
            instrument.mode = Mode::Pep;
            instrument.switch = Some(SwitchPlacement::Outer);
            instrument
        };
        for opts in [&InstrumentOptions::default(), &switched_opts] {
            let inst = pepper_wasm::instrument(&hinted, opts).unwrap();
            let kept = pepper_wasm::hints::read(&inst.wasm).unwrap_or_else(|e| {
                panic!("seed {seed}: stale hint in an instrumented module: {e}")
            });
            assert!(kept.len() >= inst.plan.switch_hints, "seed {seed}");
            let (got, _) = run(&hinting, &inst.wasm, &funcs, &observed, None)
                .unwrap_or_else(|e| panic!("seed {seed}, hinted and instrumented: {e}"));
            assert_same(
                &got,
                &original,
                &format!("seed {seed}, hinted, instrumented"),
            );
        }
        hinted_modules += usize::from(!hints.is_empty());
        executions += exact.branches.iter().flat_map(|b| &b.counts).sum::<u64>();
        paths += exact.paths.len();
        for label in [
            "exact-paths hashed",
            "pep every 1",
            "pep every 1, switch all, always on",
            "targeted, no guide",
        ] {
            // Obvious paths (TPP §4.2) count at their defining edge, so a call that traps
            // between that edge and the path's end (out of fuel, say) counts a path that
            // never completed; exact paths count at the end. Only trap-free modules agree.
            if label.starts_with("targeted") && trapped {
                continue;
            }
            assert_eq!(
                paths_by_key(&profiles[label]),
                paths_by_key(exact),
                "seed {seed}: {label} paths differ from exact-paths"
            );
            assert_eq!(
                branch_counts(&profiles[label]),
                branch_counts(exact),
                "seed {seed}: {label} edges differ from exact-paths"
            );
        }
        // A window over the whole run records every branch outcome where no call trapped.
        if !trapped {
            assert_eq!(
                branch_counts(&profiles["ephemeral windows, always on"]),
                branch_counts(exact),
                "seed {seed}: ephemeral windows always on differ from exact-paths"
            );
        }
        // Windows switched at random points record part of the run, never more (where no
        // call trapped: edges count what a trap interrupted too), their entries and leaves
        // closing the flow.
        let exact_counts: HashMap<(u32, u64), Vec<u64>> = branch_counts(exact)
            .into_iter()
            .map(|(f, o, c)| ((f, o), c))
            .collect();
        for label in [
            "ephemeral windows, random",
            "ephemeral windows at shallow, random",
            "ephemeral windows at deep, random",
        ] {
            if trapped {
                continue;
            }
            let edges = branch_counts(&profiles[label]);
            edge_windows += usize::from(edges.iter().flat_map(|e| &e.2).any(|&c| c > 0));
            for (f, o, c) in edges {
                let e = &exact_counts[&(f, o)];
                assert!(
                    c.iter().zip(e).all(|(c, e)| c <= e),
                    "seed {seed}: {label} recorded more than ran at function {f}, \
                     offset {o}: {c:?} against {e:?}"
                );
            }
        }
        // Random switching ran both copies: some path ends counted, not all of them.
        let total = |p: &Profile| p.paths.iter().map(|p| p.count).sum::<u64>();
        let random = total(&profiles["pep every 1, switch all, random"]);
        switched += (random > 0 && random < total(exact)) as usize;
        // Edge counters count what a trap interrupted too; without traps they must agree.
        if !trapped {
            compared += 1;
            // Sites that share their node's first counter count what the exact tree
            // counts for them.
            let exact_contexts = &profiles["none, exact contexts"];
            shared_sites += site_calls_match_tree(exact_contexts, &wasm, &counted_at, seed);
            assert_eq!(
                branch_counts(&profiles["exact-edges"]),
                branch_counts(exact),
                "seed {seed}: exact-edges counts differ from the edges of exact paths"
            );
        }
    }
    eprintln!(
        "{checked} modules, {calls} calls, {executions} branch executions, {paths} distinct \
         paths; {compared} modules without traps, {given} functions in them with entries \
         from callers; {shared_sites} called sites sharing a counter; {switched} modules ran both switchable copies; {limited_ended} ended a \
         burst at its limit; {edge_windows} random windows counted edges; \
         {switch_hints} switch checks hinted; {hinted_modules} \
         modules hinted, {swapped_ifs} if arms swapped, {inlined_sites} call sites inlined"
    );
    // What the seeds exercised. A campaign's chunk (`PEPPER_RANDOM_SEEDS`) of a few
    // hundred modules may miss a rare shape; CI's seeds must not.
    let custom = std::env::var_os("PEPPER_RANDOM_SEEDS").is_some();
    let covered = |ok: bool, what: &str| {
        assert!(ok || custom, "{what}");
        if !ok {
            eprintln!("not in these seeds: {what}");
        }
    };
    covered(inlined_sites > 0, "no random module had a call to inline");
    covered(shared_sites > 0, "no called site shared its node's counter");
    covered(switch_hints > 0, "no switch check was hinted");
    covered(hinted_modules > 0, "no random module got a hint");
    covered(
        swapped_ifs > 0,
        "no random module had an unlikely if with an else",
    );
    covered(
        nest_entries > 0,
        "no random module had a check that only enters the instrumented copy",
    );
    covered(
        low_addresses > 0,
        "no random module that ran wrote address 0 at its entries",
    );
    // The generator must actually exercise the rewriter: most seeds give a module that
    // runs, and a fair share of them run without trapping.
    assert!(checked >= seeds().len() / 2, "only {checked} modules ran");
    assert!(
        compared >= seeds().len() / 8,
        "only {compared} ran trap-free"
    );
    assert!(
        switched >= seeds().len() / 8,
        "random switching ran both copies in only {switched} modules"
    );
    assert!(
        limited_ended > 0,
        "no instrumented copy ended a burst at its limit"
    );
}

/// The component variant: the module inside a component comes out whole, and the
/// component around its instrumented copy validates with that copy inside.
fn in_a_component(seed: u64, wasm: &[u8], instrumented: &[u8]) {
    let mut component = wasm_encoder::Component::new();
    component.section(&wasm_encoder::RawSection { id: 1, data: wasm });
    let bytes = component.finish();
    let unit = pepper_wasm::component::Unit::parse(&bytes)
        .unwrap_or_else(|e| panic!("seed {seed}, component: {e}"));
    assert_eq!(
        unit.core, wasm,
        "seed {seed}: the module out of its component"
    );
    let wrapped = unit.wrap(instrumented);
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&wrapped)
        .unwrap_or_else(|e| panic!("seed {seed}, instrumented in a component: {e}"));
    let back = pepper_wasm::component::Unit::parse(&wrapped).unwrap();
    assert_eq!(
        back.core, instrumented,
        "seed {seed}: the instrumented module back out"
    );
}

/// Whether some function of `wasm` starts as `with_low_address_traffic` makes it start.
fn touches_address_zero(wasm: &[u8]) -> bool {
    use wasmparser::Operator as O;
    let facts = pepper_wasm::module::ModuleFacts::parse(wasm).unwrap();
    facts.bodies.iter().any(|body| {
        let Ok(mut ops) = body.get_operators_reader() else {
            return false;
        };
        let mut first = || ops.read().ok();
        matches!(
            (first(), first(), first()),
            (
                Some(O::I32Const { value: 0 } | O::I64Const { value: 0 }),
                Some(O::I32Const { value: 0 } | O::I64Const { value: 0 }),
                Some(O::I32Load { .. })
            )
        )
    })
}

/// Whether some function of `wasm` has a loop nest that `shallow` checks only to enter the
/// instrumented copy (past its detour limit).
fn has_nest_entries(wasm: &[u8]) -> bool {
    let p = SwitchPlacement::Shallow;
    pepper_wasm::switch::shapes(wasm).is_ok_and(|shapes| {
        (shapes.iter()).any(|s| s.targets(p).into_iter().any(|k| s.enters_only(p, k)))
    })
}
