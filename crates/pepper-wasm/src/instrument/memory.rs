//! Stage two: pepper's memory. Counters are allocated as functions are planned; then come
//! the `br_table` arm tables (one data segment), the path hash table, PEP's ring, the shadow
//! stack, call-site and entry counters, the call log, the switch's flags or budgets and
//! the exact context table.

use super::functions::Planned;
use super::Build;
use crate::analysis::Action;
use crate::emit::{arm_code, ArmCode};
use crate::plan::*;
use crate::switch::Shape;
use pepper_layout::{ContextMode, HashTable, MemoryLayout, FRAME_BYTES, PATH_WINDOW_RING_LOG2};
use pepper_profile::Mode;

/// Where uncounted `br_table` arms of exact-edges functions add their count: a word
/// nothing reads.
pub(super) const DISCARD: u32 = 16;

/// A bump allocator over pepper's memory, and the layout it fills in.
pub(super) struct Allocator {
    next: u64,
    pub layout: MemoryLayout,
    /// Bytes of path-counter arrays so far ([`InstrumentOptions::array_budget`]).
    pub array_bytes: u64,
    /// Whether any function counts in the hash table (it gets its full size only then).
    pub any_hash: bool,
}

impl Allocator {
    pub fn new(opts: &InstrumentOptions) -> Allocator {
        // 0: hash entries used, 8: hash overflow, 16: discard slot for uncounted br_table
        // arms, 24: PEP ring head, 32: PEP every-K counter, 40: shadow stack pointer, 44:
        // call log head, 48: context table entries used, 56: context table overflow, 64:
        // the memory's tag.
        let mut layout = MemoryLayout {
            hash_used: 0,
            hash_overflow: 8,
            ring_head: 24,
            every_counter: 32,
            stack_pointer: 40,
            call_log_head: 44,
            cct: HashTable {
                used: 48,
                overflow: 56,
                ..Default::default()
            },
            tag: 64,
            ..Default::default()
        };
        layout.hash_cache_entries = match opts.hash_cache_log2 {
            0 => 0,
            l => 1 << l.min(16),
        };
        Allocator {
            next: 64 + pepper_layout::TAG_BYTES as u64,
            layout,
            array_bytes: 0,
            any_hash: false,
        }
    }

    /// `bytes` at the next 8-byte boundary.
    pub fn alloc(&mut self, bytes: u64) -> u32 {
        let at = (self.next + 7) & !7;
        self.next = at + bytes;
        at as u32
    }

    /// `bytes` in cache lines of their own (64 bytes, the line of every x86-64 and
    /// AArch64 core pepper runs on): for words the sampler thread writes while the guest
    /// reads them, so that neither thread's writes take a line the other is using for
    /// something else away from it.
    pub fn alloc_own_lines(&mut self, bytes: u64) -> u32 {
        let at = (self.next + 63) & !63;
        self.next = (at + bytes + 63) & !63;
        at as u32
    }
}

/// An edge-counting `br_table`'s arm table: each arm's counter address, [`DISCARD`] for
/// arms without one or counted at their target.
fn edge_arms(
    fp: &FunctionPlan,
    a: &crate::analysis::FunctionAnalysis,
    arms: &[pepper_cfg::EdgeId],
) -> Vec<u8> {
    let addrs = arms.iter().map(|&e| match fp.edge_counter[e.index()] {
        Some(at) if !a.edges[e.index()].at_target => at,
        _ => DISCARD,
    });
    addrs.flat_map(|s| s.to_le_bytes()).collect()
}

/// `br_table` arm tables: one data segment, and per function (action position, address).
pub(super) struct ArmTables {
    pub start: u32,
    pub bytes: Vec<u8>,
    pub tables: Vec<Vec<(usize, u32)>>,
    pub arm_codes: Vec<Vec<(usize, ArmCode)>>,
}

