//! One function body re-encoded with the emitter's code spliced in at the analysis' action
//! points: the walk over a body's operators that every mode and every switch copy shares.

use crate::analysis::{FunctionAnalysis, Slot};
use crate::contexts::ContextEmit;
use crate::emit::{EmitKind, Emitter, Locals};
use crate::module::ModuleFacts;
use crate::plan::InstrumentError;
use wasm_encoder::{BlockType, Function, Instruction as I, ValType};

/// More returns than this and each records the path itself (see `inline_exits`).
const INLINE_EXITS_OVER: usize = 64;

/// Where an instrumented copy's direct calls go: a callee with copies is called at its
/// instrumented copy (of the callee's own type), so a burst spreads down the calls it
/// makes without a check in the callee. Not its tail calls (see `emit_op`).
pub(crate) type Redirect<'r> = &'r dyn Fn(u32) -> Option<u32>;

pub(crate) fn val_type(t: wasmparser::ValType) -> Result<ValType, InstrumentError> {
    use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
    RoundtripReencoder
        .val_type(t)
        .map_err(|e| InstrumentError::Encode(e.to_string()))
}

/// Re-encodes one body with the emitter's code spliced in at the analysis' action points,
/// and the context code (`ctx`, with the function's first call-site id) at entry, exits
/// and calls.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_body<'f>(
    facts: &ModuleFacts<'f>,
    k: usize,
    analysis: &FunctionAnalysis,
    num_params: u32,
    wrapper: BlockType,
    mem: u32,
    kind: EmitKind<'_>,
    ctx: Option<(ContextEmit<'_>, u32)>,
) -> Result<(Function, Vec<u32>), InstrumentError> {
    let e = emit_instructions(
        facts,
        k,
        analysis,
        num_params,
        wrapper,
        mem,
        kind,
        ctx,
        BodyCopy::Only,
        None,
    )?;
    Ok(e.finish())
}

/// Which of a function's bodies is emitted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum BodyCopy {
    /// The function's only body, or its clean body `F` under the switch.
    Only,
    /// A copy that the switch enters (`F_inst`, `F_clean`): the original locals are
    /// followed by the loop `id` it was entered at (see `crate::switch`), and the entry
    /// bookkeeping of contexts is `F`'s.
    Entered,
}

/// One emitted body before encoding, with where its operators went.
pub(crate) struct Emitted<'f> {
    /// Declared locals (after the parameters).
    pub locals: Vec<(u32, ValType)>,
    /// The original locals (not parameters), in order, one entry each.
    pub original_locals: Vec<ValType>,
    pub out: Vec<I<'f>>,
    /// Per original operator: where the code of the actions before it begins.
    pub pre_at: Vec<usize>,
    /// Per original operator: where its own code begins.
    pub op_at: Vec<usize>,
    /// Where the function's own code begins, after context and path bookkeeping.
    pub start: usize,
    pub locals_at: Locals,
}

impl Emitted<'_> {
    /// Encodes the body; returns it with each original operator's code offset in it.
    pub fn finish(self) -> (Function, Vec<u32>) {
        encode(self.locals, &self.out, &self.op_at)
    }
}

