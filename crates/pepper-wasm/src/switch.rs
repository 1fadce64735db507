//! Switchable instrumentation: a clean copy and an instrumented copy of each function, and
//! checks of one flag word that move a running activation from one to the other.
//!
//! Arnold and Ryder ("A framework for reducing the cost of instrumented code", PLDI 2001)
//! keep a clean and an instrumented copy of every method and check a trigger at method
//! entries and loop back edges. Wasm code cannot jump between functions, so pepper does
//! the move with a tail call: function `F` keeps its index and runs clean code that checks
//! the flag at entry and at chosen loop headers; when the flag is set, it stores the
//! loop's live locals and the loop's number `id` in globals ([`Scratch`]) and
//! `return_call`s `F_inst(params..)`, which takes them back and starts at loop `id` (0:
//! at entry). `F_inst` checks the flag at the same headers and, once it is clear,
//! `return_call`s `F_clean` (the clean code again, enterable the same way).
//!
//! `F_clean` is entered only at loops where that is cheap ([`Shape::leaves_at`]): the
//! tests that skip to a loop run every time their construct starts, for the rest of a
//! frame's activation. A loop nest behind more constructs is checked all the same
//! ([`Shape::enters_only`]), and a function with such nests gets a fourth body,
//! `F_resume`: `F_inst` leaves into it there, and it moves on to `F_clean` at the first
//! loop `F_clean` can be entered at, so its skip tests run only in between.
//!
//! Entering a structured body at a loop header ([`splice`]): every construct around the
//! loop skips the code in front of the loop with a `block` ending just before it, left
//! by a `br_if` on `id`; an `if` on the way has its condition forced to the arm holding
//! the loop; the loop sets `id` to 0 when it runs, so later passes run everything. This
//! needs an empty operand stack wherever code is skipped and constructs without
//! parameters on the way ([`Shape`] finds the loops that qualify); other loops have no
//! check and are entered with their function.

mod shape;
mod splice;

pub(crate) use crate::body::Redirect;
pub use crate::plan::SwitchPlacement;
pub use shape::*;
pub use splice::*;
use wasm_encoder::{BlockType, Instruction as I};
use wasmparser::Operator as O;

/// Ephemeral instrumentation's counters for one function (see `SwitchedFunction::budget`).
#[derive(Copy, Clone, Debug)]
pub struct Budget {
    /// The u64 entry counter.
    pub entries: u32,
    /// The first of one u64 counter per checked loop (in `Shape::targets` order): every
    /// copy's check counts the header's executions, which windows cannot give.
    pub headers: u32,
}

/// One function to give switchable copies: everything [`SwitchedFunction::emit`] needs.
pub(crate) struct SwitchedFunction<'a, 'f> {
    pub facts: &'a crate::module::ModuleFacts<'f>,
    pub k: usize,
    pub analysis: &'a crate::analysis::FunctionAnalysis,
    pub wrapper: BlockType,
    pub mem: u32,
    /// The flag word: (memory index, address), always in pepper's memory.
    pub flag: (u32, u32),
    pub params: &'a [wasm_encoder::ValType],
    pub shape: &'a Shape,
    pub placement: SwitchPlacement,
    /// See `InstrumentOptions::switch_chaos`.
    pub chaos: bool,
    /// Whether `F` checks the flag at its entry (`SwitchPlacement::entry_check`).
    pub entry_check: bool,
    /// Ephemeral instrumentation: the flag is this function's own budget word, an i32
    /// the copies spend. A check sends clean code into `F_inst` while it is positive and
    /// spends one unit doing so; `F_inst` spends one at each checked header it passes and
    /// returns to clean code once the budget is gone. `F` counts its entries, and every
    /// check its loop's iterations ([`Budget`]).
    pub budget: Option<Budget>,
    /// Function indices of `F_inst` and `F_clean`.
    pub copies: (u32, u32),
    /// Function index of `F_resume`, for a function with checks that only enter `F_inst`
    /// ([`SwitchedFunction::needs_resume`]).
    pub resume: Option<u32>,
    /// What `F_inst`'s path register starts at when it is entered at a loop
    /// (`crate::plan::Counting::entered_register`).
    pub entered_register: i64,
    /// Ephemeral copies counting edges: the first of `F_inst`'s entry and leave counters,
    /// `[entered, left]` per loop id (see `crate::plan::SwitchCount`); `None` for paths,
    /// whose register marks an entered copy's first path instead.
    pub counts: Option<u32>,
    /// PEP's burst limit, when the flag has one: `F_inst`'s checks also leave, and clear
    /// the flag, once the ring head has passed it.
    pub lease: Option<Lease>,
}

