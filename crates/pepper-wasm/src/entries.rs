//! Exact edges: functions whose entry counts come from their callers' counts.
//!
//! Edge counting needs one chord per independent cycle of a function's CFG plus its
//! virtual EXIT→ENTRY edge, and for a function with branches that costs at least one
//! increment per call. But a function that only counted direct calls can enter was
//! entered exactly as often as its call sites ran, and the callers' own edge counts say
//! how often that was: the virtual edge can then be a free chord (Ball & Larus' optimal
//! profiling, carried across calls). On the Lua workload, counters placed by a guide went
//! from 80.3 M to 56.0 M increments with it (static placement 117.9 M → 105.8 M).
//!
//! Who qualifies: a defined function that is not exported, not the start function, not
//! referenced (element segments, `ref.func` anywhere: indirect calls may reach it), and
//! whose every direct caller is instrumented and has known counts itself, in an order
//! where callers come first (recursion keeps its counter). In a module that throws, or
//! has bodies pepper cannot analyze, nobody qualifies: unwinding breaks flow conservation
//! in the frames it crosses (yosys: 54 of 487,846 branches already differ slightly from
//! the exact-paths profile, 64 with entries from callers).

use crate::analysis::{AnalysisError, FunctionAnalysis};
use crate::module::ModuleFacts;
use pepper_cfg::NodeId;

/// The functions (by defined-function position) whose entries are given, callers first,
/// each with its direct call sites: (caller's position, the caller's node holding the
/// call), once per call instruction.
#[derive(Clone, Debug, Default)]
pub struct GivenEntries {
    pub order: Vec<(usize, Vec<(usize, NodeId)>)>,
    pub given: Vec<bool>,
}

/// Whether an exception may unwind through some function of the module: one throws, or
/// has a body pepper cannot analyze (exception handlers among them). Counts read at a
/// function's normal exits (entries from callers, loop counts) then miss what unwinding
/// skipped.
/// `None` stands for a body that could not be analyzed.
pub(crate) fn may_unwind<'a>(
    analyses: impl IntoIterator<Item = Option<&'a FunctionAnalysis>>,
) -> bool {
    let throws = |a: &FunctionAnalysis| a.edges.iter().any(|e| e.throw.is_some());
    analyses.into_iter().any(|a| a.is_none_or(throws))
}

impl GivenEntries {
    /// Decides which functions get their entries from their callers. `analyses[k]` is
    /// defined function `k`'s analysis, `skipped[k]` whether it stays uninstrumented
    /// anyway.
    pub fn decide(
        facts: &ModuleFacts<'_>,
        analyses: &[Result<FunctionAnalysis, AnalysisError>],
        skipped: &[bool],
    ) -> GivenEntries {
        let n = analyses.len();
        let mut out = GivenEntries {
            order: Vec::new(),
            given: vec![false; n],
        };
        // An exception unwinding through a frame leaves a call that never returned, so
        // that frame's counts do not conserve flow, and entries taken from them would carry
        // the error on to its callees. Modules that throw, or that have bodies pepper
        // cannot analyze (exception handlers among them), keep every entry counter.
        if may_unwind(analyses.iter().map(|a| a.as_ref().ok())) {
            return out;
        }
        let imported = facts.num_imported_funcs;
        let defined = |f: u32| {
            (f >= imported)
                .then(|| (f - imported) as usize)
                .filter(|&k| k < n)
        };
        let mut candidate: Vec<bool> = (0..n)
            .map(|k| {
                let f = facts.func_index(k).0;
                !skipped[k]
                    && analyses[k].is_ok()
                    && !facts.address_taken.contains(&f)
                    && !facts.entry_points.contains(&f)
            })
            .collect();
        let mut callers: Vec<Vec<(usize, NodeId)>> = vec![Vec::new(); n];
        for (g, a) in analyses.iter().enumerate() {
            // Every body analyzed (checked above). An uninstrumented caller counts
            // nothing, so whatever it calls keeps its own counter; whatever any body
            // takes a reference to may be called indirectly.
            let Ok(a) = a else { continue };
            for &(node, f) in &a.direct_calls {
                match defined(f) {
                    Some(k) if skipped[g] => candidate[k] = false,
                    Some(k) => callers[k].push((g, node)),
                    None => {}
                }
            }
            for k in a.func_refs.iter().filter_map(|&f| defined(f)) {
                candidate[k] = false;
            }
        }
        // Recursion (a cycle of candidates calling each other) keeps its counters: each
        // member's entries would depend on its own.
        for k in in_cycles(&candidate, &callers) {
            candidate[k] = false;
        }
        let has_sites = |k: usize| analyses[k].as_ref().is_ok_and(|a| !a.sites.is_empty());
        // Counts are known for a function with branches (its own chords) and for one whose
        // entries are given; unknown for a branch-free one that keeps its entries unknown.
        let mut known: Vec<bool> = (0..n)
            .map(|k| !skipped[k] && !candidate[k] && has_sites(k))
            .collect();
        let mut settled: Vec<bool> = candidate.iter().map(|c| !c).collect();
        let mut pending: Vec<usize> = (0..n).filter(|&k| candidate[k]).collect();
        loop {
            let mut changed = false;
            pending.retain(|&f| {
                if callers[f].iter().all(|&(g, _)| known[g]) {
                    out.given[f] = true;
                    known[f] = true;
                    settled[f] = true;
                    out.order.push((f, std::mem::take(&mut callers[f])));
                    changed = true;
                    false
                } else if callers[f].iter().any(|&(g, _)| settled[g] && !known[g]) {
                    known[f] = has_sites(f);
                    settled[f] = true;
                    changed = true;
                    false
                } else {
                    true
                }
            });
            if !changed {
                // Without cycles every candidate settles; nothing is left here.
                debug_assert!(pending.is_empty());
                break;
            }
        }
        out
    }
}

