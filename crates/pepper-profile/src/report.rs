//! Reports for people (text) and scripts (JSON). The JSON schema is documented in
//! `docs/report-json.md` and versioned with [`REPORT_VERSION`].

use crate::model::{Mode, PathPoint, Profile};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Version of the JSON report schema.
pub const REPORT_VERSION: u32 = 1;

/// How much of each list a text report shows.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ReportOptions {
    pub top_functions: usize,
    pub top_paths: usize,
    pub top_branches: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            top_functions: 10,
            top_paths: 10,
            top_branches: 15,
        }
    }
}

#[derive(Serialize, Debug)]
pub struct JsonReport<'a> {
    pub report_version: u32,
    pub mode: Mode,
    pub module: &'a crate::model::ModuleInfo,
    pub run: &'a crate::model::RunInfo,
    pub functions: Vec<JsonFunction>,
    pub branches: Vec<JsonBranch<'a>>,
    pub paths: Vec<JsonPath<'a>>,
    pub lost: &'a crate::model::Lost,
    /// PEP only: how the paths were sampled (counts are estimated executions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<&'a crate::model::Sampling>,
    /// Calling contexts, as in the profile file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contexts: Option<&'a crate::Contexts>,
    pub warnings: &'a [String],
}

#[derive(Serialize, Debug)]
pub struct JsonFunction {
    pub index: u32,
    pub name: String,
    pub instrumented: bool,
    pub skipped: Option<String>,
    pub num_paths: Option<u64>,
    /// Executed paths (exact-paths) that belong to this function.
    pub path_executions: u64,
    /// Executed branch decisions in this function.
    pub branch_executions: u64,
    /// Targeted mode only: branch outcomes pruned as cold, and executions of paths that
    /// took one (not included in `path_executions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold_edges: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold_executions: Option<u64>,
    /// Targeted mode only: obvious paths counted on a defining edge, and DAG edges left
    /// without path-register code because only obvious paths take them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub obvious_paths: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uninstrumented_edges: Option<u32>,
    /// Targeted mode only: loops whose most frequent path was counted in a local.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub register_loops: Option<u32>,
    /// Sampled modes: why the path and branch counts miss this function's time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub under_sampled: Option<String>,
}

#[derive(Serialize, Debug)]
pub struct JsonBranch<'a> {
    pub func: u32,
    pub func_name: String,
    pub offset: u64,
    pub kind: &'static str,
    pub location: Option<&'a str>,
    /// `if`/`br_if` only.
    pub taken: Option<u64>,
    pub not_taken: Option<u64>,
    /// `br_table` only: one per distinct target.
    pub targets: Option<Vec<JsonTarget<'a>>>,
}

#[derive(Serialize, Debug)]
pub struct JsonTarget<'a> {
    pub target: &'a str,
    pub count: u64,
}

#[derive(Serialize, Debug)]
pub struct JsonPath<'a> {
    pub func: u32,
    pub func_name: String,
    pub number: u64,
    pub count: u64,
    pub start: &'a PathPoint,
    pub end: &'a PathPoint,
    /// The path's edges, as branch decisions in execution order.
    pub edges: Vec<JsonEdge>,
    pub blocks: &'a [u64],
}

#[derive(Serialize, Debug)]
pub struct JsonEdge {
    pub offset: u64,
    pub kind: &'static str,
    pub outcome: String,
}

/// Per function index: (path executions, branch executions).
/// Per function: (path executions, branch executions).
pub fn function_totals(p: &Profile) -> BTreeMap<u32, (u64, u64)> {
    let mut per: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for f in &p.functions {
        per.insert(f.index, (0, 0));
    }
    for path in &p.paths {
        per.entry(path.func).or_default().0 += path.count;
    }
    for b in &p.branches {
        per.entry(b.func).or_default().1 += b.total();
    }
    per
}