/// The words in pepper's memory that bound a PEP burst (`pepper_layout::SWITCH_LIMIT_OFFSET`).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Lease {
    /// PEP's ring head.
    pub head: u32,
    /// The head at which the burst ends (0: none).
    pub limit: u32,
}

/// Where a check hands a loop's live locals over to the copy it moves to: mutable globals
/// pepper appends, shared by every function (a hand-over is a check's stores and, right
/// after its `return_call`, the copy's loads at entry), plus one global with the loop id
/// (0 but in a hand-over). The copies then take exactly `F`'s parameters: a `return_call`
/// with more arguments than its caller's own needs stack space for them that the caller
/// reserves in its frame on *every* call (under Cranelift's tail-call convention, a
/// prologue and epilogue copying the return address and frame pointer), which the clean
/// code paid while never switching.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The first global index pepper appends.
    pub first: u32,
    /// The appended globals' types, in index order.
    pub globals: Vec<wasm_encoder::ValType>,
    id: Option<u32>,
    /// Per type, its slots' global indices, by rank.
    slots: std::collections::HashMap<wasm_encoder::ValType, Vec<u32>>,
}

impl Scratch {
    pub fn new(first: u32) -> Scratch {
        Scratch {
            first,
            ..Default::default()
        }
    }

    fn add(&mut self, t: wasm_encoder::ValType) -> u32 {
        self.globals.push(t);
        self.first + self.globals.len() as u32 - 1
    }

    /// The loop id's global.
    fn id(&mut self) -> u32 {
        match self.id {
            Some(g) => g,
            None => {
                let g = self.add(wasm_encoder::ValType::I32);
                self.id = Some(g);
                g
            }
        }
    }

    /// The `rank`th global of type `t`.
    fn slot(&mut self, t: wasm_encoder::ValType, rank: usize) -> u32 {
        while self.slots.get(&t).map_or(0, Vec::len) <= rank {
            let g = self.add(t);
            self.slots.entry(t).or_default().push(g);
        }
        self.slots[&t][rank]
    }
}

/// The zero of a defaultable local type, `None` for a non-nullable reference.
pub(crate) fn zero(t: wasm_encoder::ValType) -> Option<I<'static>> {
    use wasm_encoder::ValType as V;
    Some(match t {
        V::I32 => I::I32Const(0),
        V::I64 => I::I64Const(0),
        V::F32 => I::F32Const(0.0f32.into()),
        V::F64 => I::F64Const(0.0f64.into()),
        V::V128 => I::V128Const(0),
        V::Ref(r) if r.nullable => I::RefNull(r.heap_type),
        V::Ref(_) => return None,
    })
}

/// One of a switched function's bodies, with the switch's code spliced in, encoded.
pub(crate) struct SwitchedBody {
    pub f: wasm_encoder::Function,
    /// Each original operator's code offset (as `Emitted::finish` gives them): path
    /// windows place a sampled leaf there.
    pub op_offsets: Vec<u32>,
    /// The body-relative offsets of the checks' `if`s (see `splice::Code::unlikely`).
    pub unlikely: Vec<u32>,
}

fn spliced(e: crate::body::Emitted<'_>, shape: &Shape, how: &Splice<'_>) -> SwitchedBody {
    let pos = Positions {
        pre_at: &e.pre_at,
        op_at: &e.op_at,
        start: e.start,
    };
    let s = splice(e.out, &pos, shape, how);
    let mut at: Vec<usize> = e.op_at.iter().map(|&j| s.moved[j]).collect();
    let ops = at.len();
    at.extend(&s.unlikely);
    let (f, mut offsets) = crate::body::encode(e.locals, &s.out, &at);
    let unlikely = offsets.split_off(ops);
    SwitchedBody {
        f,
        op_offsets: offsets,
        unlikely,
    }
}

