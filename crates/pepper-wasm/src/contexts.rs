//! Calling contexts: a shadow stack the guest keeps in pepper's memory, per-call-site call
//! counters, and (exact mode) an in-module calling context tree.
//!
//! Every instrumented function pushes a 16-byte frame `[func + 1: u32][site: u32][node:
//! u32][pad]` at entry and restores the stack pointer at every exit; before each call it
//! writes the call site's id into its own frame. The host sampler thread reads the stack
//! asynchronously (no check, no call in the guest) and marks the frames it has seen by
//! setting the top bit of their function word. A push writes a fresh, unmarked word, so a
//! marked frame is one that has not returned since the sampler saw it: Whaley's return
//! address marker bit (§5.2), for the cost of one store the push does anyway.
//!
//! The stack is a ring: frame addresses are masked, so a recursion deeper than the ring
//! overwrites the outermost frames, never pepper's other data, and the top frames (the
//! ones a sample walks) are always intact.

use crate::emit::{memarg, Locals};
use crate::plan::MemoryLayout;
use wasm_encoder::Instruction as I;

/// What the guest keeps for calling contexts.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum ContextMode {
    /// Nothing.
    #[default]
    Off,
    /// Shadow stack for the sampler (Whaley's PCCT) plus exact per-call-site counts.
    Sampled,
    /// Every call also finds or creates its context node in an in-module hash table and
    /// counts there: the complete calling context tree with call counts.
    Exact,
    /// No stack in the guest: the host samples the guest thread's native stack. Call
    /// sites still count their calls unless `InstrumentOptions::site_counters` is off.
    Native,
}

impl ContextMode {
    /// Whether the guest keeps a shadow stack.
    pub fn shadow(self) -> bool {
        matches!(self, ContextMode::Sampled | ContextMode::Exact)
    }
}

/// Bytes per shadow-stack frame.
pub const FRAME_BYTES: u32 = 16;
/// The marker bit the sampler sets in a frame's function word.
pub const MARK: u32 = 1 << 31;

/// A call instruction of the original module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSiteInfo {
    pub func: u32,
    /// Offset of the call instruction in the original module.
    pub offset: u64,
    /// The callee of a direct call.
    pub callee: Option<u32>,
    /// An indirect call's type index (canonical signature after planning).
    pub sig: Option<u32>,
}

/// Emits one function's context code.
pub struct ContextEmit<'p> {
    pub mode: ContextMode,
    pub layout: &'p MemoryLayout,
    pub mem: u32,
    pub func: u32,
    /// Index of the in-module `cct_enter(func, parent) -> node` (exact mode).
    pub enter_fn: u32,
    /// Count calls per call site.
    pub counters: bool,
    /// This function's entry counter (functions indirect calls may reach).
    pub entry_counter: Option<u32>,
    /// Functions below this index are imports (their calls log no return: no entry of
    /// theirs is logged either).
    pub imported_funcs: u32,
}

