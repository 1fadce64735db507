//! `pepper-bench --ephemeral`: ephemeral instrumentation side by side with the
//! uninstrumented module (twice: the second copy is the noise) and exact edges (the
//! reference), at several persistences, rounds interleaved. Accuracy per round against the
//! exact-edges profile of the same round. Writes `bench/results/ephemeral.md`.

use crate::{
    geomean_pct, machine, mean_worst_pct, median, pct, profile_of_all, selected, shuffled, Args,
};
use anyhow::Result;
use pepper_profile::compare::compare;
use pepper_profile::Mode;
use pepper_runtime::WindowPhase;
use pepper_wasm::switch::SwitchPlacement;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// The paper's epoch, and `pepper run`'s default for budgets (`--persistence`).
const EPOCH: Duration = Duration::from_millis(10);

/// One configuration to run: what `pepper run --mode ephemeral` would be given.
#[derive(Clone)]
struct Config {
    label: String,
    mode: Mode,
    persistence: Option<u32>,
    epoch: Duration,
    /// In windows (`--window`): how long each epoch's window is open.
    window: Option<Duration>,
    /// Where clean code checks the windows' flag (`--switch`); budgets always check at
    /// `outer`'s places.
    placement: Option<SwitchPlacement>,
    /// Where in its epoch a window opens.
    phase: WindowPhase,
    /// Windows: margins from random groups of windows (`EphemeralConfig::counter_bytes`
    /// set), or binomial ones only.
    groups: bool,
}

impl Config {
    fn new(label: String, mode: Mode, persistence: Option<u32>) -> Config {
        Config {
            label,
            mode,
            persistence,
            epoch: EPOCH,
            window: None,
            placement: None,
            phase: WindowPhase::default(),
            groups: true,
        }
    }

    /// Windows of `us` µs every `epoch`, clean code checking at `placement`.
    fn windows(us: u64, epoch: Duration, placement: SwitchPlacement) -> Config {
        let every = match (epoch == EPOCH, epoch.as_micros().is_multiple_of(1000)) {
            (true, _) => String::new(),
            (false, true) => format!("@{}ms", epoch.as_millis()),
            (false, false) => format!("@{}us", epoch.as_micros()),
        };
        Config {
            label: format!("ephemeral windows W={us}us{every} {}", placement.name()),
            epoch,
            window: Some(Duration::from_micros(us)),
            placement: Some(placement),
            ..Config::new(String::new(), Mode::Ephemeral, Some(0))
        }
    }

    /// This configuration with `change` made, its label extended by `suffix`.
    fn but(mut self, suffix: &str, change: impl FnOnce(&mut Config)) -> Config {
        self.label.push_str(suffix);
        change(&mut self);
        self
    }

    fn instrument_options(&self) -> pepper_wasm::InstrumentOptions {
        {
            let mut instrument = pepper_wasm::InstrumentOptions::default();
            instrument.mode = self.mode;
            instrument.ephemeral_windows = self.window.is_some();
            instrument.switch = self.placement;
            instrument
        }
    }

    /// The library's options for this variant on `w`, as `pepper run` builds them.
    fn command(&self, w: &crate::Workload) -> pepper_runtime::CommandOptions {
        w.options(self.instrument_options(), {
            let mut sampling = pepper_runtime::SamplingOptions::default();
            sampling.persistence = self.persistence.unwrap_or_default();
            sampling.epoch = self.epoch;
            sampling.window = self.window.unwrap_or_default();
            sampling.window_phase = self.phase;
            sampling
        })
    }
}

struct Variant {
    config: Config,
    /// Every module the variant profiles (a component's others too).
    modules: pepper_runtime::Modules,
    prepared: pepper_runtime::Prepared,
    times: Vec<f64>,
    /// Per round: the whole run's wall time and the CPU time of all its threads, ms.
    whole: Vec<(f64, f64)>,
    /// Per round: edge relative overlap, edge absolute overlap, hot biases within 5 points,
    /// hot biases within the profile's own margins.
    accuracy: Vec<[f64; 4]>,
}

/// "rel / biases" for the worst-round column (empty for variants without accuracy).
fn worst_pair([rel, biases]: [f64; 2]) -> String {
    match rel.is_nan() {
        true => String::new(),
        false => format!("{} / {}", pct(rel), pct(biases)),
    }
}

