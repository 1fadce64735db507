//! `pepper hints`: a profile's branch biases written into the module as branch hints.

use super::{load_profile, read_unit};
use anyhow::{Context, Result};
use pepper_wasm::component::ModuleSelection;
use pepper_wasm::hints::{self, HintOptions};
use pepper_wasm::inline::{self, InlineOptions};
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
///
/// `--inline` copies the callee's body into each of the hottest direct call sites (a site
/// that made at least `--inline-min-share` of the profile's calls, into a callee of at most
/// `--inline-max-bytes`), which wasmtime does not do by itself: it compiles each function
/// alone. The profile needs call counts, which `pepper run` records by default:
///
///   pepper hints --inline train.json prog.wasm -o prog.fast.wasm
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
    /// Also inline the hottest direct call sites (see above; DWARF is dropped).
    #[arg(long)]
    inline: bool,
    /// Inline a site that made at least this share of the profile's calls.
    #[arg(long, default_value_t = InlineOptions::default().min_share, requires = "inline")]
    inline_min_share: f64,
    /// Copy no callee whose body is larger than this many bytes.
    #[arg(long, default_value_t = InlineOptions::default().max_callee_bytes, requires = "inline")]
    inline_max_bytes: usize,
}

pub fn run(a: Args) -> Result<i32> {
    anyhow::ensure!(
        (0.5..=1.0).contains(&a.min_bias),
        "--min-bias must be between 0.5 and 1 (got {})",
        a.min_bias
    );
    let profile = load_profile(&a.profile)?;
    // A component's profile covers the core modules it lists (else the program's): each
    // gets its part of the profile as hints.
    let selection = match profile.modules.is_empty() {
        true => ModuleSelection::Program,
        false => ModuleSelection::Named(profile.modules.iter().map(|m| m.name.clone()).collect()),
    };
    let unit = read_unit(&a.input, &selection)?;
    let primary = hint_module(&a, &unit.core, &profile.module_profile(None), None)?;
    let others = (unit.others.iter())
        .map(|o| {
            let part = profile.module_profile(Some(o.index));
            hint_module(&a, &o.bytes, &part, Some(&o.name))
        })
        .collect::<Result<Vec<_>>>()?;
    // A component gets its profiled modules back hinted, the rest as it was.
    let others: Vec<&[u8]> = others.iter().map(Vec::as_slice).collect();
    let out = unit.wrap_all(&primary, &others);
    std::fs::write(&a.output, &out).with_context(|| format!("writing {}", a.output.display()))?;
    eprintln!("pepper: wrote {}", a.output.display());
    Ok(0)
}

/// One core module (`name`d inside a component) with `profile`'s hints, and inlining or
/// layout if asked.
fn hint_module(
    a: &Args,
    wasm: &[u8],
    profile: &pepper_profile::Profile,
    name: Option<&str>,
) -> Result<Vec<u8>> {
    let input = match name {
        Some(n) => format!("{}'s core module {n}", a.input.display()),
        None => a.input.display().to_string(),
    };
    profile.check_module(wasm).with_context(|| {
        format!(
            "{input} is not the module {} describes",
            a.profile.display()
        )
    })?;
    // Inlining is the primary module's (its call sites); another module without counts
    // (one the run never entered) stays as it was.
    let inline = a.inline && name.is_none();
    if name.is_some() && profile.branches.iter().all(|b| b.total() == 0) {
        return Ok(wasm.to_vec());
    }
    anyhow::ensure!(
        inline || profile.branches.iter().any(|b| b.total() > 0),
        "{} has no branch counts ({} mode); record one with pep, exact-paths, exact-edges or targeted",
        a.profile.display(),
        profile.mode.name()
    );
    let opts = {
        let mut hint = HintOptions::default();
        hint.min_bias = a.min_bias;
        hint.min_count = a.min_count;
        hint.unlikely_br_if = a.unlikely_br_if;
        hint
    };
    let (chosen, summary) = hints::choose(wasm, &profile.branches, &opts)
        .with_context(|| format!("matching {} to {}", a.profile.display(), input))?;
    // Inlining first: the profile's call sites are offsets into the module as recorded.
    let (module, chosen) = match inline {
        true => {
            let sites = profile
                .contexts
                .as_ref()
                .map(|c| &c.call_sites[..])
                .filter(|s| s.iter().any(|s| s.calls > 0))
                .with_context(|| {
                    format!(
                        "{} has no call counts; record one with calling contexts on \
                         (`pepper run`'s default)",
                        a.profile.display()
                    )
                })?;
            let opts = {
                let mut inline = InlineOptions::default();
                inline.min_share = a.inline_min_share;
                inline.max_callee_bytes = a.inline_max_bytes;
                inline
            };
            let (out, moved, s) = inline::inline(wasm, sites, &chosen, &opts)
                .with_context(|| format!("inlining into {}", input))?;
            eprintln!(
                "pepper: inlined {} call sites ({:.1}% of the profile's calls), code {} → {} \
                 bytes; left out: {} indirect or of imports, {} callees over {} bytes, {} \
                 unsupported, {} over the growth budget{}",
                s.inlined,
                100.0 * s.inlined_calls as f64 / s.total_calls.max(1) as f64,
                s.code_bytes.0,
                s.code_bytes.1,
                s.not_direct,
                s.too_big,
                opts.max_callee_bytes,
                s.unsupported,
                s.over_budget,
                dropped(s.dropped_debug),
            );
            (std::borrow::Cow::Owned(out), moved)
        }
        false => (std::borrow::Cow::Borrowed(wasm), chosen),
    };
    let (module, chosen) = match a.layout {
        true => {
            let (laid, moved, s) = hints::lay_out(&module, &chosen)
                .with_context(|| format!("laying out {}", input))?;
            eprintln!(
                "pepper: swapped the arms of {} unlikely ifs ({} without an else left as they \
                 were){}",
                s.swapped,
                s.no_else,
                dropped(s.dropped_debug),
            );
            (std::borrow::Cow::Owned(laid), moved)
        }
        false => (module, chosen),
    };
    let out = hints::write(&module, &chosen).with_context(|| format!("hinting {}", input))?;
    let likely = chosen.iter().filter(|h| h.likely).count();
    eprintln!(
        "pepper: {input}: {} branch hints ({likely} likely, {} unlikely); left out: {} \
         below {:.0}% bias, {} run fewer than {} times, {} rarely-jumping br_if, {} br_table",
        chosen.len(),
        chosen.len() - likely,
        summary.unbiased,
        opts.min_bias * 100.0,
        summary.rare,
        opts.min_count,
        summary.unlikely_br_if,
        summary.tables,
    );
    Ok(out)
}

/// What a rewrite that moved code says about the DWARF it dropped.
fn dropped(sections: usize) -> String {
    match sections {
        0 => String::new(),
        n => format!("; dropped {n} DWARF sections (the code moved)"),
    }
}
