//! What PEP's path words say about calls: the call sites each path passes, in order, for
//! call windows read off the ring (`pepper_cct::paths`).

use crate::analysis::FunctionAnalysis;
use crate::plan::{Counting, Plan};
use pepper_cct::{CallGraph, PathCalls, PathEnd, Pos, Resolution, Start};
use pepper_cfg::{DagEdgeKind, NodeId, NumberedDag, Vertex};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// One function's numbering and analysis, shared with the plan, and where its calls are.
#[derive(Debug)]
struct FuncPaths {
    a: Arc<FunctionAnalysis>,
    numbered: Arc<NumberedDag>,
    first_site: u32,
    /// Module offsets of the body that writes the path ends (the rewritten body, or
    /// under the switch `F_inst`), and where each operator's code begins in it
    /// (`FunctionPlan::op_offsets`; empty if the plan kept none).
    body: std::ops::Range<u64>,
    op_offsets: Arc<[u32]>,
    /// Built on first use, in the sampler thread: a run pays only for the functions its
    /// windows meet, not for every function at start-up.
    built: OnceLock<Built>,
}

/// [`FuncPaths`]' indexes.
#[derive(Debug)]
struct Built {
    /// Call sites (module-wide ids) in each CFG node, in code order.
    node_sites: Vec<Vec<u32>>,
    /// Predecessors of each P-DAG vertex.
    preds: Vec<Vec<Vertex>>,
}

/// The call sites every PEP path of a module passes, and the call graph facts the
/// conversion of path ends into calls needs. Built once per run from the plan.
#[derive(Debug, Default)]
pub struct PathSites {
    funcs: HashMap<u32, FuncPaths>,
    /// Sites of each function, ascending.
    sites_of: HashMap<u32, Vec<u32>>,
    callee: Vec<Option<u32>>,
    sig: Vec<Option<u32>>,
    /// Calls that leave no path end: to imports and to functions that write none.
    silent: Vec<bool>,
    /// Canonical signature of each function an indirect call may reach.
    indirect: HashMap<u32, u32>,
    /// [`PathSites::sites_before`]'s answers so far, by (function, position).
    before: Mutex<HashMap<(u32, u64), Sites>>,
    /// [`CallGraph::resolve`]'s, by (function, start split node or `u32::MAX` for the
    /// entry, position, callees); the same few loops recur.
    resolved: Mutex<ResolveCache>,
}

impl PathSites {
    /// `None` unless the plan asked for path windows (`InstrumentOptions::path_windows`).
    /// `output` is the rewritten module (where the plan's operator offsets point).
    pub fn for_plan(plan: &Plan, output: &[u8]) -> Option<PathSites> {
        if !plan.path_windows {
            return None;
        }
        let bodies = crate::module::ModuleFacts::parse(output).ok()?.bodies;
        let imported = plan.imports.len() as u32;
        let mut funcs = HashMap::new();
        for (fp, body) in plan.functions.iter().zip(&bodies) {
            // Under the switch the path ends come from the instrumented copy.
            let body = match fp.copies {
                Some((inst, _)) => match bodies.get(inst.saturating_sub(imported) as usize) {
                    Some(b) => b,
                    None => continue,
                },
                None => body,
            };
            let (Some(a), Some(nd), Counting::Ring) = (&fp.analysis, &fp.numbered, fp.counting)
            else {
                continue;
            };
            let offsets = fp.op_offsets.len() == a.num_ops;
            let f = FuncPaths {
                a: a.clone(),
                numbered: nd.clone(),
                first_site: fp.first_site,
                body: body.range(),
                op_offsets: if offsets {
                    fp.op_offsets.clone()
                } else {
                    Arc::from([])
                },
                built: OnceLock::new(),
            };
            funcs.insert(fp.index.0, f);
        }
        let mut sites_of: HashMap<u32, Vec<u32>> = HashMap::new();
        for (id, s) in plan.call_sites.iter().enumerate() {
            sites_of.entry(s.func).or_default().push(id as u32);
        }
        let silent = plan
            .call_sites
            .iter()
            .map(|s| s.callee.is_some_and(|g| !funcs.contains_key(&g)))
            .collect();
        Some(PathSites {
            sites_of,
            callee: plan.call_sites.iter().map(|s| s.callee).collect(),
            sig: plan.call_sites.iter().map(|s| s.sig).collect(),
            silent,
            indirect: plan
                .entry_counters
                .iter()
                .map(|&(f, _, sig)| (f, sig))
                .collect(),
            funcs,
            before: Mutex::default(),
            resolved: Mutex::default(),
        })
    }

