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

/// The rewriter's options for each variant the tests run, by its label. A label ending in
/// "always on" runs with the switch flag set before any call, one ending in "limited" with
/// the flag set and the burst limit [`LIMIT`] (see [`run_variant`]); "random" ones switch
/// copies at random checks (`switch_chaos`), with no host involved.
fn variant(label: &str) -> InstrumentOptions {
    let mut o = InstrumentOptions::default();
    let pep = |o: &mut InstrumentOptions, every: Option<u32>, switch| {
        o.mode = Mode::Pep;
        o.pep_every = every;
        o.switch = switch;
    };
    let windows = |o: &mut InstrumentOptions, windows: bool, switch| {
        o.mode = Mode::Ephemeral;
        o.ephemeral_windows = windows;
        o.switch = switch;
    };
    use SwitchPlacement as P;
    match label {
        "exact-paths" => {}
        // Every function hashed through a two-entry cache: evictions all the time.
        "exact-paths hashed" => {
            o.array_max_paths = 0;
            o.hash_cache_log2 = 1;
        }
        "exact-edges" => o.mode = Mode::ExactEdges,
        "pep every 1" => pep(&mut o, Some(1), None),
        "pep every 1, switch all, always on" => pep(&mut o, Some(1), Some(P::All)),
        // Copies change at random checks: entries, every loop header, mid-burst, inside
        // calls, around traps and exceptions.
        "pep every 1, switch all, random" => pep(&mut o, Some(1), Some(P::All)),
        "pep ring, switch loops at random, native contexts" => {
            pep(&mut o, None, Some(P::Loops));
            o.contexts = ContextMode::Native;
        }
        // Copies enter and leave at inner loops too.
        "pep every 1, switch shallow at random" => pep(&mut o, Some(1), Some(P::Shallow)),
        // Copies enter and leave at loops behind up to eight constructs.
        "pep every 1, switch deep at random" => pep(&mut o, Some(1), Some(P::Deep)),
        // A burst that ends in the guest: on from the start, off once the ring head has
        // passed its limit.
        "pep ring, switch outer, limited" => pep(&mut o, None, Some(P::Outer)),
        // Clean code checks outermost headers only; the instrumented copy leaves at inner
        // ones, into clean code entered there.
        "pep every 1, switch outer at random" => pep(&mut o, Some(1), Some(P::Outer)),
        // Budgets, clean code never armed: header counts in locals for call-free loops.
        "ephemeral" => windows(&mut o, false, None),
        // Copies change at random checks, flushing register header counts.
        "ephemeral, random" => windows(&mut o, false, None),
        // Windows: one flag, set before any call and never cleared, so every function runs
        // its instrumented copy all along.
        "ephemeral windows, always on" => windows(&mut o, true, None),
        "ephemeral windows, random" => windows(&mut o, true, None),
        // Copies enter and leave at inner loops too.
        "ephemeral windows at shallow, random" => windows(&mut o, true, Some(P::Shallow)),
        // Copies entered at loop nests behind many blocks, left into `F_resume`.
        "ephemeral windows at deep, random" => windows(&mut o, true, Some(P::Deep)),
        "pep ring, native contexts with call log" => {
            pep(&mut o, None, None);
            o.contexts = ContextMode::Native;
            o.call_log_log2 = Some(6);
        }
        "targeted, no guide" => {
            o.mode = Mode::Targeted;
            o.obvious = true;
        }
        "none, shadow stack" => {
            o.mode = Mode::None;
            o.contexts = ContextMode::Sampled;
        }
        "none, exact contexts" => {
            o.mode = Mode::None;
            o.contexts = ContextMode::Exact;
        }
        _ => panic!("no variant {label:?}"),
    }
    o.switch_chaos = label.contains("random");
    o
}

/// Engines for the runs: a plain one, and one that reads branch hints (for hinted modules
/// and for modules whose switch checks are hinted).
struct Engines {
    plain: Engine,
    hinting: Engine,
}

