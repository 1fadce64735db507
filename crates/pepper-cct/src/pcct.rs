//! Whaley's partial calling context tree update (§5.2, Figure 7), over any stack that can
//! mark frames.
//!
//! Whaley marks a frame by setting a bit in its return address; a new activation
//! overwrites the return address and so clears the mark for free. pepper's guest keeps a
//! shadow stack whose push writes a fresh, unmarked function word, which gives the same
//! property: a marked frame is one the profiler has seen before and that has not returned
//! since. Because frames below an old frame are old too, a sample only walks the new
//! frames on top (at most `bufsize` of them) and knows exactly where they attach, since
//! the node of every frame it marked is remembered by depth (the fix for the
//! paper's ambiguous `get_node`).

use crate::tree::{ContextTree, NodeIdx, DETACHED_SITE, NO_SITE, ROOT};

/// One frame of a sampled stack.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub func: u32,
    /// The call site this frame is calling from (its callee's edge label); meaningless
    /// for the top frame.
    pub site: u32,
}

/// A stack the sampler reads, bottom (outermost, index 0) to top.
pub trait Stack {
    fn depth(&self) -> usize;
    fn frame(&self, i: usize) -> Frame;
    /// Whether frame `i` still carries the marker an earlier sample set.
    fn marked(&self, i: usize) -> bool;
    /// Sets the marker on frame `i`; false if the frame is no longer the one that was read
    /// (the guest returned or called meanwhile), in which case it stays unmarked.
    fn mark(&mut self, i: usize) -> bool;
    /// Whether everything read so far still holds. A stack read while its owner runs can
    /// tear (frames popped and others pushed between two reads); a torn sample is dropped.
    fn consistent(&self) -> bool {
        true
    }
    /// Whether frame 0 is not the outermost frame (the reader stopped short of the
    /// bottom): then frame 0 roots a detached subtree instead of hanging from the root.
    fn truncated(&self) -> bool {
        false
    }
}

/// Which edges a sample adds weight to (Whaley's Figure 7 as printed
/// and the paper's prose disagree).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EdgeMode {
    /// Figure 7 as printed: the youngest old frame is buffered too, so the edge into it
    /// gets weight again.
    Fig7Literal,
    /// The prose: only edges into activations that are new since the last sample.
    StrictNewEdges,
}

/// A partial calling context tree with Whaley's hot-function counters.
#[derive(Clone, Debug)]
pub struct Pcct {
    pub tree: ContextTree,
    /// Most frames a sample walks before it gives up and starts a detached subtree
    /// (Whaley's BUFSIZE, 16 in his experiments).
    pub bufsize: usize,
    pub mode: EdgeMode,
    /// Hot-function counters (Whaley §6.5): weight of samples whose leaf is each function
    /// (fixed size: `num_funcs`).
    pub hot: Vec<u64>,
    /// Weight of samples whose leaf is outside the counters' range, by the leaf's id: a
    /// function of another module (a component's), or a host frame the reader could not
    /// name. Few distinct ids, so a sparse map.
    pub hot_beyond: std::collections::BTreeMap<u32, u64>,
    pub samples: u64,
    /// Samples whose walk filled the buffer before meeting a known frame.
    pub detached: u64,
    /// Samples cut short because the tree's budget was spent: their weight went to the
    /// deepest context that exists.
    pub truncated: u64,
    /// Samples taken while no guest frame was live.
    pub empty: u64,
    /// Samples dropped because the stack changed while it was read.
    pub torn: u64,
    /// Node of the frame at each depth, valid for every marked frame.
    node_at: Vec<NodeIdx>,
    /// Depth of the last sample when every one of its frames has its node in `node_at`
    /// (it hung from the root and nothing was cut short).
    last_depth: Option<usize>,
    buf: Vec<usize>,
}

impl Pcct {
    /// An empty tree of at most `budget` nodes; `num_funcs` sizes the hot counters.
    pub fn new(budget: usize, bufsize: usize, mode: EdgeMode, num_funcs: usize) -> Pcct {
        let bufsize = bufsize.max(1);
        Pcct {
            tree: ContextTree::new(budget),
            bufsize,
            mode,
            hot: vec![0; num_funcs],
            hot_beyond: Default::default(),
            samples: 0,
            detached: 0,
            truncated: 0,
            empty: 0,
            torn: 0,
            node_at: Vec::with_capacity(1024),
            last_depth: None,
            buf: Vec::with_capacity(bufsize + 1),
        }
    }

