//! Components: the core module inside a component that pepper profiles, and the component
//! again around its instrumented copy.
//!
//! A `wasi:cli/command` component built from a WASI program (`wasm32-wasip2`, or
//! `wasm-tools component new` with the preview-1 adapter) holds the program as one core
//! module next to small ones of its own making (the adapter, shims that break import
//! cycles); one linked from shared libraries (`wasm-tools component link`,
//! `componentize-py`) holds a core module per library. pepper instruments the core modules
//! a [`ModuleSelection`] picks, each on its own (each gets a pepper memory of its own), and
//! copies every other section of the component byte for byte: code offsets, names and the
//! component's types do not move, since a core module section is replaced as a whole.

use std::ops::Range;

/// What a `.wasm` file holds, as far as profiling goes.
#[derive(Clone, Debug)]
pub struct Unit {
    /// The core module to instrument: the file itself, or inside a component the primary
    /// profiled module (the program's, when it is selected). Its functions keep their
    /// plain indices in a profile.
    pub core: Vec<u8>,
    /// Set for a component: where the core module sits, to put it back.
    pub component: Option<ComponentFrame>,
    /// Inside a component: the other core modules to instrument, in the component's order.
    /// Their functions get [`foreign_function`] ids in a profile.
    pub others: Vec<CoreUnit>,
}

/// One core module of a component, besides [`Unit::core`], that is profiled.
#[derive(Clone, Debug)]
pub struct CoreUnit {
    /// Its position among the component's core modules.
    pub index: usize,
    /// Its name ([`ComponentFrame::modules`]).
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Which of a component's core modules to profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ModuleSelection {
    /// Every core module that defines a function.
    #[default]
    All,
    /// Only the program's module (the one that imports WASI preview 1, else the largest).
    Program,
    /// The modules of these names ([`ComponentFrame::modules`]).
    Named(Vec<String>),
}

/// A component with some of its core modules cut out.
#[derive(Clone, Debug)]
pub struct ComponentFrame {
    bytes: Vec<u8>,
    /// Every top-level section's bytes (id and size included).
    sections: Vec<Range<usize>>,
    /// Which section holds each core module, by module index.
    module_sections: Vec<usize>,
    /// A name for each of the component's top-level core modules, in order.
    pub modules: Vec<String>,
    /// Which of `modules` is profiled.
    pub profiled_module: usize,
    /// Where the profiled module's bytes start in the component.
    pub profiled_at: usize,
}

/// Why a component cannot be profiled.
#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    #[error("invalid component: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error(
        "unsupported component: it nests a component with core modules (at byte {0:#x}); \
         pepper profiles components whose core modules are at the top level, as \
         `wasm-tools component new` and wasm32-wasip2 builds make them"
    )]
    Nested(usize),
    #[error("unsupported component: it holds no core module to profile")]
    NoCoreModule,
    #[error("the component has no core module named {0}; its core modules are: {1}")]
    NoSuchModule(String, String),
}

/// Whether `bytes` are a component (else a core module, or not wasm at all).
pub fn is_component(bytes: &[u8]) -> bool {
    wasmparser::Parser::is_component(bytes)
}

/// Which of a component's core modules pepper profiles (the one [`Unit::parse`] cuts out)
/// and where its bytes start in the component, without copying anything.
pub fn profiled_module(bytes: &[u8]) -> Result<(usize, usize), ComponentError> {
    let (_, modules) = top_level(bytes)?;
    let k = program(bytes, &modules).ok_or(ComponentError::NoCoreModule)?;
    Ok((k, modules[k].1.start))
}

/// Where each of a component's core modules starts in it, by module index.
pub fn module_starts(bytes: &[u8]) -> Result<Vec<usize>, ComponentError> {
    let (_, modules) = top_level(bytes)?;
    Ok(modules.iter().map(|(_, r)| r.start).collect())
}

/// The section id of a core module inside a component.
const CORE_MODULE_SECTION: u8 = 1;

impl Unit {
    /// A core module as it is, or a component's core modules to profile: every one that
    /// defines a function ([`ModuleSelection::All`]).
    pub fn parse(bytes: &[u8]) -> Result<Unit, ComponentError> {
        Unit::parse_with(bytes, &ModuleSelection::All)
    }

