//! `pepper-bench --guides N`: targeted mode (TPP) guided by each of N profiles recorded the
//! way a user records one (`pepper run`, the default PEP mode, on the measured input),
//! against exact paths, rounds interleaved. A sampled guide differs from run to run; this
//! says how much targeted mode's cost depends on which one a user got, and whether any
//! makes it slower than exact paths. Writes `bench/results/guides.md`.

use crate::{geomean_pct, machine, median, paired_ratio, profile_of, selected, shuffled, Args};
use anyhow::Result;
use pepper_profile::Mode;
use pepper_wasm::plan::Guide;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

struct Variant {
    label: String,
    prepared: pepper_runtime::Prepared,
    cfg: pepper_runtime::RunConfig,
    times: Vec<f64>,
}

/// N guides for `w`: the profiles of N default `pepper run`s.
fn record_guides(w: &crate::Workload, wasm: &[u8], n: usize) -> Result<Vec<Arc<Guide>>> {
    let opts = w.options(
        pepper_wasm::InstrumentOptions {
            mode: Mode::Pep,
            ..Default::default()
        },
        Default::default(),
    );
    let inst = pepper_wasm::instrument(wasm, &opts.instrument_options(None))?;
    let prepared = pepper_runtime::Prepared::new(&inst.wasm, &Default::default())?;
    let cfg = opts.run_config(&inst);
    (0..n)
        .map(|g| {
            let r = prepared.run(&cfg)?;
            let p = profile_of(&inst, &r);
            Ok(Arc::new(Guide::from_profile(&p, format!("pep-run-{g}"))))
        })
        .collect()
}

fn variant(
    w: &crate::Workload,
    wasm: &[u8],
    label: String,
    mode: Mode,
    guide: Option<Arc<Guide>>,
) -> Result<Variant> {
    let opts = w.options(
        pepper_wasm::InstrumentOptions {
            mode,
            ..Default::default()
        },
        Default::default(),
    );
    let inst = pepper_wasm::instrument(wasm, &opts.instrument_options(guide))?;
    Ok(Variant {
        label,
        prepared: pepper_runtime::Prepared::new(&inst.wasm, &Default::default())?,
        cfg: opts.run_config(&inst),
        times: Vec::new(),
    })
}

pub fn main(args: &Args, root: &Path, n: usize) -> Result<()> {
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let build = root.join("bench/workloads/build");
    let mut table = String::new();
    writeln!(table, "| workload | exact-paths | exact-paths again (A/A) | targeted, median guide | best guide | worst guide | worst against exact-paths | guides slower than exact-paths |")?;
    writeln!(table, "|---|---|---|---|---|---|---|---|")?;
    let (mut exact_all, mut median_all, mut worst_all) = (Vec::new(), Vec::new(), Vec::new());
    for (w, wasm, _) in selected(args, &build)? {
        let guides = record_guides(&w, &wasm, n)?;
        let mut variants = vec![
            variant(&w, &wasm, "none".into(), Mode::None, None)?,
            variant(&w, &wasm, "exact-paths".into(), Mode::ExactPaths, None)?,
            // The A/A control: a second copy of exact paths, whose distance from the first
            // is the noise a guide's difference must exceed.
            variant(
                &w,
                &wasm,
                "exact-paths again".into(),
                Mode::ExactPaths,
                None,
            )?,
        ];
        for (g, guide) in guides.into_iter().enumerate() {
            let label = format!("targeted guide {g}");
            variants.push(variant(&w, &wasm, label, Mode::Targeted, Some(guide))?);
        }
        for round in 0..=rounds {
            shuffled(&mut variants, round, |v| {
                let r = v.prepared.run(&v.cfg)?;
                anyhow::ensure!(
                    r.exit_code == 0,
                    "{} {} exited {}",
                    w.name,
                    v.label,
                    r.exit_code
                );
                if round > 0 {
                    v.times.push(r.run.as_secs_f64() * 1e3);
                }
                Ok(())
            })?;
            eprintln!("bench: {} round {round}/{rounds}", w.name);
        }
        let base = &variants[0].times;
        let exact = paired_ratio(&variants[1].times, base);
        let again = paired_ratio(&variants[2].times, base);
        let mut targeted: Vec<f64> = variants[3..]
            .iter()
            .map(|v| paired_ratio(&v.times, base))
            .collect();
        targeted.sort_by(f64::total_cmp);
        let (best, worst, mid) = (targeted[0], targeted[targeted.len() - 1], median(&targeted));
        // Slower beyond noise: more than 2 points over exact paths.
        let slower = targeted.iter().filter(|&&t| t > exact + 0.02).count();
        writeln!(
            table,
            "| {} | {:+.1}% | {:+.1}% | {:+.1}% | {:+.1}% | {:+.1}% | {:.2}x | {slower} of {} |",
            w.name,
            (exact - 1.0) * 100.0,
            (again - 1.0) * 100.0,
            (mid - 1.0) * 100.0,
            (best - 1.0) * 100.0,
            (worst - 1.0) * 100.0,
            worst / exact,
            targeted.len()
        )?;
        exact_all.push(exact);
        median_all.push(mid);
        worst_all.push(worst);
    }
    let doc = format!(
        "# pepper benchmark: targeted mode with sampled guides\n\n\
         Machine: {}. wasmtime 48.0.8. Each workload's guides are {n} profiles of default \
         `pepper run`s (PEP(64,17), bursts every 250 µs) of the measured input; targeted mode \
         (TPP, 5% cold threshold, register loops) runs once per guide, next to the \
         uninstrumented module and exact paths. Rounds: {rounds} interleaved, in a fresh \
         shuffled order each round (plus one warm-up). Overhead: median over rounds of the \
         per-round ratio to the uninstrumented run (guest run time). \"Slower than \
         exact-paths\": more than 2 points above it. \"Exact-paths again\" is a second copy \
         of exact paths: how far it lands from the first is this run's noise.\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Summary (geomean over workloads)\n\n\
         | exact-paths | targeted, median guide | targeted, worst guide |\n|---|---|---|\n\
         | {:+.1}% | {:+.1}% | {:+.1}% |\n\n## Per workload\n\n{table}",
        machine(),
        crate::reproduce(args, &format!(" --guides {n}")),
        geomean_pct(&exact_all),
        geomean_pct(&median_all),
        geomean_pct(&worst_all),
    );
    crate::write_results(args, root, "guides", &doc)
}