    /// The calls of the path a PEP ring word names; `None` if it does not decode.
    pub fn decode(&self, word: u64) -> Option<PathCalls> {
        let (func, r) = pepper_layout::pep_untag(word)?;
        let fp = self.funcs.get(&func)?;
        let dag = &fp.numbered.dag;
        let edges = fp.numbered.numbering.regenerate(dag, r).ok()?;
        let from_entry = dag.edge(*edges.first()?).kind == DagEdgeKind::FunctionEntry;
        let end = match dag.edge(*edges.last()?).kind {
            DagEdgeKind::SplitExit(h) => PathEnd::Split(h.0),
            DagEdgeKind::Real(e) if fp.abrupt(e) => PathEnd::Abrupt,
            DagEdgeKind::DeadEnd(_) => PathEnd::Abrupt,
            _ => PathEnd::Exit,
        };
        let node_sites = &fp.built().node_sites;
        let sites = code_nodes(&fp.numbered, &edges)
            .flat_map(|n| node_sites[n.index()].iter().copied())
            .collect();
        Some(PathCalls {
            func,
            sites,
            from_entry,
            end,
        })
    }
}

/// The node whose code vertex `v` runs (`None` for a split node's top half, where paths
/// end, and for the entry and the exit).
fn code_of(dag: &pepper_cfg::PathDag, v: Vertex) -> Option<NodeId> {
    dag.node_of(v).filter(|&m| dag.body(m) == Some(v))
}

/// The CFG nodes whose code a path (its P-DAG edges) runs, in order: a node runs when the
/// path enters its body.
fn code_nodes<'a>(
    nd: &'a NumberedDag,
    edges: &'a [pepper_cfg::DagEdgeId],
) -> impl Iterator<Item = NodeId> + 'a {
    edges
        .iter()
        .filter_map(move |&e| code_of(&nd.dag, nd.dag.edge(e).dst))
}

/// The module-wide call site ids in each CFG node of a function, in code order.
fn node_sites(analysis: &FunctionAnalysis, first_site: u32) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); analysis.cfg.num_nodes()];
    for (k, &(_, n)) in analysis.call_nodes.iter().enumerate() {
        if let Some(n) = n {
            out[n.index()].push(first_site + k as u32);
        }
    }
    out
}

/// Calls per call site estimated from a PEP profile's paths: each path's count for every
/// time it passes the site. For runs that count no calls in the guest (the switch's
/// clean code then pays nothing per call); sites in functions without paths get 0.
pub(crate) fn site_calls_from_paths(plan: &Plan, paths: &[pepper_profile::Path]) -> Vec<u64> {
    let mut calls = vec![0u64; plan.call_sites.len()];
    let funcs: HashMap<u32, &crate::plan::FunctionPlan> =
        plan.functions.iter().map(|f| (f.index.0, f)).collect();
    let mut sites_by_func: HashMap<u32, Vec<Vec<u32>>> = HashMap::new();
    for p in paths {
        let Some(fp) = funcs.get(&p.func) else {
            continue;
        };
        let (Some(a), Some(nd)) = (&fp.analysis, &fp.numbered) else {
            continue;
        };
        let node_sites = sites_by_func
            .entry(p.func)
            .or_insert_with(|| node_sites(a, fp.first_site));
        let Ok(edges) = nd.numbering.regenerate(&nd.dag, p.number) else {
            continue;
        };
        for n in code_nodes(nd, &edges) {
            for &s in &node_sites[n.index()] {
                if let Some(c) = calls.get_mut(s as usize) {
                    *c += p.count;
                }
            }
        }
    }
    calls
}

