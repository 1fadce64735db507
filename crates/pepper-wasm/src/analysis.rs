//! From a wasm function body to a [`Cfg`] plus the places where instrumentation goes.
//!
//! Wasm control flow is structured, so the CFG comes from one pass over the operators with
//! a stack of control frames. Nodes start where control can join or split: loop headers, the
//! arms of `if`, the fall-through of `br_if`, and the continuation after `end`. Calls do not
//! end a node: paths are intraprocedural (PEP §3.1). Every function exit (`return`, a branch
//! to the function label, the final `end`) funnels into one node `X` whose only edge goes to
//! EXIT, so exact counting needs one recording point per function.
//!
//! The analysis does not decide what code to insert; it records *actions* at operator
//! positions (before or after operator `i`), and the emitter turns each into code for the
//! chosen mode. That keeps one CFG for path numbering, edge counting and decoding.

use pepper_cfg::{Cfg, EdgeId, NodeId};
use pepper_profile::BranchKind;
use std::collections::HashMap;
use wasmparser::{FunctionBody, Operator};

mod walk;

/// Index of a branch instruction within one function.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub struct LocalBranch(pub u32);

/// A branch instruction found in the body.
#[derive(Clone, Debug)]
pub struct BranchSite {
    pub offset: u64,
    pub kind: BranchKind,
    pub outcomes: Vec<String>,
}

/// What a node is, for reporting path start and end points.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Entry,
    Exit,
    /// The funnel after the body: all returns meet here.
    Return,
    LoopHeader,
    Other,
}

/// Where an action goes relative to operator `op`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Slot {
    Before,
    After,
}

#[derive(Clone, Debug)]
pub enum Action {
    /// Unconditional code for one edge (taken whenever control passes this point).
    Edge(EdgeId),
    /// Before a `br_if` (condition on the stack): code for whichever edge is taken.
    /// `bare`: the target label carries no values, so the `br_if` may be rewritten as
    /// `if; <taken-edge code>; br L+1; end` (a trampoline on the taken edge only).
    BrIf {
        taken: EdgeId,
        fall: EdgeId,
        bare: bool,
    },
    /// Before a `br_table` (index on the stack): per-arm edges, default last. `bare`: no
    /// target label carries values (so an arm can be sent through a landing pad of its
    /// own, `block ... end; <arm code>; br target`).
    BrTable { arms: Vec<EdgeId>, bare: bool },
    /// Before the `end` of an `if` without `else`: insert `else` and the not-taken edge code.
    SynthElse { not_taken: EdgeId },
    /// A node starts here (a path ends and restarts if the node is split).
    NodeStart(NodeId),
    /// After a `br_if`: the fall-through edge, for code that runs only when the branch is
    /// not taken (edge counters; a path increment when the taken edge's value is 0).
    FallEdge {
        taken: EdgeId,
        fall: EdgeId,
        bare: bool,
    },
    /// Before a `return_call*`: the edge to EXIT, then record the path.
    TailExit(EdgeId),
}

/// Per-edge information: which branch outcome it is, if any.
#[derive(Copy, Clone, Debug, Default)]
pub struct EdgeInfo {
    pub branch: Option<(LocalBranch, u32)>,
    /// Edge into EXIT made by a tail call at this offset.
    pub tail_call: Option<u64>,
    /// Edge into EXIT made by a `throw`/`throw_ref` at this offset.
    pub throw: Option<u64>,
    /// A `br_table` arm whose target has no other predecessor: its code runs at the
    /// target ([`Action::Edge`] there) as a constant, and the arm table, if the
    /// `br_table` still needs one, holds a no-op for it.
    pub at_target: bool,
}

impl EdgeInfo {
    fn branch(site: LocalBranch, outcome: u32) -> Self {
        EdgeInfo {
            branch: Some((site, outcome)),
            ..EdgeInfo::default()
        }
    }
    fn tail_call(offset: u64) -> Self {
        EdgeInfo {
            tail_call: Some(offset),
            ..EdgeInfo::default()
        }
    }
    fn throw(offset: u64) -> Self {
        EdgeInfo {
            throw: Some(offset),
            ..EdgeInfo::default()
        }
    }
}

