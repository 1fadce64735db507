//! Stage three: every function's new code (its one body, or under the switch its checked
//! body and two copies), pepper's own functions, and the module written out.

use super::hash::{cache_miss_function, hash_function};
use super::memory::{ArmTables, LaidOut};
use super::Build;
use crate::body::{emit_body, val_type};
use crate::contexts::ContextEmit;
use crate::emit::EmitKind;
use crate::plan::*;
use crate::rewrite::{write_module, Additions};
use crate::switch::{Budget, Redirect, SwitchedFunction};
use pepper_layout::{pep_tag, ContextMode, HashTable};
use pepper_profile::Mode;
use std::collections::HashMap;
use std::sync::Arc;
use wasm_encoder::{BlockType, Function, ValType};

/// Types pepper appends: the hash function's, the context table's, the cache miss's, and
/// `[] -> results` for wrapper blocks of multi-result functions.
type ExtraTypes = Vec<(Vec<ValType>, Vec<ValType>)>;

/// Switch: per function, the index of its first copy.
/// Per defined function, its copies' function indices, when it has copies.
type Switchable = Vec<Option<CopyIndices>>;

/// Where a function's copies are: `F_inst` at `first`, `F_clean` after it, then
/// `F_resume` when it has one.
#[derive(Copy, Clone)]
struct CopyIndices {
    first: u32,
    resume: bool,
}

/// Function indices of what pepper appends after the module's own functions.
#[derive(Copy, Clone)]
struct Appended {
    hash_fn: u32,
    enter_fn: u32,
    miss_fn: u32,
}

/// What emission produces besides the bodies.
#[derive(Default)]
struct Emitted {
    bodies: Vec<Option<Function>>,
    /// Switch copies, appended after pepper's own functions: (type, body).
    copy_fns: Vec<(u32, Function)>,
    /// (defined index, (F_inst, F_clean)).
    copies: Vec<(usize, (u32, u32))>,
    /// (defined index, F_resume).
    resumes: Vec<(usize, u32)>,
    /// Ephemeral copies counting edges: (defined index, its loops' entry and leave
    /// counters).
    switch_counts: Vec<(usize, Vec<SwitchCount>)>,
    /// Path windows: (defined index, each original operator's code offset).
    op_offsets: Vec<(usize, Vec<u32>)>,
    /// Switch: the checks' `if`s, hinted unlikely.
    hints: Vec<crate::hints::Hint>,
    /// Switch: the globals that hand locals over.
    scratch: crate::switch::Scratch,
}

