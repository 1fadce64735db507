//! The walk over one body's operators that builds its CFG: one method per structured
//! control operator, each adding nodes, edges and the actions the emitter turns into code.

use super::*;

/// What the walk keeps between operators.
pub(super) struct Walker {
    b: Builder,
    start: u64,
    exit: NodeId,
    /// Where every `return` goes: one node before EXIT, so returns share one recording point.
    funnel: NodeId,
    frames: Vec<Frame>,
    /// The node the current operator is in; `None` in unreachable code.
    cur: Option<NodeId>,
    /// The operator's index.
    i: usize,
    returns: Vec<(usize, u32)>,
    direct_calls: Vec<(NodeId, u32)>,
    tail_calls: Vec<u32>,
    func_refs: Vec<u32>,
    call_nodes: Vec<(usize, Option<NodeId>)>,
    op_nodes: Vec<Option<NodeId>>,
    /// Induction-variable scan: per open loop (innermost last), how often each local is
    /// written and which writes are `x = x ± c`; the last three operators, for the pattern.
    loop_scan: Vec<LoopScan>,
    recent: [Recent; 3],
    loop_counters: Vec<LoopCounter>,
    loops: Vec<(NodeId, EdgeId)>,
}

impl Walker {
    pub fn new(start: u64) -> Walker {
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
        let (entry, exit) = (b.cfg.entry(), b.cfg.exit());
        let funnel = b.node(NodeKind::Return, start);
        Walker {
            b,
            start,
            exit,
            funnel,
            frames: vec![Frame {
                kind: FrameKind::Function,
                label: Some(funnel),
                join: funnel,
                if_src: None,
                has_else: false,
                bare_label: false,
            }],
            cur: Some(entry),
            i: 0,
            returns: Vec::new(),
            direct_calls: Vec::new(),
            tail_calls: Vec::new(),
            func_refs: Vec::new(),
            call_nodes: Vec::new(),
            op_nodes: Vec::new(),
            loop_scan: Vec::new(),
            recent: [Recent::Other; 3],
            loop_counters: Vec::new(),
            loops: Vec::new(),
        }
    }

    /// Takes one operator; true after the function's final `end`.
    pub fn step(&mut self, op: Operator<'_>, offset: u64) -> Result<bool, AnalysisError> {
        if crate::module::call_target(&op).is_some() {
            self.call_nodes.push((self.i, self.cur));
        }
        if let Some(op) = unsupported(&op) {
            return Err(AnalysisError::Unsupported { op, offset });
        }
        scan_induction(&op, self.cur, &mut self.recent, &mut self.loop_scan);
        match op {
            Operator::Block { blockty } => {
                let join = self.b.node(NodeKind::Other, offset);
                self.open(FrameKind::Block, Some(join), join, None, blockty);
            }
            Operator::Loop { blockty } => self.loop_(blockty, offset),
            Operator::If { blockty } => self.if_(blockty, offset),
            Operator::Else => self.else_(offset)?,
            Operator::End => {
                let function_ends = self.end(offset)?;
                if function_ends {
                    self.op_nodes.push(self.cur);
                    self.i += 1;
                    return Ok(true);
                }
            }
            Operator::Br { relative_depth } => {
                if let Some(c) = self.cur {
                    let (idx, t) = self.target(relative_depth, offset)?;
                    let e = self.b.edge(c, t, EdgeInfo::default());
                    self.b.act(self.i, Slot::Before, Action::Edge(e));
                    note_back_edge(&self.frames[idx], t, &mut self.b.headers);
                }
                self.cur = None;
            }
            Operator::BrIf { relative_depth } => self.br_if(relative_depth, offset)?,
            Operator::BrTable { targets } => self.br_table(&targets, offset)?,
            Operator::Return => {
                if let Some(c) = self.cur {
                    let e = self.b.edge(c, self.funnel, EdgeInfo::default());
                    self.b.act(self.i, Slot::Before, Action::Edge(e));
                }
                self.returns.push((self.i, self.frames.len() as u32 - 1));
                self.cur = None;
            }
            Operator::ReturnCall { .. }
            | Operator::ReturnCallIndirect { .. }
            | Operator::ReturnCallRef { .. } => {
                if let Some(c) = self.cur {
                    if let Operator::ReturnCall { function_index } = op {
                        self.direct_calls.push((c, function_index));
                        self.tail_calls.push(function_index);
                    }
                    let e = self.b.edge(c, self.exit, EdgeInfo::tail_call(offset));
                    self.b.act(self.i, Slot::Before, Action::TailExit(e));
                }
                self.cur = None;
            }
            Operator::Throw { .. } | Operator::ThrowRef => {
                // The activation ends here (pepper skips functions that could catch it),
                // so the path is recorded before the throw, like a tail call.
                if let Some(c) = self.cur {
                    let e = self.b.edge(c, self.exit, EdgeInfo::throw(offset));
                    self.b.act(self.i, Slot::Before, Action::TailExit(e));
                }
                self.cur = None;
            }
            Operator::Unreachable | Operator::Rethrow { .. } => {
                // A dead end (a trap): the P-DAG gives it a never-executed edge to EXIT.
                self.cur = None;
            }
            Operator::Call { .. } | Operator::CallIndirect { .. } | Operator::CallRef { .. } => {
                if let Some(c) = self.cur {
                    self.b.node_calls[c.index()] = true;
                    if let Operator::Call { function_index } = op {
                        self.direct_calls.push((c, function_index));
                    }
                }
            }
            Operator::RefFunc { function_index } => self.func_refs.push(function_index),
            _ => {}
        }
        self.op_nodes.push(self.cur);
        self.i += 1;
        Ok(false)
    }