pub(crate) fn encode(
    locals: Vec<(u32, ValType)>,
    out: &[I<'_>],
    op_at: &[usize],
) -> (Function, Vec<u32>) {
    let mut f = Function::new(locals);
    let mut at = Vec::with_capacity(out.len() + 1);
    for ins in out {
        at.push(f.byte_len() as u32);
        f.instruction(ins);
    }
    at.push(f.byte_len() as u32);
    (f, op_at.iter().map(|&k| at[k]).collect())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_instructions<'f>(
    facts: &ModuleFacts<'f>,
    k: usize,
    analysis: &FunctionAnalysis,
    num_params: u32,
    wrapper: BlockType,
    mem: u32,
    kind: EmitKind<'_>,
    ctx: Option<(ContextEmit<'_>, u32)>,
    copy: BodyCopy,
    redirect: Option<Redirect<'_>>,
) -> Result<Emitted<'f>, InstrumentError> {
    let body = &facts.bodies[k];
    let enc = |e: &dyn std::fmt::Display| {
        InstrumentError::Encode(format!("function {}: {e}", facts.func_index(k).0))
    };
    let Declared {
        locals,
        original_locals,
        em,
    } = declare_locals(body, num_params, copy, mem, analysis, kind).map_err(|e| match e {
        LocalsError::Read(e) => enc(&e),
        LocalsError::Type(e) => e,
    })?;
    let paths = matches!(em.kind, EmitKind::Paths { .. });
    // Paths and contexts both need one place where every return meets.
    let funnel = paths || ctx.as_ref().is_some_and(|c| c.0.mode.shadow());
    let mut next_site = ctx.as_ref().map_or(0, |c| c.1);
    // A function of many returns records its path at each instead: thousands of edges
    // into one block, each carrying the register and the results, cost Cranelift's
    // register allocator more than the copies of the recording cost.
    let inline_exits = analysis.returns.len() > INLINE_EXITS_OVER;

    let mut out: Vec<I<'f>> = Vec::new();
    if let (Some((c, _)), BodyCopy::Only) = (&ctx, copy) {
        c.push(&mut out, &em.locals);
    }
    if funnel {
        out.push(I::Block(wrapper));
        em.prologue(&mut out);
    }
    let start = out.len();
    let mut reader = body.get_operators_reader().map_err(|e| enc(&e))?;
    let mut next = 0usize;
    // `returns` is in operator order, so one cursor walks it alongside the operators.
    let mut returns = analysis.returns.iter().peekable();
    // Where each operator's own code begins in `out` (after the actions before it).
    let mut op_at = Vec::with_capacity(analysis.num_ops);
    let mut pre_at = Vec::with_capacity(analysis.num_ops + 1);
    for i in 0..analysis.num_ops {
        let op = reader.read().map_err(|e| enc(&e))?;
        pre_at.push(out.len());
        let mut opened = None;
        while let Some((at, Slot::Before, act)) = analysis.actions.get(next) {
            if *at != i {
                break;
            }
            if em.action(&mut out, next, act) {
                opened = Some((next, act));
            }
            next += 1;
        }
        op_at.push(out.len());
        let is_last = i + 1 == analysis.num_ops;
        let return_here = returns.next_if(|r| r.0 == i);
        if let Some((k, act)) = opened {
            em.close_opened(&mut out, k, act, &op);
        } else if funnel && is_last {
            out.push(I::End);
            em.epilogue(&mut out);
            if let Some((c, _)) = &ctx {
                c.pop(&mut out, &em.locals);
            }
            out.push(I::End);
        } else if let (true, Some(&(_, depth))) = (funnel, return_here) {
            if inline_exits {
                em.epilogue(&mut out);
                if let Some((c, _)) = &ctx {
                    c.pop(&mut out, &em.locals);
                }
                out.push(I::Return);
            } else {
                out.push(I::Br(depth));
            }
        } else {
            let site = ctx.as_ref().map(|_| &mut next_site);
            emit_op(
                &mut out,
                op,
                &em,
                ctx.as_ref().map(|c| &c.0),
                site,
                redirect,
            )
            .map_err(|e| enc(&e))?;
        }
        while let Some((at, Slot::After, act)) = analysis.actions.get(next) {
            if *at != i {
                break;
            }
            let opened = em.action(&mut out, next, act);
            debug_assert!(!opened, "code opens only before a branch");
            next += 1;
        }
    }
    pre_at.push(out.len());
    let locals_at = em.locals;
    Ok(Emitted {
        locals,
        original_locals,
        out,
        pre_at,
        op_at,
        start,
        locals_at,
    })
}

/// A body's locals, and the emitter that uses them (see [`declare_locals`]).
struct Declared<'e> {
    locals: Vec<(u32, ValType)>,
    original_locals: Vec<ValType>,
    em: Emitter<'e>,
}

/// Why a body's locals could not be declared.
enum LocalsError {
    Read(wasmparser::BinaryReaderError),
    Type(InstrumentError),
}

/// The body's declared locals (its own, unless it is an entered copy, whose locals are
/// parameters; then pepper's), the original locals one by one, and the emitter over them.
/// The types of a body's declared locals (after its parameters), one entry per local.
pub(crate) fn original_locals(
    body: &wasmparser::FunctionBody<'_>,
) -> Result<Vec<ValType>, InstrumentError> {
    let mut locals = Vec::new();
    for l in body.get_locals_reader()? {
        let (n, t) = l?;
        locals.extend(std::iter::repeat_n(val_type(t)?, n as usize));
    }
    Ok(locals)
}

