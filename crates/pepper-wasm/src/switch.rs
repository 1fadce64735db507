//! Switchable instrumentation: a clean copy and an instrumented copy of each function, and
//! checks of one flag word that move a running activation from one to the other.
//!
//! Arnold and Ryder ("A framework for reducing the cost of instrumented code", PLDI 2001)
//! keep a clean and an instrumented copy of every method and check a trigger at method
//! entries and loop back edges. Wasm code cannot jump between functions, so pepper does
//! the move with a tail call that hands over every local: function `F` keeps its index and
//! runs clean code that checks the flag at entry and at chosen loop headers; when the flag
//! is set, it `return_call`s `F_inst(params.., locals.., id)`, which starts at the loop
//! numbered `id` (0: at entry). `F_inst` checks the flag at the same headers and, once it
//! is clear, `return_call`s `F_clean` (the clean code again, enterable the same way).
//!
//! Entering a structured body at a loop header ([`splice`]): every construct around the
//! loop skips the code in front of the loop with a `block` ending just before it, left
//! by a `br_if` on `id`; an `if` on the way has its condition forced to the arm holding
//! the loop; the loop sets `id` to 0 when it runs, so later passes run everything. This
//! needs an empty operand stack wherever code is skipped and constructs without
//! parameters on the way ([`Shape`] finds the loops that qualify); other loops have no
//! check and are entered with their function.

use wasm_encoder::{BlockType, Instruction as I};
use wasmparser::Operator as O;

/// Where clean code checks the flag.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum SwitchPlacement {
    /// Function entries only: a long-running activation never switches.
    Entries,
    /// Function entries and the headers of outermost loops (loops in no other loop).
    #[default]
    Outer,
    /// Function entries and the headers of loops that call, hold other loops or are in no
    /// other loop; only call-free innermost loops inside another loop are left without a
    /// check (after HotSpot's rule for safepoint polls in counted loops): they end, and the
    /// check of the loop around them runs, soon enough.
    Loops,
    /// Function entries and every loop header.
    All,
}

impl SwitchPlacement {
    pub const ALL: [SwitchPlacement; 4] = [
        SwitchPlacement::Entries,
        SwitchPlacement::Outer,
        SwitchPlacement::Loops,
        SwitchPlacement::All,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SwitchPlacement::Entries => "entries",
            SwitchPlacement::Outer => "outer",
            SwitchPlacement::Loops => "loops",
            SwitchPlacement::All => "all",
        }
    }

    pub fn parse(s: &str) -> Option<SwitchPlacement> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Whether a function's clean code checks the flag at its entry. Everywhere under
    /// `entries` and `all`; otherwise only where calls come from outside the module or
    /// through tables (`outside`): direct calls from instrumented code go to the callee's
    /// instrumented copy anyway ([`Redirect`]).
    pub fn entry_check(self, outside: bool) -> bool {
        match self {
            SwitchPlacement::Entries | SwitchPlacement::All => true,
            SwitchPlacement::Outer | SwitchPlacement::Loops => outside,
        }
    }

    /// Whether a loop of `shape` gets a check.
    fn wants(self, l: &ShapeLoop) -> bool {
        match self {
            SwitchPlacement::Entries => false,
            SwitchPlacement::Outer => l.outermost,
            SwitchPlacement::Loops => l.calls || !l.innermost || l.outermost,
            SwitchPlacement::All => true,
        }
    }
}

/// One step from a construct into a child construct on the way to a loop.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The opener (`block`, `loop`, `if`, `else`) after which the parent's code starts;
    /// `None`: the function body.
    pub parent: Option<usize>,
    /// An `if` parent: the `if`'s operator index and whether the way goes through `else`.
    pub arm: Option<(usize, bool)>,
    /// The child's opener (operator index).
    pub child: usize,
    pub child_is_if: bool,
}

/// A loop of the original body.
#[derive(Clone, Debug)]
pub struct ShapeLoop {
    /// Operator index of the `loop`.
    pub op: usize,
    /// Holds no other loop.
    pub innermost: bool,
    /// Is in no other loop.
    pub outermost: bool,
    /// Holds a call.
    pub calls: bool,
    /// The way in from the function's start, outermost first (the last link's child is the
    /// loop); `None` when the loop cannot be entered from outside (a non-empty operand
    /// stack or a construct with parameters on the way, unreachable code, or labels
    /// [`splice`] does not renumber).
    pub chain: Option<Vec<Link>>,
}