    fn open(
        &mut self,
        kind: FrameKind,
        label: Option<NodeId>,
        join: NodeId,
        if_src: Option<(NodeId, LocalBranch)>,
        blockty: wasmparser::BlockType,
    ) {
        self.frames.push(Frame {
            kind,
            label,
            join,
            if_src,
            has_else: false,
            bare_label: match kind {
                // A loop's label takes the loop's parameters.
                FrameKind::Loop => !matches!(blockty, wasmparser::BlockType::FuncType(_)),
                _ => blockty == wasmparser::BlockType::Empty,
            },
        });
    }

    /// The frame a branch of `depth` targets, and its label's node (reachable code only
    /// branches to reachable labels).
    fn target(&self, depth: u32, offset: u64) -> Result<(usize, NodeId), AnalysisError> {
        let idx = self
            .frames
            .len()
            .checked_sub(1 + depth as usize)
            .ok_or_else(|| malformed(offset, &"branch depth out of range"))?;
        let t = self.frames[idx]
            .label
            .ok_or_else(|| malformed(offset, &"branch to unreachable label from reachable code"))?;
        Ok((idx, t))
    }

    fn loop_(&mut self, blockty: wasmparser::BlockType, offset: u64) {
        let (b, i) = (&mut self.b, self.i);
        let join = b.node(NodeKind::Other, offset);
        b.depth += 1;
        let label = self.cur.map(|c| {
            let h = b.node(NodeKind::LoopHeader, offset);
            let e = b.edge(c, h, EdgeInfo::default());
            b.act(i, Slot::Before, Action::Edge(e));
            b.act(i, Slot::After, Action::NodeStart(h));
            (h, e)
        });
        if let Some((h, _)) = label {
            self.cur = Some(h);
        }
        self.loop_scan.push(LoopScan {
            header: label,
            ..Default::default()
        });
        self.open(FrameKind::Loop, label.map(|l| l.0), join, None, blockty);
    }

    fn if_(&mut self, blockty: wasmparser::BlockType, offset: u64) {
        let (b, i) = (&mut self.b, self.i);
        let join = b.node(NodeKind::Other, offset);
        let site = b.site(offset, BranchKind::If, two_way());
        let if_src = self.cur.map(|c| {
            let then = b.node(NodeKind::Other, offset);
            let e = b.edge(c, then, EdgeInfo::branch(site, 0));
            b.act(i, Slot::After, Action::Edge(e));
            b.act(i, Slot::After, Action::NodeStart(then));
            (c, site, then)
        });
        if let Some((_, _, then)) = if_src {
            self.cur = Some(then);
        }
        let if_src = if_src.map(|(c, site, _)| (c, site));
        self.open(FrameKind::If, Some(join), join, if_src, blockty);
    }

