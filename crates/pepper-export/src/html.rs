//! One self-contained HTML page of a profile, for people who would rather look than read:
//! the flame graph of its calling contexts, the hottest functions and paths, branch biases
//! laid over the source (when the files are found; offsets otherwise), each hot function's
//! executed control flow coloured by frequency, and the phase time line.

use pepper_profile::report::{function_totals, point};
use pepper_profile::{Branch, Profile};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What the page shows.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HtmlOptions {
    /// Directories to look for source files in (DWARF names them, often by base name).
    pub source_dirs: Vec<PathBuf>,
    /// How many functions, paths and control-flow graphs the page lists.
    pub top: usize,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            source_dirs: Vec::new(),
            top: 10,
        }
    }
}

/// The page.
pub fn html(p: &Profile, opts: &HtmlOptions) -> String {
    let mut o = String::new();
    let title = format!("pepper: {} ({} mode)", p.module.path, p.mode.name());
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{CSS}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    summary(&mut o, p);
    flame(&mut o, p);
    functions(&mut o, p, opts.top);
    paths(&mut o, p, opts.top);
    sources(&mut o, p, opts);
    graphs(&mut o, p, opts.top.min(5));
    timeline(&mut o, p);
    o.push_str("</body></html>\n");
    o
}

const CSS: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 8px;text-align:right}\
th{background:#eee}td.l,th.l{text-align:left}tr:nth-child(even){background:#f7f7f7}\
section{margin:1.5em 0}pre{margin:0}.src td{text-align:left;font:12px monospace;\
white-space:pre}.hot{background:#ffe3d6}.bar{display:inline-block;height:10px;\
background:#d9534f;vertical-align:middle}.warn{color:#a40}.muted{color:#777}\
#flamegraph>svg{width:100%}";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn summary(o: &mut String, p: &Profile) {
    let _ = write!(
        o,
        "<section id=\"summary\"><h2>Run</h2><table><tr><th class=\"l\">module</th>\
         <td class=\"l\">{} (sha256 {})</td></tr><tr><th class=\"l\">arguments</th>\
         <td class=\"l\">{}</td></tr><tr><th class=\"l\">ended</th><td class=\"l\">{}</td></tr>\
         <tr><th class=\"l\">time</th><td class=\"l\">instrument {:.1} ms, compile {:.1} ms, \
         run {:.1} ms</td></tr>",
        esc(&p.module.path),
        esc(&p.module.sha256),
        esc(&p.run.args.join(" ")),
        match (&p.run.trap, p.run.exit_code) {
            (Some(t), _) => esc(t),
            (None, Some(c)) => format!("exit code {c}"),
            _ => String::new(),
        },
        p.run.instrument_ms,
        p.run.compile_ms,
        p.run.run_ms
    );
    if let Some(s) = &p.sampling {
        let _ = write!(
            o,
            "<tr><th class=\"l\">sampling</th><td class=\"l\">{} design, {} samples of {} \
             path ends: counts are estimated executions</td></tr>",
            esc(&s.design),
            s.taken,
            s.path_ends
        );
    }
    o.push_str("</table>");
    for w in &p.warnings {
        let _ = write!(o, "<p class=\"warn\">warning: {}</p>", esc(w));
    }
    o.push_str("</section>\n");
}

/// The flame graph SVG, inline (inferno's own script makes it zoomable and searchable).
/// inferno's fluid drawing takes the SVG's width away for its parent's to rule; inline in
/// a page, an SVG without a width is 300 pixels wide, so the page's style gives it the
/// section's whole width. inferno's script takes the page's first SVG as its own: the
/// flame graph comes before any other.
fn flame(o: &mut String, p: &Profile) {
    let mut svg = Vec::new();
    o.push_str("<section id=\"flamegraph\"><h2>Flame graph</h2>");
    match crate::flamegraph(p, &mut svg) {
        Ok(()) => {
            let svg = String::from_utf8_lossy(&svg);
            // An inline SVG starts at its element: no XML prolog or doctype.
            let start = svg.find("<svg").unwrap_or(0);
            o.push_str(&svg[start..]);
        }
        Err(e) => {
            let _ = write!(o, "<p class=\"muted\">{}</p>", esc(&e.to_string()));
        }
    }
    o.push_str("</section>\n");
}

fn functions(o: &mut String, p: &Profile, top: usize) {
    let mut totals: Vec<(u32, u64, u64)> = function_totals(p)
        .into_iter()
        .map(|(f, (paths, branches))| (f, paths, branches))
        .filter(|t| t.1 + t.2 > 0)
        .collect();
    let all: u64 = totals.iter().map(|t| t.2).sum();
    totals.sort_by_key(|t| (std::cmp::Reverse((t.2, t.1)), t.0));
    o.push_str(
        "<section id=\"functions\"><h2>Hottest functions</h2><table><tr>\
         <th>branch executions</th><th>%</th><th>path executions</th>\
         <th class=\"l\">function</th></tr>",
    );
    let blind = |f: u32| {
        (p.functions.iter())
            .find(|x| x.index == f)
            .and_then(|x| x.under_sampled.as_deref())
    };
    for t in totals.iter().take(top) {
        let share = pct(t.2, all);
        let _ = write!(
            o,
            "<tr><td>{}</td><td><span class=\"bar\" style=\"width:{:.0}px\"></span> {:.1}%</td>\
             <td>{}</td><td class=\"l\">{}{}</td></tr>",
            t.2,
            share,
            share,
            t.1,
            esc(&p.function_name(t.0)),
            if blind(t.0).is_some() {
                " <span class=\"warn\">(under-sampled)</span>"
            } else {
                ""
            }
        );
    }
    o.push_str("</table>");
    // Functions whose counts miss their time, whether or not they made the table (one
    // the estimate missed entirely has no counts to rank it by).
    for f in p.functions.iter().filter(|f| f.under_sampled.is_some()) {
        let _ = write!(
            o,
            "<p class=\"warn\">under-sampled: {}: the stack samples find it far more often \
             than its path and branch counts show, so those are not to be trusted: {}</p>",
            esc(&p.function_name(f.index)),
            esc(f.under_sampled.as_deref().unwrap_or_default())
        );
    }
    o.push_str("</section>\n");
}

fn paths(o: &mut String, p: &Profile, top: usize) {
    if p.paths.is_empty() {
        return;
    }
    let all: u64 = p.paths.iter().map(|x| x.count).sum();
    let mut paths: Vec<_> = p.paths.iter().collect();
    paths.sort_by_key(|x| (std::cmp::Reverse(x.count), x.func, x.number));
    let _ = write!(
        o,
        "<section id=\"paths\"><h2>Hottest paths</h2><p class=\"muted\">{} distinct, {} \
         executions</p><table><tr><th>executions</th><th>%</th><th class=\"l\">path</th>\
         <th class=\"l\">branch decisions</th></tr>",
        p.paths.len(),
        all
    );
    for x in paths.iter().take(top) {
        let steps: Vec<String> = x
            .steps
            .iter()
            .map(|s| {
                let b = &p.branches[s.branch as usize];
                format!(
                    "{}@{:#x} {}{}",
                    b.kind.name(),
                    b.offset,
                    b.outcomes[s.outcome as usize],
                    b.place().map(|l| format!(" ({l})")).unwrap_or_default()
                )
            })
            .collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{:.1}%</td><td class=\"l\">{} #{}: {} &rarr; {}</td>\
             <td class=\"l\">{}</td></tr>",
            x.count,
            pct(x.count, all),
            esc(&p.function_name(x.func)),
            x.number,
            esc(&point(&x.start)),
            esc(&point(&x.end)),
            if steps.is_empty() {
                "(no branches)".into()
            } else {
                esc(&steps.join("; "))
            }
        );
    }
    o.push_str("</table></section>\n");
}