/// What the switch needs to know about one function body.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub loops: Vec<ShapeLoop>,
}

impl Shape {
    /// The loops (indices into `loops`, in operator order) that get checks under
    /// `placement`.
    pub fn targets(&self, placement: SwitchPlacement) -> Vec<usize> {
        (0..self.loops.len())
            .filter(|&k| self.loops[k].chain.is_some() && placement.wants(&self.loops[k]))
            .collect()
    }
}

struct Open {
    /// Where the parent's code starts for children (the opener, or `else`).
    start: usize,
    /// Operand stack empty at that start.
    start_ok: bool,
    /// `if` opener index, when this is an `if`.
    if_op: Option<usize>,
    in_else: bool,
    /// This construct's own link from its parent, when it can be entered.
    link: Option<Link>,
    /// A loop: its index in `Shape::loops`.
    loop_k: Option<usize>,
}

/// Reads the shape of every defined function body of `wasm` (which must validate): stack
/// heights come from wasmparser's validator.
pub fn shapes(wasm: &[u8]) -> Result<Vec<Shape>, wasmparser::BinaryReaderError> {
    let mut validator = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        if let wasmparser::ValidPayload::Func(func, body) = validator.payload(&payload)? {
            let mut v = func.into_validator(Default::default());
            out.push(shape(&mut v, &body)?);
        }
    }
    Ok(out)
}

fn rel_height(v: &wasmparser::FuncValidator<wasmparser::ValidatorResources>) -> Option<usize> {
    let f = v.get_control_frame(0)?;
    (!f.unreachable).then(|| (v.operand_stack_height() as usize).saturating_sub(f.height))
}

fn shape(
    v: &mut wasmparser::FuncValidator<wasmparser::ValidatorResources>,
    body: &wasmparser::FunctionBody<'_>,
) -> Result<Shape, wasmparser::BinaryReaderError> {
    let mut locals = body.get_locals_reader()?;
    for _ in 0..locals.get_count() {
        let offset = locals.original_position();
        let (n, t) = locals.read()?;
        v.define_locals(offset, n, t)?;
    }
    let mut reader = body.get_operators_reader()?;
    let mut shape = Shape::default();
    let mut labels_ok = true;
    let mut opens = vec![Open {
        start: usize::MAX,
        start_ok: true,
        if_op: None,
        in_else: false,
        link: None,
        loop_k: None,
    }];
    let mut i = 0usize;
    while !reader.eof() {
        let offset = reader.original_position();
        let op = reader.read()?;
        let before = rel_height(v);
        v.op(offset, &op)?;
        let after = rel_height(v);
        match op {
            O::Block { .. } | O::Loop { .. } | O::If { .. } => {
                let is_if = matches!(op, O::If { .. });
                if opens.is_empty() {
                    // Malformed nesting (validation would have refused it): nothing enters.
                    labels_ok = false;
                    opens.push(Open {
                        start: usize::MAX,
                        start_ok: false,
                        if_op: None,
                        in_else: false,
                        link: None,
                        loop_k: None,
                    });
                }
                let parent = &opens[opens.len() - 1];
                let child_ok = before == Some(if is_if { 1 } else { 0 });
                let link = (parent.start_ok && child_ok).then(|| Link {
                    parent: (parent.start != usize::MAX).then_some(parent.start),
                    arm: parent.if_op.map(|f| (f, parent.in_else)),
                    child: i,
                    child_is_if: is_if,
                });
                let loop_k = matches!(op, O::Loop { .. }).then(|| {
                    for o in &opens {
                        if let Some(k) = o.loop_k {
                            shape.loops[k].innermost = false;
                        }
                    }
                    let chain: Option<Vec<Link>> = opens
                        .iter()
                        .skip(1)
                        .map(|o| o.link)
                        .chain(std::iter::once(link))
                        .collect();
                    let outermost = opens.iter().all(|o| o.loop_k.is_none());
                    shape.loops.push(ShapeLoop {
                        op: i,
                        innermost: true,
                        outermost,
                        calls: false,
                        chain,
                    });
                    shape.loops.len() - 1
                });
                opens.push(Open {
                    start: i,
                    start_ok: after == Some(0),
                    if_op: is_if.then_some(i),
                    in_else: false,
                    link,
                    loop_k,
                });
            }
            O::Else => {
                if let Some(top) = opens.last_mut() {
                    top.start = i;
                    top.start_ok = after == Some(0);
                    top.in_else = true;
                }
            }
            O::End | O::Delegate { .. } => {
                opens.pop();
                labels_ok &= !matches!(op, O::Delegate { .. });
            }
            O::TryTable { .. } | O::Try { .. } => {
                // Not entered (and `splice` does not renumber their labels).
                labels_ok = false;
                opens.push(Open {
                    start: i,
                    start_ok: false,
                    if_op: None,
                    in_else: false,
                    link: None,
                    loop_k: None,
                });
            }
            O::Call { .. }
            | O::CallIndirect { .. }
            | O::CallRef { .. }
            | O::ReturnCall { .. }
            | O::ReturnCallIndirect { .. }
            | O::ReturnCallRef { .. } => {
                for o in &opens {
                    if let Some(k) = o.loop_k {
                        shape.loops[k].calls = true;
                    }
                }
            }
            O::Catch { .. }
            | O::CatchAll
            | O::Rethrow { .. }
            | O::BrOnNull { .. }
            | O::BrOnNonNull { .. }
            | O::BrOnCast { .. }
            | O::BrOnCastFail { .. } => labels_ok = false,
            _ => {}
        }
        i += 1;
    }
    if !labels_ok {
        for l in &mut shape.loops {
            l.chain = None;
        }
    }
    Ok(shape)
}

