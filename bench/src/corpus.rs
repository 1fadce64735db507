//! The benchmark corpus: real programs listed in `bench/workloads/corpus/*.toml` (one file
//! per toolchain family, built by `bench/workloads/build.sh`). The manifest's format is
//! described in that directory's README.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One program of the corpus and its inputs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Program {
    /// Unique; what `--only` selects.
    pub name: String,
    /// The module or component under the build directory (default `NAME.wasm`).
    pub file: Option<String>,
    /// The language family it was written in (C, C++, Rust, ...).
    pub family: String,
    /// What it does, in a line.
    pub what: String,
    /// Where its source comes from, pinned, and how it was compiled.
    pub source: String,
    /// `argv` of the measured run (one to a few seconds uninstrumented).
    pub args: Vec<String>,
    /// `argv` of a short run, for CI and the identity test.
    pub quick: Vec<String>,
    /// `argv` of another input, for guides that must not come from the measured input
    /// (default: `quick`).
    pub other: Option<Vec<String>>,
    /// Preopened directories.
    #[serde(default)]
    pub dirs: Vec<Dir>,
    /// Environment variables, `NAME=value`.
    #[serde(default)]
    pub env: Vec<String>,
    /// Set for programs that only some tables run: `phases` (staged drivers for phase
    /// detection), `large` (minutes to compile). The measured corpus has none.
    pub set: Option<String>,
    /// Among the few programs CI runs (the identity test and the benchmark's smoke).
    #[serde(default)]
    pub ci: bool,
    /// Compiled through wasmtime's cache (modules that take long to compile).
    #[serde(default)]
    pub cache: bool,
}

/// A preopened directory: `host` relative to the build directory, seen as `guest`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dir {
    pub host: String,
    pub guest: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    program: Vec<Program>,
}

impl Program {
    /// The module's path under `build`.
    pub fn module(&self, build: &Path) -> PathBuf {
        build.join(
            self.file
                .clone()
                .unwrap_or_else(|| format!("{}.wasm", self.name)),
        )
    }

    /// The preopens as (host path, guest path).
    pub fn preopens(&self, build: &Path) -> Vec<(PathBuf, String)> {
        self.dirs
            .iter()
            .map(|d| (build.join(&d.host), d.guest.clone()))
            .collect()
    }

    /// The environment as (name, value).
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|e| match e.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (e.clone(), String::new()),
            })
            .collect()
    }
}

/// The manifest directory of a checkout.
pub fn manifest_dir(root: &Path) -> PathBuf {
    root.join("bench/workloads/corpus")
}

/// The build directory of a checkout.
pub fn build_dir(root: &Path) -> PathBuf {
    root.join("bench/workloads/build")
}

/// Every program listed in `dir`'s `*.toml` files, by file name and then in file order.
/// Names must be unique and argument lists non-empty.
pub fn load(dir: &Path) -> Result<Vec<Program>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading the corpus manifest {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out: Vec<Program> = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        let parsed: File =
            toml::from_str(&text).with_context(|| format!("parsing {}", f.display()))?;
        for p in parsed.program {
            if out.iter().any(|q| q.name == p.name) {
                bail!("{}: program `{}` is listed twice", f.display(), p.name);
            }
            if p.args.is_empty() || p.quick.is_empty() {
                bail!(
                    "{}: program `{}` needs `args` and `quick`",
                    f.display(),
                    p.name
                );
            }
            out.push(p);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in manifest parses, names are unique, and the corpus proper spans
    /// several language families.
    #[test]
    fn the_manifest_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let programs = load(&manifest_dir(&root)).unwrap();
        assert!(programs.iter().any(|p| p.name == "zstd"));
        assert!(programs.iter().any(|p| p.ci && p.set.is_none()));
    }

    /// Duplicate names and missing arguments are refused with the file named.
    #[test]
    fn bad_manifests_are_refused() {
        let dir = std::env::temp_dir().join(format!("pepper-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let entry = "[[program]]\nname = \"a\"\nfamily = \"C\"\nwhat = \"\"\nsource = \"\"\nargs = [\"a\"]\nquick = [\"a\"]\n";
        std::fs::write(dir.join("x.toml"), format!("{entry}{entry}")).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains("x.toml") && err.contains("twice"), "{err}");
        std::fs::write(
            dir.join("x.toml"),
            entry.replace("args = [\"a\"]\n", "args = []\n"),
        )
        .unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains("needs `args`"), "{err}");
        std::fs::write(dir.join("x.toml"), format!("{entry}colour = 1\n")).unwrap();
        assert!(load(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
