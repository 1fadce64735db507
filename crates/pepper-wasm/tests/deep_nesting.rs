//! Functions of thousands of nested blocks (what a big C `switch` compiles to) are
//! instrumented in code that grows linearly with them, in every mode: twice the cases
//! give at most a little over twice the instrumented code. (How long instrumenting and
//! compiling take is measured by `bench/nesting.sh`, not asserted here.)

use pepper_profile::Mode;
use pepper_wasm::plan::SwitchPlacement;
use pepper_wasm::{ContextMode, InstrumentOptions};

/// A `switch` of `n` cases: a `br_table` into `n` nested blocks, each case returning.
fn switch(n: usize) -> String {
    let mut w = String::from(
        "(module (memory (export \"memory\") 1)\n(func $sw (param i32) (result i32)\n",
    );
    w += &"block\n".repeat(n);
    w += "local.get 0 br_table";
    for i in 0..n {
        w += &format!(" {i}");
    }
    w += &format!(" {}\n", n - 1);
    for i in 0..n {
        w += &format!("end local.get 0 i32.const {} i32.mul return\n", i * 7 + 3);
    }
    w += "unreachable)\n";
    w += &runner(n);
    w
}

/// An `if`-`else if` chain of `n` tests, each leaving `n` nested blocks by a `br_if`.
fn chain(n: usize) -> String {
    let mut w = String::from("(module (memory (export \"memory\") 1)\n(func $sw (param i32) (result i32) (local i32)\nblock\n");
    w += &"block\n".repeat(n);
    for i in 0..n {
        w += &format!(
            "end local.get 0 i32.const {i} i32.eq br_if {} local.get 1 i32.const {i} i32.add local.set 1\n",
            n - 1 - i
        );
    }
    w += "end local.get 1)\n";
    w += &runner(n);
    w
}

/// `_start`: calls `$sw` in a loop over its cases.
fn runner(n: usize) -> String {
    format!(
        "(func (export \"_start\") (local i32 i32)\nloop\n\
         local.get 1 local.get 0 i32.const {n} i32.rem_u call $sw i32.add local.set 1\n\
         local.get 0 i32.const 1 i32.add local.tee 0 i32.const 1000 i32.lt_u br_if 0\nend))"
    )
}

/// Every mode, each as `pepper run` instruments it by default.
fn modes() -> Vec<(&'static str, InstrumentOptions)> {
    let with = |mode: Mode, switch: Option<SwitchPlacement>, windows: bool| {
        let mut o = InstrumentOptions::default();
        o.mode = mode;
        o.switch = switch;
        o.ephemeral_windows = windows;
        o.contexts = ContextMode::Native;
        o
    };
    vec![
        ("pep", with(Mode::Pep, Some(SwitchPlacement::Deep), false)),
        ("pep on the ring", with(Mode::Pep, None, false)),
        ("exact-paths", with(Mode::ExactPaths, None, false)),
        ("exact-edges", with(Mode::ExactEdges, None, false)),
        (
            "ephemeral",
            with(Mode::Ephemeral, Some(SwitchPlacement::Nests), true),
        ),
        ("none", with(Mode::None, None, false)),
    ]
}

fn code_size(wat: &str, opts: &InstrumentOptions) -> usize {
    let wasm = wat::parse_str(wat).expect("valid text");
    let inst = pepper_wasm::instrument(&wasm, opts).expect("instrumented");
    assert!(
        (inst.plan.warnings.iter()).all(|w| !w.contains("internal rewriter error")),
        "{:?}",
        inst.plan.warnings
    );
    assert!(
        (inst.plan.functions.iter()).all(|f| f.skipped.is_none()),
        "every function instrumented"
    );
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&inst.wasm)
        .expect("the instrumented module validates");
    inst.wasm.len()
}

#[test]
fn thousands_of_nested_blocks_grow_the_code_linearly_in_every_mode() {
    for (shape, make) in [("switch", switch as fn(usize) -> String), ("chain", chain)] {
        for (label, opts) in modes() {
            let small = code_size(&make(1000), &opts);
            let large = code_size(&make(2000), &opts);
            let ratio = large as f64 / small as f64;
            assert!(
                (1.5..2.3).contains(&ratio),
                "{shape}, {label}: {small} bytes for 1000 cases, {large} for 2000 ({ratio:.2}x)"
            );
        }
    }
}

/// The best of two timings of instrumenting `wat` with `opts`.
fn instrument_time(wat: &str, opts: &InstrumentOptions) -> std::time::Duration {
    let wasm = wat::parse_str(wat).expect("valid text");
    (0..2)
        .map(|_| {
            let t = std::time::Instant::now();
            pepper_wasm::instrument(&wasm, opts).expect("instrumented");
            t.elapsed()
        })
        .min()
        .expect("two runs")
}

/// Four times the cases take about four times as long to instrument, not sixteen: a
/// search per `br_table` arm, a walk over the open blocks per label, or a recount of a
/// node's edges per derived edge would each make it quadratic. (A complexity check with
/// a wide margin, not a speed claim.)
#[test]
fn instrumenting_thousands_of_nested_blocks_takes_linear_time() {
    for (shape, make) in [("switch", switch as fn(usize) -> String), ("chain", chain)] {
        for (label, opts) in modes() {
            let small = instrument_time(&make(2000), &opts);
            let large = instrument_time(&make(8000), &opts);
            let ratio = large.as_secs_f64() / small.as_secs_f64();
            assert!(
                ratio < 9.0,
                "{shape}, {label}: {small:?} for 2000 cases, {large:?} for 8000 ({ratio:.1}x)"
            );
        }
    }
}
