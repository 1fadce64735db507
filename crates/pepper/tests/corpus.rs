//! Every program of the benchmark corpus (bench/workloads/corpus/*.toml, built by
//! bench/workloads/build.sh) computes the same under every mode as under `--mode none`:
//! the same stdout and the same exit status, on its short input. CI runs the programs the
//! manifest marks `ci`; `PEPPER_CORPUS=all` (bench/identical.sh) runs every one, and
//! `PEPPER_CORPUS=NAME,NAME` the ones named.

mod common;
use common::*;
use pepper_bench::corpus::{self, Program};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Each mode as a user asks for it, with the flags that change what runs.
const MODES: &[(&str, &[&str])] = &[
    ("pep", &[]),
    ("pep", &["--contexts", "off"]),
    ("pep", &["--switch", "off"]),
    ("exact-paths", &[]),
    ("exact-edges", &[]),
    ("staged", &[]),
    ("ephemeral", &[]),
    ("ephemeral", &["--persistence", "8"]),
    ("calls", &[]),
    ("exact-calls", &[]),
];

/// `pepper run` of `p`'s short input in `mode`: (exit code, stdout, stderr).
fn run_program(p: &Program, mode: &str, flags: &[&str]) -> (i32, Vec<u8>, String) {
    let build = corpus::build_dir(&root());
    let module = p.module(&build);
    let dirs: Vec<String> = p
        .preopens(&build)
        .into_iter()
        .map(|(host, guest)| format!("{}::{guest}", host.display()))
        .collect();
    let mut extra: Vec<&str> = flags.to_vec();
    for d in &dirs {
        extra.extend(["--dir", d]);
    }
    for e in &p.env {
        extra.extend(["--env", e]);
    }
    let guest: Vec<&str> = p.quick[1..].iter().map(String::as_str).collect();
    let (code, stdout, stderr, _) = run(mode, &module, &extra, &guest);
    (code, stdout, stderr)
}

#[test]
fn every_corpus_program_computes_the_same_under_every_mode() {
    let pick = std::env::var("PEPPER_CORPUS").unwrap_or_default();
    let all = pick == "all";
    let named: Vec<&str> = pick
        .split(',')
        .filter(|n| !n.is_empty() && *n != "all")
        .collect();
    let programs: Vec<Program> = corpus::load(&corpus::manifest_dir(&root()))
        .expect("the corpus manifest reads")
        .into_iter()
        .filter(|p| all || named.contains(&p.name.as_str()) || named.is_empty() && p.ci)
        .filter(|p| {
            let module = p.module(&corpus::build_dir(&root()));
            // yosys, in the large set, comes from a script of its own.
            module.exists() || p.set.as_deref() != Some("large") && workload_missing(&module)
        })
        .collect();
    assert!(
        all || programs.len() >= 3 || skipping(),
        "CI checks at least three programs"
    );
    // (program, mode) pairs, two at a time (the machine's cores; each compiles too).
    let jobs: Vec<(&Program, usize)> = programs
        .iter()
        .flat_map(|p| (0..MODES.len()).map(move |m| (p, m)))
        .collect();
    let baselines: Vec<(i32, Vec<u8>, String)> = programs
        .iter()
        .map(|p| run_program(p, "none", &[]))
        .collect();
    for (p, (code, out, err)) in programs.iter().zip(&baselines) {
        assert_eq!(*code, 0, "{} exits 0 uninstrumented: {err}", p.name);
        assert!(!out.is_empty(), "{} prints its checksum", p.name);
    }
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while let Some(&(p, m)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let (mode, flags) = MODES[m];
                    let (code, out, err) = run_program(p, mode, flags);
                    let base = &baselines[programs.iter().position(|q| q.name == p.name).unwrap()];
                    let what = format!("{} under --mode {mode} {}", p.name, flags.join(" "));
                    eprintln!("corpus: {what}");
                    if (code, &out) != (base.0, &base.1) {
                        eprintln!("corpus: {what} DIFFERS from --mode none");
                        failures.lock().unwrap().push(format!(
                            "{what}: exit {code} (none: {}), stdout {} (none: {}); stderr: {}",
                            base.0,
                            summary(&out),
                            summary(&base.1),
                            err.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
                        ));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} runs differ from --mode none:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
}

/// Output shown in a failure: its size and first line.
fn summary(out: &[u8]) -> String {
    let text = String::from_utf8_lossy(out);
    format!(
        "{} bytes, {:?}",
        out.len(),
        text.lines().next().unwrap_or("")
    )
}

fn skipping() -> bool {
    std::env::var_os("PEPPER_SKIP_WORKLOADS").is_some()
}

/// A program of the manifest that was not built fails the test, unless
/// PEPPER_SKIP_WORKLOADS is set.
fn workload_missing(module: &std::path::Path) -> bool {
    assert!(
        skipping(),
        "{} is missing: run bench/workloads/build.sh (or set PEPPER_SKIP_WORKLOADS=1)",
        module.display()
    );
    eprintln!(
        "skipping {}: PEPPER_SKIP_WORKLOADS is set",
        module.display()
    );
    false
}