impl ContextEmit<'_> {
    fn mask(&self) -> i32 {
        (self.layout.stack_entries * FRAME_BYTES - 1) as i32
    }

    /// Function entry: write the frame, then publish the new stack pointer (in this order,
    /// so the sampler never reads a frame that is not written yet).
    pub fn push(&self, out: &mut Vec<I<'_>>, l: &Locals) {
        self.log(out, l, self.func);
        if let Some(at) = self.entry_counter {
            out.extend([
                I::I32Const(0),
                I::I32Const(0),
                I::I64Load(memarg(self.mem, at, 3)),
                I::I64Const(1),
                I::I64Add,
                I::I64Store(memarg(self.mem, at, 3)),
            ]);
        }
        if !self.mode.shadow() {
            return;
        }
        let (m, lay) = (self.mem, self.layout);
        out.extend([
            I::I32Const(0),
            I::I32Load(memarg(m, lay.stack_pointer, 2)),
            I::LocalTee(l.s),
            I::I32Const(self.mask()),
            I::I32And,
            I::LocalTee(l.e),
            I::I32Const(self.func as i32 + 1),
            I::I32Store(memarg(m, lay.stack_base, 2)),
            I::I32Const(0),
            I::LocalGet(l.s),
            I::I32Const(FRAME_BYTES as i32),
            I::I32Add,
            I::I32Store(memarg(m, lay.stack_pointer, 2)),
        ]);
        if self.mode == ContextMode::Exact {
            // frame.node = cct_enter(func, caller.site | caller.node << 32). The outermost
            // frame reads the ring's last slot, zero until the ring wraps: the root.
            out.extend([
                I::LocalGet(l.e),
                I::I32Const(self.func as i32),
                I::LocalGet(l.e),
                I::I32Const(FRAME_BYTES as i32),
                I::I32Sub,
                I::I32Const(self.mask()),
                I::I32And,
                I::I64Load(memarg(m, lay.stack_base + 4, 2)),
                I::Call(self.enter_fn),
                I::I32Store(memarg(m, lay.stack_base + 8, 2)),
            ]);
        }
    }

    /// Every exit (return, end, tail call, throw): clear this frame's function word, then
    /// restore the caller's stack pointer. The cleared word lets the sampler tell a frame
    /// that returned while it was reading the stack (a torn read) from a live one.
    pub fn pop(&self, out: &mut Vec<I<'_>>, l: &Locals) {
        if !self.mode.shadow() {
            return;
        }
        out.extend([
            I::LocalGet(l.e),
            I::I32Const(0),
            I::I32Store(memarg(self.mem, self.layout.stack_base, 2)),
            I::I32Const(0),
            I::LocalGet(l.s),
            I::I32Store(memarg(self.mem, self.layout.stack_pointer, 2)),
        ]);
    }

    /// Call log: `log[head % N] = word; head += 1` (two stores and a load; the scratch
    /// local `a` holds the head only within these instructions).
    fn log(&self, out: &mut Vec<I<'_>>, l: &Locals, word: u32) {
        let lay = self.layout;
        if lay.call_log_entries == 0 {
            return;
        }
        let m = self.mem;
        out.extend([
            I::I32Const(0),
            I::I32Load(memarg(m, lay.call_log_head, 2)),
            I::LocalTee(l.a),
            I::I32Const(lay.call_log_entries as i32 - 1),
            I::I32And,
            I::I32Const(2),
            I::I32Shl,
            I::I32Const(word as i32),
            I::I32Store(memarg(m, lay.call_log_base, 2)),
            I::I32Const(0),
            I::LocalGet(l.a),
            I::I32Const(1),
            I::I32Add,
            I::I32Store(memarg(m, lay.call_log_head, 2)),
        ]);
    }

    /// After a call returns to `site`: log the return, unless the callee is an import
    /// (which logs no entry).
    pub fn log_return(&self, out: &mut Vec<I<'_>>, l: &Locals, site: u32, callee: Option<u32>) {
        if callee.is_some_and(|g| g < self.imported_funcs) {
            return;
        }
        self.log(out, l, site | pepper_cct::window::RET);
    }

    /// Before a tail call or a throw: frames change in a way the log does not describe, so
    /// a replay must stop here.
    pub fn log_stop(&self, out: &mut Vec<I<'_>>, l: &Locals) {
        self.log(out, l, pepper_cct::window::STOP);
    }

    /// Before a call: record the call site in this frame and count the call.
    pub fn call_site(&self, out: &mut Vec<I<'_>>, l: &Locals, site: u32) {
        let m = self.mem;
        if self.mode.shadow() {
            out.extend([
                I::LocalGet(l.e),
                I::I32Const(site as i32),
                I::I32Store(memarg(m, self.layout.stack_base + 4, 2)),
            ]);
        }
        if !self.counters {
            return;
        }
        let counter = self.layout.site_counters + 8 * site;
        out.extend([
            I::I32Const(0),
            I::I32Const(0),
            I::I64Load(memarg(m, counter, 3)),
            I::I64Const(1),
            I::I64Add,
            I::I64Store(memarg(m, counter, 3)),
        ]);
    }
}