impl Build<'_, '_> {
    /// Emits every body into the plan's module.
    pub(super) fn emit(
        &self,
        mut plan: Plan,
        tables: &ArmTables,
        laid: &LaidOut,
        context_code: bool,
    ) -> Result<(Vec<u8>, Plan), InstrumentError> {
        let facts = self.facts;
        plan.rewritten = true;
        let hash_fn = facts.num_imported_funcs + facts.bodies.len() as u32;
        let appended = Appended {
            hash_fn,
            enter_fn: hash_fn + 1,
            miss_fn: hash_fn + 2,
        };
        let mut extra_types: ExtraTypes = vec![
            (vec![ValType::I32, ValType::I64, ValType::I64], vec![]),
            (vec![ValType::I32, ValType::I64], vec![ValType::I32]),
            (vec![ValType::I32, ValType::I64, ValType::I32], vec![]),
        ];
        let switchable = self.switchable(&plan, laid, hash_fn + 3)?;
        let mut entered_clean: std::collections::HashSet<u32> = plan
            .functions
            .iter()
            .filter_map(|fp| fp.analysis.as_ref())
            .flat_map(|a| a.tail_calls.iter().copied())
            .collect();
        // Functions without copies (left alone, or with locals no copy can take) call
        // their callees' clean code directly.
        if self.switch.is_some() {
            for (k, fp) in plan.functions.iter().enumerate() {
                if switchable[k].is_none() {
                    let sites = crate::module::call_sites(fp.index.0, &facts.bodies[k])?;
                    entered_clean.extend(sites.iter().filter_map(|s| s.callee));
                }
            }
        }
        // Recursion passes no loop header: its functions check at entry, and instrumented
        // copies call them at `F` (see `InstrumentOptions::switch`). Not those
        // with an outermost loop the copies can be entered at: an activation that runs its
        // loop meets that loop's check, and `F_inst` leaves there. In a C program's
        // call graph one strongly connected component can hold most of the engine
        // (SQLite's: `sqlite3VdbeExec`, the b-tree, the allocator), whose small hot
        // callees would otherwise pay an entry check on every call.
        let recursive: Vec<bool> = match self.switch.is_some() {
            true => crate::callgraph::recursive(
                facts.num_imported_funcs,
                plan.functions.iter().map(|fp| fp.analysis.as_deref()),
            )
            .into_iter()
            .enumerate()
            .map(|(k, r)| r && laid.shapes.get(k).is_none_or(|s| !s.has_entered_loop()))
            .collect(),
            false => vec![false; plan.functions.len()],
        };
        let entry_counter: HashMap<u32, u32> =
            plan.entry_counters.iter().map(|e| (e.0, e.1)).collect();
        let mut out = Emitted {
            scratch: crate::switch::Scratch::new(facts.num_globals),
            ..Default::default()
        };
        for k in 0..plan.functions.len() {
            let ctx = FunctionContext {
                plan: &plan,
                k,
                tables,
                laid,
                appended,
                context_code,
                switchable: &switchable,
                entered_clean: &entered_clean,
                recursive: &recursive,
                entry_counter: &entry_counter,
            };
            self.emit_function(&ctx, &mut extra_types, &mut out)?;
        }
        for &(k, r) in &out.resumes {
            plan.functions[k].resume = Some(r);
        }
        for (k, counts) in out.switch_counts {
            plan.functions[k].switch_counts = counts;
        }
        for (k, offsets) in out.op_offsets {
            plan.functions[k].op_offsets = Arc::from(offsets);
        }
        for &(k, c) in &out.copies {
            plan.functions[k].copies = Some(c);
            if self.budgets {
                plan.functions[k].header_counters = header_nodes(&plan.functions[k], laid, k);
            }
        }
        plan.switch_hints = out.hints.len();
        let switch = (out.hints, out.scratch.globals);
        let additions = self.additions(&plan, tables, appended, extra_types, out.copy_fns, switch);
        let (bytes, dropped) = write_module(self.wasm, facts, out.bodies, &additions)?;
        plan.dropped_sections = dropped;
        Ok((bytes, plan))
    }

    /// Switch: which functions get copies, at which index (the first of two, or of three
    /// with `F_resume`); decided before any body so that instrumented copies can call
    /// each other.
    fn switchable(
        &self,
        plan: &Plan,
        laid: &LaidOut,
        first: u32,
    ) -> Result<Switchable, InstrumentError> {
        let mut switchable = vec![None; plan.functions.len()];
        let Some(placement) = self.switch else {
            return Ok(switchable);
        };
        let mut next = first;
        for (k, fp) in plan.functions.iter().enumerate() {
            if fp.analysis.is_none() || fp.skipped.is_some() {
                continue;
            }
            let locals = crate::body::original_locals(&self.facts.bodies[k])?;
            if crate::switch::copyable(&locals) {
                let resume = self.needs_resume(laid, placement, k);
                switchable[k] = Some(CopyIndices {
                    first: next,
                    resume,
                });
                next += 2 + resume as u32;
            }
        }
        Ok(switchable)
    }

