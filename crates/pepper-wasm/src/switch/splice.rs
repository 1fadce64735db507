//! Entering a structured body at a loop header: skip blocks, forced `if` conditions and
//! renumbered branch depths spliced into an emitted body (see the parent module).

use super::Shape;
use wasm_encoder::{BlockType, Instruction as I};

/// Where the pieces of one emitted body are: for each original operator, where the code
/// for the actions before it begins (`pre_at`) and where its own instruction is
/// (`op_at`); `start`: where the function's own code begins (after entry bookkeeping).
pub struct Positions<'a> {
    pub pre_at: &'a [usize],
    pub op_at: &'a [usize],
    pub start: usize,
}

/// Code the switch adds, with where its check's `if` is, if it has one: checks rarely
/// switch, so their `if`s are hinted unlikely (`metadata.code.branch_hint`) and the engine
/// lays the switching arm out of line.
#[derive(Clone, Default)]
pub struct Code {
    pub code: Vec<I<'static>>,
    /// Index in `code` of the check's `if`.
    pub unlikely: Option<usize>,
}

impl From<Vec<I<'static>>> for Code {
    fn from(code: Vec<I<'static>>) -> Self {
        Code {
            code,
            unlikely: None,
        }
    }
}

/// How a copy is entered and left.
pub struct Splice<'s> {
    /// The `id` parameter of a copy that can be entered at a loop; `None` for `F` itself,
    /// which is entered at its start only.
    pub entry: Option<u32>,
    /// Loops (indices into `Shape::loops`) with their ids: where the copy checks the flag.
    pub checks: Vec<(usize, u32)>,
    /// Loops with their ids: where the copy can be entered (with `entry`).
    pub entries: Vec<(usize, u32)>,
    /// Code at `Positions::start`.
    pub at_start: Code,
    /// The check at target `id`'s header (after the header's own code).
    pub check: &'s dyn Fn(u32) -> Code,
    /// Code for each entry loop `id`, just in front of the outermost loop on its way in
    /// (the loop itself when it is outermost; before that `loop`, after the skip blocks
    /// that lead there close): where a copy takes the loop's locals over. Not at the
    /// copy's start: values handed over there would stay live, as values no constant can
    /// stand for, across the code in front of the loop on the way that does not skip
    /// it, and the register allocator may keep some of them on the stack through the
    /// loop itself. Not in front of an inner loop either: the code would run each time an
    /// iteration of the loops around it starts that loop (Lua's dispatch loop, under
    /// `shallow`).
    pub arrive: Option<&'s dyn Fn(u32) -> Code>,
}

enum Piece {
    Open(BlockType),
    Close,
    Code(Code),
}

/// A body with the switch's code spliced in.
pub struct Spliced<'f> {
    pub out: Vec<I<'f>>,
    /// Where each instruction of the body before splicing went.
    pub moved: Vec<usize>,
    /// Where the checks' `if`s are (see [`Code::unlikely`]).
    pub unlikely: Vec<usize>,
}

/// A construct on the way in: (opener, is an `if`, lowest id, highest id) of the loops
/// entered through it.
type Child = (usize, bool, u32, u32);

/// `entry - lo <= hi - lo` (unsigned): `entry` in `lo..=hi`, never for 0.
fn in_range(entry: u32, lo: u32, hi: u32) -> [I<'static>; 5] {
    [
        I::LocalGet(entry),
        I::I32Const(lo as i32),
        I::I32Sub,
        I::I32Const((hi - lo) as i32),
        I::I32LeU,
    ]
}

