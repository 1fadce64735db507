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
        {
            let mut instrument = pepper_wasm::InstrumentOptions::default();
            instrument.mode = Mode::Pep;
            instrument
        },
        Default::default(),
    );
    let inst = pepper_wasm::instrument(wasm, &opts.instrument_options(None))?;
    let prepared = pepper_runtime::Prepared::new(&w.runnable(&inst.wasm), &Default::default())?;
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
        {
            let mut instrument = pepper_wasm::InstrumentOptions::default();
            instrument.mode = mode;
            instrument
        },
        Default::default(),
    );
    let inst = pepper_wasm::instrument(wasm, &opts.instrument_options(guide))?;
    Ok(Variant {
        label,
        prepared: pepper_runtime::Prepared::new(&w.runnable(&inst.wasm), &Default::default())?,
        cfg: opts.run_config(&inst),
        times: Vec::new(),
    })
}

/// Runs `variants` for `rounds` interleaved rounds after one warm-up, recording each
/// variant's guest run times (ms).
fn time_rounds(
    w: &crate::Workload,
    variants: &mut [Variant],
    rounds: usize,
    what: &str,
) -> Result<()> {
    for round in 0..=rounds {
        shuffled(variants, round, |v| {
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
        eprintln!("bench: {} {what} round {round}/{rounds}", w.name);
    }
    Ok(())
}

pub fn main(args: &Args, root: &Path, n: usize) -> Result<()> {
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let build = root.join("bench/workloads/build");
    let mut table = String::new();
    writeln!(table, "| workload | exact-paths | exact-paths again (A/A) | targeted, median guide | best guide | worst guide | worst against exact-paths | guides slower than exact-paths | re-timed: exact-paths / median guide / worst guide (worst against exact-paths) |")?;
    writeln!(table, "|---|---|---|---|---|---|---|---|---|")?;
    let (mut exact_all, mut median_all, mut worst_all) = (Vec::new(), Vec::new(), Vec::new());
    let mut worst_again_all = Vec::new();
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
        time_rounds(&w, &mut variants, rounds, "guides")?;
        let base = &variants[0].times;
        let exact = paired_ratio(&variants[1].times, base);
        let again = paired_ratio(&variants[2].times, base);
        let mut targeted: Vec<(f64, usize)> = (3..variants.len())
            .map(|i| (paired_ratio(&variants[i].times, base), i))
            .collect();
        targeted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ratios: Vec<f64> = targeted.iter().map(|t| t.0).collect();
        let (best, worst, mid) = (ratios[0], ratios[ratios.len() - 1], median(&ratios));
        // Slower beyond noise: more than 2 points over exact paths.
        let slower = ratios.iter().filter(|&&t| t > exact + 0.02).count();
        // The worst of 20 noisy medians is biased upwards (it was picked for being slow):
        // the worst and the median guide are timed again, alone with the uninstrumented
        // module and exact paths, in fresh rounds. A guide that is slow again is slow; one
        // that is not was noise.
        let (worst_at, mid_at) = (targeted[ratios.len() - 1].1, targeted[ratios.len() / 2].1);
        let mut pool: Vec<Option<Variant>> = variants.into_iter().map(Some).collect();
        let mut again_variants: Vec<Variant> = [0, 1, worst_at, mid_at]
            .into_iter()
            .filter_map(|i| pool[i].take())
            .map(|v| Variant {
                times: Vec::new(),
                ..v
            })
            .collect();
        time_rounds(&w, &mut again_variants, rounds, "re-timing")?;
        let base2 = &again_variants[0].times;
        // With one guide, the worst is the median.
        let last = again_variants.len() - 1;
        let [exact2, worst2, mid2] =
            [1, 2, last].map(|i| paired_ratio(&again_variants[i].times, base2));
        writeln!(
            table,
            "| {} | {:+.1}% | {:+.1}% | {:+.1}% | {:+.1}% | {:+.1}% | {:.2}x | {slower} of {} | {:+.1}% / {:+.1}% / {:+.1}% ({:.2}x) |",
            w.name,
            (exact - 1.0) * 100.0,
            (again - 1.0) * 100.0,
            (mid - 1.0) * 100.0,
            (best - 1.0) * 100.0,
            (worst - 1.0) * 100.0,
            worst / exact,
            ratios.len(),
            (exact2 - 1.0) * 100.0,
            (mid2 - 1.0) * 100.0,
            (worst2 - 1.0) * 100.0,
            worst2 / exact2,
        )?;
        worst_again_all.push(worst2);
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
         of exact paths: how far it lands from the first is this run's noise. \
         Re-timed: the worst and the median guide run again in {rounds} fresh rounds with only \
         the uninstrumented module and exact paths, since the worst of {n} noisy medians is \
         picked for being slow; a guide slow again is slow, one that is not was noise.\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Summary (geomean over workloads)\n\n\
         | exact-paths | targeted, median guide | targeted, worst guide | worst guide re-timed |\n\
         |---|---|---|---|\n| {:+.1}% | {:+.1}% | {:+.1}% | {:+.1}% |\n\n## Per workload\n\n{table}",
        machine(),
        crate::reproduce(args, &format!(" --guides {n}")),
        geomean_pct(&exact_all),
        geomean_pct(&median_all),
        geomean_pct(&worst_all),
        geomean_pct(&worst_again_all),
    );
    crate::write_results(args, root, "guides", &doc)
}