/// Where the pieces of one emitted body are: for each original operator, where the code
/// for the actions before it begins (`pre_at`) and where its own instruction is
/// (`op_at`); `start`: where the function's own code begins (after entry bookkeeping).
pub struct Positions<'a> {
    pub pre_at: &'a [usize],
    pub op_at: &'a [usize],
    pub start: usize,
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
    pub at_start: Vec<I<'static>>,
    /// The check at target `id`'s header (after the header's own code).
    pub check: &'s dyn Fn(u32) -> Vec<I<'static>>,
}

enum Piece {
    Open(BlockType),
    Close,
    Code(Vec<I<'static>>),
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
) -> Vec<I<'f>> {
    // (position, class, sequence, piece): at one position, skip blocks open (0) and
    // test `id` (1) before a header's check (2), which comes before blocks that close
    // there (3) and forced conditions (4).
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
                Piece::Code(vec![I::I32Const(0), I::LocalSet(e)]),
            );
        }
    }
    for &(k, id) in &how.checks {
        push(header(k), 2, Piece::Code((how.check)(id)));
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
        for (parent, mut children) in parents {
            let start = parent.map_or(pos.start, |p| pos.op_at[p] + 1);
            // Nothing to skip in front of a child that starts its parent's code.
            children.retain(|c| pos.pre_at[c.0] > start);
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
            push(start, 1, Piece::Code(tests));
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
                code.extend(in_range(e, lo, hi));
                code.extend([I::I32Eqz, I::I32And]);
            }
            push(pos.op_at[f], 4, Piece::Code(code));
        }
    }
    pieces.sort_by_key(|p| (p.0, p.1, p.2));

    let mut res = Vec::with_capacity(out.len() + 16 * pieces.len());
    // Open constructs, innermost last: true for a skip block.
    let mut frames: Vec<bool> = Vec::new();
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
                Piece::Code(code) => res.extend(code),
            }
        }
        let ins = match ins {
            I::Block(_) | I::Loop(_) | I::If(_) | I::TryTable(..) | I::Try(_) => {
                frames.push(false);
                ins
            }
            I::End => {
                frames.pop();
                ins
            }
            I::Br(d) => I::Br(relabel(d, &frames)),
            I::BrIf(d) => I::BrIf(relabel(d, &frames)),
            I::BrTable(ds, d) => I::BrTable(
                ds.iter().map(|&d| relabel(d, &frames)).collect(),
                relabel(d, &frames),
            ),
            other => other,
        };
        res.push(ins);
    }
    debug_assert!(next.peek().is_none(), "every piece lands inside the body");
    res
}

