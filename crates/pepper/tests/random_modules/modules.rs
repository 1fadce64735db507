//! Random modules for `random_modules.rs`: wasm-smith's modules from a seed, and running
//! an original or instrumented module's exports while recording what they do.

use super::*;

/// Fuel of each exported call (wasm-smith's `ensure_termination`: one unit per loop
/// iteration and function entry; a call that runs out traps), small enough that recursion
/// stays far from the stack limit.
pub const FUEL: u32 = 1000;

/// SplitMix64: the generator's input bytes, reproducible from the seed alone.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    // Start each seed's stream at an unrelated point of the sequence (not one step on).
    let mut x = mix(seed ^ 0x5DEE_CE66_D1CE_5EED);
    (0..len)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            mix(x) as u8
        })
        .collect()
}

/// A random module with no imports whose fuel global is exported as `fuel`, or `None`
/// when the generator gives up on this seed.
pub fn random_module(seed: u64) -> Option<Vec<u8>> {
    let data = bytes(seed, 32 << 10);
    let mut u = arbitrary::Unstructured::new(&data);
    let config = wasm_smith::Config {
        max_imports: 0,
        min_funcs: 4,
        max_funcs: 10,
        max_instructions: 200,
        min_exports: 1,
        export_everything: true,
        max_memories: 2,
        max_memory32_bytes: 4 << 16,
        max_memory64_bytes: 4 << 16,
        max_tables: 2,
        max_table_elements: 64,
        max_data_segments: 4,
        max_element_segments: 4,
        canonicalize_nans: true,
        // Three modules in four cannot trap (addresses masked, divisors non-zero, ...)
        // except by running out of fuel, so their calls run deep; the fourth traps freely.
        disallow_traps: seed % 4 != 3,
        // Functions with `try_table` or GC branches are left uninstrumented (with a
        // warning): only the trapping modules have those proposals, so that the others
        // instrument every function.
        exceptions_enabled: seed % 4 == 3,
        gc_enabled: seed % 4 == 3,
        relaxed_simd_enabled: false,
        threads_enabled: false,
        shared_everything_threads_enabled: false,
        wide_arithmetic_enabled: false,
        allow_start_export: false,
        ..Default::default()
    };
    let mut m = wasm_smith::Module::new(config, &mut u).ok()?;
    let fuel = m.ensure_termination(FUEL).ok()?;
    // wasm-smith nests few blocks around its loops and few loops in loops (one nest past
    // `shallow`'s detour limit in 400 seeds), so a quarter of the non-trapping modules get
    // every loop wrapped in a loop that runs once, behind 3 blocks (past `shallow`'s
    // limit) or 9 (past `deep`'s), where the switch's checks only enter the instrumented
    // copy.
    //
    // Another quarter read and write the low addresses of their memory 0 at every
    // function entry, the way a C global at address 0 or a null pointer does: a word of
    // pepper's placed there (as its switch flag once was) changes what they compute.
    let wasm = match seed % 8 {
        1 => wrap_loops(&m.to_bytes(), 3),
        5 => wrap_loops(&m.to_bytes(), 9),
        2 | 6 => with_low_address_traffic(&m.to_bytes()),
        _ => m.to_bytes(),
    };
    // Every other module keeps only some of its function exports, so that exact edges
    // can take the others' entry counts from their callers.
    let keep = |_: &str, kind, index: u32| {
        kind != wasmparser::ExternalKind::Func
            || seed.is_multiple_of(2)
            || index == 0
            || bytes(seed ^ index as u64, 1)[0].is_multiple_of(2)
    };
    Some(with_exports(&wasm, keep, fuel))
}

