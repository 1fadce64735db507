//! Profile-guided inlining: the hottest direct call sites of a profile replaced by a copy
//! of their callee's body. It is what pepper can do with a profile's call counts that
//! wasmtime does not: Cranelift compiles one function at a time (its own inliner is off by
//! default and knows no counts), and clang inlined only what one translation unit showed
//! it. Every wasm call in wasmtime is a full call: arguments moved into place, a frame
//! and a stack-limit check in the callee, the caller's live values saved around it, and
//! neither side optimized with the other in view; in a hot loop around a small callee
//! that is a large share of the work.
//!
//! A site `call f` becomes: `local.set` of `f`'s parameters into fresh locals of the
//! caller (last argument first), a zero for each of `f`'s own locals (an inlined body
//! runs again each time its site does, and wasm locals start at zero), then
//! `block (result …) <f's body> end`. Branch depths inside the body stay as they were:
//! the block takes the place of the function's own label, so a branch to it still leaves
//! the body with its results, and `return` becomes such a branch. Callers are rewritten
//! callees first, so a copy brings along what was inlined into its callee; around a cycle
//! the function reached first is copied as it was, so recursion cannot unroll.
//!
//! Code moves, so offsets into it change: branch hints move with their instructions (a
//! callee's hints are copied into each of its inlined bodies), and DWARF, which holds code
//! offsets this rewrite does not track, is dropped. Names are index-based and stay; the
//! callees stay too (other callers, tables and exports still reach them).

use crate::hints::{defined_bodies, with_code, Hint, HintError};
use pepper_profile::CallSite;
use std::collections::{BTreeMap, HashMap};
use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
use wasm_encoder::Encode;
use wasmparser::{Operator as O, Parser, Payload, ValType};

/// Which call sites are inlined.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InlineOptions {
    /// A site is inlined when it made at least this share of the profile's calls...
    pub min_share: f64,
    /// ... and at least this many calls.
    pub min_calls: u64,
    /// Callees whose body (locals and code) is larger than this many bytes are not copied:
    /// the call's cost is then small next to the body's.
    pub max_callee_bytes: usize,
    /// The code section may grow by at most this share of its size (or [`MIN_BUDGET`]
    /// bytes, whichever is more).
    pub max_growth: f64,
}

/// Bytes any module's code may grow by, however small it is.
pub const MIN_BUDGET: usize = 16 << 10;

/// The most locals a function may have: wasmparser's validator, and so wasmtime, refuses
/// more (V8's limit too).
const MAX_LOCALS: usize = 50_000;

impl Default for InlineOptions {
    fn default() -> Self {
        InlineOptions {
            min_share: 0.005,
            min_calls: 1000,
            max_callee_bytes: 4000,
            max_growth: 0.1,
        }
    }
}

/// What [`inline`] did with the profile's call sites.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InlineSummary {
    /// Sites inlined.
    pub inlined: usize,
    /// The calls those sites made in the profile, and all of the profile's calls.
    pub inlined_calls: u64,
    pub total_calls: u64,
    /// Hot enough, but indirect, a tail call, or a call of an import.
    pub not_direct: usize,
    /// Hot enough, but the callee is larger than `max_callee_bytes`.
    pub too_big: usize,
    /// Hot enough, but the callee is the caller itself, or its body has what this inliner
    /// does not copy (tail calls, legacy exception handling, locals without a zero,
    /// several results without a matching block type).
    pub unsupported: usize,
    /// Hot enough, but the growth budget was spent on hotter sites (or the caller would
    /// have more locals than engines accept).
    pub over_budget: usize,
    /// Code section bytes before and after.
    pub code_bytes: (usize, usize),
    /// DWARF sections dropped because the code they describe moved.
    pub dropped_debug: usize,
}

/// A callee's body, ready to be copied.
struct Callee {
    params: Vec<ValType>,
    /// Its own locals, one entry per local.
    locals: Vec<ValType>,
    /// `block`'s type: the function's results.
    block: wasm_encoder::BlockType,
    /// The body's operators (byte ranges relative to the body's start) and what the copy
    /// changes in them.
    ops: Vec<(usize, usize, Kind)>,
    /// The body's bytes, from its locals on.
    bytes: Vec<u8>,
}

/// What one site gets: the callee's body and its hints (by offset in the body).
type SiteCopy<'a> = (&'a Callee, Option<&'a BTreeMap<u32, bool>>);

/// A caller with its sites inlined.
struct Rewritten {
    bytes: Vec<u8>,
    /// Its hints, by offset in `bytes`.
    hints: BTreeMap<u32, bool>,
    /// `bytes` as a callee, for its own callers (`None`: it cannot be copied).
    copy: Option<Callee>,
}