    /// A core module as it is, or the core modules `selection` picks out of a component.
    /// The primary one ([`Unit::core`]) is the program's module when it is picked, else the
    /// first picked.
    pub fn parse_with(bytes: &[u8], selection: &ModuleSelection) -> Result<Unit, ComponentError> {
        if !is_component(bytes) {
            return Ok(Unit {
                core: bytes.to_vec(),
                component: None,
                others: Vec::new(),
            });
        }
        let (sections, modules) = top_level(bytes)?;
        let program = program(bytes, &modules).ok_or(ComponentError::NoCoreModule)?;
        let names = unique(module_names(bytes, &modules));
        let picked: Vec<usize> = match selection {
            ModuleSelection::Program => vec![program],
            ModuleSelection::All => (0..modules.len())
                .filter(|&k| k == program || defines_functions(&bytes[modules[k].1.clone()]))
                .collect(),
            ModuleSelection::Named(wanted) => {
                for w in wanted {
                    if !names.contains(w) {
                        return Err(ComponentError::NoSuchModule(w.clone(), names.join(", ")));
                    }
                }
                (0..modules.len())
                    .filter(|&k| wanted.contains(&names[k]))
                    .collect()
            }
        };
        let primary = match picked.contains(&program) {
            true => program,
            false => *picked.first().ok_or(ComponentError::NoCoreModule)?,
        };
        let others = picked
            .iter()
            .filter(|&&k| k != primary)
            .map(|&k| CoreUnit {
                index: k,
                name: names[k].clone(),
                bytes: bytes[modules[k].1.clone()].to_vec(),
            })
            .collect();
        let range = modules[primary].1.clone();
        Ok(Unit {
            core: bytes[range.clone()].to_vec(),
            component: Some(ComponentFrame {
                bytes: bytes.to_vec(),
                sections,
                module_sections: modules.iter().map(|(s, _)| *s).collect(),
                modules: names,
                profiled_module: primary,
                profiled_at: range.start,
            }),
            others,
        })
    }

    /// The file to run with `core` (the instrumented copy of [`Unit::core`]) in place: the
    /// core module itself, or the component around it.
    pub fn wrap<'a>(&self, core: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        match &self.component {
            None => std::borrow::Cow::Borrowed(core),
            Some(c) => std::borrow::Cow::Owned(c.wrap(&[(c.profiled_module, core)])),
        }
    }

    /// The file to run with `core` in place of [`Unit::core`] and `others` (in the order
    /// of [`Unit::others`]) in place of the other profiled modules.
    pub fn wrap_all<'a>(&self, core: &'a [u8], others: &[&[u8]]) -> std::borrow::Cow<'a, [u8]> {
        match &self.component {
            None => std::borrow::Cow::Borrowed(core),
            Some(c) => {
                let mut put = vec![(c.profiled_module, core)];
                put.extend(
                    self.others
                        .iter()
                        .map(|o| o.index)
                        .zip(others.iter().copied()),
                );
                std::borrow::Cow::Owned(c.wrap(&put))
            }
        }
    }

    /// The profiled module's name inside its component (`None` for a core module).
    pub fn module_name(&self) -> Option<&str> {
        self.component
            .as_ref()
            .map(|c| c.modules[c.profiled_module].as_str())
    }
}

/// Ids of functions of a component's other core modules (an adapter, a shim, a library)
/// in profiles and calling contexts: native stacks in a component walk through every core
/// module's frames, and every profiled module's functions land in one profile.
pub use pepper_profile::{foreign_function, foreign_parts};

