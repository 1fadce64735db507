//! Turning analysis actions into instructions, per mode.
//!
//! All inserted sequences are stack-neutral: they read and write only pepper's own locals
//! and the profiler memory, and leave the operand stack exactly as they found it (a
//! `br_if` condition or `br_table` index is re-read from a scratch local after `local.tee`).
//! So they are valid at any point, including inside blocks with parameters (multi-value).

use crate::analysis::{Action, EdgeInfo, FunctionAnalysis};
use crate::plan::{Counting, LoopCount, MemoryLayout, ObviousCounter, RegisterLoop};
use pepper_cfg::{DagEdgeId, EdgeId, NodeId, NumberedDag};
use wasm_encoder::{Instruction as I, MemArg, MemArgTarget};

mod actions;
mod count;

/// pepper's extra locals in an instrumented function.
#[derive(Copy, Clone, Debug)]
pub struct Locals {
    /// The path register `r` (i64).
    pub path: u32,
    /// Scratch: a `br_if` condition or `br_table` index (i32).
    pub cond: u32,
    /// Scratch: a counter address (i32).
    pub counter_addr: u32,
    /// PEP ring: this activation's copy of the ring head (i32), kept in a register so that
    /// recording a path is two stores and no load; reloaded after every call.
    pub ring_head: u32,
    /// Scratch (i64): a `br_table` increment that may be the poison, or the register saved
    /// while a `br_table` poisons it for its shared arm (restored at the other arms).
    pub scratch: u32,
    /// Contexts: the shadow stack pointer at entry (i32), restored at every exit.
    pub shadow_top: u32,
    /// Contexts: this activation's frame address in the shadow stack ring (i32).
    pub frame: u32,
    /// Exact edges: the first of the locals holding each loop count's induction variable
    /// at loop entry (`x0`, one per `EmitKind::Edges::loops` entry, typed like `x`).
    /// Paths modes: the first of the register loops' counts (i64 each).
    pub loops: u32,
}

/// What taking an edge does to the path register.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// `r += v` (nothing when 0).
    Add(u64),
    /// The edge is cold (targeted mode): `r = POISON`, so the path lands in the cold counter.
    Poison,
}

pub use crate::plan::POISON;

/// Everything the emitter needs to write one function's instrumentation.
pub struct Emitter<'p> {
    pub locals: Locals,
    pub mem: u32,
    pub analysis: &'p FunctionAnalysis,
    pub kind: EmitKind<'p>,
    /// Per CFG edge: for a `br_table` arm that runs its code at its target, what its
    /// `br_table` did before branching ([`ArmCode::Before`]), for the arm to correct.
    arm_before: Vec<Option<Update>>,
}

pub enum EmitKind<'p> {
    Paths {
        numbered: &'p NumberedDag,
        counting: Counting,
        func: u32,
        /// Added to every path's starting value (PEP's function tag; 0 otherwise), so the
        /// register holds a word that identifies function and path together.
        tag: u64,
        layout: &'p MemoryLayout,
        /// Targeted mode: where executions of poisoned paths are counted.
        cold_counter: Option<u32>,
        /// Targeted mode: what a cold edge sets the register to (see `FunctionPlan::poison`).
        poison: i64,
        /// Targeted mode: counters of obvious paths, on their defining edges.
        obvious: &'p [ObviousCounter],
        /// Targeted mode: loops whose most frequent path is counted in a local (the
        /// `j`-th in local `Locals::loops + j`).
        register_loops: &'p [RegisterLoop],
        hash_fn: u32,
        /// `(func, r, slot)`: a hashed function's cache miss (see `Counting::Hash`).
        miss_fn: u32,
        /// Address of the i64 increment table of each `br_table` action (by action position).
        tables: &'p [(usize, u32)],
        /// What each `br_table` action does to the register (by action position), worked
        /// out once, where the tables are laid out.
        arm_codes: &'p [(usize, ArmCode)],
    },
    Edges {
        /// Per CFG edge: the address of its counter if it is a chord of the counting tree.
        counter: &'p [Option<u32>],
        /// Address of the i32 arm→counter-address table of each `br_table` action.
        tables: &'p [(usize, u32)],
        /// Loops whose induction variable counts a node (see `LoopCount`).
        loops: &'p [LoopCount],
    },
}

/// A plain (non-atomic) access to memory `mem` at static `offset`, aligned to 2^`align`.
pub(crate) fn memarg(mem: u32, offset: u32, align: u32) -> MemArg {
    MemArg {
        offset: offset as u64,
        align,
        target: MemArgTarget::Memory(mem),
        ordering: None,
    }
}
fn mem64(mem: u32, offset: u32) -> MemArg {
    memarg(mem, offset, 3)
}
fn mem32(mem: u32, offset: u32) -> MemArg {
    memarg(mem, offset, 2)
}

