//! Where a sampled profile is blind: functions whose share of the stack samples' self time
//! is far above their share of the path or branch estimate.
//!
//! A sampled profile holds two views of where the guest spent its time, taken by different
//! means: stack samples (a timer interrupts the guest wherever it is) and PEP's bursts or
//! ephemeral windows (which see only code that entered its instrumented copy). When the
//! second misses a function that the first finds hot, the path and branch counts of that
//! function, and every share computed from them, are wrong, and nothing else in the
//! profile would say so. The two views measure different things (time against blocks
//! executed), so only a gap far wider than a block's cost varies is called blind, and
//! only beyond what the number of stack samples explains.

use crate::{Function, Profile};
use std::collections::HashMap;

/// A function the path or branch estimate misses.
#[derive(Clone, Debug, PartialEq)]
pub struct BlindSpot {
    /// Its index in the module's function index space.
    pub func: u32,
    /// Its share of the guest's sampled self time, and of the estimate's work.
    pub self_share: f64,
    pub estimate_share: f64,
    /// Why pepper missed it, where pepper knows.
    pub reason: String,
}

/// Functions hotter than this share of sampled self time are checked.
const HOT: f64 = 0.05;
/// How many times its estimated share a function's sampled share (less three standard
/// errors) must be before it is called blind: a block's cost varies that much.
const FACTOR: f64 = 4.0;
/// Fewer stack samples than this say too little to judge.
const MIN_SAMPLES: u64 = 20;

