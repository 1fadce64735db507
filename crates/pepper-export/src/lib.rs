//! Exports of a profile's calling contexts (or, for a profile without them, its functions'
//! executions), for the tools people already use:
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
mod html;
mod pprof;
#[cfg(test)]
mod testing;

pub use firefox::firefox;
pub use html::{html, HtmlOptions};
pub use pprof::pprof;

use pepper_profile::{ContextKind, ContextNode, Contexts, Profile};
use std::borrow::Cow;

/// The tree to export: the profile's calling contexts or, for a profile without them
/// (exact paths or edges, targeted, ephemeral), a flat one with every function under the
/// root, valued by its path executions (paths modes) or branch executions (edge modes).
pub fn contexts(p: &Profile) -> anyhow::Result<Cow<'_, Contexts>> {
    if let Some(c) = &p.contexts {
        return Ok(Cow::Borrowed(c));
    }
    let mut per_func = std::collections::BTreeMap::<u32, u64>::new();
    if p.paths.is_empty() {
        for b in &p.branches {
            let e = per_func.entry(b.func).or_default();
            *e = e.saturating_add(b.total());
        }
    } else {
        for x in &p.paths {
            let e = per_func.entry(x.func).or_default();
            *e = e.saturating_add(x.count);
        }
    }
    per_func.retain(|_, v| *v > 0);
    anyhow::ensure!(
        !per_func.is_empty(),
        "the profile has neither calling contexts nor counts to export ({} mode)",
        p.mode.name()
    );
    let node = |parent: Option<u32>, func: u32, calls: u64| ContextNode {
        parent,
        func,
        site: None,
        detached: false,
        inferred: false,
        calls,
        self_us: 0,
        edge_us: 0,
    };
    let mut nodes = vec![node(None, u32::MAX, 0)];
    nodes.extend(per_func.into_iter().map(|(f, v)| node(Some(0), f, v)));
    Ok(Cow::Owned(Contexts {
        kind: ContextKind::Exact,
        call_sites: Vec::new(),
        nodes,
        hot_functions: Vec::new(),
        imports: Vec::new(),
        sampling: None,
        overflow: 0,
    }))
}

/// What the exported values mean.
pub fn unit(p: &Profile, c: &Contexts) -> (&'static str, &'static str) {
    match (&p.contexts, c.kind) {
        (None, _) if !p.paths.is_empty() => ("path executions", "count"),
        (None, _) => ("branch executions", "count"),
        (Some(_), ContextKind::Sampled) => ("wall", "microseconds"),
        (Some(_), ContextKind::Exact) => ("calls", "count"),
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
    let (name, unit) = unit(p, &c);
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!("pepper: {}", p.module.path);
    opts.count_name = format!("{name} ({unit})");
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), out)
        .map_err(|e| anyhow::anyhow!("rendering the flame graph: {e}"))
}
