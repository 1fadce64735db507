//! The code for each analysis action: edges, node starts (where split loop headers end
//! and restart paths), `br_if` trampolines and `br_table` arms.

use super::*;

impl Emitter<'_> {
    /// Code for action number `k`. Returns true when the code opened a `br_if` trampoline
    /// (`if; ...`) or `br_table` landing pads: the caller then writes the branch through
    /// [`Emitter::close_opened`] instead of copying it.
    pub fn action(&self, out: &mut Vec<I<'_>>, k: usize, action: &Action) -> bool {
        match action {
            Action::Edge(e) => self.edge_code(out, *e),
            Action::SynthElse { not_taken } => {
                out.push(I::Else);
                self.edge_code(out, *not_taken);
            }
            Action::TailExit(e) => {
                self.edge_code(out, *e);
                if let EmitKind::Paths { numbered, .. } = &self.kind {
                    self.record(out, numbered.dag.real_edge(*e));
                }
            }
            Action::FallEdge { taken, fall, bare } => match &self.kind {
                EmitKind::Edges { .. } => self.edge_code(out, *fall),
                // When the taken edge needs nothing, or has its own trampoline,
                // the fall-through's update goes where only the fall-through runs.
                EmitKind::Paths { .. } => {
                    if self.upd(*taken) == Update::Add(0) || *bare {
                        self.apply(out, self.upd(*fall));
                    }
                    self.bump_obvious(out, self.edge_obvious_counter(*fall));
                    self.flush_register_loops(out, *fall);
                }
            },
            Action::NodeStart(n) => self.node_start(out, *n),
            Action::BrIf { taken, fall, bare } => return self.br_if(out, *taken, *fall, *bare),
            Action::BrTable { arms, .. } => return self.br_table(out, k, arms),
        }
        false
    }

    /// A node starts: at a split loop header, the path ends and the next one starts (PEP
    /// §3.2).
    fn node_start(&self, out: &mut Vec<I<'_>>, n: NodeId) {
        if self.is_split(n) {
            if let EmitKind::Paths { numbered, .. } = &self.kind {
                // PEP §3.2: the path ends at h_a (Val(h_a→EXIT) is 0); the next starts
                // at h_b. With cold elimination, a header whose body has no hot path
                // restarts poisoned (TPP Fig. 6a/6c in the header-split variant).
                let end = numbered.dag.split_exit(n);
                let local = self.register_loops().iter().position(|l| l.header == n);
                if let (Some(j), EmitKind::Paths { counting, .. }) = (local, &self.kind) {
                    // if r == path { acc += 1 } else { count[r]++ }
                    let (l, acc) = (&self.register_loops()[j], self.locals.loops + j as u32);
                    out.extend([
                        I::LocalGet(self.locals.path),
                        I::I64Const((l.path * counting.scale()) as i64),
                        I::I64Eq,
                        I::If(wasm_encoder::BlockType::Empty),
                        I::LocalGet(acc),
                    ]);
                    out.extend([I::I64Const(1), I::I64Add, I::LocalSet(acc), I::Else]);
                    self.record(out, end);
                    out.push(I::End);
                } else {
                    self.record(out, end);
                }
                self.bump_obvious(out, self.obvious_counter(end));
                let start = numbered.dag.split_entry(n);
                self.restart(out, start, true);
                self.bump_obvious(out, self.obvious_counter(start));
            }
        }
    }

    /// Before a `br_if`: the taken edge's code (a trampoline when it needs any and its
    /// label carries no values; true then).
    fn br_if(&self, out: &mut Vec<I<'_>>, taken: EdgeId, fall: EdgeId, bare: bool) -> bool {
        let (r, c) = (self.locals.path, self.locals.cond);
        match &self.kind {
            EmitKind::Paths { .. } => {
                let (ut, uf) = (self.upd(taken), self.upd(fall));
                let counter = self.edge_obvious_counter(taken);
                if bare
                    && (ut != Update::Add(0)
                        || counter.is_some()
                        || self.leaves_register_loop(taken))
                {
                    // Trampoline: `if; <taken edge's code>; br L+1; end` replaces the
                    // br_if, so the not-taken path runs no extra code at all.
                    out.push(I::If(wasm_encoder::BlockType::Empty));
                    self.edge_code(out, taken);
                    return true;
                }
                if let Some(o) = counter {
                    let amount = self.taken_amount(out, o.guarded);
                    self.add_to_counter(out, o.addr, false, &amount);
                }
                if ut == Update::Add(0) {
                    // Action::FallEdge applies the fall-through's update after the branch.
                } else if ut == uf {
                    self.apply(out, ut);
                } else {
                    // The label carries values: r = cond ? taken(r) : fall(r).
                    out.push(I::LocalTee(c));
                    self.updated(out, ut);
                    self.updated(out, uf);
                    out.extend([I::LocalGet(c), I::Select, I::LocalSet(r)]);
                }
            }
            EmitKind::Edges { counter, .. } => {
                // The taken edge is counted in a trampoline when its label carries no
                // values, otherwise without a branch by adding (condition != 0); the
                // fall-through edge where it runs, after the br_if (Action::FallEdge).
                if bare && self.edge_has_code(taken) {
                    out.push(I::If(wasm_encoder::BlockType::Empty));
                    self.edge_code(out, taken);
                    return true;
                }
                if let Some(at) = counter[taken.index()] {
                    let amount = self.taken_amount(out, false);
                    self.add_to_counter(out, at, false, &amount);
                }
            }
        }
        false
    }

    /// Before a `br_table` (action `k`): every arm's update, from a table in memory, in
    /// front of it, or in landing pads (true then).
    fn br_table(&self, out: &mut Vec<I<'_>>, k: usize, arms: &[EdgeId]) -> bool {
        let (r, c) = (self.locals.path, self.locals.cond);
        let n = arms.len() as u32 - 1;
        match &self.kind {
            EmitKind::Paths { tables, .. } => {
                let code = self.arm_code(k).expect("worked out for every br_table");
                match code {
                    // Arms that run their code at their targets correct for this
                    // there (`at_target_code`).
                    ArmCode::Before(Update::Poison) => {
                        out.extend([I::LocalGet(r), I::LocalSet(self.locals.scratch)]);
                        self.apply(out, Update::Poison);
                    }
                    ArmCode::Before(u) => self.apply(out, *u),
                    ArmCode::Pads(pads) => {
                        out.push(I::LocalSet(c));
                        out.extend(
                            pads.iter()
                                .map(|_| I::Block(wasm_encoder::BlockType::Empty)),
                        );
                        out.push(I::LocalGet(c));
                        return true;
                    }
                    ArmCode::Table(table) if table.iter().any(|&v| (v as i64) < 0) => {
                        // Entries are increments or the (negative) poison:
                        // r = t < 0 ? t : r + t.
                        let t = self.locals.scratch;
                        self.table_lookup(out, n, table_addr(tables, k), true);
                        out.extend([
                            I::LocalSet(t),
                            I::LocalGet(t),
                            I::LocalGet(r),
                            I::LocalGet(t),
                            I::I64Add,
                            I::LocalGet(t),
                            I::I64Const(0),
                            I::I64LtS,
                            I::Select,
                            I::LocalSet(r),
                        ]);
                    }
                    ArmCode::Table(_) => {
                        self.table_lookup(out, n, table_addr(tables, k), true);
                        out.extend([I::LocalGet(r), I::I64Add, I::LocalSet(r)]);
                    }
                }
            }
            EmitKind::Edges {
                counter, tables, ..
            } => {
                let at_target = |e: &EdgeId| self.analysis.edges[e.index()].at_target;
                if arms
                    .iter()
                    .any(|e| counter[e.index()].is_some() && !at_target(e))
                {
                    self.table_lookup(out, n, table_addr(tables, k), false);
                    self.add_to_counter(out, 0, true, &[I::I64Const(1)]);
                }
            }
        }
        false
    }
}