impl Engines {
    fn new() -> Engines {
        let hints = pepper_runtime::EngineOptions::default().with_branch_hints(true);
        Engines {
            plain: pepper_runtime::engine(&Default::default()).unwrap(),
            hinting: pepper_runtime::engine(&hints).unwrap(),
        }
    }
}

/// A random module that instantiates and runs, with what it did uninstrumented.
struct Case {
    seed: u64,
    wasm: Vec<u8>,
    /// The exports watched after every call.
    observed: Vec<(String, wasmparser::ExternalKind, u32)>,
    /// The exported functions that can be called (with zeros), called in turn.
    funcs: Vec<String>,
    original: Vec<Observed>,
    /// Some call trapped: edge counters then count what the trap interrupted, and path
    /// counters only what completed.
    trapped: bool,
}

/// The seeds' modules that run, each run once uninstrumented. Most seeds must give one.
fn cases(engines: &Engines) -> Vec<Case> {
    let seeds = seeds();
    let mut out = Vec::new();
    for &seed in &seeds {
        let Some(wasm) = random_module(seed) else {
            continue;
        };
        // `PEPPER_RANDOM_DUMP=DIR` keeps every module, to look at a failing seed.
        if let Some(dir) = std::env::var_os("PEPPER_RANDOM_DUMP") {
            let path = std::path::Path::new(&dir).join(format!("seed-{seed}.wasm"));
            std::fs::write(path, &wasm).unwrap();
        }
        let observed = exports(&wasm);
        let Ok(m) = Module::new(&engines.plain, &wasm) else {
            continue; // a proposal this engine does not enable
        };
        let funcs: Vec<String> = observed
            .iter()
            .filter(|(_, k, _)| *k == wasmparser::ExternalKind::Func)
            .map(|(n, _, _)| n.clone())
            .filter(|n| {
                let ty = m.get_export(n).and_then(|e| e.func().cloned()).unwrap();
                let callable = ty.params().all(|t| zero(&t).is_some());
                callable
            })
            .collect();
        let Ok((original, _)) = run(&engines.plain, &wasm, &funcs, &observed, None) else {
            continue; // instantiation traps (an active segment out of bounds)
        };
        let trapped = original
            .iter()
            .any(|o| !matches!(o.outcome, Outcome::Returned(_)));
        out.push(Case {
            seed,
            wasm,
            observed,
            funcs,
            original,
            trapped,
        });
    }
    // The generator must actually exercise the rewriter: most seeds give a module that
    // runs.
    assert!(
        out.len() >= seeds.len() / 2,
        "only {} modules ran",
        out.len()
    );
    out
}

/// One variant's run of a case.
struct Ran {
    inst: pepper_wasm::Instrumented,
    /// pepper's memory after the run.
    counters: Option<Vec<u8>>,
    profile: Profile,
}

/// Instruments `case` as the variant `label` says and runs it: the rewriter needed no
/// safety net, the switch's checks are hinted unlikely, and the module behaves as the
/// original did (results, traps, exports after every call). Its profile decodes.
fn run_variant(engines: &Engines, case: &Case, label: &str) -> Ran {
    let seed = case.seed;
    let inst = pepper_wasm::instrument(&case.wasm, &variant(label))
        .unwrap_or_else(|e| panic!("seed {seed}, {label}: {e}"));
    for w in &inst.plan.warnings {
        assert!(
            !w.contains("internal rewriter error"),
            "seed {seed}, {label}: {w}"
        );
    }
    // "always on": the flag is set before any call, so the instrumented copies run
    // everything; "limited": until the ring head passes the limit, then the instrumented
    // copies clear the flag at their next outermost check.
    let flag = inst.plan.layout.switch_flag;
    let switch_on = if label.ends_with("always on") {
        Some((flag, 0))
    } else if label.ends_with("limited") {
        Some((flag, LIMIT))
    } else {
        None
    };
    let hints = pepper_wasm::hints::read(&inst.wasm)
        .unwrap_or_else(|e| panic!("seed {seed}, {label}: {e}"));
    assert_eq!(hints.len(), inst.plan.switch_hints, "seed {seed}, {label}");
    assert!(hints.iter().all(|h| !h.likely), "seed {seed}, {label}");
    let engine = match inst.wants_branch_hinting() {
        true => &engines.hinting,
        false => &engines.plain,
    };
    let (got, counters) = run(engine, &inst.wasm, &case.funcs, &case.observed, switch_on)
        .unwrap_or_else(|e| panic!("seed {seed}, {label}: {e}"));
    assert_same(&got, &case.original, &format!("seed {seed}, {label}"));
    let outcome = RunOutcome {
        module: pepper_profile::ModuleInfo {
            path: format!("seed-{seed}.wasm"),
            sha256: String::new(),
            size: case.wasm.len() as u64,
        },
        run: Default::default(),
        warnings: Vec::new(),
        sampling: None,
        contexts: None,
        window_groups: Vec::new(),
    };
    let profile = inst.plan.profile(counters.as_deref(), outcome, &|_| None);
    Ran {
        inst,
        counters,
        profile,
    }
}