/// Which locals (parameters included) each of `loop_ops`' headers may read before writing
/// them: the only ones a switch there must hand over.
/// Handing over every local would keep them all alive through the loop, which in a
/// function with hundreds of locals (an interpreter's dispatch loop) spills registers on
/// every iteration. Classic backward liveness over the analysis' CFG.
pub fn live_at_headers(
    analysis: &crate::analysis::FunctionAnalysis,
    body: &wasmparser::FunctionBody<'_>,
    num_locals: usize,
    loop_ops: &[usize],
) -> Result<Vec<Vec<bool>>, wasmparser::BinaryReaderError> {
    let words = num_locals.div_ceil(64);
    let nodes = analysis.cfg.num_nodes();
    let bit = |set: &[u64], x: usize| set[x / 64] >> (x % 64) & 1 == 1;
    let mut uses = vec![0u64; nodes * words];
    let mut defs = vec![0u64; nodes * words];
    let mut reader = body.get_operators_reader()?;
    for i in 0..analysis.num_ops {
        let op = reader.read()?;
        let (x, write) = match op {
            O::LocalGet { local_index } => (local_index as usize, false),
            O::LocalSet { local_index } | O::LocalTee { local_index } => {
                (local_index as usize, true)
            }
            _ => continue,
        };
        let Some(n) = analysis.op_nodes.get(i).copied().flatten() else {
            continue;
        };
        let at = n.index() * words + x / 64;
        if write {
            defs[at] |= 1 << (x % 64);
        } else if defs[at] >> (x % 64) & 1 == 0 {
            uses[at] |= 1 << (x % 64);
        }
    }
    let mut live_in = uses.clone();
    let mut changed = true;
    while changed {
        changed = false;
        for n in (0..nodes).rev() {
            let node = pepper_cfg::NodeId::new(n);
            for w in 0..words {
                let mut out = 0u64;
                for &e in analysis.cfg.succs(node) {
                    let (_, d) = analysis.cfg.edge(e);
                    out |= live_in[d.index() * words + w];
                }
                let v = uses[n * words + w] | (out & !defs[n * words + w]);
                if v != live_in[n * words + w] {
                    live_in[n * words + w] = v;
                    changed = true;
                }
            }
        }
    }
    Ok(loop_ops
        .iter()
        .map(|&op| match analysis.op_nodes.get(op).copied().flatten() {
            Some(h) => {
                let set = &live_in[h.index() * words..][..words];
                (0..num_locals).map(|x| bit(set, x)).collect()
            }
            None => vec![true; num_locals],
        })
        .collect())
}

/// Reads, once per function, which locals each enterable loop of `shape` reads before
/// writing ([`live_at_headers`], into `ShapeLoop::live`): the checks' hand-over code
/// needs it, and the backward pass over a big function (an interpreter's) is the costly
/// part.
pub fn read_liveness(
    shape: &mut Shape,
    analysis: &crate::analysis::FunctionAnalysis,
    body: &wasmparser::FunctionBody<'_>,
    num_params: usize,
) -> Result<(), crate::plan::InstrumentError> {
    let enterable: Vec<usize> = (0..shape.loops.len())
        .filter(|&k| shape.loops[k].chain.is_some())
        .collect();
    if enterable.is_empty() {
        return Ok(());
    }
    let num_locals = num_params + crate::body::original_locals(body)?.len();
    let ops: Vec<usize> = enterable.iter().map(|&k| shape.loops[k].op).collect();
    let live = live_at_headers(analysis, body, num_locals, &ops)?;
    for (k, live) in enterable.into_iter().zip(live) {
        shape.loops[k].live = Some(live);
    }
    Ok(())
}

/// The edges whose code a copy entered at loop `k` of `shape` runs on its way in
/// ([`splice`]): in each construct on the way, the code in front of the next one is
/// skipped, but the actions just before that construct's opener run (a loop's entry
/// edge). Counting edges, each entry at the loop adds one to their counters that the
/// program did not take.
pub fn way_in(
    analysis: &crate::analysis::FunctionAnalysis,
    shape: &Shape,
    k: usize,
) -> Vec<pepper_cfg::EdgeId> {
    use crate::analysis::{Action, Slot};
    let Some(chain) = &shape.loops[k].chain else {
        return Vec::new();
    };
    let children: std::collections::HashSet<usize> = chain.iter().map(|l| l.child).collect();
    (analysis.actions.iter())
        .filter_map(|(op, slot, act)| match (slot, act) {
            (Slot::Before, Action::Edge(e)) if children.contains(op) => Some(*e),
            _ => None,
        })
        .collect()
}

