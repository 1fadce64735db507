//! `pepper-bench --contexts`: calling-context profiling side by side, per workload:
//! uninstrumented; native stack samples (a signal per tick, frame-pointer walk) with and
//! without call-site counters at 1, 10 and 0.1 ms, and with call windows; the shadow stack alone (never sampled)
//! and sampled at 1 and 10 ms; PEP alone and with either kind of contexts; exact calling
//! contexts; and wasmtime's guest profiler at 1 and 10 ms (epoch-driven stack walks).
//! Accuracy per round: against the exact-calls tree of the same round (call overlap,
//! hot-context coverage) and against native samples at 0.1 ms in the same round
//! (hot-function precision by self time). Writes `bench/results/contexts.md`.

use crate::{geomean_pct, machine, mean_worst_pct, median, pct, selected, Args};
use anyhow::Result;
use pepper_profile::context_accuracy::compare_contexts;
use pepper_profile::{Mode, ModuleInfo, Profile, RunInfo};
use pepper_wasm::ContextMode;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

#[derive(Clone, Debug)]
struct Spec {
    label: &'static str,
    mode: Mode,
    contexts: ContextMode,
    /// Count calls per call site.
    counters: bool,
    /// Call windows: the guest logs entries and returns for the native sampler.
    windows: bool,
    /// PEP + native stacks: replay PEP's ring as calls (`--no-path-windows` turns it off).
    path_windows: bool,
    /// Stack sample period (native or shadow stack); `None`: no sampler thread at all.
    /// PEP's bursts have their own period, `bursts`.
    interval: Option<Duration>,
    /// PEP's bursts' period (`pepper run --interval`).
    bursts: Duration,
    /// PEP on the switch (`--switch`): instrumented copies for each tick's burst only.
    switch: Option<pepper_wasm::switch::SwitchPlacement>,
    /// wasmtime's guest profiler at this period.
    guest_profiler: Option<Duration>,
    what: &'static str,
}

