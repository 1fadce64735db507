//! Instrumenting a module, in stages: each function's plan (analysis, numbering or counter
//! placement: `functions`), `br_table` arm tables and pepper's memory (`memory`), each body's
//! code (`bodies`), and the re-encoded module (`crate::rewrite`).

mod bodies;
mod functions;
mod hash;
mod memory;

use crate::instrumented::Instrumented;
use crate::module::ModuleFacts;
use crate::plan::{InstrumentError, InstrumentOptions, Plan, SwitchPlacement};
use pepper_layout::ContextMode;
use pepper_profile::Mode;

/// Instruments `wasm` for `opts.mode`, leaving any function it cannot handle unchanged (with
/// a warning naming it). The output validates and behaves like the input; see pepper's
/// differential tests, `crates/pepper/tests/random_modules.rs` (generated modules) and
/// `corpus.rs` (real programs).
pub fn instrument(wasm: &[u8], opts: &InstrumentOptions) -> Result<Instrumented, InstrumentError> {
    let facts = ModuleFacts::parse(wasm)?;
    let mut validator = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
    validator.validate_all(wasm)?;
    let mut force_skip: Vec<(usize, String)> = Vec::new();
    // A rewriter bug must never cost the user a run: if the output does not validate, the
    // function at fault is left uninstrumented and the module rewritten again.
    for _ in 0..32 {
        let (bytes, plan) = build(wasm, &facts, opts, &force_skip)?;
        let mut v = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
        match v.validate_all(&bytes) {
            Ok(_) => return Ok(Instrumented::new(bytes, plan)),
            Err(e) => {
                let Some(k) = function_at(&bytes, e.offset() as usize) else {
                    return Err(InstrumentError::Encode(e.to_string()));
                };
                if force_skip.iter().any(|s| s.0 == k) {
                    return Err(InstrumentError::Encode(e.to_string()));
                }
                force_skip.push((
                    k,
                    format!("internal rewriter error ({e}); left uninstrumented"),
                ));
            }
        }
    }
    Err(InstrumentError::Encode(
        "too many functions failed validation".into(),
    ))
}

/// Which defined function's body contains `offset` in `wasm`.
fn function_at(wasm: &[u8], offset: usize) -> Option<usize> {
    let mut k = 0;
    for p in wasmparser::Parser::new(0).parse_all(wasm) {
        if let Ok(wasmparser::Payload::CodeSectionEntry(body)) = p {
            let r = body.range();
            if (r.start as usize..=r.end as usize).contains(&offset) {
                return Some(k);
            }
            k += 1;
        }
    }
    None
}

/// What every stage needs to know about the run being planned.
struct Build<'a, 'f> {
    wasm: &'a [u8],
    facts: &'a ModuleFacts<'f>,
    opts: &'a InstrumentOptions,
    mode: Mode,
    contexts: ContextMode,
    /// Ephemeral instrumentation: the switch, in windows or with a budget per function,
    /// its instrumented copies counting a spanning tree's chords as exact edges do.
    ephemeral: bool,
    /// Ephemeral with a budget per function (not in windows): the budget words, entry
    /// counts and loop counts exist.
    budgets: bool,
    switch: Option<SwitchPlacement>,
    path_windows: bool,
}

impl<'a, 'f> Build<'a, 'f> {
    fn new(wasm: &'a [u8], facts: &'a ModuleFacts<'f>, opts: &'a InstrumentOptions) -> Self {
        let (mode, contexts) = (opts.mode, opts.contexts);
        let ephemeral = mode.samples_edges();
        let switch = match ephemeral {
            true if opts.ephemeral_windows => {
                Some(opts.switch.unwrap_or(crate::plan::EPHEMERAL_PLACEMENT))
            }
            true => Some(SwitchPlacement::Outer),
            false => opts.switch.filter(|_| mode.samples_paths()),
        }
        .filter(|_| !contexts.shadow() && opts.call_log_log2.is_none());
        let path_windows = opts.path_windows
            && mode.samples_paths()
            && contexts == ContextMode::Native
            && opts.pep_every.is_none()
            && opts.call_log_log2.is_none();
        let budgets = ephemeral && !opts.ephemeral_windows;
        Build {
            wasm,
            facts,
            opts,
            mode,
            contexts,
            ephemeral,
            budgets,
            switch,
            path_windows,
        }
    }
}