/// The functions `p`'s path or branch estimate misses, hottest first; none where the
/// profile has no sampled estimate or too few stack samples to compare it with.
pub fn blind_spots(p: &Profile) -> Vec<BlindSpot> {
    if !p.mode.sampled() || p.sampling.is_none() {
        return Vec::new();
    }
    let Some(contexts) = &p.contexts else {
        return Vec::new();
    };
    let samples = contexts.sampling.as_ref().map_or(0, |s| s.samples);
    if samples < MIN_SAMPLES {
        return Vec::new();
    }
    let functions: HashMap<u32, &Function> = p.functions.iter().map(|f| (f.index, f)).collect();
    // Self time of the program's own functions only: time in the host is no function's.
    let self_us: HashMap<u32, u64> = contexts
        .hot_functions
        .iter()
        .filter(|h| functions.contains_key(&h.func))
        .map(|h| (h.func, h.self_us))
        .collect();
    let self_total: u64 = self_us.values().sum();
    let work = work(p);
    let work_total: f64 = work.values().sum();
    if self_total == 0 || work_total <= 0.0 {
        return Vec::new();
    }
    // Samples that landed in the program's own code.
    let n = samples as f64 * self_total as f64
        / contexts
            .hot_functions
            .iter()
            .map(|h| h.self_us)
            .sum::<u64>()
            .max(1) as f64;
    let mut out: Vec<BlindSpot> = self_us
        .iter()
        .filter_map(|(&func, &us)| {
            let s = us as f64 / self_total as f64;
            let e = work.get(&func).copied().unwrap_or(0.0) / work_total;
            let error = 3.0 * (s * (1.0 - s) / n.max(1.0)).sqrt();
            (s >= HOT && s - error > FACTOR * e).then(|| BlindSpot {
                func,
                self_share: s,
                estimate_share: e,
                reason: reason(p, functions[&func]),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.self_share
            .total_cmp(&a.self_share)
            .then(a.func.cmp(&b.func))
    });
    out
}

/// The work the estimate gives each function: operators executed on its paths (blocks
/// where a profile does not say, as older ones do not), or (without paths) its branch
/// executions. Operators, because one block can be a thousand of them: a big straight-line
/// function (a field multiplication) is one block per call, and by blocks would look
/// missed wherever its time is measured right.
fn work(p: &Profile) -> HashMap<u32, f64> {
    let mut work: HashMap<u32, f64> = HashMap::new();
    if p.paths.is_empty() {
        for b in &p.branches {
            *work.entry(b.func).or_default() += b.counts.iter().sum::<u64>() as f64;
        }
    } else {
        let by_ops = p.paths.iter().all(|path| path.ops.is_some());
        for path in &p.paths {
            let size = match path.ops {
                Some(ops) if by_ops => ops,
                _ => path.blocks.len() as u32,
            };
            *work.entry(path.func).or_default() += path.count as f64 * size.max(1) as f64;
        }
    }
    work
}

/// Why `f`'s estimate may be missing, in words.
fn reason(p: &Profile, f: &Function) -> String {
    if let Some(why) = &f.skipped {
        return format!("it was not instrumented ({why})");
    }
    if !f.instrumented {
        return "it was not instrumented".into();
    }
    if p.mode.samples_edges() {
        return "the windows rarely found it in its instrumented copy: a long-running loop \
                that the windows' checks do not reach would do that"
            .into();
    }
    match p.sampling.as_ref().map(|s| s.switch.as_str()) {
        Some(s) if !s.is_empty() && s != "off" => format!(
            "the bursts rarely found it in its instrumented copy: a long-running loop \
             that the `{s}` placement does not check would do that (try `--switch all` \
             or `--switch off`)"
        ),
        _ => "the samples of its paths were lost or rarely taken there".into(),
    }
}

/// The profile's warning about `spot`.
pub fn blind_warning(p: &Profile, spot: &BlindSpot) -> String {
    format!(
        "under-sampled: `{}` has {:.0}% of the sampled self time but {:.1}% of the {} \
         estimate, so its counts are not to be trusted: {}",
        p.function_name(spot.func),
        spot.self_share * 100.0,
        spot.estimate_share * 100.0,
        if p.paths.is_empty() { "branch" } else { "path" },
        spot.reason
    )
}

/// Marks `p`'s blind spots: each function's `under_sampled` says why, and the profile
/// warns of each. Returns the warnings added.
pub fn mark_blind_spots(p: &mut Profile) -> Vec<String> {
    let spots = blind_spots(p);
    let mut added = Vec::new();
    for spot in &spots {
        let warning = blind_warning(p, spot);
        if let Some(f) = p.functions.iter_mut().find(|f| f.index == spot.func) {
            f.under_sampled = Some(spot.reason.clone());
        }
        p.warnings.push(warning.clone());
        added.push(warning);
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use crate::{ContextKind, ContextSampling, Mode, Path, Sampling};

    fn function(index: u32, name: &str) -> Function {
        serde_json::from_value(serde_json::json!({
            "index": index, "name": name, "instrumented": true, "skipped": null,
            "num_paths": null, "counting": null, "truncated_nodes": 0
        }))
        .unwrap()
    }

    fn path(func: u32, count: u64, blocks: usize) -> Path {
        Path {
            func,
            blocks: vec![0; blocks],
            ..testing::path(0, count, &[])
        }
    }

    /// A PEP profile of three functions: stack samples give `self_us` each, the paths
    /// `paths` executions of 4 blocks each.
    fn profile(self_us: [u64; 3], paths: [u64; 3], samples: u64) -> Profile {
        let mut p = testing::profile(
            Vec::new(),
            (0..3).map(|f| path(f, paths[f as usize], 4)).collect(),
        );
        p.mode = Mode::Pep;
        p.functions = vec![function(0, "a"), function(1, "b"), function(2, "c")];
        p.sampling = Some(Sampling {
            switch: "deep".into(),
            ..Default::default()
        });
        let hot: Vec<(u32, u64)> = (0..3).map(|f| (f, self_us[f as usize])).collect();
        let mut tree = testing::tree(ContextKind::Sampled, Vec::new(), &hot);
        tree.sampling = Some(ContextSampling {
            samples,
            ..Default::default()
        });
        p.contexts = Some(tree);
        p
    }

    /// The failure seen on a loaded machine: most of the self time in a function the
    /// path profile shows none of. It is found, with the switch's reason, and marked.
    #[test]
    fn a_hot_function_the_paths_miss_is_blind() {
        let mut p = profile([790, 110, 100], [0, 500, 500], 1000);
        let spots = blind_spots(&p);
        assert_eq!(spots.len(), 1, "{spots:?}");
        assert_eq!(spots[0].func, 0);
        assert!((spots[0].self_share - 0.79).abs() < 1e-9);
        assert_eq!(spots[0].estimate_share, 0.0);
        assert!(spots[0].reason.contains("`deep`"), "{}", spots[0].reason);
        let added = mark_blind_spots(&mut p);
        assert_eq!(added.len(), 1);
        assert!(added[0].contains("`a` has 79%"), "{}", added[0]);
        assert!(p.warnings.contains(&added[0]));
        assert!(p.functions[0].under_sampled.is_some());
        assert!(p.functions[1].under_sampled.is_none());
    }

    /// Shares that differ by what a block's cost explains, or a few samples' worth, are
    /// not blind; nor is a profile with too few samples, or an exact one.
    #[test]
    fn differences_that_cost_or_sampling_explain_are_not_blind() {
        // Half the time, a sixth of the blocks: slow blocks, not a blind spot.
        assert!(blind_spots(&profile([500, 250, 250], [200, 500, 500], 1000)).is_empty());
        // Five times the estimate's share, but on so few samples that three standard
        // errors are wider than the gap.
        assert!(blind_spots(&profile([300, 350, 350], [60, 470, 470], 25)).is_empty());
        // The same on 1,000 samples is blind.
        assert_eq!(
            blind_spots(&profile([300, 350, 350], [60, 470, 470], 1000)).len(),
            1
        );
        assert!(blind_spots(&profile([790, 110, 100], [0, 500, 500], 10)).is_empty());
        let mut exact = profile([790, 110, 100], [0, 500, 500], 1000);
        exact.mode = Mode::ExactPaths;
        assert!(blind_spots(&exact).is_empty());
    }

    /// A function of one long block (a field multiplication: hundreds of operators, no
    /// branch) runs few blocks but much work: where paths say how many operators they
    /// run, it is judged by them and is not blind; a profile without them judges by
    /// blocks, as before.
    #[test]
    fn one_long_block_is_judged_by_its_operators() {
        // Function 0: 100 executions of a one-block path of 400 operators; the others
        // 500 executions of four blocks of 10 operators each.
        let mut p = profile([500, 250, 250], [100, 500, 500], 1000);
        for path in &mut p.paths {
            path.blocks.truncate(if path.func == 0 { 1 } else { 4 });
            path.ops = Some(if path.func == 0 { 400 } else { 40 });
        }
        assert!(blind_spots(&p).is_empty(), "{:?}", blind_spots(&p));
        p.paths.iter_mut().for_each(|path| path.ops = None);
        assert_eq!(
            blind_spots(&p).iter().map(|s| s.func).collect::<Vec<_>>(),
            [0]
        );
    }

    /// Without paths (ephemeral), branch executions are the estimate's work.
    #[test]
    fn without_paths_branches_are_the_estimate() {
        let mut p = profile([790, 110, 100], [0, 0, 0], 1000);
        p.mode = Mode::Ephemeral;
        p.paths.clear();
        let mut b = testing::branch(0, &[0, 0]);
        for f in 1..3 {
            b.func = f;
            b.counts = vec![500, 500];
            p.branches.push(b.clone());
        }
        let spots = blind_spots(&p);
        assert_eq!(spots.iter().map(|s| s.func).collect::<Vec<_>>(), [0]);
        assert!(blind_warning(&p, &spots[0]).contains("branch estimate"));
    }
}
