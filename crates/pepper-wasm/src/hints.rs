//! Branch hints: a profile's branch biases written into the module, in the
//! `metadata.code.branch_hint` custom section of the WebAssembly branch hinting proposal
//! (code metadata: per function, `(offset, size = 1, likely = 1 | unlikely = 0)` items,
//! offsets relative to the start of the function's body, that is its locals vector).
//!
//! Engines act on the section without changing what the program does: wasmtime (with
//! `Config::wasm_branch_hinting`) marks the unlikely successor of a hinted `if` or `br_if`
//! cold, and Cranelift moves cold blocks out of the hot code's way.
//!
//! Only the new section is added: every other section is copied byte for byte, so code
//! offsets inside the code section, and so DWARF (code-section-relative) and the name
//! section (index-based), stay valid.

mod layout;

pub use layout::{lay_out, LayoutSummary};
use pepper_profile::{Branch, BranchKind};
use std::borrow::Cow;
use std::collections::BTreeMap;
use wasmparser::{KnownCustom, Parser, Payload};

/// The custom section's name.
pub const SECTION: &str = "metadata.code.branch_hint";

/// Which branches get a hint.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HintOptions {
    /// A branch is hinted when its more frequent outcome has at least this share of its
    /// executions.
    pub min_bias: f64,
    /// ... and it executed at least this often (rarely run branches gain nothing and their
    /// bias is the least sure).
    pub min_count: u64,
    /// Hint `br_if`s as unlikely to be taken. Cranelift then marks the branch's *target*
    /// block cold, and a `br_if`'s target is often a join that other hot edges reach (a
    /// block's end, a loop's exit), which slowed programs down: off by default.
    pub unlikely_br_if: bool,
}

impl Default for HintOptions {
    fn default() -> Self {
        HintOptions {
            min_bias: 0.9,
            min_count: 100,
            unlikely_br_if: false,
        }
    }
}

/// One hint: the instruction at `offset` bytes into function `func`'s body is `likely`
/// (or not) to branch (`if`: the condition is non-zero; `br_if`: it jumps).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hint {
    pub func: u32,
    pub offset: u32,
    pub likely: bool,
}

/// What [`choose`] did with the profile's branches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HintSummary {
    /// Hints written.
    pub hinted: usize,
    /// Branches executed fewer than `min_count` times.
    pub rare: usize,
    /// Branches without a clear enough bias: under `min_bias`, or (in a profile with
    /// `bias_margin`s) with even odds inside the margin.
    pub unbiased: usize,
    /// `br_if`s biased towards not jumping, left out by `unlikely_br_if`.
    pub unlikely_br_if: usize,
    /// `br_table`s (the proposal hints `if` and `br_if` only).
    pub tables: usize,
}