    /// One function's code: nothing (left alone), its one body, or its switched bodies.
    fn emit_function(
        &self,
        c: &FunctionContext<'_>,
        extra_types: &mut ExtraTypes,
        out: &mut Emitted,
    ) -> Result<(), InstrumentError> {
        let (facts, k) = (self.facts, c.k);
        let fp = &c.plan.functions[k];
        let (Some(a), None) = (&fp.analysis, &fp.skipped) else {
            out.bodies.push(None);
            return Ok(());
        };
        let sig = facts.defined_sig(k).ok_or_else(|| {
            InstrumentError::Encode(format!("function {} has no function type", fp.index.0))
        })?;
        let results: Vec<ValType> = sig
            .results
            .iter()
            .map(|&t| val_type(t))
            .collect::<Result<_, _>>()?;
        let wrapper = wrapper_block(&results, facts.num_types, extra_types);
        let mem = facts.num_memories;
        if let (Some(placement), Some(CopyIndices { first, resume })) =
            (self.switch, c.switchable[k])
        {
            let params: Vec<ValType> = sig
                .params
                .iter()
                .map(|&t| val_type(t))
                .collect::<Result<_, _>>()?;
            let f = fp.index.0;
            let layout = &c.plan.layout;
            let switched = SwitchedFunction {
                facts,
                k,
                analysis: a,
                wrapper,
                mem,
                flag: match self.budgets {
                    true => (mem, layout.switch_flag + 4 * k as u32),
                    false => module_flag(c.plan, mem),
                },
                budget: self.budgets.then(|| Budget {
                    entries: layout.entry_counts + 8 * k as u32,
                    headers: c.laid.header_counters[k],
                }),
                params: &params,
                shape: &c.laid.shapes[k],
                placement,
                chaos: self.opts.switch_chaos,
                // Budgets are spent at every entry: calls go to the callee's `F`.
                entry_check: self.budgets
                    || c.recursive[k]
                    || placement.entry_check(
                        facts.address_taken.contains(&f)
                            || facts.entry_points.contains(&f)
                            || c.entered_clean.contains(&f),
                    ),
                copies: (first, first + 1),
                resume: resume.then_some(first + 2),
                entered_register: fp.counting.entered_register(fp.num_paths()),
                counts: self.ephemeral.then(|| c.laid.switch_counters[k]),
                // A limit only where the flag is one word the sampler sets per burst
                // and PEP's ring counts the path ends.
                lease: (!self.ephemeral && !self.opts.switch_chaos && layout.ring_entries > 0)
                    .then_some(crate::switch::Lease {
                        head: layout.ring_head,
                        limit: layout.switch_flag + pepper_layout::SWITCH_LIMIT_OFFSET,
                    }),
            };
            let no_counters = vec![None; a.cfg.num_edges()];
            let clean = || EmitKind::Edges {
                counter: &no_counters,
                tables: &[],
                loops: &[],
            };
            // Not to functions whose entries are counted (contexts: those tables reach),
            // since their counters are in `F`, which checks the flag at entry anyway, nor
            // to recursive ones, whose `F` checks it so that a burst ends at the
            // recursion's next call. A direct call to any other callee skips its `F` (a
            // check and a tail call).
            let redirect = |f: u32| {
                let k = f.checked_sub(facts.num_imported_funcs)? as usize;
                if c.entry_counter.contains_key(&f) || c.recursive.get(k) == Some(&true) {
                    return None;
                }
                c.switchable.get(k)?.map(|s| s.first)
            };
            // Ephemeral with budgets: calls go to the callee's `F`, which spends its own
            // budget.
            let no_redirect = |_: u32| None;
            let redirect: Redirect<'_> = match self.budgets {
                true => &no_redirect,
                false => &redirect,
            };
            let b = switched
                .emit(
                    self.kind(c),
                    clean,
                    || self.ctx(c),
                    redirect,
                    &mut out.scratch,
                )?
                .ok_or_else(|| InstrumentError::Encode(format!("function {f}: no copies")))?;
            let ty = facts.defined_types[k];
            debug_assert_eq!(first, c.appended.hash_fn + 3 + out.copy_fns.len() as u32);
            if self.opts.switch_hints {
                let resume = b.resume.iter().map(|r| (first + 2, r));
                for (func, body) in [
                    (f, &b.checked),
                    (first, &b.instrumented),
                    (first + 1, &b.clean),
                ]
                .into_iter()
                .chain(resume)
                {
                    out.hints
                        .extend(body.unlikely.iter().map(|&offset| crate::hints::Hint {
                            func,
                            offset,
                            likely: false,
                        }));
                }
            }
            out.copy_fns.push((ty, b.instrumented.f));
            out.copy_fns.push((ty, b.clean.f));
            if let Some(r) = b.resume {
                out.copy_fns.push((ty, r.f));
                out.resumes.push((k, first + 2));
            }
            out.copies.push((k, (first, first + 1)));
            if let Some(base) = switched.counts {
                let shape = switched.shape;
                let counts = (switched.ids().into_iter()).filter_map(|(t, id)| {
                    Some(SwitchCount {
                        header: a.op_nodes.get(shape.loops[t].op).copied().flatten()?,
                        way_in: crate::switch::way_in(a, shape, t),
                        entered: base + 16 * (id - 1),
                        left: base + 16 * (id - 1) + 8,
                    })
                });
                out.switch_counts.push((k, counts.collect()));
            }
            out.bodies.push(Some(b.checked.f));
            if c.plan.path_windows {
                // The ring's path ends come from `F_inst`: windows place leaves there.
                out.op_offsets.push((k, b.instrumented.op_offsets));
            }
            return Ok(());
        }
        let num_params = sig.params.len() as u32;
        let (kind, ctx) = (self.kind(c), self.ctx(c));
        let (body, offsets) = emit_body(facts, k, a, num_params, wrapper, mem, kind, ctx)?;
        out.bodies.push(Some(body));
        if c.plan.path_windows {
            out.op_offsets.push((k, offsets));
        }
        Ok(())
    }

    /// Whether function `k` gets `F_resume` under `placement`.
    fn needs_resume(&self, laid: &LaidOut, placement: SwitchPlacement, k: usize) -> bool {
        !self.budgets && SwitchedFunction::needs_resume(&laid.shapes[k], placement)
    }

    /// What function `c.k` counts, for the emitter.
    fn kind<'p>(&self, c: &FunctionContext<'p>) -> EmitKind<'p> {
        let fp = &c.plan.functions[c.k];
        match self.mode {
            Mode::Ephemeral => EmitKind::Edges {
                counter: &fp.edge_counter,
                tables: &c.tables.tables[c.k],
                loops: &[],
            },
            Mode::ExactPaths | Mode::Pep | Mode::Targeted => EmitKind::Paths {
                numbered: fp
                    .numbered
                    .as_ref()
                    .expect("paths mode numbers every instrumented function"),
                counting: fp.counting,
                func: fp.index.0,
                tag: match self.mode {
                    Mode::Pep => pep_tag(fp.index.0).unwrap_or(0),
                    _ => 0,
                },
                layout: &c.plan.layout,
                cold_counter: fp.cold_counter,
                poison: fp.poison,
                obvious: &fp.obvious,
                register_loops: &fp.register_loops,
                hash_fn: c.appended.hash_fn,
                miss_fn: c.appended.miss_fn,
                tables: &c.tables.tables[c.k],
                arm_codes: &c.tables.arm_codes[c.k],
            },
            _ => EmitKind::Edges {
                counter: &fp.edge_counter,
                tables: &c.tables.tables[c.k],
                loops: &fp.loop_counts,
            },
        }
    }

    /// Function `c.k`'s context code and its first call site, when it keeps any.
    fn ctx<'p>(&self, c: &FunctionContext<'p>) -> Option<(ContextEmit<'p>, u32)> {
        let fp = &c.plan.functions[c.k];
        c.context_code.then(|| {
            (
                ContextEmit {
                    mode: self.contexts,
                    layout: &c.plan.layout,
                    mem: self.facts.num_memories,
                    func: fp.index.0,
                    enter_fn: c.appended.enter_fn,
                    counters: (self.contexts != ContextMode::Off && self.opts.site_counters)
                        .then_some(&c.plan.counted_at[..]),
                    entry_counter: c.entry_counter.get(&fp.index.0).copied(),
                    imported_funcs: self.facts.num_imported_funcs,
                },
                fp.first_site,
            )
        })
    }

    /// pepper's own functions (named), types, memory and data, and the switch's hints and
    /// globals.
    fn additions(
        &self,
        plan: &Plan,
        tables: &ArmTables,
        appended: Appended,
        extra_types: ExtraTypes,
        copy_fns: Vec<(u32, Function)>,
        (hints, globals): (Vec<crate::hints::Hint>, Vec<ValType>),
    ) -> Additions {
        let mem = self.facts.num_memories;
        let hash_type = self.facts.num_types;
        let l = &plan.layout;
        let path_table = HashTable {
            base: l.hash_base,
            capacity: l.hash_capacity,
            used: l.hash_used,
            overflow: l.hash_overflow,
        };
        // Not called without exact contexts; any valid table will do.
        let cct = if l.cct.capacity == 0 {
            path_table
        } else {
            l.cct
        };
        Additions {
            extra_types,
            functions: vec![
                (hash_type, hash_function(mem, &path_table, false)),
                (hash_type + 1, hash_function(mem, &cct, true)),
                (hash_type + 2, cache_miss_function(mem, appended.hash_fn)),
            ]
            .into_iter()
            .chain(copy_fns)
            .collect(),
            memory_pages: l.pages(),
            memory_index: mem,
            data: vec![
                (
                    l.tag,
                    pepper_layout::tag(self.opts.module_slot, l.size).to_vec(),
                ),
                (tables.start, tables.bytes.clone()),
            ],
            hints,
            globals,
            names: appended_names(plan, appended),
        }
    }
}