/// Runs every variant of `labels` on `case`.
fn run_variants<'l>(engines: &Engines, case: &Case, labels: &[&'l str]) -> HashMap<&'l str, Ran> {
    (labels.iter())
        .map(|&label| (label, run_variant(engines, case, label)))
        .collect()
}

/// Whether the seeds exercised `what`. A campaign's chunk (`PEPPER_RANDOM_SEEDS`) of a
/// few hundred modules may miss a rare shape; CI's seeds must not.
fn covered(ok: bool, what: &str) {
    let custom = std::env::var_os("PEPPER_RANDOM_SEEDS").is_some();
    assert!(ok || custom, "{what}");
    if !ok {
        eprintln!("not in these seeds: {what}");
    }
}

/// The exact modes, and the sampled ones made to record every path end, count exactly
/// what exact paths count (paths only where they complete, so edges only where no call
/// trapped).
#[test]
fn exact_modes_behave_identically_and_count_the_same() {
    let engines = Engines::new();
    let (mut compared, mut given, mut executions, mut paths) = (0, 0, 0, 0);
    for case in cases(&engines) {
        let seed = case.seed;
        let ran = run_variants(
            &engines,
            &case,
            &[
                "exact-paths",
                "exact-paths hashed",
                "exact-edges",
                "pep every 1",
                "pep every 1, switch all, always on",
                "targeted, no guide",
                "ephemeral windows, always on",
            ],
        );
        let exact = &ran["exact-paths"].profile;
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
            if label.starts_with("targeted") && case.trapped {
                continue;
            }
            let p = &ran[label].profile;
            assert_eq!(
                paths_by_key(p),
                paths_by_key(exact),
                "seed {seed}: {label} paths differ from exact-paths"
            );
            assert_eq!(
                branch_counts(p),
                branch_counts(exact),
                "seed {seed}: {label} edges differ from exact-paths"
            );
        }
        // Edge counters count what a trap interrupted too; without traps they agree, and
        // a window over the whole run records every branch outcome.
        if !case.trapped {
            compared += 1;
            given += ran["exact-edges"].inst.plan.given_entries.order.len();
            for label in ["exact-edges", "ephemeral windows, always on"] {
                assert_eq!(
                    branch_counts(&ran[label].profile),
                    branch_counts(exact),
                    "seed {seed}: {label} counts differ from the edges of exact paths"
                );
            }
        }
    }
    eprintln!(
        "{executions} branch executions, {paths} distinct paths; {compared} modules without \
         traps, {given} functions in them with entries from callers"
    );
    assert!(
        compared >= seeds().len() / 8,
        "only {compared} ran trap-free"
    );
}