/// What copying an operator of a callee's body changes.
#[derive(Clone, Copy)]
enum Kind {
    /// `local.get`, `local.set`, `local.tee` (the opcode byte) of this local.
    Local(u8, u32),
    Return,
    /// Opens a label closed by an `end`.
    Open,
    End,
    Other,
}

/// The module's function types and each function's type index.
struct Types {
    funcs: Vec<wasmparser::FuncType>,
    /// For every type index, the function type (or `None` for other composite types).
    by_index: Vec<Option<usize>>,
    func_types: Vec<u32>,
    imported_funcs: u32,
}

fn types(wasm: &[u8]) -> Result<Types, HintError> {
    let mut t = Types {
        funcs: Vec::new(),
        by_index: Vec::new(),
        func_types: Vec::new(),
        imported_funcs: 0,
    };
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::TypeSection(r) => {
                for group in r {
                    for sub in group?.into_types() {
                        match &sub.composite_type.inner {
                            wasmparser::CompositeInnerType::Func(f)
                                if !sub.composite_type.shared =>
                            {
                                t.by_index.push(Some(t.funcs.len()));
                                t.funcs.push(f.clone());
                            }
                            _ => t.by_index.push(None),
                        }
                    }
                }
            }
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    if let wasmparser::TypeRef::Func(ty) = imp?.ty {
                        t.func_types.push(ty);
                        t.imported_funcs += 1;
                    }
                }
            }
            Payload::FunctionSection(r) => {
                for ty in r {
                    t.func_types.push(ty?);
                }
            }
            _ => {}
        }
    }
    Ok(t)
}

impl Types {
    fn func(&self, func: u32) -> Option<&wasmparser::FuncType> {
        let ty = *self.func_types.get(func as usize)?;
        Some(&self.funcs[(*self.by_index.get(ty as usize)?)?])
    }

    /// The block type of a body that leaves `results`: none, one value, or a type index
    /// `[] -> results` the module already has.
    fn block_for(&self, results: &[ValType]) -> Option<wasm_encoder::BlockType> {
        match results {
            [] => Some(wasm_encoder::BlockType::Empty),
            [one] => Some(wasm_encoder::BlockType::Result(
                RoundtripReencoder.val_type(*one).ok()?,
            )),
            _ => {
                let k = self.by_index.iter().position(|f| {
                    f.is_some_and(|f| {
                        self.funcs[f].params().is_empty() && self.funcs[f].results() == results
                    })
                })?;
                Some(wasm_encoder::BlockType::FunctionType(k as u32))
            }
        }
    }
}

/// The bytes that set a fresh local of type `t` to its default value, or `None` when it
/// has none this inliner writes (references).
fn zero(t: ValType) -> Option<Vec<u8>> {
    Some(match t {
        ValType::I32 => vec![0x41, 0],
        ValType::I64 => vec![0x42, 0],
        ValType::F32 => [&[0x43][..], &[0; 4]].concat(),
        ValType::F64 => [&[0x44][..], &[0; 8]].concat(),
        ValType::V128 => [&[0xfd, 0x0c][..], &[0; 16]].concat(),
        ValType::Ref(_) => return None,
    })
}

/// `func`'s body (`bytes`, from its locals on) as a [`Callee`], or `None` when this
/// inliner cannot copy it.
fn callee(types: &Types, func: u32, bytes: &[u8]) -> Result<Option<Callee>, HintError> {
    let body = wasmparser::FunctionBody::new(wasmparser::BinaryReader::new(bytes, 0));
    let ty = types.func(func);
    let Some(ty) = ty else { return Ok(None) };
    let Some(block) = types.block_for(ty.results()) else {
        return Ok(None);
    };
    // Parameters become locals set from the stack: any type but a non-nullable reference.
    if ty
        .params()
        .iter()
        .any(|p| matches!(p, ValType::Ref(r) if !r.is_nullable()))
    {
        return Ok(None);
    }
    let mut locals = Vec::new();
    for l in body.get_locals_reader()? {
        let (n, t) = l?;
        if zero(t).is_none() {
            return Ok(None);
        }
        locals.extend(std::iter::repeat_n(t, n as usize));
    }
    let mut reader = body.get_operators_reader()?;
    let mut ops = Vec::new();
    while !reader.eof() {
        let start = reader.original_position() as usize;
        let op = reader.read()?;
        let kind = match op {
            O::ReturnCall { .. }
            | O::ReturnCallIndirect { .. }
            | O::ReturnCallRef { .. }
            | O::Try { .. }
            | O::Catch { .. }
            | O::CatchAll
            | O::Delegate { .. }
            | O::Rethrow { .. } => return Ok(None),
            O::LocalGet { local_index } => Kind::Local(0x20, local_index),
            O::LocalSet { local_index } => Kind::Local(0x21, local_index),
            O::LocalTee { local_index } => Kind::Local(0x22, local_index),
            O::Return => Kind::Return,
            O::Block { .. } | O::Loop { .. } | O::If { .. } | O::TryTable { .. } => Kind::Open,
            O::End => Kind::End,
            _ => Kind::Other,
        };
        ops.push((start, reader.original_position() as usize, kind));
    }
    Ok(Some(Callee {
        params: ty.params().to_vec(),
        locals,
        block,
        ops,
        bytes: bytes.to_vec(),
    }))
}