/// Finds a source file DWARF names: as given, then by its path and its base name in each
/// source directory.
fn find_source(file: &str, dirs: &[PathBuf]) -> Option<String> {
    let name = Path::new(file);
    let mut tries = vec![name.to_path_buf()];
    for d in dirs {
        tries.push(d.join(name.strip_prefix("/").unwrap_or(name)));
        if let Some(base) = name.file_name() {
            tries.push(d.join(base));
        }
    }
    tries.iter().find_map(|t| std::fs::read_to_string(t).ok())
}

/// Branch biases by source line: the source around every executed branch when the file is
/// found, the branches by line otherwise.
fn sources(o: &mut String, p: &Profile, opts: &HtmlOptions) {
    let mut by_file: BTreeMap<String, BTreeMap<i64, Vec<&Branch>>> = BTreeMap::new();
    for b in p.branches.iter().filter(|b| b.total() > 0) {
        let Some((file, line)) = b.location.as_deref().and_then(|l| l.rsplit_once(':')) else {
            continue;
        };
        let Ok(line) = line.parse::<i64>() else {
            continue;
        };
        by_file
            .entry(file.to_string())
            .or_default()
            .entry(line)
            .or_default()
            .push(b);
    }
    o.push_str("<section id=\"source\"><h2>Branch biases on the source</h2>");
    if by_file.is_empty() {
        o.push_str("<p class=\"muted\">No executed branch has a source line (the module has no DWARF).</p></section>\n");
        return;
    }
    let mut files: Vec<(&String, u64)> = by_file
        .iter()
        .map(|(f, lines)| (f, lines.values().flatten().map(|b| b.total()).sum()))
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.1));
    for (file, _) in files.into_iter().take(opts.top) {
        let lines = &by_file[file];
        let text = find_source(file, &opts.source_dirs);
        let _ = write!(
            o,
            "<h3>{}{}</h3><table class=\"src\">",
            esc(file),
            if text.is_some() {
                ""
            } else {
                " <span class=\"muted\">(source not found: offsets only; --source-dir)</span>"
            }
        );
        let annotate = |line: i64| -> String {
            lines.get(&line).map_or(String::new(), |bs| {
                bs.iter()
                    .map(|b| {
                        let total = b.total();
                        let outs: Vec<String> = b
                            .outcomes
                            .iter()
                            .zip(&b.counts)
                            .filter(|(_, &c)| c > 0)
                            .map(|(n, &c)| format!("{n} {:.0}%", pct(c, total)))
                            .collect();
                        // A sampled bias's 95% margin (ephemeral profiles).
                        let margin = (b.bias_margin)
                            .map(|m| format!(" (&plusmn;{:.0} points)", m * 100.0))
                            .unwrap_or_default();
                        format!(
                            "{} {total}&times;: {}{margin}",
                            b.kind.name(),
                            esc(&outs.join(", "))
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" | ")
            })
        };
        match text {
            Some(text) => {
                let src: Vec<&str> = text.lines().collect();
                // Three lines of context around each annotated line.
                let mut shown = std::collections::BTreeSet::new();
                for &l in lines.keys() {
                    for k in (l - 3).max(1)..=(l + 3).min(src.len() as i64) {
                        shown.insert(k);
                    }
                }
                let mut last = 0;
                for k in shown {
                    if k > last + 1 && last > 0 {
                        o.push_str("<tr><td></td><td>&hellip;</td><td></td></tr>");
                    }
                    last = k;
                    let hot = lines.contains_key(&k);
                    let _ = write!(
                        o,
                        "<tr{}><td>{k}</td><td>{}</td><td>{}</td></tr>",
                        if hot { " class=\"hot\"" } else { "" },
                        esc(src[(k - 1) as usize]),
                        annotate(k)
                    );
                }
            }
            None => {
                for &l in lines.keys() {
                    let _ = write!(
                        o,
                        "<tr class=\"hot\"><td>{l}</td><td>{}</td></tr>",
                        annotate(l)
                    );
                }
            }
        }
        o.push_str("</table>");
    }
    o.push_str("</section>\n");
}

/// Each hot function's executed control flow: the blocks its paths ran through (by code
/// offset, top to bottom) and the steps between them, as arcs whose width and colour grow
/// with their executions.
fn graphs(o: &mut String, p: &Profile, top: usize) {
    let mut per_func: HashMap<u32, u64> = HashMap::new();
    for x in &p.paths {
        *per_func.entry(x.func).or_default() += x.count;
    }
    if per_func.is_empty() {
        return;
    }
    let mut funcs: Vec<(u32, u64)> = per_func.into_iter().collect();
    funcs.sort_by_key(|f| (std::cmp::Reverse(f.1), f.0));
    o.push_str(
        "<section id=\"cfg\"><h2>Control flow of the hottest functions</h2>\
                <p class=\"muted\">Blocks by code offset; arcs are the steps paths took, wider \
                and redder where more executions went.</p>",
    );
    for &(func, _) in funcs.iter().take(top) {
        let mut nodes: BTreeMap<u64, u64> = BTreeMap::new();
        let mut edges: HashMap<(u64, u64), u64> = HashMap::new();
        for x in p.paths.iter().filter(|x| x.func == func) {
            for (k, &b) in x.blocks.iter().enumerate() {
                let n = nodes.entry(b).or_default();
                // A path's last block starts the next path (a loop header runs once per
                // iteration, not twice), unless it is the only one.
                if k + 1 < x.blocks.len() || x.blocks.len() == 1 {
                    *n += x.count;
                }
            }
            for w in x.blocks.windows(2) {
                *edges.entry((w[0], w[1])).or_default() += x.count;
            }
        }
        let _ = write!(o, "<h3>{}</h3>", esc(&p.function_name(func)));
        o.push_str(&graph_svg(&nodes, &edges));
    }
    o.push_str("</section>\n");
}

fn heat(v: u64, max: u64) -> String {
    let t = if max <= 1 {
        1.0
    } else {
        (v.max(1) as f64).ln() / (max as f64).ln()
    };
    // From pale yellow to deep red.
    let (r, g, b) = (255.0, 240.0 - 190.0 * t, 200.0 - 180.0 * t);
    format!("rgb({:.0},{:.0},{:.0})", r, g, b)
}

fn graph_svg(nodes: &BTreeMap<u64, u64>, edges: &HashMap<(u64, u64), u64>) -> String {
    let row = 22.0;
    let index: HashMap<u64, usize> = nodes.keys().enumerate().map(|(i, &b)| (b, i)).collect();
    let max_node = nodes.values().copied().max().unwrap_or(1);
    let max_edge = edges.values().copied().max().unwrap_or(1);
    let h = row * nodes.len() as f64 + 10.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"520\" height=\"{h:.0}\" \
         font-family=\"monospace\" font-size=\"11\">"
    );
    let mut es: Vec<(&(u64, u64), &u64)> = edges.iter().collect();
    es.sort_by_key(|e| *e.1);
    for (&(a, b), &c) in es {
        let (ya, yb) = (row * index[&a] as f64 + 14.0, row * index[&b] as f64 + 14.0);
        let bulge = 150.0 + 12.0 * (index[&a].abs_diff(index[&b]) as f64).min(20.0);
        let width = 1.0 + 5.0 * (c.max(1) as f64).ln() / (max_edge.max(2) as f64).ln();
        let _ = write!(
            s,
            "<path d=\"M150 {ya:.1} C{bulge:.1} {ya:.1} {bulge:.1} {yb:.1} 150 {yb:.1}\" \
             fill=\"none\" stroke=\"{}\" stroke-width=\"{width:.1}\" opacity=\"0.8\">\
             <title>{a:#x} &#8594; {b:#x}: {c}</title></path>",
            heat(c, max_edge)
        );
    }
    for (i, (&b, &c)) in nodes.iter().enumerate() {
        let y = row * i as f64 + 4.0;
        let _ = write!(
            s,
            "<rect x=\"10\" y=\"{y:.1}\" width=\"140\" height=\"18\" fill=\"{}\" stroke=\"#999\">\
             <title>block {b:#x}: {c} executions</title></rect>\
             <text x=\"16\" y=\"{:.1}\">{b:#x} &#215;{c}</text>",
            heat(c, max_node),
            y + 13.0
        );
    }
    s.push_str("</svg>");
    s
}