/// The output module and its plan; functions named in `force_skip` (by defined index) are
/// left as they are.
fn build(
    wasm: &[u8],
    facts: &ModuleFacts<'_>,
    opts: &InstrumentOptions,
    force_skip: &[(usize, String)],
) -> Result<(Vec<u8>, Plan), InstrumentError> {
    let b = Build::new(wasm, facts, opts);
    let mut mem = memory::Allocator::new(opts);
    let planned = b.plan_functions(force_skip, &mut mem)?;
    let tables = b.arm_tables(&planned.functions, &mut mem);
    let laid = b.lay_out(&planned, &mut mem)?;
    let counters = b.contexts != ContextMode::Off && opts.site_counters;
    let windows = b.ephemeral && !b.budgets;
    let counted_entries = match counters && b.mode.samples_paths() {
        true => crate::entries::counted_entries(
            facts,
            &planned.functions,
            &planned.call_sites,
            &laid.entry_counters,
        ),
        false => Default::default(),
    };
    let plan = Plan {
        counted_entries,
        mode: b.mode,
        functions: planned.functions,
        layout: mem.layout,
        num_branches: planned.num_branches,
        contexts: b.contexts,
        call_sites: planned.call_sites,
        counted_at: planned.counted_at,
        imports: facts.imports.clone(),
        rewritten: false,
        entry_counters: laid.entry_counters.clone(),
        given_entries: planned.given,
        path_windows: b.path_windows,
        switch: b.switch,
        warnings: planned.warnings,
        dropped_sections: Vec::new(),
        switch_hints: 0,
        ephemeral_windows: windows,
        module_slot: opts.module_slot,
    };
    let context_code = b.contexts.shadow() || counters || plan.layout.call_log_entries > 0;
    if (!b.mode.instruments() && !context_code) || facts.bodies.is_empty() {
        return Ok((wasm.to_vec(), plan));
    }
    b.emit(plan, &tables, &laid, context_code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Action, FunctionAnalysis};
    use crate::plan::weights::{edge_weights, frequencies};
    use crate::plan::*;
    use std::sync::Arc;

    /// The exact-edges plan of a module in text form.
    fn edges_plan(wat: &str) -> Plan {
        guided_edges_plan(wat, None)
    }

    fn guided_edges_plan(wat: &str, guide: Option<Guide>) -> Plan {
        let wasm = wat::parse_str(wat).unwrap();
        let opts = InstrumentOptions {
            mode: Mode::ExactEdges,
            guide: guide.map(std::sync::Arc::new),
            ..Default::default()
        };
        instrument(&wasm, &opts).unwrap().plan
    }

    fn analysis_of(wat: &str, func: usize) -> Arc<FunctionAnalysis> {
        edges_plan(wat).functions[func].analysis.clone().unwrap()
    }

    /// A `br_table` arm's code runs at its target exactly when nothing else reaches the
    /// target: not where a case falls through, nor where another branch shares the label.
    #[test]
    fn br_table_arms_with_their_own_target_run_their_code_there() {
        let a = analysis_of(
            r#"(module (func (param $i i32)
              (block $C
                (block $B
                  (block $A
                    (br_table $A $B $A $C (local.get $i)))
                  (br $C))
                (nop))))"#,
            0,
        );
        let at_target: Vec<(u32, bool)> = (0..a.cfg.num_edges())
            .filter_map(|e| Some((a.edges[e].branch?.1, a.edges[e].at_target)))
            .collect();
        // $A (arms 0 and 2): only the table reaches it; $B: likewise ($A's code leaves by
        // `br $C`); $C: the default arm, $A's `br` and $B's fall-through.
        assert_eq!(at_target, vec![(0, true), (1, true), (2, false)]);
        let placed = |e: usize| {
            a.actions
                .iter()
                .filter(|(_, _, act)| matches!(act, Action::Edge(x) if x.index() == e))
                .count()
        };
        for e in 0..a.cfg.num_edges() {
            let expected = usize::from(a.edges[e].at_target);
            if a.edges[e].branch.is_some() {
                assert_eq!(placed(e), expected, "edge {e}");
            }
        }
    }

    /// The CFG edge of outcome `o` of the function's `n`-th `if`.
    fn if_outcome(analysis: &FunctionAnalysis, n: usize, o: u32) -> usize {
        (0..analysis.cfg.num_edges())
            .filter(|&e| {
                analysis.edges[e].branch.is_some_and(|(s, k)| {
                    analysis.sites[s.0 as usize].kind == pepper_profile::BranchKind::If && k == o
                })
            })
            .nth(n)
            .unwrap()
    }

    /// Which loops exact edges reads by their induction variable: a local written once in
    /// the loop, as `x = x ± c` (i32 or i64, any small step), directly in that loop; not one
    /// the loop writes twice, not an outer loop's variable stepped in an inner loop, and not
    /// a loop that can leave through a `br_table` arm to a label that other branches share
    /// (no place for the read).
    #[test]
    fn loop_counts_read_induction_variables() {
        let plan = edges_plan(
            r#"(module
              (memory 1)
              (func (export "up") (param $n i32) (local $i i32)
                (loop $l
                  (if (i32.and (local.get $i) (i32.const 1)) (then (i32.store (i32.const 0) (local.get $i))))
                  (local.set $i (i32.add (local.get $i) (i32.const 1)))
                  (br_if $l (i32.lt_u (local.get $i) (local.get $n)))))
              (func (export "down") (param $p i64)
                (loop $l
                  (local.set $p (i64.sub (local.get $p) (i64.const 8)))
                  (br_if $l (i64.gt_s (local.get $p) (i64.const 0)))))
              (func (export "twice") (param $i i32)
                (loop $l
                  (local.set $i (i32.add (local.get $i) (i32.const 1)))
                  (if (local.get $i) (then (local.set $i (i32.const 5))))
                  (br_if $l (i32.lt_u (local.get $i) (i32.const 10)))))
              (func (export "nested") (param $i i32) (local $j i32)
                (loop $outer
                  (loop $inner
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (br_if $inner (i32.and (local.get $j) (i32.const 3))))
                  (br_if $outer (i32.lt_u (local.get $i) (i32.const 100)))))
              (func (export "table") (param $i i32)
                (block $out
                  (loop $l
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $out (i32.eq (local.get $i) (i32.const 50)))
                    (br_table $l $out (i32.and (local.get $i) (i32.const 1))))))
              (func (export "table_own_exit") (param $i i32)
                (block $out
                  (loop $l
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_table $l $out (i32.and (local.get $i) (i32.const 1)))))))"#,
        );
        let loops = |k: usize| {
            plan.functions[k]
                .loop_counts
                .iter()
                .map(|l| (l.counter.local, l.counter.wide, l.counter.step))
                .collect::<Vec<_>>()
        };
        assert_eq!(loops(0), vec![(1, false, 1)]);
        assert_eq!(loops(1), vec![(0, true, -8)]);
        assert!(loops(2).is_empty(), "written twice");
        // `$i` steps in the inner loop, so it counts the inner loop's node; the outer
        // loop has no variable of its own.
        assert_eq!(loops(3), vec![(0, false, 1)]);
        assert!(loops(4).is_empty(), "leaves through a br_table arm");
        // Unless that arm is the only way to its target, where the read then goes.
        assert_eq!(loops(5), vec![(0, false, 1)]);
        // Each read loop's node count replaced a counter on every iteration.
        let up = &plan.functions[0];
        let ec = up.edge_counting.as_ref().unwrap();
        assert_eq!(ec.nodes_given, vec![up.loop_counts[0].counter.node]);
    }

    /// A function without branches gets no counter in exact-edges mode (it has nothing to
    /// report); one with a branch gets some.
    #[test]
    fn exact_edges_leaves_branch_free_functions_alone() {
        let plan = edges_plan(
            r#"(module
              (func (export "leaf") (param i32) (result i32)
                (i32.add (local.get 0) (i32.const 1)))
              (func (export "branchy") (param i32) (result i32)
                (if (result i32) (local.get 0) (then (i32.const 1)) (else (i32.const 2)))))"#,
        );
        let counters = |k: usize| plan.functions[k].edge_counter.iter().flatten().count();
        assert_eq!(counters(0), 0);
        assert!(counters(1) > 0);
    }

    /// Counter placement weighs edges by the static frequency estimate, not just loop
    /// depth (which ties every edge of a loop body): in a loop, the arm that calls and the
    /// arm that traps weigh less than their siblings, so the spanning tree takes the
    /// siblings and the counters go on the rare arms; the loop body outweighs the code
    /// around it.
    #[test]
    fn edge_weights_follow_the_frequency_estimate() {
        let a = analysis_of(
            r#"(module
              (func $g)
              (func (export "f") (param i32) (result i32) (local i32)
                (if (local.get 0) (then (local.set 1 (i32.const 7))))
                (loop $l
                  (if (i32.eq (local.get 1) (i32.const 12345))
                    (then (call $g))
                    (else (local.set 1 (i32.add (local.get 1) (i32.const 1)))))
                  (if (i32.eq (local.get 1) (i32.const 99999))
                    (then unreachable))
                  (br_if $l (i32.lt_u (local.get 1) (local.get 0))))
                (local.get 1)))"#,
            1,
        );
        let w = edge_weights(&a, &frequencies(&a, None));
        let (outside, calls, plain) = (
            if_outcome(&a, 0, 0),
            if_outcome(&a, 1, 0),
            if_outcome(&a, 1, 1),
        );
        let (traps, continues) = (if_outcome(&a, 2, 0), if_outcome(&a, 2, 1));
        assert!(
            w[calls] * 2 < w[plain],
            "call arm {} vs {}",
            w[calls],
            w[plain]
        );
        assert!(
            w[traps] * 100 < w[continues],
            "trap arm {} vs {}",
            w[traps],
            w[continues]
        );
        assert!(
            w[outside] * 4 < w[plain],
            "outside the loop {} vs {}",
            w[outside],
            w[plain]
        );
    }

    /// With a guide, exact-edges places its counters by the guide's counts: an arm the
    /// static estimate calls rare (it calls) but the guide saw taken 99 times in 100 weighs
    /// more than its sibling, and the counter moves to the sibling. (The first `if` is
    /// there because a function's first branch counts its entries on every arm.)
    #[test]
    fn a_guide_moves_the_counter_to_the_arm_it_saw_rare() {
        const WAT: &str = r#"(module
              (func $g)
              (func (export "f") (param i32) (result i32)
                (if (i32.and (local.get 0) (i32.const 1))
                  (then (local.set 0 (i32.add (local.get 0) (i32.const 3)))))
                (if (i32.and (local.get 0) (i32.const 127))
                  (then (call $g))
                  (else (local.set 0 (i32.add (local.get 0) (i32.const 1)))))
                (local.get 0)))"#;
        // Whether a counter sits on an edge into or out of each arm's block.
        let counted = |plan: &Plan| {
            let f = &plan.functions[1];
            let a = f.analysis.as_ref().unwrap();
            let arm = |o| {
                let node = a.cfg.edge(pepper_cfg::EdgeId::new(if_outcome(a, 1, o))).1;
                (0..a.cfg.num_edges()).any(|e| {
                    let (x, y) = a.cfg.edge(pepper_cfg::EdgeId::new(e));
                    (x == node || y == node) && f.edge_counter[e].is_some()
                })
            };
            (arm(0), arm(1))
        };
        let plan = edges_plan(WAT);
        let a = plan.functions[1].analysis.clone().unwrap();
        let (calls, plain) = (if_outcome(&a, 1, 0), if_outcome(&a, 1, 1));
        let w = edge_weights(&a, &frequencies(&a, None));
        assert!(w[calls] < w[plain], "static: {} vs {}", w[calls], w[plain]);
        assert_eq!(
            counted(&plan),
            (true, false),
            "static: the calling arm is counted"
        );

        let site = a
            .sites
            .iter()
            .filter(|s| s.kind == pepper_profile::BranchKind::If)
            .nth(1);
        let mut guide = Guide::default();
        guide
            .counts
            .insert((1, site.unwrap().offset), vec![990, 10]);
        let observed = guide.observed(1, &a).unwrap();
        let w = edge_weights(&a, &frequencies(&a, Some(&observed)));
        assert!(
            w[calls] > 50 * w[plain],
            "guided: {} vs {}",
            w[calls],
            w[plain]
        );
        let plan = guided_edges_plan(WAT, Some(guide));
        assert_eq!(
            counted(&plan),
            (false, true),
            "guided: the rare arm is counted"
        );
    }
}
