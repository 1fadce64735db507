//! Builders for hand-made profiles in unit tests.

use crate::contexts::{CallSite, ContextKind, ContextNode, Contexts, HotFunction};
use crate::model::*;

pub fn function(index: u32, name: Option<&str>) -> Function {
    Function {
        index,
        name: name.map(str::to_string),
        instrumented: true,
        skipped: None,
        num_paths: Some(2),
        counting: Some("array".into()),
        truncated_nodes: 0,
        cold_edges: None,
        cold_executions: None,
        obvious_paths: None,
        uninstrumented_edges: None,
        register_loops: None,
        under_sampled: None,
    }
}

pub fn branch(id: u32, counts: &[u64]) -> Branch {
    Branch {
        id,
        func: 0,
        offset: 100 + id as u64,
        kind: BranchKind::BrIf,
        outcomes: vec!["taken".into(), "not-taken".into()],
        counts: counts.to_vec(),
        location: None,
        inlined: Vec::new(),
        recorded: None,
        bias_margin: None,
    }
}

pub fn path(number: u64, count: u64, steps: &[(u32, u32)]) -> Path {
    Path {
        func: 0,
        number,
        count,
        start: PathPoint::FunctionEntry,
        end: PathPoint::FunctionExit,
        steps: steps
            .iter()
            .map(|&(branch, outcome)| Step { branch, outcome })
            .collect(),
        blocks: vec![],
        ops: None,
    }
}

pub fn profile(branches: Vec<Branch>, paths: Vec<Path>) -> Profile {
    Profile {
        format: crate::FORMAT.into(),
        version: crate::VERSION,
        mode: Mode::ExactPaths,
        module: ModuleInfo {
            path: "m.wasm".into(),
            sha256: "00".into(),
            size: 0,
        },
        modules: Vec::new(),
        run: RunInfo::default(),
        functions: vec![],
        branches,
        paths,
        lost: Lost::default(),
        sampling: None,
        contexts: None,
        timeline: None,
        phases: None,
        warnings: vec![],
    }
}

pub fn node(
    parent: Option<u32>,
    func: u32,
    site: Option<u32>,
    calls: u64,
    self_us: u64,
) -> ContextNode {
    ContextNode {
        parent,
        func,
        site,
        detached: false,
        inferred: false,
        calls,
        self_us,
        edge_us: 0,
    }
}

pub fn tree(kind: ContextKind, nodes: Vec<ContextNode>, hot: &[(u32, u64)]) -> Contexts {
    Contexts {
        kind,
        call_sites: (0..4)
            .map(|id| CallSite {
                id,
                func: 0,
                offset: 100 + id as u64,
                callee: None,
                sig: None,
                calls: 0,
                location: None,
            })
            .collect(),
        nodes,
        hot_functions: hot
            .iter()
            .map(|&(func, self_us)| HotFunction { func, self_us })
            .collect(),
        imports: Vec::new(),
        sampling: None,
        overflow: 0,
    }
}
