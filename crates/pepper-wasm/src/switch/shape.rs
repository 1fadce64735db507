//! Which loops a switch can enter: the shape of each function's structured control flow
//! on the way to its loops (see the parent module).

use super::SwitchPlacement;
use wasmparser::Operator as O;

/// One step from a construct into a child construct on the way to a loop.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The opener (`block`, `loop`, `if`, `else`) after which the parent's code starts;
    /// `None`: the function body.
    pub parent: Option<usize>,
    /// An `if` parent: the `if`'s operator index and whether the way goes through `else`.
    pub arm: Option<(usize, bool)>,
    /// The child's opener (operator index).
    pub child: usize,
    pub child_is_if: bool,
}

/// A loop of the original body.
#[derive(Clone, Debug)]
pub struct ShapeLoop {
    /// Operator index of the `loop`.
    pub op: usize,
    /// Holds no other loop.
    pub innermost: bool,
    /// Is in no other loop.
    pub outermost: bool,
    /// Holds a call.
    pub calls: bool,
    /// Constructs other than loops around it (on its way in from the function's start).
    pub detours: usize,
    /// The way in from the function's start, outermost first (the last link's child is the
    /// loop); `None` when the loop cannot be entered from outside (a non-empty operand
    /// stack or a construct with parameters on the way, unreachable code, or labels
    /// [`splice`] does not renumber).
    pub chain: Option<Vec<Link>>,
    /// Which locals (parameters included) the header reads before writing them: the ones
    /// a check here hands over (`super::read_liveness`; `None` until read).
    pub live: Option<Vec<bool>>,
}

/// What the switch needs to know about one function body.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub loops: Vec<ShapeLoop>,
}

impl Shape {
    /// The loops (indices into `loops`, in operator order) that get checks under
    /// `placement`. Every loop nest the placement wants gets its check, however many
    /// values it hands over: a nest without one is a hot loop a frame that entered it in
    /// clean code never leaves for its instrumented copy, and a profile blind to it.
    pub fn targets(&self, placement: SwitchPlacement) -> Vec<usize> {
        (0..self.loops.len())
            .filter(|&k| {
                let l = &self.loops[k];
                l.chain.is_some() && wants(placement, l)
            })
            .collect()
    }

    /// Whether the function has an outermost loop the copies can be entered at: every
    /// placement but `Entries` checks it, and the instrumented copy leaves there.
    pub fn has_entered_loop(&self) -> bool {
        self.loops.iter().any(|l| l.outermost && l.chain.is_some())
    }

    /// Whether, under `placement`, the instrumented copy leaves at checked loop `k` (and
    /// the clean copy `F_clean` can be entered there): at outermost loops, and under
    /// `Shallow` and `Deep` at the loops their detour limits allow. Elsewhere the tests
    /// that skip to the loop would run each time their construct starts, for as long as
    /// the frame lives in `F_clean` (an interpreter's dispatch loop: the rest of the run).
    /// Other checked loops only enter the instrumented copy, which runs on to the next
    /// loop it leaves at.
    pub fn leaves_at(&self, placement: SwitchPlacement, k: usize) -> bool {
        let l = &self.loops[k];
        l.outermost
            || match placement {
                SwitchPlacement::Shallow => shallow_leave(l),
                SwitchPlacement::Deep => {
                    shallow_leave(l) || (!l.innermost && l.detours <= crate::plan::DEEP_DETOURS)
                }
                _ => false,
            }
    }

    /// Whether checked loop `k` is one that `Shallow` and `Deep` check past their detour
    /// limits, and `Nests` behind more than two constructs, only to enter the
    /// instrumented copy (which leaves into `F_resume` there).
    pub fn enters_only(&self, placement: SwitchPlacement, k: usize) -> bool {
        placement.has_nest_entries() && !self.leaves_at(placement, k)
    }
}

/// `Shallow`'s loops that the instrumented copy leaves at: loops that call or hold loops
/// where the way in passes at most [`crate::plan::SHALLOW_DETOURS`] other constructs.
fn shallow_leave(l: &ShapeLoop) -> bool {
    (l.calls || !l.innermost) && l.detours <= crate::plan::SHALLOW_DETOURS
}

struct Open {
    /// Where the parent's code starts for children (the opener, or `else`).
    start: usize,
    /// Operand stack empty at that start.
    start_ok: bool,
    /// `if` opener index, when this is an `if`.
    if_op: Option<usize>,
    in_else: bool,
    /// This construct's own link from its parent, when it can be entered.
    link: Option<Link>,
    /// A loop: its index in `Shape::loops`.
    loop_k: Option<usize>,
}

/// Reads the shape of every defined function body of `wasm` (which must validate): stack
/// heights come from wasmparser's validator.
pub fn shapes(wasm: &[u8]) -> Result<Vec<Shape>, wasmparser::BinaryReaderError> {
    let mut validator = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all());
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        if let wasmparser::ValidPayload::Func(func, body) = validator.payload(&payload)? {
            let mut v = func.into_validator(Default::default());
            out.push(shape(&mut v, &body)?);
        }
    }
    Ok(out)
}

fn rel_height(v: &wasmparser::FuncValidator<wasmparser::ValidatorResources>) -> Option<usize> {
    let f = v.get_control_frame(0)?;
    (!f.unreachable).then(|| (v.operand_stack_height() as usize).saturating_sub(f.height))
}

