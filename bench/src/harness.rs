//! What every table of the benchmark shares: the workloads, running variants in a
//! shuffled order, overheads as median paired ratios, accuracy summaries, the machine's
//! name and writing the results file.

use crate::Args;
use anyhow::{Context, Result};
use pepper_profile::{ModuleInfo, Profile, RunInfo};
use std::path::{Path, PathBuf};

/// A program of the corpus and its inputs, ready for the runtime.
pub(crate) struct Workload {
    pub name: String,
    /// Its language family, for the table's heading.
    pub family: String,
    pub args: Vec<String>,
    /// A different input, for guides that must not come from the measured run.
    pub other_args: Vec<String>,
    pub dirs: Vec<pepper_runtime::Preopen>,
    pub env: Vec<(String, String)>,
    /// Where the program's core module sits, when the program is a component.
    pub unit: pepper_wasm::component::Unit,
}

impl Workload {
    /// The library's options for a run of this workload (its own input), as `pepper run`
    /// builds them from flags.
    pub fn options(
        &self,
        instrument: pepper_wasm::InstrumentOptions,
        sampling: pepper_runtime::SamplingOptions,
    ) -> pepper_runtime::CommandOptions {
        {
            let mut command = pepper_runtime::CommandOptions::default();
            command.instrument = instrument;
            command.wasi = {
                let mut wasi = pepper_runtime::WasiOptions::default();
                wasi.args = self.args.clone();
                wasi.dirs = self.dirs.clone();
                wasi.env = self.env.clone();
                wasi
            };
            command.sampling = sampling;
            command
        }
    }

    /// What to compile for an instrumented core module: the module itself, or the
    /// program's component with the module put back in.
    pub fn runnable<'a>(&self, core: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        self.unit.wrap(core)
    }

    /// Whether the program is a component (its core module is what pepper rewrites).
    pub fn is_component(&self) -> bool {
        self.unit.component.is_some()
    }
}

/// Whether a table's options select `p`: the corpus proper always, the programs of a set
/// (`phases`, `large`) only with their option.
fn in_table(args: &Args, p: &pepper_bench::corpus::Program) -> bool {
    match p.set.as_deref() {
        None => true,
        Some("phases") => args.phases,
        Some("large") => args.large,
        Some(_) => false,
    }
}
/// Runs `run` once on every variant, in an order shuffled afresh each round (the same
/// shuffles every time the harness runs), so that no variant always runs first or right
/// after the same neighbour, which would bias it the same way every round. (It does not
/// remove the noise: two identical copies of the baseline still differ over a run, in any
/// order; the tables' A/A row shows by how much.) Results come back in variant order.
pub(crate) fn shuffled<T, R>(
    variants: &mut [T],
    round: usize,
    mut run: impl FnMut(&mut T) -> Result<R>,
) -> Result<Vec<R>> {
    let n = variants.len();
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = (round as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for i in (1..n).rev() {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        order.swap(i, ((x >> 33) % (i as u64 + 1)) as usize);
    }
    let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
    for k in order {
        out[k] = Some(run(&mut variants[k])?);
    }
    Ok(out.into_iter().flatten().collect())
}

/// Median over rounds of each round's time divided by the baseline's time in the same
/// round: runs next to each other share the machine's state, so slow drifts cancel.
pub(crate) fn paired_ratio(times: &[f64], base: &[f64]) -> f64 {
    let paired: Vec<f64> = times.iter().zip(base).map(|(t, b)| t / b).collect();
    median(&paired)
}

/// One workload's result for a variant of a side-by-side table: its overhead (median of
/// per-round ratios to `base`'s times) and its accuracy columns (medians over rounds),
/// both also added to the summary's accumulators (accuracy only when it was measured).
pub(crate) fn tally<const N: usize>(
    times: &[f64],
    base: &[f64],
    accuracy: &[[f64; N]],
    (ratios, accs): (&mut Vec<f64>, &mut Vec<[f64; N]>),
) -> (f64, [f64; N]) {
    let ratio = paired_ratio(times, base);
    ratios.push(ratio);
    let acc = medians(accuracy);
    if !accuracy.is_empty() {
        accs.push(acc);
    }
    (ratio, acc)
}

/// Per column, the median over rounds.
pub(crate) fn medians<const N: usize>(rounds: &[[f64; N]]) -> [f64; N] {
    std::array::from_fn(|i| median(&rounds.iter().map(|a| a[i]).collect::<Vec<_>>()))
}

/// A ratio as a percentage for a table cell (empty when unknown).
pub(crate) fn pct(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{:.1}%", x * 100.0)
    }
}