/// The body `out` with the switch's code spliced in: the start code, a check at each
/// of `how.checks`, and, for a copy that can be entered at a loop, the skip blocks and
/// forced conditions that lead to each of `how.entries`. Branches that cross a skip block
/// are renumbered. Ids must grow with operator order, so that the ids inside one
/// construct form a range.
pub fn splice<'f>(
    out: Vec<I<'f>>,
    pos: &Positions<'_>,
    shape: &Shape,
    how: &Splice<'_>,
) -> Spliced<'f> {
    // (position, class, sequence, piece): at one position, skip blocks open (0) and
    // test `id` (1) before a header's check (2), which comes before blocks that close
    // there (3), forced conditions (4) and the locals' hand-over in front of a loop (5).
    let mut pieces: Vec<(usize, u8, usize, Piece)> = Vec::new();
    let mut push = |at: usize, class: u8, p: Piece| {
        let seq = pieces.len();
        pieces.push((at, class, seq, p));
    };
    push(pos.start, 0, Piece::Code(how.at_start.clone()));
    let header = |k: usize| pos.pre_at[shape.loops[k].op + 1];
    if let Some(e) = how.entry {
        // Arrived: from here on the copy runs everything.
        for &(k, _) in &how.entries {
            push(
                header(k),
                2,
                Piece::Code(vec![I::I32Const(0), I::LocalSet(e)].into()),
            );
        }
    }
    for &(k, id) in &how.checks {
        push(header(k), 2, Piece::Code((how.check)(id)));
    }
    if let (Some(_), Some(arrive)) = (how.entry, how.arrive) {
        let loop_ops: std::collections::HashSet<usize> = shape.loops.iter().map(|l| l.op).collect();
        for &(k, id) in &how.entries {
            let chain = shape.loops[k].chain.as_ref().expect("targets have a chain");
            // The chain ends at the loop itself, so there is always one.
            let front = chain
                .iter()
                .map(|link| link.child)
                .find(|op| loop_ops.contains(op))
                .unwrap_or(shape.loops[k].op);
            push(pos.pre_at[front], 5, Piece::Code(arrive(id)));
        }
    }
    if let Some(e) = how.entry {
        // Per parent: its children on the way to targets, each with its range of ids.
        let mut parents: std::collections::BTreeMap<Option<usize>, Vec<Child>> = Default::default();
        // Per `if`: the id ranges in its then and else arms.
        let mut ifs: std::collections::BTreeMap<usize, [Option<(u32, u32)>; 2]> =
            Default::default();
        let widen = |r: &mut Option<(u32, u32)>, id: u32| {
            *r = Some(r.map_or((id, id), |(lo, hi)| (lo.min(id), hi.max(id))));
        };
        for &(k, id) in &how.entries {
            for link in shape.loops[k].chain.as_ref().expect("targets have a chain") {
                let children = parents.entry(link.parent).or_default();
                match children.iter_mut().find(|c| c.0 == link.child) {
                    Some(c) => (c.2, c.3) = (c.2.min(id), c.3.max(id)),
                    None => children.push((link.child, link.child_is_if, id, id)),
                }
                if let Some((f, in_else)) = link.arm {
                    widen(&mut ifs.entry(f).or_default()[in_else as usize], id);
                }
            }
        }
        let with_header_code: std::collections::BTreeSet<usize> = how
            .entries
            .iter()
            .chain(&how.checks)
            .map(|&(k, _)| shape.loops[k].op)
            .collect();
        for (parent, mut children) in parents {
            let start = parent.map_or(pos.start, |p| pos.op_at[p] + 1);
            // Nothing to skip in front of a child that starts its parent's code, unless
            // the parent is a loop with code at its header: its arrival (which would clear
            // `id` on the way to a loop inside) or its check (which would restart the
            // loop inside from this header in the other copy) must be skipped too.
            let header_code = parent.is_some_and(|p| with_header_code.contains(&p));
            children.retain(|c| header_code || pos.pre_at[c.0] > start);
            children.sort_unstable();
            if children.is_empty() {
                continue;
            }
            let ty = |is_if: bool| {
                if is_if {
                    BlockType::Result(wasm_encoder::ValType::I32)
                } else {
                    BlockType::Empty
                }
            };
            for c in children.iter().rev() {
                push(start, 0, Piece::Open(ty(c.1)));
            }
            let mut tests = Vec::new();
            for (depth, &(_, is_if, lo, hi)) in children.iter().enumerate() {
                if is_if {
                    tests.push(I::I32Const(0));
                }
                tests.extend(in_range(e, lo, hi));
                tests.push(I::BrIf(depth as u32));
                if is_if {
                    tests.push(I::Drop);
                }
            }
            push(start, 1, Piece::Code(tests.into()));
            for c in &children {
                push(pos.pre_at[c.0], 3, Piece::Close);
            }
        }
        for (f, [then, els]) in ifs {
            let mut code = Vec::new();
            if let Some((lo, hi)) = then {
                code.extend(in_range(e, lo, hi));
                code.push(I::I32Or);
            }
            if let Some((lo, hi)) = els {
                // `if` takes any non-zero condition as true: make it 0 or 1 before masking
                // it (a condition of 2 and'ed with 1 would turn false).
                code.extend([I::I32Const(0), I::I32Ne]);
                code.extend(in_range(e, lo, hi));
                code.extend([I::I32Eqz, I::I32And]);
            }
            push(pos.op_at[f], 4, Piece::Code(code.into()));
        }
    }
    pieces.sort_by_key(|p| (p.0, p.1, p.2));

    let mut res = Vec::with_capacity(out.len() + 16 * pieces.len());
    let mut moved = Vec::with_capacity(out.len() + 1);
    let mut unlikely = Vec::new();
    // Open constructs, innermost last: true for a skip block.
    let mut frames: Vec<bool> = Vec::new();
    // Where in `frames` each of the body's own constructs is, innermost last.
    let mut plain: Vec<usize> = Vec::new();
    let mut next = pieces.into_iter().peekable();
    for (j, ins) in out.into_iter().enumerate() {
        while let Some((_, _, _, p)) = next.next_if(|p| p.0 == j) {
            match p {
                Piece::Open(bt) => {
                    frames.push(true);
                    res.push(I::Block(bt));
                }
                Piece::Close => {
                    let skip = frames.pop();
                    debug_assert_eq!(skip, Some(true), "a skip block closes in its parent");
                    res.push(I::End);
                }
                Piece::Code(c) => {
                    unlikely.extend(c.unlikely.map(|u| res.len() + u));
                    res.extend(c.code);
                }
            }
        }
        let ins = match ins {
            I::Block(_) | I::Loop(_) | I::If(_) | I::TryTable(..) | I::Try(_) => {
                plain.push(frames.len());
                frames.push(false);
                ins
            }
            I::End => {
                frames.pop();
                plain.pop_if(|&mut k| k == frames.len());
                ins
            }
            I::Br(d) => I::Br(relabel(d, (&frames, &plain))),
            I::BrIf(d) => I::BrIf(relabel(d, (&frames, &plain))),
            I::BrTable(ds, d) => I::BrTable(
                ds.iter().map(|&d| relabel(d, (&frames, &plain))).collect(),
                relabel(d, (&frames, &plain)),
            ),
            other => other,
        };
        moved.push(res.len());
        res.push(ins);
    }
    debug_assert!(next.peek().is_none(), "every piece lands inside the body");
    moved.push(res.len());
    Spliced {
        out: res,
        moved,
        unlikely,
    }
}

/// The depth of label `d` of the body without skip blocks, in the body with them:
/// `frames` are the open constructs (true for a skip block), `plain` where the body's own
/// are among them (a `br_table` of thousands of arms under as many blocks relabels each
/// arm without a walk).
fn relabel(d: u32, (frames, plain): (&[bool], &[usize])) -> u32 {
    match plain.len().checked_sub(1 + d as usize) {
        Some(k) => (frames.len() - 1 - plain[k]) as u32,
        // The function's label.
        None => frames.len() as u32 + (d - plain.len() as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relabel_skips_skip_blocks() {
        // frames: plain, skip, plain(innermost)
        let f = [false, true, false];
        let p = [0, 2];
        assert_eq!(relabel(0, (&f, &p)), 0);
        assert_eq!(relabel(1, (&f, &p)), 2);
        assert_eq!(relabel(2, (&f, &p)), 3, "the function's label");
        // skip (innermost) over two plain frames
        let (f, p) = ([false, false, true], [0, 1]);
        assert_eq!(relabel(0, (&f, &p)), 1);
        assert_eq!(relabel(1, (&f, &p)), 2);
        assert_eq!(relabel(3, (&f, &p)), 4);
    }
}