/// Why a module could not get hints.
#[derive(Debug, thiserror::Error)]
pub enum HintError {
    #[error("invalid module: {0}")]
    Invalid(#[from] wasmparser::BinaryReaderError),
    #[error("{0}")]
    Mismatch(String),
}

/// Every defined function's body, with its function index; a component is refused.
pub(crate) fn defined_bodies(
    wasm: &[u8],
) -> Result<Vec<(u32, wasmparser::FunctionBody<'_>)>, HintError> {
    let mut imported = 0u32;
    let mut out = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    if matches!(imp?.ty, wasmparser::TypeRef::Func(_)) {
                        imported += 1;
                    }
                }
            }
            Payload::CodeSectionEntry(body) => out.push((imported + out.len() as u32, body)),
            Payload::Version {
                encoding: wasmparser::Encoding::Component,
                ..
            } => {
                return Err(HintError::Mismatch(
                    "components are not supported yet; give a core module".into(),
                ))
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Where each defined function's body starts in the file, by function index.
fn body_starts(wasm: &[u8]) -> Result<BTreeMap<u32, std::ops::Range<usize>>, HintError> {
    Ok(defined_bodies(wasm)?
        .into_iter()
        .map(|(func, body)| {
            let r = body.range();
            (func, r.start as usize..r.end as usize)
        })
        .collect())
}

/// The hints a profile's branches give for `wasm` (the module the profile describes).
pub fn choose(
    wasm: &[u8],
    branches: &[Branch],
    opts: &HintOptions,
) -> Result<(Vec<Hint>, HintSummary), HintError> {
    let bodies = body_starts(wasm)?;
    let mut summary = HintSummary::default();
    let mut hints = Vec::new();
    for b in branches {
        if b.kind == BranchKind::BrTable {
            summary.tables += 1;
            continue;
        }
        let range = bodies.get(&b.func).ok_or_else(|| {
            HintError::Mismatch(format!(
                "the profile's branch {} is in function {}, which the module does not define",
                b.id, b.func
            ))
        })?;
        let at = usize::try_from(b.offset).unwrap_or(usize::MAX);
        let opcode = if range.contains(&at) { wasm[at] } else { 0 };
        let expected = if b.kind == BranchKind::If { 0x04 } else { 0x0d };
        if opcode != expected {
            return Err(HintError::Mismatch(format!(
                "the profile's branch {} ({} at offset {:#x}, function {}) is not one in this module",
                b.id,
                b.kind.name(),
                b.offset,
                b.func
            )));
        }
        let (taken, total) = (b.counts.first().copied().unwrap_or(0), b.total());
        if total < opts.min_count.max(1) {
            summary.rare += 1;
            continue;
        }
        let likely = 2 * taken >= total;
        let bias = taken.max(total - taken) as f64 / total as f64;
        // An ephemeral profile says how sure each bias is: a direction within its margin
        // of even is no direction at all, however many outcomes it rests on.
        let sure = b.bias_margin.is_none_or(|m| bias - m > 0.5);
        if bias < opts.min_bias || !sure {
            summary.unbiased += 1;
            continue;
        }
        if b.kind == BranchKind::BrIf && !likely && !opts.unlikely_br_if {
            summary.unlikely_br_if += 1;
            continue;
        }
        hints.push(Hint {
            func: b.func,
            offset: (at - range.start) as u32,
            likely,
        });
    }
    hints.sort();
    hints.dedup_by_key(|h| (h.func, h.offset));
    summary.hinted = hints.len();
    Ok((hints, summary))
}

/// The branch hint section for `hints` (sorted by function, then offset, as the proposal
/// requires).
pub fn section(hints: &[Hint]) -> wasm_encoder::BranchHints {
    let mut s = wasm_encoder::BranchHints::new();
    let mut k = 0;
    while k < hints.len() {
        let func = hints[k].func;
        let end = k + hints[k..].iter().take_while(|h| h.func == func).count();
        s.function_hints(
            func,
            hints[k..end].iter().map(|h| wasm_encoder::BranchHint {
                branch_func_offset: h.offset,
                branch_hint_value: u32::from(h.likely),
            }),
        );
        k = end;
    }
    s
}

/// `wasm` with its branch hint section replaced by `hints`, placed just before the code
/// section (where the proposal asks for it, so a streaming compiler sees it first). Every
/// other section is copied unchanged.
pub fn write(wasm: &[u8], hints: &[Hint]) -> Result<Vec<u8>, HintError> {
    let new = section(hints);
    let mut placed = hints.is_empty();
    let module = rebuilt(wasm, &mut |_| true, &mut |module, code| {
        if !placed {
            module.section(&new);
            placed = true;
        }
        module.section(&code);
    })?;
    if !placed {
        return Err(HintError::Mismatch(
            "the module has no code section to hint".into(),
        ));
    }
    Ok(module)
}

/// `wasm` with `code` as its code section and no branch hint section; when `moved`, the
/// code moved, and its DWARF sections (code offsets this crate does not track) are dropped
/// rather than left pointing at the wrong instructions. Returns the module and how many
/// DWARF sections were dropped.
pub(crate) fn with_code(
    wasm: &[u8],
    code: &wasm_encoder::CodeSection,
    moved: bool,
) -> Result<(Vec<u8>, usize), HintError> {
    let mut dropped = 0;
    let module = rebuilt(
        wasm,
        &mut |name| {
            let stale = moved && name.starts_with(".debug_");
            dropped += usize::from(stale);
            !stale
        },
        &mut |module, _| {
            module.section(code);
        },
    )?;
    Ok((module, dropped))
}

/// `wasm` section by section: custom sections that `keep` (never an old branch hint
/// section), `code` in place of the code section (it gets the original), everything else
/// as it was.
pub(crate) fn rebuilt(
    wasm: &[u8],
    keep: &mut dyn FnMut(&str) -> bool,
    code: &mut dyn FnMut(&mut wasm_encoder::Module, wasm_encoder::RawSection<'_>),
) -> Result<Vec<u8>, HintError> {
    let mut module = wasm_encoder::Module::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        if let Payload::CustomSection(c) = &payload {
            if c.name() != SECTION && keep(c.name()) {
                module.section(&wasm_encoder::CustomSection {
                    name: Cow::Borrowed(c.name()),
                    data: Cow::Borrowed(c.data()),
                });
            }
            continue;
        }
        if let Payload::Version {
            encoding: wasmparser::Encoding::Component,
            ..
        } = payload
        {
            return Err(HintError::Mismatch(
                "components are not supported yet; give a core module".into(),
            ));
        }
        if let Some((id, range)) = payload.as_section() {
            let raw = wasm_encoder::RawSection {
                id,
                data: &wasm[range.start as usize..range.end as usize],
            };
            match id == wasm_encoder::SectionId::Code as u8 {
                true => code(&mut module, raw),
                false => {
                    module.section(&raw);
                }
            }
        }
    }
    Ok(module.finish())
}

/// The hints in `wasm`'s branch hint section, each checked to point at an `if` or `br_if`
/// of its function (an error says which does not).
pub fn read(wasm: &[u8]) -> Result<Vec<Hint>, HintError> {
    let bodies = body_starts(wasm)?;
    let mut out = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let Payload::CustomSection(c) = payload? else {
            continue;
        };
        let KnownCustom::BranchHints(reader) = c.as_known() else {
            continue;
        };
        for f in reader {
            let f = f?;
            let range = bodies.get(&f.func).ok_or_else(|| {
                HintError::Mismatch(format!("hints for function {}, which has no body", f.func))
            })?;
            for h in f.hints {
                let h = h?;
                let at = range.start + h.func_offset as usize;
                if !range.contains(&at) || !matches!(wasm[at], 0x04 | 0x0d) {
                    return Err(HintError::Mismatch(format!(
                        "the hint at offset {} of function {} is not on an `if` or `br_if`",
                        h.func_offset, f.func
                    )));
                }
                out.push(Hint {
                    func: f.func,
                    offset: h.func_offset,
                    likely: h.taken,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const WAT: &str = r#"(module
      (func $f (param i32) (result i32)
        local.get 0
        if (result i32)
          i32.const 1
        else
          block
            local.get 0
            i32.const 3
            i32.gt_u
            br_if 0
          end
          i32.const 2
        end)
      (func $g (param i32)
        local.get 0
        br_if 0))"#;

    fn branch(id: u32, func: u32, offset: u64, kind: BranchKind, counts: [u64; 2]) -> Branch {
        Branch {
            id,
            func,
            offset,
            kind,
            outcomes: vec!["taken".into(), "not-taken".into()],
            counts: counts.to_vec(),
            location: None,
            inlined: Vec::new(),
            recorded: None,
            bias_margin: None,
        }
    }

    /// The module's branches, in offset order, found by opcode byte in the code.
    pub(crate) fn branches(wasm: &[u8]) -> Vec<(u32, u64, BranchKind)> {
        let mut out = Vec::new();
        for (func, range) in body_starts(wasm).unwrap() {
            let body = wasmparser::FunctionBody::new(wasmparser::BinaryReader::new(
                &wasm[range.clone()],
                range.start as u64,
            ));
            let mut ops = body.get_operators_reader().unwrap();
            while !ops.eof() {
                let (op, at) = ops.read_with_offset().unwrap();
                match op {
                    wasmparser::Operator::If { .. } => out.push((func, at, BranchKind::If)),
                    wasmparser::Operator::BrIf { .. } => out.push((func, at, BranchKind::BrIf)),
                    _ => {}
                }
            }
        }
        out
    }

    /// A profile of `found`'s branches with these counts.
    fn with_counts(found: &[(u32, u64, BranchKind)], counts: [[u64; 2]; 3]) -> Vec<Branch> {
        found
            .iter()
            .zip(counts)
            .enumerate()
            .map(|(k, (&(f, off, kind), c))| branch(k as u32, f, off, kind, c))
            .collect()
    }

    #[test]
    fn hints_round_trip_and_point_at_their_branches() {
        let wasm = wat::parse_str(WAT).unwrap();
        let found = branches(&wasm);
        assert_eq!(found.len(), 3);
        let profile = with_counts(&found, [[990, 10], [5, 995], [1000, 0]]);
        let opts = HintOptions {
            unlikely_br_if: true,
            ..Default::default()
        };
        let (hints, summary) = choose(&wasm, &profile, &opts).unwrap();
        assert_eq!(summary.hinted, 3);
        assert_eq!(
            hints.iter().map(|h| h.likely).collect::<Vec<_>>(),
            [true, false, true]
        );
        let hinted = write(&wasm, &hints).unwrap();
        wasmparser::Validator::new().validate_all(&hinted).unwrap();
        assert_eq!(read(&hinted).unwrap(), hints);
        // Writing again replaces the section instead of adding a second one.
        let again = write(&hinted, &hints[..1]).unwrap();
        assert_eq!(read(&again).unwrap(), hints[..1]);
        // Code is untouched: the bodies are the same bytes.
        let body = |w: &[u8]| {
            body_starts(w)
                .unwrap()
                .values()
                .map(|r| w[r.clone()].to_vec())
                .collect::<Vec<_>>()
        };
        assert_eq!(body(&wasm), body(&hinted));
    }

    #[test]
    fn unclear_rare_and_unlikely_br_if_are_left_out() {
        let wasm = wat::parse_str(WAT).unwrap();
        let found = branches(&wasm);
        let profile = with_counts(&found, [[600, 400], [5, 995], [10, 0]]);
        let (hints, summary) = choose(&wasm, &profile, &HintOptions::default()).unwrap();
        assert!(hints.is_empty());
        assert_eq!(
            summary,
            HintSummary {
                hinted: 0,
                rare: 1,
                unbiased: 1,
                unlikely_br_if: 1,
                tables: 0
            }
        );
    }

    /// A bias the profile itself is unsure of (its margin reaches even odds) gets no
    /// hint; the same counts with a narrow margin do.
    #[test]
    fn a_bias_within_its_margin_of_even_is_left_out() {
        let wasm = wat::parse_str(WAT).unwrap();
        let found = branches(&wasm);
        let mut profile = with_counts(&found, [[990, 10], [5, 995], [10, 0]]);
        profile[0].bias_margin = Some(0.6);
        let (hints, summary) = choose(&wasm, &profile, &HintOptions::default()).unwrap();
        assert!(hints.is_empty());
        assert_eq!(summary.unbiased, 1);
        profile[0].bias_margin = Some(0.02);
        let (hints, _) = choose(&wasm, &profile, &HintOptions::default()).unwrap();
        assert_eq!(hints.len(), 1);
    }

    #[test]
    fn a_profile_of_another_module_is_refused() {
        let wasm = wat::parse_str(WAT).unwrap();
        let (f, off, _) = branches(&wasm)[0];
        let wrong = [branch(0, f, off + 1, BranchKind::If, [1000, 0])];
        let err = choose(&wasm, &wrong, &HintOptions::default()).unwrap_err();
        assert!(err.to_string().contains("not one in this module"), "{err}");
        let missing = [branch(0, 7, off, BranchKind::If, [1000, 0])];
        let err = choose(&wasm, &missing, &HintOptions::default()).unwrap_err();
        assert!(err.to_string().contains("does not define"), "{err}");
    }
}
