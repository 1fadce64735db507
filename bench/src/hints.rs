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
use pepper_wasm::inline::{self, InlineOptions};
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

/// What a variant does with the chosen hints.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Use {
    /// A hint section.
    Section,
    /// Unlikely `if`s' arms swapped (`pepper hints --layout`), and the hint section.
    Layout,
    /// Arms swapped, no hint section: what pepper does without the engine's help.
    LayoutOnly,
    /// The hottest direct call sites inlined (`pepper hints --inline`), and the hint
    /// section (the chosen hints, moved and copied with the code).
    Inline,
    /// Inlined, no hint section.
    InlineOnly,
}

struct Spec {
    label: &'static str,
    source: Source,
    opts: HintOptions,
    used: Use,
    what: &'static str,
}

fn specs() -> Vec<Spec> {
    let likely = HintOptions::default();
    let all = {
        let mut hint = HintOptions::default();
        hint.unlikely_br_if = true;
        hint
    };
    vec![
        Spec {
            label: "unhinted",
            source: Source::None,
            opts: likely.clone(),
            used: Use::Section,
            what: "the original module (the baseline)",
        },
        Spec {
            label: "unhinted A/A",
            source: Source::None,
            opts: likely.clone(),
            used: Use::Section,
            what: "the original module again: the noise",
        },
        Spec {
            label: "pep",
            source: Source::Pep,
            opts: likely.clone(),
            used: Use::Section,
            what: "`pepper hints` defaults on a PEP profile of the other input",
        },
        Spec {
            label: "pep +unlikely-br_if",
            source: Source::Pep,
            opts: all.clone(),
            used: Use::Section,
            what: "also br_ifs that rarely jump (their targets marked cold)",
        },
        Spec {
            label: "pep, arms swapped",
            source: Source::Pep,
            opts: likely.clone(),
            used: Use::LayoutOnly,
            what: "the arms of unlikely `if`s with an `else` swapped so the likely arm falls through (`pepper hints --layout`), no hint section: pepper's own layout",
        },
        Spec {
            label: "pep, arms swapped + hints",
            source: Source::Pep,
            opts: likely.clone(),
            used: Use::Layout,
            what: "`pepper hints --layout`: arms swapped and the hint section",
        },
        Spec {
            label: "pep, inlined",
            source: Source::Pep,
            opts: likely.clone(),
            used: Use::InlineOnly,
            what: "the hottest direct call sites inlined from the PEP profile's call counts (`pepper hints --inline` defaults), no hint section",
        },
        Spec {
            label: "pep, inlined + hints",
            source: Source::Pep,
            opts: likely.clone(),
            used: Use::Inline,
            what: "`pepper hints --inline`: inlined, and the hint section",
        },
        Spec {
            label: "exact-edges",
            source: Source::ExactEdges,
            opts: likely,
            used: Use::Section,
            what: "defaults on an exact-edges profile of the other input",
        },
    ]
}

/// `wasm` through Binaryen's `wasm-opt -O2` (every feature allowed, as the workloads use
/// several).
fn wasm_opt(wasm: &[u8]) -> Result<Vec<u8>> {
    let dir = std::env::temp_dir();
    let stem = format!("pepper-bench-wasm-opt-{}", std::process::id());
    let (input, output) = (
        dir.join(format!("{stem}.in.wasm")),
        dir.join(format!("{stem}.out.wasm")),
    );
    std::fs::write(&input, wasm)?;
    let status = std::process::Command::new("wasm-opt")
        .args(["-O2", "--all-features"])
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .status()
        .context("running wasm-opt (install Binaryen: apt-get install binaryen)")?;
    anyhow::ensure!(status.success(), "wasm-opt failed: {status}");
    let out = std::fs::read(&output)?;
    let _ = (std::fs::remove_file(&input), std::fs::remove_file(&output));
    Ok(out)
}