impl FuncPaths {
    fn built(&self) -> &Built {
        self.built.get_or_init(|| {
            let node_sites = node_sites(&self.a, self.first_site);
            let dag = &self.numbered.dag;
            let mut preds = vec![Vec::new(); dag.num_vertices()];
            for (_, e) in dag.edges() {
                preds[e.dst.index()].push(e.src);
            }
            Built { node_sites, preds }
        })
    }

    /// Whether CFG edge `e` ends the activation abruptly (a tail call, a throw).
    fn abrupt(&self, e: pepper_cfg::EdgeId) -> bool {
        let info = &self.a.edges[e.index()];
        info.tail_call.is_some() || info.throw.is_some()
    }

    /// The P-DAG vertex of a position and the operator it is before (`usize::MAX`: all
    /// of the vertex's code, or none: a path that ends there).
    fn vertex(&self, (n, limit): (u32, u32)) -> Option<(Vertex, usize)> {
        let dag = &self.numbered.dag;
        match (n, limit) {
            (EXIT, END) => Some((dag.exit(), usize::MAX)),
            (n, END) => Some((dag.edge(dag.split_exit(NodeId(n))?).src, usize::MAX)),
            (n, limit) => Some((dag.body(NodeId(n))?, limit as usize)),
        }
    }

    /// The node whose code vertex `v` runs (`None` for a split node's top half, where
    /// paths end, and for the entry and the exit).
    fn code(&self, v: Vertex) -> Option<NodeId> {
        code_of(&self.numbered.dag, v)
    }

