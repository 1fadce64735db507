//! `pepper phases`: the phases of a profile's time line, as text and as a similarity
//! matrix image.

use anyhow::{bail, Context, Result};
use pepper_phases::{runs, summarize, timeline, Matrix};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

/// Find the phases of a run: which stretches of it run the same code.
///
/// Reads the time line of a profile written with `pepper run --timeline` (or --phases,
/// --phase-aware), groups its intervals into phases by how similar their code is
/// (Manhattan distance between the intervals' per-function shares: 0 = the same mix,
/// 2 = nothing in common), and prints each phase (its intervals, share of the run, runs,
/// hottest functions) and the time line, one letter per interval. Writes the similarity
/// matrix as a PNG: both axes are the intervals in order, darker is more similar, red
/// lines mark where stable phases start and end. Dark squares along the diagonal are
/// phases; dark squares off it are a phase coming back.
///
/// Examples:
///   pepper run --timeline prog.wasm -- input    record a time line
///   pepper phases prog.pepper.json              phases, time line, prog.phases.png
///   pepper phases --threshold 0.3 prog.pepper.json   finer phases
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Largest distance (in [0, 2]) between an interval and a phase for the interval to
    /// belong to it; lower finds more, finer phases.
    #[arg(long, default_value_t = timeline::BASELINE_THRESHOLD)]
    threshold: f64,
    /// Intervals in a row that make a stable phase (shorter runs are shown in lowercase).
    #[arg(long, default_value_t = 8)]
    mpl: usize,
    /// Hottest functions listed per phase.
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// Where to write the similarity matrix [default: the profile's name, `.phases.png`].
    #[arg(long)]
    matrix: Option<PathBuf>,
    /// Do not write the matrix image.
    #[arg(long)]
    no_matrix: bool,
    /// Profile file written by `pepper run --timeline`.
    profile: PathBuf,
}

pub fn run(a: Args) -> Result<i32> {
    if !(0.0..=2.0).contains(&a.threshold) {
        bail!("--threshold must be within [0, 2]");
    }
    let profile = super::load_profile(&a.profile)?;
    let Some(t) = profile
        .timeline
        .as_ref()
        .filter(|t| !t.intervals.is_empty())
    else {
        bail!(
            "{} has no time line: record one with `pepper run --timeline`",
            a.profile.display()
        );
    };
    let sigs = timeline::signatures(t);
    let ids = timeline::phase_ids(t, a.threshold);
    let stable = pepper_phases::oracle(&ids, a.mpl);
    let summary = summarize(&ids, &timeline::counts(t), &timeline::weights(t), a.top);
    let mut out = String::new();
    let unit = if t.clock == "path-ends" {
        "path ends"
    } else {
        "µs"
    };
    writeln!(
        out,
        "time line: {} intervals of {} {unit} ({} by function){}",
        t.intervals.len(),
        t.length,
        t.counts,
        if t.lost > 0 {
            let holes = t.intervals.iter().filter(|i| timeline::is_hole(i)).count();
            format!(
                "; {} path ends unread ({holes} intervals wholly, each put in the phase \
                 of the interval before it)",
                t.lost
            )
        } else {
            String::new()
        }
    )?;
    writeln!(
        out,
        "{} phases at distance <= {} (stable: {} or more intervals in a row)\n",
        summary.len(),
        a.threshold,
        a.mpl
    )?;
    writeln!(
        out,
        "{:>5} {:>9} {:>6} {:>5} {:>6} {:>7}  hottest functions",
        "phase", "intervals", "share", "runs", "first", "longest"
    )?;
    for p in &summary {
        let hot: Vec<String> = p
            .top
            .iter()
            .map(|&(f, w)| format!("{} {:.0}%", profile.function_name(f), w * 100.0))
            .collect();
        writeln!(
            out,
            "{:>5} {:>9} {:>5.1}% {:>5} {:>6} {:>7}  {}",
            letter(p.id),
            p.intervals,
            p.share * 100.0,
            p.occurrences,
            p.first,
            p.longest,
            hot.join(", ")
        )?;
    }
    writeln!(
        out,
        "\ntime line, one letter per interval (lowercase: outside a stable stretch):"
    )?;
    let strip: Vec<char> = ids
        .iter()
        .zip(&stable)
        .map(|(&id, s)| {
            let c = letter(id);
            if s.is_some() {
                c
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    for (k, chunk) in strip.chunks(80).enumerate() {
        writeln!(out, "{:>6}  {}", k * 80, chunk.iter().collect::<String>())?;
    }
    if let Some(d) = &profile.phases {
        let spans: Vec<String> = d
            .phases
            .iter()
            .map(|p| format!("[{}, {})", p.start, p.end))
            .collect();
        writeln!(
            out,
            "\ndetected online ({}): {} phases {}",
            d.detector,
            d.phases.len(),
            spans.join(" ")
        )?;
    }
    if !a.no_matrix {
        let path = a.matrix.clone().unwrap_or_else(|| {
            let name = a.profile.file_name().map_or("profile".into(), |n| {
                let n = n.to_string_lossy();
                n.strip_suffix(".pepper.json")
                    .or(n.strip_suffix(".json"))
                    .unwrap_or(&n)
                    .to_string()
            });
            a.profile.with_file_name(format!("{name}.phases.png"))
        });
        // Where stable phases start and end (every short run's start would hide the
        // picture under lines).
        let starts: Vec<usize> = runs(&ids)
            .iter()
            .filter(|r| r.len >= a.mpl)
            .flat_map(|r| [r.start, r.start + r.len])
            .collect();
        let scale = (768 / sigs.len().max(1)).clamp(1, 32);
        let png = Matrix::new(&sigs).png(&starts, scale);
        std::fs::write(&path, png).with_context(|| format!("writing {}", path.display()))?;
        writeln!(
            out,
            "\nsimilarity matrix: {} ({n} x {n} intervals, darker = more similar, red = stable phases' bounds)",
            path.display(),
            n = sigs.len()
        )?;
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(0)
}

/// A phase's letter: A-Z, then digits and symbols, then `?`.
fn letter(id: u32) -> char {
    const L: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@#$%&*+=";
    L.get(id as usize).map_or('?', |&c| c as char)
}
