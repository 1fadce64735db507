//! Ephemeral instrumentation's post-processing. Traub, Schechter and Smith leave theirs
//! unpublished; ours: the instrumented copies' counts (a spanning tree's chords, with their
//! entries and leaves at loop headers, or paths) give each branch's outcomes in the
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

/// Turns the sampled branch counts in `profile` (from the copies' counters) into estimated
/// counts, keeping what they rest on in `recorded` and `bias_margin`. Functions without
/// copies ran instrumented all along: their counts are exact and stay.
pub(crate) fn estimate(plan: &Plan, mem: &[u8], profile: &mut Profile) {
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
        for b in branches.iter_mut() {
            let n = b.total();
            b.recorded = Some(n);
            if n > 0 {
                let p = *b.counts.iter().max().unwrap_or(&0) as f64 / n as f64;
                b.bias_margin = Some(wilson_margin(p, n));
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
    // The copies' paths (where they count paths) are a sample of executions per function
    // and epoch, not in proportion to how often each ran: they stay out of the profile.
    profile.paths.clear();
}

#[cfg(test)]
mod tests {
    use super::wilson_margin;

    #[test]
    fn margins_shrink_with_more_outcomes() {
        let (few, many) = (wilson_margin(0.9, 10), wilson_margin(0.9, 10_000));
        assert!(few > 0.1 && few < 0.3, "{few}");
        assert!(many < 0.01, "{many}");
        assert!(wilson_margin(1.0, 100) > 0.0);
    }
}