fn specs() -> Vec<Spec> {
    let ms = Duration::from_millis;
    let base = Spec {
        label: "none",
        mode: Mode::None,
        contexts: ContextMode::Off,
        counters: true,
        windows: false,
        path_windows: true,
        interval: None,
        bursts: crate::specs::PEP_INTERVAL,
        switch: None,
        guest_profiler: None,
        what: "uninstrumented",
    };
    let native = Spec {
        contexts: ContextMode::Native,
        ..base.clone()
    };
    let shadow = Spec {
        contexts: ContextMode::Sampled,
        ..base.clone()
    };
    let native_shallow_500 = Spec {
        label: "",
        mode: Mode::Pep,
        interval: Some(Duration::from_micros(500)),
        bursts: Duration::from_micros(500),
        switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
        ..native.clone()
    };
    vec![
        base.clone(),
        Spec {
            label: "none-again",
            what: crate::specs::AA_WHAT,
            ..base.clone()
        },
        Spec {
            label: "native-1ms-nocount",
            counters: false,
            interval: Some(ms(1)),
            what: "native stack samples (signal every 1 ms), no instrumentation at all",
            ..native.clone()
        },
        Spec {
            label: "native-1ms",
            interval: Some(ms(1)),
            what: "native stack samples every 1 ms + exact call-site counters",
            ..native.clone()
        },
        Spec {
            label: "native-1ms-windows",
            interval: Some(ms(1)),
            windows: true,
            what: "native stack samples every 1 ms + call-site counters + call windows (entry/return log replayed at each sample)",
            ..native.clone()
        },
        Spec {
            label: "native-10ms",
            interval: Some(ms(10)),
            what: "same, every 10 ms",
            ..native.clone()
        },
        Spec {
            label: "native-0.1ms",
            interval: Some(Duration::from_micros(100)),
            what: "same, every 0.1 ms (the time reference for hot functions)",
            ..native.clone()
        },
        Spec {
            label: "shadow-stack",
            interval: Some(Duration::from_secs(3600)),
            what: "shadow stack + call-site counters, sampler never wakes",
            ..shadow.clone()
        },
        Spec {
            label: "shadow-1ms",
            interval: Some(ms(1)),
            what: "Whaley PCCT from the shadow stack, host thread every 1 ms",
            ..shadow.clone()
        },
        Spec {
            label: "shadow-10ms",
            interval: Some(ms(10)),
            what: "same, every 10 ms",
            ..shadow.clone()
        },
        Spec {
            label: "pep",
            mode: Mode::Pep,
            interval: Some(ms(1)),
            what: "PEP(64,17) paths only, bursts every 250 µs",
            ..base.clone()
        },
        Spec {
            label: "pep+native",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(250)),
            what: "PEP(64,17) on the ring (`--switch off`) and native stack samples at every 250 µs tick, each sample replaying the PEP ring's 4,096 path ends as calls (path windows), + call-site counters, one sampler thread",
            ..native.clone()
        },
        Spec {
            label: "pep+native-500us",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(500)),
            what: "the same with stack samples every 500 µs (`--stack-interval 500us`)",
            ..native.clone()
        },
        Spec {
            label: "pep+native-1ms",
            mode: Mode::Pep,
            interval: Some(ms(1)),
            what: "the same with stack samples every 1 ms (`--stack-interval 1ms`)",
            ..native.clone()
        },
        Spec {
            label: "pep+native-1ms-nopw",
            mode: Mode::Pep,
            interval: Some(ms(1)),
            path_windows: false,
            what: "stacks every 1 ms without path windows (`--no-path-windows`: call estimates split by sampled time; the default before path windows)",
            ..native.clone()
        },
        Spec {
            label: "pep+native+windows",
            mode: Mode::Pep,
            interval: Some(ms(1)),
            windows: true,
            path_windows: false,
            what: "PEP + stacks every 1 ms + call windows from a call log in the guest (`--call-windows`)",
            ..native.clone()
        },
        Spec {
            label: "pep+native+switch-outer",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(250)),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Outer),
            what: "PEP(64,17) at `--switch outer` in instrumented copies for each burst only, native stack samples taken while a burst is watched, their path windows reading that burst's path ends, + call-site counters",
            ..native.clone()
        },
        Spec {
            label: "pep+switch-outer",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(250)),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Outer),
            what: "PEP on the switch (`--switch outer --contexts off`): paths only, no stack samples, no call-site counters",
            ..base.clone()
        },
        Spec {
            label: "pep+native+switch-shallow",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(250)),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
            what: "`--switch shallow` with bursts and stack samples every 250 µs (`--interval 250us`): as pep+native+switch-outer with the copies also entered and left at inner loops that call or hold loops, with at most two other constructs on the way in",
            ..native.clone()
        },
        Spec {
            label: "pep+native-500us+switch-shallow",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(500)),
            bursts: Duration::from_micros(500),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
            what: "as pep+native+switch-shallow with bursts and stack samples every 500 µs, half of each",
            ..native.clone()
        },
        Spec {
            label: "default",
            interval: Some(pepper_runtime::PEP_INTERVAL),
            bursts: pepper_runtime::PEP_INTERVAL,
            switch: Some(pepper_wasm::switch::SwitchPlacement::Deep),
            what: "`pepper run`'s default: PEP's bursts and native stack samples every 1 ms of the guest's CPU time, `--switch deep`",
            ..native_shallow_500.clone()
        },
        Spec {
            label: "pep+native-500us+switch-deep",
            switch: Some(pepper_wasm::switch::SwitchPlacement::Deep),
            what: "pepper's default: as pep+native-500us+switch-shallow with the copies also left at loops that hold loops behind up to eight other constructs (`--switch deep`)",
            ..native_shallow_500.clone()
        },
        Spec {
            label: "pep+switch-deep-500us",
            switch: Some(pepper_wasm::switch::SwitchPlacement::Deep),
            contexts: ContextMode::Off,
            what: "pep+native-500us+switch-deep without contexts (`--contexts off`): paths only",
            ..native_shallow_500.clone()
        },
        Spec {
            label: "pep+switch-shallow",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(250)),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
            what: "PEP on the switch at `shallow` checks (`--switch shallow --contexts off`): paths only",
            ..base.clone()
        },
        Spec {
            label: "pep+native-500us-stacks+switch-shallow",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(500)),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
            what: "as pep+native+switch-shallow with a stack sample every second burst (`--stack-interval 500us`)",
            ..native.clone()
        },
        Spec {
            label: "pep+native-500us-1ms-stacks+switch-shallow",
            mode: Mode::Pep,
            interval: Some(Duration::from_millis(1)),
            bursts: Duration::from_micros(500),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
            what: "pep+native-500us+switch-shallow with a stack sample at every second burst (`--stack-interval 1ms`)",
            ..native.clone()
        },
        Spec {
            label: "pep+native-500us-2ms-stacks+switch-shallow",
            mode: Mode::Pep,
            interval: Some(Duration::from_millis(2)),
            bursts: Duration::from_micros(500),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
            what: "pep+native-500us+switch-shallow with a stack sample at every fourth burst (`--stack-interval 2ms`)",
            ..native.clone()
        },
        Spec {
            label: "pep+native-500us-nocounts+switch-shallow",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(500)),
            bursts: Duration::from_micros(500),
            counters: false,
            switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
            what: "pep+native-500us+switch-shallow without call-site counters (`--no-call-counts`: each site's calls estimated from the sampled paths)",
            ..native.clone()
        },
        Spec {
            label: "pep+switch-shallow-500us",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(500)),
            bursts: Duration::from_micros(500),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Shallow),
            what: "pep+switch-shallow with bursts every 500 µs (`--contexts off --interval 500us`): paths only",
            ..base.clone()
        },
        Spec {
            label: "pep+native-1ms+switch-outer",
            mode: Mode::Pep,
            interval: Some(ms(1)),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Outer),
            what: "pep+native+switch-outer with a stack sample every fourth burst (`--switch outer --stack-interval 1ms`)",
            ..native.clone()
        },
        Spec {
            label: "pep+native+switch-outer-nopw",
            mode: Mode::Pep,
            interval: Some(Duration::from_micros(250)),
            switch: Some(pepper_wasm::switch::SwitchPlacement::Outer),
            path_windows: false,
            what: "the same without path windows (`--switch outer --no-path-windows`)",
            ..native.clone()
        },
        Spec {
            label: "pep+shadow",
            mode: Mode::Pep,
            interval: Some(ms(1)),
            what: "PEP(64,17) + shadow-stack PCCT at 1 ms",
            ..shadow.clone()
        },
        Spec {
            label: "exact-calls",
            contexts: ContextMode::Exact,
            what: "every call counted in its context (in-module context table)",
            ..base.clone()
        },
        Spec {
            label: "wasmtime-gp-1ms",
            guest_profiler: Some(ms(1)),
            what: "wasmtime GuestProfiler, epoch tick + stack walk every 1 ms",
            ..base.clone()
        },
        Spec {
            label: "wasmtime-gp-10ms",
            guest_profiler: Some(ms(10)),
            what: "same, every 10 ms",
            ..base.clone()
        },
    ]
}

