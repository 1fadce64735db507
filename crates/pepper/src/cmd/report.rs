//! `pepper report`: a profile for people (text) or scripts (JSON).

use anyhow::{Context, Result};
use pepper_profile::report;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// One self-contained page: flame graph, hot functions and paths, branch biases on
    /// the source, control flow coloured by frequency, phase time line.
    Html,
}

/// Show the hottest functions, hottest paths and branch biases of a profile.
///
/// The JSON format (`--format json`) lists every branch and every path; its schema is in
/// docs/report-json.md. The HTML format (`--format html`, written to PROFILE's stem +
/// `.html` unless `-o` says otherwise) is one page to open in a browser:
///   pepper report --format html prog.pepper.json --source-dir src/
#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Check that the profile was recorded from this module (refuses a mismatch).
    #[arg(long)]
    module: Option<PathBuf>,
    /// How many functions, paths and branches the report lists.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Output file (`-` for stdout) [default: stdout; for html, PROFILE's stem + `.html`].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// HTML: a directory to find source files in (DWARF often names them by base name).
    #[arg(long = "source-dir", value_name = "DIR")]
    source_dirs: Vec<PathBuf>,
    /// Profile file written by `pepper run`.
    profile: PathBuf,
}

pub fn run(a: Args) -> Result<i32> {
    let profile = super::load_profile(&a.profile)?;
    if let Some(m) = &a.module {
        let wasm = super::read_module(m)?;
        profile
            .check_module(&wasm)
            .with_context(|| format!("checking {}", m.display()))?;
    }
    if a.format == Format::Html {
        let page = html_page(&profile, &a.source_dirs, a.top);
        let path = a.output.clone().unwrap_or_else(|| {
            let stem = a.profile.file_stem().map_or("profile".into(), |s| {
                s.to_string_lossy().trim_end_matches(".pepper").to_string()
            });
            PathBuf::from(format!("{stem}.html"))
        });
        if path.as_os_str() == "-" {
            std::io::stdout().lock().write_all(page.as_bytes())?;
        } else {
            std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("pepper: wrote {}", path.display());
        }
        return Ok(0);
    }
    let stdout = std::io::stdout();
    let mut out: Box<dyn Write> = match a.output.as_deref() {
        Some(p) if p.as_os_str() != "-" => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        _ => Box::new(stdout.lock()),
    };
    match a.format {
        Format::Text => {
            let opts = {
                let mut report_ = report::ReportOptions::default();
                report_.top_functions = a.top;
                report_.top_paths = a.top;
                report_.top_branches = a.top + 5;
                report_
            };
            out.write_all(report::text(&profile, &opts).as_bytes())?;
        }
        Format::Json => {
            // Serialized first: a closed stdout is then an I/O error like any other write's.
            let mut doc = serde_json::to_vec_pretty(&report::json(&profile))?;
            doc.push(b'\n');
            out.write_all(&doc)?;
        }
        Format::Html => unreachable!("written above"),
    }
    out.flush()?;
    Ok(0)
}

/// The HTML report of `profile` (also what `pepper view` serves).
pub(super) fn html_page(
    profile: &pepper_profile::Profile,
    source_dirs: &[PathBuf],
    top: usize,
) -> String {
    pepper_export::html(profile, &{
        let mut html = pepper_export::HtmlOptions::default();
        html.source_dirs = source_dirs.to_vec();
        html.top = top;
        html
    })
}