    /// Records one sample of `stack` with `weight` (Whaley's `cputime`); false (nothing
    /// recorded, counted in `torn`) when the stack changed while it was read, so the caller
    /// can read it again. Allocation-free unless the stack is deeper than any before or the
    /// tree grows.
    pub fn sample(&mut self, stack: &mut impl Stack, weight: u64) -> bool {
        let depth = stack.depth();
        self.last_depth = None;
        if depth == 0 {
            self.samples += 1;
            self.empty += 1;
            self.tree.node_mut(ROOT).self_weight += weight;
            return true;
        }
        // Upward phase: buffer the new frames, top first.
        self.buf.clear();
        let mut i = depth;
        let mut detach: Option<usize> = None;
        let attach = loop {
            if i == 0 {
                if stack.truncated() {
                    // The true outer frames are unknown: frame 0 roots a detached subtree.
                    self.buf.pop();
                    detach = Some(0);
                }
                break ROOT;
            }
            let f = i - 1;
            if stack.marked(f) && f < self.node_at.len() {
                match self.mode {
                    EdgeMode::StrictNewEdges => break self.node_at[f],
                    EdgeMode::Fig7Literal => {
                        self.buf.push(f);
                        break if f == 0 { ROOT } else { self.node_at[f - 1] };
                    }
                }
            }
            if self.buf.len() == self.bufsize {
                // Figure 10: too many new frames; frame `f` roots a detached subtree.
                detach = Some(f);
                break ROOT;
            }
            self.buf.push(f);
            i = f;
        };
        if !stack.consistent() {
            self.torn += 1;
            return false;
        }
        self.samples += 1;
        let attach = match detach {
            None => attach,
            Some(f) => {
                self.detached += 1;
                match self.tree.child(ROOT, DETACHED_SITE, stack.frame(f).func) {
                    Some(d) => {
                        self.set_node(f, d);
                        d
                    }
                    None => {
                        self.truncated += 1;
                        self.tree.node_mut(ROOT).self_weight += weight;
                        return true;
                    }
                }
            }
        };
        // Downward phase: outermost new frame first.
        let mut n = attach;
        let mut fresh = false;
        let mut marking = true;
        for k in (0..self.buf.len()).rev() {
            let j = self.buf[k];
            let func = stack.frame(j).func;
            let site = if j == 0 {
                NO_SITE
            } else {
                stack.frame(j - 1).site
            };
            let child = if fresh {
                self.tree.new_child(n, site, func)
            } else {
                match self.tree.find_child(n, site, func) {
                    Some(c) => Some(c),
                    None => {
                        fresh = true;
                        self.tree.new_child(n, site, func)
                    }
                }
            };
            let Some(c) = child else {
                self.truncated += 1;
                detach = Some(j);
                break;
            };
            self.tree.node_mut(c).edge_weight += weight;
            self.set_node(j, c);
            // A frame is marked only once its node is known, and never above a frame the
            // guest changed under us.
            marking = marking && stack.mark(j);
            n = c;
        }
        self.tree.node_mut(n).self_weight += weight;
        if detach.is_none() {
            self.last_depth = Some(depth);
        }
        let leaf = stack.frame(depth - 1).func;
        match self.hot.get_mut(leaf as usize) {
            Some(h) => *h += weight,
            None => *self.hot_beyond.entry(leaf).or_default() += weight,
        }
        true
    }

    /// The nodes of the last sample's frames, outermost first, when all of them hang from
    /// the root (not after a detached, truncated or empty sample).
    pub fn last_stack(&self) -> Option<&[NodeIdx]> {
        self.last_depth.map(|d| &self.node_at[..d])
    }

    fn set_node(&mut self, depth: usize, n: NodeIdx) {
        if depth >= self.node_at.len() {
            self.node_at.resize(depth + 1, ROOT);
        }
        self.node_at[depth] = n;
    }
}

/// A stack in a `Vec`, for tests and offline replays: `push` clears the marker like a new
/// frame overwriting a return address.
#[derive(Clone, Debug, Default)]
pub struct VecStack {
    frames: Vec<(Frame, bool)>,
}

impl VecStack {
    pub fn push(&mut self, func: u32) {
        self.frames.push((Frame { func, site: 0 }, false));
    }

    pub fn pop(&mut self) {
        self.frames.pop();
    }

    /// The top frame calls from `site` (set before pushing the callee).
    pub fn call(&mut self, site: u32, func: u32) {
        if let Some(top) = self.frames.last_mut() {
            top.0.site = site;
        }
        self.push(func);
    }
}

