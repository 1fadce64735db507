//! `pepper export`: calling contexts (or functions' executions) in formats other tools open.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// gzipped pprof protobuf: `go tool pprof -http=: FILE`, Grafana Pyroscope, speedscope.
    Pprof,
    /// Folded stacks (`outer;...;leaf value` lines): inferno, flamegraph.pl, speedscope.
    Folded,
    /// A flame graph SVG (rendered with inferno); open it in a browser.
    Flamegraph,
    /// The Firefox profiler's processed format: load it at https://profiler.firefox.com.
    Firefox,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Pprof => "pb.gz",
            Format::Folded => "folded",
            Format::Flamegraph => "svg",
            Format::Firefox => "firefox.json",
        }
    }
}

/// Export a profile's calling contexts (sampled: self wall time; exact: call counts). A
/// profile without contexts (exact paths or edges, targeted, ephemeral) exports each
/// function's path executions, or branch executions for edge profiles.
///
/// Examples:
///   pepper export prog.pepper.json --format pprof        writes prog.pb.gz
///   go tool pprof -top prog.pb.gz
///   pepper export prog.pepper.json --format flamegraph   writes prog.svg
///   pepper export prog.pepper.json --format folded -o -  folded stacks on stdout
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[arg(long, value_enum, default_value = "pprof")]
    format: Format,
    /// Output file (`-` for stdout) [default: the profile's name with the format's
    /// extension].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Profile file written by `pepper run` (with calling contexts).
    profile: PathBuf,
}

pub fn run(a: Args) -> Result<i32> {
    let profile = super::load_profile(&a.profile)?;
    let bytes = match a.format {
        Format::Pprof => pepper_export::pprof(&profile)?,
        Format::Folded => pepper_export::folded(&profile)?.into_bytes(),
        Format::Flamegraph => {
            let mut svg = Vec::new();
            pepper_export::flamegraph(&profile, &mut svg)?;
            svg
        }
        Format::Firefox => pepper_export::firefox(&profile)?,
    };
    let output = a.output.unwrap_or_else(|| {
        let name = a.profile.file_name().map_or("profile".into(), |n| {
            let n = n.to_string_lossy();
            n.strip_suffix(".pepper.json")
                .or_else(|| n.strip_suffix(".json"))
                .unwrap_or(&n)
                .to_string()
        });
        a.profile
            .with_file_name(format!("{name}.{}", a.format.extension()))
    });
    if output.as_os_str() == "-" {
        std::io::stdout().lock().write_all(&bytes)?;
    } else {
        std::fs::write(&output, &bytes).with_context(|| format!("writing {}", output.display()))?;
        eprintln!("pepper: wrote {}", output.display());
    }
    Ok(0)
}
