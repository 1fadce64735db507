//! The module's direct call graph: which functions are on a cycle of direct calls.
//!
//! Two rewriter decisions need it. Exact edges cannot take a recursive function's entry
//! count from its callers' counts (each member's entries would depend on its own), and
//! the switch must check the flag at a recursive function's entry: a recursion without
//! loops runs as long as a loop but passes no loop header, so a frame that entered it in
//! clean code would never switch (`SwitchPlacement::entry_check`).

use crate::analysis::FunctionAnalysis;

/// The nodes of `adj` (node → successors) that are on a cycle: in a strongly connected
/// component of more than one node, or with an edge to themselves. Tarjan's algorithm,
/// iteratively, so a deep call graph does not exhaust the stack.
pub fn on_cycles(adj: &[Vec<usize>]) -> Vec<usize> {
    let n = adj.len();
    const NONE: usize = usize::MAX;
    let (mut index, mut low) = (vec![NONE; n], vec![0; n]);
    let mut on_stack = vec![false; n];
    let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        // (node, position in its successor list)
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            if *pos == 0 && index[v] == NONE {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = adj[v].get(*pos) {
                *pos += 1;
                if index[w] == NONE {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 || adj[v].contains(&v) {
                    out.extend(component);
                }
            }
        }
    }
    out
}

/// Per defined function (by position), whether it is on a cycle of direct calls and tail
/// calls among the defined functions. `analyses[k]` is `None` for a body that was not
/// analyzed: its calls are unknown and it is on no cycle.
pub fn recursive<'a>(
    num_imported_funcs: u32,
    analyses: impl ExactSizeIterator<Item = Option<&'a FunctionAnalysis>>,
) -> Vec<bool> {
    let n = analyses.len();
    let adj: Vec<Vec<usize>> = analyses
        .map(|a| {
            let mut callees: Vec<usize> = a
                .into_iter()
                .flat_map(|a| a.direct_calls.iter())
                .filter_map(|&(_, f)| f.checked_sub(num_imported_funcs))
                .map(|k| k as usize)
                .filter(|&k| k < n)
                .collect();
            callees.sort_unstable();
            callees.dedup();
            callees
        })
        .collect();
    let mut out = vec![false; n];
    for k in on_cycles(&adj) {
        out[k] = true;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::module::ModuleFacts;

    fn cycles(adj: &[&[usize]]) -> Vec<usize> {
        let adj: Vec<Vec<usize>> = adj.iter().map(|a| a.to_vec()).collect();
        let mut c = on_cycles(&adj);
        c.sort_unstable();
        c
    }

    /// Self-calls and longer cycles count; a chain into a cycle, and a DAG, do not.
    #[test]
    fn nodes_on_cycles_and_only_those() {
        assert_eq!(cycles(&[&[1], &[2], &[]]), Vec::<usize>::new());
        assert_eq!(cycles(&[&[0]]), vec![0]);
        // 0 → 1 → 2 → 1, 3 → 3, 4 → 0
        assert_eq!(cycles(&[&[1], &[2], &[1], &[3], &[0]]), vec![1, 2, 3]);
        // A diamond is no cycle.
        assert_eq!(cycles(&[&[1, 2], &[3], &[3], &[]]), Vec::<usize>::new());
    }

    /// A long chain does not recurse in the walk itself.
    #[test]
    fn a_long_cycle_is_found_without_deep_recursion() {
        let n = 200_000;
        let adj: Vec<Vec<usize>> = (0..n).map(|v| vec![(v + 1) % n]).collect();
        assert_eq!(on_cycles(&adj).len(), n);
    }

    /// Mutual recursion through a tail call is recursion; calls to imports are not.
    #[test]
    fn recursion_through_calls_and_tail_calls() {
        let wasm = wat::parse_str(
            r#"(module
              (import "env" "f" (func $imp (param i32) (result i32)))
              (func $main (export "_start") (drop (call $even (i32.const 9))) (drop (call $imp (i32.const 0))))
              (func $even (param i32) (result i32)
                (if (result i32) (local.get 0)
                  (then (return_call $odd (i32.sub (local.get 0) (i32.const 1))))
                  (else (i32.const 1))))
              (func $odd (param i32) (result i32)
                (if (result i32) (local.get 0)
                  (then (call $even (i32.sub (local.get 0) (i32.const 1))))
                  (else (i32.const 0))))
              (func $leaf (param i32) (result i32) (call $imp (local.get 0))))"#,
        )
        .unwrap();
        let facts = ModuleFacts::parse(&wasm).unwrap();
        let analyses: Vec<_> = facts.bodies.iter().map(analyze).collect();
        let r = recursive(
            facts.num_imported_funcs,
            analyses.iter().map(|a| a.as_ref().ok()),
        );
        assert_eq!(r, [false, true, true, false]);
    }
}
