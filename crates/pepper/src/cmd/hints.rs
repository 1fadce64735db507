//! `pepper hints`: a profile's branch biases written into the module as branch hints.

use super::{load_profile, read_unit};
use anyhow::{Context, Result};
use pepper_wasm::hints::{self, HintOptions};
use std::path::PathBuf;

/// Write a copy of the module whose branch hint section (`metadata.code.branch_hint`, the
/// WebAssembly branch hinting proposal) says which way each clearly biased `if` and
/// `br_if` goes, as PROFILE measured it.
///
/// Any profile with branch counts serves: exact-paths, exact-edges, pep, targeted. Take it
/// from a run on a typical input, then measure on another:
///
///   pepper run -o train.json prog.wasm -- train-input
///   pepper hints train.json prog.wasm -o prog.hinted.wasm
///   pepper run --mode none --branch-hints prog.hinted.wasm -- real-input
///
/// Only the hint section changes (an existing one is replaced); code, names and DWARF are
/// copied byte for byte, so they stay valid. Engines that know the section (wasmtime with
/// branch hinting on, V8) lay out the unlikely side out of the hot code's way; others
/// ignore it.
///
/// `--layout` also changes the code, for engines that ignore hints: every `if` whose
/// `then` arm is unlikely and that has an `else` gets its arms swapped (`i32.eqz; if
/// <else> else <then> end`), so the likely arm comes right after the branch. The hints
/// move with their instructions; DWARF, whose code offsets would be stale, is dropped.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// A profile of the module (recorded from exactly these bytes).
    profile: PathBuf,
    /// The module to hint (`.wasm` or `.wat`).
    input: PathBuf,
    /// Output file.
    #[arg(short, long)]
    output: PathBuf,
    /// Hint a branch when its more frequent outcome has at least this share of its
    /// executions.
    #[arg(long, default_value_t = HintOptions::default().min_bias)]
    min_bias: f64,
    /// ... and it executed at least this many times in the profile.
    #[arg(long, default_value_t = HintOptions::default().min_count)]
    min_count: u64,
    /// Also hint `br_if`s that rarely jump. wasmtime then marks the jump's *target* cold,
    /// which is often a join that other hot code reaches too (a block's end, a loop
    /// exit); off by default for that reason.
    #[arg(long)]
    unlikely_br_if: bool,
    /// Also swap the arms of unlikely `if`s that have an `else`, so that the likely arm
    /// falls through (see above; DWARF is dropped).
    #[arg(long)]
    layout: bool,
}

pub fn run(a: Args) -> Result<i32> {
    anyhow::ensure!(
        (0.5..=1.0).contains(&a.min_bias),
        "--min-bias must be between 0.5 and 1 (got {})",
        a.min_bias
    );
    let unit = read_unit(&a.input)?;
    let wasm = &unit.core;
    let profile = load_profile(&a.profile)?;
    profile.check_module(wasm).with_context(|| {
        format!(
            "{} is not the module {} describes",
            a.input.display(),
            a.profile.display()
        )
    })?;
    anyhow::ensure!(
        profile.branches.iter().any(|b| b.total() > 0),
        "{} has no branch counts ({} mode); record one with pep, exact-paths, exact-edges or targeted",
        a.profile.display(),
        profile.mode.name()
    );
    let opts = HintOptions {
        min_bias: a.min_bias,
        min_count: a.min_count,
        unlikely_br_if: a.unlikely_br_if,
    };
    let (chosen, summary) = hints::choose(wasm, &profile.branches, &opts)
        .with_context(|| format!("matching {} to {}", a.profile.display(), a.input.display()))?;
    let (laid, chosen) = match a.layout {
        true => {
            let (laid, moved, s) = hints::lay_out(wasm, &chosen)
                .with_context(|| format!("laying out {}", a.input.display()))?;
            eprintln!(
                "pepper: swapped the arms of {} unlikely ifs ({} without an else left as they \
                 were){}",
                s.swapped,
                s.no_else,
                match s.dropped_debug {
                    0 => String::new(),
                    n => format!("; dropped {n} DWARF sections (the code moved)"),
                }
            );
            (Some(laid), moved)
        }
        false => (None, chosen),
    };
    let out = hints::write(laid.as_deref().unwrap_or(wasm), &chosen)
        .with_context(|| format!("hinting {}", a.input.display()))?;
    // A component gets its program's module back hinted, the rest as it was.
    let out = unit.wrap(&out);
    std::fs::write(&a.output, &out).with_context(|| format!("writing {}", a.output.display()))?;
    let likely = chosen.iter().filter(|h| h.likely).count();
    eprintln!(
        "pepper: wrote {} with {} branch hints ({likely} likely, {} unlikely); left out: {} \
         below {:.0}% bias, {} run fewer than {} times, {} rarely-jumping br_if, {} br_table",
        a.output.display(),
        summary.hinted,
        summary.hinted - likely,
        summary.unbiased,
        opts.min_bias * 100.0,
        summary.rare,
        opts.min_count,
        summary.unlikely_br_if,
        summary.tables,
    );
    Ok(0)
}