    fn else_(&mut self, offset: u64) -> Result<(), AnalysisError> {
        let f = self
            .frames
            .last_mut()
            .ok_or_else(|| malformed(offset, &"else outside if"))?;
        f.has_else = true;
        let (join, if_src) = (f.join, f.if_src);
        let (b, i) = (&mut self.b, self.i);
        if let Some(c) = self.cur {
            let e = b.edge(c, join, EdgeInfo::default());
            b.act(i, Slot::Before, Action::Edge(e));
        }
        self.cur = None;
        if let Some((src, site)) = if_src {
            let arm = b.node(NodeKind::Other, offset);
            let e = b.edge(src, arm, EdgeInfo::branch(site, 1));
            b.act(i, Slot::After, Action::Edge(e));
            b.act(i, Slot::After, Action::NodeStart(arm));
            self.cur = Some(arm);
        }
        Ok(())
    }

    /// Closes a frame; true when it was the function's.
    fn end(&mut self, offset: u64) -> Result<bool, AnalysisError> {
        let f = self
            .frames
            .pop()
            .ok_or_else(|| malformed(offset, &"unbalanced end"))?;
        if f.kind == FrameKind::Loop {
            self.close_loop();
        }
        let (b, i) = (&mut self.b, self.i);
        if let Some(c) = self.cur {
            let e = b.edge(c, f.join, EdgeInfo::default());
            b.act(i, Slot::Before, Action::Edge(e));
        }
        if let (FrameKind::If, false, Some((src, site))) = (f.kind, f.has_else, f.if_src) {
            let e = b.edge(src, f.join, EdgeInfo::branch(site, 1));
            b.act(i, Slot::Before, Action::SynthElse { not_taken: e });
        }
        if f.kind == FrameKind::Function {
            return Ok(true);
        }
        self.cur = (!b.cfg.preds(f.join).is_empty()).then_some(f.join);
        if let Some(j) = self.cur {
            b.node_offset[j.index()] = offset;
            // An interpreter's dispatch: each case is reached only by its arm, so the
            // arm's code is a constant here rather than a table load (with a poison test)
            // before the `br_table`.
            if let &[e] = b.cfg.preds(j) {
                let arm = b.edges[e.index()]
                    .branch
                    .is_some_and(|(site, _)| b.sites[site.0 as usize].kind == BranchKind::BrTable);
                if arm {
                    b.edges[e.index()].at_target = true;
                    b.act(i, Slot::After, Action::Edge(e));
                }
            }
            b.act(i, Slot::After, Action::NodeStart(j));
        }
        Ok(false)
    }

    /// A loop's induction scan ends with it: its counter, and its writes count for the
    /// loop around it too.
    fn close_loop(&mut self) {
        self.b.depth -= 1;
        if let Some(l) = self.loop_scan.pop() {
            self.loop_counters.extend(l.counter());
            self.loops.extend(l.header);
            if let Some(outer) = self.loop_scan.last_mut() {
                for (x, n) in l.writes {
                    *outer.writes.entry(x).or_default() += n;
                }
            }
        }
    }

    fn br_if(&mut self, relative_depth: u32, offset: u64) -> Result<(), AnalysisError> {
        let site = self.b.site(offset, BranchKind::BrIf, two_way());
        let Some(c) = self.cur else {
            return Ok(());
        };
        let (idx, t) = self.target(relative_depth, offset)?;
        let bare = self.frames[idx].bare_label;
        let (b, i) = (&mut self.b, self.i);
        let fall = b.node(NodeKind::Other, offset);
        let taken = b.edge(c, t, EdgeInfo::branch(site, 0));
        let fe = b.edge(c, fall, EdgeInfo::branch(site, 1));
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
        note_back_edge(&self.frames[idx], t, &mut b.headers);
        self.cur = Some(fall);
        Ok(())
    }

