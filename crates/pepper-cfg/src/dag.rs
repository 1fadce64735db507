//! The P-DAG: PEP's variant of the Ball-Larus DAG (PEP §3.2).
//!
//! Every *split node* `h` (a loop header, or a node chosen by truncation) is cut in two:
//! `h_a` receives all of `h`'s in-edges (loop entries and back edges alike) and has a single
//! dummy edge to EXIT; `h_b` keeps `h`'s out-edges and is entered by a dummy edge from ENTRY.
//! A path therefore ends at a split node and the next one starts there, which is exactly
//! where pepper puts its path-ending code (a yieldpoint in PEP, a counter in exact mode).
//! Back edges become ordinary edges into `h_a`, so several back edges to one header are
//! distinct paths with no special case.

use crate::cfg::Cfg;
use crate::ids::{DagEdgeId, EdgeId, NodeId};

/// A vertex of the [`PathDag`].
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Vertex(pub u32);

impl Vertex {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Why a DAG edge exists.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum DagEdgeKind {
    /// A real CFG edge.
    Real(EdgeId),
    /// ENTRY → the function's first node.
    FunctionEntry,
    /// ENTRY → `h_b`: a path starting at split node `h`.
    SplitEntry(NodeId),
    /// `h_a` → EXIT: a path ending at split node `h`.
    SplitExit(NodeId),
    /// A node with no successors (ends in `unreachable`, `throw`, ...) → EXIT. Never executed,
    /// but it keeps every interval non-empty so regeneration stays unambiguous.
    DeadEnd(NodeId),
}

#[derive(Copy, Clone, Debug)]
pub struct DagEdge {
    pub src: Vertex,
    pub dst: Vertex,
    pub kind: DagEdgeKind,
}

/// The acyclic path graph of one function.
#[derive(Clone, Debug)]
pub struct PathDag {
    edges: Vec<DagEdge>,
    succs: Vec<Vec<DagEdgeId>>,
    /// Vertex of each CFG node's body (`h_b` for split nodes); `None` if unreachable.
    body: Vec<Option<Vertex>>,
    /// Vertex of each split node's top half `h_a`.
    top: Vec<Option<Vertex>>,
    /// DAG edge for each real CFG edge, if the edge is reachable.
    real: Vec<Option<DagEdgeId>>,
    split_entry: Vec<Option<DagEdgeId>>,
    split_exit: Vec<Option<DagEdgeId>>,
    entry: Vertex,
    exit: Vertex,
    function_entry: DagEdgeId,
    /// Vertices in topological order (ENTRY first).
    topo: Vec<Vertex>,
    /// The CFG node each vertex belongs to (`None` for ENTRY).
    owner: Vec<Option<NodeId>>,
}

/// The P-DAG would have a cycle: some cycle of the CFG does not pass through a split node.
#[derive(Debug, thiserror::Error)]
#[error("control-flow cycle through node {0:?} has no split node (loop header)")]
pub struct CycleError(pub NodeId);

impl PathDag {
    /// Builds the P-DAG of `cfg` with the given split nodes. Nodes unreachable from the
    /// entry are left out.
    pub fn build(cfg: &Cfg, splits: &[NodeId]) -> Result<PathDag, CycleError> {
        let n = cfg.num_nodes();
        let reachable = cfg.reachable();
        let mut is_split = vec![false; n];
        for &s in splits {
            if s != cfg.exit() && reachable[s.index()] {
                is_split[s.index()] = true;
            }
        }
        let mut dag = PathDag {
            edges: Vec::new(),
            succs: Vec::new(),
            body: vec![None; n],
            top: vec![None; n],
            real: vec![None; cfg.num_edges()],
            split_entry: vec![None; n],
            split_exit: vec![None; n],
            entry: Vertex(0),
            exit: Vertex(0),
            function_entry: DagEdgeId(0),
            topo: Vec::new(),
            owner: Vec::new(),
        };
        let new_vertex = |dag: &mut PathDag| {
            dag.succs.push(Vec::new());
            Vertex(dag.succs.len() as u32 - 1)
        };
        dag.entry = new_vertex(&mut dag);
        for node in cfg.nodes() {
            if reachable[node.index()] {
                dag.body[node.index()] = Some(new_vertex(&mut dag));
                if is_split[node.index()] {
                    dag.top[node.index()] = Some(new_vertex(&mut dag));
                }
            }
        }
        // The exit is always present so that every path has somewhere to end.
        if dag.body[cfg.exit().index()].is_none() {
            dag.body[cfg.exit().index()] = Some(new_vertex(&mut dag));
        }
        dag.exit = dag.body[cfg.exit().index()].expect("exit vertex allocated above");
        let target = |dag: &PathDag, node: NodeId| {
            dag.top[node.index()]
                .or(dag.body[node.index()])
                .expect("target of a reachable edge is reachable")
        };
        let fe_dst = target(&dag, cfg.entry());
        dag.function_entry = dag.push(dag.entry, fe_dst, DagEdgeKind::FunctionEntry);
        for node in cfg.nodes() {
            let Some(src) = dag.body[node.index()] else {
                continue;
            };
            if node == cfg.exit() {
                continue;
            }
            if let Some(top) = dag.top[node.index()] {
                let e = dag.push(dag.entry, src, DagEdgeKind::SplitEntry(node));
                dag.split_entry[node.index()] = Some(e);
                let x = dag.push(top, dag.exit, DagEdgeKind::SplitExit(node));
                dag.split_exit[node.index()] = Some(x);
            }
            for &e in cfg.succs(node) {
                let dst = target(&dag, cfg.edge(e).1);
                let id = dag.push(src, dst, DagEdgeKind::Real(e));
                dag.real[e.index()] = Some(id);
            }
            if cfg.succs(node).is_empty() {
                dag.push(src, dag.exit, DagEdgeKind::DeadEnd(node));
            }
        }
        dag.owner = vec![None; dag.succs.len()];
        for node in cfg.nodes() {
            for v in [dag.body[node.index()], dag.top[node.index()]]
                .into_iter()
                .flatten()
            {
                dag.owner[v.index()] = Some(node);
            }
        }
        dag.topo = dag.topological_order(cfg)?;
        Ok(dag)
    }