/// Names for the functions pepper appends, in index order: its own, and each switch copy
/// as its function's name with `.pepper-inst` or `.pepper-clean`, so that a trap's
/// backtrace and `perf` name the program's function whichever copy ran.
fn appended_names(plan: &Plan, appended: Appended) -> Vec<(u32, String)> {
    let mut names = vec![
        (appended.hash_fn, "pepper:count-path".to_string()),
        (appended.enter_fn, "pepper:enter-context".to_string()),
        (appended.miss_fn, "pepper:path-cache-miss".to_string()),
    ];
    for fp in &plan.functions {
        if let (Some((inst, clean)), Some(name)) = (fp.copies, &fp.name) {
            names.push((inst, format!("{name}.pepper-inst")));
            names.push((clean, format!("{name}.pepper-clean")));
        }
        if let (Some(resume), Some(name)) = (fp.resume, &fp.name) {
            names.push((resume, format!("{name}.pepper-resume")));
        }
    }
    names.sort_unstable_by_key(|n| n.0);
    names
}

/// Everything one function's emission reads.
struct FunctionContext<'p> {
    plan: &'p Plan,
    k: usize,
    tables: &'p ArmTables,
    laid: &'p LaidOut,
    appended: Appended,
    context_code: bool,
    switchable: &'p Switchable,
    /// Functions entered in their clean code from inside the module: `return_call`ed
    /// (even from an instrumented copy), or called by a function without copies. They
    /// check the flag at entry, or the switch would never reach them there.
    entered_clean: &'p std::collections::HashSet<u32>,
    /// Per defined function, whether it is on a cycle of direct calls and checks the
    /// flag at entry for it (see `InstrumentOptions::switch`).
    recursive: &'p [bool],
    /// Contexts: each entry-counted function's counter address.
    entry_counter: &'p HashMap<u32, u32>,
}

