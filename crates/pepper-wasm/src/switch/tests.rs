use super::*;

/// `wat` instrumented for PEP with the switch at `placement`.
fn switched(wat: &str, placement: SwitchPlacement) -> crate::Instrumented {
    switched_with(wat, placement, |_| {})
}

/// As [`switched`], with `change` made to the options.
fn switched_with(
    wat: &str,
    placement: SwitchPlacement,
    change: impl FnOnce(&mut crate::InstrumentOptions),
) -> crate::Instrumented {
    let wasm = wat::parse_str(wat).unwrap();
    let mut opts = crate::InstrumentOptions {
        mode: pepper_profile::Mode::Pep,
        switch: Some(placement),
        ..Default::default()
    };
    change(&mut opts);
    crate::instrument(&wasm, &opts).unwrap()
}

fn shape_of(wat: &str) -> Shape {
    let wasm = wat::parse_str(wat).unwrap();
    shapes(&wasm).unwrap().remove(0)
}

#[test]
fn loops_know_whether_they_can_be_entered() {
    let s = shape_of(
        r#"(module (func $f (param i32) (result i32)
             (block
               (loop                        ;; outer: holds a loop
                 (loop                      ;; inner, call-free
                   (br_if 0 (local.get 0)))
                 (br_if 1 (local.get 0))
                 (br 0)))
             (i32.const 1)
             (loop (param i32) (result i32)) ;; takes a parameter
             (drop)
             (if (local.get 0) (then (loop (call $f (i32.const 0)) (drop))))
             (i32.const 7)))"#,
    );
    let l = &s.loops;
    assert_eq!(l.len(), 4);
    assert!(!l[0].innermost && !l[0].calls && l[0].chain.is_some());
    assert!(l[1].innermost && !l[1].calls);
    assert_eq!(l[1].chain.as_ref().unwrap().len(), 3);
    assert!(l[2].chain.is_none(), "a loop with a parameter");
    assert!(l[3].calls);
    let chain = l[3].chain.as_ref().unwrap();
    assert!(chain[0].child_is_if && chain[1].arm.is_some());
    assert_eq!(s.targets(SwitchPlacement::Outer), vec![0, 3]);
    assert_eq!(s.targets(SwitchPlacement::Loops), vec![0, 3]);
    assert_eq!(s.targets(SwitchPlacement::Shallow), vec![0, 3]);
    assert_eq!(s.targets(SwitchPlacement::All), vec![0, 1, 3]);
    assert!(s.targets(SwitchPlacement::Entries).is_empty());
}

/// `shallow` checks an inner loop that calls only where few constructs lead to it, and
/// its instrumented copy leaves at every loop it checks.
#[test]
fn shallow_checks_inner_loops_that_call_with_few_constructs_around() {
    let s = shape_of(
        r#"(module (func $f (param i32)
             (loop                                ;; outermost
               (loop                              ;; inside a loop only
                 (call $f (i32.const 0))
                 (br_if 0 (local.get 0)))
               (block (block (block               ;; three constructs around
                 (loop (call $f (i32.const 0)) (br_if 0 (local.get 0))))))
               (loop (br_if 0 (local.get 0)))     ;; call-free, innermost
               (br_if 0 (local.get 0)))))"#,
    );
    let detours: Vec<usize> = s.loops.iter().map(|l| l.detours).collect();
    assert_eq!(detours, vec![0, 0, 3, 0]);
    assert_eq!(s.targets(SwitchPlacement::Loops), vec![0, 1, 2]);
    assert_eq!(s.targets(SwitchPlacement::Shallow), vec![0, 1]);
    assert!(s.leaves_at(SwitchPlacement::Shallow, 1));
    assert!(!s.leaves_at(SwitchPlacement::Loops, 1));
    assert!(s.leaves_at(SwitchPlacement::Outer, 0));
}