    /// The sites a path can pass before operator `limit` of vertex `start`: its node's
    /// own sites before it, and those of every node whose body reaches it in the P-DAG
    /// (within one path: a split node's body is entered only where a path starts).
    fn sites_before(&self, (start, limit): (Vertex, usize)) -> Vec<u32> {
        let b = self.built();
        let mut out: Vec<u32> = self.code(start).map_or_else(Vec::new, |n| {
            b.node_sites[n.index()]
                .iter()
                .copied()
                .filter(|&s| self.call_op(s) < limit)
                .collect()
        });
        let mut seen = vec![false; b.preds.len()];
        let mut todo = vec![start];
        seen[start.index()] = true;
        while let Some(v) = todo.pop() {
            for &p in &b.preds[v.index()] {
                if !seen[p.index()] {
                    seen[p.index()] = true;
                    todo.push(p);
                    if let Some(m) = self.code(p) {
                        out.extend_from_slice(&b.node_sites[m.index()]);
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }
}

impl FuncPaths {
    /// [`CallGraph::resolve`] from vertex `from` to `target` (see [`FuncPaths::vertex`]).
    fn resolve(
        &self,
        g: &PathSites,
        from: Vertex,
        target: (Vertex, usize),
        callees: &[u32],
    ) -> Resolution {
        let mut search = Search {
            fp: self,
            g,
            target,
            callees,
            memo: HashMap::new(),
            depth: 0,
        };
        match search.fit(from, 0) {
            Fit::One(sites) => Resolution::One(sites.to_vec()),
            Fit::None => Resolution::NoPath,
            Fit::Many => Resolution::Several,
        }
    }

    /// The operator index of call site `s`, one of this function's.
    fn call_op(&self, s: u32) -> usize {
        self.a.call_nodes[(s - self.first_site) as usize].0
    }

    /// The operator and node of call site `site` (module-wide id).
    fn call(&self, site: u32) -> Option<(usize, NodeId)> {
        let (op, n) = self
            .a
            .call_nodes
            .get(site.checked_sub(self.first_site)? as usize)?;
        Some((*op, (*n)?))
    }
}

/// The call sites a path passes from a vertex on: none fits, one sequence, or several.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fit {
    None,
    One(Arc<[u32]>),
    Many,
}

/// A depth-first walk of the P-DAG for the one path whose calls fit a list of callees.
struct Search<'a> {
    fp: &'a FuncPaths,
    g: &'a PathSites,
    /// The vertex of the node the path ends in, and the operator it ends before.
    target: (Vertex, usize),
    callees: &'a [u32],
    /// Results by (vertex, callees matched before it).
    memo: HashMap<(Vertex, usize), Fit>,
    /// How deep the walk is (it recurses along paths).
    depth: usize,
}

impl Search<'_> {
    /// Deepest walk: a path longer than this (thousands of nodes between loop headers)
    /// gives up as if several paths fit, so the sampler thread's stack stays small.
    const MAX_DEPTH: usize = 2000;

    fn fit(&mut self, v: Vertex, k: usize) -> Fit {
        if let Some(f) = self.memo.get(&(v, k)) {
            return f.clone();
        }
        if self.depth >= Self::MAX_DEPTH {
            return Fit::Many;
        }
        self.depth += 1;
        let f = self.fit_new(v, k);
        self.depth -= 1;
        self.memo.insert((v, k), f.clone());
        f
    }

    fn fit_new(&mut self, v: Vertex, k: usize) -> Fit {
        let dag = &self.fp.numbered.dag;
        let last = v == self.target.0;
        // Only node bodies run code; a split node's top half and the exit end paths.
        let Some(m) = self.fp.code(v) else {
            return if last && k == self.callees.len() {
                Fit::One(Arc::from([]))
            } else {
                Fit::None
            };
        };
        let mut here = Vec::new();
        for &s in &self.fp.built().node_sites[m.index()] {
            if last && self.fp.call_op(s) >= self.target.1 {
                break;
            }
            if self.g.silent(s) {
                continue;
            }
            match self.callees.get(k + here.len()) {
                Some(&c) if self.g.can_call(s, c) => here.push(s),
                _ => return Fit::None,
            }
        }
        let k = k + here.len();
        if last {
            return if k == self.callees.len() {
                Fit::One(here.into())
            } else {
                Fit::None
            };
        }
        let mut fit = Fit::None;
        for &e in dag.succs(v) {
            fit = match (fit, self.fit(dag.edge(e).dst, k)) {
                (Fit::None, f) | (f, Fit::None) => f,
                (Fit::One(a), Fit::One(b)) if a == b => Fit::One(a),
                _ => Fit::Many,
            };
            if fit == Fit::Many {
                break;
            }
        }
        match fit {
            Fit::One(rest) if !here.is_empty() => {
                here.extend_from_slice(&rest);
                Fit::One(here.into())
            }
            f => f,
        }
    }
}

/// A position's operator limit where the path ends at the node (a split node: at its
/// top half), and the node that stands for the function's exit.
const END: u32 = u32::MAX;
const EXIT: u32 = u32::MAX - 1;

/// A position: before operator `limit` of node `n` (or the end of a path there).
fn pos(n: u32, limit: u32) -> Pos {
    Pos(((n as u64) << 32) | limit as u64)
}

fn unpos(at: Pos) -> Option<(u32, u32)> {
    (at != Pos::UNKNOWN).then_some(((at.0 >> 32) as u32, at.0 as u32))
}

impl PathSites {
    /// Where the function `func` is at module offset `offset` (a sampled program
    /// counter's): before the operator after the one whose code holds it; or, in the code
    /// that ends a path (recording it), at the end of that path.
    pub fn pos_at(&self, func: u32, offset: u64) -> Pos {
        let Some(fp) = self.funcs.get(&func) else {
            return Pos::UNKNOWN;
        };
        let node = |n: NodeId| n.index() as u32;
        if fp.op_offsets.is_empty() || !fp.body.contains(&offset) {
            // (Under the switch: in clean code, which keeps no path.)
            return Pos::UNKNOWN;
        }
        let op_nodes = &fp.a.op_nodes;
        let i = fp
            .op_offsets
            .partition_point(|&o| fp.body.start + o as u64 <= offset);
        if i == 0 {
            // In the prologue, before the first operator: at the entry node.
            return op_nodes
                .first()
                .copied()
                .flatten()
                .map_or(Pos::UNKNOWN, |n| pos(node(n), 0));
        }
        if i == fp.op_offsets.len() {
            // The final `end`: the epilogue records the path that reaches the exit.
            return pos(EXIT, END);
        }
        // After a branch (`br`, `return`) no node is current; the branch ran in the node
        // of the last operator that has one.
        let Some(n) = op_nodes[..i].iter().rev().find_map(|n| *n) else {
            return Pos::UNKNOWN;
        };
        // The operator that starts a split node (a `loop`) is followed by the code that
        // records the path arriving there.
        let starts = i == 1 || op_nodes[i - 2] != Some(n);
        if starts && fp.numbered.dag.is_split(n) {
            return pos(node(n), END);
        }
        pos(node(n), i as u32)
    }
}

/// Call sites, ascending, shared by the answers that hold them.
type Sites = Arc<[u32]>;
type ResolveCache = HashMap<(u32, u32, u64, Vec<u32>), Resolution>;

impl PathSites {
    fn lock_resolved(&self) -> std::sync::MutexGuard<'_, ResolveCache> {
        self.resolved.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The call sites of `func` that a path may pass before `at` (all of them where `at`
    /// is unknown), ascending.
    fn sites_before(&self, func: u32, at: Pos) -> Arc<[u32]> {
        let fp = self.funcs.get(&func);
        let Some((fp, v)) = fp.and_then(|fp| Some((fp, fp.vertex(unpos(at)?)?))) else {
            return self.sites_of.get(&func).map_or(&[][..], |v| v).into();
        };
        let mut cache = self.before.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry((func, at.0))
            .or_insert_with(|| fp.sites_before(v).into())
            .clone()
    }
}

impl CallGraph for PathSites {
    fn site_pos(&self, func: u32, site: u32) -> Pos {
        self.funcs
            .get(&func)
            .and_then(|fp| fp.call(site))
            .map_or(Pos::UNKNOWN, |(op, n)| pos(n.index() as u32, op as u32))
    }

