//! A pre-pass over the module: the facts the rewriter needs before it writes anything.

use std::collections::HashMap;
use wasmparser::{CompositeInnerType, FunctionBody, Parser, Payload, TypeRef};

pub use pepper_layout::FuncIndex;

#[derive(Clone, Debug)]
pub struct FuncSig {
    pub params: Vec<wasmparser::ValType>,
    pub results: Vec<wasmparser::ValType>,
}

/// What the rewriter must know about the original module.
pub struct ModuleFacts<'a> {
    /// Number of types (counting every subtype of every rec group).
    pub num_types: u32,
    /// Function signature of each type index, when it is a function type.
    pub func_sigs: HashMap<u32, FuncSig>,
    pub num_imported_funcs: u32,
    /// `module::name` of each imported function, by function index.
    pub imports: Vec<String>,
    /// Type index of each imported function.
    pub import_types: Vec<u32>,
    /// Functions whose reference is taken (element segments, `ref.func` in constant
    /// expressions): the possible targets of indirect calls.
    pub address_taken: std::collections::BTreeSet<u32>,
    /// Functions the host can call directly: exports and the start function.
    pub entry_points: std::collections::BTreeSet<u32>,
    /// Type index of each defined function.
    pub defined_types: Vec<u32>,
    pub bodies: Vec<FunctionBody<'a>>,
    pub num_memories: u32,
    /// Globals, imported and defined (pepper's come after them).
    pub num_globals: u32,
    pub names: HashMap<u32, String>,
    pub has_type_section: bool,
    pub has_memory_section: bool,
    pub has_export_section: bool,
    pub has_data_section: bool,
    pub has_function_section: bool,
    pub has_global_section: bool,
    /// DWARF sections by name (`.debug_info`, ...).
    pub dwarf: HashMap<String, &'a [u8]>,
    /// File offset where the code section's contents start: DWARF addresses in wasm are
    /// relative to it.
    pub code_section_start: u64,
}

