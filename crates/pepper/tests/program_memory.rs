//! pepper never changes what a program computes: programs that use the low addresses of
//! their memories the way real programs can (a global at address 0, a read through a null
//! pointer, `memory.fill` over it, stores of 0, 1 or any other value, an unexported
//! memory, two memories) print the same output and exit the same way under every mode and
//! every `--switch` placement as without pepper.
//!
//! The programs are generated here from one template: a hot loop that calls a function
//! whose inner loop branches on the word at address 0, behind enough blocks for every
//! placement's checks, and a loop without calls that reads it too. The sum they print
//! depends on every read of that word, so one burst or window that changed it, or one
//! check that read the program's word as pepper's flag, changes the output.

mod common;
use common::*;

/// Outer iterations: long enough for many bursts and a few ephemeral windows.
const N: u32 = 6_000_000;

/// What a program does with address 0 of its memory 0.
#[derive(Clone, Copy, Debug)]
enum Touch {
    /// A zero-initialised global at address 0 (`-Wl,--global-base=0`) set to 1 halfway.
    GlobalAtZero,
    /// Reads through a null pointer, never writes there.
    NullRead,
    /// `memory.fill` of the first bytes with this byte, every 1,024 iterations.
    Fill(u8),
    /// A store of this word, every 1,024 iterations.
    Store(u32),
    /// A data segment that puts 5 there, then stores of 7 and 0 in turn.
    Data,
}

/// Where the program's memory is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Memories {
    /// Memory 0, exported as WASI wants it; the result is printed.
    Exported,
    /// Memory 0 not exported and no WASI call (wasmtime's WASI needs an exported memory):
    /// the program traps if its sum is zero, and otherwise returns.
    Unexported,
    /// Memory 0 not exported, a second memory exported for WASI, where the result is
    /// printed.
    UnexportedWithIo,
    /// Two memories, address 0 of both read and written; the result is printed.
    Two,
}

/// The program's text.
fn program(touch: Touch, memories: Memories) -> String {
    let half = N / 2;
    let every_1024 = |body: &str| {
        format!("(if (i32.eqz (i32.and (local.get $i) (i32.const 1023))) (then {body}))")
    };
    let (data, touch_outer) = match touch {
        Touch::GlobalAtZero => (
            String::new(),
            format!(
                "(if (i32.eq (local.get $i) (i32.const {half})) (then (i32.store (i32.const 0) (i32.const 1))))"
            ),
        ),
        Touch::NullRead => (String::new(), String::new()),
        Touch::Fill(byte) => (
            String::new(),
            every_1024(&format!(
                "(memory.fill (i32.const 0) (i32.const {byte}) (i32.const 8))"
            )),
        ),
        Touch::Store(word) => (
            String::new(),
            every_1024(&format!("(i32.store (i32.const 0) (i32.const {word}))")),
        ),
        Touch::Data => (
            r#"(data (i32.const 0) "\05\00\00\00")"#.to_string(),
            every_1024(
                "(i32.store (i32.const 0) (i32.and (i32.shr_u (local.get $i) (i32.const 10)) (i32.const 7)))",
            ),
        ),
    };
    let export = match memories {
        Memories::Unexported | Memories::UnexportedWithIo => "",
        _ => r#"(export "memory")"#,
    };
    // Where `$print` writes, and the WASI imports and printer (none without I/O).
    let io = match memories {
        Memories::UnexportedWithIo => r#"(memory $io (export "memory") 1)"#,
        _ => "",
    };
    let io_memory = match memories {
        Memories::UnexportedWithIo => "$io",
        _ => "$main",
    };
    let (second, second_touch, second_read) = match memories {
        Memories::Two => (
            "(memory $other 1)",
            every_1024("(i32.store $other (i32.const 0) (local.get $i))"),
            "(local.set $acc (i64.add (local.get $acc) (i64.load32_u $other (i32.const 0))))",
        ),
        _ => ("", String::new(), ""),
    };
    let finish = match memories {
        Memories::Unexported => "(if (i64.eqz (local.get $sum)) (then (unreachable)))",
        _ => "(call $print (local.get $sum))",
    };
    let (imports, printer) = match memories {
        Memories::Unexported => (String::new(), String::new()),
        _ => (
            r#"(import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))"#
                .to_string(),
            format!(
                r#"(func $print (param $v i64)
    (local $p i32)
    (local.set $p (i32.const 2100))
    (i32.store8 {io_memory} (local.get $p) (i32.const 10))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 {io_memory} (local.get $p)
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $v) (i64.const 0))))
    (i32.store {io_memory} (i32.const 2000) (local.get $p))
    (i32.store {io_memory} (i32.const 2004) (i32.sub (i32.const 2101) (local.get $p)))
    (drop (call $fd_write (i32.const 1) (i32.const 2000) (i32.const 1) (i32.const 2008))))"#
            ),
        ),
    };
    format!(
        r#"(module
  {imports}
  (memory $main {export} 1)
  {io}
  {second}
  (global $__stack_pointer (mut i32) (i32.const 65536))
  {data}
  {printer}
  ;; A loop nest behind several blocks, so that every placement checks somewhere.
  (func $step (param $i i32) (result i64)
    (local $j i32) (local $acc i64)
    (block $a (block $b (block $c (block $d
      (loop $inner
        (if (i32.load (i32.const 0))
          (then (local.set $acc (i64.add (local.get $acc) (i64.const 3))))
          (else (local.set $acc (i64.add (local.get $acc) (i64.const 1)))))
        (local.set $acc (i64.add (local.get $acc)
          (i64.extend_i32_u (i32.and (local.get $j) (local.get $i)))))
        {second_read}
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br_if $inner (i32.lt_u (local.get $j) (i32.const 6))))))))
    (local.get $acc))
  (func (export "_start")
    (local $i i32) (local $k i32) (local $sum i64)
    (loop $outer
      {touch_outer}
      {second_touch}
      (local.set $sum (i64.add (local.get $sum) (call $step (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $i) (i32.const {N}))))
    ;; A loop without calls that reads the word as well.
    (loop $spin
      (local.set $sum (i64.add (i64.mul (local.get $sum) (i64.const 3))
        (i64.load32_u (i32.const 0))))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $spin (i32.lt_u (local.get $k) (i32.const {N}))))
    {finish}))
