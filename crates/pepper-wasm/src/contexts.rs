//! Calling contexts: a shadow stack the guest keeps in pepper's memory, per-call-site call
//! counters, and (exact mode) an in-module calling context tree.
//!
//! Every instrumented function pushes a 16-byte frame `[func + 1: u32][site: u32][node:
//! u32][pad]` at entry and restores the stack pointer at every exit; before each call it
//! writes the call site's id into its own frame. The host sampler thread reads the stack
//! asynchronously (no check, no call in the guest) and marks the frames it has seen by
//! setting the top bit of their function word. A push writes a fresh, unmarked word, so a
//! marked frame is one that has not returned since the sampler saw it: Whaley's return
//! address marker bit (§5.2), for the cost of one store the push does anyway.
//!
//! The stack is a ring: frame addresses are masked, so a recursion deeper than the ring
//! overwrites the outermost frames, never pepper's other data, and the top frames (the
//! ones a sample walks) are always intact.

use crate::emit::{memarg, Locals};
pub use crate::module::call_sites;
use crate::plan::MemoryLayout;
pub use pepper_layout::{ContextMode, FRAME_BYTES, MARK};
use wasm_encoder::Instruction as I;

/// Emits one function's context code.
pub struct ContextEmit<'p> {
    pub mode: ContextMode,
    pub layout: &'p MemoryLayout,
    pub mem: u32,
    pub func: u32,
    /// Index of the in-module `cct_enter(func, parent) -> node` (exact mode).
    pub enter_fn: u32,
    /// Count calls per call site: the site whose counter each site counts in
    /// (`Plan::counted_at`; a site that shares another's counts nothing), or `None`.
    pub counters: Option<&'p [u32]>,
    /// This function's entry counter (functions indirect calls may reach).
    pub entry_counter: Option<u32>,
    /// Functions below this index are imports (their calls log no return: no entry of
    /// theirs is logged either).
    pub imported_funcs: u32,
}

impl ContextEmit<'_> {
    fn mask(&self) -> i32 {
        (self.layout.stack_entries * FRAME_BYTES - 1) as i32
    }

    /// Function entry: write the frame, then publish the new stack pointer (in this order,
    /// so the sampler never reads a frame that is not written yet).
    pub fn push(&self, out: &mut Vec<I<'_>>, l: &Locals) {
        self.log(out, l, self.func);
        if let Some(at) = self.entry_counter {
            out.extend([
                I::I32Const(0),
                I::I32Const(0),
                I::I64Load(memarg(self.mem, at, 3)),
                I::I64Const(1),
                I::I64Add,
                I::I64Store(memarg(self.mem, at, 3)),
            ]);
        }
        if !self.mode.shadow() {
            return;
        }
        let (m, lay) = (self.mem, self.layout);
        out.extend([
            I::I32Const(0),
            I::I32Load(memarg(m, lay.stack_pointer, 2)),
            I::LocalTee(l.shadow_top),
            I::I32Const(self.mask()),
            I::I32And,
            I::LocalTee(l.frame),
            I::I32Const(self.func as i32 + 1),
            I::I32Store(memarg(m, lay.stack_base, 2)),
            I::I32Const(0),
            I::LocalGet(l.shadow_top),
            I::I32Const(FRAME_BYTES as i32),
            I::I32Add,
            I::I32Store(memarg(m, lay.stack_pointer, 2)),
        ]);
        if self.mode == ContextMode::Exact {
            // frame.node = cct_enter(func, caller.site | caller.node << 32). The outermost
            // frame reads the ring's last slot, zero until the ring wraps: the root.
            out.extend([
                I::LocalGet(l.frame),
                I::I32Const(self.func as i32),
                I::LocalGet(l.frame),
                I::I32Const(FRAME_BYTES as i32),
                I::I32Sub,
                I::I32Const(self.mask()),
                I::I32And,
                I::I64Load(memarg(m, lay.stack_base + 4, 2)),
                I::Call(self.enter_fn),
                I::I32Store(memarg(m, lay.stack_base + 8, 2)),
            ]);
        }
    }

    /// Every exit (return, end, tail call, throw): clear this frame's function word, then
    /// restore the caller's stack pointer. The cleared word lets the sampler tell a frame
    /// that returned while it was reading the stack (a torn read) from a live one.
    pub fn pop(&self, out: &mut Vec<I<'_>>, l: &Locals) {
        if !self.mode.shadow() {
            return;
        }
        out.extend([
            I::LocalGet(l.frame),
            I::I32Const(0),
            I::I32Store(memarg(self.mem, self.layout.stack_base, 2)),
            I::I32Const(0),
            I::LocalGet(l.shadow_top),
            I::I32Store(memarg(self.mem, self.layout.stack_pointer, 2)),
        ]);
    }

    /// Call log: `log[head % N] = word; head += 1` (two stores and a load; the scratch
    /// local `a` holds the head only within these instructions).
    fn log(&self, out: &mut Vec<I<'_>>, l: &Locals, word: u32) {
        let lay = self.layout;
        if lay.call_log_entries == 0 {
            return;
        }
        let m = self.mem;
        out.extend([
            I::I32Const(0),
            I::I32Load(memarg(m, lay.call_log_head, 2)),
            I::LocalTee(l.counter_addr),
            I::I32Const(lay.call_log_entries as i32 - 1),
            I::I32And,
            I::I32Const(2),
            I::I32Shl,
            I::I32Const(word as i32),
            I::I32Store(memarg(m, lay.call_log_base, 2)),
            I::I32Const(0),
            I::LocalGet(l.counter_addr),
            I::I32Const(1),
            I::I32Add,
            I::I32Store(memarg(m, lay.call_log_head, 2)),
        ]);
    }

    /// After a call returns to `site`: log the return, unless the callee is an import
    /// (which logs no entry).
    pub fn log_return(&self, out: &mut Vec<I<'_>>, l: &Locals, site: u32, callee: Option<u32>) {
        if callee.is_some_and(|g| g < self.imported_funcs) {
            return;
        }
        self.log(out, l, site | pepper_cct::window::RET);
    }

    /// Before a tail call or a throw: frames change in a way the log does not describe, so
    /// a replay must stop here.
    pub fn log_stop(&self, out: &mut Vec<I<'_>>, l: &Locals) {
        self.log(out, l, pepper_cct::window::STOP);
    }

    /// Before a call: record the call site in this frame and count the call.
    pub fn call_site(&self, out: &mut Vec<I<'_>>, l: &Locals, site: u32) {
        let m = self.mem;
        if self.mode.shadow() {
            out.extend([
                I::LocalGet(l.frame),
                I::I32Const(site as i32),
                I::I32Store(memarg(m, self.layout.stack_base + 4, 2)),
            ]);
        }
        if self.counters.is_none_or(|at| at[site as usize] != site) {
            return;
        }
        let counter = self.layout.site_counters + 8 * site;
        out.extend([
            I::I32Const(0),
            I::I32Const(0),
            I::I64Load(memarg(m, counter, 3)),
            I::I64Const(1),
            I::I64Add,
            I::I64Store(memarg(m, counter, 3)),
        ]);
    }
}
