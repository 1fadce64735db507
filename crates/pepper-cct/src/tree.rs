//! An arena tree of calling contexts.
//!
//! A node is one context: a function reached from its parent context through one call
//! site, so two calls from one function to the same callee stay distinct (Whaley §5.2's
//! `offset` field). Children are a singly linked sibling list as in Whaley's Figure 8:
//! fan-out is small, and a linear scan beats hashing for it.

/// Index of a node in a [`ContextTree`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeIdx(pub u32);

impl NodeIdx {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The tree's root: not a function, the parent of every outermost frame.
pub const ROOT: NodeIdx = NodeIdx(0);
/// The call site of an outermost frame (it was entered from the host).
pub const NO_SITE: u32 = u32::MAX;
/// The call site of a detached root (Whaley's Figure 10: a walk that ran out of buffer
/// before it met a known frame cannot tell where its frames hang).
pub const DETACHED_SITE: u32 = u32::MAX - 1;

const NIL: u32 = u32::MAX;

/// One context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub func: u32,
    /// Call site (module-wide id) in the parent's function; [`NO_SITE`] or
    /// [`DETACHED_SITE`] under the root.
    pub site: u32,
    pub parent: Option<NodeIdx>,
    first_child: u32,
    next_sibling: u32,
    /// Weight of samples whose leaf is this context (Whaley's node `time`).
    pub self_weight: u64,
    /// Weight added to the edge into this node (Whaley's edge `weight`).
    pub edge_weight: u64,
    /// Calls into this context (exact trees).
    pub calls: u64,
    /// Weighted calls seen in this context in call windows (sampled trees; see
    /// [`crate::window`]).
    pub window_calls: u64,
}

impl Node {
    pub fn detached(&self) -> bool {
        self.site == DETACHED_SITE
    }
}

/// A calling context tree with at most `budget` nodes.
#[derive(Clone, Debug)]
pub struct ContextTree {
    nodes: Vec<Node>,
    budget: usize,
    /// Times a new context was needed but the budget was reached.
    pub refused: u64,
}

impl ContextTree {
    /// An empty tree (just the root) that will hold at most `budget` nodes (at least 1).
    pub fn new(budget: usize) -> ContextTree {
        let mut nodes = Vec::with_capacity(budget.clamp(1, 1 << 16));
        nodes.push(Node {
            func: u32::MAX,
            site: NO_SITE,
            parent: None,
            first_child: NIL,
            next_sibling: NIL,
            self_weight: 0,
            edge_weight: 0,
            calls: 0,
            window_calls: 0,
        });
        ContextTree {
            nodes,
            budget: budget.max(1),
            refused: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Lets the tree grow to `budget` nodes (never below its current size).
    pub fn raise_budget(&mut self, budget: usize) {
        self.budget = self.budget.max(budget).max(self.nodes.len());
    }

    pub fn node(&self, n: NodeIdx) -> &Node {
        &self.nodes[n.index()]
    }

    pub fn node_mut(&mut self, n: NodeIdx) -> &mut Node {
        &mut self.nodes[n.index()]
    }

    /// All nodes with their indices, root first; a parent always precedes its children.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeIdx, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (NodeIdx(i as u32), n))
    }

    /// The children of `n`.
    pub fn children(&self, n: NodeIdx) -> impl Iterator<Item = NodeIdx> + '_ {
        let mut c = self.nodes[n.index()].first_child;
        std::iter::from_fn(move || {
            (c != NIL).then(|| {
                let here = c;
                c = self.nodes[c as usize].next_sibling;
                NodeIdx(here)
            })
        })
    }

    /// The child of `parent` for `func` called from `site`, if it exists.
    pub fn find_child(&self, parent: NodeIdx, site: u32, func: u32) -> Option<NodeIdx> {
        self.children(parent).find(|&c| {
            let n = &self.nodes[c.index()];
            n.func == func && n.site == site
        })
    }

    /// Finds or creates the child; `None` when it does not exist and the budget is spent
    /// (counted in [`ContextTree::refused`]).
    pub fn child(&mut self, parent: NodeIdx, site: u32, func: u32) -> Option<NodeIdx> {
        if let Some(c) = self.find_child(parent, site, func) {
            return Some(c);
        }
        self.new_child(parent, site, func)
    }

    /// Creates a child without looking for an existing one: below a node created in this
    /// same walk there is nothing to find (Whaley §5.2's second optimization).
    pub fn new_child(&mut self, parent: NodeIdx, site: u32, func: u32) -> Option<NodeIdx> {
        if self.nodes.len() >= self.budget {
            self.refused += 1;
            return None;
        }
        let idx = self.nodes.len() as u32;
        let p = &mut self.nodes[parent.index()];
        let next_sibling = p.first_child;
        p.first_child = idx;
        self.nodes.push(Node {
            func,
            site,
            parent: Some(parent),
            first_child: NIL,
            next_sibling,
            self_weight: 0,
            edge_weight: 0,
            calls: 0,
            window_calls: 0,
        });
        Some(NodeIdx(idx))
    }

    /// The context of `n`: (site, function) pairs from the outermost frame down to `n`.
    pub fn context(&self, n: NodeIdx) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut at = n;
        while let Some(p) = self.nodes[at.index()].parent {
            let node = &self.nodes[at.index()];
            out.push((node.site, node.func));
            at = p;
        }
        out.reverse();
        out
    }

    /// Depth of `n` (the root is 0).
    pub fn depth(&self, n: NodeIdx) -> usize {
        let mut d = 0;
        let mut at = n;
        while let Some(p) = self.nodes[at.index()].parent {
            d += 1;
            at = p;
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_sites_keep_children_apart() {
        let mut t = ContextTree::new(100);
        let main = t.child(ROOT, NO_SITE, 1).unwrap();
        let a = t.child(main, 10, 2).unwrap();
        let b = t.child(main, 11, 2).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.child(main, 10, 2), Some(a));
        assert_eq!(t.context(b), vec![(NO_SITE, 1), (11, 2)]);
        assert_eq!(t.depth(b), 2);
        let mut kids: Vec<_> = t.children(main).collect();
        kids.sort();
        assert_eq!(kids, vec![a, b]);
    }

    #[test]
    fn budget_refuses_new_nodes_but_finds_old_ones() {
        let mut t = ContextTree::new(3);
        let main = t.child(ROOT, NO_SITE, 1).unwrap();
        let a = t.child(main, 0, 2).unwrap();
        assert_eq!(t.child(main, 1, 3), None);
        assert_eq!(t.refused, 1);
        assert_eq!(t.child(main, 0, 2), Some(a));
        assert_eq!(t.len(), 3);
    }
}
