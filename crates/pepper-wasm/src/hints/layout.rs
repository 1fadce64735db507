//! What pepper can do with a profile's biases that an engine does not: lay out each
//! `if ... else ... end` whose `then` arm is unlikely with its arms swapped
//! (`i32.eqz; if <else arm> else <then arm> end`), so that the likely arm is the one a
//! single-pass compiler puts right after the branch. Cranelift lays out an `if`'s `then`
//! block first; with branch hints on it moves the unlikely arm to the end of the function
//! instead, so this is the same idea without hints, for engines that ignore them.
//!
//! Code moves, so every offset into it changes: the hints are moved with their
//! instructions (a swapped `if`'s hint says "likely" now), and DWARF, which holds code
//! offsets this rewrite does not track, is dropped rather than left pointing at the wrong
//! instructions. Names are index-based and stay.

use super::{Hint, HintError};
use std::collections::{BTreeMap, BTreeSet};
use wasmparser::Operator as O;

/// What [`lay_out`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayoutSummary {
    /// `if`s whose arms were swapped.
    pub swapped: usize,
    /// Unlikely `if`s left as they were: no `else` arm to swap with.
    pub no_else: usize,
    /// DWARF sections dropped because the code they describe moved.
    pub dropped_debug: usize,
}

/// One operator of a body: where its bytes are (relative to the body) and what it opens
/// or closes.
#[derive(Clone, Copy)]
struct Op {
    start: usize,
    end: usize,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    If,
    /// `block`, `loop`, `try`, `try_table`: opened, closed by an `end`.
    Open,
    Else,
    End,
    Other,
}

/// `wasm` with the arms of every `if` that `hints` calls unlikely swapped where it has an
/// `else`, and `hints` moved to where their instructions went. The module's branch hint
/// section is dropped (write the returned hints with [`super::write`]); DWARF too when
/// any code moved.
pub fn lay_out(
    wasm: &[u8],
    hints: &[Hint],
) -> Result<(Vec<u8>, Vec<Hint>, LayoutSummary), HintError> {
    let mut summary = LayoutSummary::default();
    let mut by_func: BTreeMap<u32, Vec<Hint>> = BTreeMap::new();
    for h in hints {
        by_func.entry(h.func).or_default().push(*h);
    }
    let mut code = wasm_encoder::CodeSection::new();
    let mut moved = Vec::new();
    for (func, body) in super::defined_bodies(wasm)? {
        let range = body.range();
        let bytes = &wasm[range.start as usize..range.end as usize];
        let own = by_func.get(&func).map_or(&[][..], |v| &v[..]);
        if own.iter().all(|h| h.likely) {
            code.raw(bytes);
            moved.extend_from_slice(own);
            continue;
        }
        let (out, hints) = swap_arms(&body, bytes, func, own, &mut summary)?;
        code.raw(&out);
        moved.extend(hints);
    }
    let (module, dropped) = super::with_code(wasm, &code, summary.swapped > 0)?;
    summary.dropped_debug = dropped;
    moved.sort();
    Ok((module, moved, summary))
}