/// `wasm` with every `loop` inside a loop that runs once, inside `n` blocks, all of the
/// loop's own type (branches renumbered), or unchanged if the result does not validate.
/// Only for modules without exception handling or GC branches, whose labels this does
/// not renumber.
fn wrap_loops(wasm: &[u8], n: usize) -> Vec<u8> {
    use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
    use wasm_encoder::Instruction as I;
    use wasmparser::Operator as O;

    struct Wrap(usize);
    impl Reencode for Wrap {
        type Error = std::convert::Infallible;
        fn parse_function_body(
            &mut self,
            code: &mut wasm_encoder::CodeSection,
            func: wasmparser::FunctionBody<'_>,
        ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
            let mut f = self.new_function_with_parsed_locals(&func)?;
            // Per open construct as written, innermost last: how many added constructs
            // (a loop's blocks and the loop around it) close right after it.
            let mut open: Vec<usize> = Vec::new();
            // Label `d` as written is the `d`-th open construct from the innermost; the
            // wrappers of the `d` constructs inside it lie between.
            let depth = |open: &[usize], d: u32| {
                d + open.iter().rev().take(d as usize).sum::<usize>() as u32
            };
            let mut reader = func.get_operators_reader()?;
            while !reader.eof() {
                let op = reader.read()?;
                match &op {
                    O::Loop { blockty } => {
                        let bt = self.block_type(*blockty)?;
                        for _ in 0..self.0 {
                            f.instruction(&I::Block(bt));
                        }
                        // A loop that runs once around it: a nest behind the blocks.
                        f.instruction(&I::Loop(bt));
                        f.instruction(&I::Loop(bt));
                        open.push(self.0 + 1);
                    }
                    O::Block { .. } | O::If { .. } => {
                        f.instruction(&RoundtripReencoder.instruction(op.clone())?);
                        open.push(0);
                    }
                    O::End => {
                        f.instruction(&I::End);
                        for _ in 0..open.pop().unwrap_or(0) {
                            f.instruction(&I::End);
                        }
                    }
                    O::Br { relative_depth } => {
                        f.instruction(&I::Br(depth(&open, *relative_depth)));
                    }
                    O::BrIf { relative_depth } => {
                        f.instruction(&I::BrIf(depth(&open, *relative_depth)));
                    }
                    O::BrTable { targets } => {
                        let t: Vec<u32> = (targets.targets())
                            .map(|t| depth(&open, t.unwrap()))
                            .collect();
                        let default = depth(&open, targets.default());
                        f.instruction(&I::BrTable(t.into(), default));
                    }
                    _ => {
                        f.instruction(&RoundtripReencoder.instruction(op.clone())?);
                    }
                }
            }
            code.function(&f);
            Ok(())
        }
    }
    let mut module = wasm_encoder::Module::new();
    let wrapped = Wrap(n)
        .parse_core_module(&mut module, wasmparser::Parser::new(0), wasm)
        .map(|()| module.finish());
    match wrapped {
        Ok(w) if wasmparser::validate(&w).is_ok() => w,
        _ => wasm.to_vec(),
    }
}

/// `wasm` with every function starting by adding one to the word at address 0 of memory
/// 0 and to the byte at address 1, or unchanged where memory 0 has no page to start with
/// (every call would trap) or the result does not validate.
pub fn with_low_address_traffic(wasm: &[u8]) -> Vec<u8> {
    use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
    use wasm_encoder::{Instruction as I, MemArg};

    let memory0 = wasmparser::Parser::new(0)
        .parse_all(wasm)
        .find_map(|p| match p {
            Ok(wasmparser::Payload::MemorySection(r)) => r.into_iter().next()?.ok(),
            _ => None,
        });
    let Some(memory0) = memory0.filter(|m| m.initial >= 1) else {
        return wasm.to_vec();
    };
    struct Touch(bool);
    impl Touch {
        fn address(&self, f: &mut wasm_encoder::Function, at: i64) {
            match self.0 {
                true => f.instruction(&I::I64Const(at)),
                false => f.instruction(&I::I32Const(at as i32)),
            };
        }
    }
    impl Reencode for Touch {
        type Error = std::convert::Infallible;
        fn parse_function_body(
            &mut self,
            code: &mut wasm_encoder::CodeSection,
            func: wasmparser::FunctionBody<'_>,
        ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
            let mut f = self.new_function_with_parsed_locals(&func)?;
            let word = MemArg {
                offset: 0,
                align: 2,
                target: wasm_encoder::MemArgTarget::Memory(0),
                ordering: None,
            };
            let byte = MemArg { align: 0, ..word };
            self.address(&mut f, 0);
            self.address(&mut f, 0);
            f.instruction(&I::I32Load(word));
            f.instruction(&I::I32Const(1));
            f.instruction(&I::I32Add);
            f.instruction(&I::I32Store(word));
            self.address(&mut f, 1);
            self.address(&mut f, 1);
            f.instruction(&I::I32Load8U(byte));
            f.instruction(&I::I32Const(1));
            f.instruction(&I::I32Add);
            f.instruction(&I::I32Store8(byte));
            let mut reader = func.get_operators_reader()?;
            while !reader.eof() {
                f.instruction(&RoundtripReencoder.instruction(reader.read()?)?);
            }
            code.function(&f);
            Ok(())
        }
    }
    let mut module = wasm_encoder::Module::new();
    let touched = Touch(memory0.memory64)
        .parse_core_module(&mut module, wasmparser::Parser::new(0), wasm)
        .map(|()| module.finish());
    match touched {
        Ok(w) if wasmparser::validate(&w).is_ok() => w,
        _ => wasm.to_vec(),
    }
}