impl<'a> ModuleFacts<'a> {
    pub fn parse(wasm: &'a [u8]) -> Result<Self, wasmparser::BinaryReaderError> {
        let mut f = ModuleFacts {
            num_types: 0,
            func_sigs: HashMap::new(),
            num_imported_funcs: 0,
            imports: Vec::new(),
            import_types: Vec::new(),
            address_taken: Default::default(),
            entry_points: Default::default(),
            defined_types: Vec::new(),
            bodies: Vec::new(),
            num_memories: 0,
            num_globals: 0,
            names: HashMap::new(),
            has_type_section: false,
            has_memory_section: false,
            has_export_section: false,
            has_data_section: false,
            has_function_section: false,
            has_global_section: false,
            dwarf: HashMap::new(),
            code_section_start: 0,
        };
        for payload in Parser::new(0).parse_all(wasm) {
            match payload? {
                Payload::TypeSection(r) => {
                    f.has_type_section = true;
                    for group in r {
                        for sub in group?.into_types() {
                            if let CompositeInnerType::Func(ft) = &sub.composite_type.inner {
                                f.func_sigs.insert(
                                    f.num_types,
                                    FuncSig {
                                        params: ft.params().to_vec(),
                                        results: ft.results().to_vec(),
                                    },
                                );
                            }
                            f.num_types += 1;
                        }
                    }
                }
                Payload::ImportSection(r) => {
                    for imp in r.into_imports() {
                        let imp = imp?;
                        match imp.ty {
                            TypeRef::Func(t) | TypeRef::FuncExact(t) => {
                                f.imports.push(format!("{}::{}", imp.module, imp.name));
                                f.import_types.push(t);
                                f.num_imported_funcs += 1
                            }
                            TypeRef::Memory(_) => f.num_memories += 1,
                            TypeRef::Global(_) => f.num_globals += 1,
                            _ => {}
                        }
                    }
                }
                Payload::FunctionSection(r) => {
                    f.has_function_section = true;
                    for t in r {
                        f.defined_types.push(t?);
                    }
                }
                Payload::MemorySection(r) => {
                    f.has_memory_section = true;
                    f.num_memories += r.count();
                }
                Payload::ExportSection(r) => {
                    f.has_export_section = true;
                    // Export names stand in for functions the name section does not name.
                    for e in r.into_iter().flatten() {
                        if e.kind == wasmparser::ExternalKind::Func {
                            f.entry_points.insert(e.index);
                            f.names.entry(e.index).or_insert_with(|| e.name.to_string());
                        }
                    }
                }
                Payload::DataSection(_) => f.has_data_section = true,
                Payload::StartSection { func, .. } => {
                    f.entry_points.insert(func);
                }
                Payload::GlobalSection(r) => {
                    f.has_global_section = true;
                    f.num_globals += r.count();
                    for g in r {
                        for op in g?.init_expr.get_operators_reader() {
                            if let wasmparser::Operator::RefFunc { function_index } = op? {
                                f.address_taken.insert(function_index);
                            }
                        }
                    }
                }
                Payload::ElementSection(r) => {
                    for e in r {
                        match e?.items {
                            wasmparser::ElementItems::Functions(fs) => {
                                for i in fs {
                                    f.address_taken.insert(i?);
                                }
                            }
                            wasmparser::ElementItems::Expressions(_, es) => {
                                for ex in es {
                                    for op in ex?.get_operators_reader() {
                                        if let wasmparser::Operator::RefFunc { function_index } =
                                            op?
                                        {
                                            f.address_taken.insert(function_index);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                Payload::CodeSectionStart {
                    unchecked_range, ..
                } => f.code_section_start = unchecked_range.start,
                Payload::CodeSectionEntry(body) => f.bodies.push(body),
                Payload::CustomSection(c) => {
                    if c.name() == "name" {
                        // Names are best effort: a malformed name section is ignored.
                        let reader = wasmparser::NameSectionReader::new(c.data_reader());
                        for n in reader.into_iter().flatten() {
                            if let wasmparser::Name::Function(map) = n {
                                for naming in map.into_iter().flatten() {
                                    f.names.insert(naming.index, demangle(naming.name));
                                }
                            }
                        }
                    } else if c.name().starts_with(".debug_") {
                        f.dwarf.insert(c.name().to_string(), c.data());
                    }
                }
                _ => {}
            }
        }
        Ok(f)
    }

    /// The signature of defined function `i` (0-based among defined functions).
    pub fn defined_sig(&self, i: usize) -> Option<&FuncSig> {
        self.func_sigs.get(self.defined_types.get(i)?)
    }

    pub fn func_index(&self, defined: usize) -> FuncIndex {
        FuncIndex(self.num_imported_funcs + defined as u32)
    }
}

impl ModuleFacts<'_> {
    /// A canonical id per function type (equal signatures, equal ids: the lowest type
    /// index with that signature), so an indirect call's type can be matched with its
    /// possible callees'.
    pub fn signature_ids(&self) -> HashMap<u32, u32> {
        let mut first: HashMap<(&[wasmparser::ValType], &[wasmparser::ValType]), u32> =
            HashMap::new();
        let mut ids: Vec<u32> = self.func_sigs.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .map(|t| {
                let sig = &self.func_sigs[&t];
                let canon = *first
                    .entry((sig.params.as_slice(), sig.results.as_slice()))
                    .or_insert(t);
                (t, canon)
            })
            .collect()
    }

    /// The type index of function `func` (imports first).
    pub fn func_type(&self, func: u32) -> Option<u32> {
        match func.checked_sub(self.num_imported_funcs) {
            None => self.import_types.get(func as usize).copied(),
            Some(k) => self.defined_types.get(k as usize).copied(),
        }
    }
}

/// What a call instruction calls: `(callee, type)` — the function of a direct call, the
/// type index of an indirect one; `None` for anything that is not a call. The one list of
/// call operators: call sites are numbered by it, and the emitter instruments the same ones.
pub fn call_target(op: &wasmparser::Operator<'_>) -> Option<(Option<u32>, Option<u32>)> {
    use wasmparser::Operator as O;
    match *op {
        O::Call { function_index } | O::ReturnCall { function_index } => {
            Some((Some(function_index), None))
        }
        O::CallIndirect { type_index, .. }
        | O::CallRef { type_index }
        | O::ReturnCallIndirect { type_index, .. }
        | O::ReturnCallRef { type_index } => Some((None, Some(type_index))),
        _ => None,
    }
}

/// The call sites of one function body, in operator order.
pub fn call_sites(
    func: u32,
    body: &wasmparser::FunctionBody<'_>,
) -> Result<Vec<CallSiteInfo>, wasmparser::BinaryReaderError> {
    let mut reader = body.get_operators_reader()?;
    let mut out = Vec::new();
    while !reader.eof() {
        let offset = reader.original_position();
        if let Some((callee, sig)) = call_target(&reader.read()?) {
            out.push(CallSiteInfo {
                func,
                offset,
                callee,
                sig,
            });
        }
    }
    Ok(out)
}

/// A call instruction of the original module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSiteInfo {
    pub func: u32,
    /// Offset of the call instruction in the original module.
    pub offset: u64,
    /// The callee of a direct call.
    pub callee: Option<u32>,
    /// An indirect call's type index (canonical signature after planning).
    pub sig: Option<u32>,
}

/// A function name as people read it: Rust (legacy and v0) and C++ symbols demangled
/// (without Rust's hash suffix), anything else as it is.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(d) = cpp_demangle::Symbol::new(name).and_then(|s| {
            s.demangle()
                .map_err(|_| cpp_demangle::error::Error::UnexpectedEnd)
        }) {
            return d;
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn names_read_as_their_language_writes_them() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_Z3fooi"), "foo(int)");
        assert_eq!(demangle("luaV_execute"), "luaV_execute");
        assert_eq!(demangle("_Znot_a_symbol"), "_Znot_a_symbol");
    }
}
