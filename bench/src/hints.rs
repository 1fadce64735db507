//! `pepper-bench --hints`: does a profile make the program faster? Per workload, a profile
//! is recorded on the workload's *other* input (as a user would train on one input and run
//! on others), turned into branch hints by `pepper_wasm::hints`, and the hinted module is
//! timed against the original, both compiled with wasmtime's branch hinting on, rounds
//! interleaved. An identical copy of the original is timed too, so the table shows the
//! noise (A/A) next to each speedup. Writes `bench/results/hints.md`.

use crate::{geomean_pct, machine, median, paired_ratio, selected, shuffled, Args};
use anyhow::{Context, Result};
use pepper_profile::{Mode, Profile};
use pepper_wasm::hints::{self, HintOptions};
use std::fmt::Write as _;
use std::path::Path;

/// Where a variant's hints come from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    /// No hint section (the original module).
    None,
    /// A PEP(64,17) run with the sampler thread, `pepper run`'s default.
    Pep,
    /// An exact-edges run: the same choice from exact counts.
    ExactEdges,
}

struct Spec {
    label: &'static str,
    source: Source,
    opts: HintOptions,
    what: &'static str,
}

fn specs() -> Vec<Spec> {
    let likely = HintOptions::default();
    let all = HintOptions {
        unlikely_br_if: true,
        ..HintOptions::default()
    };
    vec![
        Spec {
            label: "unhinted",
            source: Source::None,
            opts: likely.clone(),
            what: "the original module (the baseline)",
        },
        Spec {
            label: "unhinted A/A",
            source: Source::None,
            opts: likely.clone(),
            what: "the original module again: the noise",
        },
        Spec {
            label: "pep",
            source: Source::Pep,
            opts: likely.clone(),
            what: "`pepper hints` defaults on a PEP profile of the other input",
        },
        Spec {
            label: "pep +unlikely-br_if",
            source: Source::Pep,
            opts: all.clone(),
            what: "also br_ifs that rarely jump (their targets marked cold)",
        },
        Spec {
            label: "exact-edges",
            source: Source::ExactEdges,
            opts: likely,
            what: "defaults on an exact-edges profile of the other input",
        },
    ]
}

/// A profile of `wasm` on `args`, recorded in-process as `pepper run` would.
fn train(wasm: &[u8], w: &crate::Workload, mode: Mode) -> Result<Profile> {
    let inst = pepper_wasm::instrument(
        wasm,
        &pepper_wasm::InstrumentOptions {
            mode,
            ..Default::default()
        },
    )?;
    let mut cfg = w
        .options(
            pepper_wasm::InstrumentOptions {
                mode,
                ..Default::default()
            },
            Default::default(),
        )
        .run_config(&inst);
    cfg.args = w.other_args.clone();
    let r = pepper_runtime::run(&inst.wasm, &cfg)?;
    Ok(crate::profile_of(&inst, &r))
}

struct Variant {
    prepared: pepper_runtime::Prepared,
    hints: usize,
    times: Vec<f64>,
}

pub fn main(args: &Args, root: &Path) -> Result<()> {
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let build = root.join("bench/workloads/build");
    let specs = specs();
    let mut table = String::new();
    writeln!(
        table,
        "| workload | variant | hints | median run ms | speedup vs unhinted |"
    )?;
    writeln!(table, "|---|---|---|---|---|")?;
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    for (w, wasm, cache) in selected(args, &build)? {
        let pep = train(&wasm, &w, Mode::Pep).context("PEP training run")?;
        let edges = train(&wasm, &w, Mode::ExactEdges).context("exact-edges training run")?;
        let mut variants = Vec::new();
        for spec in &specs {
            let (module, n) = match spec.source {
                Source::None => (wasm.clone(), 0),
                Source::Pep | Source::ExactEdges => {
                    let p = if spec.source == Source::Pep {
                        &pep
                    } else {
                        &edges
                    };
                    let (h, _) = hints::choose(&wasm, &p.branches, &spec.opts)?;
                    (hints::write(&wasm, &h)?, h.len())
                }
            };
            let prepared = pepper_runtime::Prepared::new(
                &module,
                &pepper_runtime::EngineOptions {
                    cache_dir: cache.clone(),
                    epoch_interruption: false,
                    branch_hints: true,
                },
            )?;
            variants.push(Variant {
                prepared,
                hints: n,
                times: Vec::new(),
            });
        }
        let cfg = pepper_runtime::RunConfig {
            args: w.args.clone(),
            dirs: w.dirs.clone(),
            ..Default::default()
        };
        // Round 0 warms up and is not counted.
        for round in 0..=rounds {
            shuffled(&mut variants, round, |v| {
                let r = v.prepared.run(&cfg)?;
                anyhow::ensure!(r.exit_code == 0, "{} exited {}", w.name, r.exit_code);
                if round > 0 {
                    v.times.push(r.run.as_secs_f64() * 1e3);
                }
                Ok(())
            })?;
            eprintln!("bench: {} round {round}/{rounds}", w.name);
        }
        for (k, (v, spec)) in variants.iter().zip(&specs).enumerate() {
            // A speedup: the baseline's time over this variant's, paired per round.
            let ratio = 1.0 / paired_ratio(&v.times, &variants[0].times);
            ratios[k].push(ratio);
            writeln!(
                table,
                "| {} | {} | {} | {:.1} | {:+.1}% |",
                w.name,
                spec.label,
                v.hints,
                median(&v.times),
                (ratio - 1.0) * 100.0
            )?;
        }
    }
    let mut summary = String::new();
    writeln!(
        summary,
        "| variant | speedup (geomean) | slowest workload | what |"
    )?;
    writeln!(summary, "|---|---|---|---|")?;
    for (k, spec) in specs.iter().enumerate() {
        let worst = ratios[k].iter().copied().fold(f64::NAN, f64::min);
        writeln!(
            summary,
            "| {} | {:+.1}% | {:+.1}% | {} |",
            spec.label,
            geomean_pct(&ratios[k]),
            (worst - 1.0) * 100.0,
            spec.what
        )?;
    }
    let doc = format!(
        "# pepper benchmark: branch hints\n\n\
         Machine: {}. wasmtime 48.0.8 with `Config::wasm_branch_hinting(true)` for every \
         variant. Hints come from a profile of the workload's other input (the `other_args` \
         of `bench/src/main.rs`) and are chosen by `pepper hints`' rule: a branch run at \
         least {} times whose more frequent outcome has at least {:.0}% of its executions. \
         Rounds: {rounds} interleaved, in a fresh shuffled order each round (plus one \
         warm-up). Speedup: median over rounds of the unhinted run's time over the \
         variant's in the same round (guest run time, compilation excluded).\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Summary\n\n{summary}\n## Per workload\n\n{table}",
        machine(),
        HintOptions::default().min_count,
        HintOptions::default().min_bias * 100.0,
        crate::reproduce(args, " --hints"),
    );
    crate::write_results(args, root, "hints", &doc)
}