/// One body (`bytes`, from its locals on) with the unlikely `if`s among `hints` swapped;
/// returns the new bytes and the hints at their new offsets.
fn swap_arms(
    body: &wasmparser::FunctionBody<'_>,
    bytes: &[u8],
    func: u32,
    hints: &[Hint],
    summary: &mut LayoutSummary,
) -> Result<(Vec<u8>, Vec<Hint>), HintError> {
    let base = body.range().start as usize;
    let mut reader = body.get_operators_reader()?;
    let code_start = reader.original_position() as usize - base;
    let mut ops = Vec::new();
    while !reader.eof() {
        let start = reader.original_position() as usize - base;
        let kind = match reader.read()? {
            O::If { .. } => Kind::If,
            O::Block { .. } | O::Loop { .. } | O::Try { .. } | O::TryTable { .. } => Kind::Open,
            O::Else => Kind::Else,
            // A legacy `try` closed by `delegate` has no `end`.
            O::End | O::Delegate { .. } => Kind::End,
            _ => Kind::Other,
        };
        let end = reader.original_position() as usize - base;
        ops.push(Op { start, end, kind });
    }
    // Each `if`'s `else` (if any) and `end`, by operator index.
    let mut arms: BTreeMap<usize, (Option<usize>, usize)> = BTreeMap::new();
    let mut open: Vec<(usize, Option<usize>)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        match op.kind {
            Kind::If | Kind::Open => open.push((i, None)),
            Kind::Else => {
                if let Some(top) = open.last_mut() {
                    top.1 = Some(i);
                }
            }
            Kind::End => {
                if let Some((k, e)) = open.pop() {
                    if ops[k].kind == Kind::If {
                        arms.insert(k, (e, i));
                    }
                }
            }
            Kind::Other => {}
        }
    }
    let at: BTreeMap<usize, usize> = ops.iter().enumerate().map(|(i, o)| (o.start, i)).collect();
    let mut swap = BTreeSet::new();
    for h in hints.iter().filter(|h| !h.likely) {
        let Some(&i) = at.get(&(h.offset as usize)) else {
            continue;
        };
        match arms.get(&i) {
            Some((Some(_), _)) => {
                swap.insert(i);
                summary.swapped += 1;
            }
            Some((None, _)) => summary.no_else += 1,
            None => {}
        }
    }
    // Emitted from a stack of operator ranges, so that nesting depth costs no recursion.
    let mut out = bytes[..code_start].to_vec();
    let mut new_at = vec![0usize; ops.len()];
    let mut todo = vec![(0usize, ops.len())];
    while let Some((lo, hi)) = todo.pop() {
        let mut i = lo;
        while i < hi {
            if swap.contains(&i) {
                let (Some(e), n) = arms[&i] else {
                    unreachable!("only ifs with an else are swapped")
                };
                out.push(0x45); // i32.eqz
                new_at[i] = out.len();
                out.extend_from_slice(&bytes[ops[i].start..ops[i].end]);
                // Popped in reverse: the else arm, `else`, the then arm, then `end` on.
                todo.push((n, hi));
                todo.push((i + 1, e));
                todo.push((e, e + 1));
                todo.push((e + 1, n));
                break;
            }
            new_at[i] = out.len();
            out.extend_from_slice(&bytes[ops[i].start..ops[i].end]);
            i += 1;
        }
    }
    let moved = hints
        .iter()
        .filter_map(|h| {
            let i = *at.get(&(h.offset as usize))?;
            Some(Hint {
                func,
                offset: new_at[i] as u32,
                likely: h.likely || swap.contains(&i),
            })
        })
        .collect();
    Ok((out, moved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pepper_profile::BranchKind;

    const WAT: &str = r#"(module
      (func $f (param i32) (result i32)
        local.get 0
        if (result i32)
          local.get 0
          if (result i32)
            i32.const 10
          else
            i32.const 20
          end
        else
          local.get 0
          local.get 0
          i32.const 3
          i32.gt_u
          br_if 0
          drop
          i32.const 2
        end)
      (func $g (param i32)
        local.get 0
        if
          nop
        end))"#;

    /// `func`'s `if`s and `br_if`s: offset relative to its body, and kind.
    fn branches(wasm: &[u8], func: u32) -> Vec<(u32, BranchKind)> {
        let start = super::super::body_starts(wasm).unwrap()[&func].start as u64;
        super::super::tests::branches(wasm)
            .into_iter()
            .filter(|b| b.0 == func)
            .map(|(_, at, kind)| ((at - start) as u32, kind))
            .collect()
    }

    fn hint(func: u32, offset: u32, likely: bool) -> Hint {
        Hint {
            func,
            offset,
            likely,
        }
    }

    #[test]
    fn unlikely_ifs_with_else_are_swapped_and_hints_follow_them() {
        let wasm = wat::parse_str(WAT).unwrap();
        wasmparser::Validator::new().validate_all(&wasm).unwrap();
        let f = branches(&wasm, 0);
        let g = branches(&wasm, 1);
        let hints = vec![
            // Outer if: unlikely, swapped. Inner if (in the then arm): unlikely, swapped
            // too. br_if (in the else arm): likely, moved. g's if: no else.
            hint(0, f[0].0, false),
            hint(0, f[1].0, false),
            hint(0, f[2].0, true),
            hint(1, g[0].0, false),
        ];
        let (out, moved, summary) = lay_out(&wasm, &hints).unwrap();
        wasmparser::Validator::new().validate_all(&out).unwrap();
        assert_eq!(summary.swapped, 2);
        assert_eq!(summary.no_else, 1);
        // The br_if now comes first (the old else arm leads), then the two ifs.
        let nf = branches(&out, 0);
        assert_eq!(
            nf.iter().map(|b| b.1).collect::<Vec<_>>(),
            [BranchKind::If, BranchKind::BrIf, BranchKind::If]
        );
        let hinted = super::super::write(&out, &moved).unwrap();
        let read = super::super::read(&hinted).unwrap();
        assert_eq!(read, moved);
        let want: Vec<(u32, bool)> = vec![(nf[0].0, true), (nf[1].0, true), (nf[2].0, true)];
        let got: Vec<(u32, bool)> = read
            .iter()
            .filter(|h| h.func == 0)
            .map(|h| (h.offset, h.likely))
            .collect();
        assert_eq!(got, want);
        assert!(read.contains(&hint(1, g[0].0, false)));
    }

    /// A legacy `try` closed by `delegate` has no `end`: the `if` around it still pairs
    /// with its own `else` and `end`.
    #[test]
    fn a_delegate_does_not_unbalance_the_if_around_it() {
        let wasm = wat::parse_str(
            r#"(module
              (func (param i32) (result i32)
                local.get 0
                if (result i32)
                  try
                    nop
                  delegate 0
                  i32.const 1
                else
                  i32.const 2
                end))"#,
        )
        .unwrap();
        let all = || wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
        all().validate_all(&wasm).unwrap();
        let f = branches(&wasm, 0);
        let unlikely = [hint(0, f[0].0, false)];
        let (out, moved, summary) = lay_out(&wasm, &unlikely).unwrap();
        all().validate_all(&out).unwrap();
        assert_eq!(summary.swapped, 1);
        assert_eq!(
            moved,
            [Hint {
                func: 0,
                offset: branches(&out, 0)[0].0,
                likely: true
            }]
        );
    }

    #[test]
    fn without_unlikely_ifs_the_module_keeps_its_code_and_dwarf() {
        let mut wasm = wat::parse_str(WAT).unwrap();
        // A custom section: id 0, size, name, data.
        wasm.extend([0, 15, 11]);
        wasm.extend(b".debug_line");
        wasm.extend([1, 2, 3]);
        let (out, _, summary) = lay_out(&wasm, &[]).unwrap();
        assert_eq!(summary, LayoutSummary::default());
        assert_eq!(out, wasm);
        let f = branches(&wasm, 0);
        let unlikely = [hint(0, f[0].0, false)];
        let (out, _, summary) = lay_out(&wasm, &unlikely).unwrap();
        assert_eq!(summary.dropped_debug, 1, "code moved: stale DWARF dropped");
        assert!(!out.windows(11).any(|w| w == b".debug_line"));
    }
}