/// The path-register update of CFG edge `e`, for a register that holds the path number
/// times `scale` (see [`Counting::scale`]).
pub fn update(numbered: &NumberedDag, e: EdgeId, scale: u64) -> Update {
    numbered
        .edge_val(e)
        .map_or(Update::Poison, |v| Update::Add(v * scale))
}

impl<'p> Emitter<'p> {
    pub fn new(
        locals: Locals,
        mem: u32,
        analysis: &'p FunctionAnalysis,
        kind: EmitKind<'p>,
    ) -> Self {
        let mut em = Emitter {
            locals,
            mem,
            analysis,
            kind,
            arm_before: Vec::new(),
        };
        let mut before = vec![None; analysis.cfg.num_edges()];
        if let EmitKind::Paths { arm_codes, .. } = &em.kind {
            for (pos, code) in arm_codes.iter() {
                let (ArmCode::Before(u), (_, _, Action::BrTable { arms, .. })) =
                    (code, &analysis.actions[*pos])
                else {
                    continue;
                };
                for e in arms.iter().filter(|e| analysis.edges[e.index()].at_target) {
                    before[e.index()] = Some(*u);
                }
            }
        }
        em.arm_before = before;
        em
    }
}

impl Emitter<'_> {
    fn poison(&self) -> i64 {
        match &self.kind {
            EmitKind::Paths { poison, .. } => *poison,
            EmitKind::Edges { .. } => POISON,
        }
    }

    fn upd(&self, e: EdgeId) -> Update {
        match &self.kind {
            EmitKind::Paths {
                numbered, counting, ..
            } => update(numbered, e, counting.scale()),
            EmitKind::Edges { .. } => Update::Add(0),
        }
    }

    fn apply(&self, out: &mut Vec<I<'_>>, u: Update) {
        match u {
            Update::Add(v) => self.add_const(out, v),
            Update::Poison => {
                out.extend([I::I64Const(self.poison()), I::LocalSet(self.locals.path)])
            }
        }
    }

    /// Pushes the register's value after update `u`.
    fn updated(&self, out: &mut Vec<I<'_>>, u: Update) {
        let r = self.locals.path;
        match u {
            Update::Add(0) => out.push(I::LocalGet(r)),
            Update::Add(v) => out.extend([I::LocalGet(r), I::I64Const(v as i64), I::I64Add]),
            Update::Poison => out.push(I::I64Const(self.poison())),
        }
    }

    /// Sets the register to the start value of a path entering the DAG by `e` (function
    /// entry or a split node's restart), or to the poison if no hot path starts there.
    fn restart(&self, out: &mut Vec<I<'_>>, e: Option<pepper_cfg::DagEdgeId>, always: bool) {
        let EmitKind::Paths {
            numbered,
            tag,
            counting,
            ..
        } = &self.kind
        else {
            return;
        };
        let v = match e {
            // Only obvious paths start here: nothing reads the register before they end.
            Some(e) if !numbered.restarts(e) => return,
            Some(e) if !numbered.numbering.is_hot(e) => self.poison(),
            Some(e) => (numbered.numbering.val(e) * counting.scale() + tag) as i64,
            None => *tag as i64,
        };
        if v != 0 || always {
            out.extend([I::I64Const(v), I::LocalSet(self.locals.path)]);
        }
    }

    fn add_const(&self, out: &mut Vec<I<'_>>, v: u64) {
        if v != 0 {
            let r = self.locals.path;
            out.extend([
                I::LocalGet(r),
                I::I64Const(v as i64),
                I::I64Add,
                I::LocalSet(r),
            ]);
        }
    }

    /// The counter of the obvious path whose defining edge is DAG edge `e`, if any.
    fn obvious_counter(&self, e: Option<DagEdgeId>) -> Option<ObviousCounter> {
        let EmitKind::Paths { obvious, .. } = &self.kind else {
            return None;
        };
        let e = e?;
        obvious.iter().find(|o| o.edge == e).copied()
    }

    /// The obvious-path counter on CFG edge `e`, if any.
    fn edge_obvious_counter(&self, e: EdgeId) -> Option<ObviousCounter> {
        match &self.kind {
            EmitKind::Paths { numbered, .. } => self.obvious_counter(numbered.dag.real_edge(e)),
            EmitKind::Edges { .. } => None,
        }
    }

    /// Before a `br_if` whose label carries values (condition on the stack): the taken
    /// edge's count `+= (condition != 0)`, without a branch; for a guarded obvious path, and
    /// only while the path register is not poisoned.
    fn taken_amount(&self, out: &mut Vec<I<'_>>, guarded: bool) -> Vec<I<'static>> {
        let (c, r) = (self.locals.cond, self.locals.path);
        out.push(I::LocalTee(c));
        let mut amount = vec![I::LocalGet(c), I::I32Const(0), I::I32Ne];
        if guarded {
            amount.extend([I::LocalGet(r), I::I64Const(0), I::I64GeS, I::I32And]);
        }
        amount.push(I::I64ExtendI32U);
        amount
    }

    /// `br_table`: saves the index, then loads entry `min(index, n)` of the table at `addr`
    /// (i64 entries if `wide`, else i32), leaving the index below it.
    fn table_lookup(&self, out: &mut Vec<I<'_>>, n: u32, addr: u32, wide: bool) {
        out.push(I::LocalTee(self.locals.cond));
        self.clamped_index(out, n);
        if wide {
            out.extend([I::I32Const(3), I::I32Shl, I::I64Load(mem64(self.mem, addr))]);
        } else {
            out.extend([I::I32Const(2), I::I32Shl, I::I32Load(mem32(self.mem, addr))]);
        }
    }

    /// Pushes `min(c, n)` where `c` is the scratch local: the `br_table` arm actually taken.
    fn clamped_index(&self, out: &mut Vec<I<'_>>, n: u32) {
        let c = self.locals.cond;
        out.extend([
            I::LocalGet(c),
            I::I32Const(n as i32),
            I::LocalGet(c),
            I::I32Const(n as i32),
            I::I32LtU,
            I::Select,
        ]);
    }

    fn edge_code(&self, out: &mut Vec<I<'_>>, e: EdgeId) {
        match &self.kind {
            EmitKind::Paths { .. } => {
                self.at_target_code(out, e);
                self.bump_obvious(out, self.edge_obvious_counter(e));
                self.flush_register_loops(out, e);
            }
            EmitKind::Edges { counter, loops, .. } => {
                self.bump(out, counter[e.index()]);
                for (j, l) in loops.iter().enumerate() {
                    let (x, x0) = (l.counter.local, self.locals.loops + j as u32);
                    if l.counter.entry == e {
                        out.extend([I::LocalGet(x), I::LocalSet(x0)]);
                    }
                    if l.exits.contains(&e) {
                        self.add_to_counter(out, l.addr, false, &loop_steps(l, x0));
                    }
                }
            }
        }
    }

    /// Edge `e`'s register update, where `e` is a `br_table` arm that runs its code at its
    /// target: corrected for what the `br_table` did before branching ([`ArmCode`]). For
    /// any other edge, its plain update.
    fn at_target_code(&self, out: &mut Vec<I<'_>>, e: EdgeId) {
        let u = self.upd(e);
        let before = self.arm_before.get(e.index()).copied().flatten();
        match (u, before) {
            (Update::Add(x), Some(Update::Add(v))) => self.add_const(out, x.wrapping_sub(v)),
            // The `br_table` saved the register in `t` and poisoned it for its shared arm.
            (Update::Add(x), Some(Update::Poison)) => out.extend([
                I::LocalGet(self.locals.scratch),
                I::I64Const(x as i64),
                I::I64Add,
                I::LocalSet(self.locals.path),
            ]),
            _ => self.apply(out, u),
        }
    }

    /// [`arm_code`] of the `br_table` action at position `k`, in paths mode.
    fn arm_code(&self, k: usize) -> Option<&ArmCode> {
        let EmitKind::Paths { arm_codes, .. } = &self.kind else {
            return None;
        };
        arm_codes.iter().find(|(pos, _)| *pos == k).map(|(_, c)| c)
    }

    /// After an action that opened code around its branch (`action` returned true), the
    /// branch itself and what closes that code: a `br_if L` trampoline's `br L+1; end`, or
    /// a `br_table` sent through landing pads (`block`s opened before it, innermost
    /// first), then each pad's arm code and `br` to the arm's real target.
    pub fn close_opened(
        &self,
        out: &mut Vec<I<'_>>,
        k: usize,
        act: &Action,
        op: &wasmparser::Operator,
    ) {
        match (act, op) {
            (Action::BrIf { .. }, wasmparser::Operator::BrIf { relative_depth }) => {
                out.extend([I::Br(relative_depth + 1), I::End]);
            }
            (Action::BrTable { arms, .. }, wasmparser::Operator::BrTable { targets }) => {
                let Some(ArmCode::Pads(pads)) = self.arm_code(k) else {
                    unreachable!("only pads open code around a br_table");
                };
                let m = pads.len() as u32;
                let depths: Vec<u32> = targets
                    .targets()
                    .chain(std::iter::once(Ok(targets.default())))
                    .map(|d| d.expect("validated by the analysis"))
                    .collect();
                // Each edge's pad, and the depth of its first arm (a switch of thousands
                // of cases has as many arms and pads: no search per arm).
                let mut pad_of = std::collections::HashMap::with_capacity(pads.len());
                for (j, &e) in pads.iter().enumerate() {
                    pad_of.entry(e).or_insert(j as u32);
                }
                let mut depth_of = std::collections::HashMap::with_capacity(arms.len());
                for (&e, &d) in arms.iter().zip(&depths) {
                    depth_of.entry(e).or_insert(d);
                }
                let new: Vec<u32> = (arms.iter().zip(&depths))
                    .map(|(e, &d)| pad_of.get(e).copied().unwrap_or(d + m))
                    .collect();
                let (default, rest) = new.split_last().expect("a br_table has a default");
                out.push(I::BrTable(rest.to_vec().into(), *default));
                for (j, &e) in pads.iter().enumerate() {
                    let depth = depth_of[&e];
                    out.push(I::End);
                    self.edge_code(out, e);
                    out.push(I::Br(depth + m - 1 - j as u32));
                }
            }
            _ => unreachable!("only br_if and br_table actions open code"),
        }
    }

    fn register_loops(&self) -> &[RegisterLoop] {
        match &self.kind {
            EmitKind::Paths { register_loops, .. } => register_loops,
            EmitKind::Edges { .. } => &[],
        }
    }

    /// On an edge that leaves register loops: their counts go to their paths' slots.
    fn flush_register_loops(&self, out: &mut Vec<I<'_>>, e: EdgeId) {
        for (j, l) in self.register_loops().iter().enumerate() {
            if l.exits.contains(&e) {
                let acc = self.locals.loops + j as u32;
                self.add_to_counter(out, l.addr, false, &[I::LocalGet(acc)]);
                out.extend([I::I64Const(0), I::LocalSet(acc)]);
            }
        }
    }

    fn leaves_register_loop(&self, e: EdgeId) -> bool {
        self.register_loops().iter().any(|l| l.exits.contains(&e))
    }

    /// Whether edge `e` carries any code in edges mode.
    fn edge_has_code(&self, e: EdgeId) -> bool {
        match &self.kind {
            EmitKind::Edges { counter, loops, .. } => {
                counter[e.index()].is_some()
                    || loops
                        .iter()
                        .any(|l| l.counter.entry == e || l.exits.contains(&e))
            }
            EmitKind::Paths { .. } => false,
        }
    }

    fn is_split(&self, n: NodeId) -> bool {
        match &self.kind {
            EmitKind::Paths { numbered, .. } => numbered.dag.is_split(n),
            EmitKind::Edges { .. } => false,
        }
    }

    /// The module-wide PEP word a function keeps in local `h` (ring head or every-K
    /// countdown), if any.
    fn shared_word(&self) -> Option<u32> {
        match &self.kind {
            EmitKind::Paths {
                counting: Counting::Ring,
                layout,
                ..
            } => Some(layout.ring_head),
            EmitKind::Paths {
                counting: Counting::Every { .. },
                layout,
                ..
            } => Some(layout.every_counter),
            _ => None,
        }
    }

    /// PEP: reload local `h` from memory at function start and after a call (the callee
    /// moved it on).
    pub fn after_call(&self, out: &mut Vec<I<'_>>) {
        if self.lazy_ring_head() {
            return;
        }
        if let Some(at) = self.shared_word() {
            out.extend([
                I::I32Const(0),
                I::I32Load(mem32(self.mem, at)),
                I::LocalSet(self.locals.ring_head),
            ]);
        }
    }

    /// PEP ring in a function without loops: each path end loads the head itself, instead
    /// of local `h` being loaded at entry and after calls. Without loops a path end runs at
    /// most once per activation, so this adds no load; and `h` is not live across the
    /// whole body, which in a huge body (a switch of thousands of cases) costs Cranelift's
    /// register allocator time quadratic in the number of blocks.
    fn lazy_ring_head(&self) -> bool {
        matches!(
            self.kind,
            EmitKind::Paths {
                counting: Counting::Ring,
                ..
            }
        ) && self.analysis.headers.is_empty()
    }

    /// PEP every-K: publish the countdown before a call and at function exit. (The ring
    /// head is stored at every path end anyway, for the sampler thread.)
    pub fn before_call(&self, out: &mut Vec<I<'_>>) {
        if let EmitKind::Paths {
            counting: Counting::Every { .. },
            layout,
            ..
        } = &self.kind
        {
            out.extend([
                I::I32Const(0),
                I::LocalGet(self.locals.ring_head),
                I::I32Store(mem32(self.mem, layout.every_counter)),
            ]);
        }
    }

    /// Code at function start (after the wrapper `block`): `r = Val(ENTRY → first)`.
    pub fn prologue(&self, out: &mut Vec<I<'_>>) {
        self.after_call(out);
        if let EmitKind::Paths { numbered, .. } = &self.kind {
            // Locals start at 0, so a zero start value needs no code.
            let e = numbered.dag.function_entry();
            self.restart(out, Some(e), false);
            self.bump_obvious(out, self.obvious_counter(Some(e)));
        }
    }

    /// Code after the wrapper block's `end`, where every return meets: record the path.
    pub fn epilogue(&self, out: &mut Vec<I<'_>>) {
        if let EmitKind::Paths { numbered, .. } = &self.kind {
            if numbered.dag.body(self.analysis.funnel).is_some() {
                let funnel_exit = self.analysis.cfg.succs(self.analysis.funnel).first();
                let e = funnel_exit.and_then(|&e| numbered.dag.real_edge(e));
                self.record(out, e);
                self.bump_obvious(out, self.obvious_counter(e));
            }
            self.before_call(out);
        }
    }
}