/// `wasm` with the hottest direct call sites of `sites` (the profile's, of exactly this
/// module) inlined, and `hints` (for this module) moved to where their instructions went.
/// The module's branch hint section is dropped (write the returned hints with
/// [`crate::hints::write`]); DWARF too when any code moved.
pub fn inline(
    wasm: &[u8],
    sites: &[CallSite],
    hints: &[Hint],
    opts: &InlineOptions,
) -> Result<(Vec<u8>, Vec<Hint>, InlineSummary), HintError> {
    let types = types(wasm)?;
    let bodies = defined_bodies(wasm)?;
    let mut summary = InlineSummary {
        total_calls: sites.iter().map(|s| s.calls).sum(),
        ..Default::default()
    };
    let code_bytes: usize = bodies.iter().map(|(_, b)| span(b).len()).sum();
    summary.code_bytes = (code_bytes, code_bytes);
    let by_func: HashMap<u32, &wasmparser::FunctionBody<'_>> =
        bodies.iter().map(|(f, b)| (*f, b)).collect();
    let threshold = (opts.min_share * summary.total_calls as f64).max(opts.min_calls as f64);
    let mut hot: Vec<&CallSite> = sites
        .iter()
        .filter(|s| s.calls as f64 >= threshold)
        .collect();
    hot.sort_by_key(|s| (std::cmp::Reverse(s.calls), s.offset));
    let mut callees: HashMap<u32, Option<Callee>> = HashMap::new();
    // Each caller's locals (parameters included) so far.
    let mut locals_of: HashMap<u32, usize> = HashMap::new();
    let mut budget = ((opts.max_growth * code_bytes as f64) as usize).max(MIN_BUDGET);
    // Chosen sites, by caller: call offset → callee.
    let mut chosen: BTreeMap<u32, BTreeMap<usize, u32>> = BTreeMap::new();
    for s in hot {
        let at = usize::try_from(s.offset).unwrap_or(usize::MAX);
        let Some(callee_func) = s.callee.filter(|_| wasm.get(at) == Some(&0x10)) else {
            summary.not_direct += 1;
            continue;
        };
        let Some(body) = by_func.get(&callee_func) else {
            summary.not_direct += 1;
            continue;
        };
        if !by_func.get(&s.func).is_some_and(|b| span(b).contains(&at)) {
            return Err(HintError::Mismatch(format!(
                "the profile's call site {} (offset {:#x}, function {}) is not one in this module",
                s.id, s.offset, s.func
            )));
        }
        if span(body).len() > opts.max_callee_bytes {
            summary.too_big += 1;
            continue;
        }
        if callee_func == s.func {
            summary.unsupported += 1;
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = callees.entry(callee_func) {
            e.insert(callee(&types, callee_func, &wasm[span(body)])?);
        }
        let Some(c) = &callees[&callee_func] else {
            summary.unsupported += 1;
            continue;
        };
        // The copy, plus a few bytes per parameter and local to set them.
        let cost = c.bytes.len() + 4 * (c.params.len() + c.locals.len());
        let caller_locals = match locals_of.entry(s.func) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let mut n = types.func(s.func).map_or(0, |t| t.params().len());
                for l in by_func[&s.func].get_locals_reader()? {
                    n += l?.0 as usize;
                }
                e.insert(n)
            }
        };
        let new_locals = c.params.len() + c.locals.len();
        if cost > budget || *caller_locals + new_locals > MAX_LOCALS {
            summary.over_budget += 1;
            continue;
        }
        budget -= cost;
        *caller_locals += new_locals;
        chosen.entry(s.func).or_default().insert(at, callee_func);
        summary.inlined += 1;
        summary.inlined_calls += s.calls;
    }
    if chosen.is_empty() {
        return Ok((wasm.to_vec(), hints.to_vec(), summary));
    }
    let mut hints_of: BTreeMap<u32, BTreeMap<u32, bool>> = BTreeMap::new();
    for h in hints {
        hints_of
            .entry(h.func)
            .or_default()
            .insert(h.offset, h.likely);
    }
    // Callers are rewritten callees first, so that a copy of a callee brings the copies
    // inlined into it along (a chain of small calls goes away at once), except around a
    // cycle, where the function reached first is copied as it was.
    let mut done: HashMap<u32, Rewritten> = HashMap::new();
    let mut slack = budget;
    for func in callees_first(&chosen) {
        let body = by_func[&func];
        let bytes = &wasm[span(body)];
        let nparams = types.func(func).map_or(0, |t| t.params().len());
        let sites = &chosen[&func];
        let original = |c: u32| {
            (
                callees[&c].as_ref().expect("chosen callees copy"),
                hints_of.get(&c),
            )
        };
        // A rewritten callee when it is done and, for all of this caller's sites of it,
        // within the size limit, the growth left and the locals limit.
        let mut uses: BTreeMap<u32, usize> = BTreeMap::new();
        for &c in sites.values() {
            *uses.entry(c).or_default() += 1;
        }
        let mut copies: HashMap<u32, SiteCopy<'_>> = HashMap::new();
        for (&c, &n) in &uses {
            let pick = match done
                .get(&c)
                .and_then(|r| Some((r.copy.as_ref()?, &r.hints)))
            {
                Some((new, hints)) => {
                    let (old, _) = original(c);
                    let locals = n * (new.locals.len() - old.locals.len());
                    let extra = n * new.bytes.len().saturating_sub(old.bytes.len()) + 4 * locals;
                    match new.bytes.len() <= opts.max_callee_bytes
                        && extra <= slack
                        && locals_of[&func] + locals <= MAX_LOCALS
                    {
                        true => {
                            slack -= extra;
                            *locals_of.get_mut(&func).expect("counted") += locals;
                            (new, Some(hints))
                        }
                        false => original(c),
                    }
                }
                None => original(c),
            };
            copies.insert(c, pick);
        }
        let (out, hints) = inline_into(
            func,
            body,
            bytes,
            nparams,
            sites,
            &copies,
            hints_of.get(&func),
        )?;
        done.insert(
            func,
            Rewritten {
                copy: callee(&types, func, &out)?,
                hints: hints.into_iter().map(|h| (h.offset, h.likely)).collect(),
                bytes: out,
            },
        );
    }
    let mut code = wasm_encoder::CodeSection::new();
    let mut moved = Vec::new();
    let mut new_bytes = 0;
    for (func, body) in &bodies {
        let (bytes, hints) = match done.get(func) {
            Some(r) => (&r.bytes[..], Some(&r.hints)),
            None => (&wasm[span(body)], hints_of.get(func)),
        };
        code.raw(bytes);
        new_bytes += bytes.len();
        moved.extend(hints.into_iter().flatten().map(|(&offset, &likely)| Hint {
            func: *func,
            offset,
            likely,
        }));
    }
    summary.code_bytes.1 = new_bytes;
    let (module, dropped) = with_code(wasm, &code, true)?;
    summary.dropped_debug = dropped;
    // A rewrite that does not validate is a bug here, not in the input: say where.
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&module)
        .map_err(|e| {
            HintError::Mismatch(format!(
                "inlining made an invalid module ({e}); callers {:?}",
                chosen.keys().collect::<Vec<_>>()
            ))
        })?;
    moved.sort();
    Ok((module, moved, summary))
}