/// Builds the JSON report: every branch, every path (sorted by count, then function, number).
pub fn json(p: &Profile) -> JsonReport<'_> {
    let totals = function_totals(p);
    let functions = p
        .functions
        .iter()
        .map(|f| {
            let (path_executions, branch_executions) =
                totals.get(&f.index).copied().unwrap_or_default();
            JsonFunction {
                index: f.index,
                name: p.function_name(f.index),
                instrumented: f.instrumented,
                skipped: f.skipped.clone(),
                num_paths: f.num_paths,
                path_executions,
                branch_executions,
                cold_edges: f.cold_edges,
                cold_executions: f.cold_executions,
                obvious_paths: f.obvious_paths,
                uninstrumented_edges: f.uninstrumented_edges,
                register_loops: f.register_loops,
                under_sampled: f.under_sampled.clone(),
            }
        })
        .collect();
    let branches = p
        .branches
        .iter()
        .map(|b| {
            let two = b.outcomes.len() == 2 && b.kind != crate::BranchKind::BrTable;
            JsonBranch {
                func: b.func,
                func_name: p.function_name(b.func),
                offset: b.offset,
                kind: b.kind.name(),
                location: b.location.as_deref(),
                taken: two.then(|| b.counts[0]),
                not_taken: two.then(|| b.counts[1]),
                targets: (!two).then(|| {
                    b.outcomes
                        .iter()
                        .zip(&b.counts)
                        .map(|(t, &count)| JsonTarget { target: t, count })
                        .collect()
                }),
            }
        })
        .collect();
    let mut paths: Vec<_> = p.paths.iter().collect();
    paths.sort_by_key(|x| (std::cmp::Reverse(x.count), x.func, x.number));
    let paths = paths
        .into_iter()
        .map(|x| JsonPath {
            func: x.func,
            func_name: p.function_name(x.func),
            number: x.number,
            count: x.count,
            start: &x.start,
            end: &x.end,
            edges: x
                .steps
                .iter()
                .map(|s| {
                    let b = &p.branches[s.branch as usize];
                    JsonEdge {
                        offset: b.offset,
                        kind: b.kind.name(),
                        outcome: b.outcomes[s.outcome as usize].clone(),
                    }
                })
                .collect(),
            blocks: &x.blocks,
        })
        .collect();
    JsonReport {
        report_version: REPORT_VERSION,
        mode: p.mode,
        module: &p.module,
        run: &p.run,
        functions,
        branches,
        paths,
        lost: &p.lost,
        sampling: p.sampling.as_ref(),
        contexts: p.contexts.as_ref(),
        warnings: &p.warnings,
    }
}

