//! `pepper-bench --phases`: Nagpurkar's phase behavior on real programs. Writes
//! `bench/results/phases.md` with four parts:
//!
//! 1. time lines: one PEP run per workload reading its ring continuously (`--timeline --timeline-source ring`),
//!    and the baseline phases of each at several minimum phase lengths (MPL);
//! 2. the online detector: every configuration of window, model, analyzer, window size
//!    and anchoring, scored against the baseline (trace-driven, as in the dissertation);
//! 3. interval sampling, trace-driven: the share of intervals periodic and phase-aware
//!    sampling profile to reach 5% code-region error against the exhaustive time line;
//! 4. live runs, rounds interleaved: overhead of PEP with the online detector, and of
//!    phase-aware against periodic interval sampling on the switch, with their accuracy
//!    against an exact-paths run.

use crate::{
    geomean_pct, machine, median, paired_ratio, pct, profile_of, selected, shuffled, Args,
    PEP_DEFAULT, PEP_INTERVAL,
};
use anyhow::Result;
use pepper_phases::{
    detect, sampling, timeline, Analyzer, DetectorConfig, Model, Signature, Tracker, Window,
};
use pepper_profile::compare::compare;
use pepper_profile::{Mode, Timeline};
use pepper_runtime::{IntervalConfig, Strategy, TimelineSource};
use pepper_wasm::switch::SwitchPlacement;
use pepper_wasm::ContextMode;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// Minimum phase lengths, in intervals of a million path ends.
const MPLS: [usize; 4] = [4, 8, 16, 32];
/// pepper's phase-aware rule: the second interval of each new phase, and every 20th
/// interval of a phase again (`pepper run --phase-aware`'s defaults).
const RESAMPLE: u64 = 20;
/// Path ends per time-line interval (`pepper run --timeline`'s default).
const TIMELINE_INTERVAL: u64 = 1_000_000;
/// Workloads built to have phases; the others are there to see what a detector does on
/// programs that are mostly one loop.
fn has_phases(name: &str) -> bool {
    name.ends_with("-phases") || name == "zstd"
}