fn declare_locals<'e>(
    body: &wasmparser::FunctionBody<'_>,
    num_params: u32,
    copy: BodyCopy,
    mem: u32,
    analysis: &'e FunctionAnalysis,
    kind: EmitKind<'e>,
) -> Result<Declared<'e>, LocalsError> {
    let mut locals: Vec<(u32, ValType)> = Vec::new();
    let mut original_locals = Vec::new();
    let mut num_locals = num_params;
    for l in body.get_locals_reader().map_err(LocalsError::Read)? {
        let (n, t) = l.map_err(LocalsError::Read)?;
        num_locals += n;
        let t = val_type(t).map_err(LocalsError::Type)?;
        original_locals.extend(std::iter::repeat_n(t, n as usize));
        locals.push((n, t));
    }
    if copy == BodyCopy::Entered {
        // The loop id the copy was entered at.
        num_locals += 1;
        locals.push((1, ValType::I32));
    }
    let locals_at = Locals {
        path: num_locals,
        cond: num_locals + 1,
        counter_addr: num_locals + 2,
        ring_head: num_locals + 3,
        scratch: num_locals + 4,
        shadow_top: num_locals + 5,
        frame: num_locals + 6,
        loops: num_locals + 7,
    };
    let em = Emitter::new(locals_at, mem, analysis, kind);
    locals.push((1, ValType::I64));
    locals.push((3, ValType::I32));
    locals.push((1, ValType::I64));
    locals.push((2, ValType::I32));
    match &em.kind {
        EmitKind::Edges { loops, .. } => {
            for l in loops.iter() {
                locals.push((
                    1,
                    if l.counter.wide {
                        ValType::I64
                    } else {
                        ValType::I32
                    },
                ));
            }
        }
        EmitKind::Paths { register_loops, .. } if !register_loops.is_empty() => {
            locals.push((register_loops.len() as u32, ValType::I64));
        }
        EmitKind::Paths { .. } => {}
    }
    Ok(Declared {
        locals,
        original_locals,
        em,
    })
}

/// One operator that is not a branch or an exit the funnel takes: publishing the path
/// register around calls and where the function is left, the call site's context code
/// (`site`: the next call-site id), and a call redirected to an instrumented copy.
fn emit_op<'f>(
    out: &mut Vec<I<'f>>,
    op: wasmparser::Operator<'f>,
    em: &Emitter<'_>,
    ctx: Option<&ContextEmit<'_>>,
    site: Option<&mut u32>,
    redirect: Option<Redirect<'_>>,
) -> Result<(), wasm_encoder::reencode::Error> {
    use wasm_encoder::reencode::{Reencode, RoundtripReencoder};
    use wasmparser::Operator as O;
    let is_call = matches!(
        op,
        O::Call { .. } | O::CallIndirect { .. } | O::CallRef { .. }
    );
    // Tail calls and throws leave the function: publish like at an exit.
    let leaves = matches!(
        op,
        O::ReturnCall { .. }
            | O::ReturnCallIndirect { .. }
            | O::ReturnCallRef { .. }
            | O::Throw { .. }
            | O::ThrowRef
    );
    if is_call || leaves {
        em.before_call(out);
    }
    let mut returns_to = None;
    if let (Some(c), Some(next_site)) = (ctx, site) {
        if let Some((callee, _)) = crate::module::call_target(&op) {
            c.call_site(out, &em.locals, *next_site);
            returns_to = is_call.then_some((*next_site, callee));
            *next_site += 1;
        }
        if leaves {
            c.pop(out, &em.locals);
            c.log_stop(out, &em.locals);
        }
    }
    // Tail calls are not redirected: a loop made of tail calls has no header to check,
    // so its only checks are the entry checks of the functions it tail-calls, which an
    // instrumented copy calling the callee's own copy would skip (it would then stay
    // instrumented for as long as the loop runs, and a clean `F_clean` tail-calling
    // itself would stay clean through any burst or window).
    let redirected = match (&op, redirect) {
        (O::Call { function_index: f }, Some(r)) => r(*f),
        _ => None,
    };
    match redirected {
        // The callee's instrumented copy, entered at its start.
        Some(to) => out.push(I::Call(to)),
        None => out.push(RoundtripReencoder.instruction(op)?),
    }
    if is_call {
        em.after_call(out);
    }
    if let (Some(c), Some((site, callee))) = (ctx, returns_to) {
        c.log_return(out, &em.locals, site, callee);
    }
    Ok(())
}