impl ComponentFrame {
    /// Display names of [`foreign_function`] ids: `module::function`, the module named as
    /// in [`ComponentFrame::modules`], the function by its module's name section (else
    /// `func[N]`). Ids that are not foreign, or name no module, are left out.
    pub fn foreign_names(&self, ids: &[u32]) -> Vec<(u32, String)> {
        let mut by_module: std::collections::BTreeMap<usize, Vec<u32>> = Default::default();
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            if let Some((m, _)) = foreign_parts(id).filter(|&(m, _)| m < self.modules.len()) {
                by_module.entry(m).or_default().push(id);
            }
        }
        let (_, modules) = top_level(&self.bytes).unwrap_or_default();
        let mut out = Vec::new();
        for (m, ids) in by_module {
            let names = modules
                .get(m)
                .map(|(_, r)| function_names(&self.bytes[r.clone()]))
                .unwrap_or_default();
            for id in ids {
                let (_, f) = foreign_parts(id).expect("grouped as foreign");
                let own = names.get(&f).cloned().unwrap_or(format!("func[{f}]"));
                out.push((id, format!("{}::{own}", self.modules[m])));
            }
        }
        out.sort_unstable();
        out
    }

    /// The component with each (module index, bytes) of `put` in place of that module.
    fn wrap(&self, put: &[(usize, &[u8])]) -> Vec<u8> {
        let mut out = self.bytes[..8].to_vec();
        for (k, range) in self.sections.iter().enumerate() {
            let module = put
                .iter()
                .find(|(m, _)| self.module_sections.get(*m) == Some(&k));
            match module {
                Some((_, core)) => {
                    out.push(CORE_MODULE_SECTION);
                    leb128(&mut out, core.len() as u64);
                    out.extend_from_slice(core);
                }
                None => out.extend_from_slice(&self.bytes[range.clone()]),
            }
        }
        out
    }
}

/// Unsigned LEB128.
fn leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The component's top-level sections, and its core modules as (section index, module
/// bytes).
type Sections = (Vec<Range<usize>>, Vec<(usize, Range<usize>)>);

fn top_level(bytes: &[u8]) -> Result<Sections, ComponentError> {
    use wasmparser::{Chunk, Payload};
    let mut parser = wasmparser::Parser::new(0);
    let mut pos = 0usize;
    let mut sections = Vec::new();
    let mut modules = Vec::new();
    loop {
        let start = pos;
        let (consumed, payload) = match parser.parse(&bytes[pos..], true)? {
            Chunk::Parsed { consumed, payload } => (consumed, payload),
            // With `eof`, the parser reports missing bytes as an error instead.
            Chunk::NeedMoreData(_) => unreachable!("parsing with eof"),
        };
        pos += consumed;
        match payload {
            Payload::Version { .. } => continue,
            Payload::End(_) => break,
            Payload::ModuleSection {
                unchecked_range, ..
            } => {
                // The parser has taken the section's header; its contents end here.
                pos = unchecked_range.end as usize;
                modules.push((
                    sections.len(),
                    unchecked_range.start as usize..unchecked_range.end as usize,
                ));
            }
            Payload::ComponentSection {
                unchecked_range, ..
            } => {
                // Copied as it is, unless it holds code (wit-component nests type-only
                // shims around exports).
                let inner = &bytes[unchecked_range.start as usize..unchecked_range.end as usize];
                let has_code = wasmparser::Parser::new(0)
                    .parse_all(inner)
                    .any(|p| matches!(p, Ok(Payload::ModuleSection { .. })));
                if has_code {
                    return Err(ComponentError::Nested(start));
                }
                pos = unchecked_range.end as usize;
            }
            _ => {}
        }
        sections.push(start..pos);
    }
    Ok((sections, modules))
}

/// Which core module is the program: one that imports WASI preview 1 (the adapter
/// provides those imports, shims forward them), else the largest.
fn program(bytes: &[u8], modules: &[(usize, Range<usize>)]) -> Option<usize> {
    // Whether some payload of module `r` says `test`.
    let any = |r: &Range<usize>, test: &dyn Fn(wasmparser::Payload<'_>) -> bool| {
        wasmparser::Parser::new(0)
            .parse_all(&bytes[r.clone()])
            .any(|p| p.is_ok_and(test))
    };
    let imports_wasi = |r: &Range<usize>| {
        any(r, &|p| match p {
            wasmparser::Payload::ImportSection(s) => s
                .into_imports()
                .any(|i| i.is_ok_and(|i| i.module == "wasi_snapshot_preview1")),
            _ => false,
        })
    };
    // The adapter: it provides preview 1's functions.
    let exports_wasi = |r: &Range<usize>| {
        any(r, &|p| match p {
            wasmparser::Payload::ExportSection(s) => s
                .into_iter()
                .any(|e| e.is_ok_and(|e| e.name == "fd_write" || e.name == "proc_exit")),
            _ => false,
        })
    };
    let size = |k: &usize| modules[*k].1.len();
    let candidates: Vec<usize> = (0..modules.len())
        .filter(|&k| imports_wasi(&modules[k].1) && !exports_wasi(&modules[k].1))
        .collect();
    match candidates.iter().max_by_key(|k| size(k)) {
        Some(&k) => Some(k),
        None => (0..modules.len()).max_by_key(size),
    }
}

