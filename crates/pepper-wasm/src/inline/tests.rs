use super::*;

const WAT: &str = r#"(module
  (type $two (func (result i32 i32)))
  (func $small (param i32) (result i32) (local i64)
    local.get 0
    if (result i32)
      local.get 0
      return
    else
      i32.const 7
    end)
  (func $pair (param i32) (result i32 i32)
    local.get 0
    local.get 0)
  (func $tail (param i32) (result i32)
    local.get 0
    return_call $small)
  (func $main (param i32) (result i32)
    local.get 0
    call $small
    local.get 0
    br_if 0
    drop
    local.get 0
    call $pair
    i32.add
    local.get 0
    call $tail
    i32.add
    local.get 0
    call $main
    i32.add))"#;

/// Every direct call of `wasm`, each as a site that made `calls` calls.
fn sites(wasm: &[u8], calls: u64) -> Vec<CallSite> {
    let mut out = Vec::new();
    for (func, body) in defined_bodies(wasm).unwrap() {
        for s in crate::module::call_sites(func, &body).unwrap() {
            if let (Some(callee), 0x10) = (s.callee, wasm[s.offset as usize]) {
                out.push(CallSite {
                    id: out.len() as u32,
                    func,
                    offset: s.offset,
                    callee: Some(callee),
                    sig: None,
                    calls,
                    location: None,
                });
            }
        }
    }
    out
}

/// `func`'s direct calls, by callee.
fn calls_in(wasm: &[u8], func: u32) -> Vec<u32> {
    sites(wasm, 1)
        .into_iter()
        .filter(|s| s.func == func)
        .filter_map(|s| s.callee)
        .collect()
}

fn valid(wasm: &[u8]) {
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(wasm)
        .unwrap();
}

#[test]
fn hot_sites_are_inlined_and_what_cannot_be_is_counted() {
    let wasm = wat::parse_str(WAT).unwrap();
    let (out, _, summary) =
        inline(&wasm, &sites(&wasm, 5000), &[], &InlineOptions::default()).unwrap();
    valid(&out);
    // small and pair inlined; tail's body has a tail call, main is main.
    assert_eq!(summary.inlined, 2);
    assert_eq!(summary.unsupported, 2);
    assert_eq!(summary.inlined_calls, 10_000);
    assert_eq!(calls_in(&out, 3), [2, 3]);
    assert!(summary.code_bytes.1 > summary.code_bytes.0);
    // Below the thresholds nothing changes.
    let (same, _, summary) =
        inline(&wasm, &sites(&wasm, 999), &[], &InlineOptions::default()).unwrap();
    assert_eq!(summary.inlined, 0);
    assert_eq!(same, wasm);
}

#[test]
fn callees_over_the_size_limit_stay_calls() {
    let wasm = wat::parse_str(WAT).unwrap();
    let pair = span(&defined_bodies(&wasm).unwrap()[1].1).len();
    let tiny = InlineOptions {
        max_callee_bytes: pair,
        ..Default::default()
    };
    let (out, _, summary) = inline(&wasm, &sites(&wasm, 5000), &[], &tiny).unwrap();
    // pair inlined; small and main too big; tail (as small as pair) unsupported.
    assert_eq!(
        (summary.inlined, summary.too_big, summary.unsupported),
        (1, 2, 1),
        "{summary:?}"
    );
    assert_eq!(calls_in(&out, 3), [0, 2, 3]);
}