    fn push(&mut self, src: Vertex, dst: Vertex, kind: DagEdgeKind) -> DagEdgeId {
        let id = DagEdgeId::new(self.edges.len());
        self.edges.push(DagEdge { src, dst, kind });
        self.succs[src.index()].push(id);
        id
    }

    fn topological_order(&self, cfg: &Cfg) -> Result<Vec<Vertex>, CycleError> {
        let nv = self.succs.len();
        let mut indeg = vec![0u32; nv];
        for e in &self.edges {
            indeg[e.dst.index()] += 1;
        }
        let mut ready: Vec<Vertex> = (0..nv as u32)
            .map(Vertex)
            .filter(|v| indeg[v.index()] == 0)
            .collect();
        let mut order = Vec::with_capacity(nv);
        while let Some(v) = ready.pop() {
            order.push(v);
            for &e in &self.succs[v.index()] {
                let d = self.edges[e.index()].dst;
                indeg[d.index()] -= 1;
                if indeg[d.index()] == 0 {
                    ready.push(d);
                }
            }
        }
        if order.len() != nv {
            let stuck = (0..nv)
                .find(|&v| indeg[v] > 0)
                .expect("some vertex is on a cycle");
            let node = cfg
                .nodes()
                .find(|n| self.body[n.index()].map(|b| b.index()) == Some(stuck))
                .unwrap_or(cfg.entry());
            return Err(CycleError(node));
        }
        Ok(order)
    }

    pub fn entry(&self) -> Vertex {
        self.entry
    }
    pub fn exit(&self) -> Vertex {
        self.exit
    }
    pub fn num_vertices(&self) -> usize {
        self.succs.len()
    }
    pub fn num_edges(&self) -> usize {
        self.edges.len()
    }
    pub fn edge(&self, e: DagEdgeId) -> &DagEdge {
        &self.edges[e.index()]
    }
    pub fn edges(&self) -> impl Iterator<Item = (DagEdgeId, &DagEdge)> {
        self.edges
            .iter()
            .enumerate()
            .map(|(i, e)| (DagEdgeId::new(i), e))
    }
    pub fn succs(&self, v: Vertex) -> &[DagEdgeId] {
        &self.succs[v.index()]
    }
    /// Vertices in topological order.
    pub fn topo(&self) -> &[Vertex] {
        &self.topo
    }
    /// The DAG edge that represents real CFG edge `e`, if `e` is reachable.
    pub fn real_edge(&self, e: EdgeId) -> Option<DagEdgeId> {
        self.real[e.index()]
    }
    /// The ENTRY → `h_b` dummy of split node `h`.
    pub fn split_entry(&self, h: NodeId) -> Option<DagEdgeId> {
        self.split_entry[h.index()]
    }
    /// The `h_a` → EXIT dummy of split node `h`: where a path ending at `h` is recorded.
    pub fn split_exit(&self, h: NodeId) -> Option<DagEdgeId> {
        self.split_exit[h.index()]
    }
    pub fn function_entry(&self) -> DagEdgeId {
        self.function_entry
    }
    /// The vertex of node `n`'s body (its `h_b` half when split).
    pub fn body(&self, n: NodeId) -> Option<Vertex> {
        self.body[n.index()]
    }
    /// Whether node `n` is split (a path ends and starts there).
    pub fn is_split(&self, n: NodeId) -> bool {
        self.top[n.index()].is_some()
    }
    /// The CFG node a vertex belongs to (either half of a split node), or `None` for ENTRY.
    pub fn node_of(&self, v: Vertex) -> Option<NodeId> {
        self.owner[v.index()]
    }

    /// Checks the structural invariants: acyclic, every vertex reachable from ENTRY reaches
    /// EXIT, EXIT has no successors.
    pub fn verify(&self) -> Result<(), String> {
        if self.topo.len() != self.num_vertices() {
            return Err("not acyclic".into());
        }
        if !self.succs(self.exit).is_empty() {
            return Err("EXIT has successors".into());
        }
        for v in 0..self.num_vertices() {
            let v = Vertex(v as u32);
            if v != self.exit && self.succs(v).is_empty() {
                return Err(format!("vertex {v:?} has no way to EXIT"));
            }
        }
        Ok(())
    }
}