/// The analysis of one function body.
#[derive(Clone, Debug)]
pub struct FunctionAnalysis {
    pub cfg: Cfg,
    pub edges: Vec<EdgeInfo>,
    pub node_kind: Vec<NodeKind>,
    /// Original offset of the instruction where each node begins.
    pub node_offset: Vec<u64>,
    /// Loop nesting depth of each node (a static frequency estimate).
    pub node_depth: Vec<u32>,
    /// Whether each node's straight-line code calls a function (Ball & Larus' call
    /// heuristic: a successor that calls is the less likely one).
    pub node_calls: Vec<bool>,
    /// Loop headers that have a back edge: always split (PEP §3.2).
    pub headers: Vec<NodeId>,
    /// The return funnel `X`.
    pub funnel: NodeId,
    pub sites: Vec<BranchSite>,
    /// Actions sorted by (operator index, slot).
    pub actions: Vec<(usize, Slot, Action)>,
    /// `return` operators (by index) and the depth of the wrapper block from there.
    pub returns: Vec<(usize, u32)>,
    /// Number of operators in the body (the final `end` is the last).
    pub num_ops: usize,
    /// Each direct call (`call`, `return_call`) in reachable code: the node it is in and
    /// the function it calls. A node runs its calls once per execution.
    pub direct_calls: Vec<(NodeId, u32)>,
    /// The functions this one `return_call`s (in reachable code): a switchable callee
    /// entered that way checks the flag at entry (`SwitchPlacement::entry_check`).
    pub tail_calls: Vec<u32>,
    /// Every call operator (`module::call_target`'s list, so the k-th is the
    /// function's k-th call site), in operator order: its operator index and its node
    /// (`None` in unreachable code).
    pub call_nodes: Vec<(usize, Option<NodeId>)>,
    /// The node execution is in after each operator (`None` where code is unreachable).
    pub op_nodes: Vec<Option<NodeId>>,
    /// Operators each node runs (its own code, not its callees'): what a path costs, in
    /// the profile's measure of work.
    pub node_ops: Vec<u32>,
    /// Functions whose reference the body takes (`ref.func`): indirect-call targets.
    pub func_refs: Vec<u32>,
    /// Loops with an induction variable: a local the loop body writes once, by adding a
    /// constant to itself. The node holding that write runs `(x - x_at_entry) / step` times
    /// per entry of the loop, which exact edge counting can read at the loop's exits
    /// instead of counting an edge on every iteration.
    pub loop_counters: Vec<LoopCounter>,
    /// Every reachable loop: its header and the edge that falls into it (its only entry).
    pub loops: Vec<(NodeId, EdgeId)>,
}

/// An induction variable of a loop (see [`FunctionAnalysis::loop_counters`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopCounter {
    pub header: NodeId,
    /// The edge that falls into the loop (the loop's only entry).
    pub entry: EdgeId,
    /// The node whose straight-line code holds the variable's one write.
    pub node: NodeId,
    pub local: u32,
    /// i64 (else i32).
    pub wide: bool,
    /// What each execution of the write adds (never 0).
    pub step: i64,
}

/// Why a function cannot be instrumented.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AnalysisError {
    #[error("unsupported instruction `{op}` at offset {offset:#x}")]
    Unsupported { op: &'static str, offset: u64 },
    #[error("malformed body at offset {offset:#x}: {message}")]
    Malformed { offset: u64, message: String },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FrameKind {
    Function,
    Block,
    Loop,
    If,
}

struct Frame {
    kind: FrameKind,
    /// Branch target: the header for loops, the continuation otherwise. `None` when the
    /// whole construct is unreachable.
    label: Option<NodeId>,
    /// Continuation after `end`.
    join: NodeId,
    /// For `if`: the node that ends with the `if`, and its branch site.
    if_src: Option<(NodeId, LocalBranch)>,
    has_else: bool,
    /// A branch to this label carries no values (so a `br_if` to it can become an `if`
    /// around a `br`). Conservatively false when the arity would need the type section.
    bare_label: bool,
}

/// The CFG, edges, branch sites and actions of a body as they are built.
struct Builder {
    depth: u32,
    node_depth: Vec<u32>,
    node_calls: Vec<bool>,
    cfg: Cfg,
    edges: Vec<EdgeInfo>,
    node_kind: Vec<NodeKind>,
    node_offset: Vec<u64>,
    headers: Vec<NodeId>,
    sites: Vec<BranchSite>,
    actions: Vec<(usize, Slot, Action)>,
}

impl Builder {
    fn node(&mut self, kind: NodeKind, offset: u64) -> NodeId {
        let n = self.cfg.add_node();
        self.node_depth.push(self.depth);
        self.node_calls.push(false);
        self.node_kind.push(kind);
        self.node_offset.push(offset);
        n
    }
    fn edge(&mut self, src: NodeId, dst: NodeId, info: EdgeInfo) -> EdgeId {
        let e = self.cfg.add_edge(src, dst);
        self.edges.push(info);
        e
    }
    fn site(&mut self, offset: u64, kind: BranchKind, outcomes: Vec<String>) -> LocalBranch {
        self.sites.push(BranchSite {
            offset,
            kind,
            outcomes,
        });
        LocalBranch(self.sites.len() as u32 - 1)
    }
    fn act(&mut self, op: usize, slot: Slot, a: Action) {
        self.actions.push((op, slot, a));
    }
}

/// The operators just before a `local.set`/`local.tee`, as far as the induction pattern
/// `local.get x; const c; add|sub` cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recent {
    Get(u32),
    Const { wide: bool, value: i64 },
    Add,
    Sub,
    Other,
}