"#
    )
}

/// Every mode and placement pepper runs a program in, as `pepper run` options.
fn variants() -> Vec<Vec<&'static str>> {
    const PLACEMENTS: [&str; 8] = [
        "off", "entries", "outer", "nests", "loops", "shallow", "deep", "all",
    ];
    let mut v: Vec<Vec<&str>> = vec![
        vec!["--mode", "exact-paths"],
        vec!["--mode", "exact-edges"],
        vec!["--mode", "targeted"],
        vec!["--mode", "pep"],
        vec!["--mode", "staged"],
        vec!["--mode", "calls"],
        vec!["--mode", "exact-paths", "--contexts", "on"],
        vec!["--mode", "pep", "--contexts", "off"],
        vec!["--mode", "pep", "--stacks", "shadow"],
        vec!["--mode", "ephemeral"],
        vec!["--mode", "ephemeral", "--persistence", "100"],
    ];
    for p in PLACEMENTS {
        v.push(vec!["--mode", "pep", "--switch", p]);
        // (Ephemeral always switches between copies.)
        if p != "off" {
            v.push(vec!["--mode", "ephemeral", "--switch", p]);
        }
    }
    v
}

/// Runs `wat` without pepper, then in every variant, and asserts the same exit status
/// and output each time.
fn same_under_every_mode(name: &str, wat: &str) {
    let wasm = wat::parse_str(wat).unwrap_or_else(|e| panic!("{name}: {e}"));
    let path = unique_path(format!("{name}.wasm"));
    std::fs::write(&path, wasm).unwrap();
    let p = path.to_str().unwrap();
    let go = |extra: &[&str]| {
        let out = unique_path(format!("{name}.json"));
        let mut args = vec!["run", "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(p);
        let o = pepper(&args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        // pepper itself did its job: an exit status alike because pepper failed the same
        // way every time would prove nothing.
        assert!(
            pepper_profile::Profile::read(std::fs::File::open(&out).unwrap()).is_ok(),
            "{name} under {extra:?}: no profile: {err}"
        );
        assert!(!err.contains("error"), "{name} under {extra:?}: {err}");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            err,
        )
    };
    let (code, stdout, err) = go(&["--mode", "none"]);
    assert_eq!(code, Some(0), "{name} fails without pepper: {err}");
    for extra in variants() {
        let (c, out, e) = go(&extra);
        assert_eq!(
            (c, &out),
            (code, &stdout),
            "{name} under {extra:?} computed something else (stderr: {e})"
        );
    }
}

#[test]
fn a_global_at_address_zero() {
    same_under_every_mode(
        "global_at_zero",
        &program(Touch::GlobalAtZero, Memories::Exported),
    );
}

#[test]
fn a_read_through_a_null_pointer() {
    same_under_every_mode("null_read", &program(Touch::NullRead, Memories::Exported));
}

#[test]
fn memory_fill_over_address_zero() {
    for byte in [0, 1] {
        same_under_every_mode(
            &format!("fill_{byte}"),
            &program(Touch::Fill(byte), Memories::Exported),
        );
    }
}

#[test]
fn stores_of_zero_one_and_other_values() {
    for word in [0, 1, 7] {
        same_under_every_mode(
            &format!("store_{word}"),
            &program(Touch::Store(word), Memories::Exported),
        );
    }
    same_under_every_mode("data_at_zero", &program(Touch::Data, Memories::Exported));
}

#[test]
fn an_unexported_memory() {
    same_under_every_mode(
        "unexported",
        &program(Touch::GlobalAtZero, Memories::Unexported),
    );
    same_under_every_mode(
        "unexported_with_io",
        &program(Touch::GlobalAtZero, Memories::UnexportedWithIo),
    );
}

#[test]
fn two_memories() {
    same_under_every_mode("two_memories", &program(Touch::Store(1), Memories::Two));
}
