//! `pepper report`: a profile for people (text) or scripts (JSON).

use anyhow::{Context, Result};
use pepper_profile::report;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Format {
    Text,
    Json,
}

/// Show the hottest functions, hottest paths and branch biases of a profile.
///
/// The JSON format (`--format json`) lists every branch and every path; its schema is in
/// docs/report-json.md.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Check that the profile was recorded from this module (refuses a mismatch).
    #[arg(long)]
    module: Option<PathBuf>,
    /// How many functions, paths and branches the text report lists.
    #[arg(long, default_value_t = 10)]
    top: usize,
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
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match a.format {
        Format::Text => {
            let opts = report::ReportOptions {
                top_functions: a.top,
                top_paths: a.top,
                top_branches: a.top + 5,
            };
            out.write_all(report::text(&profile, &opts).as_bytes())?;
        }
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &report::json(&profile))?;
            writeln!(out)?;
        }
    }
    Ok(0)
}