/// `shallow` checks every loop that holds loops, however deep (a nest behind a dozen
/// blocks would otherwise run in clean code to its end), and `deep` every loop; both
/// leave only where their detour limits allow: `shallow` behind at most two constructs,
/// `deep` behind up to eight (a sort's loops nested in `if`s), neither behind more (a
/// dispatch `br_table`'s cases) nor at innermost loops, where the check only enters the
/// instrumented copy. `shallow` checks loops that only call behind at most two.
#[test]
fn nests_are_checked_however_deep_and_left_within_the_detour_limits() {
    let nested = |n: usize, body: &str| {
        format!(
            "{}(loop {body} (br_if 0 (local.get 0))){}",
            "(block ".repeat(n),
            ")".repeat(n)
        )
    };
    let holds = "(loop (br_if 0 (local.get 0)))";
    let calls = "(call $f (i32.const 0))";
    let s = shape_of(&format!(
        r#"(module (func $f (param i32)
             (loop                                ;; outermost
               {}
               {}
               {}
               (br_if 0 (local.get 0)))))"#,
        nested(8, holds),
        nested(9, holds),
        nested(3, calls)
    ));
    let detours: Vec<usize> = s.loops.iter().map(|l| l.detours).collect();
    assert_eq!(detours, vec![0, 8, 8, 9, 9, 3]);
    assert_eq!(s.targets(SwitchPlacement::Shallow), vec![0, 1, 3]);
    assert_eq!(s.targets(SwitchPlacement::Deep), vec![0, 1, 2, 3, 4, 5]);
    // Deep's checks at innermost loops, and at a loop that only calls behind more than
    // two constructs, only enter.
    assert!([2, 4, 5]
        .iter()
        .all(|&k| s.enters_only(SwitchPlacement::Deep, k)));
    let leaves = |p| [1, 3].map(|k| s.leaves_at(p, k));
    assert_eq!(leaves(SwitchPlacement::Shallow), [false, false]);
    assert_eq!(leaves(SwitchPlacement::Deep), [true, false]);
    assert!(s.enters_only(SwitchPlacement::Shallow, 1) && !s.enters_only(SwitchPlacement::Deep, 1));
    assert!(s.enters_only(SwitchPlacement::Deep, 3));
    // `Loops` leaves only at outermost loops: its inner checks are not "enter-only" ones
    // (no `F_resume` for them).
    assert!(!s.enters_only(SwitchPlacement::Loops, 1));
    // `Nests`: `Outer`'s checks and one at every nest behind more than two constructs,
    // which only enters; no check at a loop that only calls.
    assert_eq!(s.targets(SwitchPlacement::Nests), vec![0, 1, 3]);
    assert_eq!(s.targets(SwitchPlacement::Outer), vec![0]);
    assert!(s.leaves_at(SwitchPlacement::Nests, 0));
    assert!([1, 3]
        .iter()
        .all(|&k| s.enters_only(SwitchPlacement::Nests, k)));
    // A nest behind one block is left to the outermost loop's check under `Nests`.
    let near = shape_of(
        r#"(module (func (param i32)
             (loop (block (loop (loop (br_if 0 (local.get 0))) (br_if 0 (local.get 0))))
               (br_if 0 (local.get 0)))))"#,
    );
    assert_eq!(near.loops[1].detours, 1);
    assert_eq!(near.targets(SwitchPlacement::Nests), vec![0]);
    assert_eq!(near.targets(SwitchPlacement::Shallow), vec![0, 1]);
    assert_eq!(near.targets(SwitchPlacement::Deep), vec![0, 1, 2]);
}