/// A name for each core module: the component's (its `component-name` section), else the
/// module's own (its name section), else `module{k}`.
fn module_names(bytes: &[u8], modules: &[(usize, Range<usize>)]) -> Vec<String> {
    let named = component_module_names(bytes);
    (modules.iter().enumerate())
        .map(|(k, (_, r))| {
            named
                .get(&(k as u32))
                .cloned()
                .or_else(|| module_name(&bytes[r.clone()]))
                .unwrap_or(format!("module{k}"))
        })
        .collect()
}

/// `names` made unique: a name met again gets `#k`, its module's index.
fn unique(mut names: Vec<String>) -> Vec<String> {
    for k in 0..names.len() {
        if names[..k].contains(&names[k]) {
            names[k] = format!("{}#{k}", names[k]);
        }
    }
    names
}

/// Whether a core module defines any function (one that does not has nothing to profile:
/// wit-component's fixup modules only fill a table).
fn defines_functions(module: &[u8]) -> bool {
    wasmparser::Parser::new(0)
        .parse_all(module)
        .any(|p| matches!(p, Ok(wasmparser::Payload::CodeSectionStart { count, .. }) if count > 0))
}

/// The component's names for its core modules (its `component-name` section), by index.
fn component_module_names(bytes: &[u8]) -> std::collections::HashMap<u32, String> {
    let mut names = std::collections::HashMap::new();
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload {
            Ok(wasmparser::Payload::ModuleSection { .. })
            | Ok(wasmparser::Payload::ComponentSection { .. }) => depth += 1,
            Ok(wasmparser::Payload::End(_)) => depth = depth.saturating_sub(1),
            Ok(wasmparser::Payload::CustomSection(c)) if depth == 0 => {
                if let wasmparser::KnownCustom::ComponentName(reader) = c.as_known() {
                    for name in reader.into_iter().flatten() {
                        if let wasmparser::ComponentName::CoreModules(map) = name {
                            for n in map.into_iter().flatten() {
                                names.insert(n.index, n.name.to_string());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    names
}

/// Every entry of a core module's name section, to `each`.
fn each_name(module: &[u8], mut each: impl FnMut(wasmparser::Name<'_>)) {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        if let Ok(wasmparser::Payload::CustomSection(c)) = payload {
            if let wasmparser::KnownCustom::Name(reader) = c.as_known() {
                reader.into_iter().flatten().for_each(&mut each);
            }
        }
    }
}

/// A core module's function names (its name section's, demangled as the profiled
/// module's are), by function index.
fn function_names(module: &[u8]) -> std::collections::HashMap<u32, String> {
    let mut names = std::collections::HashMap::new();
    each_name(module, |name| {
        if let wasmparser::Name::Function(map) = name {
            for n in map.into_iter().flatten() {
                names.insert(n.index, crate::module::demangle(n.name));
            }
        }
    });
    names
}

/// A core module's own name (the name section's module name).
fn module_name(module: &[u8]) -> Option<String> {
    let mut found = None;
    each_name(module, |name| {
        if let wasmparser::Name::Module { name, .. } = name {
            found.get_or_insert_with(|| name.to_string());
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPONENT: &str = r#"
        (component
          (core module $adapter
            (func $write (export "fd_write") (param i32 i32 i32 i32) (result i32) i32.const 0))
          (core instance $a (instantiate $adapter))
          (core module $program
            (import "wasi_snapshot_preview1" "fd_write"
              (func (param i32 i32 i32 i32) (result i32)))
            (func (export "_start")
              (drop (call 0 (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))))
          (core instance $p (instantiate $program
            (with "wasi_snapshot_preview1" (instance $a)))))"#;

    #[test]
    fn the_program_module_comes_out_and_goes_back() {
        let bytes = wat::parse_str(COMPONENT).unwrap();
        let unit = Unit::parse(&bytes).unwrap();
        let frame = unit.component.as_ref().unwrap();
        assert_eq!(frame.modules, vec!["adapter", "program"]);
        assert_eq!(unit.module_name(), Some("program"));
        assert!(wasmparser::Parser::is_core_wasm(&unit.core));
        // The same module back: the same component, byte for byte.
        assert_eq!(unit.wrap(&unit.core)[..], bytes[..]);
        // Another module in its place: a valid component with that module.
        let other = wat::parse_str(
            r#"(module $program
                 (import "wasi_snapshot_preview1" "fd_write"
                   (func (param i32 i32 i32 i32) (result i32)))
                 (func (export "_start") nop nop))"#,
        )
        .unwrap();
        let wrapped = unit.wrap(&other);
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
            .validate_all(&wrapped)
            .unwrap();
        assert_eq!(Unit::parse(&wrapped).unwrap().core, other);
    }

    #[test]
    fn other_modules_functions_get_names_of_their_own() {
        let bytes = wat::parse_str(COMPONENT).unwrap();
        let frame = Unit::parse(&bytes).unwrap().component.unwrap();
        let write = foreign_function(0, 0).unwrap();
        let unnamed = foreign_function(0, 3).unwrap();
        let elsewhere = foreign_function(5, 0).unwrap();
        assert_eq!(
            frame.foreign_names(&[unnamed, write, 12, write, elsewhere]),
            vec![
                (write, "adapter::write".to_string()),
                (unnamed, "adapter::func[3]".to_string())
            ]
        );
    }

    #[test]
    fn a_selection_picks_modules_and_each_goes_back_in_its_place() {
        // One module without code: `All` takes the three with code, the program (it
        // imports WASI) as the primary.
        let bytes = wat::parse_str(
            r#"(component
                 (core module $m (func (export "f")))
                 (core module $n (func (export "g")) (func (export "h")))
                 (core module $fixup (table 1 funcref))
                 (core module $program
                   (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))))"#,
        )
        .unwrap();
        let unit = Unit::parse(&bytes).unwrap();
        let frame = unit.component.as_ref().unwrap();
        assert_eq!(frame.modules, ["m", "n", "fixup", "program"]);
        assert_eq!(unique(vec!["m".into(), "m".into()]), ["m", "m#1"]);
        assert_eq!(unit.module_name(), Some("program"));
        let others: Vec<(usize, &str)> = (unit.others.iter())
            .map(|o| (o.index, o.name.as_str()))
            .collect();
        assert_eq!(others, [(0, "m"), (1, "n")]);
        let program = Unit::parse_with(&bytes, &ModuleSelection::Program).unwrap();
        assert!(program.others.is_empty());
        let named = ModuleSelection::Named(vec!["n".into()]);
        let one = Unit::parse_with(&bytes, &named).unwrap();
        assert_eq!(
            one.module_name(),
            Some("n"),
            "the first picked is the primary"
        );
        assert!(one.others.is_empty());
        let err = Unit::parse_with(&bytes, &ModuleSelection::Named(vec!["x".into()]));
        assert!(matches!(err, Err(ComponentError::NoSuchModule(..))));
        // Every module back as it was: the same bytes. Others replaced: each in its place.
        let same: Vec<&[u8]> = unit.others.iter().map(|o| &o.bytes[..]).collect();
        assert_eq!(unit.wrap_all(&unit.core, &same)[..], bytes[..]);
        let empty = wat::parse_str("(module)").unwrap();
        let wrapped = unit.wrap_all(&unit.core, &[&empty, same[1]]);
        let back = Unit::parse(&wrapped).unwrap();
        assert_eq!(back.core, unit.core);
        assert_eq!(back.others.len(), 1, "module 0 has no code now");
        assert_eq!(back.others[0].bytes, same[1]);
    }

    #[test]
    fn core_modules_pass_through_and_nested_components_are_refused() {
        let core = wat::parse_str("(module (func))").unwrap();
        let unit = Unit::parse(&core).unwrap();
        assert!(unit.component.is_none());
        assert_eq!(unit.wrap(&unit.core)[..], core[..]);
        let shim = wat::parse_str("(component (core module) (component))").unwrap();
        assert!(
            Unit::parse(&shim).unwrap().component.is_some(),
            "a code-free nest"
        );
        let nested = wat::parse_str("(component (component (core module)))").unwrap();
        let err = Unit::parse(&nested).unwrap_err().to_string();
        assert!(err.contains("nests a component"), "{err}");
        let empty = wat::parse_str("(component)").unwrap();
        assert!(matches!(
            Unit::parse(&empty),
            Err(ComponentError::NoCoreModule)
        ));
    }
}