/// "mean / worst" of per-workload accuracies for the summary (empty when none).
pub(crate) fn mean_worst_pct(vals: &[f64]) -> String {
    if vals.is_empty() {
        return String::new();
    }
    let mean = vals.iter().sum::<f64>() / vals.len() as f64;
    let min = vals.iter().copied().fold(f64::NAN, f64::min);
    format!("{:.1}% / {:.1}%", mean * 100.0, min * 100.0)
}

/// Geometric mean of ratios, as a percentage change.
pub(crate) fn geomean_pct(v: &[f64]) -> f64 {
    let g = v.iter().map(|r| r.ln()).sum::<f64>() / v.len().max(1) as f64;
    (g.exp() - 1.0) * 100.0
}

/// A workload with its core module's bytes and the compilation cache to use.
pub(crate) type Loaded = (Workload, Vec<u8>, Option<PathBuf>);

/// The corpus programs the options select (`--only`, the sets, `--quick`), loaded. A program of the
/// corpus that was not built is skipped with a warning, unless `--only` names it.
pub(crate) fn selected(args: &Args, build: &Path) -> Result<Vec<Loaded>> {
    let root = build.join("../../..");
    let mut out = Vec::new();
    for p in pepper_bench::corpus::load(&pepper_bench::corpus::manifest_dir(&root))? {
        let named = args.only.contains(&p.name);
        // `--quick` (CI's smoke) runs the few programs the manifest marks `ci`, and a
        // table's own set.
        let smoke = !args.quick || p.ci || p.set.is_some();
        if !args.only.is_empty() && !named || args.only.is_empty() && !(in_table(args, &p) && smoke)
        {
            continue;
        }
        let path = p.module(build);
        if !path.exists() && !named {
            eprintln!(
                "bench: skipping {}: {} was not built (bench/workloads/build.sh)",
                p.name,
                path.display()
            );
            continue;
        }
        let bytes = std::fs::read(&path).with_context(|| {
            format!(
                "{} missing: run bench/workloads/build.sh (yosys: bench/workloads/yosys.sh)",
                path.display()
            )
        })?;
        // Every core module of a component that defines code, as `pepper run` profiles it.
        let unit = pepper_wasm::component::Unit::parse(&bytes)
            .with_context(|| format!("reading {}", path.display()))?;
        let cache = p.cache.then(pepper_runtime::default_cache_dir).flatten();
        let quick = args.quick;
        let w = Workload {
            name: p.name.clone(),
            family: p.family.clone(),
            args: if quick {
                p.quick.clone()
            } else {
                p.args.clone()
            },
            other_args: p.other.clone().unwrap_or_else(|| p.quick.clone()),
            dirs: p
                .preopens(build)
                .into_iter()
                .map(|(host, guest)| pepper_runtime::Preopen::new(host, &guest))
                .collect(),
            env: p.env_pairs(),
            unit: unit.clone(),
        };
        out.push((w, unit.core, cache));
    }
    Ok(out)
}

/// The corpus's size for a table's heading: programs and language families.
pub(crate) fn corpus_size(loaded: &[Loaded]) -> String {
    corpus_size_of(loaded.iter().map(|l| l.0.family.as_str()))
}