/// Path windows place a sampled leaf by the operator offsets of the body that writes
/// the path ends: under the switch, `F_inst`, whose spliced code moves them. Each
/// offset must fall on the same operator as in the original body, and `PathSites`
/// must know those functions.
#[test]
fn the_instrumented_copy_keeps_the_offsets_of_its_operators() {
    let wasm = wat::parse_str(
        r#"(module
             (func $leaf (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
             (func (export "f") (param i32) (result i32) (local i32)
               (block
                 (loop
                   (local.set 1 (call $leaf (local.get 1)))
                   (loop (br_if 0 (i32.lt_u (local.get 1) (i32.const 7)))
                         (local.set 1 (i32.add (local.get 1) (i32.const 2))))
                   (br_if 1 (i32.gt_u (local.get 1) (local.get 0)))
                   (br 0)))
               (if (result i32) (local.get 0)
                 (then (loop (result i32) (call $leaf (local.get 1))))
                 (else (local.get 1)))))"#,
    )
    .unwrap();
    let opts = crate::InstrumentOptions {
        mode: pepper_profile::Mode::Pep,
        contexts: crate::ContextMode::Native,
        switch: Some(SwitchPlacement::Outer),
        ..Default::default()
    };
    let inst = crate::instrument(&wasm, &opts).unwrap();
    assert!(inst.plan.path_windows);
    let original = crate::module::ModuleFacts::parse(&wasm).unwrap().bodies;
    let output = crate::module::ModuleFacts::parse(&inst.wasm)
        .unwrap()
        .bodies;
    // (A branch that ends a path on its taken edge is emitted as `if .. br .. end`.)
    let kind = |op: &O<'_>| match op {
        O::Br { .. } | O::BrIf { .. } | O::BrTable { .. } => "branch".to_string(),
        _ => format!("{op:?}")
            .split([' ', '{', '('])
            .next()
            .unwrap()
            .to_string(),
    };
    let mut checked = 0;
    for (k, fp) in inst.plan.functions.iter().enumerate() {
        let (copy, _) = fp.copies.expect("every function has copies");
        let body = &output[copy as usize];
        let start = body.range().start;
        let mut at = std::collections::HashMap::new();
        let mut r = body.get_operators_reader().unwrap();
        while !r.eof() {
            let offset = r.original_position() - start;
            at.insert(offset as u32, kind(&r.read().unwrap()));
        }
        let ops: Vec<String> = (original[k].get_operators_reader().unwrap())
            .into_iter()
            .map(|op| kind(&op.unwrap()))
            .collect();
        assert_eq!(fp.op_offsets.len(), ops.len(), "function {k}");
        // An operator's code (a call's begins with its counter) starts at its offset
        // and holds the operator before the next one's begins.
        for (i, want) in ops.iter().enumerate() {
            let from = fp.op_offsets[i];
            let to = fp.op_offsets.get(i + 1).copied().unwrap_or(u32::MAX);
            assert!(
                at.contains_key(&from),
                "function {k}, operator {i}: mid-instruction"
            );
            assert!(
                at.iter()
                    .any(|(&o, got)| (from..to).contains(&o) && got == want),
                "function {k}, operator {i}: no {want} in its code"
            );
            checked += 1;
        }
    }
    assert!(checked > 30, "{checked}");
    assert!(inst.path_decoder().is_some());
}

/// The copies have their function's type (a switch hands locals over in globals, not
/// as extra arguments that every call of the clean code would reserve stack for), and
/// every check's `if` is hinted unlikely.
#[test]
fn copies_take_their_functions_type_and_checks_are_hinted() {
    let inst = switched(
        r#"(module
             (global $g (mut i32) (i32.const 5))
             (func (export "f") (param i32 f64) (result i32) (local i32 i64 f32 i32)
               (local.set 3 (i64.const 9))
               (block
                 (loop
                   (local.set 2 (i32.add (local.get 2) (i32.wrap_i64 (local.get 3))))
                   (local.set 5 (i32.const 1))
                   (br_if 1 (i32.gt_u (local.get 2) (local.get 0)))
                   (br 0)))
               (i32.add (local.get 5) (global.get $g))))"#,
        SwitchPlacement::All,
    );
    let facts = crate::module::ModuleFacts::parse(&inst.wasm).unwrap();
    let (first, second) = inst.plan.functions[0].copies.unwrap();
    let ty = |f: u32| facts.func_type(f).unwrap();
    assert_eq!(ty(first), ty(0));
    assert_eq!(ty(second), ty(0));
    // The module's global, the loop id, and one slot each for the i32 and the i64
    // the loop reads before writing (local 5 is written first, local 4 never read).
    assert_eq!(facts.num_globals, 1 + 1 + 2);
    let hints = crate::hints::read(&inst.wasm).unwrap();
    assert_eq!(hints.len(), inst.plan.switch_hints);
    // F: entry and loop checks; F_inst: its loop's; F_clean: its loop's.
    assert_eq!(hints.len(), 4);
    assert!(hints.iter().all(|h| !h.likely));
    assert!(inst.wants_branch_hinting());
}