    fn br_table(
        &mut self,
        targets: &wasmparser::BrTable<'_>,
        offset: u64,
    ) -> Result<(), AnalysisError> {
        let mut depths: Vec<u32> = Vec::with_capacity(targets.len() as usize + 1);
        for t in targets.targets() {
            depths.push(t.map_err(|e| malformed(offset, &e))?);
        }
        depths.push(targets.default());
        let (distinct, arm_slot) = distinct_targets(&depths);
        let site = self.b.site(
            offset,
            BranchKind::BrTable,
            table_outcomes(&depths, &distinct, &arm_slot),
        );
        if let Some(c) = self.cur {
            let mut slot_edges = Vec::with_capacity(distinct.len());
            let mut bare = true;
            for (k, &d) in distinct.iter().enumerate() {
                let (idx, t) = self.target(d, offset)?;
                bare &= self.frames[idx].bare_label;
                let e = self.b.edge(c, t, EdgeInfo::branch(site, k as u32));
                note_back_edge(&self.frames[idx], t, &mut self.b.headers);
                slot_edges.push(e);
            }
            let arms = arm_slot.iter().map(|&k| slot_edges[k]).collect();
            self.b
                .act(self.i, Slot::Before, Action::BrTable { arms, bare });
        }
        self.cur = None;
        Ok(())
    }

    /// The analysis, once the body's operators are all read.
    pub fn finish(self) -> Result<FunctionAnalysis, AnalysisError> {
        let mut b = self.b;
        if !self.frames.is_empty() {
            return Err(malformed(self.start, &"body ends inside a block"));
        }
        if !b.cfg.preds(self.funnel).is_empty() {
            b.edge(self.funnel, self.exit, EdgeInfo::default());
        }
        b.actions.sort_by_key(|a| (a.0, a.1));
        b.headers.sort();
        b.headers.dedup();
        let num_nodes = b.node_kind.len();
        Ok(FunctionAnalysis {
            cfg: b.cfg,
            edges: b.edges,
            node_kind: b.node_kind,
            node_offset: b.node_offset,
            node_depth: b.node_depth,
            node_calls: b.node_calls,
            headers: b.headers,
            funnel: self.funnel,
            sites: b.sites,
            actions: b.actions,
            returns: self.returns,
            num_ops: self.i,
            direct_calls: self.direct_calls,
            tail_calls: self.tail_calls,
            call_nodes: self.call_nodes,
            node_ops: node_ops(&self.op_nodes, num_nodes),
            op_nodes: self.op_nodes,
            func_refs: self.func_refs,
            loop_counters: self.loop_counters,
            loops: self.loops,
        })
    }
}

/// How many operators each of `nodes` nodes runs, from the node each operator leaves
/// execution in.
fn node_ops(op_nodes: &[Option<NodeId>], nodes: usize) -> Vec<u32> {
    let mut ops = vec![0u32; nodes];
    for n in op_nodes.iter().flatten() {
        ops[n.index()] = ops[n.index()].saturating_add(1);
    }
    ops
}

/// A `br_table`'s distinct targets in order of first appearance (an arm repeated in the table is one outcome), and each
/// arm's position among them.
fn distinct_targets(depths: &[u32]) -> (Vec<u32>, Vec<usize>) {
    // A switch of thousands of cases has as many arms and targets: no search per arm.
    let mut slot_of = std::collections::HashMap::with_capacity(depths.len());
    let mut distinct: Vec<u32> = Vec::new();
    let mut arm_slot = Vec::with_capacity(depths.len());
    for &d in depths {
        let k = *slot_of.entry(d).or_insert_with(|| {
            distinct.push(d);
            distinct.len() - 1
        });
        arm_slot.push(k);
    }
    (distinct, arm_slot)
}

/// A `br_table`'s outcome names: each distinct target with the arms that go there.
fn table_outcomes(depths: &[u32], distinct: &[u32], arm_slot: &[usize]) -> Vec<String> {
    let mut arms: Vec<Vec<String>> = vec![Vec::new(); distinct.len()];
    for (a, &k) in arm_slot.iter().enumerate() {
        arms[k].push(match a + 1 == depths.len() {
            true => "default".to_string(),
            false => a.to_string(),
        });
    }
    (distinct.iter().zip(arms))
        .map(|(d, arms)| format!("depth {d} (arms {})", arms.join(",")))
        .collect()
}