/// The block that funnels every return: its type is the function's results (a type of
/// its own, appended, for several).
fn wrapper_block(results: &[ValType], num_types: u32, extra_types: &mut ExtraTypes) -> BlockType {
    match results.len() {
        0 => BlockType::Empty,
        1 => BlockType::Result(results[0]),
        _ => {
            let pos = extra_types
                .iter()
                .position(|t| t.0.is_empty() && t.1 == results);
            let pos = pos.unwrap_or_else(|| {
                extra_types.push((vec![], results.to_vec()));
                extra_types.len() - 1
            });
            BlockType::FunctionType(num_types + pos as u32)
        }
    }
}

/// Ephemeral: the CFG node of each checked loop header of function `k`, with the address
/// of its counter.
fn header_nodes(fp: &FunctionPlan, laid: &LaidOut, k: usize) -> Vec<(pepper_cfg::NodeId, u32)> {
    let (shape, a) = (&laid.shapes[k], fp.analysis.as_ref());
    let targets = shape.targets(SwitchPlacement::Outer);
    targets
        .iter()
        .zip(0u32..)
        .filter_map(|(&t, i)| {
            let node = a?.op_nodes.get(shape.loops[t].op).copied().flatten()?;
            Some((node, laid.header_counters[k] + 8 * i))
        })
        .collect()
}

/// The switch's module-wide flag (PEP's bursts, ephemeral windows): (memory, address) of
/// the word in pepper's memory `mem`. Never a word of the program's own memory: the
/// sampler writes the flag while the guest runs, and the program must not be able to
/// read or write anything of pepper's.
fn module_flag(plan: &crate::plan::Plan, mem: u32) -> (u32, u32) {
    (mem, plan.layout.switch_flag)
}