/// One open loop of the induction-variable scan.
#[derive(Default)]
struct LoopScan {
    /// Header and entry edge (`None`: the loop is unreachable).
    header: Option<(NodeId, EdgeId)>,
    /// Writes of each local anywhere in the loop (an inner loop's are added when it ends).
    writes: HashMap<u32, u32>,
    /// `x = x + step` writes directly in this loop (not an inner one): (x, node, wide, step).
    candidates: Vec<(u32, NodeId, bool, i64)>,
}

impl LoopScan {
    /// At the loop's `end`: the first candidate whose local the loop writes nowhere else.
    fn counter(&self) -> Option<LoopCounter> {
        let (header, entry) = self.header?;
        let &(local, node, wide, step) = self
            .candidates
            .iter()
            .find(|c| self.writes.get(&c.0) == Some(&1))?;
        Some(LoopCounter {
            header,
            entry,
            node,
            local,
            wide,
            step,
        })
    }
}

/// Feeds one operator (about to run in node `cur`) to the induction-variable scan.
fn scan_induction(
    op: &Operator<'_>,
    cur: Option<NodeId>,
    recent: &mut [Recent; 3],
    loops: &mut [LoopScan],
) {
    if let (
        Operator::LocalSet { local_index: x } | Operator::LocalTee { local_index: x },
        Some(l),
    ) = (op, loops.last_mut())
    {
        let x = *x;
        *l.writes.entry(x).or_default() += 1;
        if let ([Recent::Get(g), Recent::Const { wide, value }, arith], Some(node)) = (*recent, cur)
        {
            let step = match arith {
                Recent::Add => Some(value),
                Recent::Sub => value.checked_neg(),
                _ => None,
            };
            // Small steps only: `(x - x0) / step` is the exact count while a single entry
            // of the loop runs fewer than 2^32 / |step| (i32) iterations.
            let small = |s: &i64| *s != 0 && s.unsigned_abs() <= 1 << 16;
            if let (true, Some(step)) = (g == x, step.filter(small)) {
                l.candidates.push((x, node, wide, step));
            }
        }
    }
    let now = match *op {
        Operator::LocalGet { local_index } => Recent::Get(local_index),
        Operator::I32Const { value } => Recent::Const {
            wide: false,
            value: value as i64,
        },
        Operator::I64Const { value } => Recent::Const { wide: true, value },
        Operator::I32Add | Operator::I64Add => Recent::Add,
        Operator::I32Sub | Operator::I64Sub => Recent::Sub,
        _ => Recent::Other,
    };
    *recent = [recent[1], recent[2], now];
}

fn two_way() -> Vec<String> {
    vec!["taken".to_string(), "not-taken".to_string()]
}

/// Builds the CFG and action list of one function body.
pub fn analyze(body: &FunctionBody<'_>) -> Result<FunctionAnalysis, AnalysisError> {
    let start = body.range().start;
    let mut w = walk::Walker::new(start);
    let mut reader = body
        .get_operators_reader()
        .map_err(|e| malformed(start, &e))?;
    while !reader.eof() {
        let (op, offset) = reader
            .read_with_offset()
            .map_err(|e| malformed(start, &e))?;
        if w.step(op, offset)? {
            break;
        }
    }
    w.finish()
}

fn malformed(offset: u64, e: &dyn std::fmt::Display) -> AnalysisError {
    AnalysisError::Malformed {
        offset,
        message: e.to_string(),
    }
}

/// Instructions whose control flow pepper does not model yet: exception handlers (a call
/// may transfer to a `catch`) and GC's conditional `br_on_*` branches.
fn unsupported(op: &Operator<'_>) -> Option<&'static str> {
    Some(match op {
        Operator::TryTable { .. } => "try_table",
        Operator::Try { .. } => "try",
        Operator::Catch { .. } | Operator::CatchAll => "catch",
        Operator::Delegate { .. } => "delegate",
        Operator::BrOnNull { .. } => "br_on_null",
        Operator::BrOnNonNull { .. } => "br_on_non_null",
        Operator::BrOnCast { .. } => "br_on_cast",
        Operator::BrOnCastFail { .. } => "br_on_cast_fail",
        _ => return None,
    })
}

fn note_back_edge(frame: &Frame, target: NodeId, headers: &mut Vec<NodeId>) {
    if frame.kind == FrameKind::Loop {
        headers.push(target);
    }
}
