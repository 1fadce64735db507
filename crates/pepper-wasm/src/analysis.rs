//! From a wasm function body to a [`Cfg`] plus the places where instrumentation goes.
//!
//! Wasm control flow is structured, so the CFG comes from one pass over the operators with
//! a stack of control frames. Nodes start where control can join or split: loop headers, the
//! arms of `if`, the fall-through of `br_if`, and the continuation after `end`. Calls do not
//! end a node: paths are intraprocedural (PEP §3.1). Every function exit (`return`, a branch
//! to the function label, the final `end`) funnels into one node `X` whose only edge goes to
//! EXIT, so exact counting needs one recording point per function (digest pitfall P5).
//!
//! The analysis does not decide what code to insert; it records *actions* at operator
//! positions (before or after operator `i`), and the emitter turns each into code for the
//! chosen mode. That keeps one CFG for path numbering, edge counting and decoding.

use pepper_cfg::{Cfg, EdgeId, NodeId};
use pepper_profile::BranchKind;
use std::collections::HashMap;
use wasmparser::{FunctionBody, Operator};

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
    /// Every call operator (`module::call_target`'s list, so the k-th is the
    /// function's k-th call site), in operator order: its operator index and its node
    /// (`None` in unreachable code).
    pub call_nodes: Vec<(usize, Option<NodeId>)>,
    /// The node execution is in after each operator (`None` where code is unreachable).
    pub op_nodes: Vec<Option<NodeId>>,
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
    let malformed = |offset: u64, e: &dyn std::fmt::Display| AnalysisError::Malformed {
        offset,
        message: e.to_string(),
    };
    let start = body.range().start;
    let mut b = Builder {
        depth: 0,
        node_depth: vec![0, 0],
        node_calls: vec![false, false],
        cfg: Cfg::new(),
        edges: Vec::new(),
        node_kind: vec![NodeKind::Entry, NodeKind::Exit],
        node_offset: vec![start, start],
        headers: Vec::new(),
        sites: Vec::new(),
        actions: Vec::new(),
    };
    let entry = b.cfg.entry();
    let exit = b.cfg.exit();
    let funnel = b.node(NodeKind::Return, start);
    let mut frames = vec![Frame {
        kind: FrameKind::Function,
        label: Some(funnel),
        join: funnel,
        if_src: None,
        has_else: false,
        bare_label: false,
    }];
    let mut cur: Option<NodeId> = Some(entry);
    let mut returns = Vec::new();
    let (mut direct_calls, mut func_refs) = (Vec::new(), Vec::new());
    let (mut call_nodes, mut op_nodes) = (Vec::new(), Vec::new());
    let mut reader = body
        .get_operators_reader()
        .map_err(|e| malformed(start, &e))?;
    let mut i = 0usize;
    // Induction-variable scan: per open loop (innermost last), how often each local is
    // written and which writes are `x = x ± c`; the last three operators, for the pattern.
    let mut loop_scan: Vec<LoopScan> = Vec::new();
    let mut recent: [Recent; 3] = [Recent::Other; 3];
    let mut loop_counters = Vec::new();
    let mut loops = Vec::new();
    while !reader.eof() {
        let (op, offset) = reader
            .read_with_offset()
            .map_err(|e| malformed(start, &e))?;
        if crate::module::call_target(&op).is_some() {
            call_nodes.push((i, cur));
        }
        if let Some(op) = unsupported(&op) {
            return Err(AnalysisError::Unsupported { op, offset });
        }
        scan_induction(&op, cur, &mut recent, &mut loop_scan);
        let target =
            |frames: &[Frame], depth: u32| -> Result<(usize, Option<NodeId>), AnalysisError> {
                let idx = frames
                    .len()
                    .checked_sub(1 + depth as usize)
                    .ok_or_else(|| malformed(offset, &"branch depth out of range"))?;
                Ok((idx, frames[idx].label))
            };
        match op {
            Operator::Block { blockty } => {
                let join = b.node(NodeKind::Other, offset);
                frames.push(Frame {
                    kind: FrameKind::Block,
                    label: Some(join),
                    join,
                    if_src: None,
                    has_else: false,
                    bare_label: blockty == wasmparser::BlockType::Empty,
                });
            }
            Operator::Loop { blockty } => {
                let join = b.node(NodeKind::Other, offset);
                b.depth += 1;
                let label = if let Some(c) = cur {
                    let h = b.node(NodeKind::LoopHeader, offset);
                    let e = b.edge(c, h, EdgeInfo::default());
                    b.act(i, Slot::Before, Action::Edge(e));
                    b.act(i, Slot::After, Action::NodeStart(h));
                    cur = Some(h);
                    Some((h, e))
                } else {
                    None
                };
                loop_scan.push(LoopScan {
                    header: label,
                    ..Default::default()
                });
                let label = label.map(|l| l.0);
                frames.push(Frame {
                    kind: FrameKind::Loop,
                    label,
                    join,
                    if_src: None,
                    has_else: false,
                    // A loop's label takes the loop's parameters.
                    bare_label: !matches!(blockty, wasmparser::BlockType::FuncType(_)),
                });
            }
            Operator::If { blockty } => {
                let join = b.node(NodeKind::Other, offset);
                let site = b.site(offset, BranchKind::If, two_way());
                let if_src = if let Some(c) = cur {
                    let then = b.node(NodeKind::Other, offset);
                    let e = b.edge(c, then, EdgeInfo::branch(site, 0));
                    b.act(i, Slot::After, Action::Edge(e));
                    b.act(i, Slot::After, Action::NodeStart(then));
                    cur = Some(then);
                    Some((c, site))
                } else {
                    None
                };
                frames.push(Frame {
                    kind: FrameKind::If,
                    label: Some(join),
                    join,
                    if_src,
                    has_else: false,
                    bare_label: blockty == wasmparser::BlockType::Empty,
                });
            }
            Operator::Else => {
                let f = frames
                    .last_mut()
                    .ok_or_else(|| malformed(offset, &"else outside if"))?;
                f.has_else = true;
                let (join, if_src) = (f.join, f.if_src);
                if let Some(c) = cur {
                    let e = b.edge(c, join, EdgeInfo::default());
                    b.act(i, Slot::Before, Action::Edge(e));
                }
                cur = None;
                if let Some((src, site)) = if_src {
                    let arm = b.node(NodeKind::Other, offset);
                    let e = b.edge(src, arm, EdgeInfo::branch(site, 1));
                    b.act(i, Slot::After, Action::Edge(e));
                    b.act(i, Slot::After, Action::NodeStart(arm));
                    cur = Some(arm);
                }
            }
            Operator::End => {
                let f = frames
                    .pop()
                    .ok_or_else(|| malformed(offset, &"unbalanced end"))?;
                if f.kind == FrameKind::Loop {
                    b.depth -= 1;
                    if let Some(l) = loop_scan.pop() {
                        loop_counters.extend(l.counter());
                        loops.extend(l.header);
                        // The enclosing loop contains this one's writes too.
                        if let Some(outer) = loop_scan.last_mut() {
                            for (x, n) in l.writes {
                                *outer.writes.entry(x).or_default() += n;
                            }
                        }
                    }
                }
                if let Some(c) = cur {
                    let e = b.edge(c, f.join, EdgeInfo::default());
                    b.act(i, Slot::Before, Action::Edge(e));
                }
                if f.kind == FrameKind::If && !f.has_else {
                    if let Some((src, site)) = f.if_src {
                        let e = b.edge(src, f.join, EdgeInfo::branch(site, 1));
                        b.act(i, Slot::Before, Action::SynthElse { not_taken: e });
                    }
                }
                if f.kind == FrameKind::Function {
                    op_nodes.push(cur);
                    i += 1;
                    break;
                }
                cur = (!b.cfg.preds(f.join).is_empty()).then_some(f.join);
                if let Some(j) = cur {
                    b.node_offset[j.index()] = offset;
                    // An interpreter's dispatch: each case is reached only by its arm, so
                    // the arm's code is a constant here rather than a table load (with a
                    // poison test) before the `br_table`.
                    if let &[e] = b.cfg.preds(j) {
                        let arm = b.edges[e.index()].branch.is_some_and(|(site, _)| {
                            b.sites[site.0 as usize].kind == BranchKind::BrTable
                        });
                        if arm {
                            b.edges[e.index()].at_target = true;
                            b.act(i, Slot::After, Action::Edge(e));
                        }
                    }
                    b.act(i, Slot::After, Action::NodeStart(j));
                }
            }
            Operator::Br { relative_depth } => {
                if let Some(c) = cur {
                    let (idx, t) = target(&frames, relative_depth)?;
                    let t = t.ok_or_else(|| {
                        malformed(offset, &"branch to unreachable label from reachable code")
                    })?;
                    let e = b.edge(c, t, EdgeInfo::default());
                    b.act(i, Slot::Before, Action::Edge(e));
                    note_back_edge(&frames[idx], t, &mut b.headers);
                }
                cur = None;
            }
            Operator::BrIf { relative_depth } => {
                let site = b.site(offset, BranchKind::BrIf, two_way());
                if let Some(c) = cur {
                    let (idx, t) = target(&frames, relative_depth)?;
                    let t = t.ok_or_else(|| {
                        malformed(offset, &"branch to unreachable label from reachable code")
                    })?;
                    let fall = b.node(NodeKind::Other, offset);
                    let taken = b.edge(c, t, EdgeInfo::branch(site, 0));
                    let fe = b.edge(c, fall, EdgeInfo::branch(site, 1));
                    let bare = frames[idx].bare_label;
                    b.act(
                        i,
                        Slot::Before,
                        Action::BrIf {
                            taken,
                            fall: fe,
                            bare,
                        },
                    );
                    b.act(
                        i,
                        Slot::After,
                        Action::FallEdge {
                            taken,
                            fall: fe,
                            bare,
                        },
                    );
                    b.act(i, Slot::After, Action::NodeStart(fall));
                    note_back_edge(&frames[idx], t, &mut b.headers);
                    cur = Some(fall);
                }
            }
            Operator::BrTable { targets } => {
                let mut depths: Vec<u32> = Vec::with_capacity(targets.len() as usize + 1);
                for t in targets.targets() {
                    depths.push(t.map_err(|e| malformed(offset, &e))?);
                }
                depths.push(targets.default());
                // Distinct targets in order of first appearance (pitfall P3).
                let mut distinct: Vec<u32> = Vec::new();
                let mut arm_slot = Vec::with_capacity(depths.len());
                for &d in &depths {
                    let k = match distinct.iter().position(|&x| x == d) {
                        Some(k) => k,
                        None => {
                            distinct.push(d);
                            distinct.len() - 1
                        }
                    };
                    arm_slot.push(k);
                }
                let outcomes = distinct
                    .iter()
                    .enumerate()
                    .map(|(k, d)| {
                        let arms: Vec<String> = arm_slot
                            .iter()
                            .enumerate()
                            .filter(|&(_, &s)| s == k)
                            .map(|(a, _)| {
                                if a + 1 == depths.len() {
                                    "default".to_string()
                                } else {
                                    a.to_string()
                                }
                            })
                            .collect();
                        format!("depth {d} (arms {})", arms.join(","))
                    })
                    .collect();
                let site = b.site(offset, BranchKind::BrTable, outcomes);
                if let Some(c) = cur {
                    let mut slot_edges = Vec::with_capacity(distinct.len());
                    let mut bare = true;
                    for (k, &d) in distinct.iter().enumerate() {
                        let (idx, t) = target(&frames, d)?;
                        bare &= frames[idx].bare_label;
                        let t = t.ok_or_else(|| {
                            malformed(offset, &"branch to unreachable label from reachable code")
                        })?;
                        let e = b.edge(c, t, EdgeInfo::branch(site, k as u32));
                        note_back_edge(&frames[idx], t, &mut b.headers);
                        slot_edges.push(e);
                    }
                    let arms = arm_slot.iter().map(|&k| slot_edges[k]).collect();
                    b.act(i, Slot::Before, Action::BrTable { arms, bare });
                }
                cur = None;
            }
            Operator::Return => {
                if let Some(c) = cur {
                    let e = b.edge(c, funnel, EdgeInfo::default());
                    b.act(i, Slot::Before, Action::Edge(e));
                }
                returns.push((i, frames.len() as u32 - 1));
                cur = None;
            }
            Operator::ReturnCall { .. }
            | Operator::ReturnCallIndirect { .. }
            | Operator::ReturnCallRef { .. } => {
                if let Some(c) = cur {
                    if let Operator::ReturnCall { function_index } = op {
                        direct_calls.push((c, function_index));
                    }
                    let e = b.edge(c, exit, EdgeInfo::tail_call(offset));
                    b.act(i, Slot::Before, Action::TailExit(e));
                }
                cur = None;
            }
            Operator::Throw { .. } | Operator::ThrowRef => {
                // The activation ends here (pepper skips functions that could catch it), so
                // the path is recorded before the throw, like a tail call.
                if let Some(c) = cur {
                    let e = b.edge(c, exit, EdgeInfo::throw(offset));
                    b.act(i, Slot::Before, Action::TailExit(e));
                }
                cur = None;
            }
            Operator::Unreachable | Operator::Rethrow { .. } => {
                // A dead end (a trap): the P-DAG gives it a never-executed edge to EXIT (P7).
                cur = None;
            }
            Operator::Call { .. } | Operator::CallIndirect { .. } | Operator::CallRef { .. } => {
                if let Some(c) = cur {
                    b.node_calls[c.index()] = true;
                    if let Operator::Call { function_index } = op {
                        direct_calls.push((c, function_index));
                    }
                }
            }
            Operator::RefFunc { function_index } => func_refs.push(function_index),
            _ => {}
        }
        op_nodes.push(cur);
        i += 1;
    }
    if !frames.is_empty() {
        return Err(malformed(start, &"body ends inside a block"));
    }
    if !b.cfg.preds(funnel).is_empty() {
        b.edge(funnel, exit, EdgeInfo::default());
    }
    b.actions.sort_by_key(|a| (a.0, a.1));
    b.headers.sort();
    b.headers.dedup();
    Ok(FunctionAnalysis {
        cfg: b.cfg,
        edges: b.edges,
        node_kind: b.node_kind,
        node_offset: b.node_offset,
        node_depth: b.node_depth,
        node_calls: b.node_calls,
        headers: b.headers,
        funnel,
        sites: b.sites,
        actions: b.actions,
        returns,
        num_ops: i,
        direct_calls,
        call_nodes,
        op_nodes,
        func_refs,
        loop_counters,
        loops,
    })
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
