//! Copying a module with wasm-encoder's `reencode`, overriding only what pepper changes:
//! instrumented function bodies, plus one memory, one export, its data segments, a few types
//! and pepper's functions appended at the *end* of their index spaces, so no existing index
//! shifts and nothing else in the module needs renumbering.

use crate::module::ModuleFacts;
use crate::plan::{InstrumentError, COUNTERS_EXPORT};
use wasm_encoder::reencode::{utils, Reencode};
use wasm_encoder::{
    CodeSection, ConstExpr, DataSection, ExportKind, ExportSection, Function, FunctionSection,
    GlobalSection, GlobalType, MemorySection, MemoryType, Module, SectionId, TypeSection, ValType,
};

/// What pepper appends to the module.
pub struct Additions {
    pub extra_types: Vec<(Vec<ValType>, Vec<ValType>)>,
    /// Functions appended after the module's own: (type index, body).
    pub functions: Vec<(u32, Function)>,
    pub memory_pages: u64,
    pub memory_index: u32,
    /// Active data segments in pepper's memory: (address, bytes). Empty bytes add no
    /// segment.
    pub data: Vec<(u32, Vec<u8>)>,
    /// Mutable globals pepper appends, each starting at its type's zero (the switch's
    /// hand-over of locals, `crate::switch::Scratch`).
    pub globals: Vec<ValType>,
    /// Branch hints for rewritten functions and pepper's own (the switch's checks).
    pub hints: Vec<crate::hints::Hint>,
    /// Names of appended functions, in index order, added to the module's function names
    /// where it has any.
    pub names: Vec<(u32, String)>,
}

struct Writer<'a, 'f> {
    facts: &'a ModuleFacts<'f>,
    bodies: Vec<Option<Function>>,
    /// Which defined functions get a new body (fixed before `bodies` is taken apart).
    rewritten: Vec<bool>,
    /// Custom sections left out because their code offsets no longer hold.
    dropped: Vec<String>,
    add: &'a Additions,
    memory_done: bool,
    globals_done: bool,
    export_done: bool,
    data_done: bool,
    /// Branch hints still to write: the input's for functions copied byte for byte, then
    /// `Additions::hints`. Written in one section in front of the code section, as the
    /// proposal places it; `None` once written.
    hints: Option<Vec<crate::hints::Hint>>,
}

fn rank(id: SectionId) -> u8 {
    match id {
        SectionId::Type => 1,
        SectionId::Import => 2,
        SectionId::Function => 3,
        SectionId::Table => 4,
        SectionId::Memory => 5,
        SectionId::Tag => 6,
        SectionId::Global => 7,
        SectionId::Export => 8,
        SectionId::Start => 9,
        SectionId::Element => 10,
        SectionId::DataCount => 11,
        SectionId::Code => 12,
        SectionId::Data => 13,
        _ => 0,
    }
}