/// A loop made of tail calls has no header to check: its functions check at entry,
/// and the instrumented copies tail-call them there, never at their copies (which
/// would keep the loop instrumented after the burst, or clean through a window).
#[test]
fn tail_calls_go_through_the_callees_entry_check() {
    let inst = switched(
        r#"(module
             (func $ping (export "run") (param i32) (result i32)
               (if (result i32) (local.get 0)
                 (then (return_call $pong (i32.sub (local.get 0) (i32.const 1))))
                 (else (call $leaf (local.get 0)))))
             (func $pong (param i32) (result i32)
               (return_call $ping (local.get 0)))
             (func $leaf (param i32) (result i32)
               (i32.add (local.get 0) (i32.const 1))))"#,
        SwitchPlacement::Outer,
    );
    let facts = crate::module::ModuleFacts::parse(&inst.wasm).unwrap();
    let copies: Vec<(u32, u32)> = (0..3)
        .map(|k| inst.plan.functions[k].copies.unwrap())
        .collect();
    let ops = |f: u32| -> Vec<O<'_>> {
        let r = facts.bodies[f as usize].get_operators_reader().unwrap();
        r.into_iter().map(Result::unwrap).collect()
    };
    let calls = |f: u32, tail: bool| -> Vec<u32> {
        ops(f)
            .into_iter()
            .filter_map(|op| match op {
                O::ReturnCall { function_index } if tail => Some(function_index),
                O::Call { function_index } if !tail => Some(function_index),
                _ => None,
            })
            .collect()
    };
    // `ping`'s instrumented copy tail-calls `pong` itself, not `pong_inst`, but calls
    // `leaf` at its instrumented copy.
    assert!(
        calls(copies[0].0, true).contains(&1),
        "{:?}",
        ops(copies[0].0)
    );
    assert!(!calls(copies[0].0, true).contains(&copies[1].0));
    assert!(calls(copies[0].0, false).contains(&copies[2].0));
    // `pong` (tail-called) checks at entry: its clean code can move to `pong_inst`;
    // `leaf` (called only directly, no loop) has no check at all.
    assert!(calls(1, true).contains(&copies[1].0), "{:?}", ops(1));
    assert!(!calls(2, true).contains(&copies[2].0), "{:?}", ops(2));
}

#[test]
fn a_value_on_the_stack_keeps_a_loop_closed() {
    let s = shape_of(
        r#"(module (func (result i32)
             (i32.const 1)
             (block (loop (br_if 0 (i32.const 0))))))"#,
    );
    assert!(s.loops[0].chain.is_none());
}

/// The sampler writes the flag and the burst's limit several times a burst while the
/// guest's checks read them: they sit in a cache line of their own, so that no counter
/// clean code writes (entry and call-site counters, here) shares it.
#[test]
fn the_flag_has_a_cache_line_of_its_own() {
    let wasm = wat::parse_str(
        r#"(module
             (type $t (func (param i32) (result i32)))
             (table 1 funcref) (elem (i32.const 0) $g)
             (func $g (type $t) (i32.add (local.get 0) (i32.const 1)))
             (func (export "f") (param i32) (result i32)
               (loop (br_if 0 (call $g (local.get 0))))
               (call_indirect (type $t) (local.get 0) (i32.const 0))))"#,
    )
    .unwrap();
    let opts = crate::InstrumentOptions {
        mode: pepper_profile::Mode::Pep,
        switch: Some(SwitchPlacement::Outer),
        contexts: crate::ContextMode::Native,
        ..Default::default()
    };
    let i = crate::instrument(&wasm, &opts).unwrap();
    let l = &i.plan.layout;
    let line = |at: u64| at / 64;
    let flag = l.switch_flag as u64;
    assert_eq!(flag % 64, 0);
    let mut others: Vec<(u64, u64)> = i
        .plan
        .entry_counters
        .iter()
        .map(|&(_, at, _)| (at as u64, 8))
        .collect();
    assert!(
        !others.is_empty(),
        "an entry counter for the table's function"
    );
    others.push((l.site_counters as u64, 8 * i.plan.call_sites.len() as u64));
    others.push((l.ring_base as u64, 8 * l.ring_entries as u64));
    for (at, len) in others {
        assert!(len > 0);
        let (first, last) = (line(at), line(at + len - 1));
        assert!(
            last < line(flag) || first > line(flag),
            "bytes {at}..{} share the flag's line ({flag})",
            at + len
        );
    }
    assert!(l.size <= u32::MAX as u64 && line(l.size - 1) >= line(flag + 7));
}