/// `wasm` with only the exports `keep` accepts, plus its global `fuel` exported as `fuel`.
pub fn with_exports(
    wasm: &[u8],
    keep: impl Fn(&str, wasmparser::ExternalKind, u32) -> bool,
    fuel: u32,
) -> Vec<u8> {
    use wasm_encoder::{Encode, Section};
    let mut out = wasm[..8].to_vec();
    let mut exports = wasm_encoder::ExportSection::new();
    let mut done = false;
    for p in wasmparser::Parser::new(0).parse_all(wasm) {
        let p = p.expect("wasm-smith output parses");
        let Some((id, range)) = p.as_section() else {
            continue;
        };
        if let wasmparser::Payload::ExportSection(s) = &p {
            for e in s.clone().into_iter().map(Result::unwrap) {
                if keep(e.name, e.kind, e.index) {
                    exports.export(e.name, e.kind.into(), e.index);
                }
            }
            continue;
        }
        // Sections after exports in the binary order (start, element, data count, code,
        // data): the export section goes before the first of them.
        if !done && matches!(id, 8..=12) {
            exports.export("fuel", wasm_encoder::ExportKind::Global, fuel);
            out.push(exports.id());
            exports.encode(&mut out);
            done = true;
        }
        let body = &wasm[range.start as usize..range.end as usize];
        out.push(id);
        body.len().encode(&mut out);
        out.extend_from_slice(body);
    }
    if !done {
        exports.export("fuel", wasm_encoder::ExportKind::Global, fuel);
        out.push(exports.id());
        exports.encode(&mut out);
    }
    out
}

pub fn exports(wasm: &[u8]) -> Vec<(String, wasmparser::ExternalKind, u32)> {
    let mut out = Vec::new();
    for p in wasmparser::Parser::new(0).parse_all(wasm) {
        if let Ok(wasmparser::Payload::ExportSection(s)) = p {
            for e in s.into_iter().flatten() {
                out.push((e.name.to_string(), e.kind, e.index));
            }
        }
    }
    out
}

/// What one exported call did, in terms two different compilations must agree on.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Returned(Vec<String>),
    Trapped(String),
    /// An error that is not a trap (an uncaught exception): its kind only.
    Failed,
}

/// A value by its bits (floats included: NaNs are canonicalized by the generator); a
/// reference by its null-ness (identities differ between instances).
pub fn show(v: &Val) -> String {
    match v {
        Val::I32(x) => format!("i32 {x}"),
        Val::I64(x) => format!("i64 {x}"),
        Val::F32(x) => format!("f32 {x:#x}"),
        Val::F64(x) => format!("f64 {x:#x}"),
        Val::V128(x) => format!("v128 {:#x}", x.as_u128()),
        Val::FuncRef(f) => format!("funcref null={}", f.is_none()),
        Val::ExternRef(r) => format!("externref null={}", r.is_none()),
        Val::AnyRef(r) => format!("anyref null={}", r.is_none()),
        Val::ExnRef(r) => format!("exnref null={}", r.is_none()),
        Val::ContRef(r) => format!("contref null={}", r.is_none()),
    }
}

/// The zero of a parameter type, or `None` for a non-nullable reference (such functions
/// are not called).
pub fn zero(t: &ValType) -> Option<Val> {
    match t {
        ValType::Ref(r) if !r.is_nullable() => None,
        _ => Val::default_for_ty(t),
    }
}

/// Everything a call leaves behind that the program's own exports show.
#[derive(Debug, PartialEq, Eq)]
pub struct Observed {
    pub outcome: Outcome,
    pub state: Vec<String>,
}

/// Asserts that a rewritten module behaved as the original: every call alike, except that
/// from the first call that overflowed the original's stack on, only that overflow must
/// repeat. Instrumented frames are larger, so the overflow comes at a shallower depth, and
/// what the program wrote on the way down (its fuel global, memory) differs. A rewritten
/// module that overflows where the original did not still fails.
pub fn assert_same(got: &[Observed], original: &[Observed], what: &str) {
    let overflow = Outcome::Trapped("StackOverflow".to_string());
    match original.iter().position(|o| o.outcome == overflow) {
        Some(k) if got.len() == original.len() => {
            assert_eq!(got[..k], original[..k], "{what}: behaviour changed");
            assert_eq!(got[k].outcome, overflow, "{what}: no stack overflow");
        }
        _ => assert_eq!(got, original, "{what}: behaviour changed"),
    }
}