    fn ends_at(&self, _: u32, at: Pos, end: PathEnd) -> bool {
        match (unpos(at), end) {
            (Some((EXIT, END)), PathEnd::Exit) => true,
            (Some((n, END)), PathEnd::Split(h)) => n == h,
            _ => false,
        }
    }

    fn may_have_called(&self, func: u32, at: Pos, callee: u32) -> bool {
        self.sites_before(func, at)
            .iter()
            .any(|&s| !self.silent(s) && self.can_call(s, callee))
    }

    fn resolve(&self, func: u32, from: Start, at: Pos, callees: &[u32]) -> Resolution {
        let fp = self.funcs.get(&func);
        let Some((fp, to)) = fp.and_then(|fp| Some((fp, fp.vertex(unpos(at)?)?))) else {
            return if callees.is_empty() {
                Resolution::One(Vec::new())
            } else {
                Resolution::NoPath
            };
        };
        let dag = &fp.numbered.dag;
        let (start, key) = match from {
            Start::Entry => (dag.edge(dag.function_entry()).dst, u32::MAX),
            Start::Split(h) => match dag.body(NodeId(h)) {
                Some(v) => (v, h),
                None => return Resolution::NoPath,
            },
        };
        let key = (func, key, at.0, callees.to_vec());
        if let Some(r) = self.lock_resolved().get(&key) {
            return r.clone();
        }
        let r = fp.resolve(self, start, to, callees);
        let mut cache = self.lock_resolved();
        if cache.len() >= 1 << 16 {
            cache.clear();
        }
        cache.insert(key, r.clone());
        r
    }

    fn can_call(&self, site: u32, callee: u32) -> bool {
        let s = site as usize;
        match self.callee.get(s) {
            Some(Some(g)) => *g == callee,
            Some(None) => {
                self.sig[s].is_some() && self.indirect.get(&callee) == self.sig[s].as_ref()
            }
            None => false,
        }
    }

    fn silent(&self, site: u32) -> bool {
        self.silent.get(site as usize).copied().unwrap_or(true)
    }
}

impl pepper_cct::PathDecoder for PathSites {
    fn decode(&self, word: u64) -> Option<PathCalls> {
        PathSites::decode(self, word)
    }

    fn pos_at(&self, func: u32, offset: u64) -> Pos {
        PathSites::pos_at(self, func, offset)
    }
}