/// What a call instruction calls: `(callee, type)` — the function of a direct call, the
/// type index of an indirect one; `None` for anything that is not a call. The one list of
/// call operators: call sites are numbered by it, and the emitter instruments the same ones.
pub(crate) fn call_target(op: &wasmparser::Operator<'_>) -> Option<(Option<u32>, Option<u32>)> {
    use wasmparser::Operator as O;
    match *op {
        O::Call { function_index } | O::ReturnCall { function_index } => {
            Some((Some(function_index), None))
        }
        O::CallIndirect { type_index, .. }
        | O::CallRef { type_index }
        | O::ReturnCallIndirect { type_index, .. }
        | O::ReturnCallRef { type_index } => Some((None, Some(type_index))),
        _ => None,
    }
}

/// The call sites of one function body, in operator order.
pub fn call_sites(
    func: u32,
    body: &wasmparser::FunctionBody<'_>,
) -> Result<Vec<CallSiteInfo>, wasmparser::BinaryReaderError> {
    let mut reader = body.get_operators_reader()?;
    let mut out = Vec::new();
    while !reader.eof() {
        let offset = reader.original_position();
        if let Some((callee, sig)) = call_target(&reader.read()?) {
            out.push(CallSiteInfo {
                func,
                offset,
                callee,
                sig,
            });
        }
    }
    Ok(out)
}

/// Offsets of the `return_call`s in `body` that switch function `func` between its copies.
fn switch_offsets(
    body: &wasmparser::FunctionBody<'_>,
    func: u32,
    copy_of: &std::collections::HashMap<u32, u32>,
) -> Result<std::collections::HashSet<u64>, wasmparser::BinaryReaderError> {
    let mut reader = body.get_operators_reader()?;
    let mut out = std::collections::HashSet::new();
    while !reader.eof() {
        let offset = reader.original_position();
        if let wasmparser::Operator::ReturnCall { function_index } = reader.read()? {
            if copy_of.get(&function_index) == Some(&func) {
                out.insert(offset);
            }
        }
    }
    Ok(out)
}

/// What the host sampler built from the shadow stack.
#[derive(Clone, Debug)]
pub struct SampledContexts {
    pub sampling: pepper_profile::ContextSampling,
    pub pcct: pepper_cct::Pcct,
}