/// Instantiates `wasm` and calls each of `funcs` in turn (with fresh fuel), observing the original module's exports after each; returns the observations and
/// pepper's counters memory.
pub fn run(
    engine: &Engine,
    wasm: &[u8],
    funcs: &[String],
    observed_exports: &[(String, wasmparser::ExternalKind, u32)],
    switch_on: Option<(u32, u32)>,
) -> Result<(Vec<Observed>, Option<Vec<u8>>), String> {
    let module = Module::new(engine, wasm).map_err(|e| format!("{e:?}"))?;
    // A random module may grow a table by millions of entries at a time; limits make such
    // a grow fail (-1) the same way in the original and the instrumented module, instead
    // of taking minutes. (pepper's own memory is far below the memory limit.)
    let limits = wasmtime::StoreLimitsBuilder::new()
        .table_elements(100_000)
        .memory_size(1 << 30)
        .build();
    let mut store = Store::new(engine, limits);
    store.limiter(|l| l);
    let instance = Instance::new(&mut store, &module, &[]).map_err(|e| format!("{e:?}"))?;
    // (A module without functions is not rewritten and has no counters memory.)
    let counters = instance.get_memory(&mut store, pepper_wasm::COUNTERS_EXPORT);
    // The flag, and the burst's limit after it (0: none).
    if let (Some((at, limit)), Some(m)) = (switch_on, counters) {
        let mut words = 1u32.to_le_bytes().to_vec();
        words.extend(limit.to_le_bytes());
        m.write(&mut store, at as usize, &words)
            .map_err(|e| format!("{e:?}"))?;
    }
    let mut out = Vec::new();
    for name in funcs {
        let fuel = instance
            .get_global(&mut store, "fuel")
            .expect("fuel global");
        fuel.set(&mut store, Val::I32(FUEL as i32))
            .expect("fuel is an i32");
        let f = instance.get_func(&mut store, name).expect("exported func");
        let ty = f.ty(&store);
        let args: Vec<Val> = ty.params().map(|t| zero(&t).unwrap()).collect();
        let mut results: Vec<Val> = ty.results().map(|_| Val::I32(0)).collect();
        let outcome = match f.call(&mut store, &args, &mut results) {
            Ok(()) => Outcome::Returned(results.iter().map(show).collect()),
            Err(e) => match e.downcast_ref::<wasmtime::Trap>() {
                Some(t) => Outcome::Trapped(format!("{t:?}")),
                None => Outcome::Failed,
            },
        };
        let mut state = Vec::new();
        for (export, kind, _) in observed_exports {
            match (kind, instance.get_export(&mut store, export)) {
                (wasmparser::ExternalKind::Memory, Some(Extern::Memory(m))) => {
                    let data = m.data(&store);
                    state.push(format!("{export}: {} bytes, {:x}", data.len(), fnv(data)));
                }
                (wasmparser::ExternalKind::Global, Some(Extern::Global(g))) => {
                    state.push(format!("{export}: {}", show(&g.get(&mut store))));
                }
                (wasmparser::ExternalKind::Table, Some(Extern::Table(t))) => {
                    state.push(format!("{export}: {} elements", t.size(&store)));
                }
                _ => {}
            }
        }
        out.push(Observed { outcome, state });
    }
    let counters = instance
        .get_memory(&mut store, pepper_wasm::COUNTERS_EXPORT)
        .map(|m| m.data(&store).to_vec());
    Ok((out, counters))
}

/// Every direct `call` of `wasm` as a profile's call site that ran once.
pub fn direct_calls(wasm: &[u8]) -> Vec<pepper_profile::CallSite> {
    let facts = pepper_wasm::module::ModuleFacts::parse(wasm).unwrap();
    let mut out = Vec::new();
    for (k, body) in facts.bodies.iter().enumerate() {
        let func = facts.num_imported_funcs + k as u32;
        for s in pepper_wasm::module::call_sites(func, body).unwrap() {
            if let (Some(callee), 0x10) = (s.callee, wasm[s.offset as usize]) {
                out.push(pepper_profile::CallSite {
                    id: out.len() as u32,
                    func,
                    offset: s.offset,
                    callee: Some(callee),
                    sig: None,
                    calls: 1,
                    location: None,
                });
            }
        }
    }
    out
}
