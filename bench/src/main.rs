//! pepper-bench: overhead and accuracy of each profiling mode on the real workloads,
//! measured side by side.
//!
//! For every workload: instrument once per variant (rewrite time and code size), compile
//! once per variant (not timed), then run all variants interleaved round after round (so
//! machine noise hits every variant alike), and report the median run time of each and its
//! ratio to the uninstrumented median of the same run. Sampled variants are also scored
//! against the exact-paths profile of the same round (`pepper compare`'s metrics). Writes
//! a Markdown table to `bench/results/`.
//!
//!   cargo run --release -p pepper-bench                 # full run, writes bench/results/bench.md
//!   cargo run --release -p pepper-bench -- --quick      # CI smoke: small inputs, 1 round
//!   cargo run --release -p pepper-bench -- --contexts   # calling contexts: bench/results/contexts.md
//!   cargo run --release -p pepper-bench -- --hints      # branch hints' speedup: bench/results/hints.md
//!   cargo run --release -p pepper-bench -- --ephemeral  # ephemeral instrumentation: bench/results/ephemeral.md
//!   cargo run --release -p pepper-bench -- --phases     # phases: bench/results/phases.md
//!   cargo run --release -p pepper-bench -- --list       # the corpus: bench/results/corpus.md
//!
//! Shared machinery (workloads, interleaving, ratios, results files) is in `harness`.

mod componentize;
mod contexts;
mod ephemeral;
mod guides;
mod harness;
mod hints;
mod list;
mod phases;
mod specs;

use harness::*;
use specs::*;

use anyhow::Result;
use clap::Parser;
use pepper_profile::compare::compare;
use pepper_profile::Mode;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// Interleaved rounds (the median is reported).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Busy processes that compete with every measured run for the cores (a loaded
    /// machine); 0 for a quiet one.
    #[arg(long, default_value_t = 0)]
    load: usize,
    /// Small inputs, one round, and only the programs the corpus manifest marks for CI:
    /// checks the harness works, measures nothing meaningful.
    #[arg(long)]
    quick: bool,
    /// Output Markdown file [default: bench/results/bench.md, or a temp file with --quick].
    #[arg(long)]
    output: Option<PathBuf>,
    /// Only these workloads.
    #[arg(long)]
    only: Vec<String>,
    /// Only variants whose label contains one of these (the baseline always runs); `=LABEL`
    /// selects that label alone.
    #[arg(long)]
    variants: Vec<String>,
    /// Also run the large programs (gcc's cc1; yosys, fetched by bench/workloads/yosys.sh).
    /// They compile through wasmtime's cache, apart from run time.
    #[arg(long)]
    large: bool,
    /// List the corpus instead, with each program's toolchain as its module records it
    /// (writes bench/results/corpus.md).
    #[arg(long)]
    list: bool,
    /// Measure calling-context profiling instead (writes bench/results/contexts.md).
    #[arg(long)]
    contexts: bool,
    /// Measure what branch hints from a profile do instead (writes bench/results/hints.md).
    #[arg(long)]
    hints: bool,
    /// With --hints: first optimize every workload with Binaryen's `wasm-opt -O2`, as
    /// production builds do (Emscripten, wasm-pack), which turns many `br_if`s into
    /// `if`s (writes bench/results/hints-wasm-opt.md; needs `wasm-opt` on PATH, Debian's
    /// package `binaryen`).
    #[arg(long)]
    wasm_opt: bool,
    /// Measure ephemeral instrumentation instead (writes bench/results/ephemeral.md).
    #[arg(long)]
    ephemeral: bool,
    /// Measure phases instead: the online detector against the baseline, phase-aware
    /// against periodic interval sampling (writes bench/results/phases.md).
    #[arg(long)]
    phases: bool,
    /// Measure targeted mode guided by N sampled profiles (default `pepper run`s) against
    /// exact paths instead (writes bench/results/guides.md).
    #[arg(long, value_name = "N")]
    guides: Option<usize>,
}