/// The phase time line: one cell per interval, coloured by the phase the offline phase
/// finder puts it in, and a second strip with the online detector's phases when present.
fn timeline(o: &mut String, p: &Profile) {
    let Some(t) = &p.timeline else { return };
    if t.intervals.is_empty() {
        return;
    }
    let ids = pepper_phases::timeline::phase_ids(t, pepper_phases::timeline::BASELINE_THRESHOLD);
    let n = t.intervals.len();
    let cell = (900.0 / n as f64).clamp(1.0, 12.0);
    let colour = |k: u32| format!("hsl({},65%,55%)", (k as u64 * 137) % 360);
    let _ = write!(
        o,
        "<section id=\"timeline\"><h2>Phase time line</h2><p class=\"muted\">{n} intervals \
         of {} path ends; colour = group of similar intervals (phase finder)</p>\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"50\">",
        t.length,
        cell * n as f64
    );
    for (i, &k) in ids.iter().enumerate() {
        let _ = write!(
            o,
            "<rect x=\"{:.2}\" y=\"0\" width=\"{cell:.2}\" height=\"20\" fill=\"{}\">\
             <title>interval {i}: group {k}</title></rect>",
            cell * i as f64,
            colour(k)
        );
    }
    if let Some(d) = &p.phases {
        for (k, span) in d.phases.iter().enumerate() {
            let _ = write!(
                o,
                "<rect x=\"{:.2}\" y=\"26\" width=\"{:.2}\" height=\"20\" fill=\"{}\">\
                 <title>detected phase {k}: intervals {}..{}</title></rect>",
                cell * span.start as f64,
                cell * (span.end.saturating_sub(span.start)) as f64,
                colour(k as u32),
                span.start,
                span.end
            );
        }
    }
    o.push_str("</svg></section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The source view gives a sampled bias its margin, and an exact one none.
    #[test]
    fn source_view_shows_sampled_biases_margins() {
        let branch = |id: u32, margin: Option<f64>| {
            serde_json::json!({"id": id, "func": 1, "offset": 40 + id, "kind": "if",
                "outcomes": ["taken", "not-taken"], "counts": [75, 25],
                "location": format!("/src/a.c:{}", 10 + id), "recorded": 100,
                "bias_margin": margin})
        };
        let p = crate::testing::one_function(
            "ephemeral",
            vec![branch(0, Some(0.116)), branch(1, None)],
        );
        let mut o = String::new();
        sources(&mut o, &p, &HtmlOptions::default());
        assert!(
            o.contains("taken 75%, not-taken 25% (&plusmn;12 points)"),
            "{o}"
        );
        assert_eq!(o.matches("&plusmn;").count(), 1, "{o}");
    }

    /// A function the estimate misses is named as under-sampled, with its reason, in the
    /// functions section; one it does not miss is not.
    #[test]
    fn under_sampled_functions_are_marked() {
        let mut p = crate::testing::one_function("pep", Vec::new());
        let mut o = String::new();
        functions(&mut o, &p, 10);
        assert!(!o.contains("under-sampled"), "{o}");
        let f = p.functions[0].index;
        p.functions[0].under_sampled = Some("a loop the bursts miss".into());
        let mut o = String::new();
        functions(&mut o, &p, 10);
        assert!(
            o.contains(&format!("under-sampled: {}", esc(&p.function_name(f))))
                && o.contains("a loop the bursts miss"),
            "{o}"
        );
    }
}
