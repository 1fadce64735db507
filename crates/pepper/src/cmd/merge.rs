//! `pepper merge`: sums profiles of the same module into one, for programs profiled over
//! several inputs, or embedders that run one store per thread (pepper's profiling state is
//! per store, so each writes its own profile).

use anyhow::{Context, Result};
use pepper_profile::Profile;
use std::path::PathBuf;

/// Sum profiles of the same module into one.
///
/// Branch counts, paths, call-site counts, calling contexts (matched by their chain of call
/// sites) and sampling statistics add up; `report`, `compare` and `export` read the result
/// like any profile. The profiles must come from the same module and mode, and path profiles
/// from the same numbering (PEP and targeted runs with the same guide, or none): anything
/// else is refused with the name of the profile that does not fit.
///
/// Example:
///   pepper run -o a.json prog.wasm -- input1
///   pepper run -o b.json prog.wasm -- input2
///   pepper merge a.json b.json -o all.json
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Where to write the merged profile.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// The profiles to sum (two or more; the first gives run arguments and parameters).
    #[arg(required = true, num_args = 2.., value_name = "PROFILE")]
    profiles: Vec<PathBuf>,
}

pub fn run(a: Args) -> Result<i32> {
    let profiles = a
        .profiles
        .iter()
        .map(|p| super::load_profile(p))
        .collect::<Result<Vec<_>>>()?;
    let merged = Profile::merge(&profiles).map_err(|e| {
        let name = |i: usize| a.profiles[i].display().to_string();
        let culprit = match &e {
            pepper_profile::MergeError::Empty | pepper_profile::MergeError::Unreadable(_) => {
                String::new()
            }
            pepper_profile::MergeError::Module { index, .. }
            | pepper_profile::MergeError::Mode { index, .. }
            | pepper_profile::MergeError::Shape { index, .. } => {
                format!(" ({} against {})", name(*index), name(0))
            }
        };
        anyhow::anyhow!("cannot merge: {e}{culprit}")
    })?;
    merged
        .write_file(&a.output)
        .with_context(|| format!("writing {}", a.output.display()))?;
    eprintln!(
        "pepper: wrote {} ({} profiles merged: {} paths, {} branches)",
        a.output.display(),
        profiles.len(),
        merged.paths.len(),
        merged.branches.len()
    );
    Ok(0)
}