/// A function left without copies (here for its `try_table`) calls its callees' clean
/// code: they check the flag at entry, or no burst would ever reach them from there.
#[test]
fn callees_of_functions_without_copies_check_at_entry() {
    let inst = switched(
        r#"(module
             (tag $t)
             (func $outer (export "run") (param i32) (result i32)
               (block $caught
                 (try_table (catch $t $caught)
                   (drop (call $leaf (local.get 0)))))
               (call $leaf (local.get 0)))
             (func $leaf (param i32) (result i32)
               (i32.add (local.get 0) (i32.const 1)))
             (func $other (export "other") (param i32) (result i32)
               (call $quiet (local.get 0)))
             (func $quiet (param i32) (result i32)
               (i32.mul (local.get 0) (i32.const 3))))"#,
        SwitchPlacement::Outer,
    );
    assert!(inst.plan.functions[0].copies.is_none(), "outer has copies");
    let facts = crate::module::ModuleFacts::parse(&inst.wasm).unwrap();
    let tail_calls = |f: u32| -> Vec<u32> {
        let r = facts.bodies[f as usize].get_operators_reader().unwrap();
        r.into_iter()
            .filter_map(|op| match op.unwrap() {
                O::ReturnCall { function_index } => Some(function_index),
                _ => None,
            })
            .collect()
    };
    let leaf = inst.plan.functions[1].copies.unwrap();
    let quiet = inst.plan.functions[3].copies.unwrap();
    assert!(tail_calls(1).contains(&leaf.0), "leaf has no entry check");
    // Called only from an instrumented function: no check needed.
    assert!(!tail_calls(3).contains(&quiet.0), "quiet checks at entry");
}

/// A module whose function 1, `f`, calls `$g` first, then runs `body`, which ends in
/// `f`'s result.
fn after_a_call(body: &str) -> String {
    format!(
        r#"(module
         (func $g (param i32) (result i32) (i32.mul (local.get 0) (i32.const 3)))
         (func (export "f") (param i32) (result i32) (local i32 i64)
           (local.set 1 (call $g (local.get 0)))
           {body}))"#
    )
}

/// `wat`'s function 1 under `placement`, per copy (`F_inst`, `F_clean`): its global reads
/// before its first call, between that call and its first loop, and after.
fn global_reads(wat: &str, placement: SwitchPlacement) -> [[usize; 3]; 2] {
    let opts = crate::InstrumentOptions {
        mode: pepper_profile::Mode::Pep,
        switch: Some(placement),
        ..Default::default()
    };
    let inst = crate::instrument(&wat::parse_str(wat).unwrap(), &opts).unwrap();
    let bodies = crate::module::ModuleFacts::parse(&inst.wasm)
        .unwrap()
        .bodies;
    let (f_inst, f_clean) = inst.plan.functions[1].copies.unwrap();
    [f_inst, f_clean].map(|f| {
        let mut counts = [0, 0, 0];
        let mut part = 0;
        for op in bodies[f as usize].get_operators_reader().unwrap() {
            match op.unwrap() {
                O::Call { .. } if part == 0 => part = 1,
                O::Loop { .. } if part == 1 => part = 2,
                O::GlobalGet { .. } => counts[part] += 1,
                _ => {}
            }
        }
        counts
    })
}