/// A path end point as the reports print it (`loop@0x2a`, `entry`, ...).
pub fn point(pt: &PathPoint) -> String {
    match pt {
        PathPoint::FunctionEntry => "entry".into(),
        PathPoint::FunctionExit => "exit".into(),
        PathPoint::LoopHeader { offset } => format!("loop@{offset:#x}"),
        PathPoint::Truncation { offset } => format!("cut@{offset:#x}"),
        PathPoint::TailCall { offset } => format!("tail-call@{offset:#x}"),
        PathPoint::Throw { offset } => format!("throw@{offset:#x}"),
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The text report: hottest functions, hottest paths, most-executed branches with biases.
pub fn text(p: &Profile, opts: &ReportOptions) -> String {
    let mut out = String::new();
    let o = &mut out;
    let _ = writeln!(o, "pepper {} profile of {}", p.mode.name(), p.module.path);
    let _ = writeln!(o, "module sha256 {}", p.module.sha256);
    match (&p.run.trap, p.run.exit_code) {
        (Some(t), _) => {
            let _ = writeln!(o, "guest trapped: {t}");
        }
        (None, Some(c)) => {
            let _ = writeln!(o, "guest exit code {c}");
        }
        _ => {}
    }
    let _ = writeln!(
        o,
        "instrument {:.1} ms, compile {:.1} ms, run {:.1} ms",
        p.run.instrument_ms, p.run.compile_ms, p.run.run_ms
    );
    let instrumented = p.functions.iter().filter(|f| f.instrumented).count();
    let _ = writeln!(
        o,
        "{} of {} functions instrumented",
        instrumented,
        p.functions.len()
    );
    for w in &p.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    sampling_text(o, p);
    if p.mode == crate::Mode::Targeted {
        targeted_text(o, p);
    }
    if p.lost.hash_overflow > 0 {
        let _ = writeln!(
            o,
            "warning: {} path executions lost to a full hash table",
            p.lost.hash_overflow
        );
    }

    let all_paths = functions_text(o, p, opts);
    paths_text(o, p, opts, all_paths);
    branches_text(o, p, opts);
    contexts_text(o, p, opts);
    out
}

/// How a sampled profile was sampled, in words.
fn sampling_how(p: &Profile, s: &crate::Sampling) -> String {
    if s.design == "every" {
        format!("every {}th path end recorded in the guest", s.every)
    } else if s.design == "ephemeral" {
        format!(
            "ephemeral, each function's branches recorded for {} entries or outer loop \
             iterations in each of {} epochs of {} us (branch counts: recorded biases \
             times exact entry and loop counts)",
            s.samples, s.ticks, s.interval_us
        )
    } else if s.design == "ephemeral-windows" {
        // The decoder scaled the windows' counts by the guest's time over theirs.
        let on_ms = s.switched_on_us as f64 / 1e3;
        let share = match s.window_scale(p.run.run_ms) {
            Some(scale) => format!(
                " ({:.1}% of the run; branch counts: recorded times {scale:.1})",
                100.0 / scale
            ),
            None => String::new(),
        };
        format!(
            "ephemeral windows{}, every function's branches recorded while a window was \
             open: {on_ms:.1} ms over {} epochs of {} us{share}",
            flag_place(s),
            s.ticks,
            s.interval_us
        )
    } else if s.design == "phase-aware" || s.design == "periodic-intervals" {
        let intervals = p.timeline.as_ref().map_or(&[][..], |t| &t.intervals[..]);
        let profiled = intervals.iter().filter(|i| i.profiled).count();
        let which = if s.design == "phase-aware" {
            let mut phases: Vec<u32> = intervals.iter().filter_map(|i| i.phase).collect();
            phases.sort_unstable();
            phases.dedup();
            let again = if s.stride > 0 {
                format!(" and every {}th of a phase", s.stride)
            } else {
                String::new()
            };
            format!(
                "interval {} of each new phase{again}, {} phases",
                s.samples,
                phases.len()
            )
        } else {
            format!("every {}th", s.samples)
        };
        format!(
            "{profiled} of {} intervals of {} us instrumented ({which}), every path end in \
             them read ({} path ends), each phase's scaled by its intervals",
            intervals.len(),
            s.interval_us,
            s.taken
        )
    } else {
        let weights = match s.weights.as_str() {
            "rate" => ", bursts weighted by the path-end rate at each tick",
            "" | "ticks" => ", bursts weighted by the path ends since the last tick",
            _ => "",
        };
        let idle = if s.idle_ticks > 0 || s.off_cpu_ticks > 0 {
            format!(
                " ({} with the guest idle, weighing nothing; {} with it off its CPU)",
                s.idle_ticks, s.off_cpu_ticks
            )
        } else {
            String::new()
        };
        format!(
            "PEP({},{}) every {} us{weights}: {} samples over {} ticks{idle} of {} path ends",
            s.samples, s.stride, s.interval_us, s.taken, s.ticks, s.path_ends
        )
    }
}

/// How the profile was sampled, and what the switch ran.
/// `, flag in ...` for a switch's flag whose place the profile records.
fn flag_place(s: &crate::Sampling) -> &'static str {
    match s.switch_flag.as_str() {
        "program" => ", flag in the program's memory",
        "pepper" => ", flag in pepper's memory",
        _ => "",
    }
}

fn sampling_text(o: &mut String, p: &Profile) {
    let Some(s) = &p.sampling else { return };
    let how = sampling_how(p, s);
    let _ = writeln!(
        o,
        "sampled: {how}{}; counts below are estimated executions",
        if s.guide.is_some() {
            ", smart numbering from a guide"
        } else {
            ""
        }
    );
    if !s.switch.is_empty() {
        // Switchable instrumentation: how much of the run paid for instrumentation.
        // An embedder's profile has no run time (`RunInfo::run_ms` 0): no share then.
        let on_ms = s.switched_on_us / 1000;
        let on = match p.run.run_ms > 0.0 {
            true => {
                let share = s.switched_on_us as f64 / 1e3 / p.run.run_ms;
                format!("{:.1}% of the run ({on_ms} ms)", 100.0 * share.min(1.0))
            }
            false => format!("{on_ms} ms"),
        };
        let _ = writeln!(
            o,
            "switch ({}{}): instrumented copies on for {on}, {} path ends \
             ({:.2}% of the estimated {})",
            s.switch,
            flag_place(s),
            s.instrumented_path_ends,
            100.0 * s.instrumented_path_ends as f64 / (s.path_ends.max(1)) as f64,
            s.path_ends
        );
        // The estimate is the path-end rate measured in the instrumented copies times
        // the time each burst stands for. Those copies run slower than the clean code
        // the rest of the time is spent in, so totals come out low (well below the exact
        // totals) unless the call-site counters calibrated them; shares between paths,
        // branches and functions are what the bursts sample.
        let _ = match s.calibrated {
            0 => writeln!(
                o,
                "note: with the switch, estimated executions run low (instrumented code is \
                 slower than the clean code it stands for); compare shares, or count every \
                 path end with --switch off"
            ),
            n => writeln!(
                o,
                "calibrated: {n} functions' paths scaled to the entries the call-site \
                 counters counted, the others by their overall ratio (a tight loop in a \
                 function entered rarely may still weigh less than it should)"
            ),
        };
    }
    if s.lost > 0 {
        let _ = writeln!(
            o,
            "warning: {} samples lost (overwritten or table full)",
            s.lost
        );
    }
}

/// Targeted mode (TPP): what the guide pruned, and how much of this run it failed to
/// predict.
fn targeted_text(o: &mut String, p: &Profile) {
    let mut pruned: Vec<&crate::Function> = p
        .functions
        .iter()
        .filter(|f| f.cold_edges.unwrap_or(0) > 0 || f.cold_executions.unwrap_or(0) > 0)
        .collect();
    let hot: u64 = p.paths.iter().map(|x| x.count).sum();
    let cold: u64 = pruned.iter().filter_map(|f| f.cold_executions).sum();
    let _ = writeln!(
        o,
        "targeted: {} functions pruned; {} of {} path executions ({:.2}%) took a cold edge",
        pruned.len(),
        cold,
        hot + cold,
        pct(cold, hot + cold)
    );
    let with_obvious = p
        .functions
        .iter()
        .filter(|f| f.obvious_paths.unwrap_or(0) > 0);
    let (funcs, obvious, bare) = with_obvious.fold((0, 0u64, 0u64), |(n, o, b), f| {
        (
            n + 1,
            o + u64::from(f.obvious_paths.unwrap_or(0)),
            b + u64::from(f.uninstrumented_edges.unwrap_or(0)),
        )
    });
    if obvious > 0 {
        let _ = writeln!(
            o,
            "targeted: {obvious} obvious paths in {funcs} functions counted on a defining edge; \
             {bare} edges need no path-register code"
        );
    }
    let (loop_funcs, loops) = p
        .functions
        .iter()
        .filter_map(|f| f.register_loops.filter(|&n| n > 0))
        .fold((0, 0u64), |(f, n), k| (f + 1, n + u64::from(k)));
    if loops > 0 {
        let _ = writeln!(
            o,
            "targeted: {loops} loops in {loop_funcs} functions counted their most frequent path \
             in a local"
        );
    }
    if pct(cold, hot + cold) > 1.0 {
        let _ = writeln!(
            o,
            "warning: more than 1% of the flow went to cold counters: the guide does not describe this run well"
        );
    }
    pruned.sort_by_key(|f| std::cmp::Reverse(f.cold_executions.unwrap_or(0)));
    for f in pruned
        .iter()
        .filter(|f| f.cold_executions.unwrap_or(0) > 0)
        .take(5)
    {
        let _ = writeln!(
            o,
            "  {:>12} cold executions, {} cold edges, {} hot paths numbered  in {}",
            f.cold_executions.unwrap_or(0),
            f.cold_edges.unwrap_or(0),
            f.num_paths.unwrap_or(0),
            p.function_name(f.index)
        );
    }
}

/// The hottest functions; returns all path executions.
fn functions_text(o: &mut String, p: &Profile, opts: &ReportOptions) -> u64 {
    let mut totals: Vec<(u32, u64, u64)> = function_totals(p)
        .into_iter()
        .map(|(f, (paths, branches))| (f, paths, branches))
        .collect();
    let all_branches: u64 = totals.iter().map(|t| t.2).sum();
    let all_paths: u64 = totals.iter().map(|t| t.1).sum();
    totals.sort_by_key(|t| (std::cmp::Reverse((t.2, t.1)), t.0));
    let _ = writeln!(o, "\nHottest functions (by branch decisions executed)");
    let _ = writeln!(o, "{:>14} {:>6} {:>14}  function", "branches", "%", "paths");
    for t in totals
        .iter()
        .take(opts.top_functions)
        .filter(|t| t.1 + t.2 > 0)
    {
        let _ = writeln!(
            o,
            "{:>14} {:>5.1}% {:>14}  {}",
            t.2,
            pct(t.2, all_branches),
            t.1,
            p.function_name(t.0)
        );
    }

    all_paths
}

/// The hottest paths, each with its branch decisions.
fn paths_text(o: &mut String, p: &Profile, opts: &ReportOptions, all_paths: u64) {
    if !p.paths.is_empty() {
        let mut paths: Vec<_> = p.paths.iter().collect();
        paths.sort_by_key(|x| (std::cmp::Reverse(x.count), x.func, x.number));
        let _ = writeln!(
            o,
            "\nHottest paths ({} distinct, {} executions)",
            p.paths.len(),
            all_paths
        );
        for x in paths.iter().take(opts.top_paths) {
            let _ = writeln!(
                o,
                "{:>14} {:>5.1}%  {} path #{}: {} -> {}",
                x.count,
                pct(x.count, all_paths),
                p.function_name(x.func),
                x.number,
                point(&x.start),
                point(&x.end)
            );
            let steps: Vec<String> = x
                .steps
                .iter()
                .map(|s| {
                    let b = &p.branches[s.branch as usize];
                    let loc = b.place().map(|l| format!(" ({l})")).unwrap_or_default();
                    format!(
                        "{}@{:#x} {}{}",
                        b.kind.name(),
                        b.offset,
                        b.outcomes[s.outcome as usize],
                        loc
                    )
                })
                .collect();
            if steps.is_empty() {
                let _ = writeln!(o, "                 (no branches)");
            }
            for s in steps {
                let _ = writeln!(o, "                 {s}");
            }
        }
    }
}

/// The most executed branches with their biases.
fn branches_text(o: &mut String, p: &Profile, opts: &ReportOptions) {
    let mut branches: Vec<_> = p.branches.iter().filter(|b| b.total() > 0).collect();
    branches.sort_by_key(|b| (std::cmp::Reverse(b.total()), b.id));
    let _ = writeln!(o, "\nBranch biases (most executed first)");
    let _ = writeln!(
        o,
        "{:>14}  {:<8} {:>10}  outcomes",
        "executed", "kind", "offset"
    );
    for b in branches.iter().take(opts.top_branches) {
        let total = b.total();
        // `if`/`br_if`: both outcomes. `br_table`: the arms that ran, busiest first, at
        // most six, so a 90-way interpreter dispatch stays on one readable line.
        let mut outs: Vec<(u64, String)> = b
            .outcomes
            .iter()
            .zip(&b.counts)
            .filter(|(_, &c)| b.kind != crate::BranchKind::BrTable || c > 0)
            .map(|(n, &c)| (c, format!("{n} {:.1}%", pct(c, total))))
            .collect();
        if b.kind == crate::BranchKind::BrTable {
            outs.sort_by_key(|o| std::cmp::Reverse(o.0));
            let more = outs.len().saturating_sub(6);
            outs.truncate(6);
            if more > 0 {
                outs.push((0, format!("... {more} more targets")));
            }
        }
        let outs: Vec<String> = outs.into_iter().map(|o| o.1).collect();
        let loc = b.place().map(|l| format!("  {l}")).unwrap_or_default();
        // A sampled bias says how sure it is (ephemeral profiles' 95% margins).
        let margin = (b.bias_margin)
            .map(|m| format!(" (±{:.1} points)", m * 100.0))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "{:>14}  {:<8} {:>#10x}  {}{}  in {}{}",
            total,
            b.kind.name(),
            b.offset,
            outs.join(", "),
            margin,
            p.function_name(b.func),
            loc
        );
    }
}

