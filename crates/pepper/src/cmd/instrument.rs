//! `pepper instrument`: write the rewritten module for inspection or use elsewhere.

use super::{print_warnings, read_unit, ModeArg};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Write the instrumented module without running it.
///
/// The output imports nothing new: counters live in an extra memory exported as
/// `pepper:counters` (needs multi-memory, on by default in wasmtime), which also holds
/// the switch's flag where the module switches between clean and instrumented code
/// (PEP's bursts, ephemeral windows). Nothing of pepper's is in the program's memory.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to instrument for.
    #[arg(long, value_enum, default_value = "exact-paths")]
    mode: ModeArg,
    #[command(flatten)]
    guided: super::GuideArgs,
    /// Exact edges: count every loop iteration on an edge instead of reading loops'
    /// induction variables at their exits (see `pepper run --help`).
    #[arg(long)]
    no_loop_counts: bool,
    /// PEP: switchable copies, the flag checked where this says (see `pepper run --help`).
    #[arg(long, value_enum, default_value = "off")]
    switch: super::run::SwitchArg,
    /// Calling contexts from native stack samples: call sites count their calls.
    #[arg(long)]
    contexts: bool,
    /// Inside a component: which core modules to instrument (see `pepper run --help`).
    #[arg(long, default_value = "all", value_name = "all|program|NAME,...", value_parser = super::parse_modules)]
    modules: pepper_wasm::component::ModuleSelection,
    /// Output file.
    #[arg(short, long)]
    output: PathBuf,
    /// Input module (`.wasm` or `.wat`).
    input: PathBuf,
}

pub fn run(a: Args) -> Result<i32> {
    let unit = read_unit(&a.input, &a.modules)?;
    let wasm = &unit.core;
    let guide = a
        .guided
        .guide
        .as_deref()
        .and_then(|g| super::run::load_guide(g, wasm))
        .map(std::sync::Arc::new);
    let opts = {
        let mut instrument = pepper_wasm::InstrumentOptions::default();
        instrument.mode = a.mode.into();
        instrument.guide = guide;
        instrument.cold_threshold = a.guided.cold_threshold;
        instrument.loop_threshold = a.guided.loop_threshold;
        instrument.obvious = a.guided.obvious;
        instrument.loop_counts = !a.no_loop_counts;
        instrument.module_slot = (unit.component.as_ref()).map_or(0, |c| c.profiled_module as u32);
        instrument.switch = a.switch.placement();
        instrument.contexts = if a.contexts {
            pepper_wasm::ContextMode::Native
        } else {
            pepper_wasm::ContextMode::Off
        };
        instrument
    };
    let out = pepper_wasm::instrument(wasm, &opts)
        .with_context(|| format!("instrumenting {}", a.input.display()))?;
    // A component's other selected modules, each with a memory tag of its own.
    let others = (unit.others.iter())
        .map(|o| {
            let mut opts = opts.clone();
            opts.module_slot = o.index as u32;
            opts.guide = None;
            let i = pepper_wasm::instrument(&o.bytes, &opts)
                .with_context(|| format!("instrumenting core module {}", o.name))?;
            print_warnings(&i.plan.warnings, 3);
            Ok(i.wasm)
        })
        .collect::<Result<Vec<_>>>()?;
    print_warnings(&out.plan.warnings, 10);
    if !out.plan.dropped_sections.is_empty() {
        eprintln!(
            "pepper: left out, since they locate code by offset and rewriting moved it: {}",
            out.plan.dropped_sections.join(", ")
        );
    }
    // A component gets its selected modules back instrumented, the rest as it was.
    let others: Vec<&[u8]> = others.iter().map(Vec::as_slice).collect();
    let written = unit.wrap_all(&out.wasm, &others);
    std::fs::write(&a.output, &written)
        .with_context(|| format!("writing {}", a.output.display()))?;
    eprintln!(
        "pepper: wrote {} ({} -> {} bytes, {} functions instrumented)",
        a.output.display(),
        wasm.len(),
        out.wasm.len(),
        out.plan
            .functions
            .iter()
            .filter(|f| f.skipped.is_none() && f.analysis.is_some())
            .count()
    );
    Ok(0)
}
