//! Exports of a profile's calling contexts, for the tools people already use:
//!
//! - [`folded`]: one line per context, `outer;...;leaf value` (Brendan Gregg's folded
//!   stacks, what `inferno` and `flamegraph.pl` read);
//! - [`flamegraph`]: an SVG rendered by `inferno` from those lines;
//! - [`pprof`]: gzipped pprof protobuf (`go tool pprof`, Grafana, speedscope);
//! - [`firefox`]: the Firefox profiler's processed format (<https://profiler.firefox.com>),
//!   written with `fxprof-processed-profile`, the version wasmtime's guest profiler uses.
//!
//! Values: sampled trees export self wall time (µs), exact trees call counts. Nodes with no
//! value are implied by their descendants.

mod firefox;
mod pprof;

pub use firefox::firefox;
pub use pprof::pprof;

use pepper_profile::{ContextKind, Contexts, Profile};

/// The profile's contexts, or an error a user can act on.
pub fn contexts(p: &Profile) -> anyhow::Result<&Contexts> {
    p.contexts.as_ref().ok_or_else(|| {
        anyhow::anyhow!(
            "the profile has no calling contexts ({} mode without --contexts); record one with \
             `pepper run` (PEP collects them by default), `--mode calls` or `--mode exact-calls`",
            p.mode.name()
        )
    })
}

/// What the exported values mean.
pub fn unit(c: &Contexts) -> (&'static str, &'static str) {
    match c.kind {
        ContextKind::Sampled => ("wall", "microseconds"),
        ContextKind::Exact => ("calls", "count"),
    }
}

/// A frame's display name.
pub(crate) fn frame_name(p: &Profile, func: u32) -> String {
    p.function_name(func)
}

/// Folded stacks: `outer;...;leaf value` per context with a non-zero value, in tree order.
/// Frames are function names; a detached subtree (its outer frames unknown) starts with
/// `[detached]`.
pub fn folded(p: &Profile) -> anyhow::Result<String> {
    let c = contexts(p)?;
    let mut out = String::new();
    for (i, v) in c.valued() {
        let chain = c.ancestry(i);
        if c.nodes[chain[0]].detached {
            out.push_str("[detached];");
        }
        let names: Vec<String> = chain
            .iter()
            .map(|&n| frame_name(p, c.nodes[n].func).replace([';', ' '], "_"))
            .collect();
        out.push_str(&names.join(";"));
        out.push(' ');
        out.push_str(&v.to_string());
        out.push('\n');
    }
    Ok(out)
}

/// A flame graph SVG of the folded stacks, rendered by `inferno`.
pub fn flamegraph(p: &Profile, out: impl std::io::Write) -> anyhow::Result<()> {
    let folded = folded(p)?;
    let c = contexts(p)?;
    let (name, unit) = unit(c);
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!("pepper: {}", p.module.path);
    opts.count_name = format!("{name} ({unit})");
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), out)
        .map_err(|e| anyhow::anyhow!("rendering the flame graph: {e}"))
}
