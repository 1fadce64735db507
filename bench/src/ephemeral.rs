//! `pepper-bench --ephemeral`: ephemeral instrumentation side by side with the
//! uninstrumented module (twice: the second copy is the noise) and exact edges (the
//! reference), at several persistences, rounds interleaved. Accuracy per round against the
//! exact-edges profile of the same round. Writes `bench/results/ephemeral.md`.

use crate::{
    geomean_pct, machine, mean_worst_pct, median, pct, profile_of, selected, shuffled, Args,
};
use anyhow::Result;
use pepper_profile::compare::compare;
use pepper_profile::Mode;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// The paper's epoch, and `pepper run`'s default.
const EPOCH: Duration = Duration::from_millis(10);

struct Variant {
    label: String,
    mode: Mode,
    persistence: Option<u32>,
    epoch: Duration,
    /// In windows (`--window`): how long each epoch's window is open.
    window: Option<Duration>,
    inst: pepper_wasm::Instrumented,
    prepared: pepper_runtime::Prepared,
    times: Vec<f64>,
    /// Per round: edge relative overlap, edge absolute overlap, hot biases within 5 points.
    accuracy: Vec<[f64; 3]>,
}

pub fn main(args: &Args, root: &Path) -> Result<()> {
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let build = root.join("bench/workloads/build");
    type Config = (String, Mode, Option<u32>, Duration, Option<Duration>);
    let mut configs: Vec<Config> = vec![
        ("none".into(), Mode::None, None, EPOCH, None),
        ("none A/A".into(), Mode::None, None, EPOCH, None),
        ("exact-edges".into(), Mode::ExactEdges, None, EPOCH, None),
    ];
    // P=0: never armed, the clean code's cost alone (the floor of this design).
    for p in [0, 10, 1000] {
        configs.push((
            format!("ephemeral P={p}"),
            Mode::Ephemeral,
            Some(p),
            EPOCH,
            None,
        ));
    }
    let longer = Duration::from_millis(100);
    for p in [1000, 100] {
        configs.push((
            format!("ephemeral P={p}@100ms"),
            Mode::Ephemeral,
            Some(p),
            longer,
            None,
        ));
    }
    // Windows: one module-wide flag; W=0 never opens one, the clean code's cost alone.
    for us in [0, 250, 500, 1000] {
        configs.push((
            format!("ephemeral windows W={us}us"),
            Mode::Ephemeral,
            Some(0),
            EPOCH,
            Some(Duration::from_micros(us)),
        ));
    }
    let mut table = String::new();
    writeln!(table, "| workload | variant | median run ms | overhead | edge rel | edge abs | hot biases within 5 points | epochs |")?;
    writeln!(table, "|---|---|---|---|---|---|---|---|")?;
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut accs: Vec<Vec<[f64; 3]>> = vec![Vec::new(); configs.len()];
    for (w, wasm, cache) in selected(args, &build)? {
        let mut variants = Vec::new();
        for (label, mode, persistence, epoch, window) in &configs {
            let inst = pepper_wasm::instrument(
                &wasm,
                &pepper_wasm::InstrumentOptions {
                    mode: *mode,
                    ephemeral_windows: window.is_some(),
                    ..Default::default()
                },
            )?;
            let prepared = pepper_runtime::Prepared::new(
                &inst.wasm,
                &pepper_runtime::EngineOptions {
                    cache_dir: cache.clone(),
                    branch_hints: inst.wants_branch_hinting(),
                    ..Default::default()
                },
            )?;
            variants.push(Variant {
                label: label.clone(),
                mode: *mode,
                persistence: *persistence,
                epoch: *epoch,
                window: *window,
                inst,
                prepared,
                times: Vec::new(),
                accuracy: Vec::new(),
            });
        }
        let mut epochs = vec![0u64; variants.len()];
        for round in 0..=rounds {
            let results = shuffled(&mut variants, round, |v| {
                let cfg = w
                    .options(
                        pepper_wasm::InstrumentOptions {
                            mode: v.mode,
                            ephemeral_windows: v.window.is_some(),
                            ..Default::default()
                        },
                        pepper_runtime::SamplingOptions {
                            persistence: v.persistence.unwrap_or_default(),
                            epoch: v.epoch,
                            window: v.window.unwrap_or_default(),
                            ..Default::default()
                        },
                    )
                    .run_config(&v.inst);
                let r = v.prepared.run(&cfg)?;
                anyhow::ensure!(r.exit_code == 0, "{} exited {}", w.name, r.exit_code);
                if round > 0 {
                    v.times.push(r.run.as_secs_f64() * 1e3);
                }
                Ok(r)
            })?;
            if round > 0 {
                let reference = profile_of(&variants[2].inst, &results[2]);
                for (k, (v, r)) in variants.iter_mut().zip(&results).enumerate() {
                    if v.mode != Mode::Ephemeral {
                        continue;
                    }
                    epochs[k] = r.epochs;
                    let a = compare(&reference, &profile_of(&v.inst, r));
                    v.accuracy.push([
                        a.edge_relative_overlap.unwrap_or(f64::NAN),
                        a.edge_absolute_overlap.unwrap_or(f64::NAN),
                        a.hot_biases_within_5pt.unwrap_or(f64::NAN),
                    ]);
                }
            }
            eprintln!("bench: {} round {round}/{rounds}", w.name);
        }
        for (k, v) in variants.iter().enumerate() {
            let (ratio, acc) = crate::tally(
                &v.times,
                &variants[0].times,
                &v.accuracy,
                (&mut ratios[k], &mut accs[k]),
            );
            writeln!(
                table,
                "| {} | {} | {:.1} | {:+.1}% | {} | {} | {} | {} |",
                w.name,
                v.label,
                median(&v.times),
                (ratio - 1.0) * 100.0,
                pct(acc[0]),
                pct(acc[1]),
                pct(acc[2]),
                if v.persistence.is_some() {
                    epochs[k].to_string()
                } else {
                    String::new()
                }
            )?;
        }
    }
    let mut summary = String::new();
    writeln!(summary, "| variant | overhead (geomean) | worst | edge rel (mean / worst) | edge abs (mean / worst) | hot biases within 5 points (mean / worst) |")?;
    writeln!(summary, "|---|---|---|---|---|---|")?;
    for (k, (label, ..)) in configs.iter().enumerate() {
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
            "| {label} | {:+.1}% | {:+.1}% | {} | {} | {} |",
            geomean_pct(&ratios[k]),
            (worst - 1.0) * 100.0,
            acc(0),
            acc(1),
            acc(2)
        )?;
    }
    let doc = format!(
        "# pepper benchmark: ephemeral instrumentation\n\n\
         Machine: {}. wasmtime 48.0.8. Epoch {} ms unless the variant says otherwise; P is \
         the persistence (`--persistence`: function entries and outermost loop iterations \
         each function records per epoch); P=0 is never armed, the clean code's cost alone. \
         Windows (`--window W`): one module-wide flag open for W at the start of every \
         epoch, nothing counted in clean code, counts scaled by the run's time over the \
         windows' (measured; the epoch thread ends a window by spinning, so it lasts what was \
         asked); W=0 \
         never opens one after the start, the clean code's cost alone. \
         Rounds: {rounds} interleaved, in a fresh shuffled order each round (plus one \
         warm-up). Overhead: median over rounds of the per-round ratio to the uninstrumented \
         run (guest run time, compilation excluded). Accuracy (median over rounds) against \
         the exact-edges profile of the same round: `pepper compare`'s edge relative and \
         absolute overlap, and the share of the hottest branches carrying 95% of the \
         executions whose bias is within 5 points.\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Summary\n\n{summary}\n## Per workload\n\n{table}",
        machine(),
        EPOCH.as_millis(),
        crate::reproduce(args, " --ephemeral"),
    );
    crate::write_results(args, root, "ephemeral", &doc)
}
