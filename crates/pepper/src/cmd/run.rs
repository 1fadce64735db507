//! `pepper run`: instrument, run in wasmtime, write the profile.

use super::{print_warnings, read_module, ModeArg};
use anyhow::{bail, Context, Result};
use pepper_profile::{module_hash, ModuleInfo, RunInfo};
use pepper_wasm::module::ModuleFacts;
use std::path::PathBuf;
use std::time::Instant;

/// Run a WASI command module under the profiler and write a profile.
///
/// Arguments after `--` go to the guest. The guest's exit code becomes pepper's. The
/// profile is written even when the guest traps or calls `proc_exit`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to measure.
    #[arg(long, value_enum, default_value = "exact-paths")]
    mode: ModeArg,
    /// Profile output file [default: PROGRAM's stem + `.pepper.json`].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Preopen a host directory: `HOST` (same path in the guest) or `HOST::GUEST`.
    #[arg(long = "dir", value_name = "HOST[::GUEST]")]
    dirs: Vec<String>,
    /// Set a guest environment variable.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    envs: Vec<String>,
    /// Pass the whole host environment to the guest.
    #[arg(long)]
    inherit_env: bool,
    /// Do not use wasmtime's compilation cache.
    #[arg(long)]
    no_cache: bool,
    /// Paths per function above which counting switches from an array to a hash table.
    #[arg(long, default_value_t = 4096)]
    array_max_paths: u64,
    /// The module to run (`.wasm` or `.wat`), a WASI command.
    program: PathBuf,
    /// Arguments for the guest.
    #[arg(last = true)]
    args: Vec<String>,
}

pub fn run(a: Args) -> Result<i32> {
    let wasm = read_module(&a.program)?;
    let mode: pepper_profile::Mode = a.mode.into();
    let t0 = Instant::now();
    if wasm.len() > 8 << 20 {
        eprintln!(
            "pepper: instrumenting {} ({} MB)...",
            a.program.display(),
            wasm.len() >> 20
        );
    }
    let opts = pepper_wasm::InstrumentOptions {
        mode,
        array_max_paths: a.array_max_paths,
        ..Default::default()
    };
    let inst = pepper_wasm::instrument(&wasm, &opts)
        .with_context(|| format!("instrumenting {}", a.program.display()))?;
    let instrument_ms = t0.elapsed().as_secs_f64() * 1e3;
    print_warnings(&inst.plan.warnings, 10);

    let mut dirs = Vec::new();
    for d in &a.dirs {
        let (host, guest) = match d.split_once("::") {
            Some((h, g)) => (h.to_string(), g.to_string()),
            None => (d.clone(), d.clone()),
        };
        dirs.push((PathBuf::from(host), guest));
    }
    let mut env = Vec::new();
    for e in &a.envs {
        let Some((k, v)) = e.split_once('=') else {
            bail!("--env {e:?}: expected NAME=VALUE")
        };
        env.push((k.to_string(), v.to_string()));
    }
    let argv0 = a
        .program
        .file_name()
        .map_or("program".into(), |n| n.to_string_lossy().into_owned());
    let mut args = vec![argv0];
    args.extend(a.args.iter().cloned());
    let cfg = pepper_runtime::RunConfig {
        args: args.clone(),
        env,
        inherit_env: a.inherit_env,
        dirs,
        cache_dir: if a.no_cache {
            None
        } else {
            pepper_runtime::default_cache_dir()
        },
        counters_export: (mode != pepper_profile::Mode::None)
            .then(|| pepper_wasm::COUNTERS_EXPORT.to_string()),
        inherit_stdio: true,
    };
    if wasm.len() > 8 << 20 {
        eprintln!("pepper: compiling (cached after the first run)...");
    }
    let result = pepper_runtime::run(&inst.wasm, &cfg)?;
    if let Some(t) = &result.trap {
        eprintln!("pepper: guest trapped ({t}); writing the profile of what completed");
    }

    let facts = ModuleFacts::parse(&wasm)?;
    let lines = pepper_wasm::dwarf::LineTable::new(&facts);
    let outcome = pepper_wasm::RunOutcome {
        module: ModuleInfo {
            path: a.program.display().to_string(),
            sha256: module_hash(&wasm),
            size: wasm.len() as u64,
        },
        run: RunInfo {
            args,
            exit_code: Some(result.exit_code),
            trap: result.trap.clone(),
            instrument_ms,
            compile_ms: result.compile.as_secs_f64() * 1e3,
            run_ms: result.run.as_secs_f64() * 1e3,
        },
        warnings: Vec::new(),
    };
    let profile = inst
        .plan
        .profile(result.counters.as_deref(), outcome, &|o| lines.lookup(o));
    let output = a.output.clone().unwrap_or_else(|| {
        let stem = a
            .program
            .file_stem()
            .map_or("program".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from(format!("{stem}.pepper.json"))
    });
    let file =
        std::fs::File::create(&output).with_context(|| format!("creating {}", output.display()))?;
    profile.write(std::io::BufWriter::new(file))?;
    eprintln!(
        "pepper: wrote {} ({} mode: {} paths, {} branches; compile {:.0} ms, run {:.0} ms)",
        output.display(),
        mode.name(),
        profile.paths.len(),
        profile.branches.len(),
        profile.run.compile_ms,
        profile.run.run_ms
    );
    Ok(result.exit_code)
}