/// The copies entered at a loop take its locals from the globals just in front of that
/// loop, past the code the skip blocks jump over (taken at the start, those values lived
/// across that code and Cranelift kept some on the stack through the loop, in `F_clean`
/// where long frames run once a burst has passed).
#[test]
fn the_copies_take_a_loops_locals_in_front_of_the_loop() {
    let wat = after_a_call(
        r#"(local.set 2 (i64.const 9))
           (block
             (loop
               (local.set 1 (i32.add (local.get 1) (i32.wrap_i64 (local.get 2))))
               (br_if 1 (i32.gt_u (local.get 1) (local.get 0)))
               (br 0)))
           (local.get 1)"#,
    );
    // The loop id's global at the start; the i32 and the i64 the loop reads.
    let late = global_reads(&wat, SwitchPlacement::Outer);
    assert_eq!(late, [[1, 2, 0], [1, 2, 0]]);
}

/// An inner loop's locals come over in front of the outermost loop around it, once per
/// entry into the nest, not in front of the inner loop, where the test would run each
/// time an outer iteration starts it.
#[test]
fn an_inner_loops_locals_come_over_in_front_of_its_nest() {
    let wat = after_a_call(
        r#"(loop $outer
             (local.set 2 (i64.const 9))
             (loop $inner
               (local.set 1 (call $g (i32.add (local.get 1) (i32.wrap_i64 (local.get 2)))))
               (br_if $inner (i32.lt_u (local.get 1) (i32.const 100))))
             (br_if $outer (i32.lt_u (local.get 1) (local.get 0))))
           (local.get 1)"#,
    );
    // `shallow` enters both loops. The outer loop reads local 1 first; the inner one
    // locals 1 and 2: three reads in front of the nest, none in it.
    assert_eq!(
        global_reads(&wat, SwitchPlacement::Shallow),
        [[1, 3, 0], [1, 3, 0]]
    );
}

/// The name section's function names, in its order.
fn function_names(wasm: &[u8]) -> Vec<(u32, String)> {
    let mut order = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let wasmparser::Payload::CustomSection(c) = payload.unwrap() {
            if let wasmparser::KnownCustom::Name(reader) = c.as_known() {
                for sub in reader {
                    if let wasmparser::Name::Function(map) = sub.unwrap() {
                        for n in map {
                            let n = n.unwrap();
                            order.push((n.index, n.name.to_string()));
                        }
                    }
                }
            }
        }
    }
    order
}