/// The callers of `chosen` in an order that puts a function after the callers it calls
/// (depth first, callees first), a cycle broken where it was first entered.
fn callees_first(chosen: &BTreeMap<u32, BTreeMap<usize, u32>>) -> Vec<u32> {
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &root in chosen.keys() {
        if !seen.insert(root) {
            continue;
        }
        let mut stack: Vec<(u32, Vec<u32>)> =
            vec![(root, chosen[&root].values().copied().collect())];
        while let Some((func, next)) = stack.last_mut() {
            match next.pop() {
                Some(c) if chosen.contains_key(&c) && seen.insert(c) => {
                    let kids = chosen[&c].values().copied().collect();
                    stack.push((c, kids));
                }
                Some(_) => {}
                None => {
                    order.push(*func);
                    stack.pop();
                }
            }
        }
    }
    order
}

/// One caller's body with `sites` (call offset → callee) inlined; returns its new bytes
/// and its hints (its own, moved, and its callees', copied) at their new offsets.
fn inline_into(
    func: u32,
    body: &wasmparser::FunctionBody<'_>,
    bytes: &[u8],
    nparams: usize,
    sites: &BTreeMap<usize, u32>,
    copies: &HashMap<u32, SiteCopy<'_>>,
    own_hints: Option<&BTreeMap<u32, bool>>,
) -> Result<(Vec<u8>, Vec<Hint>), HintError> {
    let base = span(body).start;
    let mut groups: Vec<(u32, ValType)> = Vec::new();
    for l in body.get_locals_reader()? {
        groups.push(l?);
    }
    let own_locals: usize = groups.iter().map(|g| g.0 as usize).sum();
    let mut next_local = (nparams + own_locals) as u32;
    let mut ops_out = Vec::new();
    // (offset in ops_out, likely) for every hint, fixed up once the locals' size is known.
    let mut placed: Vec<(usize, bool)> = Vec::new();
    let mut reader = body.get_operators_reader()?;
    while !reader.eof() {
        let start = reader.original_position() as usize;
        let op = reader.read()?;
        let end = reader.original_position() as usize;
        let callee = sites.get(&start).map(|f| copies[f]);
        let Some((c, callee_hints)) = (match op {
            O::Call { .. } => callee,
            _ => None,
        }) else {
            if let Some(&likely) = own_hints.and_then(|h| h.get(&((start - base) as u32))) {
                placed.push((ops_out.len(), likely));
            }
            ops_out.extend_from_slice(&bytes[start - base..end - base]);
            continue;
        };
        let first = next_local;
        for (k, _) in c.params.iter().enumerate().rev() {
            ops_out.push(0x21);
            (first + k as u32).encode(&mut ops_out);
        }
        for (k, t) in c.locals.iter().enumerate() {
            ops_out.extend(zero(*t).expect("callee() admits only zeroable locals"));
            ops_out.push(0x21);
            (first + (c.params.len() + k) as u32).encode(&mut ops_out);
        }
        next_local += (c.params.len() + c.locals.len()) as u32;
        groups.extend(c.params.iter().chain(&c.locals).map(|t| (1, *t)));
        ops_out.push(0x02);
        c.block.encode(&mut ops_out);
        copy_body(c, first, &mut ops_out, callee_hints, &mut placed);
    }
    // The locals: the caller's groups, then one per inlined parameter and local, merged
    // where neighbours share a type.
    let mut merged: Vec<(u32, ValType)> = Vec::new();
    for (n, t) in groups {
        match merged.last_mut() {
            Some((m, last)) if *last == t => *m += n,
            _ => merged.push((n, t)),
        }
    }
    let mut out = Vec::new();
    (merged.len() as u32).encode(&mut out);
    for (n, t) in merged {
        n.encode(&mut out);
        RoundtripReencoder
            .val_type(t)
            .map_err(|e| HintError::Mismatch(format!("function {func}: {e}")))?
            .encode(&mut out);
    }
    let shift = out.len();
    out.extend(ops_out);
    let hints = placed
        .into_iter()
        .map(|(at, likely)| Hint {
            func,
            offset: (shift + at) as u32,
            likely,
        })
        .collect();
    Ok((out, hints))
}