/// What the memory layout adds to the plan.
pub(super) struct LaidOut {
    /// Contexts: (function, counter address, canonical signature) of each function that
    /// indirect calls may reach.
    pub entry_counters: Vec<(u32, u32, u32)>,
    /// Switch: every function's loop shapes (empty without the switch).
    pub shapes: Vec<Shape>,
    /// Ephemeral: per function, the first of its checked loops' header counters.
    pub header_counters: Vec<u32>,
    /// Ephemeral copies counting edges: per function, the first of its checked loops'
    /// entry and leave counters (`[entered, left]` per loop id, from 1).
    pub switch_counters: Vec<u32>,
}

impl Build<'_, '_> {
    /// Increment or arm tables for `br_table`s, where the emitter needs one.
    pub(super) fn arm_tables(&self, functions: &[FunctionPlan], mem: &mut Allocator) -> ArmTables {
        let start = mem.alloc(0);
        let mut t = ArmTables {
            start,
            bytes: Vec::new(),
            tables: vec![Vec::new(); functions.len()],
            arm_codes: vec![Vec::new(); functions.len()],
        };
        for (k, fp) in functions.iter().enumerate() {
            let Some(a) = fp.analysis.as_ref().filter(|_| fp.skipped.is_none()) else {
                continue;
            };
            for (pos, (_, _, act)) in a.actions.iter().enumerate() {
                let Action::BrTable { arms, bare } = act else {
                    continue;
                };
                let entries: Option<Vec<u8>> = match self.mode {
                    Mode::ExactPaths | Mode::Pep | Mode::Targeted => {
                        fp.numbered.as_ref().and_then(|nd| {
                            let (poison, scale) = (fp.poison, fp.counting.scale());
                            let code = arm_code(nd, &a.edges, arms, *bare, poison, scale);
                            let bytes = match &code {
                                ArmCode::Table(vals) => {
                                    Some(vals.iter().flat_map(|v| v.to_le_bytes()).collect())
                                }
                                ArmCode::Before(_) | ArmCode::Pads(_) => None,
                            };
                            t.arm_codes[k].push((pos, code));
                            bytes
                        })
                    }
                    Mode::ExactEdges | Mode::Ephemeral => Some(edge_arms(fp, a, arms)),
                    Mode::None => None,
                };
                if let Some(bytes) = entries {
                    while !(start as usize + t.bytes.len()).is_multiple_of(8) {
                        t.bytes.push(0);
                    }
                    t.tables[k].push((pos, start + t.bytes.len() as u32));
                    t.bytes.extend(bytes);
                }
            }
        }
        mem.next = start as u64 + t.bytes.len() as u64;
        t
    }