/// Whether a function with these locals (not its parameters) can have copies: a copy
/// entered at a loop skips the code in front of it, so every local needs a default value.
pub fn copyable(locals: &[wasm_encoder::ValType]) -> bool {
    locals.iter().all(|&t| zero(t).is_some())
}

/// A context, for the copies' emission: `None` without contexts.
type Ctx<'p> = Option<(crate::contexts::ContextEmit<'p>, u32)>;

impl SwitchedFunction<'_, '_> {
    /// One of the function's bodies, emitted for `kind`.
    fn body<'f>(
        &self,
        kind: crate::emit::EmitKind<'_>,
        ctx: Ctx<'_>,
        copy: crate::body::BodyCopy,
        redirect: Option<Redirect<'_>>,
    ) -> Result<crate::body::Emitted<'f>, crate::plan::InstrumentError>
    where
        Self: 'f,
    {
        let np = self.params.len() as u32;
        crate::body::emit_instructions(
            self.facts,
            self.k,
            self.analysis,
            np,
            self.wrapper,
            self.mem,
            kind,
            ctx,
            copy,
            redirect,
        )
    }

    /// Emits `F` (clean, with checks), `F_inst` and `F_clean`, all three of `F`'s type;
    /// `None` when the function cannot have copies (a local without a default value).
    pub fn emit<'p, 'q, 'c>(
        &self,
        instrumented: crate::emit::EmitKind<'p>,
        clean: impl Fn() -> crate::emit::EmitKind<'q>,
        ctx: impl Fn() -> Ctx<'c>,
        redirect: Redirect<'_>,
        scratch: &mut Scratch,
    ) -> Result<Option<Bodies>, crate::plan::InstrumentError> {
        use crate::body::BodyCopy;
        let np = self.params.len() as u32;
        let only = self.body(clean(), ctx(), BodyCopy::Only, None)?;
        if !copyable(&only.original_locals) {
            return Ok(None);
        }
        let (inst_fn, clean_fn) = self.copies;
        let entry = np + only.original_locals.len() as u32;
        let ids = self.ids();
        let targets: Vec<usize> = ids.iter().map(|&(k, _)| k).collect();
        let checks = self.checks(&only.original_locals, &targets, scratch);
        // Clean code is entered only where that is cheap (`Shape::leaves_at`: outermost
        // loops, and `Shallow`'s): the tests that skip to a loop run each time their
        // construct starts, which for a construct in a loop is every iteration. The
        // instrumented copy, which runs only in bursts, can be entered at any checked loop
        // and leaves at those.
        let leaves: Vec<(usize, u32)> = ids
            .iter()
            .copied()
            .filter(|&(k, _)| self.shape.leaves_at(self.placement, k))
            .collect();

        // F: the original code; at entry, the locals' zeros stand for the locals.
        let to_inst = |id| checks.switch_to(inst_fn, true, id, None);
        let f_how = Splice {
            entry: None,
            checks: ids.clone(),
            entries: Vec::new(),
            at_start: self.entry_code(&checks),
            check: &to_inst,
            arrive: None,
        };
        let checked = spliced(only, self.shape, &f_how);

        // The copies take a loop's locals over in front of that loop rather than at their
        // start (`Splice::arrive`): `F_clean` runs long frames for the rest of their
        // activation once a burst has passed, and values taken at the start live across
        // the skipped code, where Cranelift may keep them on the stack through the loop.
        let take_over = |id| checks.take_over(entry, id);
        let arrive: Option<&dyn Fn(u32) -> Code> = Some(&take_over);

        // F_inst: entered at a loop, the path so far is nobody's (a register that ends
        // no path of the program) until the loop's header starts one; counting edges,
        // the entry is counted at the loop's id instead, and so is every leave. It leaves
        // at every checked loop: into `F_clean` where that can be entered, elsewhere into
        // `F_resume`.
        let inst = self.body(instrumented, ctx(), BodyCopy::Entered, Some(redirect))?;
        let r = inst.locals_at.path;
        let leaves_at = |id: u32| leaves.iter().any(|&(_, l)| l == id);
        let left = |id: u32| self.counts.map(|base| base + 16 * (id - 1) + 8);
        let to_clean = |id| match self.resume {
            Some(resume) if !leaves_at(id) => checks.switch_to(resume, false, id, left(id)),
            _ => checks.switch_to(clean_fn, false, id, left(id)),
        };
        let arrived: Vec<I<'static>> = match self.counts {
            // `[base + 16 * (entry - 1)] += 1`.
            Some(base) => {
                let at = crate::emit::memarg(self.mem, base - 16, 3);
                let addr = [I::LocalGet(entry), I::I32Const(4), I::I32Shl];
                (addr.iter().chain(&addr).cloned())
                    .chain([I::I64Load(at), I::I64Const(1), I::I64Add, I::I64Store(at)])
                    .collect()
            }
            None => vec![I::I64Const(self.entered_register), I::LocalSet(r)],
        };
        let inst_how = Splice {
            entry: Some(entry),
            checks: match self.resume {
                Some(_) => ids.clone(),
                None => leaves.clone(),
            },
            entries: ids.clone(),
            at_start: checks.arrival(entry, &arrived).into(),
            check: &to_clean,
            arrive,
        };
        let instrumented = spliced(inst, self.shape, &inst_how);

        // F_resume: the clean code entered at a loop `F_clean` cannot be entered at. Its
        // tests that skip to those loops run only until the frame reaches a loop
        // `F_clean` can be entered at, where it moves there whatever the flag says: a
        // frame that had to linger in `F_inst` to the end of a loop nest (for a Rust
        // program's hot nest, the rest of the run) runs clean code as soon as its burst
        // or window ends.
        let resume = match self.resume {
            Some(_) => {
                let body = self.body(clean(), ctx(), BodyCopy::Entered, None)?;
                let onward = |id| match leaves_at(id) {
                    true => checks.go_to(clean_fn, id),
                    false => to_inst(id),
                };
                let how = Splice {
                    entry: Some(entry),
                    checks: ids.clone(),
                    entries: (ids.iter().copied())
                        .filter(|&(_, id)| !leaves_at(id))
                        .collect(),
                    at_start: checks.arrival(entry, &[]).into(),
                    check: &onward,
                    arrive,
                };
                Some(spliced(body, self.shape, &how))
            }
            None => None,
        };

        // F_clean: the clean code again, enterable at a loop.
        let again = self.body(clean(), ctx(), BodyCopy::Entered, None)?;
        let clean_how = Splice {
            entry: Some(entry),
            checks: ids,
            entries: leaves,
            at_start: checks.arrival(entry, &[]).into(),
            check: &to_inst,
            arrive,
        };
        let clean = spliced(again, self.shape, &clean_how);
        Ok(Some(Bodies {
            checked,
            instrumented,
            clean,
            resume,
        }))
    }

    /// The loops with checks (indices into `Shape::loops`), each with its id (from 1).
    pub fn ids(&self) -> Vec<(usize, u32)> {
        (self.shape.targets(self.placement).into_iter())
            .zip(1..)
            .collect()
    }

    /// Whether the function needs `F_resume`: some of its checks under `placement` only
    /// enter `F_inst` (`Shape::enters_only`), where `F_clean` cannot be entered.
    /// Ephemeral's budgets count every header at its checks and never use such
    /// placements.
    pub fn needs_resume(shape: &Shape, placement: SwitchPlacement) -> bool {
        (shape.targets(placement).into_iter()).any(|k| shape.enters_only(placement, k))
    }

    /// The code every check shares: the flag's test, the budget's spending, and which
    /// locals each checked loop (`targets`) reads.
    fn checks(
        &self,
        original_locals: &[wasm_encoder::ValType],
        targets: &[usize],
        scratch: &mut Scratch,
    ) -> Checks {
        let at = crate::emit::memarg(self.flag.0, self.flag.1, 2);
        // An atomic load: the sampler thread writes the flag, and Cranelift would take a
        // plain load in a loop without stores for the same as the one at the function's
        // entry (redundant load elimination), so the loop never switched.
        let mut flag = vec![I::I32Const(0), I::I32AtomicLoad(at)];
        if self.budget.is_some() {
            flag.extend([I::I32Const(0), I::I32GtS]);
        }
        if self.chaos {
            // flag = flag * 1103515245 + 12345; bit 16 of it says "instrumented".
            flag = vec![I::I32Const(0), I::I32Const(0), I::I32Load(at)];
            flag.extend([
                I::I32Const(1103515245),
                I::I32Mul,
                I::I32Const(12345),
                I::I32Add,
            ]);
            flag.extend([I::I32Store(at), I::I32Const(0), I::I32Load(at)]);
            flag.extend([I::I32Const(16), I::I32ShrU, I::I32Const(1), I::I32And]);
        }
        // Ephemeral: budget -= 1 (a plain load and store: see `pepper_runtime`'s epochs).
        let spend: Vec<I<'static>> = match self.budget {
            Some(_) => vec![
                I::I32Const(0),
                I::I32Const(0),
                I::I32Load(at),
                I::I32Const(1),
                I::I32Sub,
                I::I32Store(at),
            ],
            None => Vec::new(),
        };
        let types: Vec<wasm_encoder::ValType> =
            self.params.iter().chain(original_locals).copied().collect();
        // Read once at layout (`read_liveness`); a loop without it hands over every local.
        let live: Vec<Vec<bool>> = (targets.iter())
            .map(|&k| match &self.shape.loops[k].live {
                Some(live) => live.clone(),
                None => vec![true; types.len()],
            })
            .collect();
        // A slot for each local that some checked loop reads before writing; parameters
        // go over as arguments.
        let np = self.params.len();
        let mut ranks = std::collections::HashMap::new();
        let slots = (0..types.len())
            .map(|x| {
                let handed = x >= np && live.iter().any(|l| l[x]);
                handed.then(|| {
                    let rank = ranks.entry(types[x]).or_insert(0usize);
                    *rank += 1;
                    scratch.slot(types[x], *rank - 1)
                })
            })
            .collect();
        // Burst limit L (0: none): over = L != 0 && (head - L) as i32 >= 0, and then the
        // flag is cleared, so that the burst ends in the guest whether or not the
        // sampler thread runs at that moment.
        let over = self.lease.map(|lease| {
            let limit = crate::emit::memarg(self.mem, lease.limit, 2);
            let head = crate::emit::memarg(self.mem, lease.head, 2);
            vec![
                I::I32Const(0),
                I::I32AtomicLoad(limit),
                I::I32Eqz,
                I::If(BlockType::Result(wasm_encoder::ValType::I32)),
                I::I32Const(0),
                I::Else,
                I::I32Const(0),
                I::I32Load(head),
                I::I32Const(0),
                I::I32AtomicLoad(limit),
                I::I32Sub,
                I::I32Const(0),
                I::I32GeS,
                I::End,
            ]
        });
        // 1 -> 0, never a plain store: a value other than the sampler's (`--switch-chaos`
        // keeps a generator there) keeps its value.
        let clear = vec![
            I::I32Const(0),
            I::I32Const(1),
            I::I32Const(0),
            I::I32AtomicRmwCmpxchg(at),
            I::Drop,
        ];
        Checks {
            flag,
            over,
            clear,
            spend,
            live,
            slots,
            id: scratch.id(),
            np: np as u32,
            headers: self.budget.map(|b| b.headers),
            mem: self.mem,
        }
    }

    /// `F`'s start: ephemeral's entry count, and the entry check when there is one.
    fn entry_code(&self, checks: &Checks) -> Code {
        let mut at_start: Vec<I<'static>> = Vec::new();
        let mut unlikely = None;
        if let Some(b) = self.budget {
            at_start.extend(increment(self.mem, b.entries));
        }
        if self.entry_check {
            at_start.extend(checks.flag.iter().cloned());
            unlikely = Some(at_start.len());
            at_start.push(I::If(BlockType::Empty));
            at_start.extend(checks.spend.iter().cloned());
            at_start.extend((0..checks.np).map(I::LocalGet));
            at_start.extend([I::ReturnCall(self.copies.0), I::End]);
        }
        Code {
            code: at_start,
            unlikely,
        }
    }
}