/// Where `body` is in the module, as indices into its bytes.
fn span(body: &wasmparser::FunctionBody<'_>) -> std::ops::Range<usize> {
    let r = body.range();
    r.start as usize..r.end as usize
}

/// `c`'s code (its final `end` closing the block it is copied into), its locals numbered
/// from `first`, `return` turned into a branch out of the block; `c`'s hints are placed
/// where their instructions land.
fn copy_body(
    c: &Callee,
    first: u32,
    out: &mut Vec<u8>,
    hints: Option<&BTreeMap<u32, bool>>,
    placed: &mut Vec<(usize, bool)>,
) {
    // Labels open inside the body: a `return` branches past all of them.
    let mut depth = 0u32;
    for &(start, end, kind) in &c.ops {
        if let Some(&likely) = hints.and_then(|h| h.get(&(start as u32))) {
            placed.push((out.len(), likely));
        }
        match kind {
            Kind::Local(opcode, local) => {
                out.push(opcode);
                (first + local).encode(out);
            }
            Kind::Return => {
                out.push(0x0c);
                depth.encode(out);
            }
            Kind::Open | Kind::End | Kind::Other => {
                match kind {
                    Kind::Open => depth += 1,
                    Kind::End => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.extend_from_slice(&c.bytes[start..end]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