pub fn main(args: &Args, root: &Path) -> Result<()> {
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let build = root.join("bench/workloads/build");
    let loaded = selected(args, &build)?;
    let mut lines: Vec<(String, Timeline)> = Vec::new();
    for (w, wasm, cache) in &loaded {
        let inst = instrument(wasm, Mode::Pep, None, ContextMode::Off, true)?;
        let prepared = prepare(w, &inst, cache)?;
        let mut cfg = run_config(w, &inst, None);
        if let Some(s) = cfg.attach.sampler.as_mut() {
            s.intervals = Some(IntervalConfig::Timeline {
                length: TIMELINE_INTERVAL,
                detector: None,
                source: TimelineSource::Ring,
            });
        }
        let r = prepared.run(&cfg)?;
        let t = r
            .samples
            .and_then(|s| s.intervals)
            .map(|i| i.timeline)
            .unwrap_or_default();
        eprintln!(
            "bench: {} time line: {} intervals, {} path ends unread",
            w.name,
            t.intervals.len(),
            t.lost
        );
        lines.push((w.name.clone(), t));
    }
    let baselines = baseline_table(&lines)?;
    let (sweep_summary, sweep_table) = sweep(&lines)?;
    let sampling_table = trace_sampling(&lines)?;
    let live = live(&loaded, &lines, rounds)?;
    let doc = format!(
        "# pepper benchmark: phases\n\n\
         Machine: {}. wasmtime 48.0.8. Time lines: one PEP run per workload with \
         `--timeline --timeline-source ring` (every path end's position exact, one in {} read for the per-function \
         vectors), intervals of {} path ends. Phase workloads: {}; the others are mostly one \
         loop each.\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Baseline phases\n\n\
         Intervals grouped by similarity over the whole run (centroid clustering, Manhattan \
         distance <= {}); an interval is in phase when it lies in a run of at least MPL \
         intervals of one group. (Nagpurkar's baseline selects loop and recursion instances \
         from a call-loop trace; pepper's time line has interval vectors, so its baseline is \
         their stable stretches.) Cells: phases / % of path ends in phase.\n\n{baselines}\n\
         ## Online detector\n\n\
         Every configuration run over each time line interval by interval and scored \
         against the baseline with Nagpurkar's metric, correlation/2 + sensitivity/4 + \
         (1 - false positives)/4 (correlation weighted by path ends). CW is the current \
         window (a fraction of MPL), the trailing window starts at the CW's size; skipFactor \
         1 except fixed-interval. Unweighted: working sets of functions with >= 1% of a \
         window. Average analyzer: enters a phase at 0.7, stays while within delta of the \
         phase's mean similarity. Anchored: phase starts reported retroactively at the \
         RN anchor. The dissertation's best average score is 0.664.\n\n{sweep_summary}\n\
         ## Interval sampling, trace-driven\n\n\
         On each time line: profile some intervals, scale up, and measure the code-region \
         error (sum over functions of |estimate - exhaustive| / exhaustive path ends). \
         Periodic: every N-th interval, scaled by N. Phase-aware: an online tracker \
         (centroid clustering at the given distance) classifies each interval as it ends, \
         predicts the next one is in the same phase, and profiles it if that makes it the \
         third interval of a phase not yet profiled (Nagpurkar's rule) or, pepper's rule, \
         the second, or any 20th interval of a phase; each phase's profile (the mean of \
         its profiled intervals) is scaled by its intervals, and phases never profiled \
         borrow the nearest profiled phase's. \
         Cells: the fewest intervals profiled (% of all) that reach <= 5% error, over N in \
         2..64 and thresholds 0.05..1.0.\n\n{sampling_table}\n\
         ## Live runs\n\n{live}\n\
         ## Every detector configuration\n\n{sweep_table}",
        machine(),
        pepper_runtime::TIMELINE_STRIDE,
        TIMELINE_INTERVAL,
        lines
            .iter()
            .filter(|(n, _)| has_phases(n))
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        crate::reproduce(args, " --phases"),
        timeline::BASELINE_THRESHOLD,
    );
    crate::write_results(args, root, "phases", &doc)
}

fn instrument(
    wasm: &[u8],
    mode: Mode,
    switch: Option<SwitchPlacement>,
    contexts: ContextMode,
    big_ring: bool,
) -> Result<pepper_wasm::Instrumented> {
    Ok(pepper_wasm::instrument(wasm, &{
        let mut instrument = pepper_wasm::InstrumentOptions::default();
        instrument.mode = mode;
        instrument.contexts = contexts;
        instrument.switch = switch;
        instrument.ring_log2 = if big_ring {
            pepper_runtime::EVERY_PATH_END_RING_LOG2
        } else {
            12
        };
        instrument
    })?)
}

fn prepare(
    w: &crate::Workload,
    inst: &pepper_wasm::Instrumented,
    cache: &Option<std::path::PathBuf>,
) -> Result<pepper_runtime::Prepared> {
    pepper_runtime::Prepared::new(
        &w.runnable(&inst.wasm),
        &pepper_runtime::EngineOptions::default().with_cache_dir(cache.clone()),
    )
}

/// What `pepper run` would run: PEP's sampler (and stacks, when the plan has them).
fn run_config(
    w: &crate::Workload,
    inst: &pepper_wasm::Instrumented,
    intervals: Option<IntervalConfig>,
) -> pepper_runtime::RunConfig {
    let sampling = {
        let mut sampling = pepper_runtime::SamplingOptions::default();
        sampling.params = PEP_DEFAULT;
        sampling.interval = PEP_INTERVAL;
        sampling.stack_interval = Some(PEP_INTERVAL);
        sampling.intervals = intervals;
        sampling
    };
    let opts = {
        let mut instrument = pepper_wasm::InstrumentOptions::default();
        instrument.mode = inst.guest.mode;
        instrument
    };
    w.options(opts, sampling).run_config(inst)
}

