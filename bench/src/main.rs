//! pepper-bench: overhead of each profiling mode on the real workloads, measured side by side.
//!
//! For every workload: instrument once per mode (rewrite time and code size), compile once per
//! variant (not timed), then run all variants interleaved round after round (so machine noise
//! hits every mode alike), and report the median run time of each and its ratio to the
//! uninstrumented median. Writes a Markdown table to `bench/results/`.
//!
//!   cargo run --release -p pepper-bench                 # full run, writes bench/results/exact.md
//!   cargo run --release -p pepper-bench -- --quick      # CI smoke: small inputs, 1 round

use anyhow::{Context, Result};
use clap::Parser;
use pepper_profile::Mode;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// Interleaved rounds (the median is reported).
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// Small inputs and one round: checks the harness works, measures nothing meaningful.
    #[arg(long)]
    quick: bool,
    /// Output Markdown file [default: bench/results/exact.md, or a temp file with --quick].
    #[arg(long)]
    output: Option<PathBuf>,
    /// Only these workloads.
    #[arg(long)]
    only: Vec<String>,
}

struct Workload {
    name: &'static str,
    args: Vec<String>,
    dirs: Vec<(PathBuf, String)>,
}

fn workloads(build: &Path, quick: bool) -> Vec<Workload> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let data = vec![(build.to_path_buf(), "/data".to_string())];
    let input = if quick {
        "/data/input-small.txt"
    } else {
        "/data/input-bench.txt"
    };
    vec![
        Workload {
            name: "bzip2",
            args: s(&["bzip2", "-c", "-9", input]),
            dirs: data,
        },
        Workload {
            name: "lua",
            args: s(&["lua", if quick { "2" } else { "100" }]),
            dirs: vec![],
        },
        Workload {
            name: "sqlite",
            args: s(&["sqlite", if quick { "1" } else { "20" }]),
            dirs: vec![],
        },
        Workload {
            name: "zstd",
            args: s(&["zstd", if quick { "1" } else { "8" }]),
            dirs: vec![],
        },
    ]
}

const MODES: [Mode; 3] = [Mode::None, Mode::ExactEdges, Mode::ExactPaths];

struct Variant {
    mode: Mode,
    prepared: pepper_runtime::Prepared,
    rewrite_ms: f64,
    size: usize,
    times: Vec<f64>,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cpu}, {cores} cores, {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let build = root.join("bench/workloads/build");
    let mut table = String::new();
    let mut geo: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    writeln!(
        table,
        "| workload | mode | median run ms | overhead | rewrite ms | code size | runs |"
    )?;
    writeln!(table, "|---|---|---|---|---|---|---|")?;
    for w in workloads(&build, args.quick) {
        if !args.only.is_empty() && !args.only.iter().any(|o| o == w.name) {
            continue;
        }
        let path = build.join(format!("{}.wasm", w.name));
        let wasm = std::fs::read(&path)
            .with_context(|| format!("{} missing: run bench/workloads/build.sh", path.display()))?;
        let mut variants = Vec::new();
        for mode in MODES {
            let t = Instant::now();
            let inst = pepper_wasm::instrument(
                &wasm,
                &pepper_wasm::InstrumentOptions {
                    mode,
                    ..Default::default()
                },
            )?;
            let rewrite_ms = t.elapsed().as_secs_f64() * 1e3;
            let prepared = pepper_runtime::Prepared::new(&inst.wasm, None)?;
            eprintln!(
                "bench: {} {}: rewritten in {rewrite_ms:.0} ms, compiled in {:.0} ms",
                w.name,
                mode.name(),
                prepared.compile.as_secs_f64() * 1e3
            );
            variants.push(Variant {
                mode,
                prepared,
                rewrite_ms,
                size: inst.wasm.len(),
                times: Vec::new(),
            });
        }
        let cfg = pepper_runtime::RunConfig {
            args: w.args.clone(),
            dirs: w.dirs.clone(),
            counters_export: Some(pepper_wasm::COUNTERS_EXPORT.into()),
            ..Default::default()
        };
        // One untimed warm-up of each variant, then interleaved timed rounds.
        for round in 0..=rounds {
            for v in &mut variants {
                let r = v.prepared.run(&cfg)?;
                anyhow::ensure!(
                    r.exit_code == 0,
                    "{} {} exited {} ({:?})",
                    w.name,
                    v.mode.name(),
                    r.exit_code,
                    r.trap
                );
                if round > 0 {
                    v.times.push(r.run.as_secs_f64() * 1e3);
                }
            }
            eprintln!("bench: {} round {round}/{rounds}", w.name);
        }
        let base = median(&variants[0].times);
        for (k, v) in variants.iter().enumerate() {
            let m = median(&v.times);
            let ratio = m / base;
            geo[k].push(ratio);
            writeln!(
                table,
                "| {} | {} | {:.1} | {:+.1}% | {:.0} | {} ({:+.1}%) | {} |",
                w.name,
                v.mode.name(),
                m,
                (ratio - 1.0) * 100.0,
                v.rewrite_ms,
                v.size,
                (v.size as f64 / wasm.len() as f64 - 1.0) * 100.0,
                v.times.len()
            )?;
        }
    }
    let mut summary = String::new();
    writeln!(
        summary,
        "| mode | geometric-mean overhead | worst workload |"
    )?;
    writeln!(summary, "|---|---|---|")?;
    for (k, mode) in MODES.iter().enumerate() {
        let g = geo[k].iter().map(|r| r.ln()).sum::<f64>() / geo[k].len().max(1) as f64;
        let worst = geo[k].iter().copied().fold(f64::NAN, f64::max);
        writeln!(
            summary,
            "| {} | {:+.1}% | {:+.1}% |",
            mode.name(),
            (g.exp() - 1.0) * 100.0,
            (worst - 1.0) * 100.0
        )?;
    }
    let doc = format!(
        "# pepper exact-mode overhead\n\n\
         Machine: {}. Rounds: {rounds} interleaved (plus one warm-up), median of guest run time \
         (compilation excluded; wasmtime {}, Cranelift). Overhead is relative to the \
         uninstrumented module in the same run.\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench`\n\n\
         ## Summary\n\n{summary}\n## Per workload\n\n{table}",
        machine(),
        "48.0.8",
    );
    let out = args.output.unwrap_or_else(|| {
        if args.quick {
            std::env::temp_dir().join("pepper-bench-quick.md")
        } else {
            root.join("bench/results/exact.md")
        }
    });
    std::fs::write(&out, &doc).with_context(|| format!("writing {}", out.display()))?;
    println!("{doc}");
    eprintln!("bench: wrote {}", out.display());
    Ok(())
}