impl Writer<'_, '_> {
    fn add_memory(&mut self, s: &mut MemorySection) {
        s.memory(MemoryType {
            minimum: self.add.memory_pages,
            maximum: Some(self.add.memory_pages),
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        self.memory_done = true;
    }
    fn add_globals(&mut self, s: &mut GlobalSection) {
        for &t in &self.add.globals {
            let zero = crate::switch::zero(t).expect("scratch globals have defaultable types");
            s.global(
                GlobalType {
                    val_type: t,
                    mutable: true,
                    shared: false,
                },
                &ConstExpr::extended([zero]),
            );
        }
        self.globals_done = true;
    }
    fn add_export(&mut self, s: &mut ExportSection) {
        s.export(COUNTERS_EXPORT, ExportKind::Memory, self.add.memory_index);
        self.export_done = true;
    }
    fn add_data(&mut self, s: &mut DataSection) {
        for (at, bytes) in self.segments() {
            s.active(
                self.add.memory_index,
                &ConstExpr::i32_const(*at as i32),
                bytes.iter().copied(),
            );
        }
        self.data_done = true;
    }
    fn segments(&self) -> impl Iterator<Item = &(u32, Vec<u8>)> {
        self.add.data.iter().filter(|(_, b)| !b.is_empty())
    }
}

impl Reencode for Writer<'_, '_> {
    type Error = std::convert::Infallible;

    /// Custom sections that point into the code by offset would point at the wrong
    /// instructions of a rewritten body. Branch hints are kept for the functions copied
    /// byte for byte (their offsets are body-relative); DWARF, source maps and other code
    /// metadata are dropped once any body changes. Everything else passes through.
    fn parse_custom_section(
        &mut self,
        module: &mut Module,
        section: wasmparser::CustomSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        let name = section.name();
        let any_rewritten = self.rewritten.iter().any(|&r| r);
        if let wasmparser::KnownCustom::BranchHints(reader) = section.as_known() {
            let mut kept = Vec::new();
            let mut dropped = 0usize;
            for f in reader {
                let f = f?;
                let k = f.func.checked_sub(self.facts.num_imported_funcs);
                let rewritten = k.is_none_or(|k| self.rewritten.get(k as usize) != Some(&false));
                for h in f.hints {
                    let h = h?;
                    if rewritten {
                        dropped += 1;
                    } else {
                        kept.push(crate::hints::Hint {
                            func: f.func,
                            offset: h.func_offset,
                            likely: h.taken,
                        });
                    }
                }
            }
            if dropped > 0 {
                self.dropped
                    .push(format!("{dropped} branch hints in rewritten functions"));
            }
            match &mut self.hints {
                Some(pending) => pending.extend(kept),
                // A section after the code (against the proposal's order) stays there.
                None if !kept.is_empty() => {
                    module.section(&crate::hints::section(&kept));
                }
                None => {}
            }
            return Ok(());
        }
        let stale = name.starts_with(".debug_")
            || name.starts_with("metadata.code.")
            || name == "sourceMappingURL"
            || name == "external_debug_info";
        if stale && any_rewritten {
            self.dropped.push(format!("custom section `{name}`"));
            return Ok(());
        }
        utils::parse_custom_section(self, module, section)
    }

    fn parse_custom_name_subsection(
        &mut self,
        names: &mut wasm_encoder::NameSection,
        section: wasmparser::Name<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        let wasmparser::Name::Function(map) = section else {
            return utils::parse_custom_name_subsection(self, names, section);
        };
        // Appended functions have the highest indices: their names go last, in order.
        let mut all = utils::name_map(map, Ok)?;
        for (index, name) in &self.add.names {
            all.append(*index, name);
        }
        names.functions(&all);
        Ok(())
    }

    fn parse_type_section(
        &mut self,
        types: &mut TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_type_section(self, types, section)?;
        for (params, results) in &self.add.extra_types {
            types
                .ty()
                .function(params.iter().copied(), results.iter().copied());
        }
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_function_section(self, functions, section)?;
        for (ty, _) in &self.add.functions {
            functions.function(*ty);
        }
        Ok(())
    }

    fn parse_memory_section(
        &mut self,
        memories: &mut MemorySection,
        section: wasmparser::MemorySectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_memory_section(self, memories, section)?;
        self.add_memory(memories);
        Ok(())
    }

    fn parse_global_section(
        &mut self,
        globals: &mut GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_global_section(self, globals, section)?;
        self.add_globals(globals);
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        self.add_export(exports);
        Ok(())
    }

    fn parse_data_section(
        &mut self,
        data: &mut DataSection,
        section: wasmparser::DataSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        utils::parse_data_section(self, data, section)?;
        self.add_data(data);
        Ok(())
    }

    fn data_count(
        &mut self,
        count: u32,
    ) -> Result<u32, wasm_encoder::reencode::Error<Self::Error>> {
        Ok(count + self.segments().count() as u32)
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        for (k, body) in section.into_iter().enumerate() {
            let body = body?;
            match self.bodies.get_mut(k).and_then(Option::take) {
                Some(f) => code.function(&f),
                None => code.raw(body.as_bytes()),
            };
        }
        for (_, body) in &self.add.functions {
            code.function(body);
        }
        Ok(())
    }

    fn intersperse_section_hook(
        &mut self,
        module: &mut Module,
        _after: Option<SectionId>,
        before: Option<SectionId>,
    ) -> Result<(), wasm_encoder::reencode::Error<Self::Error>> {
        let next = before.map_or(u8::MAX, rank);
        if !self.memory_done && !self.facts.has_memory_section && next > rank(SectionId::Memory) {
            let mut s = MemorySection::new();
            self.add_memory(&mut s);
            module.section(&s);
        }
        let globals_missing = !self.facts.has_global_section && !self.add.globals.is_empty();
        if !self.globals_done && globals_missing && next > rank(SectionId::Global) {
            let mut s = GlobalSection::new();
            self.add_globals(&mut s);
            module.section(&s);
        }
        if !self.export_done && !self.facts.has_export_section && next > rank(SectionId::Export) {
            let mut s = ExportSection::new();
            self.add_export(&mut s);
            module.section(&s);
        }
        if next >= rank(SectionId::Code) {
            if let Some(mut hints) = self.hints.take().filter(|h| !h.is_empty()) {
                hints.sort_by_key(|h| (h.func, h.offset));
                module.section(&crate::hints::section(&hints));
            }
        }
        if !self.data_done && !self.facts.has_data_section && next > rank(SectionId::Data) {
            let mut s = DataSection::new();
            self.add_data(&mut s);
            if self.segments().next().is_some() {
                module.section(&s);
            }
        }
        Ok(())
    }
}

/// Writes the rewritten module; also says which custom sections (or parts) it left out
/// because they refer to code offsets that rewriting moved.
pub fn write_module(
    wasm: &[u8],
    facts: &ModuleFacts<'_>,
    bodies: Vec<Option<Function>>,
    add: &Additions,
) -> Result<(Vec<u8>, Vec<String>), InstrumentError> {
    let mut w = Writer {
        facts,
        rewritten: bodies.iter().map(Option::is_some).collect(),
        dropped: Vec::new(),
        bodies,
        add,
        memory_done: false,
        globals_done: false,
        export_done: false,
        data_done: false,
        hints: Some(add.hints.clone()),
    };
    let mut module = Module::new();
    w.parse_core_module(&mut module, wasmparser::Parser::new(0), wasm)
        .map_err(|e| InstrumentError::Encode(e.to_string()))?;
    Ok((module.finish(), w.dropped))
}