/// The baseline of `t` at each of [`MPLS`] (the intervals clustered once).
fn baselines_of(t: &Timeline) -> Vec<Vec<pepper_phases::Label>> {
    let ids = pepper_phases::cluster(&timeline::signatures(t), timeline::BASELINE_THRESHOLD);
    MPLS.iter()
        .map(|&m| pepper_phases::oracle(&ids, m))
        .collect()
}

/// Part 1: baseline phases per workload and MPL.
fn baseline_table(lines: &[(String, Timeline)]) -> Result<String> {
    let mut s = String::new();
    write!(s, "| workload | intervals | path ends unread |")?;
    for m in MPLS {
        write!(s, " MPL {m} |")?;
    }
    writeln!(s)?;
    writeln!(s, "|---|---|---|{}", "---|".repeat(MPLS.len()))?;
    for (name, t) in lines {
        write!(s, "| {name} | {} | {} |", t.intervals.len(), t.lost)?;
        let w = timeline::weights(t);
        let total = w.iter().sum::<u64>().max(1) as f64;
        for b in baselines_of(t) {
            let phases = pepper_phases::spans(&b).len();
            let inside: u64 = b
                .iter()
                .zip(&w)
                .filter(|(p, _)| p.is_some())
                .map(|(_, w)| w)
                .sum();
            write!(s, " {phases} / {:.0}% |", inside as f64 / total * 100.0)?;
        }
        writeln!(s)?;
    }
    Ok(s)
}

/// A detector configuration relative to MPL.
#[derive(Clone, Copy)]
struct Sweep {
    window: Window,
    model: Model,
    analyzer: Analyzer,
    cw_div: usize,
    anchor: bool,
}

impl Sweep {
    fn at(&self, mpl: usize) -> DetectorConfig {
        let cw = (mpl / self.cw_div).max(1);
        DetectorConfig {
            window: self.window,
            cw,
            tw: cw,
            model: self.model,
            analyzer: self.analyzer,
            anchor: self.anchor,
        }
    }

    fn name(&self) -> String {
        format!("{}, CW = MPL/{}", self.at(8).policy_name(), self.cw_div)
    }

    fn all() -> Vec<Sweep> {
        let mut v = Vec::new();
        let analyzers = [
            Analyzer::Threshold(0.5),
            Analyzer::Threshold(0.6),
            Analyzer::Threshold(0.7),
            Analyzer::Threshold(0.8),
            Analyzer::Threshold(0.9),
            Analyzer::Average {
                enter: 0.7,
                delta: 0.01,
            },
            Analyzer::Average {
                enter: 0.7,
                delta: 0.05,
            },
            Analyzer::Average {
                enter: 0.7,
                delta: 0.1,
            },
            Analyzer::Average {
                enter: 0.7,
                delta: 0.2,
            },
        ];
        for window in [Window::Adaptive, Window::Constant, Window::FixedInterval] {
            for model in [Model::Weighted, Model::Unweighted] {
                for analyzer in analyzers {
                    for cw_div in [2, 4] {
                        for anchor in [true, false] {
                            v.push(Sweep {
                                window,
                                model,
                                analyzer,
                                cw_div,
                                anchor,
                            });
                        }
                    }
                }
            }
        }
        v
    }
}