/// The copies carry their function's name (with `.pepper-inst` and `.pepper-clean`), so a
/// trap's backtrace and `perf` name the program's function whichever copy ran; pepper's
/// own functions are named too, and the module's names stay where they were.
#[test]
fn copies_are_named_after_their_function() {
    let i = switched(
        r#"(module
             (func $work (param i32) (result i32)
               (loop (br_if 0 (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
               (local.get 0))
             (func $main (export "_start") (drop (call $work (i32.const 9)))))"#,
        SwitchPlacement::Outer,
    );
    let order = function_names(&i.wasm);
    // In index order, as the name section requires.
    assert!(order.is_sorted_by_key(|n| n.0), "{order:?}");
    let names: std::collections::HashMap<_, _> = order.into_iter().collect();
    assert_eq!(names[&0], "work");
    assert_eq!(names[&1], "main");
    assert_eq!(names[&2], "pepper:count-path");
    let (inst, clean) = i.plan.functions[0].copies.expect("work has copies");
    assert_eq!(names[&inst], "work.pepper-inst");
    assert_eq!(names[&clean], "work.pepper-clean");
    let (inst, _) = i.plan.functions[1].copies.expect("main has copies");
    assert_eq!(names[&inst], "main.pepper-inst");
}

/// A nest whose check only enters `F_inst` gets `F_resume`: `F_inst` leaves there into
/// `F_resume` (not `F_clean`, which cannot be entered there), and `F_resume` moves to
/// `F_clean` at the next loop `F_clean` can be entered at, or back into `F_inst`.
/// `F_clean` never goes to `F_resume`; a function without such a nest has no third copy.
#[test]
fn a_copy_entered_at_a_deep_nest_leaves_through_f_resume() {
    let nest = format!(
        "{}(loop (loop (br_if 0 (local.get 0))) (br_if 0 (local.get 0))){}",
        "(block ".repeat(10),
        ")".repeat(10)
    );
    let wat = format!(
        r#"(module
             (func $deep (export "deep") (param i32)
               (loop {nest} (br_if 0 (local.get 0))))
             (func (export "flat") (param i32)
               (loop (br_if 0 (local.get 0)))))"#
    );
    let inst = switched(&wat, SwitchPlacement::Deep);
    let tail_calls = |f: u32| targets_of(&inst.wasm, f).0;
    let deep = &inst.plan.functions[0];
    let ((f_inst, f_clean), f_resume) = (deep.copies.unwrap(), deep.resume.unwrap());
    assert_eq!(f_resume, f_clean + 1);
    assert!(
        tail_calls(f_inst).contains(&f_resume),
        "F_inst leaves at the nest"
    );
    assert!(
        tail_calls(f_inst).contains(&f_clean),
        "and at the outer loop"
    );
    let from_resume = tail_calls(f_resume);
    assert!(from_resume.contains(&f_clean) && from_resume.contains(&f_inst));
    assert!(!tail_calls(f_clean).contains(&f_resume));
    assert!(
        !tail_calls(0).contains(&f_resume),
        "F is never left for F_resume"
    );
    assert_eq!(deep.copy_indices().count(), 3);
    let names = function_names(&inst.wasm);
    assert!(names.contains(&(f_resume, "deep.pepper-resume".to_string())));
    let flat = &inst.plan.functions[1];
    assert!(flat.copies.is_some() && flat.resume.is_none());
}

/// The operators' tail-call and call targets of function `f` in `wasm`.
fn targets_of(wasm: &[u8], f: u32) -> (Vec<u32>, Vec<u32>) {
    let facts = crate::module::ModuleFacts::parse(wasm).unwrap();
    let r = facts.bodies[f as usize].get_operators_reader().unwrap();
    let (mut tail, mut calls) = (Vec::new(), Vec::new());
    for op in r.into_iter().map(Result::unwrap) {
        match op {
            O::ReturnCall { function_index } => tail.push(function_index),
            O::Call { function_index } => calls.push(function_index),
            _ => {}
        }
    }
    (tail, calls)
}

/// A recursive function without loops checks the flag at entry under every placement,
/// where a direct callee otherwise has no entry check, and instrumented copies call it at
/// `F`, so that a burst ends at the recursion's next call; other direct callees are
/// called at their instrumented copy.
#[test]
fn recursion_checks_at_entry_and_is_called_at_f() {
    let wat = r#"(module
      (func $fib (param i32) (result i32)
        (if (result i32) (i32.lt_u (local.get 0) (i32.const 2))
          (then (local.get 0))
          (else (i32.add (call $fib (i32.sub (local.get 0) (i32.const 1)))
                         (call $leaf (local.get 0))))))
      (func $leaf (param i32) (result i32)
        (if (result i32) (local.get 0) (then (i32.const 1)) (else (i32.const 2))))
      (func $walk (param i32)
        (loop (br_if 0 (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
        (if (local.get 0) (then (call $walk (i32.const 0)))))
      (func (export "_start") (drop (call $fib (i32.const 9))) (call $walk (i32.const 3))))"#;
    for placement in [SwitchPlacement::Outer, SwitchPlacement::Deep] {
        let i = switched(wat, placement);
        let (fib_inst, _) = i.plan.functions[0].copies.unwrap();
        let (leaf_inst, _) = i.plan.functions[1].copies.unwrap();
        let (fib_tail, _) = targets_of(&i.wasm, 0);
        let (leaf_tail, _) = targets_of(&i.wasm, 1);
        let (_, inst_calls) = targets_of(&i.wasm, fib_inst);
        let label = format!("{placement:?}");
        assert!(fib_tail.contains(&fib_inst), "fib's entry check: {label}");
        assert!(!leaf_tail.contains(&leaf_inst), "leaf has none: {label}");
        assert!(inst_calls.contains(&0), "{label}: {inst_calls:?}");
        assert!(!inst_calls.contains(&fib_inst), "{label}");
        assert!(inst_calls.contains(&leaf_inst), "{label}: {inst_calls:?}");
        // A recursion with an outermost loop meets that loop's check: no entry check, and
        // instrumented copies call its instrumented copy.
        let (walk_inst, _) = i.plan.functions[2].copies.unwrap();
        let (walk_tail, _) = targets_of(&i.wasm, 2);
        let (_, walk_calls) = targets_of(&i.wasm, walk_inst);
        let into_inst = walk_tail.iter().filter(|&&t| t == walk_inst).count();
        assert_eq!(
            into_inst, 1,
            "{label}: the loop's check alone: {walk_tail:?}"
        );
        assert!(walk_calls.contains(&walk_inst), "{label}: {walk_calls:?}");
    }
}

/// A check that only enters `F_inst` is placed at every loop nest the placement wants,
/// however many values it hands over (parameters and live locals): a nest without one is
/// a hot loop that a frame entered in clean code never leaves for its instrumented copy.
#[test]
fn enter_only_checks_hand_over_any_number_of_values() {
    // `f`'s inner nest (behind ten blocks: enter-only under `Nests` and `Deep`) reads
    // `n` locals; its outermost loop reads them all too.
    let body = |n: usize| {
        let sum: String = (0..n)
            .map(|x| {
                format!(
                    "(local.set 1 (i32.add (local.get 1) (local.get {})))",
                    x + 2
                )
            })
            .collect();
        format!(
            r#"(module (func (export "f") (param i32) (local i32) {locals}
                 (loop {blocks}(loop (loop {sum} (br_if 0 (local.get 0))) (br_if 0 (local.get 0))){ends}
                   (br_if 0 (local.get 1)))))"#,
            locals = "(local i32)".repeat(n),
            blocks = "(block ".repeat(10),
            ends = ")".repeat(10),
        )
    };
    let deep_loop = include_str!("../../../../tests/fixtures/deep_loop.wat");
    for placement in [SwitchPlacement::Nests, SwitchPlacement::Deep] {
        // 1 parameter + `n` locals + the running sum: up to 34 values.
        for n in [3, 8, 15, 32] {
            let i = switched_with(&body(n), placement, |_| ());
            let f = &i.plan.functions[0];
            assert!(
                f.resume.is_some(),
                "{placement:?}, {n} locals: the nest lost its check (F_resume only with one)"
            );
            assert!(f.copies.is_some(), "the outermost loop keeps its check");
        }
        // `deep_loop.wat`'s nest, which the `sampled` test must reach, keeps its check.
        let i = switched_with(deep_loop, placement, |_| ());
        let deep = (i.plan.functions.iter()).find(|f| f.name.as_deref() == Some("deep"));
        assert!(
            deep.is_some_and(|f| f.resume.is_some()),
            "{placement:?}: deep_loop.wat's nest lost its check"
        );
    }
}

#[test]
fn ephemeral_copies_count_edges_with_entries_and_leaves_per_loop() {
    let wat = r#"(module (func (export "f") (param i32)
          (block
            (block
              (loop                      ;; outer, behind two blocks
                (loop                    ;; inner, right at the outer's start
                  (br_if 0 (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
                (br_if 1 (i32.eqz (local.get 0)))
                (br 0))))))"#;
    let i = switched_with(wat, SwitchPlacement::All, |o| {
        o.mode = pepper_profile::Mode::Ephemeral;
    });
    let fp = &i.plan.functions[0];
    let a = fp.analysis.as_ref().unwrap();
    assert!(fp.numbered.is_none() && fp.edge_counting.is_some());
    // One pair of counters per checked loop, at its header; the way in runs the entry
    // edge of each loop on it.
    let mut loops = a.loops.clone();
    loops.sort();
    assert_eq!(fp.switch_counts.len(), 2, "{:?}", fp.switch_counts);
    for (s, (depth, &(header, _))) in fp.switch_counts.iter().zip(loops.iter().enumerate()) {
        assert_eq!(s.header, header);
        let entries: Vec<_> = loops[..=depth].iter().map(|l| l.1).collect();
        assert_eq!(s.way_in, entries);
        assert_eq!(s.left, s.entered + 8);
    }
}
