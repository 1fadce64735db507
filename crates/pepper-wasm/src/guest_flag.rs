//! Where the switch's module-wide flag (PEP's bursts, ephemeral windows) can live in the
//! program's own memory.
//!
//! A check reads one flag word. In pepper's memory, its base address is one more value
//! the program's loops keep in a register (Cranelift loads it once per call), and that
//! is most of what the clean code costs (bench/results/analysis.md: checks reading the
//! program's memory 0 instead cost -0.4% geomean against +2.0%, zstd +2.4% against
//! +6.4%). The program's memory 0 has its base live anyway, but a word there is only
//! pepper's if no correct program touches it: here, address 0 of a module laid out by
//! LLVM's `wasm-ld`, which leaves the first bytes to the null page, or to the bottom of a
//! stack placed first (reached only by a stack at its very last bytes). The module must
//! show that layout: its memory 0 defined by itself, 32-bit, not shared and at least a
//! page from the start (the runtime may set the flag before the program runs); a
//! mutable i32 global named `__stack_pointer` (LLVM's stack pointer, named in the name
//! section); no data segment that writes the word, and no passive ones (`memory.init`
//! writes where the program says). Anything else keeps the flag in pepper's memory.

use wasmparser::{DataKind, Name, Operator, Parser, Payload, TypeRef};

/// The flag's address in memory 0.
pub const GUEST_FLAG_ADDRESS: u32 = 0;

/// Whether `wasm`'s memory 0 can hold the switch's flag at [`GUEST_FLAG_ADDRESS`].
pub fn guest_flag_fits(wasm: &[u8]) -> bool {
    let (mut own_memory, mut stack_pointer, mut segments_clear) = (false, None, true);
    let mut mutable_i32_globals = std::collections::HashSet::new();
    let mut imported_globals = 0u32;
    for payload in Parser::new(0).parse_all(wasm) {
        let Ok(payload) = payload else {
            return false;
        };
        match payload {
            Payload::ImportSection(r) => {
                for import in r.into_imports() {
                    match import.map(|i| i.ty) {
                        Ok(TypeRef::Memory(_)) | Err(_) => return false,
                        Ok(TypeRef::Global(_)) => imported_globals += 1,
                        Ok(_) => {}
                    }
                }
            }
            Payload::MemorySection(r) => {
                let Some(Ok(m)) = r.into_iter().next() else {
                    return false;
                };
                // At least a page from the start: the word exists before the program runs.
                own_memory = !m.memory64 && !m.shared && m.initial >= 1;
            }
            Payload::GlobalSection(r) => {
                for (k, g) in r.into_iter().enumerate() {
                    let Ok(g) = g else {
                        return false;
                    };
                    if g.ty.mutable && g.ty.content_type == wasmparser::ValType::I32 {
                        mutable_i32_globals.insert(imported_globals + k as u32);
                    }
                }
            }
            Payload::DataSection(r) => {
                for d in r {
                    let Ok(d) = d else {
                        return false;
                    };
                    segments_clear &= match d.kind {
                        DataKind::Passive => false,
                        DataKind::Active {
                            memory_index,
                            offset_expr,
                        } => memory_index != 0 || clear_of_flag(offset_expr, d.data.len()),
                    };
                }
            }
            Payload::CustomSection(c) => {
                if let wasmparser::KnownCustom::Name(names) = c.as_known() {
                    for section in names.into_iter().flatten() {
                        if let Name::Global(map) = section {
                            for naming in map.into_iter().flatten() {
                                if naming.name == "__stack_pointer" {
                                    stack_pointer = Some(naming.index);
                                }
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    own_memory && segments_clear && stack_pointer.is_some_and(|g| mutable_i32_globals.contains(&g))
}

/// Whether an active segment at `offset` with `len` bytes leaves the flag word alone.
fn clear_of_flag(offset: wasmparser::ConstExpr<'_>, len: usize) -> bool {
    let mut ops = offset.get_operators_reader();
    match (ops.read(), ops.read()) {
        (Ok(Operator::I32Const { value }), Ok(Operator::End)) => {
            let start = value as u32 as u64;
            let end = start + len as u64;
            let flag = GUEST_FLAG_ADDRESS as u64;
            len == 0 || end <= flag || start >= flag + 4
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fits(wat: &str) -> bool {
        guest_flag_fits(&wat::parse_str(wat).unwrap())
    }

    const LLVM: &str = r#"(module
        (memory 2)
        (global $__stack_pointer (mut i32) (i32.const 65536))
        (data (i32.const 1024) "hello"))"#;

    /// LLVM's layout fits; each thing that shows another layout, or a program that may
    /// write the word, keeps the flag in pepper's memory.
    #[test]
    fn only_llvm_layouts_with_the_word_free_fit() {
        assert!(fits(LLVM));
        // No stack pointer global by that name.
        assert!(!fits(
            r#"(module (memory 1) (global $sp (mut i32) (i32.const 0)))"#
        ));
        // A data segment over the word.
        assert!(!fits(&LLVM.replace("i32.const 1024", "i32.const 2")));
        // A passive segment: `memory.init` may write anywhere.
        assert!(!fits(&LLVM.replace("(data (i32.const 1024)", "(data")));
        // An imported memory, which others may use.
        assert!(!fits(
            r#"(module (import "env" "memory" (memory 1))
                 (global $__stack_pointer (mut i32) (i32.const 0)))"#
        ));
        // A 64-bit memory, and one with no page until the program grows it.
        assert!(!fits(&LLVM.replace("(memory 2)", "(memory i64 2)")));
        assert!(!fits(&LLVM.replace("(memory 2)", "(memory 0)")));
        // An immutable global of that name is not a stack pointer.
        assert!(!fits(&LLVM.replace("(mut i32)", "i32")));
    }
}
