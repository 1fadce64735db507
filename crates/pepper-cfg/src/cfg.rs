//! The control-flow graph of one function.

use crate::ids::{EdgeId, NodeId};

/// A directed multigraph with one entry node and one exit node.
///
/// Parallel edges are allowed (two arms of a `br_table` to the same label are collapsed by
/// the caller, but `if` with an empty arm still gives two distinct edges). Payloads (which
/// branch an edge belongs to) are kept by the caller in vectors indexed by [`EdgeId`].
#[derive(Clone, Debug)]
pub struct Cfg {
    edges: Vec<(NodeId, NodeId)>,
    succs: Vec<Vec<EdgeId>>,
    preds: Vec<Vec<EdgeId>>,
    entry: NodeId,
    exit: NodeId,
}

impl Cfg {
    /// A graph with `entry` and `exit` nodes already allocated.
    pub fn new() -> Self {
        let mut cfg = Cfg {
            edges: Vec::new(),
            succs: Vec::new(),
            preds: Vec::new(),
            entry: NodeId(0),
            exit: NodeId(0),
        };
        cfg.entry = cfg.add_node();
        cfg.exit = cfg.add_node();
        cfg
    }

    pub fn add_node(&mut self) -> NodeId {
        self.succs.push(Vec::new());
        self.preds.push(Vec::new());
        NodeId::new(self.succs.len() - 1)
    }

    pub fn add_edge(&mut self, src: NodeId, dst: NodeId) -> EdgeId {
        let id = EdgeId::new(self.edges.len());
        self.edges.push((src, dst));
        self.succs[src.index()].push(id);
        self.preds[dst.index()].push(id);
        id
    }

    pub fn entry(&self) -> NodeId {
        self.entry
    }
    pub fn exit(&self) -> NodeId {
        self.exit
    }
    pub fn num_nodes(&self) -> usize {
        self.succs.len()
    }
    pub fn num_edges(&self) -> usize {
        self.edges.len()
    }
    pub fn edge(&self, e: EdgeId) -> (NodeId, NodeId) {
        self.edges[e.index()]
    }
    pub fn succs(&self, n: NodeId) -> &[EdgeId] {
        &self.succs[n.index()]
    }
    pub fn preds(&self, n: NodeId) -> &[EdgeId] {
        &self.preds[n.index()]
    }
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> {
        (0..self.num_nodes()).map(NodeId::new)
    }

    /// Nodes reachable from the entry, as a bitmap indexed by node.
    pub fn reachable(&self) -> Vec<bool> {
        self.flood(self.entry, true)
    }

    /// Nodes from which the exit can be reached (the others end in a trap or loop forever),
    /// as a bitmap indexed by node.
    pub fn reaches_exit(&self) -> Vec<bool> {
        self.flood(self.exit, false)
    }

    /// Nodes reachable from `start` along edges (`forward`) or against them.
    fn flood(&self, start: NodeId, forward: bool) -> Vec<bool> {
        let mut seen = vec![false; self.num_nodes()];
        let mut stack = vec![start];
        seen[start.index()] = true;
        while let Some(n) = stack.pop() {
            let edges = if forward {
                self.succs(n)
            } else {
                self.preds(n)
            };
            for &e in edges {
                let (s, d) = self.edge(e);
                let next = if forward { d } else { s };
                if !seen[next.index()] {
                    seen[next.index()] = true;
                    stack.push(next);
                }
            }
        }
        seen
    }

    /// Targets of DFS back edges from the entry: the nodes that must be split so that the
    /// path graph is acyclic. In wasm these are exactly the `loop` headers that are branched to.
    pub fn dfs_back_edge_targets(&self) -> Vec<NodeId> {
        let dfs = self.dfs();
        let mut targets = vec![false; self.num_nodes()];
        for e in (0..self.num_edges()).filter(|&e| dfs.back[e]) {
            targets[self.edge(EdgeId::new(e)).1.index()] = true;
        }
        self.nodes().filter(|n| targets[n.index()]).collect()
    }

    /// An iterative depth-first search from the entry.
    pub fn dfs(&self) -> Dfs {
        #[derive(Clone, Copy, PartialEq)]
        enum State {
            New,
            OnStack,
            Done,
        }
        let mut state = vec![State::New; self.num_nodes()];
        let mut back = vec![false; self.num_edges()];
        let mut postorder = Vec::with_capacity(self.num_nodes());
        // (node, next successor position)
        let mut stack = vec![(self.entry, 0usize)];
        state[self.entry.index()] = State::OnStack;
        while let Some(&mut (n, ref mut pos)) = stack.last_mut() {
            if let Some(&e) = self.succs(n).get(*pos) {
                *pos += 1;
                let d = self.edge(e).1;
                match state[d.index()] {
                    State::New => {
                        state[d.index()] = State::OnStack;
                        stack.push((d, 0));
                    }
                    State::OnStack => back[e.index()] = true,
                    State::Done => {}
                }
            } else {
                state[n.index()] = State::Done;
                postorder.push(n);
                stack.pop();
            }
        }
        Dfs { back, postorder }
    }
}

/// The result of [`Cfg::dfs`].
pub struct Dfs {
    /// Per edge: whether it goes back to a node on the DFS stack (a loop's back edge).
    pub back: Vec<bool>,
    /// The nodes reachable from the entry, each after all its DFS descendants. Reversed, a
    /// topological order of the graph without its back edges.
    pub postorder: Vec<NodeId>,
}

impl Default for Cfg {
    fn default() -> Self {
        Self::new()
    }
}
