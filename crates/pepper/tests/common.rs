//! Helpers shared by the CLI integration tests: run the real `pepper` binary.

#![allow(dead_code)]

use pepper_profile::{BranchKind, Profile};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

pub fn pepper(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pepper"))
        .args(args)
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join("pepper-test-cache"),
        )
        .output()
        .expect("pepper binary runs")
}

/// Runs `pepper run --mode MODE` and returns (exit code, stdout, stderr, profile).
pub fn run(
    mode: &str,
    program: &Path,
    extra: &[&str],
    guest: &[&str],
) -> (i32, Vec<u8>, String, Profile) {
    let dir = tempdir();
    let out = dir.join(format!(
        "{}.{mode}.json",
        program.file_stem().unwrap().to_string_lossy()
    ));
    let mut args = vec!["run", "--mode", mode, "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(program.to_str().unwrap());
    if !guest.is_empty() {
        args.push("--");
        args.extend_from_slice(guest);
    }
    let o = pepper(&args);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let profile = Profile::read(
        std::fs::File::open(&out).unwrap_or_else(|e| panic!("no profile ({e}); stderr: {stderr}")),
    )
    .expect("profile reads back");
    (o.status.code().unwrap_or(-1), o.stdout, stderr, profile)
}

pub fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("pepper-tests-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Counts of the `nth` branch of `kind` in function `func` (by name).
pub fn branch(p: &Profile, func: &str, kind: BranchKind, nth: usize) -> Vec<u64> {
    let index = p
        .functions
        .iter()
        .find(|f| f.name.as_deref() == Some(func))
        .unwrap_or_else(|| panic!("no function {func}"))
        .index;
    p.branches
        .iter()
        .filter(|b| b.func == index && b.kind == kind)
        .nth(nth)
        .unwrap_or_else(|| panic!("no {kind:?} #{nth} in {func}"))
        .counts
        .clone()
}

pub fn path_executions(p: &Profile, func: &str) -> u64 {
    let index = p
        .functions
        .iter()
        .find(|f| f.name.as_deref() == Some(func))
        .unwrap()
        .index;
    p.paths
        .iter()
        .filter(|x| x.func == index)
        .map(|x| x.count)
        .sum()
}

/// The edge profile derived from exact paths must equal the directly counted one.
pub fn assert_same_edges(paths: &Profile, edges: &Profile) {
    assert_eq!(paths.branches.len(), edges.branches.len());
    for (a, b) in paths.branches.iter().zip(&edges.branches) {
        assert_eq!((a.func, a.offset), (b.func, b.offset));
        assert_eq!(
            a.counts, b.counts,
            "branch at {:#x} in func {}",
            a.offset, a.func
        );
    }
}
