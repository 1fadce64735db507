//! Helpers shared by the CLI integration tests: run the real `pepper` binary.

#![allow(dead_code)]

use pepper_profile::{BranchKind, Profile};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The bursts a run on the switch recorded (each takes every path end of PEP's span,
/// `samples * stride`). A sampler thread starved by the rest of the machine takes few:
/// its ticks come late, and the guest ends most bursts itself (measured with one busy
/// loop beside a fixture run: 27-34 ticks and 1-6 bursts in 110 ms). Such a run says
/// little about where bursts go.
pub fn switch_bursts(s: &pepper_profile::Sampling) -> u64 {
    s.taken / (u64::from(s.samples) * u64::from(s.stride)).max(1)
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

pub fn pepper(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pepper"))
        .args(args)
        .env("XDG_CACHE_HOME", tempdir().join("cache"))
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
    let (code, stdout, stderr, profile, _) = run_to(mode, program, extra, guest);
    (code, stdout, stderr, profile)
}

/// [`run`], also returning where the profile is.
pub fn run_to(
    mode: &str,
    program: &Path,
    extra: &[&str],
    guest: &[&str],
) -> (i32, Vec<u8>, String, Profile, PathBuf) {
    // Every run writes a file of its own (tests run in parallel, and one program may run
    // in one mode with other flags or other guest arguments).
    let out = unique_path(format!(
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
    (
        o.status.code().unwrap_or(-1),
        o.stdout,
        stderr,
        profile,
        out,
    )
}

/// A path in [`tempdir`] no other call returns: `name` with a number before its
/// extension.
pub fn unique_path(name: impl AsRef<str>) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = name.as_ref();
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    tempdir().join(format!("{stem}.{n}.{ext}"))
}

/// This test process's scratch directory, `pepper-tests-PID` under the system's temp
/// directory. A test binary cannot clean up after itself (statics are not dropped and a
/// failing test may still want its files read), so the first call removes the
/// directories of test processes that are gone: without that, every `cargo test` left
/// hundreds of megabytes of modules and profiles behind.
pub fn tempdir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = std::env::temp_dir();
        remove_stale_tempdirs(&tmp);
        let d = tmp.join(format!("pepper-tests-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
    .clone()
}

/// Removes `pepper-tests-PID` directories whose process no longer runs. Only where
/// `/proc` says which processes run: elsewhere a live run's directory could go.
fn remove_stale_tempdirs(tmp: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("pepper-tests-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            // Another test process may be sweeping the same directory: ignore races.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The index of function `func` (by name).
pub fn function_index(p: &Profile, func: &str) -> u32 {
    p.functions
        .iter()
        .find(|f| f.name.as_deref() == Some(func))
        .unwrap_or_else(|| panic!("no function {func}"))
        .index
}

/// The `nth` branch of `kind` in function `func` (by name).
pub fn branch_mut<'p>(
    p: &'p mut Profile,
    func: &str,
    kind: BranchKind,
    nth: usize,
) -> &'p mut pepper_profile::Branch {
    let index = function_index(p, func);
    p.branches
        .iter_mut()
        .filter(|b| b.func == index && b.kind == kind)
        .nth(nth)
        .unwrap_or_else(|| panic!("no {kind:?} #{nth} in {func}"))
}

/// Counts of the `nth` branch of `kind` in function `func` (by name).
pub fn branch(p: &Profile, func: &str, kind: BranchKind, nth: usize) -> Vec<u64> {
    branch_mut(&mut p.clone(), func, kind, nth).counts.clone()
}

pub fn path_executions(p: &Profile, func: &str) -> u64 {
    let index = function_index(p, func);
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

/// Path counts keyed by what the path is (function, ends, branch decisions), so profiles
/// with different numberings compare.
pub fn paths_by_key(
    p: &Profile,
) -> std::collections::HashMap<pepper_profile::compare::PathKey, u64> {
    let mut m = std::collections::HashMap::new();
    for path in &p.paths {
        *m.entry(pepper_profile::compare::PathKey::of(path))
            .or_insert(0) += path.count;
    }
    m
}

/// PEP recording every path end (`--every 1`), with plain and with smart numbering from
/// `exact` as the guide, must count exactly what exact-paths counts; the default sampled
/// PEP run must not change the program's behaviour.
pub fn assert_pep_matches_exact(program: &Path, extra: &[&str], guest: &[&str], exact: &Profile) {
    let (c0, out0, _, _) = run("none", program, extra, guest);
    let guide = unique_path(format!(
        "{}.guide.json",
        program.file_stem().unwrap().to_string_lossy()
    ));
    let mut f = std::fs::File::create(&guide).unwrap();
    exact.write(&mut f).unwrap();
    let g = guide.to_str().unwrap();
    for flags in [
        vec!["--every", "1"],
        vec!["--every", "1", "--guide", g],
        // Switchable copies with the flag set all along: the instrumented copies run
        // every path, entered from the clean code's entry checks.
        vec!["--every", "1", "--switch", "all", "--switch-always-on"],
        // Copies changing at random checks (entries, every loop header, mid-burst):
        // behaviour must not change.
        vec!["--every", "1", "--switch", "all", "--switch-chaos"],
        vec!["--every", "1", "--switch", "loops", "--switch-chaos"],
        vec!["--every", "1", "--switch", "outer", "--switch-chaos"],
        vec!["--every", "1", "--switch", "shallow", "--switch-chaos"],
        vec!["--every", "1", "--switch", "deep", "--switch-chaos"],
        // `deep` with the flag set all along, its nest checks entering only.
        vec!["--every", "1", "--switch", "deep", "--switch-always-on"],
        vec![],
        vec!["--switch", "outer"],
    ] {
        let mut args = extra.to_vec();
        args.extend_from_slice(&flags);
        let (c, out, err, pep) = run("pep", program, &args, guest);
        assert_eq!(
            (c0, &out0),
            (c, &out),
            "pep {flags:?} changed behaviour: {err}"
        );
        assert!(!err.contains("ignored"), "guide was not used: {err}");
        if flags.contains(&"--every") && !flags.contains(&"--switch-chaos") {
            assert_eq!(
                paths_by_key(&pep),
                paths_by_key(exact),
                "pep {flags:?} differs from exact-paths"
            );
            assert_same_edges(&pep, exact);
        }
    }
}

/// Targeted mode with a guide recorded on `guide_args` and a run on `run_args`: every hot
/// path it counts must have exactly the count exact-paths gives that path in the same run
/// (a poisoned path aliasing a valid number would inflate one), and per function the hot
/// counts plus the cold counter must add up to exact's executions. Functions that the two
/// modes truncate differently are skipped (their path segments differ). Returns the total
/// cold executions.
pub fn assert_targeted_exact(
    program: &Path,
    extra: &[&str],
    guide_args: &[&str],
    run_args: &[&str],
    threshold: &str,
) -> u64 {
    let (_, _, _, guide) = run("exact-paths", program, extra, guide_args);
    assert_targeted_exact_with(program, extra, &guide, run_args, threshold)
}

/// [`assert_targeted_exact`] with a given guide profile (tests make cold edges by editing
/// an exact profile's branch counts).
pub fn assert_targeted_exact_with(
    program: &Path,
    extra: &[&str],
    guide: &Profile,
    run_args: &[&str],
    threshold: &str,
) -> u64 {
    let file = unique_path(format!(
        "{}.tpp-guide.json",
        program.file_stem().unwrap().to_string_lossy()
    ));
    guide.write(std::fs::File::create(&file).unwrap()).unwrap();
    let (c0, out0, _, _) = run("none", program, extra, run_args);
    let (_, _, _, exact) = run("exact-paths", program, extra, run_args);
    let mut args = extra.to_vec();
    args.extend_from_slice(&[
        "--guide",
        file.to_str().unwrap(),
        "--cold-threshold",
        threshold,
    ]);
    let (c, out, err, tpp) = run("targeted", program, &args, run_args);
    assert_eq!((c0, &out0), (c, &out), "targeted changed behaviour: {err}");
    assert!(!err.contains("ignored"), "{err}");
    let exact_keys = paths_by_key(&exact);
    let mut cold_total = 0;
    for f in &tpp.functions {
        let Some(ef) = exact.function(f.index) else {
            continue;
        };
        if ef.truncated_nodes != f.truncated_nodes {
            continue;
        }
        let cold = f.cold_executions.unwrap_or(0);
        cold_total += cold;
        let mut hot = 0;
        for p in tpp.paths.iter().filter(|p| p.func == f.index) {
            let key = pepper_profile::compare::PathKey::of(p);
            assert_eq!(
                exact_keys.get(&key).copied(),
                Some(p.count),
                "hot path {} of {:?} miscounted",
                p.number,
                f.name
            );
            hot += p.count;
        }
        let all: u64 = exact
            .paths
            .iter()
            .filter(|p| p.func == f.index)
            .map(|p| p.count)
            .sum();
        assert_eq!(
            hot + cold,
            all,
            "function {:?}: hot + cold != exact",
            f.name
        );
    }
    cold_total
}

/// The `--dir` argument that shows the built workloads' directory (their inputs) to the
/// guest as `/data`.
pub fn data_dir_arg() -> String {
    format!("{}::/data", root().join("bench/workloads/build").display())
}

pub fn workload(name: &str) -> Option<std::path::PathBuf> {
    let p = root()
        .join("bench/workloads/build")
        .join(format!("{name}.wasm"));
    if p.exists() {
        return Some(p);
    }
    if std::env::var_os("PEPPER_SKIP_WORKLOADS").is_some() {
        eprintln!("skipping {name}: PEPPER_SKIP_WORKLOADS is set");
        return None;
    }
    panic!(
        "{} is missing: run bench/workloads/build.sh (or set PEPPER_SKIP_WORKLOADS=1)",
        p.display()
    );
}

/// Starts `pepper view --requests N PROFILE` and returns it with the `host:port` it
/// printed (it stops after serving `requests` connections).
pub fn spawn_view(profile: &Path, requests: usize) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_pepper"))
        .args(["view", "--requests", &requests.to_string()])
        .arg(profile)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    (child, addr)
}