#[test]
fn a_chain_of_calls_goes_away_at_once_and_cycles_end() {
    let wasm = wat::parse_str(
        r#"(module
          (func $c (param i32) (result i32) local.get 0 i32.const 1 i32.add)
          (func $b (param i32) (result i32) local.get 0 call $c call $c)
          (func $a (param i32) (result i32) local.get 0 call $b)
          (func $f (param i32) (result i32)
            local.get 0
            if (result i32) local.get 0 i32.const 1 i32.sub call $g else i32.const 0 end)
          (func $g (param i32) (result i32) local.get 0 call $f))"#,
    )
    .unwrap();
    let (out, _, summary) =
        inline(&wasm, &sites(&wasm, 5000), &[], &InlineOptions::default()).unwrap();
    valid(&out);
    assert_eq!(summary.inlined, 5);
    // a holds b's body, which holds c's twice: no call left.
    assert_eq!(calls_in(&out, 2), [] as [u32; 0]);
    assert_eq!(calls_in(&out, 1), [] as [u32; 0]);
    // f and g call each other: one of them keeps a call (to itself now).
    let left = calls_in(&out, 3).len() + calls_in(&out, 4).len();
    assert!((1..=2).contains(&left), "{left}");
}

#[test]
fn a_caller_never_gets_more_locals_than_engines_accept() {
    let wasm = wat::parse_str(format!(
        r#"(module
          (func $many (local {}))
          (func call $many call $many))"#,
        "i32 ".repeat(30_000)
    ))
    .unwrap();
    let unbounded = InlineOptions {
        max_growth: f64::INFINITY,
        ..Default::default()
    };
    let (out, _, summary) = inline(&wasm, &sites(&wasm, 5000), &[], &unbounded).unwrap();
    valid(&out);
    assert_eq!((summary.inlined, summary.over_budget), (1, 1));
}

#[test]
fn several_results_need_a_block_type_the_module_has() {
    let without = WAT.replace("(type $two (func (result i32 i32)))", "");
    let wasm = wat::parse_str(&without).unwrap();
    let (out, _, summary) =
        inline(&wasm, &sites(&wasm, 5000), &[], &InlineOptions::default()).unwrap();
    valid(&out);
    assert_eq!(summary.inlined, 1);
    assert_eq!(calls_in(&out, 3), [1, 2, 3], "pair stays a call");
}

#[test]
fn hints_move_and_callees_hints_are_copied() {
    let wasm = wat::parse_str(WAT).unwrap();
    let starts = crate::hints::tests::branches(&wasm);
    let body = |f: u32| defined_bodies(&wasm).unwrap()[f as usize].1.range().start;
    let hints: Vec<Hint> = starts
        .iter()
        .map(|&(func, at, _)| Hint {
            func,
            offset: (at - body(func)) as u32,
            likely: func == 0,
        })
        .collect();
    // small's `if` and main's `br_if`.
    assert_eq!(hints.len(), 2);
    let (out, moved, _) = inline(
        &wasm,
        &sites(&wasm, 5000),
        &hints,
        &InlineOptions::default(),
    )
    .unwrap();
    assert_eq!(moved.len(), 3, "small's hint copied into main: {moved:?}");
    let written = crate::hints::write(&out, &moved).unwrap();
    let read = crate::hints::read(&written).unwrap();
    assert_eq!(read, moved);
    // main holds small's if (likely) before its own br_if (unlikely).
    let main: Vec<bool> = read
        .iter()
        .filter(|h| h.func == 3)
        .map(|h| h.likely)
        .collect();
    assert_eq!(main, [true, false]);
}

#[test]
fn a_site_outside_its_function_is_refused_and_dwarf_is_dropped() {
    let mut wasm = wat::parse_str(WAT).unwrap();
    wasm.extend([0, 15, 11]);
    wasm.extend(b".debug_line");
    wasm.extend([1, 2, 3]);
    let mut wrong = sites(&wasm, 5000);
    wrong[0].func = 0;
    let err = inline(&wasm, &wrong, &[], &InlineOptions::default()).unwrap_err();
    assert!(err.to_string().contains("not one in this module"), "{err}");
    let (out, _, summary) =
        inline(&wasm, &sites(&wasm, 5000), &[], &InlineOptions::default()).unwrap();
    assert_eq!(summary.dropped_debug, 1);
    assert!(!out.windows(11).any(|w| w == b".debug_line"));
}