/// Candidates on a cycle of candidates calling each other (a function calling itself is a
/// cycle too).
fn in_cycles(candidate: &[bool], callers: &[Vec<(usize, NodeId)>]) -> Vec<usize> {
    // Edges run caller → callee; walking callers is the reversed graph, which has the
    // same components.
    let adj: Vec<Vec<usize>> = (0..candidate.len())
        .map(|v| {
            let mut a: Vec<usize> = callers[v]
                .iter()
                .map(|&(g, _)| g)
                .filter(|&g| candidate[v] && candidate[g])
                .collect();
            a.dedup();
            a
        })
        .collect();
    crate::callgraph::on_cycles(&adj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;

    const MODULE: &str = r#"(module
      (table 1 funcref)
      (elem (i32.const 0) $taken)
      (elem declare func $reffed)
      (func $main (export "_start") (param i32)
        (drop (call $helper (i32.const 1)))
        (if (local.get 0) (then (drop (call $helper (i32.const 2)))))
        (drop (call $rec (i32.const 3)))
        (drop (call $taken (i32.const 0)))
        (drop (call $via_ref (i32.const 0))))
      (func $helper (param i32) (result i32)
        (if (result i32) (local.get 0) (then (i32.const 1)) (else (call $leaf (i32.const 0)))))
      (func $leaf (param i32) (result i32) (local.get 0))
      (func $rec (param i32) (result i32)
        (if (result i32) (local.get 0)
          (then (call $rec (i32.sub (local.get 0) (i32.const 1))))
          (else (i32.const 0))))
      (func $taken (param i32) (result i32) (local.get 0))
      (func $via_ref (param i32) (result i32) (drop (ref.func $reffed)) (local.get 0))
      (func $reffed (param i32) (result i32) (local.get 0)))"#;

    fn decide_on(module: &str, skipped: &[bool]) -> GivenEntries {
        let wasm = wat::parse_str(module).unwrap();
        let facts = ModuleFacts::parse(&wasm).unwrap();
        let analyses: Vec<_> = facts.bodies.iter().map(analyze).collect();
        GivenEntries::decide(&facts, &analyses, skipped)
    }

    fn decide(skipped: &[bool]) -> GivenEntries {
        decide_on(MODULE, skipped)
    }

    /// Only functions nothing but counted direct calls can enter get their entries from
    /// callers: not the export, not recursion, not table or `ref.func` targets; callers
    /// come first, and every call instruction is a site. (The export has a branch, so it
    /// counts its own edges; a branch-free one would count nothing its callees could use.)
    #[test]
    fn entries_come_only_from_counted_direct_calls() {
        let g = decide(&[false; 7]);
        // main, helper, leaf, rec, taken, via_ref, reffed
        assert_eq!(g.given, [false, true, true, false, false, true, false]);
        let order: Vec<usize> = g.order.iter().map(|(f, _)| *f).collect();
        let pos = |f| order.iter().position(|&x| x == f).unwrap();
        assert!(
            pos(1) < pos(2),
            "the caller's entries are known first: {order:?}"
        );
        let sites = |f| g.order.iter().find(|(x, _)| *x == f).unwrap().1.len();
        assert_eq!(sites(1), 2, "two calls from main");
        assert_eq!(sites(2), 1);
    }

    /// What an uninstrumented function calls keeps its own entry counter.
    #[test]
    fn callees_of_uninstrumented_code_count_their_entries() {
        let g = decide(&[false, true, false, false, false, false, false]);
        assert!(!g.given[1] && !g.given[2], "{:?}", g.given);
        assert!(g.given[5]);
        // And a branch-free caller that counts nothing gives nothing.
        let branch_free = MODULE.replace(
            "(if (local.get 0) (then (drop (call $helper (i32.const 2)))))",
            "",
        );
        let g = decide_on(&branch_free, &[false; 7]);
        assert!(!g.given[1] && !g.given[5], "{:?}", g.given);
    }

    /// A module that throws keeps every entry counter (unwinding breaks flow
    /// conservation in the frames it crosses).
    #[test]
    fn modules_that_throw_count_every_entry() {
        let throwing = MODULE.replace(
            "(func $leaf (param i32) (result i32) (local.get 0))",
            "(tag $e) (func $leaf (param i32) (result i32) (if (local.get 0) (then (throw $e))) (local.get 0))",
        );
        let g = decide_on(&throwing, &[false; 7]);
        assert!(g.given.iter().all(|&x| !x), "{:?}", g.given);
        assert!(g.order.is_empty());
    }
}

