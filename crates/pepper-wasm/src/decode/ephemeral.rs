//! Ephemeral instrumentation's post-processing. Traub, Schechter and Smith leave theirs
//! unpublished; ours: the instrumented copies' counts (a spanning tree's chords, with their
//! entries and leaves at loop headers) give each branch's outcomes in the
//! sampled executions, so its probabilities; every function's entries are counted
//! exactly in its clean code, and so are the iterations of the loops whose headers check
//! the budget; `pepper_cfg::profile_edge_frequencies_with_headers` propagates one entry
//! through the function's loop nest with those probabilities (the flow equations with
//! measured branch probabilities), holding the counted loops to their counts, and that
//! times the entries is the edge profile.
//!
//! In windows ([`crate::InstrumentOptions::ephemeral_windows`]) nothing is counted in clean
//! code: the windows' branch counts are a sample of the run in time, and scaled by the
//! guest's time over the windows' time they are the estimate
//! ([`pepper_profile::Sampling::window_scale`]).

use crate::plan::Plan;
use pepper_profile::Profile;

/// 95% Wilson score half-width of a share `p` measured on `n` outcomes.
fn wilson_margin(p: f64, n: u64) -> f64 {
    let (n, z) = (n as f64, 1.96f64);
    z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt()
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom (1 to 15, the
/// random groups' `groups - 1`; beyond that, about the normal's).
fn t975(df: usize) -> f64 {
    const T: [f64; 15] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131,
    ];
    T.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// 95% half-width of the share of outcome `o` of a branch recorded as `counts` in all
/// and as `groups[g]` in each random group of windows (`RunOutcome::window_groups`):
/// the random groups variance of a ratio estimate, `G/(G-1) Σ_g ((t_g - p n_g) / n)²`
/// (Wolter, *Introduction to Variance Estimation*, §2.4), with `t_g` the group's count
/// of the outcome and `n_g` its total. It sees what a binomial margin cannot: a bias that
/// drifts over the run, which each window sees one value of. `None` with fewer than two
/// groups.
fn groups_margin(counts: &[u64], o: usize, groups: &[&[u64]]) -> Option<f64> {
    let g = groups.len();
    let n: u64 = counts.iter().sum();
    if g < 2 || n == 0 {
        return None;
    }
    let p = counts.get(o).copied().unwrap_or(0) as f64 / n as f64;
    let sum: f64 = groups
        .iter()
        .map(|c| {
            let t = c.get(o).copied().unwrap_or(0) as f64;
            let n_g: u64 = c.iter().sum();
            ((t - p * n_g as f64) / n as f64).powi(2)
        })
        .sum();
    Some(t975(g - 1) * (g as f64 / (g as f64 - 1.0) * sum).sqrt())
}

/// Turns the sampled branch counts in `profile` (from the copies' counters) into estimated
/// counts, keeping what they rest on in `recorded` and `bias_margin`: binomial, or, in
/// windows with `window_groups` (memory images, `RunOutcome::window_groups`), the wider
/// of that and the groups' spread ([`groups_margin`]). Functions without copies ran
/// instrumented all along: their counts are exact and stay.
pub(crate) fn estimate(plan: &Plan, mem: &[u8], window_groups: &[Vec<u8>], profile: &mut Profile) {
    // Each group's branch counts, by branch id (windows only).
    let grouped: Vec<Vec<Vec<u64>>> = match plan.ephemeral_windows {
        true => window_groups
            .iter()
            .map(|g| plan.branch_counts(g))
            .collect(),
        false => Vec::new(),
    };
    let windows = plan.ephemeral_windows.then(|| {
        let run_ms = profile.run.run_ms;
        (profile.sampling.as_ref())
            .and_then(|s| s.window_scale(run_ms))
            .unwrap_or(1.0)
    });
    for (k, fp) in plan.functions.iter().enumerate() {
        let Some(a) = &fp.analysis else { continue };
        let first = fp.first_branch as usize;
        let sites = first..first + a.sites.len();
        let Some(branches) = profile.branches.get_mut(sites) else {
            continue;
        };
        for (i, b) in branches.iter_mut().enumerate() {
            let n = b.total();
            b.recorded = Some(n);
            if n > 0 {
                let (o, &top) = (b.counts.iter().enumerate())
                    .max_by_key(|&(o, &c)| (c, std::cmp::Reverse(o)))
                    .unwrap_or((0, &0));
                let wilson = wilson_margin(top as f64 / n as f64, n);
                let groups: Vec<&[u64]> = (grouped.iter())
                    .filter_map(|g| g.get(first + i).map(Vec::as_slice))
                    .collect();
                let spread = fp.copies.and(groups_margin(&b.counts, o, &groups));
                b.bias_margin = Some(spread.map_or(wilson, |m| m.max(wilson)));
            }
        }
        if fp.copies.is_none() {
            continue;
        }
        if let Some(scale) = windows {
            for b in branches.iter_mut() {
                b.counts = b
                    .counts
                    .iter()
                    .map(|&c| (c as f64 * scale).round() as u64)
                    .collect();
            }
            continue;
        }
        let entries = pepper_layout::read_u64(mem, plan.layout.entry_counts as u64 + 8 * k as u64);
        // Add-one smoothing: an outcome no window saw is rare, not impossible (a window
        // inside a loop seldom sees the loop's exit).
        let observed: Vec<Option<u64>> = a
            .edges
            .iter()
            .map(|e| {
                let (site, outcome) = e.branch?;
                let b = &branches[site.0 as usize];
                (b.total() > 0).then(|| b.counts.get(outcome as usize).map_or(0, |c| c + 1))
            })
            .collect();
        let mut headers = vec![None; a.cfg.num_nodes()];
        if entries > 0 {
            for &(node, addr) in &fp.header_counters {
                let count = pepper_layout::read_u64(mem, addr as u64);
                headers[node.index()] = Some(count as f64 / entries as f64);
            }
        }
        let freq = pepper_cfg::profile_edge_frequencies_with_headers(&a.cfg, &observed, &headers);
        let mut est: Vec<Vec<f64>> = branches.iter().map(|b| vec![0.0; b.counts.len()]).collect();
        for (e, info) in a.edges.iter().enumerate() {
            if let Some((site, outcome)) = info.branch {
                est[site.0 as usize][outcome as usize] += freq[e] * entries as f64;
            }
        }
        for (b, est) in branches.iter_mut().zip(est) {
            b.counts = est.iter().map(|&x| x.round() as u64).collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{groups_margin, wilson_margin};

    #[test]
    fn margins_shrink_with_more_outcomes() {
        let (few, many) = (wilson_margin(0.9, 10), wilson_margin(0.9, 10_000));
        assert!(few > 0.1 && few < 0.3, "{few}");
        assert!(many < 0.01, "{many}");
        assert!(wilson_margin(1.0, 100) > 0.0);
    }

    /// Groups that agree leave only a narrow margin; groups whose biases differ (a bias
    /// that drifts over the run) widen it to about their spread, whatever the number of
    /// outcomes; one group says nothing.
    #[test]
    fn random_groups_margins_follow_the_groups_spread() {
        let same: Vec<[u64; 2]> = vec![[900, 100]; 16];
        let drift: Vec<[u64; 2]> = (0..16u64)
            .map(|g| [g * 60 + 50, 1000 - g * 60 - 50])
            .collect();
        let margin = |groups: &[[u64; 2]]| {
            let total = groups
                .iter()
                .fold([0, 0], |s, g| [s[0] + g[0], s[1] + g[1]]);
            let refs: Vec<&[u64]> = groups.iter().map(|g| &g[..]).collect();
            groups_margin(&total, 0, &refs).unwrap()
        };
        assert!(margin(&same) < 1e-9, "{}", margin(&same));
        // Shares 0.05 to 0.95 in steps of 0.06: sd 0.28, so the mean's is 0.07, and the
        // 95% margin (t at 15 degrees of freedom, 2.13) about 0.15, where 16,000
        // binomial outcomes would give under 0.01.
        let m = margin(&drift);
        assert!((0.13..0.17).contains(&m), "{m}");
        assert!(wilson_margin(0.5, 16_000) < 0.01);
        // Scaling every count leaves the groups' margin as it is.
        let scaled: Vec<[u64; 2]> = drift.iter().map(|g| [g[0] * 100, g[1] * 100]).collect();
        assert!((margin(&scaled) - m).abs() < 1e-9);
        assert_eq!(groups_margin(&[5, 5], 0, &[&[5, 5]]), None);
    }
}