struct Variant {
    spec: Spec,
    prepared: pepper_runtime::Prepared,
    /// Every module the variant profiles (the program's is `modules.primary()`, a
    /// component's others too).
    modules: pepper_runtime::Modules,
    rewrite_ms: f64,
    size: usize,
    /// Paths numbered over all functions, and functions counting by hash.
    static_paths: u64,
    hashed: usize,
    times: Vec<f64>,
    /// Per round: starting and stopping the sampler (ms), outside `times`.
    start_stop: Vec<f64>,
    /// Per round: the whole run's wall time and the CPU time of all its threads, ms.
    whole: Vec<(f64, f64)>,
    /// Per round: path accuracy, edge relative overlap, edge absolute overlap, samples
    /// (PEP) or cold executions (targeted), AoDF.
    accuracy: Vec<[f64; 6]>,
}

/// Where the exact-paths variant, every table's accuracy reference, is among a program's
/// variants.
fn exact_of(variants: &[Variant]) -> usize {
    variants
        .iter()
        .position(|v| v.spec.label == "exact-paths")
        .expect("exact-paths is always measured")
}

/// The library's options for a variant on a workload, as `pepper run` would build them
/// from the variant's flags.
fn options(w: &Workload, spec: &Spec) -> pepper_runtime::CommandOptions {
    let mut instrument = {
        let mut instrument = pepper_wasm::InstrumentOptions::default();
        instrument.mode = spec.mode;
        instrument.pep_every = spec.every;
        instrument.obvious = spec.obvious;
        instrument.loop_counts = spec.loop_counts;
        instrument.switch = spec.switch;
        instrument.switch_hints = spec.switch_hints;
        instrument.contexts = match (spec.contexts, pepper_runtime::NATIVE_STACKS) {
            (false, _) => pepper_wasm::ContextMode::Off,
            (true, true) => pepper_wasm::ContextMode::Native,
            (true, false) => pepper_wasm::ContextMode::Sampled,
        };
        instrument
    };
    if !spec.register_loops {
        instrument.loop_threshold = 0.0;
    }
    if spec.classic {
        instrument.array_max_paths = CLASSIC_ARRAY_MAX_PATHS;
        // No cache in front of the table.
        instrument.hash_cache_log2 = 0;
    }
    w.options(instrument, {
        let mut sampling = pepper_runtime::SamplingOptions::default();
        sampling.params = spec.sampler.unwrap_or_default();
        sampling.interval = spec.interval;
        sampling
    })
}

fn instrument(
    w: &Workload,
    unit: &pepper_wasm::component::Unit,
    spec: &Spec,
    guide: Option<&Arc<pepper_wasm::plan::Guide>>,
) -> Result<(pepper_runtime::Modules, f64)> {
    anyhow::ensure!(
        spec.guide == Guide::None || guide.is_some(),
        "{}: guide missing",
        spec.label
    );
    let t = Instant::now();
    let command = options(w, spec);
    let opts = command.instrument_options(guide.cloned());
    let modules = pepper_runtime::Modules::for_command(unit, &command, &opts)?;
    Ok((modules, t.elapsed().as_secs_f64() * 1e3))
}

/// How `pepper run` would run a variant; the PEP ring without a sampler where the variant
/// measures the instrumentation alone, and wasmtime's epochs for the reference variants.
fn run_config(
    w: &Workload,
    spec: &Spec,
    modules: &pepper_runtime::Modules,
) -> pepper_runtime::RunConfig {
    let mut cfg = options(w, spec).run_config(modules.primary());
    if spec.sampler.is_none() {
        cfg.attach.sampler = None;
    }
    modules.configure(&mut cfg);
    cfg.epoch = spec.epoch.map(|gp| {
        let mut epoch = pepper_runtime::EpochConfig::default();
        epoch.interval = INTERVAL;
        epoch.guest_profiler = gp;
        epoch
    });
    cfg
}