/// One switched function's bodies.
pub(crate) struct Bodies {
    /// `F`: the original code with checks.
    pub checked: SwitchedBody,
    /// `F_inst`.
    pub instrumented: SwitchedBody,
    /// `F_clean`.
    pub clean: SwitchedBody,
    /// `F_resume`, when the function has one.
    pub resume: Option<SwitchedBody>,
}

/// The code a function's checks share.
struct Checks {
    /// Leaves non-zero on the stack when the instrumented copy should run.
    flag: Vec<I<'static>>,
    /// Leaves non-zero on the stack once the burst's limit is passed (see
    /// `SwitchedFunction::lease`).
    over: Option<Vec<I<'static>>>,
    /// Clears the flag.
    clear: Vec<I<'static>>,
    /// Ephemeral: spends one unit of the budget.
    spend: Vec<I<'static>>,
    /// Per checked loop (by id - 1): which locals it reads before writing.
    live: Vec<Vec<bool>>,
    /// Per local, the global it is handed over in (see [`Scratch`]).
    slots: Vec<Option<u32>>,
    /// The loop id's global.
    id: u32,
    np: u32,
    /// Ephemeral: the first header counter.
    headers: Option<u32>,
    mem: u32,
}

impl Checks {
    /// A copy's start: `entry = id; if entry { id = 0; then }` ([`Checks::take_over`]
    /// takes the locals in front of their loop).
    fn arrival(&self, entry: u32, then: &[I<'static>]) -> Vec<I<'static>> {
        let mut c = vec![
            I::GlobalGet(self.id),
            I::LocalTee(entry),
            I::If(BlockType::Empty),
            I::I32Const(0),
            I::GlobalSet(self.id),
        ];
        c.extend(then.iter().cloned());
        c.push(I::End);
        c
    }

    /// In front of loop `id`: `if entry == id { its live locals = their slots }`.
    fn take_over(&self, entry: u32, id: u32) -> Code {
        let mut c = vec![
            I::LocalGet(entry),
            I::I32Const(id as i32),
            I::I32Eq,
            I::If(BlockType::Empty),
        ];
        for (x, g) in self.handed(id) {
            c.extend([I::GlobalGet(g), I::LocalSet(x)]);
        }
        c.push(I::End);
        c.into()
    }

    /// (local, its slot) for the locals handed over at loop `id` (those it reads before
    /// writing).
    fn handed(&self, id: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let live = &self.live[id as usize - 1];
        (self.slots.iter().enumerate()).filter_map(move |(x, slot)| {
            let g = (*slot)?;
            live[x].then_some((x as u32, g))
        })
    }

    /// `if flag { slots = live locals; id = id; return_call to(params..) }` (or `if
    /// !flag`): only the locals the loop reads before writing go over; `count`, a u64
    /// counter the switch increments.
    fn switch_to(&self, to: u32, when_set: bool, id: u32, count: Option<u32>) -> Code {
        let mut c: Vec<I<'static>> = Vec::new();
        if let Some(h) = self.headers {
            c.extend(increment(self.mem, h + 8 * (id - 1)));
        }
        match (&self.over, when_set) {
            // Leave when the limit is passed (clearing the flag) or the flag is clear.
            (Some(over), false) => {
                c.extend(over.iter().cloned());
                c.push(I::If(BlockType::Result(wasm_encoder::ValType::I32)));
                c.extend(self.clear.iter().cloned());
                c.extend([I::I32Const(1), I::Else]);
                c.extend(self.flag.iter().cloned());
                c.extend([I::I32Eqz, I::End]);
            }
            _ => {
                c.extend(self.flag.iter().cloned());
                if !when_set {
                    c.push(I::I32Eqz);
                }
            }
        }
        let unlikely = Some(c.len());
        c.push(I::If(BlockType::Empty));
        if when_set {
            c.extend(self.spend.iter().cloned());
        }
        if let Some(at) = count {
            c.extend(increment(self.mem, at));
        }
        self.hand_over(to, id, &mut c);
        c.push(I::End);
        if !when_set {
            c.extend(self.spend.iter().cloned());
        }
        Code { code: c, unlikely }
    }

    /// `slots = live locals; id = id; return_call to(params..)`, whatever the flag says.
    fn go_to(&self, to: u32, id: u32) -> Code {
        let mut c = Vec::new();
        self.hand_over(to, id, &mut c);
        c.into()
    }

    /// Hands loop `id`'s live locals over and tail-calls `to` to take them at that loop.
    fn hand_over(&self, to: u32, id: u32, c: &mut Vec<I<'static>>) {
        for (x, g) in self.handed(id) {
            c.extend([I::LocalGet(x), I::GlobalSet(g)]);
        }
        c.extend([I::I32Const(id as i32), I::GlobalSet(self.id)]);
        c.extend((0..self.np).map(I::LocalGet));
        c.push(I::ReturnCall(to));
    }
}

/// `u64 [addr] += 1`.
fn increment(mem: u32, addr: u32) -> [I<'static>; 6] {
    let at = crate::emit::memarg(mem, addr, 3);
    [
        I::I32Const(0),
        I::I32Const(0),
        I::I64Load(at),
        I::I64Const(1),
        I::I64Add,
        I::I64Store(at),
    ]
}

#[cfg(test)]
mod tests;