fn shape(
    v: &mut wasmparser::FuncValidator<wasmparser::ValidatorResources>,
    body: &wasmparser::FunctionBody<'_>,
) -> Result<Shape, wasmparser::BinaryReaderError> {
    let mut locals = body.get_locals_reader()?;
    for _ in 0..locals.get_count() {
        let offset = locals.original_position();
        let (n, t) = locals.read()?;
        v.define_locals(offset, n, t)?;
    }
    let mut reader = body.get_operators_reader()?;
    let mut shape = Shape::default();
    let mut labels_ok = true;
    let mut opens = vec![Open {
        start: usize::MAX,
        start_ok: true,
        if_op: None,
        in_else: false,
        link: None,
        loop_k: None,
    }];
    let mut i = 0usize;
    while !reader.eof() {
        let offset = reader.original_position();
        let op = reader.read()?;
        let before = rel_height(v);
        v.op(offset, &op)?;
        let after = rel_height(v);
        match op {
            O::Block { .. } | O::Loop { .. } | O::If { .. } => {
                let is_if = matches!(op, O::If { .. });
                if opens.is_empty() {
                    // Malformed nesting (validation would have refused it): nothing enters.
                    labels_ok = false;
                    opens.push(Open {
                        start: usize::MAX,
                        start_ok: false,
                        if_op: None,
                        in_else: false,
                        link: None,
                        loop_k: None,
                    });
                }
                let parent = &opens[opens.len() - 1];
                let child_ok = before == Some(if is_if { 1 } else { 0 });
                let link = (parent.start_ok && child_ok).then(|| Link {
                    parent: (parent.start != usize::MAX).then_some(parent.start),
                    arm: parent.if_op.map(|f| (f, parent.in_else)),
                    child: i,
                    child_is_if: is_if,
                });
                let loop_k = matches!(op, O::Loop { .. }).then(|| {
                    for o in &opens {
                        if let Some(k) = o.loop_k {
                            shape.loops[k].innermost = false;
                        }
                    }
                    let chain: Option<Vec<Link>> = opens
                        .iter()
                        .skip(1)
                        .map(|o| o.link)
                        .chain(std::iter::once(link))
                        .collect();
                    let outermost = opens.iter().all(|o| o.loop_k.is_none());
                    // The function body (the first open) is not a construct.
                    let detours = opens.iter().skip(1).filter(|o| o.loop_k.is_none()).count();
                    shape.loops.push(ShapeLoop {
                        op: i,
                        innermost: true,
                        outermost,
                        calls: false,
                        detours,
                        chain,
                        live: None,
                    });
                    shape.loops.len() - 1
                });
                opens.push(Open {
                    start: i,
                    start_ok: after == Some(0),
                    if_op: is_if.then_some(i),
                    in_else: false,
                    link,
                    loop_k,
                });
            }
            O::Else => {
                if let Some(top) = opens.last_mut() {
                    top.start = i;
                    top.start_ok = after == Some(0);
                    top.in_else = true;
                }
            }
            O::End | O::Delegate { .. } => {
                opens.pop();
                labels_ok &= !matches!(op, O::Delegate { .. });
            }
            O::TryTable { .. } | O::Try { .. } => {
                // Not entered (and `splice` does not renumber their labels).
                labels_ok = false;
                opens.push(Open {
                    start: i,
                    start_ok: false,
                    if_op: None,
                    in_else: false,
                    link: None,
                    loop_k: None,
                });
            }
            O::Call { .. }
            | O::CallIndirect { .. }
            | O::CallRef { .. }
            | O::ReturnCall { .. }
            | O::ReturnCallIndirect { .. }
            | O::ReturnCallRef { .. } => {
                for o in &opens {
                    if let Some(k) = o.loop_k {
                        shape.loops[k].calls = true;
                    }
                }
            }
            O::Catch { .. }
            | O::CatchAll
            | O::Rethrow { .. }
            | O::BrOnNull { .. }
            | O::BrOnNonNull { .. }
            | O::BrOnCast { .. }
            | O::BrOnCastFail { .. } => labels_ok = false,
            _ => {}
        }
        i += 1;
    }
    if !labels_ok {
        for l in &mut shape.loops {
            l.chain = None;
        }
    }
    Ok(shape)
}

/// Whether `placement` puts a check at a loop of this shape.
fn wants(placement: SwitchPlacement, l: &ShapeLoop) -> bool {
    match placement {
        SwitchPlacement::Entries => false,
        SwitchPlacement::Outer => l.outermost,
        SwitchPlacement::Nests => {
            l.outermost || (!l.innermost && l.detours > crate::plan::SHALLOW_DETOURS)
        }
        SwitchPlacement::Loops => l.calls || !l.innermost || l.outermost,
        // Every loop that holds loops, however deep: a frame that runs such a nest in clean
        // code for a long stretch (a Rust `match` arm's loops, behind a dozen blocks)
        // would otherwise never switch. Past the detour limits the check only enters the
        // instrumented copy (`Shape::leaves_at`); it costs one test per iteration of a
        // loop whose iterations each run a loop.
        SwitchPlacement::Shallow => l.outermost || shallow_leave(l) || !l.innermost,
        // Every loop: an innermost loop runs as long as its trip count says, and one
        // inside a loop that iterates rarely (a byte comparison over a buffer, inlined
        // into a function whose loop runs once per round) otherwise hides that stretch
        // from every burst, and gives its time to whatever code runs next. Checks where
        // the copy cannot leave only enter it (`Shape::leaves_at`).
        SwitchPlacement::Deep | SwitchPlacement::All => true,
    }
}