impl crate::plan::Plan {
    /// The profile's calling contexts: the sampled tree (from the host sampler) or the exact
    /// one (from the context table in `mem`), with per-site call counts from `mem`.
    pub(crate) fn contexts_profile(
        &self,
        mem: &[u8],
        sampled: Option<SampledContexts>,
        location: &dyn Fn(u64) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> Option<pepper_profile::Contexts> {
        use pepper_profile::{CallSite, ContextKind, ContextNode, Contexts, HotFunction};
        let l = &self.layout;
        let call_sites: Vec<CallSite> = self
            .call_sites
            .iter()
            .enumerate()
            .map(|(id, s)| CallSite {
                id: id as u32,
                func: s.func,
                offset: s.offset,
                callee: s.callee,
                sig: s.sig,
                calls: if l.site_counters == 0 {
                    0
                } else {
                    read_u64(mem, l.site_counters as u64 + 8 * id as u64)
                },
                location: location(s.offset),
            })
            .collect();
        let site = |s: u32| (s < call_sites.len() as u32).then_some(s);
        // Entry counts of the functions indirect calls may reach, with their signatures.
        let entries: Vec<pepper_cct::EntryCount> = self
            .entry_counters
            .iter()
            .map(|&(func, at, sig)| pepper_cct::EntryCount {
                func,
                calls: read_u64(mem, at as u64),
                sig,
            })
            .collect();
        let (kind, mut nodes, hot_functions, sampling, overflow) = match self.contexts {
            ContextMode::Off => return None,
            ContextMode::Sampled | ContextMode::Native => {
                let SampledContexts { sampling, mut pcct } = sampled?;
                // Every context gets estimated calls: the sampled tree extended by the exact
                // call-site counts (pepper_cct::complete).
                let counts: Vec<pepper_cct::SiteCount> = self
                    .call_sites
                    .iter()
                    .zip(&call_sites)
                    .map(|(s, c)| pepper_cct::SiteCount {
                        caller: s.func,
                        callee: s.callee,
                        calls: c.calls,
                        sig: s.sig,
                    })
                    .collect();
                let opts = pepper_cct::CompleteOptions {
                    unit: sampling.interval_us.max(1),
                    call_unit: sampling.window_weighted / sampling.window_calls.max(1),
                    ..Default::default()
                };
                let sampled_len = pcct.tree.len();
                let (t, est) = if self.layout.site_counters == 0 {
                    // No call counts: the sampled tree as is, with the calls call windows
                    // saw (weighted) as the only estimates.
                    let est = pcct
                        .tree
                        .nodes()
                        .map(|(_, n)| n.window_calls as f64)
                        .collect();
                    (
                        std::mem::replace(&mut pcct.tree, pepper_cct::ContextTree::new(1)),
                        est,
                    )
                } else {
                    pepper_cct::complete(&pcct.tree, &counts, &entries, &opts)
                };
                let nodes: Vec<ContextNode> = t
                    .nodes()
                    .map(|(i, n)| ContextNode {
                        parent: n.parent.map(|p| p.0),
                        func: n.func,
                        site: site(n.site),
                        detached: n.detached(),
                        inferred: i.index() >= sampled_len,
                        calls: est[i.index()].round() as u64,
                        self_us: n.self_weight,
                        edge_us: n.edge_weight,
                    })
                    .collect();
                let mut hot: Vec<HotFunction> = pcct
                    .hot
                    .iter()
                    .enumerate()
                    .filter(|(_, &w)| w > 0)
                    .map(|(f, &w)| HotFunction {
                        func: f as u32,
                        self_us: w,
                    })
                    .collect();
                // Time in host code the sampler could not name (native stacks) is a hot
                // "function" of its own, so the list accounts for all sampled time.
                if pcct.hot_unplaced > 0 {
                    hot.push(HotFunction {
                        func: u32::MAX,
                        self_us: pcct.hot_unplaced,
                    });
                }
                hot.sort_by(|a, b| b.self_us.cmp(&a.self_us).then(a.func.cmp(&b.func)));
                (ContextKind::Sampled, nodes, hot, Some(sampling), 0)
            }
            ContextMode::Exact => {
                let t = &l.cct;
                // Entry i is node i + 1: key = caller site | caller node << 32.
                let mut children: std::collections::HashMap<u32, Vec<(u32, u32, u32, u64)>> =
                    Default::default();
                for slot in 0..t.capacity as u64 {
                    let at = t.base as u64 + 24 * slot;
                    let f = read_u32(mem, at + 16);
                    if f == 0 {
                        continue;
                    }
                    let key = read_u64(mem, at);
                    let (parent, s) = ((key >> 32) as u32, key as u32);
                    children.entry(parent).or_default().push((
                        slot as u32 + 1,
                        f - 1,
                        s,
                        read_u64(mem, at + 8),
                    ));
                }
                let mut nodes = vec![ContextNode {
                    parent: None,
                    func: u32::MAX,
                    site: None,
                    detached: false,
                    inferred: false,
                    calls: 0,
                    self_us: 0,
                    edge_us: 0,
                }];
                // Breadth first from the root, so parents precede children.
                let mut queue = std::collections::VecDeque::from([(0u32, 0u32)]);
                while let Some((id, at)) = queue.pop_front() {
                    let mut kids = children.remove(&id).unwrap_or_default();
                    kids.sort_unstable_by_key(|k| (k.2, k.1));
                    for (child, func, s, calls) in kids {
                        let idx = nodes.len() as u32;
                        nodes.push(ContextNode {
                            parent: Some(at),
                            func,
                            site: if id == 0 { None } else { site(s) },
                            detached: false,
                            inferred: false,
                            calls,
                            self_us: 0,
                            edge_us: 0,
                        });
                        queue.push_back((child, idx));
                    }
                }
                let orphans: usize = children.values().map(Vec::len).sum();
                if orphans > 0 {
                    warnings.push(format!(
                        "{orphans} context table entries have no known parent; dropped"
                    ));
                }
                let overflow = read_u64(mem, t.overflow as u64);
                if overflow > 0 {
                    warnings.push(format!(
                        "the context table was full: {overflow} calls were counted under the root"
                    ));
                }
                (ContextKind::Exact, nodes, Vec::new(), None, overflow)
            }
        };
        if nodes.is_empty() {
            return None;
        }
        nodes[0].func = u32::MAX;
        let mut imports: Vec<u32> = nodes
            .iter()
            .map(|n| n.func)
            .filter(|&f| (f as usize) < self.imports.len())
            .collect();
        imports.sort_unstable();
        imports.dedup();
        Some(Contexts {
            kind,
            call_sites,
            nodes,
            hot_functions,
            imports: imports
                .into_iter()
                .map(|f| (f, self.imports[f as usize].clone()))
                .collect(),
            sampling,
            overflow,
        })
    }
}

pub(crate) fn read_u64(mem: &[u8], addr: u64) -> u64 {
    let a = addr as usize;
    mem.get(a..a + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("slice of 8 bytes")))
        .unwrap_or(0)
}