/// The depth of label `d` of the body without skip blocks, in the body with them.
fn relabel(d: u32, frames: &[bool]) -> u32 {
    let mut plain = 0;
    for (k, &skip) in frames.iter().rev().enumerate() {
        if !skip {
            if plain == d {
                return k as u32;
            }
            plain += 1;
        }
    }
    frames.len() as u32 + (d - plain)
}

/// Ephemeral instrumentation's counters for one function (see `SwitchedFunction::budget`).
#[derive(Copy, Clone, Debug)]
pub struct Budget {
    /// The u64 entry counter.
    pub entries: u32,
    /// The first of one u64 counter per checked loop (in `Shape::targets` order): every
    /// copy's check counts the header's executions, which windows cannot give.
    pub headers: u32,
}

/// One function to give switchable copies: everything [`SwitchedFunction::emit`] needs.
pub(crate) struct SwitchedFunction<'a, 'f> {
    pub facts: &'a crate::module::ModuleFacts<'f>,
    pub k: usize,
    pub a: &'a crate::analysis::FunctionAnalysis,
    pub wrapper: BlockType,
    pub mem: u32,
    /// Address of the flag word in pepper's memory.
    pub flag: u32,
    pub params: &'a [wasm_encoder::ValType],
    pub results: &'a [wasm_encoder::ValType],
    pub shape: &'a Shape,
    pub placement: SwitchPlacement,
    /// See `InstrumentOptions::switch_chaos`.
    pub chaos: bool,
    /// Whether `F` checks the flag at its entry (`SwitchPlacement::entry_check`).
    pub entry_check: bool,
    /// Ephemeral instrumentation: the flag is this function's own budget word, an i32
    /// the copies spend. A check sends clean code into `F_inst` while it is positive and
    /// spends one unit doing so; `F_inst` spends one at each checked header it passes and
    /// returns to clean code once the budget is gone. `F` counts its entries, and every
    /// check its loop's iterations ([`Budget`]).
    pub budget: Option<Budget>,
    /// Function indices of `F_inst` and `F_clean`.
    pub copies: (u32, u32),
}

/// Most parameters a copy may take (wasmparser's limit on a function's parameters).
const MAX_COPY_PARAMS: usize = 1000;

/// The zero of a defaultable local type, `None` for a non-nullable reference.
fn zero(t: wasm_encoder::ValType) -> Option<I<'static>> {
    use wasm_encoder::ValType as V;
    Some(match t {
        V::I32 => I::I32Const(0),
        V::I64 => I::I64Const(0),
        V::F32 => I::F32Const(0.0f32.into()),
        V::F64 => I::F64Const(0.0f64.into()),
        V::V128 => I::V128Const(0),
        V::Ref(r) if r.nullable => I::RefNull(r.heap_type),
        V::Ref(_) => return None,
    })
}

/// One emitted copy with the switch's code spliced in, encoded.
fn spliced(e: crate::plan::Emitted<'_>, shape: &Shape, how: &Splice<'_>) -> wasm_encoder::Function {
    let pos = Positions {
        pre_at: &e.pre_at,
        op_at: &e.op_at,
        start: e.start,
    };
    let out = splice(e.out, &pos, shape, how);
    crate::plan::encode(e.locals, &out, &[]).0
}