/// Every configuration the benchmark knows; the first three (baseline, its A/A and the
/// exact-edges reference) always run.
fn configs() -> Vec<Config> {
    let mut configs = vec![
        Config::new("none".into(), Mode::None, None),
        Config::new("none A/A".into(), Mode::None, None),
        Config::new("exact-edges".into(), Mode::ExactEdges, None),
    ];
    // P=0: never armed, the clean code's cost alone (the floor of this design).
    for p in [0, 10, 1000] {
        configs.push(Config::new(
            format!("ephemeral P={p}"),
            Mode::Ephemeral,
            Some(p),
        ));
    }
    for p in [1000, 100] {
        configs.push(Config {
            epoch: Duration::from_millis(100),
            ..Config::new(format!("ephemeral P={p}@100ms"), Mode::Ephemeral, Some(p))
        });
    }
    // Windows: one module-wide flag; W=0 sets and at once clears it every epoch (about the
    // clean code's cost alone).
    let ms = Duration::from_millis;
    for us in [0, 250, 500, 1000] {
        configs.push(Config::windows(us, EPOCH, SwitchPlacement::Outer));
    }
    // `pepper run`'s default until 1 ms epochs measured better: 50 µs every 2 ms at `outer`.
    configs.push(Config::windows(50, ms(2), SwitchPlacement::Outer));
    // The same, opening at the start of every epoch instead of anywhere in it.
    configs.push(
        Config::windows(50, ms(2), SwitchPlacement::Outer)
            .but(" at epoch starts", |c| c.phase = WindowPhase::Start),
    );
    configs.push(Config::windows(0, ms(2), SwitchPlacement::Outer));
    configs.push(Config::windows(100, ms(4), SwitchPlacement::Outer));
    // A higher duty cycle, by longer windows or by more of them (1 ms: `pepper run`'s
    // default): a run records more of a loop nest whose stretches between checks are long.
    let micros = Duration::from_micros;
    for (w, epoch) in [
        (100, ms(2)),
        (150, ms(2)),
        (200, ms(2)),
        (0, ms(1)),
        // Windows that open and close again at once: every frame a check reaches moves
        // into the copies, so this is what the switching and `F_clean` cost without the
        // instrumented copies' time.
        (1, ms(1)),
        (50, ms(1)),
        // Open all the time (closed only for the armer's wake-up each epoch): what the
        // instrumented copies cost, for a window's share of the run.
        (1000, ms(1)),
        (25, micros(500)),
    ] {
        configs.push(Config::windows(w, epoch, SwitchPlacement::Outer));
    }
    for (us, epoch) in [
        (0, EPOCH),
        (250, EPOCH),
        (50, ms(2)),
        (100, ms(4)),
        (25, ms(1)),
        (50, ms(1)),
    ] {
        configs.push(Config::windows(us, epoch, SwitchPlacement::Shallow));
    }
    for (us, epoch) in [(0, EPOCH), (50, ms(2)), (50, ms(1))] {
        configs.push(Config::windows(us, epoch, SwitchPlacement::Deep));
    }
    // `outer`'s places and a check at every loop nest that only enters the copies; 1000:
    // open all the time, the instrumented copies' own cost there.
    for us in [0, 50, 1000] {
        configs.push(Config::windows(us, ms(1), SwitchPlacement::Nests));
    }
    // The default with binomial margins only, as before windows were read into groups.
    configs.push(
        Config::windows(50, ms(1), SwitchPlacement::Nests)
            .but(", binomial margins", |c| c.groups = false),
    );
    configs
}