pub(crate) fn read_u32(mem: &[u8], addr: u64) -> u32 {
    let a = addr as usize;
    mem.get(a..a + 4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("slice of 4 bytes")))
        .unwrap_or(0)
}

/// Where each call site of `plan` ended up in `output` (the module `plan` was made with):
/// module offset of the call instruction → call-site id. Native stack samples name call
/// sites by their offset in the module that runs; pepper's own calls (to the functions it
/// appends) are not sites.
pub fn site_offsets(
    output: &[u8],
    plan: &crate::plan::Plan,
) -> Result<std::collections::HashMap<u64, u32>, wasmparser::BinaryReaderError> {
    let facts = crate::module::ModuleFacts::parse(output)?;
    let original_funcs = plan.imports.len() as u32 + plan.functions.len() as u32;
    let mut out = std::collections::HashMap::new();
    let imported = plan.imports.len() as u32;
    // Switchable copies: a call to another function's instrumented copy is a call site; a
    // `return_call` to the function's own copies is a switch, not a call (self tail calls
    // are never redirected to a copy).
    let copy_of: std::collections::HashMap<u32, u32> = plan
        .functions
        .iter()
        .filter_map(|f| f.copies.map(|c| (f.index.0, c)))
        .flat_map(|(f, (inst, clean))| [(inst, f), (clean, f)])
        .collect();
    for (fp, body) in plan.functions.iter().zip(&facts.bodies) {
        // A function's switchable copies hold its call sites too, in the same order.
        let copies = fp
            .copies
            .map_or(Vec::new(), |(inst, clean)| vec![inst, clean]);
        let bodies = std::iter::once(body).chain(
            copies
                .iter()
                .filter_map(|&c| facts.bodies.get((c - imported) as usize)),
        );
        for body in bodies {
            let switches = switch_offsets(body, fp.index.0, &copy_of)?;
            let here = call_sites(fp.index.0, body)?.into_iter().filter(|s| {
                !switches.contains(&s.offset)
                    && s.callee
                        .is_none_or(|c| c < original_funcs || copy_of.contains_key(&c))
            });
            let ids = plan
                .call_sites
                .iter()
                .enumerate()
                .skip(fp.first_site as usize)
                .take_while(|(_, s)| s.func == fp.index.0);
            for (s, (id, _)) in here.zip(ids) {
                out.insert(s.offset, id as u32);
            }
        }
    }
    Ok(out)
}