/// Which locals (parameters included) each of `loop_ops`' headers may read before writing
/// them: the only ones a switch there must hand over (the others are passed as zeros).
/// Handing over every local would keep them all alive through the loop, which in a
/// function with hundreds of locals (an interpreter's dispatch loop) spills registers on
/// every iteration. Classic backward liveness over the analysis' CFG.
pub fn live_at_headers(
    a: &crate::analysis::FunctionAnalysis,
    body: &wasmparser::FunctionBody<'_>,
    num_locals: usize,
    loop_ops: &[usize],
) -> Result<Vec<Vec<bool>>, wasmparser::BinaryReaderError> {
    let words = num_locals.div_ceil(64);
    let nodes = a.cfg.num_nodes();
    let bit = |set: &[u64], x: usize| set[x / 64] >> (x % 64) & 1 == 1;
    let mut uses = vec![0u64; nodes * words];
    let mut defs = vec![0u64; nodes * words];
    let mut reader = body.get_operators_reader()?;
    for i in 0..a.num_ops {
        let op = reader.read()?;
        let (x, write) = match op {
            O::LocalGet { local_index } => (local_index as usize, false),
            O::LocalSet { local_index } | O::LocalTee { local_index } => {
                (local_index as usize, true)
            }
            _ => continue,
        };
        let Some(n) = a.op_nodes.get(i).copied().flatten() else {
            continue;
        };
        let at = n.index() * words + x / 64;
        if write {
            defs[at] |= 1 << (x % 64);
        } else if defs[at] >> (x % 64) & 1 == 0 {
            uses[at] |= 1 << (x % 64);
        }
    }
    let mut live_in = uses.clone();
    let mut changed = true;
    while changed {
        changed = false;
        for n in (0..nodes).rev() {
            let node = pepper_cfg::NodeId::new(n);
            for w in 0..words {
                let mut out = 0u64;
                for &e in a.cfg.succs(node) {
                    let (_, d) = a.cfg.edge(e);
                    out |= live_in[d.index() * words + w];
                }
                let v = uses[n * words + w] | (out & !defs[n * words + w]);
                if v != live_in[n * words + w] {
                    live_in[n * words + w] = v;
                    changed = true;
                }
            }
        }
    }
    Ok(loop_ops
        .iter()
        .map(|&op| match a.op_nodes.get(op).copied().flatten() {
            Some(h) => {
                let set = &live_in[h.index() * words..][..words];
                (0..num_locals).map(|x| bit(set, x)).collect()
            }
            None => vec![true; num_locals],
        })
        .collect())
}

/// Where an instrumented copy's direct calls go: a callee with copies is called at its
/// instrumented copy (index, and the arguments after the call's own: the callee's locals'
/// zeros and loop id 0), so a burst spreads down the calls it makes without a check in
/// the callee.
pub(crate) type Redirect<'r> = &'r dyn Fn(u32) -> Option<(u32, Vec<I<'static>>)>;

/// The zeros of a function's locals (not its parameters), which its copies take as
/// parameters after its own; `None` when it cannot have copies: a local without a default
/// value, or more locals than a function may take parameters.
pub fn copy_zeros(num_params: usize, locals: &[wasm_encoder::ValType]) -> Option<Vec<I<'static>>> {
    if num_params + locals.len() >= MAX_COPY_PARAMS {
        return None;
    }
    locals.iter().map(|&t| zero(t)).collect()
}

/// A context, for the copies' emission: `None` without contexts.
type Ctx<'p> = Option<(crate::contexts::ContextEmit<'p>, u32)>;