struct Variant {
    spec: Spec,
    prepared: pepper_runtime::Prepared,
    inst: pepper_wasm::Instrumented,
    /// Built once: for native stacks its sampler maps the module's call sites.
    cfg: pepper_runtime::RunConfig,
    times: Vec<f64>,
    /// Per round: starting and stopping the sampler (ms), outside `times`.
    start_stop: Vec<f64>,
    /// Per round: call overlap, hot-context coverage, hot-function precision, samples, call
    /// overlap with recursion folded.
    accuracy: Vec<[f64; 5]>,
}

/// How `pepper run` would run a variant: its stack period, PEP's bursts at its period
/// (`pepper run`'s default unless it says), and wasmtime's epochs for the guest
/// profiler references.
fn config(
    w: &crate::Workload,
    spec: &Spec,
    opts: pepper_wasm::InstrumentOptions,
    inst: &pepper_wasm::Instrumented,
) -> pepper_runtime::RunConfig {
    let sampling = {
        let mut sampling = pepper_runtime::SamplingOptions::default();
        sampling.interval = spec.bursts;
        sampling.stack_interval = spec.interval;
        sampling
    };
    let mut cfg = w.options(opts, sampling).run_config(inst);
    if spec.interval.is_none() {
        cfg.attach.sampler = None;
    }
    cfg.epoch = spec.guest_profiler.map(|i| {
        let mut epoch = pepper_runtime::EpochConfig::default();
        epoch.interval = i;
        epoch.guest_profiler = true;
        epoch
    });
    cfg
}