/// A profile of `wasm` on `args`, recorded in-process as `pepper run` would; PEP's with
/// its call-site counters (`pepper run` counts them next to its native stack samples; the
/// exact context tree here needs no sampler for them, and counts the same calls).
fn train(wasm: &[u8], w: &crate::Workload, mode: Mode) -> Result<Profile> {
    let opts = {
        let mut instrument = pepper_wasm::InstrumentOptions::default();
        instrument.mode = mode;
        instrument.contexts = match mode {
            Mode::Pep => pepper_wasm::ContextMode::Exact,
            _ => pepper_wasm::ContextMode::Off,
        };
        instrument
    };
    let inst = pepper_wasm::instrument(wasm, &opts)?;
    let mut cfg = w.options(opts, Default::default()).run_config(&inst);
    cfg.wasi.args = w.other_args.clone();
    let r = pepper_runtime::run(&w.runnable(&inst.wasm), &cfg)?;
    Ok(crate::profile_of(&inst, &r))
}

struct Variant {
    prepared: pepper_runtime::Prepared,
    /// The hints written (and ifs swapped).
    hints: String,
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
        let wasm = match args.wasm_opt {
            true => wasm_opt(&wasm).with_context(|| format!("wasm-opt -O2 on {}", w.name))?,
            false => wasm,
        };
        let pep = train(&wasm, &w, Mode::Pep).context("PEP training run")?;
        let edges = train(&wasm, &w, Mode::ExactEdges).context("exact-edges training run")?;
        let mut variants = Vec::new();
        for spec in &specs {
            let (module, n) = match spec.source {
                Source::None => (wasm.clone(), "0".to_string()),
                Source::Pep | Source::ExactEdges => {
                    let p = if spec.source == Source::Pep {
                        &pep
                    } else {
                        &edges
                    };
                    let (h, _) = hints::choose(&wasm, &p.branches, &spec.opts)?;
                    match spec.used {
                        Use::Section => (hints::write(&wasm, &h)?, h.len().to_string()),
                        Use::Inline | Use::InlineOnly => {
                            let sites = p.contexts.as_ref().map_or(&[][..], |c| &c.call_sites);
                            let (inlined, moved, s) =
                                inline::inline(&wasm, sites, &h, &InlineOptions::default())?;
                            let section = if spec.used == Use::Inline {
                                &moved[..]
                            } else {
                                &[]
                            };
                            let n = format!(
                                "{} ({} sites inlined, {:.0}% of calls)",
                                section.len(),
                                s.inlined,
                                100.0 * s.inlined_calls as f64 / s.total_calls.max(1) as f64
                            );
                            (hints::write(&inlined, section)?, n)
                        }
                        Use::Layout | Use::LayoutOnly => {
                            let (laid, moved, s) = hints::lay_out(&wasm, &h)?;
                            let section = if spec.used == Use::Layout {
                                &moved[..]
                            } else {
                                &[]
                            };
                            let n = format!("{} ({} ifs swapped)", section.len(), s.swapped);
                            (hints::write(&laid, section)?, n)
                        }
                    }
                }
            };
            let prepared = pepper_runtime::Prepared::new(
                &w.runnable(&module),
                &pepper_runtime::EngineOptions::default()
                    .with_cache_dir(cache.clone())
                    .with_branch_hints(true),
            )?;
            variants.push(Variant {
                prepared,
                hints: n,
                times: Vec::new(),
            });
        }
        let cfg = {
            let mut run = pepper_runtime::RunConfig::default();
            run.wasi.args = w.args.clone();
            run.wasi.dirs = w.dirs.clone();
            run
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
         variant{}. Hints come from a profile of the workload's other input (the `other_args` \
         of `bench/src/main.rs`) and are chosen by `pepper hints`' rule: a branch run at \
         least {} times whose more frequent outcome has at least {:.0}% of its executions. \
         Rounds: {rounds} interleaved, in a fresh shuffled order each round (plus one \
         warm-up). Speedup: median over rounds of the unhinted run's time over the \
         variant's in the same round (guest run time, compilation excluded).\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Summary\n\n{summary}\n## Per workload\n\n{table}",
        machine(),
        match args.wasm_opt {
            true =>
                "; every workload optimized by Binaryen's `wasm-opt -O2 --all-features` \
                     (version 108, Debian's `binaryen`) first, as production builds are, \
                     which turns many `br_if`s into `if`s (clang's output has none)",
            false => "",
        },
        HintOptions::default().min_count,
        HintOptions::default().min_bias * 100.0,
        crate::reproduce(args, " --hints"),
    );
    let name = match args.wasm_opt {
        true => "hints-wasm-opt",
        false => "hints",
    };
    crate::write_results(args, root, name, &doc)
}
