//! `pepper compare`: how close an estimated profile (PEP, a guided run, an older run) is to
//! a reference (normally an exact profile of the same module and input).

use anyhow::{bail, Result};
use pepper_profile::compare::{compare, Accuracy, HOT_PATH_THRESHOLD};
use pepper_profile::Profile;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Format {
    Text,
    Json,
}

/// Accuracy of ESTIMATE against REFERENCE, as PEP measures it.
///
/// - path accuracy: Wall weight matching. Hot paths are the reference paths carrying more
///   than 0.125% of all branch flow (count × branch decisions); the score is the share of
///   their flow on paths the estimate also ranks among its same number of hottest.
/// - edge relative overlap: per branch, 1 - |bias difference|, weighted by the reference's
///   branch frequency (a branch the estimate never saw counts as unbiased).
/// - edge absolute overlap: Σ min of the two normalised branch-outcome frequencies.
///
/// - branch count error: Σ|estimate − reference| over every branch outcome's count, over
///   the reference's branch executions (Nagpurkar's code-region error: also wrong when a
///   sampled profile's totals are off).
///
/// Paths are matched by their branch decisions, not their numbers, so profiles with
/// different numberings (for example with and without --guide) compare correctly.
///
/// When ESTIMATE has phases from the online detector (`pepper run --phases`) and
/// REFERENCE a time line (`--timeline`, same program and input): the detector's score
/// against the baseline phases of REFERENCE's time line (stable stretches of at least
/// the detector's minimum phase length; see `pepper phases`), with Nagpurkar's metric:
/// correlation/2 + sensitivity/4 + (1 − false positives)/4.
///
/// When both profiles have calling contexts (REFERENCE typically from `--mode exact-calls`):
/// - call overlap: Σ over contexts (call-site chains) of the smaller normalised call count;
/// - hot-edge coverage (Zhuang et al.; a context is the tree edge into it): share of
///   reference contexts with ≥ 0.1% of calls that the estimate has;
/// - hot-function precision: of the functions the estimate calls hot (≥ 1%), the share the
///   reference gives ≥ 0.5% (by self time if both are sampled, by calls otherwise).
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Functions listed in the per-function breakdown.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// The ground truth, usually from `pepper run --mode exact-paths`.
    reference: PathBuf,
    /// The profile to score.
    estimate: PathBuf,
}

pub fn run(a: Args) -> Result<i32> {
    let reference = super::load_profile(&a.reference)?;
    let estimate = super::load_profile(&a.estimate)?;
    if reference.module.sha256 != estimate.module.sha256 {
        bail!(
            "the profiles describe different modules ({} has {}, {} has {})",
            a.reference.display(),
            reference.module.sha256,
            a.estimate.display(),
            estimate.module.sha256
        );
    }
    let acc = compare(&reference, &estimate);
    let phases = phase_score(&reference, &estimate);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match a.format {
        Format::Json => {
            let doc = Json {
                accuracy: &acc,
                phases: phases.map(|s| PhaseScore {
                    correlation: s.correlation,
                    sensitivity: s.sensitivity,
                    false_positives: s.false_positives,
                    score: s.score,
                }),
            };
            // Serialized first: a closed stdout is then an I/O error like any other write's.
            let mut doc = serde_json::to_vec_pretty(&doc)?;
            doc.push(b'\n');
            out.write_all(&doc)?;
        }
        Format::Text => {
            let mut t = text(&acc, &reference, &estimate, a.top);
            if let (Some(s), Some(d)) = (phases, &estimate.phases) {
                use std::fmt::Write as _;
                let _ = writeln!(
                    t,
                    "\nphases: {} detected online ({}); score against the reference's baseline \
                     (minimum phase length {} intervals): {:.3} (correlation {:.3}, sensitivity \
                     {:.3}, false positives {:.3})",
                    d.phases.len(),
                    d.detector,
                    d.mpl,
                    s.score,
                    s.correlation,
                    s.sensitivity,
                    s.false_positives
                );
            }
            out.write_all(t.as_bytes())?
        }
    }
    Ok(0)
}