/// Where a function's entry count can be read exactly in a run with call-site counters
/// (PEP's sampled paths are calibrated by it: `pepper_sampling::calibrate`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CountedEntries {
    /// Its own entry counter (functions indirect calls may reach), at this address.
    Counter(u32),
    /// The sum of these call sites' counts (site ids): every call of it is a direct call
    /// in instrumented code.
    Sites(Vec<u32>),
}

/// Per function index, where its entries are counted; functions missing from the map
/// are entered in ways no counter sees (from the host, through a table or a reference
/// without an entry counter, or from a body left uninstrumented).
pub(crate) fn counted_entries(
    facts: &ModuleFacts<'_>,
    functions: &[crate::plan::FunctionPlan],
    call_sites: &[crate::module::CallSiteInfo],
    entry_counters: &[(u32, u32, u32)],
) -> std::collections::HashMap<u32, CountedEntries> {
    let mut out = std::collections::HashMap::new();
    for &(f, at, _) in entry_counters {
        out.insert(f, CountedEntries::Counter(at));
    }
    // Functions some call no counter sees may reach: referenced anywhere (indirect calls),
    // or called from a body that is not instrumented.
    let mut unseen: std::collections::HashSet<u32> = facts.address_taken.iter().copied().collect();
    unseen.extend(facts.entry_points.iter().copied());
    for (k, fp) in functions.iter().enumerate() {
        match fp.analysis.as_deref().filter(|_| fp.skipped.is_none()) {
            Some(a) => unseen.extend(a.func_refs.iter().copied()),
            None => {
                let Some(body) = facts.bodies.get(k) else {
                    continue;
                };
                let Ok(ops) = body.get_operators_reader() else {
                    // Whatever it calls is unknown: no function's entries are counted by
                    // its callers then.
                    return out;
                };
                for op in ops {
                    match op {
                        Ok(wasmparser::Operator::Call { function_index })
                        | Ok(wasmparser::Operator::ReturnCall { function_index })
                        | Ok(wasmparser::Operator::RefFunc { function_index }) => {
                            unseen.insert(function_index);
                        }
                        Ok(_) => {}
                        Err(_) => return out,
                    }
                }
            }
        }
    }
    let mut sites: std::collections::HashMap<u32, Vec<u32>> = std::collections::HashMap::new();
    for (id, s) in call_sites.iter().enumerate() {
        if let Some(callee) = s.callee {
            sites.entry(callee).or_default().push(id as u32);
        }
    }
    for fp in functions.iter().filter(|fp| fp.skipped.is_none()) {
        let f = fp.index.0;
        if out.contains_key(&f) || unseen.contains(&f) {
            continue;
        }
        out.insert(
            f,
            CountedEntries::Sites(sites.remove(&f).unwrap_or_default()),
        );
    }
    out
}