impl SwitchedFunction<'_, '_> {
    /// One of the function's bodies, emitted for `kind`.
    fn body<'f>(
        &self,
        kind: crate::emit::EmitKind<'_>,
        ctx: Ctx<'_>,
        copy: crate::plan::BodyCopy,
        redirect: Option<Redirect<'_>>,
    ) -> Result<crate::plan::Emitted<'f>, crate::plan::InstrumentError>
    where
        Self: 'f,
    {
        let np = self.params.len() as u32;
        crate::plan::emit_instructions(
            self.facts,
            self.k,
            self.a,
            np,
            self.wrapper,
            self.mem,
            kind,
            ctx,
            copy,
            redirect,
        )
    }

    /// Emits `F` (clean, with checks), `F_inst` and `F_clean`, and returns them with the
    /// copies' type (an index into `extra_types`, added when new); `None` when the
    /// function cannot have copies (a local without a default value, too many locals).
    pub fn emit<'p, 'q, 'c>(
        &self,
        instrumented: crate::emit::EmitKind<'p>,
        clean: impl Fn() -> crate::emit::EmitKind<'q>,
        ctx: impl Fn() -> Ctx<'c>,
        redirect: Redirect<'_>,
        extra_types: &mut Vec<(Vec<wasm_encoder::ValType>, Vec<wasm_encoder::ValType>)>,
    ) -> Result<
        Option<(
            wasm_encoder::Function,
            wasm_encoder::Function,
            wasm_encoder::Function,
            u32,
        )>,
        crate::plan::InstrumentError,
    > {
        use crate::plan::BodyCopy;
        let np = self.params.len() as u32;
        let (k, a) = (self.k, self.a);
        let only = self.body(clean(), ctx(), BodyCopy::Only, None)?;
        let Some(zeros) = copy_zeros(np as usize, &only.original_locals) else {
            return Ok(None);
        };
        let n = np as usize + only.original_locals.len();
        let ty_params: Vec<_> = self
            .params
            .iter()
            .chain(&only.original_locals)
            .copied()
            .chain([wasm_encoder::ValType::I32])
            .collect();
        let ty = match extra_types
            .iter()
            .position(|t| t.0 == ty_params && t.1 == self.results)
        {
            Some(p) => p,
            None => {
                extra_types.push((ty_params, self.results.to_vec()));
                extra_types.len() - 1
            }
        } as u32;
        let (inst_fn, clean_fn) = self.copies;
        let entry = n as u32;
        let at = crate::emit::memarg(self.mem, self.flag, 2);
        let flag = || {
            // An atomic load: the sampler thread writes the flag, and Cranelift would
            // take a plain load in a loop without stores for the same as the one at the
            // function's entry (redundant load elimination), so the loop never switched.
            let mut c = vec![I::I32Const(0), I::I32AtomicLoad(at)];
            if self.budget.is_some() {
                c.extend([I::I32Const(0), I::I32GtS]);
            }
            if self.chaos {
                // flag = flag * 1103515245 + 12345; bit 16 of it says "instrumented".
                c = vec![I::I32Const(0), I::I32Const(0), I::I32Load(at)];
                c.extend([
                    I::I32Const(1103515245),
                    I::I32Mul,
                    I::I32Const(12345),
                    I::I32Add,
                ]);
                c.extend([I::I32Store(at), I::I32Const(0), I::I32Load(at)]);
                c.extend([I::I32Const(16), I::I32ShrU, I::I32Const(1), I::I32And]);
            }
            c
        };
        let targets = self.shape.targets(self.placement);
        let loop_ops: Vec<usize> = targets.iter().map(|&k| self.shape.loops[k].op).collect();
        let body = &self.facts.bodies[k];
        let live = live_at_headers(a, body, n, &loop_ops)
            .map_err(|e| crate::plan::InstrumentError::Encode(e.to_string()))?;
        let types: Vec<wasm_encoder::ValType> = self
            .params
            .iter()
            .chain(&only.original_locals)
            .copied()
            .collect();
        // `if flag { return_call to(live locals.., id) }` (or `if !flag`): a local the
        // loop does not read before writing goes over as its zero.
        // Ephemeral: budget -= 1 (a plain load and store: see `pepper_runtime`'s epochs).
        let spend: Vec<I<'static>> = match self.budget {
            Some(_) => vec![
                I::I32Const(0),
                I::I32Const(0),
                I::I32Load(at),
                I::I32Const(1),
                I::I32Sub,
                I::I32Store(at),
            ],
            None => Vec::new(),
        };
        let increment = |addr: u32| {
            let at = crate::emit::memarg(self.mem, addr, 3);
            [
                I::I32Const(0),
                I::I32Const(0),
                I::I64Load(at),
                I::I64Const(1),
                I::I64Add,
                I::I64Store(at),
            ]
        };
        let switch_to = |to: u32, when_set: bool, id: u32| {
            let mut c: Vec<I<'static>> = Vec::new();
            if let Some(b) = self.budget {
                c.extend(increment(b.headers + 8 * (id - 1)));
            }
            c.extend(flag());
            if !when_set {
                c.push(I::I32Eqz);
            }
            c.push(I::If(BlockType::Empty));
            if when_set {
                c.extend(spend.iter().cloned());
            }
            let live = &live[id as usize - 1];
            for (x, &t) in types.iter().enumerate() {
                c.push(match live[x] {
                    true => I::LocalGet(x as u32),
                    false => zero(t).expect("copies have defaultable locals"),
                });
            }
            c.extend([I::I32Const(id as i32), I::ReturnCall(to), I::End]);
            if !when_set {
                c.extend(spend.iter().cloned());
            }
            c
        };
        let ids: Vec<(usize, u32)> = targets.iter().zip(1..).map(|(&k, id)| (k, id)).collect();
        // Clean code is entered only at outermost loops: the tests that skip to a loop
        // run each time their construct starts, which for a construct in a loop is every
        // iteration. The instrumented copy, which runs only in bursts, can be entered at
        // any checked loop and leaves at outermost ones.
        let outer: Vec<(usize, u32)> = ids
            .iter()
            .copied()
            .filter(|&(k, _)| self.shape.loops[k].outermost)
            .collect();

        // F: the original code; at entry, the locals' zeros stand for the locals.
        let mut at_start: Vec<I<'static>> = Vec::new();
        if let Some(b) = self.budget {
            at_start.extend(increment(b.entries));
        }
        if self.entry_check {
            at_start.extend(flag());
            at_start.push(I::If(BlockType::Empty));
            at_start.extend(spend.iter().cloned());
            at_start.extend((0..np).map(I::LocalGet));
            at_start.extend(zeros);
            at_start.extend([I::I32Const(0), I::ReturnCall(inst_fn), I::End]);
        }
        let to_inst = |id| switch_to(inst_fn, true, id);
        let f_how = Splice {
            entry: None,
            checks: ids.clone(),
            entries: Vec::new(),
            at_start,
            check: &to_inst,
        };
        let f = spliced(only, self.shape, &f_how);

        // F_inst: entered at a loop, the path so far is nobody's (0, which the sampler
        // drops) until the loop's header starts one.
        let inst = self.body(instrumented, ctx(), BodyCopy::Entered, Some(redirect))?;
        let r = inst.locals_at.r;
        let to_clean = |id| switch_to(clean_fn, false, id);
        let inst_how = Splice {
            entry: Some(entry),
            checks: outer.clone(),
            entries: ids.clone(),
            at_start: vec![
                I::LocalGet(entry),
                I::If(BlockType::Empty),
                I::I64Const(0),
                I::LocalSet(r),
                I::End,
            ],
            check: &to_clean,
        };
        let inst_f = spliced(inst, self.shape, &inst_how);

        // F_clean: the clean code again, enterable at a loop.
        let again = self.body(clean(), ctx(), BodyCopy::Entered, None)?;
        let clean_how = Splice {
            entry: Some(entry),
            checks: ids,
            entries: outer,
            at_start: Vec::new(),
            check: &to_inst,
        };
        let clean_f = spliced(again, self.shape, &clean_how);
        Ok(Some((f, inst_f, clean_f, ty)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape_of(wat: &str) -> Shape {
        let wasm = wat::parse_str(wat).unwrap();
        shapes(&wasm).unwrap().remove(0)
    }

    #[test]
    fn loops_know_whether_they_can_be_entered() {
        let s = shape_of(
            r#"(module (func $f (param i32) (result i32)
                 (block
                   (loop                        ;; outer: holds a loop
                     (loop                      ;; inner, call-free
                       (br_if 0 (local.get 0)))
                     (br_if 1 (local.get 0))
                     (br 0)))
                 (i32.const 1)
                 (loop (param i32) (result i32)) ;; takes a parameter
                 (drop)
                 (if (local.get 0) (then (loop (call $f (i32.const 0)) (drop))))
                 (i32.const 7)))"#,
        );
        let l = &s.loops;
        assert_eq!(l.len(), 4);
        assert!(!l[0].innermost && !l[0].calls && l[0].chain.is_some());
        assert!(l[1].innermost && !l[1].calls);
        assert_eq!(l[1].chain.as_ref().unwrap().len(), 3);
        assert!(l[2].chain.is_none(), "a loop with a parameter");
        assert!(l[3].calls);
        let chain = l[3].chain.as_ref().unwrap();
        assert!(chain[0].child_is_if && chain[1].arm.is_some());
        assert_eq!(s.targets(SwitchPlacement::Outer), vec![0, 3]);
        assert_eq!(s.targets(SwitchPlacement::Loops), vec![0, 3]);
        assert_eq!(s.targets(SwitchPlacement::All), vec![0, 1, 3]);
        assert!(s.targets(SwitchPlacement::Entries).is_empty());
    }

    #[test]
    fn a_value_on_the_stack_keeps_a_loop_closed() {
        let s = shape_of(
            r#"(module (func (result i32)
                 (i32.const 1)
                 (block (loop (br_if 0 (i32.const 0))))))"#,
        );
        assert!(s.loops[0].chain.is_none());
    }

    #[test]
    fn relabel_skips_skip_blocks() {
        // frames: plain, skip, plain(innermost)
        let f = [false, true, false];
        assert_eq!(relabel(0, &f), 0);
        assert_eq!(relabel(1, &f), 2);
        assert_eq!(relabel(2, &f), 3, "the function's label");
    }
}