/// [`corpus_size`] from the programs' families.
pub(crate) fn corpus_size_of<'a>(families: impl Iterator<Item = &'a str>) -> String {
    let mut families: Vec<&str> = families.collect();
    let programs = families.len();
    families.sort();
    families.dedup();
    format!(
        "{} programs in {} language families ({})",
        programs,
        families.len(),
        families.join(", ")
    )
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
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

/// The CPU time of every thread of this process so far (the guest's and pepper's own).
pub(crate) fn process_cpu() -> std::time::Duration {
    // SAFETY: getrusage fills one struct of ours.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| {
        std::time::Duration::new(t.tv_sec as u64, (t.tv_usec as u32).saturating_mul(1000))
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Busy processes (shell loops) competing with the measured runs for the machine's
/// cores, as other work on a shared server does; stopped when dropped.
pub(crate) struct Load(Vec<std::process::Child>);

impl Load {
    /// Starts `n` busy processes. Each dies with the bench (a killed bench runs no
    /// `Drop`): left behind, they loaded every later measurement and held the bench's
    /// inherited file descriptors (a build lock) open.
    pub(crate) fn start(n: usize) -> Result<Load> {
        use std::os::unix::process::CommandExt;
        let mut busy = Vec::new();
        for _ in 0..n {
            let mut cmd = std::process::Command::new("sh");
            cmd.args(["-c", "while :; do :; done"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null());
            // SAFETY: `prctl` is async-signal-safe, and nothing else runs between fork
            // and exec.
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            busy.push(cmd.spawn()?);
        }
        Ok(Load(busy))
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(crate) fn machine() -> String {
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

/// A profile's module details left blank: the benchmark compares counts.
fn unnamed_module() -> ModuleInfo {
    ModuleInfo {
        path: String::new(),
        sha256: String::new(),
        size: 0,
    }
}

/// The profile of one run, as `pepper run` would write it (module and run details left
/// out: the benchmark compares counts).
pub(crate) fn profile_of(
    inst: &pepper_wasm::Instrumented,
    r: &pepper_runtime::RunResult,
) -> Profile {
    pepper_runtime::decode::profile(
        inst,
        r.results(),
        unnamed_module(),
        RunInfo::default(),
        &Default::default(),
        None,
        &|_| None,
    )
}

/// The profile of one run of `modules`, every module's joined as `pepper run` joins them
/// (module and run details left out: the benchmark compares counts).
pub(crate) fn profile_of_all(
    w: &Workload,
    modules: &pepper_runtime::Modules,
    r: &pepper_runtime::RunResult,
) -> Profile {
    modules.decode(
        w.unit.component.as_ref(),
        (r.results(), &r.module_counters),
        (unnamed_module(), RunInfo::default()),
        &Default::default(),
        None,
        &|_| None,
    )
}

/// Whether `--variants` (any of them; all when none is given) selects `label`.
pub(crate) fn selects(args: &crate::Args, label: &str, substring: bool) -> bool {
    args.variants.is_empty() || args.variants.iter().any(|v| picks(v, label, substring))
}

/// Whether `--variants v` selects `label`: `=LABEL` exactly, else by substring (or, for
/// tables whose labels contain each other, exactly).
fn picks(v: &str, label: &str, substring: bool) -> bool {
    match v.strip_prefix('=') {
        Some(exact) => label == exact,
        None if substring => label.contains(v),
        None => label == v,
    }
}

/// Writes a results table to `--output`, or `bench/results/NAME.md` (a temporary file with
/// `--quick`, whose numbers mean nothing), and prints it.
pub(crate) fn write_results(args: &Args, root: &Path, name: &str, doc: &str) -> Result<()> {
    let out = args.output.clone().unwrap_or_else(|| {
        if args.quick {
            std::env::temp_dir().join(format!("pepper-bench-{name}-quick.md"))
        } else {
            root.join(format!("bench/results/{name}.md"))
        }
    });
    std::fs::write(&out, doc).with_context(|| format!("writing {}", out.display()))?;
    println!("{doc}");
    eprintln!("bench: wrote {}", out.display());
    Ok(())
}

/// The options that reproduce a table (after `cargo run --release -p pepper-bench --`).
pub(crate) fn reproduce(args: &Args, first: &str) -> String {
    use std::fmt::Write as _;
    let mut cmd = format!("{first} --rounds {}", args.rounds);
    if args.load > 0 {
        write!(cmd, " --load {}", args.load).expect("writing to a String");
    }
    for o in &args.only {
        write!(cmd, " --only {o}").expect("writing to a String");
    }
    for v in &args.variants {
        // Labels like `pep(64,17)` need quotes in a shell.
        let quoted = if v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_+.,".contains(c))
        {
            v.clone()
        } else {
            format!("'{v}'")
        };
        write!(cmd, " --variants {quoted}").expect("writing to a String");
    }
    if args.large {
        cmd.push_str(" --large");
    }
    if args.wasm_opt {
        cmd.push_str(" --wasm-opt");
    }
    if let Some(out) = &args.output {
        write!(cmd, " --output {}", out.display()).expect("writing to a String");
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant runs once per round, results come back in variant order whatever the
    /// run order was, and the run order changes from round to round.
    #[test]
    fn shuffled_runs_each_variant_once_and_returns_in_variant_order() {
        let mut orders = Vec::new();
        for round in 0..8 {
            let mut variants: Vec<(usize, u32)> = (0..6).map(|k| (k, 0)).collect();
            let mut ran = Vec::new();
            let out = shuffled(&mut variants, round, |v| {
                v.1 += 1;
                ran.push(v.0);
                Ok(v.0 * 10)
            })
            .unwrap();
            assert_eq!(out, vec![0, 10, 20, 30, 40, 50]);
            assert!(variants.iter().all(|v| v.1 == 1));
            orders.push(ran);
        }
        orders.sort();
        orders.dedup();
        assert!(orders.len() >= 6, "orders barely change: {orders:?}");
        assert!(
            orders.iter().any(|o| o[0] != 0),
            "the baseline is not always first"
        );
    }
}