impl Stack for VecStack {
    fn depth(&self) -> usize {
        self.frames.len()
    }
    fn frame(&self, i: usize) -> Frame {
        self.frames[i].0
    }
    fn marked(&self, i: usize) -> bool {
        self.frames[i].1
    }
    fn mark(&mut self, i: usize) -> bool {
        self.frames[i].1 = true;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(p: &Pcct, path: &[(u32, u32)]) -> Option<NodeIdx> {
        let mut n = ROOT;
        for &(site, func) in path {
            n = p.tree.find_child(n, site, func)?;
        }
        Some(n)
    }

    /// A worked example: M→A→C sampled twice in the same C
    /// activation, then C returns and A calls D.
    fn worked_example(mode: EdgeMode) -> Pcct {
        let (m, a, c, d) = (1, 2, 3, 4);
        let mut p = Pcct::new(100, 16, mode, 8);
        let mut s = VecStack::default();
        s.push(m);
        s.call(10, a);
        s.call(20, c);
        p.sample(&mut s, 1);
        p.sample(&mut s, 1);
        s.pop();
        s.call(21, d);
        p.sample(&mut s, 1);
        p
    }

    #[test]
    fn figure7_literal_reweights_the_boundary_edge() {
        let p = worked_example(EdgeMode::Fig7Literal);
        let m = ctx(&p, &[(NO_SITE, 1)]).unwrap();
        let a = ctx(&p, &[(NO_SITE, 1), (10, 2)]).unwrap();
        let c = ctx(&p, &[(NO_SITE, 1), (10, 2), (20, 3)]).unwrap();
        let d = ctx(&p, &[(NO_SITE, 1), (10, 2), (21, 4)]).unwrap();
        let w = |n: NodeIdx| p.tree.node(n).edge_weight;
        // s1: root→M, M→A, A→C; s2: A→C again (boundary); s3: M→A (boundary), A→D.
        assert_eq!((w(m), w(a), w(c), w(d)), (1, 2, 2, 1));
        assert_eq!(p.tree.node(c).self_weight, 2);
        assert_eq!(p.tree.node(d).self_weight, 1);
        assert_eq!(p.hot[3], 2);
        assert_eq!(p.hot[4], 1);
    }

    /// A leaf in another module (an id past this module's functions) or in host code keeps
    /// its own id and weight: it is never folded into one anonymous bucket.
    #[test]
    fn leaves_beyond_the_counters_keep_their_ids() {
        let (other, host) = (1 << 31 | 5, u32::MAX);
        let mut p = Pcct::new(100, 16, EdgeMode::Fig7Literal, 8);
        let mut s = VecStack::default();
        s.push(1);
        s.call(10, other);
        p.sample(&mut s, 3);
        s.pop();
        s.call(11, host);
        p.sample(&mut s, 2);
        p.sample(&mut s, 2);
        assert_eq!(p.hot_beyond.get(&other), Some(&3));
        assert_eq!(p.hot_beyond.get(&host), Some(&4));
        assert_eq!(p.hot.iter().sum::<u64>(), 0);
    }

    #[test]
    fn strict_mode_weights_only_new_edges() {
        let p = worked_example(EdgeMode::StrictNewEdges);
        let w = |path: &[(u32, u32)]| p.tree.node(ctx(&p, path).unwrap()).edge_weight;
        assert_eq!(w(&[(NO_SITE, 1)]), 1);
        assert_eq!(w(&[(NO_SITE, 1), (10, 2)]), 1);
        assert_eq!(w(&[(NO_SITE, 1), (10, 2), (20, 3)]), 1);
        assert_eq!(w(&[(NO_SITE, 1), (10, 2), (21, 4)]), 1);
        let c = ctx(&p, &[(NO_SITE, 1), (10, 2), (20, 3)]).unwrap();
        assert_eq!(p.tree.node(c).self_weight, 2);
    }

    #[test]
    fn a_new_activation_at_the_same_depth_is_new() {
        // The same function called again from the same site between two samples: the
        // push cleared the marker, so the edge counts again (the prefix-diff method
        // cannot see this).
        let mut p = Pcct::new(100, 16, EdgeMode::StrictNewEdges, 4);
        let mut s = VecStack::default();
        s.push(1);
        s.call(5, 2);
        p.sample(&mut s, 1);
        s.pop();
        s.call(5, 2);
        p.sample(&mut s, 1);
        let n = ctx(&p, &[(NO_SITE, 1), (5, 2)]).unwrap();
        assert_eq!(p.tree.node(n).edge_weight, 2);
        assert_eq!(
            p.tree.node(ctx(&p, &[(NO_SITE, 1)]).unwrap()).edge_weight,
            1
        );
    }

    #[test]
    fn recursion_keeps_full_context() {
        let mut p = Pcct::new(100, 16, EdgeMode::StrictNewEdges, 4);
        let mut s = VecStack::default();
        s.push(1);
        for _ in 0..5 {
            s.call(7, 1);
        }
        p.sample(&mut s, 3);
        // Six nodes in a chain below the root, the leaf holding the weight.
        assert_eq!(p.tree.len(), 7);
        let leaf = ctx(&p, &[(NO_SITE, 1), (7, 1), (7, 1), (7, 1), (7, 1), (7, 1)]).unwrap();
        assert_eq!(p.tree.node(leaf).self_weight, 3);
        assert_eq!(p.tree.depth(leaf), 6);
    }

    #[test]
    fn overflowing_walk_starts_a_detached_subtree() {
        let mut p = Pcct::new(100, 2, EdgeMode::StrictNewEdges, 8);
        let mut s = VecStack::default();
        s.push(1);
        s.call(1, 2);
        s.call(2, 3);
        s.call(3, 4);
        s.call(4, 5);
        p.sample(&mut s, 1);
        assert_eq!(p.detached, 1);
        // Frames 5 and 4 were walked; frame 3 roots the detached subtree.
        let leaf = ctx(&p, &[(DETACHED_SITE, 3), (3, 4), (4, 5)]).unwrap();
        assert!(p
            .tree
            .node(ctx(&p, &[(DETACHED_SITE, 3)]).unwrap())
            .detached());
        assert_eq!(p.tree.node(leaf).self_weight, 1);
        // The next sample after a new call attaches below the known frames.
        s.call(9, 6);
        p.sample(&mut s, 1);
        let leaf2 = ctx(&p, &[(DETACHED_SITE, 3), (3, 4), (4, 5), (9, 6)]).unwrap();
        assert_eq!(p.tree.node(leaf2).self_weight, 1);
        assert_eq!(p.detached, 1);
    }

    #[test]
    fn a_stack_read_partway_hangs_from_a_detached_root() {
        let mut p = Pcct::new(100, 16, EdgeMode::StrictNewEdges, 8);
        let mut v = VecStack::default();
        v.push(3);
        v.call(4, 5);
        p.sample(
            &mut Racy {
                inner: v,
                marks_below: usize::MAX,
                torn: false,
                truncated: true,
            },
            1,
        );
        let d = p
            .tree
            .find_child(ROOT, DETACHED_SITE, 3)
            .expect("detached root");
        let leaf = p.tree.find_child(d, 4, 5).unwrap();
        assert_eq!(p.tree.node(leaf).self_weight, 1);
        assert_eq!(p.tree.find_child(ROOT, NO_SITE, 3), None);
        assert_eq!(p.detached, 1);
    }

    #[test]
    fn spent_budget_keeps_weight_on_the_deepest_context() {
        let mut p = Pcct::new(3, 16, EdgeMode::StrictNewEdges, 8);
        let mut s = VecStack::default();
        s.push(1);
        s.call(1, 2);
        s.call(2, 3);
        p.sample(&mut s, 5);
        assert_eq!(p.truncated, 1);
        let a = ctx(&p, &[(NO_SITE, 1), (1, 2)]).unwrap();
        assert_eq!(p.tree.node(a).self_weight, 5);
        // The unrecorded frame stays unmarked: the next sample tries again.
        assert!(!s.marked(2));
        assert_eq!(p.hot[3], 5);
    }

    /// A stack whose marks fail from a given depth up (as when the guest races the
    /// sampler), that reports itself torn, or that was read only partway down.
    struct Racy {
        inner: VecStack,
        marks_below: usize,
        torn: bool,
        truncated: bool,
    }
    impl Stack for Racy {
        fn depth(&self) -> usize {
            self.inner.depth()
        }
        fn frame(&self, i: usize) -> Frame {
            self.inner.frame(i)
        }
        fn marked(&self, i: usize) -> bool {
            self.inner.marked(i)
        }
        fn mark(&mut self, i: usize) -> bool {
            i < self.marks_below && self.inner.mark(i)
        }
        fn consistent(&self) -> bool {
            !self.torn
        }
        fn truncated(&self) -> bool {
            self.truncated
        }
    }

    #[test]
    fn a_torn_read_records_and_marks_nothing() {
        let mut p = Pcct::new(100, 16, EdgeMode::StrictNewEdges, 8);
        let mut v = VecStack::default();
        v.push(1);
        v.call(1, 2);
        let mut s = Racy {
            inner: v,
            marks_below: usize::MAX,
            torn: true,
            truncated: false,
        };
        assert!(!p.sample(&mut s, 1));
        assert_eq!((p.samples, p.torn, p.tree.len()), (0, 1, 1));
        assert!(!s.marked(0) && !s.marked(1));
        assert_eq!(p.hot[2], 0);
    }

    #[test]
    fn a_failed_mark_stops_marking_above_it() {
        let mut p = Pcct::new(100, 16, EdgeMode::StrictNewEdges, 8);
        let mut v = VecStack::default();
        v.push(1);
        v.call(1, 2);
        v.call(2, 3);
        let mut s = Racy {
            inner: v,
            marks_below: 1,
            torn: false,
            truncated: false,
        };
        p.sample(&mut s, 1);
        assert!(s.marked(0));
        assert!(!s.marked(1));
        assert!(!s.marked(2));
    }
}