/// Copies switched at random checks, and bursts the guest ends itself, behave as the
/// original; windows record part of the run, never more, their entries and leaves closing
/// the flow.
#[test]
fn switching_copies_at_random_behaves_identically_and_records_part_of_the_run() {
    let engines = Engines::new();
    let (mut switched, mut limited_ended, mut edge_windows, mut switch_hints) = (0, 0, 0, 0);
    let (mut nest_entries, mut low_addresses) = (0, 0);
    let windows = [
        "ephemeral windows, random",
        "ephemeral windows at shallow, random",
        "ephemeral windows at deep, random",
    ];
    let mut labels = vec![
        "exact-paths",
        "pep every 1, switch all, random",
        "pep ring, switch loops at random, native contexts",
        "pep every 1, switch shallow at random",
        "pep every 1, switch deep at random",
        "pep ring, switch outer, limited",
        "pep every 1, switch outer at random",
        "ephemeral",
        "ephemeral, random",
    ];
    labels.extend(windows);
    for case in cases(&engines) {
        let seed = case.seed;
        nest_entries += usize::from(has_nest_entries(&case.wasm));
        low_addresses += usize::from(touches_address_zero(&case.wasm));
        let ran = run_variants(&engines, &case, &labels);
        switch_hints += ran
            .values()
            .map(|r| r.inst.plan.switch_hints)
            .sum::<usize>();
        // The guest itself ended the limited burst: the flag is clear.
        let limited = &ran["pep ring, switch outer, limited"];
        if let Some(c) = &limited.counters {
            let at = limited.inst.plan.layout.switch_flag as usize;
            limited_ended += usize::from(c[at..at + 4] == [0; 4]);
        }
        let exact = &ran["exact-paths"].profile;
        // Random switching ran both copies: some path ends counted, not all of them.
        let total = |p: &Profile| p.paths.iter().map(|p| p.count).sum::<u64>();
        let random = total(&ran["pep every 1, switch all, random"].profile);
        switched += usize::from(random > 0 && random < total(exact));
        // Edges count what a trap interrupted too: compare where no call trapped.
        if case.trapped {
            continue;
        }
        let exact_counts: HashMap<(u32, u64), Vec<u64>> = branch_counts(exact)
            .into_iter()
            .map(|(f, o, c)| ((f, o), c))
            .collect();
        for label in windows {
            let edges = branch_counts(&ran[label].profile);
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
    }
    eprintln!(
        "{switched} modules ran both switchable copies; {limited_ended} ended a burst at its \
         limit; {edge_windows} random windows counted edges; {switch_hints} switch checks \
         hinted"
    );
    covered(switch_hints > 0, "no switch check was hinted");
    covered(
        nest_entries > 0,
        "no random module had a check that only enters the instrumented copy",
    );
    covered(
        low_addresses > 0,
        "no random module that ran wrote address 0 at its entries",
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

/// Calling contexts (shadow stacks, call logs, the exact tree) change no behaviour, and a
/// call site that shares its node's counter counts what the exact tree counts for it.
#[test]
fn contexts_behave_identically_and_call_sites_count_what_the_tree_counts() {
    let engines = Engines::new();
    let (mut calls, mut shared_sites) = (0, 0);
    for case in cases(&engines) {
        calls += case.funcs.len();
        let ran = run_variants(
            &engines,
            &case,
            &[
                "none, shadow stack",
                "none, exact contexts",
                "pep ring, native contexts with call log",
            ],
        );
        // Call counters count what a trap interrupted too: compare where none did.
        if !case.trapped {
            let exact = &ran["none, exact contexts"];
            let counted_at = &exact.inst.plan.counted_at;
            shared_sites +=
                site_calls_match_tree(&exact.profile, &case.wasm, counted_at, case.seed);
        }
    }
    eprintln!("{calls} calls; {shared_sites} called sites sharing a counter");
    covered(shared_sites > 0, "no called site shared its node's counter");
}

/// Hints from an exact profile, if arms swapped by them and every call site inlined change
/// nothing a program does, and every hint still points at an `if` or `br_if` after each
/// (and after instrumenting the hinted module).
#[test]
fn hints_layouts_and_inlining_change_no_behaviour() {
    let engines = Engines::new();
    let (mut hinted_modules, mut swapped_ifs, mut inlined_sites) = (0, 0, 0);
    for case in cases(&engines) {
        let seed = case.seed;
        let wasm = &case.wasm;
        let same = |module: &[u8], what: &str| {
            let (got, _) = run(&engines.hinting, module, &case.funcs, &case.observed, None)
                .unwrap_or_else(|e| panic!("seed {seed}, {what}: {e}"));
            assert_same(&got, &case.original, &format!("seed {seed}, {what}"));
        };
        let exact = run_variant(&engines, &case, "exact-paths").profile;
        // Every executed if/br_if, either way.
        let mut every = pepper_wasm::hints::HintOptions::default();
        every.min_bias = 0.5;
        every.min_count = 1;
        every.unlikely_br_if = true;
        let (hints, _) = pepper_wasm::hints::choose(wasm, &exact.branches, &every)
            .unwrap_or_else(|e| panic!("seed {seed}: hints: {e}"));
        let hinted = pepper_wasm::hints::write(wasm, &hints).unwrap();
        assert_eq!(
            pepper_wasm::hints::read(&hinted).unwrap(),
            hints,
            "seed {seed}"
        );
        same(&hinted, "hinted");
        hinted_modules += usize::from(!hints.is_empty());
        // Swapping the arms of unlikely ifs: the hints move with their instructions.
        let (laid, moved, layout) = pepper_wasm::hints::lay_out(wasm, &hints)
            .unwrap_or_else(|e| panic!("seed {seed}: layout: {e}"));
        let laid = pepper_wasm::hints::write(&laid, &moved).unwrap();
        assert_eq!(pepper_wasm::hints::read(&laid).unwrap().len(), hints.len());
        same(&laid, "if arms swapped");
        swapped_ifs += layout.swapped;
        // Inlining every direct call site: the hints are moved and copied into the
        // inlined bodies.
        let mut everything = pepper_wasm::inline::InlineOptions::default();
        everything.min_share = 0.0;
        everything.min_calls = 0;
        everything.max_callee_bytes = usize::MAX;
        everything.max_growth = f64::INFINITY;
        let (inlined, moved, summary) =
            pepper_wasm::inline::inline(wasm, &direct_calls(wasm), &hints, &everything)
                .unwrap_or_else(|e| panic!("seed {seed}: inline: {e}"));
        let inlined = pepper_wasm::hints::write(&inlined, &moved).unwrap();
        assert_eq!(
            pepper_wasm::hints::read(&inlined).unwrap().len(),
            moved.len()
        );
        same(&inlined, "inlined");
        inlined_sites += summary.inlined;
        // The input's hints and the switch's checks' go into one section, and only hints
        // that still point at an if or br_if are kept.
        for label in ["exact-paths", "pep every 1, switch outer at random"] {
            let inst = pepper_wasm::instrument(&hinted, &variant(label)).unwrap();
            let kept = pepper_wasm::hints::read(&inst.wasm).unwrap_or_else(|e| {
                panic!("seed {seed}: stale hint in an instrumented module: {e}")
            });
            assert!(kept.len() >= inst.plan.switch_hints, "seed {seed}");
            same(&inst.wasm, &format!("hinted, instrumented, {label}"));
        }
    }
    eprintln!(
        "{hinted_modules} modules hinted, {swapped_ifs} if arms swapped, {inlined_sites} call \
         sites inlined"
    );
    covered(inlined_sites > 0, "no random module had a call to inline");
    covered(hinted_modules > 0, "no random module got a hint");
    covered(
        swapped_ifs > 0,
        "no random module had an unlikely if with an else",
    );
}

/// Every module that runs goes into a component and its instrumented copy comes back out.
#[test]
fn instrumented_modules_go_back_into_their_components() {
    let engines = Engines::new();
    for case in cases(&engines) {
        let inst = pepper_wasm::instrument(&case.wasm, &variant("exact-paths")).unwrap();
        in_a_component(case.seed, &case.wasm, &inst.wasm);
    }
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
