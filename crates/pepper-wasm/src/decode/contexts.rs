//! Decoding calling contexts: the sampled tree completed with the exact call-site counts,
//! or the exact tree read from the in-module context table; and where each call site ended
//! up in the instrumented module, for native stack samples.

use crate::module::call_sites;
use pepper_layout::{read_u32, read_u64, ContextMode};
use pepper_profile::{CallSite, ContextKind, ContextNode, Contexts, HotFunction};

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

/// A decoded calling context tree, sampled or exact.
struct Tree {
    kind: ContextKind,
    nodes: Vec<ContextNode>,
    hot: Vec<HotFunction>,
    sampling: Option<pepper_profile::ContextSampling>,
    overflow: u64,
}

impl crate::plan::Plan {
    /// The profile's calling contexts: the sampled tree (from the host sampler) or the exact
    /// one (from the context table in `mem`), with per-site call counts from `mem`, or
    /// `estimated_calls` where the guest counted none.
    pub(crate) fn contexts_profile(
        &self,
        mem: &[u8],
        sampled: Option<SampledContexts>,
        estimated_calls: Option<&[u64]>,
        location: &dyn Fn(u64) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> Option<pepper_profile::Contexts> {
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
                calls: match (l.site_counters, estimated_calls) {
                    (0, Some(est)) => est.get(id).copied().unwrap_or(0),
                    (0, None) => 0,
                    (_, _) => self.site_calls(mem, id as u32),
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
        let tree = match self.contexts {
            ContextMode::Off => return None,
            ContextMode::Sampled | ContextMode::Native => {
                let counted = l.site_counters != 0 || estimated_calls.is_some();
                self.sampled_tree(sampled?, &call_sites, &entries, counted)
            }
            ContextMode::Exact => self.exact_tree(mem, &site, warnings),
        };
        let Tree {
            kind,
            mut nodes,
            hot: hot_functions,
            sampling,
            overflow,
        } = tree;
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

    /// The sampled tree completed with the exact call-site counts (`pepper_cct::complete`):
    /// every context gets estimated calls.
    fn sampled_tree(
        &self,
        sampled: SampledContexts,
        call_sites: &[CallSite],
        entries: &[pepper_cct::EntryCount],
        counted: bool,
    ) -> Tree {
        let site = |s: u32| (s < call_sites.len() as u32).then_some(s);
        let SampledContexts { sampling, mut pcct } = sampled;
        // Every context gets estimated calls: the sampled tree extended by the exact
        // call-site counts (pepper_cct::complete).
        let counts: Vec<pepper_cct::SiteCount> = self
            .call_sites
            .iter()
            .zip(call_sites)
            .map(|(s, c)| pepper_cct::SiteCount {
                caller: s.func,
                callee: s.callee,
                calls: c.calls,
                sig: s.sig,
            })
            .collect();
        let opts = {
            let mut complete = pepper_cct::CompleteOptions::default();
            complete.unit = sampling.interval_us.max(1);
            complete.call_unit = sampling.window_weighted / sampling.window_calls.max(1);
            complete
        };
        let sampled_len = pcct.tree.len();
        let (t, est) = if !counted {
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
            pepper_cct::complete(&pcct.tree, &counts, entries, &opts)
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
        // Leaves beyond this module's functions keep their ids: another core module's
        // function (a component's, named `module::function` with the imports), or host
        // code the sampler could not name, a hot "function" of its own, so the list
        // accounts for all sampled time.
        hot.extend(
            pcct.hot_beyond
                .iter()
                .filter(|(_, &w)| w > 0)
                .map(|(&func, &self_us)| HotFunction { func, self_us }),
        );
        hot.sort_by(|a, b| b.self_us.cmp(&a.self_us).then(a.func.cmp(&b.func)));
        Tree {
            kind: ContextKind::Sampled,
            nodes,
            hot,
            sampling: Some(sampling),
            overflow: 0,
        }
    }

    /// The exact tree, read from the in-module context table.
    fn exact_tree(
        &self,
        mem: &[u8],
        site: &dyn Fn(u32) -> Option<u32>,
        warnings: &mut Vec<String>,
    ) -> Tree {
        let l = &self.layout;
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
        Tree {
            kind: ContextKind::Exact,
            nodes,
            hot: Vec::new(),
            sampling: None,
            overflow,
        }
    }
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
        .flat_map(|f| f.copy_indices().map(|c| (c, f.index.0)))
        .collect();
    for (fp, body) in plan.functions.iter().zip(&facts.bodies) {
        // A function's switchable copies hold its call sites too, in the same order.
        let bodies = std::iter::once(body).chain(
            fp.copy_indices()
                .filter_map(|c| facts.bodies.get((c - imported) as usize)),
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