    /// Everything after the counters and tables: the rest of pepper's memory.
    pub(super) fn lay_out(
        &self,
        planned: &Planned,
        mem: &mut Allocator,
    ) -> Result<LaidOut, InstrumentError> {
        let (mode, opts, contexts) = (self.mode, self.opts, self.contexts);
        let cap_log2 = if mem.any_hash {
            opts.hash_capacity_log2
        } else {
            4
        };
        mem.layout.hash_capacity = 1 << cap_log2;
        mem.layout.hash_base = mem.alloc(24 * mem.layout.hash_capacity as u64);
        if mode.samples_paths() && opts.pep_every.is_none() {
            let mut ring_log2 = if self.path_windows {
                opts.ring_log2.max(PATH_WINDOW_RING_LOG2)
            } else {
                opts.ring_log2
            };
            if opts.switch.is_some() && !opts.switch_chaos {
                // A burst the guest's handler measures runs for a stretch of the guest's
                // time, not a count of path ends: its ring must hold what a tight loop
                // writes meanwhile. (A module switching itself at random has no sampler
                // driving its flag.)
                ring_log2 = ring_log2.max(pepper_layout::SWITCH_RING_LOG2);
            }
            mem.layout.ring_entries = 1 << ring_log2.clamp(4, 20);
            mem.layout.ring_base = mem.alloc(8 * mem.layout.ring_entries as u64);
        }
        if contexts.shadow() {
            mem.layout.stack_entries = 1 << opts.stack_log2.clamp(4, 20);
            mem.layout.stack_base = mem.alloc((FRAME_BYTES * mem.layout.stack_entries) as u64);
        }
        let entry_counters = self.entry_counters(planned, mem);
        if let (true, Some(log2)) = (contexts != ContextMode::Off, opts.call_log_log2) {
            mem.layout.call_log_entries = 1 << log2.clamp(8, 20);
            mem.layout.call_log_base = mem.alloc(4 * mem.layout.call_log_entries as u64);
        }
        let mut shapes = match self.switch {
            Some(_) => crate::switch::shapes(self.wasm)?,
            None => Vec::new(),
        };
        for (k, shape) in shapes.iter_mut().enumerate() {
            let a = planned.functions.get(k).and_then(|fp| fp.analysis.as_ref());
            let (Some(a), Some(sig)) = (a, self.facts.defined_sig(k)) else {
                continue;
            };
            let num_params = sig.params.len();
            crate::switch::read_liveness(shape, a, &self.facts.bodies[k], num_params)?;
        }
        let n = planned.functions.len();
        let mut header_counters = vec![0u32; n];
        // Ephemeral copies: an entry and a leave counter per checked loop
        // (`SwitchCount`; every placement's targets, a superset of the ids emission gives).
        let mut switch_counters = vec![0u32; n];
        if let (true, Some(placement)) = (self.ephemeral, self.switch) {
            for (k, s) in shapes.iter().enumerate().take(n) {
                switch_counters[k] = mem.alloc(16 * s.targets(placement).len() as u64);
            }
        }
        if self.budgets {
            mem.layout.switch_flag = mem.alloc(4 * n as u64);
            mem.layout.entry_counts = mem.alloc(8 * n as u64);
            for (k, s) in shapes.iter().enumerate().take(n) {
                let loops = s.targets(SwitchPlacement::Outer).len() as u64;
                header_counters[k] = mem.alloc(8 * loops);
            }
        } else if self.switch.is_some() {
            // The sampler sets and clears the flag and renews the limit several times a
            // burst; packed, the flag would share its line with the last entry counters
            // (or the ring's last words), which the guest writes.
            mem.layout.switch_flag = mem.alloc_own_lines(8);
        }
        if contexts == ContextMode::Exact {
            mem.layout.cct.capacity = 1 << opts.cct_capacity_log2.clamp(4, 24);
            mem.layout.cct.base = mem.alloc(24 * mem.layout.cct.capacity as u64);
        }
        mem.layout.size = mem.next;
        if mem.layout.size > (u32::MAX as u64) - (1 << 20) {
            return Err(InstrumentError::TooLarge(mem.layout.size));
        }
        Ok(LaidOut {
            entry_counters,
            shapes,
            header_counters,
            switch_counters,
        })
    }

    /// Call-site counters, and an entry counter in every function indirect calls may reach
    /// (by canonical signature), so that each such function's calls are known even when
    /// no sample sees which indirect site made them. Only with contexts.
    fn entry_counters(&self, planned: &Planned, mem: &mut Allocator) -> Vec<(u32, u32, u32)> {
        let facts = self.facts;
        let mut entry_counters = Vec::new();
        if self.contexts == ContextMode::Off || !self.opts.site_counters {
            return entry_counters;
        }
        let sigs = &planned.sigs;
        mem.layout.site_counters = mem.alloc(8 * planned.call_sites.len() as u64);
        for fp in &planned.functions {
            let f = fp.index.0;
            if fp.skipped.is_none() && fp.analysis.is_some() && facts.address_taken.contains(&f) {
                if let Some(sig) = facts.func_type(f).and_then(|t| sigs.get(&t).copied()) {
                    entry_counters.push((f, mem.alloc(8), sig));
                }
            }
        }
        entry_counters
    }
}