/// The online detector's phases in `estimate` scored against `reference`'s time line.
fn phase_score(reference: &Profile, estimate: &Profile) -> Option<pepper_phases::Score> {
    let t = reference
        .timeline
        .as_ref()
        .filter(|t| t.clock == "path-ends" && !t.intervals.is_empty())?;
    let d = estimate.phases.as_ref()?;
    Some(pepper_phases::timeline::score_against(t, d))
}

#[derive(serde::Serialize)]
struct Json<'a> {
    #[serde(flatten)]
    accuracy: &'a Accuracy,
    #[serde(skip_serializing_if = "Option::is_none")]
    phases: Option<PhaseScore>,
}

#[derive(serde::Serialize)]
struct PhaseScore {
    correlation: f64,
    sensitivity: f64,
    false_positives: f64,
    score: f64,
}

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{:.1}%", v * 100.0))
}

fn text(acc: &Accuracy, reference: &Profile, estimate: &Profile, top: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "reference: {} ({}), {} paths\nestimate:  {} ({}), {} paths\n",
        reference.module.path,
        reference.mode.name(),
        acc.reference_paths,
        estimate.module.path,
        estimate.mode.name(),
        acc.estimate_paths
    );
    let _ = writeln!(
        s,
        "path accuracy (Wall, hot > {}% of flow, {} hot paths): {}",
        HOT_PATH_THRESHOLD * 100.0,
        acc.hot_paths,
        pct(acc.path_accuracy)
    );
    let _ = writeln!(
        s,
        "edge relative overlap:                              {}",
        pct(acc.edge_relative_overlap)
    );
    let _ = writeln!(
        s,
        "edge absolute overlap:                              {}",
        pct(acc.edge_absolute_overlap)
    );
    let _ = writeln!(
        s,
        "biases within 5 points ({} branches, 95% of executions): {}",
        acc.hot_branches,
        pct(acc.hot_biases_within_5pt)
    );
    if acc.hot_biases_within_margin.is_some() {
        let _ = writeln!(
            s,
            "  within the estimate's own 95% margins:            {}",
            pct(acc.hot_biases_within_margin)
        );
    }
    let _ = writeln!(
        s,
        "branch count error:                                 {}\n",
        pct(acc.branch_count_error)
    );
    if let Some(c) = &acc.contexts {
        let _ = writeln!(
            s,
            "calling contexts: {} in reference, {} in estimate",
            c.reference_contexts, c.estimate_contexts
        );
        let _ = writeln!(
            s,
            "context call overlap:                               {}",
            pct(Some(c.call_overlap))
        );
        let _ = writeln!(
            s,
            "  with recursion folded (ABL CCT):                  {}",
            pct(Some(c.call_overlap_folded))
        );
        if c.time_overlap.is_some() {
            let _ = writeln!(
                s,
                "context time overlap:                               {}",
                pct(c.time_overlap)
            );
        }
        let _ = writeln!(
            s,
            "hot-edge coverage ({} contexts >= 0.1% of calls):   {}{}",
            c.hot_contexts,
            " ".repeat(3usize.saturating_sub(c.hot_contexts.to_string().len())),
            pct(c.hot_context_coverage)
        );
        let _ = writeln!(
            s,
            "hot-function precision ({} estimated hot):          {} (recall {})\n",
            c.hot_functions,
            pct(c.hot_function_precision),
            pct(c.hot_function_recall)
        );
    }
    if acc.reference_paths == 0 {
        return s;
    }
    let _ = writeln!(
        s,
        "{:>8} {:>8} {:>9} {:>9}  function",
        "ref flow", "est flow", "hot found", "edge acc"
    );
    for f in acc.functions.iter().take(top) {
        let _ = writeln!(
            s,
            "{:>7.2}% {:>7.2}% {:>9} {:>9}  {}",
            f.reference_flow * 100.0,
            f.estimate_flow * 100.0,
            format!("{}/{}", f.hot_paths_found, f.hot_paths),
            pct(f.edge_accuracy),
            f.name
        );
    }
    s
}