/// Part 2: every configuration's mean score over the phase workloads and MPLs.
fn sweep(lines: &[(String, Timeline)]) -> Result<(String, String)> {
    let configs = Sweep::all();
    // scores[config][line][mpl]
    let mut scores = vec![vec![[f64::NAN; MPLS.len()]; lines.len()]; configs.len()];
    for (li, (_, t)) in lines.iter().enumerate() {
        let c = timeline::counts(t);
        let w = timeline::weights(t);
        let baselines: Vec<Vec<pepper_phases::Label>> = baselines_of(t);
        for (ci, cfg) in configs.iter().enumerate() {
            for (mi, &m) in MPLS.iter().enumerate() {
                let d = detect(cfg.at(m), &c);
                scores[ci][li][mi] = pepper_phases::score(&baselines[mi], &d, &w).score;
            }
        }
    }
    let phase_lines: Vec<usize> = (0..lines.len())
        .filter(|&i| has_phases(&lines[i].0))
        .collect();
    let other_lines: Vec<usize> = (0..lines.len())
        .filter(|&i| !has_phases(&lines[i].0))
        .collect();
    let mean = |ci: usize, ls: &[usize], mpls: &[usize]| {
        let v: Vec<f64> = ls
            .iter()
            .flat_map(|&l| mpls.iter().map(move |&m| (l, m)))
            .map(|(l, m)| scores[ci][l][m])
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let all_mpls: Vec<usize> = (0..MPLS.len()).collect();
    let mut order: Vec<usize> = (0..configs.len()).collect();
    order.sort_by(|&a, &b| {
        mean(b, &phase_lines, &all_mpls).total_cmp(&mean(a, &phase_lines, &all_mpls))
    });
    let mut table = String::new();
    write!(table, "| configuration | phase workloads, all MPLs |")?;
    for m in MPLS {
        write!(table, " MPL {m} |")?;
    }
    writeln!(table, " other workloads |")?;
    writeln!(table, "|---|---|{}---|", "---|".repeat(MPLS.len()))?;
    for &ci in &order {
        write!(
            table,
            "| {} | {:.3} |",
            configs[ci].name(),
            mean(ci, &phase_lines, &all_mpls)
        )?;
        for mi in 0..MPLS.len() {
            write!(table, " {:.3} |", mean(ci, &phase_lines, &[mi]))?;
        }
        writeln!(table, " {:.3} |", mean(ci, &other_lines, &all_mpls))?;
    }
    let best = order[0];
    // The dissertation's "average of best scores": per workload and MPL the best
    // configuration, averaged.
    let avg_best = |ls: &[usize]| {
        let v: Vec<f64> = ls
            .iter()
            .flat_map(|&l| (0..MPLS.len()).map(move |m| (l, m)))
            .map(|(l, m)| {
                (0..configs.len())
                    .map(|c| scores[c][l][m])
                    .fold(f64::NAN, f64::max)
            })
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let recommended = DetectorConfig::recommended(8);
    let rec = order
        .iter()
        .position(|&ci| configs[ci].at(8) == recommended)
        .map(|p| order[p]);
    let mut summary = String::new();
    writeln!(summary, "| | phase workloads | other workloads |")?;
    writeln!(summary, "|---|---|---|")?;
    writeln!(
        summary,
        "| best single configuration ({}) | {:.3} | {:.3} |",
        configs[best].name(),
        mean(best, &phase_lines, &all_mpls),
        mean(best, &other_lines, &all_mpls)
    )?;
    if let Some(r) = rec {
        writeln!(
            summary,
            "| `pepper run --phases` default ({}) | {:.3} | {:.3} |",
            configs[r].name(),
            mean(r, &phase_lines, &all_mpls),
            mean(r, &other_lines, &all_mpls)
        )?;
    }
    writeln!(
        summary,
        "| average of best scores (best configuration per workload and MPL, as the dissertation reports) | {:.3} | {:.3} |",
        avg_best(&phase_lines),
        avg_best(&other_lines)
    )?;
    writeln!(summary, "\nPer workload, the best single configuration:\n")?;
    writeln!(
        summary,
        "| workload |{}",
        MPLS.map(|m| format!(" MPL {m} |")).join("")
    )?;
    writeln!(summary, "|---|{}", "---|".repeat(MPLS.len()))?;
    for (li, (name, _)) in lines.iter().enumerate() {
        write!(summary, "| {name} |")?;
        for score in &scores[best][li] {
            write!(summary, " {score:.3} |")?;
        }
        writeln!(summary)?;
    }
    writeln!(
        summary,
        "\nAll {} configurations, best first, are at the end of this file.",
        configs.len()
    )?;
    Ok((summary, table))
}

/// Part 3: periodic against phase-aware sampling on the exhaustive time lines.
fn trace_sampling(lines: &[(String, Timeline)]) -> Result<String> {
    const TARGET: f64 = 0.05;
    let periods = [2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50, 64];
    let thresholds = [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0];
    let mut s = String::new();
    writeln!(s, "| workload | intervals | periodic: fewest profiled at <= 5% (N, error) | phase-aware, third interval once (threshold, phases, error) | phase-aware, pepper's rule (threshold, phases, error) | pepper's rule: fewer intervals than periodic |")?;
    writeln!(s, "|---|---|---|---|---|---|")?;
    let mut reductions = Vec::new();
    for (name, t) in lines {
        let c = timeline::counts(t);
        if c.is_empty() {
            continue;
        }
        let sigs: Vec<Signature> = timeline::signatures(t);
        let exact = sampling::exhaustive(&c);
        let best = |outcomes: Vec<(String, sampling::Outcome)>| {
            outcomes
                .into_iter()
                .map(|(label, o)| (label, o.sampled.len(), sampling::error(&o.estimate, &exact)))
                .filter(|o| o.2 <= TARGET)
                .min_by_key(|o| o.1)
        };
        let p = best(
            periods
                .iter()
                .filter(|&&n| n <= c.len())
                .map(|&n| (format!("N={n}"), sampling::periodic(&c, n)))
                .collect(),
        );
        let phase_aware = |rule: fn(Tracker) -> Tracker| {
            best(
                thresholds
                    .iter()
                    .map(|&th| {
                        let o = sampling::phase_aware(&c, &sigs, rule(Tracker::new(th)));
                        let ids = pepper_phases::cluster(&sigs, th);
                        let phases = ids.iter().max().map_or(0, |m| m + 1);
                        (format!("{th}, {phases} phases"), o)
                    })
                    .collect(),
            )
        };
        let third = phase_aware(|t| t);
        let q = phase_aware(|t| t.representative(2).resample_every(RESAMPLE));
        let cell = |o: &Option<(String, usize, f64)>| match o {
            Some((label, n, e)) => format!(
                "{n} ({:.1}%; {label}, {:.1}%)",
                *n as f64 / c.len() as f64 * 100.0,
                e * 100.0
            ),
            None => "none reaches 5%".into(),
        };
        let red = match (&p, &q) {
            (Some(p), Some(q)) => {
                let r = 1.0 - q.1 as f64 / p.1 as f64;
                if has_phases(name) {
                    reductions.push(r);
                }
                format!("{:.0}%", r * 100.0)
            }
            _ => String::new(),
        };
        writeln!(
            s,
            "| {name} | {} | {} | {} | {} | {red} |",
            c.len(),
            cell(&p),
            cell(&third),
            cell(&q)
        )?;
    }
    if !reductions.is_empty() {
        writeln!(
            s,
            "\nPhase workloads: phase-aware profiles {:.0}% fewer intervals than periodic \
             sampling at the same 5% error (mean of {}).",
            reductions.iter().sum::<f64>() / reductions.len() as f64 * 100.0,
            reductions.len()
        )?;
    }
    Ok(s)
}

struct Variant {
    label: String,
    inst: pepper_wasm::Instrumented,
    prepared: pepper_runtime::Prepared,
    intervals: Option<IntervalConfig>,
    times: Vec<f64>,
    /// Per round: path accuracy, edge absolute overlap, branch count error, profiled
    /// intervals share, detector score.
    acc: Vec<[f64; 5]>,
}

/// Part 4: live runs of the phase workloads.
fn live(loaded: &[crate::Loaded], lines: &[(String, Timeline)], rounds: usize) -> Result<String> {
    const PHASE_INTERVAL: Duration = Duration::from_millis(10);
    let native = if pepper_runtime::NATIVE_STACKS {
        ContextMode::Native
    } else {
        ContextMode::Sampled
    };
    type Spec = (
        &'static str,
        Mode,
        Option<SwitchPlacement>,
        bool,
        Option<IntervalConfig>,
    );
    let sampled = |strategy| {
        Some(IntervalConfig::Sampled {
            length: PHASE_INTERVAL,
            strategy,
        })
    };
    let specs: Vec<Spec> = vec![
        ("none", Mode::None, None, false, None),
        ("none A/A", Mode::None, None, false, None),
        ("pep (default)", Mode::Pep, None, false, None),
        (
            "pep --phases",
            Mode::Pep,
            None,
            false,
            Some(IntervalConfig::Timeline {
                length: TIMELINE_INTERVAL,
                detector: Some(DetectorConfig::recommended(8)),
                source: TimelineSource::Bursts,
            }),
        ),
        (
            "pep --phases --timeline-source ring",
            Mode::Pep,
            None,
            true,
            Some(IntervalConfig::Timeline {
                length: TIMELINE_INTERVAL,
                detector: Some(DetectorConfig::recommended(8)),
                source: TimelineSource::Ring,
            }),
        ),
        // What the ring time line costs without reading the ring: PEP with the ring it
        // needs (every path end kept for a tick), and no time line.
        ("pep, 2 MiB ring", Mode::Pep, None, true, None),
        (
            "pep --switch outer",
            Mode::Pep,
            Some(SwitchPlacement::Outer),
            false,
            None,
        ),
        (
            "phase-aware (0.3)",
            Mode::Pep,
            Some(SwitchPlacement::Outer),
            true,
            sampled(Strategy::PhaseAware {
                threshold: 0.3,
                nth: 2,
                every: RESAMPLE,
            }),
        ),
        (
            "phase-aware (0.2)",
            Mode::Pep,
            Some(SwitchPlacement::Outer),
            true,
            sampled(Strategy::PhaseAware {
                threshold: 0.2,
                nth: 2,
                every: RESAMPLE,
            }),
        ),
        (
            "periodic N=4",
            Mode::Pep,
            Some(SwitchPlacement::Outer),
            true,
            sampled(Strategy::Periodic(4)),
        ),
        (
            "periodic N=8",
            Mode::Pep,
            Some(SwitchPlacement::Outer),
            true,
            sampled(Strategy::Periodic(8)),
        ),
        (
            "periodic N=16",
            Mode::Pep,
            Some(SwitchPlacement::Outer),
            true,
            sampled(Strategy::Periodic(16)),
        ),
    ];
    let mut table = String::new();
    writeln!(table, "| workload | variant | median run ms | overhead | path acc | edge abs | branch count error | intervals profiled | detector score |")?;
    writeln!(table, "|---|---|---|---|---|---|---|---|---|")?;
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    let mut accs: Vec<Vec<[f64; 5]>> = vec![Vec::new(); specs.len()];
    let mut vs_pep: Vec<f64> = Vec::new();
    for (w, wasm, cache) in loaded.iter().filter(|l| has_phases(&l.0.name)) {
        let exact_inst = instrument(wasm, Mode::ExactPaths, None, ContextMode::Off, false)?;
        let exact_run = prepare(w, &exact_inst, cache)?.run(&run_config(w, &exact_inst, None))?;
        let reference = profile_of(&exact_inst, &exact_run);
        let line = lines.iter().find(|l| l.0 == w.name).map(|l| &l.1);
        let mut variants = Vec::new();
        for (label, mode, switch, big_ring, intervals) in &specs {
            let contexts = if *mode == Mode::Pep {
                native
            } else {
                ContextMode::Off
            };
            let inst = instrument(wasm, *mode, *switch, contexts, *big_ring)?;
            let prepared = prepare(w, &inst, cache)?;
            variants.push(Variant {
                label: label.to_string(),
                inst,
                prepared,
                intervals: intervals.clone(),
                times: Vec::new(),
                acc: Vec::new(),
            });
        }
        for round in 0..=rounds {
            let results = shuffled(&mut variants, round, |v| {
                let r = v
                    .prepared
                    .run(&run_config(w, &v.inst, v.intervals.clone()))?;
                anyhow::ensure!(r.exit_code == 0, "{} exited {}", w.name, r.exit_code);
                if round > 0 {
                    v.times.push(r.run.as_secs_f64() * 1e3);
                }
                Ok(r)
            })?;
            if round == 0 {
                continue;
            }
            for (v, r) in variants.iter_mut().zip(&results) {
                if v.inst.plan.mode != Mode::Pep {
                    continue;
                }
                let a = compare(&reference, &profile_of(&v.inst, r));
                let ir = r.samples.as_ref().and_then(|s| s.intervals.as_ref());
                let profiled = ir.filter(|i| i.words.is_some()).map_or(f64::NAN, |i| {
                    let iv = &i.timeline.intervals;
                    iv.iter().filter(|x| x.profiled).count() as f64 / iv.len().max(1) as f64
                });
                let score = match (ir.and_then(|i| i.phases.as_ref()), line) {
                    (Some(d), Some(t)) => timeline::score_against(t, d).score,
                    _ => f64::NAN,
                };
                v.acc.push([
                    a.path_accuracy.unwrap_or(f64::NAN),
                    a.edge_absolute_overlap.unwrap_or(f64::NAN),
                    a.branch_count_error.unwrap_or(f64::NAN),
                    profiled,
                    score,
                ]);
            }
            eprintln!("bench: {} live round {round}/{rounds}", w.name);
        }
        vs_pep.push(paired_ratio(&variants[3].times, &variants[2].times));
        for (k, v) in variants.iter().enumerate() {
            let (ratio, acc) = crate::tally(
                &v.times,
                &variants[0].times,
                &v.acc,
                (&mut ratios[k], &mut accs[k]),
            );
            writeln!(
                table,
                "| {} | {} | {:.1} | {:+.1}% | {} | {} | {} | {} | {} |",
                w.name,
                v.label,
                median(&v.times),
                (ratio - 1.0) * 100.0,
                pct(acc[0]),
                pct(acc[1]),
                pct(acc[2]),
                pct(acc[3]),
                if acc[4].is_nan() {
                    String::new()
                } else {
                    format!("{:.3}", acc[4])
                }
            )?;
        }
    }
    let mut summary = String::new();
    writeln!(summary, "| variant | overhead (geomean) | path acc (mean) | edge abs (mean) | branch count error (mean) | intervals profiled (mean) |")?;
    writeln!(summary, "|---|---|---|---|---|---|")?;
    for (k, spec) in specs.iter().enumerate() {
        let m = |i: usize| {
            let v: Vec<f64> = accs[k]
                .iter()
                .map(|a| a[i])
                .filter(|x| !x.is_nan())
                .collect();
            if v.is_empty() {
                f64::NAN
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        writeln!(
            summary,
            "| {} | {:+.1}% | {} | {} | {} | {} |",
            spec.0,
            geomean_pct(&ratios[k]),
            pct(m(0)),
            pct(m(1)),
            pct(m(2)),
            pct(m(3))
        )?;
    }
    Ok(format!(
        "Rounds: {rounds} interleaved, in a fresh shuffled order each round (plus one \
         warm-up). Overhead: median over rounds of the per-round ratio to the uninstrumented \
         run (guest run time), geomean over the phase workloads. Accuracy (median over \
         rounds) against one exact-paths run: `pepper compare`'s path accuracy, edge \
         absolute overlap and branch count error (absolute counts: interval sampling's \
         intervals are cut by time, and an interval whose instrumentation is on runs \
         slower, so its scaled counts fall short by about that slowdown; the overlaps \
         are not affected). Interval sampling: {} ms intervals on `--switch outer`, each \
         classified by the functions on its stack samples. PEP with the online detector \
         (`--phases`, the recommended configuration at MPL 8) against PEP alone: \
         {:+.1}% (geomean of per-workload median paired ratios).\n\n{summary}\n{table}",
        PHASE_INTERVAL.as_millis(),
        geomean_pct(&vs_pep),
        summary = summary,
        table = table,
    ))
}