pub fn main(args: &Args, root: &Path) -> Result<()> {
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let build = root.join("bench/workloads/build");
    // `--variants` narrows the run; the baseline and the reference always run.
    let configs: Vec<Config> = configs()
        .into_iter()
        .enumerate()
        .filter(|(k, c)| *k < 3 || crate::harness::selects(args, &c.label, false))
        .map(|(_, c)| c)
        .collect();
    let mut table = String::new();
    writeln!(table, "| workload | variant | median run ms | overhead | edge rel | edge abs | hot biases within 5 points | hot biases within their margins | worst round: rel / hot biases | epochs |")?;
    writeln!(table, "|---|---|---|---|---|---|---|---|---|---|")?;
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    // Per config: the whole run's wall and CPU-of-all-threads ratios to plain.
    let mut ratios_whole: Vec<Vec<(f64, f64)>> = vec![Vec::new(); configs.len()];
    let mut accs: Vec<Vec<[f64; 4]>> = vec![Vec::new(); configs.len()];
    // The worst single round anywhere (edge rel, hot biases): a run whose windows missed
    // a hot loop nest altogether shows here, not in the medians.
    let mut worst_rounds = vec![[f64::NAN; 2]; configs.len()];
    let loaded = selected(args, &build)?;
    let corpus = crate::corpus_size(&loaded);
    let _load = crate::harness::Load::start(args.load)?;
    for (w, _, cache) in loaded {
        let mut variants = Vec::new();
        for config in &configs {
            let command = config.command(&w);
            let modules =
                pepper_runtime::Modules::for_command(&w.unit, &command, &command.instrument)?;
            let prepared = pepper_runtime::Prepared::new(
                &modules.wasm(&w.unit),
                &pepper_runtime::EngineOptions::default()
                    .with_cache_dir(cache.clone())
                    .with_branch_hints(modules.primary().wants_branch_hinting()),
            )?;
            variants.push(Variant {
                config: config.clone(),
                modules,
                prepared,
                times: Vec::new(),
                whole: Vec::new(),
                accuracy: Vec::new(),
            });
        }
        let mut epochs = vec![0u64; variants.len()];
        for round in 0..=rounds {
            let results = shuffled(&mut variants, round, |v| {
                let c = &v.config;
                let mut cfg = c.command(&w).run_config(v.modules.primary());
                v.modules.configure(&mut cfg);
                if let (Some(e), false) = (&mut cfg.attach.ephemeral, c.groups) {
                    e.counter_bytes = 0;
                }
                let (cpu0, t0) = (crate::harness::process_cpu(), std::time::Instant::now());
                let r = v.prepared.run(&cfg)?;
                let whole = (
                    t0.elapsed().as_secs_f64() * 1e3,
                    (crate::harness::process_cpu() - cpu0).as_secs_f64() * 1e3,
                );
                anyhow::ensure!(r.exit_code == 0, "{} exited {}", w.name, r.exit_code);
                if round > 0 {
                    v.times.push(r.run.as_secs_f64() * 1e3);
                    v.whole.push(whole);
                }
                Ok(r)
            })?;
            if round > 0 {
                let reference = profile_of_all(&w, &variants[2].modules, &results[2]);
                for (k, (v, r)) in variants.iter_mut().zip(&results).enumerate() {
                    if v.config.mode != Mode::Ephemeral {
                        continue;
                    }
                    epochs[k] = r.epochs;
                    let a = compare(&reference, &profile_of_all(&w, &v.modules, r));
                    v.accuracy.push([
                        a.edge_relative_overlap.unwrap_or(f64::NAN),
                        a.edge_absolute_overlap.unwrap_or(f64::NAN),
                        a.hot_biases_within_5pt.unwrap_or(f64::NAN),
                        a.hot_biases_within_margin.unwrap_or(f64::NAN),
                    ]);
                }
            }
            eprintln!("bench: {} round {round}/{rounds}", w.name);
        }
        for (k, v) in variants.iter().enumerate() {
            let (ratio, acc) = crate::tally(
                &v.times,
                &variants[0].times,
                &v.accuracy,
                (&mut ratios[k], &mut accs[k]),
            );
            let part = |f: fn(&(f64, f64)) -> f64, w: &[(f64, f64)]| -> Vec<f64> {
                w.iter().map(f).collect()
            };
            let base = &variants[0].whole;
            ratios_whole[k].push((
                crate::harness::paired_ratio(&part(|x| x.0, &v.whole), &part(|x| x.0, base)),
                crate::harness::paired_ratio(&part(|x| x.1, &v.whole), &part(|x| x.1, base)),
            ));
            let worst = |i: usize| v.accuracy.iter().map(|a| a[i]).fold(f64::NAN, f64::min);
            let round = [worst(0), worst(2)];
            for (all, this) in worst_rounds[k].iter_mut().zip(round) {
                *all = all.min(this);
            }
            writeln!(
                table,
                "| {} | {} | {:.1} | {:+.1}% | {} | {} | {} | {} | {} | {} |",
                w.name,
                v.config.label,
                median(&v.times),
                (ratio - 1.0) * 100.0,
                pct(acc[0]),
                pct(acc[1]),
                pct(acc[2]),
                pct(acc[3]),
                worst_pair(round),
                if v.config.persistence.is_some() {
                    epochs[k].to_string()
                } else {
                    String::new()
                }
            )?;
        }
    }
    let mut summary = String::new();
    writeln!(summary, "| variant | overhead (geomean) | worst | whole run wall (geomean / worst) | CPU, all threads (geomean / worst) | edge rel (mean / worst) | edge abs (mean / worst) | hot biases within 5 points (mean / worst) | hot biases within their margins (mean / worst) | worst round: rel / hot biases |")?;
    writeln!(summary, "|---|---|---|---|---|---|---|---|---|---|")?;
    for (k, Config { label, .. }) in configs.iter().enumerate() {
        let worst = ratios[k].iter().copied().fold(f64::NAN, f64::max);
        let acc = |i: usize| {
            let vals: Vec<f64> = accs[k]
                .iter()
                .map(|a| a[i])
                .filter(|x| !x.is_nan())
                .collect();
            mean_worst_pct(&vals)
        };
        let whole = |f: fn(&(f64, f64)) -> f64| {
            let r: Vec<f64> = ratios_whole[k].iter().map(f).collect();
            let worst = r.iter().copied().fold(f64::NAN, f64::max);
            format!("{:+.1}% / {:+.1}%", geomean_pct(&r), (worst - 1.0) * 100.0)
        };
        writeln!(
            summary,
            "| {label} | {:+.1}% | {:+.1}% | {} | {} | {} | {} | {} | {} | {} |",
            geomean_pct(&ratios[k]),
            (worst - 1.0) * 100.0,
            whole(|x| x.0),
            whole(|x| x.1),
            acc(0),
            acc(1),
            acc(2),
            acc(3),
            worst_pair(worst_rounds[k])
        )?;
    }
    let doc = format!(
        "# pepper benchmark: ephemeral instrumentation\n\n\
         Corpus: {corpus}. Machine: {}. Load: {}. wasmtime 48.0.8. Epoch {} ms unless the variant says otherwise; P is \
         the persistence (`--persistence`: function entries and outermost loop iterations \
         each function records per epoch); P=0 is never armed, the clean code's cost alone. \
         Windows (`--window W`): one module-wide flag open for W once every epoch, at a \
         random point of it unless the label says otherwise, checked by clean code where \
         the label's placement says (`--switch`; \
         `pepper run`'s default is W=50us@1ms {}, with enter-only checks at every loop nest), \
         nothing counted in clean code, \
         counts scaled by the guest's CPU time over the windows' (measured; the epoch thread \
         ends a window by spinning, so it lasts what was asked); W=0 sets the flag and at once \
         clears it every epoch, which a few frames meet at a check: about the clean code's \
         cost. \
         Rounds: {rounds} interleaved, in a fresh shuffled order each round (plus one \
         warm-up). Overhead: median over rounds of the per-round ratio to the uninstrumented \
         run (guest run time, compilation excluded); \"whole run\" is the same ratio of the \
         wall time of the whole run (instantiation, pepper's threads started and stopped) \
         and of the CPU time of all of the process's threads over it (the guest's and \
         pepper's own). Accuracy (median over rounds) against \
         the exact-edges profile of the same round: `pepper compare`'s edge relative and \
         absolute overlap, and the share of the hottest branches carrying 95% of the \
         executions whose bias is within 5 points, and the share of them whose bias error \
         is within the profile's own `bias_margin` (95% margins: random groups of windows, \
         at least the binomial; a branch no window recorded counts as outside). The worst \
         round is the lowest single round of any workload: a run whose windows missed a hot \
         loop nest shows there.\n\n\
         Reproduce: `bench/workloads/build.sh && cargo run --release -p pepper-bench --{}`\n\n\
         ## Summary\n\n{summary}\n## Per workload\n\n{table}",
        machine(),
        match args.load {
            0 => "none (a quiet machine)".to_string(),
            n => format!("{n} busy process(es) beside every run"),
        },
        EPOCH.as_millis(),
        pepper_wasm::plan::EPHEMERAL_PLACEMENT.name(),
        crate::reproduce(args, " --ephemeral"),
    );
    crate::write_results(args, root, "ephemeral", &doc)
}