/// Pushes (as an i64) how often a loop's induction variable stepped since entry:
/// `(x - x0) / step`, in the variable's width, unsigned (wrapping subtraction is exact while
/// fewer than 2^width / |step| steps happened).
fn loop_steps(l: &LoopCount, x0: u32) -> Vec<I<'static>> {
    let c = l.counter;
    let (a, b) = if c.step > 0 {
        (c.local, x0)
    } else {
        (x0, c.local)
    };
    let abs = c.step.unsigned_abs();
    let mut v = vec![I::LocalGet(a), I::LocalGet(b)];
    if c.wide {
        v.push(I::I64Sub);
        if abs != 1 {
            v.extend([I::I64Const(abs as i64), I::I64DivU]);
        }
    } else {
        v.push(I::I32Sub);
        if abs != 1 {
            v.extend([I::I32Const(abs as i32), I::I32DivU]);
        }
        v.push(I::I64ExtendI32U);
    }
    v
}

fn table_addr(tables: &[(usize, u32)], k: usize) -> u32 {
    tables
        .iter()
        .find(|t| t.0 == k)
        .map(|t| t.1)
        .expect("a table is laid out for every br_table action that needs one")
}

/// How a `br_table` updates the path register in paths mode. Arms that run their code at
/// their targets ([`EdgeInfo::at_target`]) are left out of all three.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArmCode {
    /// One update before the `br_table`, right for every other arm (they all need the same
    /// one; there is usually one such arm, the default, or none). Each arm that runs its
    /// code at its target corrects for it there.
    Before(Update),
    /// The other arms that need code go through landing pads of their own (their labels
    /// carry no values): `block`s opened around the `br_table`, each closed by the arm's
    /// code and a `br` to its real target (see [`Emitter::close_opened`]).
    Pads(Vec<EdgeId>),
    /// An i64 table indexed by the arm: increments, or `poison` (negative) for cold arms;
    /// 0 for arms that run their code at their targets.
    Table(Vec<u64>),
}

/// What a `br_table` action (`arms`, default last; `bare`: no target label carries
/// values) does to the path register.
pub fn arm_code(
    numbered: &NumberedDag,
    edges: &[EdgeInfo],
    arms: &[EdgeId],
    bare: bool,
    poison: i64,
    scale: u64,
) -> ArmCode {
    let mut shared: Vec<EdgeId> = Vec::new();
    for &e in arms {
        if !edges[e.index()].at_target && !shared.contains(&e) {
            shared.push(e);
        }
    }
    let first = shared
        .first()
        .map_or(Update::Add(0), |&e| update(numbered, e, scale));
    if shared.iter().all(|&e| update(numbered, e, scale) == first) {
        return ArmCode::Before(first);
    }
    if bare {
        shared.retain(|&e| update(numbered, e, scale) != Update::Add(0));
        return ArmCode::Pads(shared);
    }
    ArmCode::Table(
        arms.iter()
            .map(|&e| match update(numbered, e, scale) {
                _ if edges[e.index()].at_target => 0,
                Update::Add(v) => v,
                Update::Poison => poison as u64,
            })
            .collect(),
    )
}
