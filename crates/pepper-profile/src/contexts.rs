//! Calling contexts in a profile: the tree (sampled PCCT or exact), call sites with their
//! exact call counts, and hot-function counters.

use serde::{Deserialize, Serialize};

/// How the context tree was built.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ContextKind {
    /// Whaley's partial calling context tree from timer samples of the guest's shadow stack;
    /// weights are the guest thread's CPU time (wall time where it cannot be read). Node
    /// call counts are estimates (see [`ContextNode::calls`]).
    Sampled,
    /// Every call counted in its context: the complete calling context tree.
    Exact,
}

/// One call instruction of the original module.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CallSite {
    /// Dense id, the position in [`Contexts::call_sites`].
    pub id: u32,
    /// The calling function.
    pub func: u32,
    /// Offset of the call instruction in the original module.
    pub offset: u64,
    /// The callee of a direct call (`call`, `return_call`); `None` for indirect calls.
    pub callee: Option<u32>,
    /// An indirect call's signature (a canonical type index of the module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<u32>,
    /// Executions of the call instruction (exact: one counter per site).
    pub calls: u64,
    /// `file:line` from DWARF, when the module has it.
    pub location: Option<String>,
}

/// One calling context: a function reached through a chain of call sites.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ContextNode {
    /// Parent node (an index into [`Contexts::nodes`]); `None` only for node 0, the root,
    /// which stands for the host that entered the module.
    pub parent: Option<u32>,
    /// Function index; for a frame in the host (a WASI call in progress) the imported
    /// function's index.
    pub func: u32,
    /// The call site in the parent's function; `None` under the root.
    pub site: Option<u32>,
    /// A subtree whose walk ran out of depth before it met a known frame (Whaley's
    /// Figure 10): its true parent context is unknown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub detached: bool,
    /// A context no sample saw, added to a sampled tree because the exact call-site counts
    /// say it ran (its `calls` are an estimate, its times are 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
    /// Calls into this context. Exact trees: counted. Sampled trees: estimated from the
    /// exact call-site counts, split among contexts by sampled weight where samples exist
    /// and by the caller's own context split where they do not (`pepper_cct::complete`).
    pub calls: u64,
    /// Sampled wall time (µs) with this context on top of the stack.
    pub self_us: u64,
    /// Sampled weight (µs) of the edge into this context: time of the samples that found
    /// this context's activation new.
    pub edge_us: u64,
}

/// How the sampled tree was taken.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ContextSampling {
    pub interval_us: u64,
    pub samples: u64,
    /// `strict` (only new activations' edges get weight) or `figure7` (the paper's code).
    pub edge_mode: String,
    /// Frames a sample walks at most before it starts a detached subtree.
    pub bufsize: u32,
    /// Nodes the tree may hold; past it, samples go to their deepest known context.
    pub budget: u64,
    pub detached: u64,
    pub truncated: u64,
    /// Samples taken while the guest was in a host (WASI) call.
    pub in_host: u64,
    /// Samples with no guest frame live (before `_start` or after it returned).
    pub empty: u64,
    /// Stack reads dropped (and retried, up to 4 times per tick) because the guest
    /// returned below a frame while the sampler was reading it.
    #[serde(default)]
    pub torn: u64,
    /// Calls placed in their exact context by call windows (`--call-log`), their total
    /// weight (each stands for the calls of its tick's interval), and windows that ended
    /// early at an event that did not fit the stack (a frame of uninstrumented code, a
    /// tail call, a throw).
    #[serde(default)]
    pub window_calls: u64,
    #[serde(default)]
    pub window_weighted: u64,
    #[serde(default)]
    pub window_cut: u64,
    /// Native stacks: the mean time from the sampler's signal to its handler's start, in
    /// nanoseconds (0: not measured). The guest thread stops for part of it, which is
    /// most of what a native sample costs (an interrupt across cores: on a VM, exits on
    /// both sides).
    #[serde(default)]
    pub signal_delivery_ns: u64,
}

/// Calling contexts of a run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Contexts {
    pub kind: ContextKind,
    pub call_sites: Vec<CallSite>,
    /// Node 0 is the root; every parent precedes its children.
    pub nodes: Vec<ContextNode>,
    /// Hot-function counters (Whaley §6.5): sampled self time per function, hottest first.
    #[serde(default)]
    pub hot_functions: Vec<HotFunction>,
    /// Names of the imported functions that appear in the tree (`module::name`).
    #[serde(default)]
    pub imports: Vec<(u32, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<ContextSampling>,
    /// Exact trees: calls that found the context table full (counted under the root).
    #[serde(default)]
    pub overflow: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HotFunction {
    pub func: u32,
    pub self_us: u64,
}

impl Contexts {
    /// The path of `n` from the outermost frame: (call site, function) per node, the
    /// root excluded. Two contexts are the same when these are equal.
    pub fn path(&self, n: usize) -> Vec<(Option<u32>, u32)> {
        let mut out = Vec::new();
        let mut at = n;
        while let Some(p) = self.nodes[at].parent {
            out.push((self.nodes[at].site, self.nodes[at].func));
            at = p as usize;
        }
        out.reverse();
        out
    }

    /// The node ids from the outermost frame down to `n` (root excluded).
    pub fn ancestry(&self, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut at = n;
        while let Some(p) = self.nodes[at].parent {
            out.push(at);
            at = p as usize;
        }
        out.reverse();
        out
    }

    /// The value each node stands for: self time for sampled trees, calls for exact ones.
    pub fn value(&self, n: usize) -> u64 {
        match self.kind {
            ContextKind::Sampled => self.nodes[n].self_us,
            ContextKind::Exact => self.nodes[n].calls,
        }
    }

    /// The nodes with a non-zero [`Contexts::value`], root excluded, in tree order: what
    /// reports and exports list.
    pub fn valued(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        (1..self.nodes.len())
            .map(|i| (i, self.value(i)))
            .filter(|&(_, v)| v > 0)
    }

    pub fn import_name(&self, func: u32) -> Option<&str> {
        self.imports
            .iter()
            .find(|i| i.0 == func)
            .map(|i| i.1.as_str())
    }
}