/// Hot functions and the hottest calling contexts.
fn contexts_text(o: &mut String, p: &Profile, opts: &ReportOptions) {
    let Some(c) = &p.contexts else { return };
    let n = c.nodes.len().saturating_sub(1);
    match (&c.kind, &c.sampling) {
        (crate::ContextKind::Sampled, Some(s)) => {
            let _ = writeln!(
                o,
                "\nCalling contexts: {n} (sampled every {} us: {} samples, {} in host calls{}{}{})",
                s.interval_us,
                s.samples,
                s.in_host,
                if s.signal_delivery_ns > 0 {
                    format!(
                        ", each signal {:.1} us to reach the guest",
                        s.signal_delivery_ns as f64 / 1e3
                    )
                } else {
                    String::new()
                },
                if s.detached > 0 {
                    format!(", {} detached", s.detached)
                } else {
                    String::new()
                },
                if s.truncated > 0 {
                    format!(", {} cut by the node budget", s.truncated)
                } else {
                    String::new()
                }
            );
            let total: u64 = c.hot_functions.iter().map(|h| h.self_us).sum();
            let _ = writeln!(o, "Hot functions (sampled self time)");
            for h in c.hot_functions.iter().take(opts.top_functions) {
                let blind = p
                    .functions
                    .iter()
                    .any(|f| f.index == h.func && f.under_sampled.is_some());
                let _ = writeln!(
                    o,
                    "  {:>10.1} ms {:>5.1}%  {}{}",
                    h.self_us as f64 / 1e3,
                    pct(h.self_us, total),
                    p.function_name(h.func),
                    if blind {
                        "  [under-sampled: its path and branch counts miss it]"
                    } else {
                        ""
                    }
                );
            }
        }
        _ => {
            let _ = writeln!(o, "\nCalling contexts: {n} (exact: every call counted)");
        }
    }
    let total: u64 = c.valued().map(|(_, v)| v).sum();
    let mut order: Vec<usize> = c.valued().map(|(i, _)| i).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(c.value(i)));
    let unit = match c.kind {
        crate::ContextKind::Sampled => "self time",
        crate::ContextKind::Exact => "calls",
    };
    let _ = writeln!(o, "Hottest contexts (by {unit}; outermost frames elided)");
    for &i in order.iter().take(opts.top_paths) {
        let chain = c.ancestry(i);
        let names: Vec<String> = chain
            .iter()
            .skip(chain.len().saturating_sub(5))
            .map(|&k| p.function_name(c.nodes[k].func))
            .collect();
        let value = match c.kind {
            crate::ContextKind::Sampled => format!("{:.1} ms", c.value(i) as f64 / 1e3),
            crate::ContextKind::Exact => c.value(i).to_string(),
        };
        let _ = writeln!(
            o,
            "  {:>12} {:>5.1}%  {}{}  (depth {}, {} calls)",
            value,
            pct(c.value(i), total),
            if chain.len() > 5 { "... > " } else { "" },
            names.join(" > "),
            chain.len(),
            c.nodes[i].calls
        );
    }
}

#[cfg(test)]
mod tests;