fn main() -> Result<()> {
    let args = Args::parse();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if args.contexts {
        return contexts::main(&args, &root);
    }
    if args.hints {
        return hints::main(&args, &root);
    }
    if args.list {
        return list::main(&args, &root);
    }
    if args.ephemeral {
        return ephemeral::main(&args, &root);
    }
    if args.phases {
        return phases::main(&args, &root);
    }
    if let Some(n) = args.guides {
        return guides::main(&args, &root, n.max(1));
    }
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let build = root.join("bench/workloads/build");
    let _load = harness::Load::start(args.load)?;
    let specs: Vec<Spec> = specs()
        .into_iter()
        .enumerate()
        .filter(|(k, s)| {
            *k == 0 || s.label == "exact-paths" || harness::selects(&args, s.label, true)
        })
        .map(|(_, s)| s)
        .collect();
    let mut table = String::new();
    // Exact-edges counter increments per workload and variant (made, ideal placement).
    let mut increments: Vec<(String, &str, pepper_wasm::Increments)> = Vec::new();
    writeln!(
        table,
        "| workload | variant | median run ms | overhead | min run ms | overhead of min | vs epoch | sampler start + stop ms | path acc | edge rel | edge abs | AoDF | samples (PEP) / cold executions (targeted) | static paths | functions hashed | rewrite ms | compile ms | code size |"
    )?;
    writeln!(
        table,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    // Per spec: ratios to plain, ratios to epoch, accuracies.
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    let mut ratios_epoch: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    // Per spec: the whole run's wall and CPU-of-all-threads ratios to plain.
    let mut ratios_whole: Vec<Vec<(f64, f64)>> = vec![Vec::new(); specs.len()];
    let mut accs: Vec<Vec<[f64; 6]>> = vec![Vec::new(); specs.len()];
    // Targeted: (static paths removed, functions moved from hash to arrays, paths counted on
    // a defining edge) per workload.
    let mut tpp_static: Vec<Vec<(f64, i64, usize)>> = vec![Vec::new(); specs.len()];
    let loaded = selected(&args, &build)?;
    let corpus = corpus_size(&loaded);
    for (w, wasm, cache) in loaded {
        let mut variants: Vec<Variant> = Vec::new();
        let mut guides: [Option<Arc<pepper_wasm::plan::Guide>>; 2] = [None, None];
        let mut component: Option<pepper_wasm::component::Unit> = None;
        // The code size of every module the variants instrument, before they do.
        let original = wasm.len() + w.unit.others.iter().map(|o| o.bytes.len()).sum::<usize>();
        for spec in &specs {
            // wasmtime runs a component's `wasi:cli/run` without epoch interruption.
            if w.is_component() && spec.epoch.is_some() {
                eprintln!(
                    "bench: {} {}: skipped (a component runs without epochs)",
                    w.name, spec.label
                );
                continue;
            }
            // A guide is one module's: a component's other modules would run targeted
            // without one, which is exact paths under another name.
            if !w.unit.others.is_empty() && spec.guide != Guide::None {
                eprintln!(
                    "bench: {} {}: skipped (guides are per module; this component has several)",
                    w.name, spec.label
                );
                continue;
            }
            let slot = match spec.guide {
                Guide::None => None,
                Guide::SameInput => Some(0),
                Guide::OtherInput => Some(1),
            };
            let guide = match slot {
                Some(i) if guides[i].is_none() => {
                    // The guide: one exact-paths run, as a user would record it.
                    let v = &variants[exact_of(&variants)];
                    let mut cfg = run_config(&w, &v.spec, &v.modules);
                    if i == 1 {
                        cfg.wasi.args = w.other_args.clone();
                    }
                    let r = v.prepared.run(&cfg)?;
                    let p = profile_of_all(&w, &v.modules, &r);
                    guides[i] = Some(Arc::new(pepper_wasm::plan::Guide::from_profile(
                        &p,
                        "exact-paths".into(),
                    )));
                    guides[i].clone()
                }
                Some(i) => guides[i].clone(),
                None => None,
            };
            // A component variant instruments the program's modules inside the component
            // (a program that is a component already is its own component variant).
            let unit = match spec.component && !w.is_component() {
                true => {
                    if component.is_none() {
                        let c = componentize::componentize(&wasm)?;
                        component = Some(pepper_wasm::component::Unit::parse(&c)?);
                    }
                    component.as_ref().expect("componentized above")
                }
                false => &w.unit,
            };
            let (modules, rewrite_ms) = instrument(&w, unit, spec, guide.as_ref())?;
            let runnable = modules.wasm(unit);
            let inst = modules.primary().clone();
            let fns: Vec<_> = std::iter::once(&*inst)
                .chain(modules.others())
                .flat_map(|i| &i.plan.functions)
                .collect();
            let static_paths: u64 = fns
                .iter()
                .filter_map(|f| f.numbered.as_ref())
                .map(|n| n.numbering.total())
                .sum();
            let hashed = fns
                .iter()
                .filter(|f| matches!(f.counting, pepper_wasm::Counting::Hash { .. }))
                .count();
            let prepared = pepper_runtime::Prepared::new(
                &runnable,
                &pepper_runtime::EngineOptions::default()
                    .with_cache_dir(cache.clone())
                    .with_epoch_interruption(spec.epoch.is_some())
                    .with_branch_hints(inst.wants_branch_hinting()),
            )?;
            eprintln!(
                "bench: {} {}: rewritten in {rewrite_ms:.0} ms, compiled in {:.0} ms",
                w.name,
                spec.label,
                prepared.compile.as_secs_f64() * 1e3
            );
            variants.push(Variant {
                spec: spec.clone(),
                prepared,
                size: inst.wasm.len() + modules.others().map(|i| i.wasm.len()).sum::<usize>(),
                modules,
                rewrite_ms,
                static_paths,
                hashed,
                times: Vec::new(),
                start_stop: Vec::new(),
                whole: Vec::new(),
                accuracy: Vec::new(),
            });
        }
        // One untimed warm-up of each variant, then interleaved timed rounds.
        for round in 0..=rounds {
            let results = shuffled(&mut variants, round, |v| {
                let config = run_config(&w, &v.spec, &v.modules);
                let (cpu0, t0) = (harness::process_cpu(), Instant::now());
                let r = v.prepared.run(&config)?;
                let whole = (
                    t0.elapsed().as_secs_f64() * 1e3,
                    (harness::process_cpu() - cpu0).as_secs_f64() * 1e3,
                );
                anyhow::ensure!(
                    r.exit_code == 0,
                    "{} {} exited {} ({:?})",
                    w.name,
                    v.spec.label,
                    r.exit_code,
                    r.trap
                );
                if round > 0 {
                    v.times.push(r.run.as_secs_f64() * 1e3);
                    v.whole.push(whole);
                    v.start_stop
                        .push(r.sampler_start_stop().as_secs_f64() * 1e3);
                }
                // Nearly the same every round: read at the warm-up.
                if round == 0 {
                    if let Some(inc) = r
                        .counters
                        .as_deref()
                        .and_then(|m| v.modules.primary().plan.edge_increments(m))
                    {
                        increments.push((w.name.to_string(), v.spec.label, inc));
                    }
                }
                Ok(r)
            })?;
            if round > 0 {
                let exact_v = exact_of(&variants);
                let reference = profile_of_all(&w, &variants[exact_v].modules, &results[exact_v]);
                for (v, r) in variants.iter_mut().zip(&results) {
                    let sampled = v.spec.mode == Mode::Pep
                        && (v.spec.sampler.is_some() || v.spec.every.is_some());
                    // A component's module has one more function (its `cabi_realloc`,
                    // see `componentize`), so its code offsets differ from the core
                    // module's reference: it is timed, not scored.
                    if (!sampled && v.spec.mode != Mode::Targeted) || v.spec.component {
                        continue;
                    }
                    let p = profile_of_all(&w, &v.modules, r);
                    let a = compare(&reference, &p);
                    let cold: u64 = p.functions.iter().filter_map(|f| f.cold_executions).sum();
                    // Targeted: the share of path executions counted on defining edges.
                    let obvious: std::collections::HashSet<(u32, u64)> = v
                        .modules
                        .primary()
                        .plan
                        .functions
                        .iter()
                        .flat_map(|f| f.obvious.iter().map(|o| (f.index.0, o.path)))
                        .collect();
                    let all: u64 = p.paths.iter().map(|x| x.count).sum();
                    let by_counter: u64 = p
                        .paths
                        .iter()
                        .filter(|x| obvious.contains(&(x.func, x.number)))
                        .map(|x| x.count)
                        .sum();
                    let samples = r.samples.as_ref().map_or_else(
                        || {
                            p.paths.iter().map(|x| x.count).sum::<u64>()
                                / v.spec.every.unwrap_or(1) as u64
                        },
                        |s| s.taken,
                    );
                    v.accuracy.push([
                        a.path_accuracy.unwrap_or(f64::NAN),
                        a.edge_relative_overlap.unwrap_or(f64::NAN),
                        a.edge_absolute_overlap.unwrap_or(f64::NAN),
                        if v.spec.mode == Mode::Targeted {
                            cold as f64
                        } else {
                            samples as f64
                        },
                        a.aodf.unwrap_or(f64::NAN),
                        by_counter as f64 / all.max(1) as f64,
                    ]);
                }
            }
            eprintln!("bench: {} round {round}/{rounds}", w.name);
        }
        let base_min = variants[0]
            .times
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let epoch_base = variants
            .iter()
            .find(|v| v.spec.label == "epoch")
            .map(|v| v.times.clone());
        for v in &variants {
            // The variant's place among the specs (a program may skip some).
            let k = specs
                .iter()
                .position(|s| s.label == v.spec.label)
                .expect("every variant comes from a spec");
            let m = median(&v.times);
            // Paired: each round's time over the baseline's time in the same round, then
            // the median of those ratios. Runs next to each other share the machine's
            // state, so slow drifts in the noise cancel.
            let ratio = paired_ratio(&v.times, &variants[0].times);
            let min = v.times.iter().copied().fold(f64::INFINITY, f64::min);
            ratios[k].push(ratio);
            let vs_epoch = epoch_base.as_ref().map(|e| paired_ratio(&v.times, e));
            if let Some(r) = vs_epoch {
                ratios_epoch[k].push(r);
            }
            let base = &variants[0].whole;
            let part =
                |f: fn(&(f64, f64)) -> f64, w: &[(f64, f64)]| w.iter().map(f).collect::<Vec<_>>();
            ratios_whole[k].push((
                paired_ratio(&part(|x| x.0, &v.whole), &part(|x| x.0, base)),
                paired_ratio(&part(|x| x.1, &v.whole), &part(|x| x.1, base)),
            ));
            let acc = medians(&v.accuracy);
            if v.spec.mode == Mode::Targeted {
                // What cold elimination removed, against exact paths counted the same way.
                let e = variants
                    .iter()
                    .find(|e| e.spec.mode == Mode::ExactPaths && e.spec.classic == v.spec.classic)
                    .unwrap_or(&variants[exact_of(&variants)]);
                tpp_static[k].push((
                    1.0 - v.static_paths as f64 / e.static_paths.max(1) as f64,
                    e.hashed as i64 - v.hashed as i64,
                    v.modules
                        .primary()
                        .plan
                        .functions
                        .iter()
                        .map(|f| f.obvious.len())
                        .sum(),
                ));
            }
            if !v.accuracy.is_empty() {
                accs[k].push(acc);
            }
            writeln!(
                table,
                "| {} | {} | {:.1} | {:+.1}% | {:.1} | {:+.1}% | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {} ({:+.1}%) |",
                w.name,
                v.spec.label,
                m,
                (ratio - 1.0) * 100.0,
                min,
                (min / base_min - 1.0) * 100.0,
                vs_epoch.map_or(String::new(), |r| format!("{:+.1}%", (r - 1.0) * 100.0)),
                median(&v.start_stop),
                pct(acc[0]),
                pct(acc[1]),
                pct(acc[2]),
                pct(acc[4]),
                if acc[3].is_nan() {
                    String::new()
                } else {
                    format!("{:.0}", acc[3])
                },
                if v.spec.mode.paths() {
                    v.static_paths.to_string()
                } else {
                    String::new()
                },
                if v.spec.mode.paths() {
                    v.hashed.to_string()
                } else {
                    String::new()
                },
                v.rewrite_ms,
                v.prepared.compile.as_secs_f64() * 1e3,
                v.size,
                (v.size as f64 / original as f64 - 1.0) * 100.0,
            )?;
        }
    }
    let geo = geomean_pct;
    let mut summary = String::new();
    writeln!(
        summary,
        "| variant | overhead (geomean) | worst | whole run wall (geomean / worst) | CPU, all threads (geomean / worst) | vs epoch baseline (geomean) | path acc (mean / worst) | edge rel (mean / worst) | edge abs (mean / worst) | AoDF (mean / worst) | static paths removed (mean) | functions hash→array (total) | obvious paths (total; mean share of executions) | what |"
    )?;
    writeln!(
        summary,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for (k, spec) in specs.iter().enumerate() {
        let worst = ratios[k].iter().copied().fold(f64::NAN, f64::max);
        let acc = |i: usize| mean_worst_pct(&accs[k].iter().map(|a| a[i]).collect::<Vec<_>>());
        let whole = |f: fn(&(f64, f64)) -> f64| {
            let r: Vec<f64> = ratios_whole[k].iter().map(f).collect();
            let worst = r.iter().copied().fold(f64::NAN, f64::max);
            format!("{:+.1}% / {:+.1}%", geo(&r), (worst - 1.0) * 100.0)
        };
        writeln!(
            summary,
            "| {} | {:+.1}% | {:+.1}% | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            spec.label,
            geo(&ratios[k]),
            (worst - 1.0) * 100.0,
            whole(|x| x.0),
            whole(|x| x.1),
            if ratios_epoch[k].is_empty() {
                String::new()
            } else {
                format!("{:+.1}%", geo(&ratios_epoch[k]))
            },
            acc(0),
            acc(1),
            acc(2),
            acc(4),
            if tpp_static[k].is_empty() {
                String::new()
            } else {
                format!(
                    "{:.1}%",
                    100.0 * tpp_static[k].iter().map(|x| x.0).sum::<f64>()
                        / tpp_static[k].len() as f64
                )
            },
            if tpp_static[k].is_empty() {
                String::new()
            } else {
                tpp_static[k].iter().map(|x| x.1).sum::<i64>().to_string()
            },
            if tpp_static[k].is_empty() {
                String::new()
            } else {
                let shares: Vec<f64> = accs[k].iter().map(|a| a[5]).collect();
                format!(
                    "{}; {:.1}%",
                    tpp_static[k].iter().map(|x| x.2).sum::<usize>(),
                    100.0 * shares.iter().sum::<f64>() / shares.len().max(1) as f64
                )
            },
            spec.what
        )?;
    }
    let increments_section = if increments.is_empty() {
        String::new()
    } else {
        let mut t = String::from(
            "\n## exact-edges counter increments\n\nCounter increments of one exact-edges run \
             (deterministic, unlike time), and how many a spanning tree built from that run's \
             true edge counts would make: the best any counter placement can do.\n\n\
             | workload | variant | increments | ideal placement | ratio |\n|---|---|---|---|---|\n",
        );
        for (name, label, inc) in &increments {
            writeln!(
                t,
                "| {name} | {label} | {} | {} | {:.2} |",
                inc.made,
                inc.ideal,
                inc.made as f64 / inc.ideal.max(1) as f64
            )?;
        }
        t
    };
    let doc = format!(
        "# pepper benchmark: overhead and accuracy\n\n\
         Corpus: {corpus}. Machine: {}. Load: {}. Rounds: {rounds} interleaved, in a fresh shuffled order each round (plus one \
         warm-up), median of guest run time (compilation excluded, and starting and stopping \
         pepper's sampler thread too: that is its own column; wasmtime {}, Cranelift). Overhead is relative to the \
         uninstrumented module in the same run (median over rounds of the per-round ratio, so \
         that slow drifts in machine noise cancel); \"whole run\" is the same ratio of the wall time of \
         the whole run (instantiation, pepper's threads started and stopped) and of the CPU time \
         of all of the process's threads over it (the guest's and pepper's own); \"vs epoch\" relative to the uninstrumented \
         module with epoch interruption ticking every 1 ms (for variants without epochs of \
         their own this compares against a slower engine; `pep(64,17)+epoch` runs with \
         epochs, so its \"vs epoch\" is what PEP costs on top of them). Accuracy (median over rounds) is \
         against the exact-paths profile of the same round: Wall path accuracy with branch \
         flow and the 0.125% hot threshold, edge relative overlap, edge absolute overlap, \
         TPP's AoDF (`pepper compare`). Timer period: {} ms (epochs, wasmtime's guest profiler); PEP's \
         bursts every {} µs unless the variant says otherwise. Targeted guides: exact-paths \
         profiles of the measured input, or of another input (the corpus manifest's `other`, \
         else its `quick` input).\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Summary\n\n{summary}\n## Per workload\n\n{table}{increments_section}",
        machine(),
        match args.load {
            0 => "none (a quiet machine)".to_string(),
            n => format!("{n} busy process(es) beside every run"),
        },
        "48.0.8",
        INTERVAL.as_millis(),
        PEP_INTERVAL.as_micros(),
        reproduce(&args, ""),
    );
    write_results(&args, &root, "bench", &doc)
}
