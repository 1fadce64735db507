//! Turning a WASI preview-1 command module into a `wasi:cli/command` component, as a user
//! would with `wasm-tools component new --adapt`: wit-component with the preview-1
//! command adapter that wasmtime ships. Used by the `componentize` tool and by the tests.
//!
//! The adapter keeps its state in the program's memory, allocated through the program's
//! `cabi_realloc` export or, without one, with `memory.grow`. Older wasi-libc builds (the
//! bench workloads use Debian's) export none and hand all memory up to the current size to
//! `malloc` when it first runs, which then overwrites the adapter's pages (the adapter
//! traps on its canary). Newer wasi-libc exports `cabi_realloc` itself; for modules
//! without it, [`componentize`] exports one that calls the program's own `malloc` (found
//! by name), which is what those toolchains do.

use anyhow::Result;
use wasm_encoder::reencode::{utils, Reencode};

/// `core` as a component: the program (with a `cabi_realloc`) and the command adapter.
pub fn componentize(core: &[u8]) -> Result<Vec<u8>> {
    let core = with_cabi_realloc(core)?;
    wit_component::ComponentEncoder::default()
        .module(&core)?
        .adapter(
            "wasi_snapshot_preview1",
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
        )?
        .validate(true)
        .encode()
}

/// `core` with a `cabi_realloc` export calling its `malloc`, unless it has one already
/// or has no function named `malloc`.
fn with_cabi_realloc(core: &[u8]) -> Result<Vec<u8>> {
    let mut malloc = None;
    let (mut types, mut imported, mut defined) = (0u32, 0u32, 0u32);
    for payload in wasmparser::Parser::new(0).parse_all(core) {
        match payload? {
            wasmparser::Payload::ExportSection(s) => {
                for e in s {
                    if e?.name == "cabi_realloc" {
                        return Ok(core.to_vec());
                    }
                }
            }
            wasmparser::Payload::TypeSection(s) => types = s.count(),
            wasmparser::Payload::ImportSection(s) => {
                for i in s.into_imports() {
                    imported += matches!(i?.ty, wasmparser::TypeRef::Func(_)) as u32;
                }
            }
            wasmparser::Payload::FunctionSection(s) => defined = s.count(),
            wasmparser::Payload::CustomSection(c) => {
                if let wasmparser::KnownCustom::Name(names) = c.as_known() {
                    for n in names {
                        if let Ok(wasmparser::Name::Function(map)) = n {
                            for f in map.into_iter().flatten() {
                                if f.name == "malloc" {
                                    malloc = Some(f.index);
                                }
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let Some(malloc) = malloc else {
        return Ok(core.to_vec());
    };
    let mut module = wasm_encoder::Module::new();
    let mut adder = AddRealloc {
        malloc,
        ty: types,
        index: imported + defined,
    };
    adder
        .parse_core_module(&mut module, wasmparser::Parser::new(0), core)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(module.finish())
}

/// Appends the type, the function and the export of `cabi_realloc`.
struct AddRealloc {
    malloc: u32,
    /// The new type's index and the new function's.
    ty: u32,
    index: u32,
}

impl Reencode for AddRealloc {
    type Error = std::convert::Infallible;

    fn parse_type_section(
        &mut self,
        types: &mut wasm_encoder::TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_type_section(self, types, section)?;
        use wasm_encoder::ValType::I32;
        types.ty().function([I32, I32, I32, I32], [I32]);
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut wasm_encoder::FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_function_section(self, functions, section)?;
        functions.function(self.ty);
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut wasm_encoder::ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        exports.export("cabi_realloc", wasm_encoder::ExportKind::Func, self.index);
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_code_section(self, code, section)?;
        // cabi_realloc(old, old_size, align, new_size) = malloc(new_size): the adapter
        // only allocates (old is null; anything else traps), and malloc aligns to 16
        // bytes, more than the adapter asks for.
        let mut f = wasm_encoder::Function::new([]);
        f.instructions()
            .local_get(0)
            .if_(wasm_encoder::BlockType::Empty)
            .unreachable()
            .end()
            .local_get(3)
            .call(self.malloc)
            .end();
        code.function(&f);
        Ok(())
    }
}
