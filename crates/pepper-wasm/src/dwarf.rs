//! `file:line` for original code offsets, from the module's DWARF custom sections.
//!
//! In wasm DWARF, addresses are offsets from the start of the code section's contents, so a
//! file offset `o` is looked up as `o - code_section_start`.

use crate::module::ModuleFacts;
use std::borrow::Cow;

/// A lookup table from code offsets to source lines (empty when there is no DWARF).
pub struct LineTable {
    rows: Vec<(u64, String)>,
    code_start: u64,
}

impl LineTable {
    pub fn new(facts: &ModuleFacts<'_>) -> LineTable {
        let mut t = LineTable {
            rows: Vec::new(),
            code_start: facts.code_section_start,
        };
        if facts.dwarf.contains_key(".debug_line") {
            // DWARF is best effort: a malformed table just gives no locations.
            let _ = t.load(facts);
            t.rows.sort_by_key(|r| r.0);
        }
        t
    }

    fn load(&mut self, facts: &ModuleFacts<'_>) -> Result<(), gimli::Error> {
        let section = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, gimli::Error> {
            Ok(Cow::Borrowed(
                facts.dwarf.get(id.name()).copied().unwrap_or(&[]),
            ))
        };
        let owned = gimli::DwarfSections::load(section)?;
        let dwarf = owned.borrow(|s| gimli::EndianSlice::new(s, gimli::LittleEndian));
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            let Some(program) = unit.line_program.clone() else {
                continue;
            };
            let mut rows = program.rows();
            while let Some((header, row)) = rows.next_row()? {
                if row.end_sequence() {
                    continue;
                }
                let Some(file) = row.file(header) else {
                    continue;
                };
                let path = full_path(&dwarf, &unit, header, file)?;
                let line = row.line().map_or(0, |l| l.get());
                self.rows.push((row.address(), format!("{path}:{line}")));
            }
        }
        Ok(())
    }

    /// Whether the module had no line table.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The source line of the instruction at file offset `offset`.
    pub fn lookup(&self, offset: u64) -> Option<String> {
        let addr = offset.checked_sub(self.code_start)?;
        let i = self.rows.partition_point(|r| r.0 <= addr);
        self.rows.get(i.checked_sub(1)?).map(|r| r.1.clone())
    }
}

type Reader<'a> = gimli::EndianSlice<'a, gimli::LittleEndian>;

/// A line-table file as a path a reader can open: its directory (and the compilation
/// directory, when that is relative) in front of its name, so that `pprof -list` and the
/// HTML report find the source.
fn full_path<'a>(
    dwarf: &gimli::Dwarf<Reader<'a>>,
    unit: &gimli::Unit<Reader<'a>>,
    header: &gimli::LineProgramHeader<Reader<'a>>,
    file: &gimli::FileEntry<Reader<'a>>,
) -> Result<String, gimli::Error> {
    let name = dwarf.attr_string(unit, file.path_name())?;
    let mut path = name.to_string_lossy().into_owned();
    if path.starts_with('/') {
        return Ok(path);
    }
    if let Some(dir) = file.directory(header) {
        let dir = dwarf.attr_string(unit, dir)?.to_string_lossy().into_owned();
        if !dir.is_empty() {
            path = format!("{}/{path}", dir.trim_end_matches('/'));
        }
    }
    if !path.starts_with('/') {
        if let Some(comp) = unit.comp_dir.as_ref() {
            path = format!("{}/{path}", comp.to_string_lossy().trim_end_matches('/'));
        }
    }
    // `./a/./b.c` is `a/b.c`.
    let absolute = path.starts_with('/');
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    Ok(format!(
        "{}{}",
        if absolute { "/" } else { "" },
        parts.join("/")
    ))
}

/// Inlining at each of `offsets` (original file offsets), from DWARF's inlined
/// subroutines (addr2line): the function the code's source is in, then each function it
/// was inlined into with the line of that inlined call, innermost first. Offsets whose
/// code is not inlined (or without DWARF) are left out.
pub fn inlined_frames(
    facts: &ModuleFacts<'_>,
    offsets: &[u64],
) -> std::collections::HashMap<u64, Vec<String>> {
    let mut out = std::collections::HashMap::new();
    if !facts.dwarf.contains_key(".debug_info") {
        return out;
    }
    // DWARF is best effort: a malformed unit gives no frames.
    let _ = load_inlined(facts, offsets, &mut out);
    out
}

fn load_inlined(
    facts: &ModuleFacts<'_>,
    offsets: &[u64],
    out: &mut std::collections::HashMap<u64, Vec<String>>,
) -> Result<(), gimli::Error> {
    let section = |id: gimli::SectionId| -> Result<Reader<'_>, gimli::Error> {
        Ok(gimli::EndianSlice::new(
            facts.dwarf.get(id.name()).copied().unwrap_or(&[]),
            gimli::LittleEndian,
        ))
    };
    let dwarf = gimli::Dwarf::load(section)?;
    let ctx = addr2line::Context::from_dwarf(dwarf)?;
    for &offset in offsets {
        let Some(addr) = offset.checked_sub(facts.code_section_start) else {
            continue;
        };
        let Ok(mut frames) = ctx.find_frames(addr).skip_all_loads() else {
            continue;
        };
        let mut chain = Vec::new();
        while let Ok(Some(frame)) = frames.next() {
            let name = frame
                .function
                .as_ref()
                .and_then(|f| f.demangle().ok())
                .map_or_else(|| "?".to_string(), |n| n.into_owned());
            let at = frame.location.as_ref().and_then(|l| {
                let file = l.file?.rsplit('/').next()?;
                Some(format!("{file}:{}", l.line?))
            });
            chain.push(match (chain.is_empty(), at) {
                (false, Some(at)) => format!("{name} ({at})"),
                _ => name,
            });
        }
        if chain.len() > 1 {
            out.insert(offset, chain);
        }
    }
    Ok(())
}