fn profile(v: &Variant, r: &pepper_runtime::RunResult) -> Profile {
    let module = ModuleInfo {
        path: String::new(),
        sha256: String::new(),
        size: 0,
    };
    pepper_runtime::decode::profile(
        &v.inst,
        r.results(),
        module,
        RunInfo::default(),
        &Default::default(),
        v.cfg.attach.sampler.as_ref(),
        &|_| None,
    )
}

pub fn main(args: &Args, root: &Path) -> Result<()> {
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let build = root.join("bench/workloads/build");
    let _load = crate::harness::Load::start(args.load)?;
    // `--variants` narrows the run; the baseline and the two references always run.
    let specs: Vec<Spec> = specs()
        .into_iter()
        .filter(|s| {
            ["none", "exact-calls", "native-0.1ms"].contains(&s.label)
                || crate::harness::selects(args, s.label, false)
        })
        .collect();
    let find = |l: &str| specs.iter().position(|s| s.label == l).unwrap();
    // The references must be there, whichever variants `--variants` picked.
    let _ = (find("exact-calls"), find("native-0.1ms"));
    let mut table = String::new();
    writeln!(table, "| workload | variant | median run ms | overhead | sampler start + stop ms | call overlap | call overlap, recursion folded | hot-context coverage | hot-function precision | samples | contexts |")?;
    writeln!(table, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    let mut accs: Vec<Vec<[f64; 5]>> = vec![Vec::new(); specs.len()];
    let loaded = selected(args, &build)?;
    let corpus = crate::corpus_size(&loaded);
    for (w, wasm, cache) in loaded {
        let mut variants = Vec::new();
        for spec in &specs {
            // wasmtime runs a component's `wasi:cli/run` without epoch interruption, which
            // its guest profiler needs.
            if w.is_component() && spec.guest_profiler.is_some() {
                eprintln!(
                    "bench: {} {}: skipped (a component runs without epochs)",
                    w.name, spec.label
                );
                continue;
            }
            let opts = {
                let mut instrument = pepper_wasm::InstrumentOptions::default();
                instrument.mode = spec.mode;
                instrument.contexts = spec.contexts;
                instrument.site_counters = spec.counters;
                instrument.call_log_log2 = spec.windows.then_some(14);
                instrument.path_windows = spec.path_windows;
                instrument.switch = spec.switch;
                instrument
            };
            let inst = pepper_wasm::instrument(&wasm, &opts)?;
            let prepared = pepper_runtime::Prepared::new(
                &w.runnable(&inst.wasm),
                &pepper_runtime::EngineOptions::default()
                    .with_cache_dir(cache.clone())
                    .with_epoch_interruption(spec.guest_profiler.is_some())
                    .with_branch_hints(inst.wants_branch_hinting()),
            )?;
            variants.push(Variant {
                spec: spec.clone(),
                prepared,
                cfg: config(&w, spec, opts, &inst),
                inst,
                times: Vec::new(),
                start_stop: Vec::new(),
                accuracy: Vec::new(),
            });
        }
        let at = |label: &str| {
            variants
                .iter()
                .position(|v: &Variant| v.spec.label == label)
                .expect("the references always run")
        };
        let (exact_k, time_k) = (at("exact-calls"), at("native-0.1ms"));
        let mut contexts = vec![0usize; variants.len()];
        for round in 0..=rounds {
            let results = crate::shuffled(&mut variants, round, |v| {
                let r = v.prepared.run(&v.cfg.clone())?;
                anyhow::ensure!(
                    r.exit_code == 0,
                    "{} {} exited {}",
                    w.name,
                    v.spec.label,
                    r.exit_code
                );
                if round > 0 {
                    v.times.push(r.run.as_secs_f64() * 1e3);
                    v.start_stop
                        .push(r.sampler_start_stop().as_secs_f64() * 1e3);
                }
                Ok(r)
            })?;
            if round == 0 {
                continue;
            }
            let profiles: Vec<Profile> = variants
                .iter()
                .zip(&results)
                .map(|(v, r)| profile(v, r))
                .collect();
            let (Some(exact), Some(time_ref)) =
                (&profiles[exact_k].contexts, &profiles[time_k].contexts)
            else {
                anyhow::bail!("{}: reference runs have no contexts", w.name);
            };
            for (k, (v, p)) in variants.iter_mut().zip(&profiles).enumerate() {
                let Some(c) = &p.contexts else { continue };
                contexts[k] = c.nodes.len() - 1;
                if c.kind != pepper_profile::ContextKind::Sampled {
                    continue;
                }
                let calls = compare_contexts(exact, c);
                let time = compare_contexts(time_ref, c);
                v.accuracy.push([
                    calls.call_overlap,
                    calls.hot_context_coverage.unwrap_or(f64::NAN),
                    time.hot_function_precision.unwrap_or(f64::NAN),
                    c.sampling.as_ref().map_or(0, |s| s.samples) as f64,
                    calls.call_overlap_folded,
                ]);
            }
            eprintln!("bench: {} round {round}/{rounds}", w.name);
        }
        for (i, v) in variants.iter().enumerate() {
            // The variant's place among the specs (a program may skip some).
            let k = specs
                .iter()
                .position(|s| s.label == v.spec.label)
                .expect("every variant comes from a spec");
            let (ratio, acc) = crate::tally(
                &v.times,
                &variants[0].times,
                &v.accuracy,
                (&mut ratios[k], &mut accs[k]),
            );
            writeln!(
                table,
                "| {} | {} | {:.1} | {:+.1}% | {:.1} | {} | {} | {} | {} | {} | {} |",
                w.name,
                v.spec.label,
                median(&v.times),
                (ratio - 1.0) * 100.0,
                median(&v.start_stop),
                pct(acc[0]),
                pct(acc[4]),
                pct(acc[1]),
                pct(acc[2]),
                if acc[3].is_nan() {
                    String::new()
                } else {
                    format!("{:.0}", acc[3])
                },
                if contexts[i] > 0 {
                    contexts[i].to_string()
                } else {
                    String::new()
                },
            )?;
        }
    }
    let geo = geomean_pct;
    let mut summary = String::new();
    writeln!(summary, "| variant | overhead (geomean) | worst | call overlap (mean / worst) | recursion folded (mean / worst) | hot-context coverage (mean / worst) | hot-function precision (mean / worst) | what |")?;
    writeln!(summary, "|---|---|---|---|---|---|---|---|")?;
    for (k, spec) in specs.iter().enumerate() {
        let worst = ratios[k].iter().copied().fold(f64::NAN, f64::max);
        let acc = |i: usize| {
            let vals: Vec<f64> = accs[k]
                .iter()
                .map(|a| a[i])
                .filter(|x| !x.is_nan())
                .collect();
            mean_worst_pct(&vals)
        };
        writeln!(
            summary,
            "| {} | {:+.1}% | {:+.1}% | {} | {} | {} | {} | {} |",
            spec.label,
            geo(&ratios[k]),
            (worst - 1.0) * 100.0,
            acc(0),
            acc(4),
            acc(1),
            acc(2),
            spec.what
        )?;
    }
    let doc = format!(
        "# pepper benchmark: calling contexts\n\n\
         Corpus: {corpus}. Machine: {}. Load: {}. Rounds: {rounds} interleaved, in a fresh shuffled order each round (plus one \
         warm-up), median of guest run time (compilation excluded, and starting and stopping \
         pepper's sampler thread too: that is its own column; wasmtime 48.0.8). Overhead: median over rounds of the per-round \
         ratio to the uninstrumented run. Accuracy (median over rounds, `pepper compare`'s \
         measures): call overlap and hot-context coverage (contexts with ≥ 0.1% of calls) \
         against the exact-calls tree of the same round; hot-function precision (functions with \
         ≥ 1% of sampled self time that have ≥ 0.5% in the reference) against native stack \
         samples every 0.1 ms in the same round. The period in a label is the stack samples'; \
         PEP's bursts come every 250 µs unless the label says otherwise.\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Summary\n\n{summary}\n## Per workload\n\n{table}",
        machine(),
        match args.load {
            0 => "none (a quiet machine)".to_string(),
            n => format!("{n} busy process(es) beside every run"),
        },
        crate::reproduce(args, " --contexts"),
    );
    crate::write_results(args, root, "contexts", &doc)
}
