//! The benchmark's variants: one [`Spec`] per configuration measured on every workload
//! (`specs`), with the defaults they share.

use pepper_profile::Mode;
use pepper_sampling::PepParams;
use pepper_wasm::switch::SwitchPlacement;
use std::time::Duration;

/// What the A/A control row is, in every table that has one.
pub(crate) const AA_WHAT: &str = "uninstrumented again (the A/A control: a second copy of the baseline, so its overhead is the harness's noise floor)";

/// PEP(64,17), pepper's default bursts.
pub(crate) const PEP_DEFAULT: PepParams = PepParams {
    samples: 64,
    stride: 17,
};

pub(crate) const INTERVAL: Duration = Duration::from_millis(1);
/// PEP's burst period in the variants that name none: 250 µs, the period the committed
/// tables' unsuffixed labels were measured at. `pepper run`'s default is
/// `pepper_runtime::PEP_INTERVAL` (500 µs), the `@500us` variants.
pub(crate) const PEP_INTERVAL: Duration = Duration::from_micros(250);

/// Ball-Larus' PP kept arrays only where a path number fits an 11- or 13-bit immediate
/// (TPP, appendix A), so classic counting hashes functions above 4,096 paths.
pub(crate) const CLASSIC_ARRAY_MAX_PATHS: u64 = 4096;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Guide {
    None,
    /// Recorded on the measured input.
    SameInput,
    /// Recorded on the workload's other input.
    OtherInput,
}

/// One configuration measured on every workload.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub(crate) label: &'static str,
    pub(crate) mode: Mode,
    /// PEP with the host sampler thread.
    pub(crate) sampler: Option<PepParams>,
    /// PEP, in-guest every-K design.
    pub(crate) every: Option<u32>,
    /// Guide (smart numbering; cold pruning in targeted mode) from an exact-paths run.
    pub(crate) guide: Guide,
    /// Epoch ticks every INTERVAL; `Some(true)` also takes wasmtime GuestProfiler samples.
    pub(crate) epoch: Option<bool>,
    /// Targeted mode: obvious path elimination (TPP §4.2) on top of cold path elimination.
    pub(crate) obvious: bool,
    /// Exact edges: read loops' induction variables instead of counting iterations.
    pub(crate) loop_counts: bool,
    /// Targeted mode: count loops' most frequent paths in locals (`--loop-threshold 0`
    /// when false).
    pub(crate) register_loops: bool,
    /// Path modes: count as Ball-Larus' PP did (the TPP paper's baseline): arrays up to
    /// [`CLASSIC_ARRAY_MAX_PATHS`] paths, a hash table call at every path end beyond, no
    /// cache in front of the table.
    pub(crate) classic: bool,
    /// PEP with the host sampler: the timer period (the other variants use `INTERVAL`).
    pub(crate) interval: Duration,
    /// PEP: switchable instrumentation, the flag checked where this says.
    pub(crate) switch: Option<SwitchPlacement>,
    /// Switch: hint the checks unlikely (`InstrumentOptions::switch_hints`).
    pub(crate) switch_hints: bool,
    /// Run the workload as a `wasi:cli/command` component (its module componentized with
    /// the preview-1 adapter), WASI 0.2, contexts from a shadow stack.
    pub(crate) component: bool,
    /// Calling contexts as `pepper run` takes them by default: native stack samples and
    /// call-site counters.
    pub(crate) contexts: bool,
    pub(crate) what: &'static str,
}

pub(crate) fn specs() -> Vec<Spec> {
    let base = Spec {
        label: "none",
        mode: Mode::None,
        sampler: None,
        every: None,
        guide: Guide::None,
        epoch: None,
        obvious: false,
        loop_counts: true,
        register_loops: true,
        classic: false,
        interval: INTERVAL,
        switch: None,
        switch_hints: true,
        component: false,
        contexts: false,
        what: "uninstrumented (the baseline)",
    };
    let pep = |label, samples, stride, what| Spec {
        label,
        mode: Mode::Pep,
        sampler: Some(PepParams { samples, stride }),
        interval: PEP_INTERVAL,
        what,
        ..base.clone()
    };
    let switched = |label, sampler, placement, what| Spec {
        label,
        mode: Mode::Pep,
        sampler,
        interval: PEP_INTERVAL,
        switch: Some(placement),
        what,
        ..base.clone()
    };
    vec![
        base.clone(),
        Spec {
            label: "none-again",
            what: AA_WHAT,
            ..base.clone()
        },
        Spec {
            label: "epoch",
            epoch: Some(false),
            what: "uninstrumented, wasmtime epoch interruption ticking every 1 ms",
            ..base.clone()
        },
        Spec {
            label: "wasmtime-guest-profiler",
            epoch: Some(true),
            what: "uninstrumented, wasmtime's GuestProfiler sampled from the epoch callback every 1 ms",
            ..base.clone()
        },
        Spec {
            label: "exact-edges",
            mode: Mode::ExactEdges,
            what: "every branch outcome counted",
            ..base.clone()
        },
        Spec {
            label: "exact-edges-no-loop-counts",
            mode: Mode::ExactEdges,
            loop_counts: false,
            what: "every branch outcome counted, loop iterations on edges (`--no-loop-counts`)",
            ..base.clone()
        },
        Spec {
            label: "exact-paths",
            mode: Mode::ExactPaths,
            what: "every path counted (the accuracy reference)",
            ..base.clone()
        },
        Spec {
            label: "exact-paths-classic",
            mode: Mode::ExactPaths,
            classic: true,
            what: "every path counted as Ball-Larus' PP counted (the TPP paper's baseline): arrays up to 4,096 paths, beyond that a hash table call at every path end, no cache",
            ..base.clone()
        },
        Spec {
            label: "exact-edges+guide",
            mode: Mode::ExactEdges,
            guide: Guide::SameInput,
            what: "every branch outcome counted, counters placed by the exact profile of the same input (`--guide`)",
            ..base.clone()
        },
        Spec {
            label: "pep-instrumentation",
            mode: Mode::Pep,
            what: "PEP ring writes, sampler never runs",
            ..base.clone()
        },
        pep("pep(1,1)", 1, 1, "PEP, timer sampling (one path per tick)"),
        pep("pep(64,17)", 64, 17, "PEP(64,17) on the ring (`--switch off`): every path end written, bursts read from the ring"),
        switched("switch-entries-never", None, SwitchPlacement::Entries, "PEP with switchable instrumentation, the flag checked at function entries and never set: the clean code's cost"),
        switched("switch-outer-never", None, SwitchPlacement::Outer, "PEP with switchable instrumentation, the flag checked at entries and outermost loop headers, never set"),
        switched("switch-loops-never", None, SwitchPlacement::Loops, "PEP with switchable instrumentation, the flag checked at entries and the headers of loops that call or hold loops, never set"),
        switched("switch-shallow-never", None, SwitchPlacement::Shallow, "PEP with switchable instrumentation, the flag checked at entries, outermost loop headers and the headers of loops that call or hold loops with at most two other constructs on the way in, never set"),
        switched("switch-deep-never", None, SwitchPlacement::Deep, "PEP with switchable instrumentation, the flag checked where switch-shallow-never checks it (the two differ in where the instrumented copy leaves), never set"),
        switched("switch-all-never", None, SwitchPlacement::All, "PEP with switchable instrumentation, the flag checked at entries and every loop header, never set"),
        Spec {
            switch_hints: false,
            ..switched("switch-outer-never-unhinted", None, SwitchPlacement::Outer, "as switch-outer-never without branch hints on the checks (the engine lays out their switching code in line)")
        },
        Spec {
            switch_hints: false,
            ..switched("pep(64,17)+switch-outer-unhinted", Some(PEP_DEFAULT), SwitchPlacement::Outer, "as pep(64,17)+switch-outer without branch hints on the checks")
        },
        switched("pep(64,17)+switch-entries", Some(PEP_DEFAULT), SwitchPlacement::Entries, "PEP(64,17), the instrumented copies running for each tick's burst only, entered at function entries"),
        switched("pep(64,17)+switch-outer", Some(PEP_DEFAULT), SwitchPlacement::Outer, "PEP(64,17), the instrumented copies running for each tick's burst only, entered at entries and outermost loop headers (`--switch outer`)"),
        switched("pep(64,17)+switch-loops", Some(PEP_DEFAULT), SwitchPlacement::Loops, "PEP(64,17), the instrumented copies running for each tick's burst only, entered at entries and the headers of loops that call or hold loops"),
        switched("pep(64,17)+switch-shallow", Some(PEP_DEFAULT), SwitchPlacement::Shallow, "`--switch shallow` with bursts every 250 µs (`--interval 250us`): PEP(64,17), the instrumented copies running for each tick's burst only, entered and left at entries, outermost loop headers and the headers of loops that call or hold loops with at most two other constructs on the way in"),
        Spec {
            interval: Duration::from_micros(500),
            ..switched("pep(64,17)+switch-shallow@500us", Some(PEP_DEFAULT), SwitchPlacement::Shallow, "as pep(64,17)+switch-shallow with bursts every 500 µs, half as many (and checks at every loop nest, entering only)")
        },
        Spec {
            interval: Duration::from_micros(500),
            ..switched("pep(64,17)+switch-deep@500us", Some(PEP_DEFAULT), SwitchPlacement::Deep, "pepper's default: as pep(64,17)+switch-shallow@500us, also left at loops that hold loops behind up to eight other constructs (`--switch deep`)")
        },
        Spec {
            interval: pepper_runtime::PEP_INTERVAL,
            contexts: true,
            ..switched("default", Some(PEP_DEFAULT), SwitchPlacement::Deep, "`pepper run`'s default: PEP(64,17) bursts on the switch (`--switch deep`) every 1 ms of the guest's CPU time, with calling contexts (native stack samples at the bursts, call-site counters)")
        },
        Spec {
            interval: Duration::from_micros(500),
            contexts: true,
            ..switched("default@500us", Some(PEP_DEFAULT), SwitchPlacement::Deep, "as default with bursts and stack samples every 500 µs of the guest's CPU time")
        },
        Spec {
            interval: pepper_runtime::PEP_INTERVAL,
            ..switched("default without contexts", Some(PEP_DEFAULT), SwitchPlacement::Deep, "as default without calling contexts (`--contexts off`)")
        },
        Spec {
            interval: Duration::from_millis(2),
            contexts: true,
            ..switched("default@2ms", Some(PEP_DEFAULT), SwitchPlacement::Deep, "as default with bursts and stack samples every 2 ms of the guest's CPU time")
        },
        switched("pep(64,17)+switch-all", Some(PEP_DEFAULT), SwitchPlacement::All, "PEP(64,17), the instrumented copies running for each tick's burst only, entered at entries and every loop header"),
        pep("pep(256,17)", 256, 17, "PEP, longer bursts"),
        Spec {
            interval: Duration::from_micros(500),
            ..switched("pep(64,17)+switch-outer@500us", Some(PEP_DEFAULT), SwitchPlacement::Outer, "as pep(64,17)+switch-outer with bursts every 500 us: half the bursts")
        },
        Spec {
            interval: Duration::from_millis(1),
            ..switched("pep(64,17)+switch-outer@1ms", Some(PEP_DEFAULT), SwitchPlacement::Outer, "as pep(64,17)+switch-outer with bursts every 1 ms: a quarter of the bursts")
        },
        Spec {
            interval: Duration::from_millis(1),
            ..switched("pep(256,17)+switch-outer@1ms", Some(PepParams { samples: 256, stride: 17 }), SwitchPlacement::Outer, "as pep(64,17)+switch-outer with four times longer bursts a quarter as often: as many samples, a quarter of the switches")
        },
        Spec {
            interval: Duration::from_millis(1),
            ..switched("pep(256,17)+switch-loops@1ms", Some(PepParams { samples: 256, stride: 17 }), SwitchPlacement::Loops, "as pep(64,17)+switch-loops with four times longer bursts a quarter as often")
        },
        Spec {
            interval: Duration::from_millis(4),
            ..switched("pep(1024,17)+switch-outer@4ms", Some(PepParams { samples: 1024, stride: 17 }), SwitchPlacement::Outer, "as pep(64,17)+switch-outer with sixteen times longer bursts a sixteenth as often")
        },
        Spec {
            interval: Duration::from_millis(4),
            ..switched("pep(64,17)+switch-outer@4ms", Some(PEP_DEFAULT), SwitchPlacement::Outer, "as pep(64,17)+switch-outer with bursts every 4 ms: a sixteenth of the bursts")
        },
        Spec {
            interval: INTERVAL,
            ..pep(
                "pep(64,17)@1ms",
                64,
                17,
                "PEP(64,17) on the ring (`--switch off`) with bursts every 1 ms of the guest's CPU time, as `pepper run --switch off` takes them",
            )
        },
        Spec {
            epoch: Some(false),
            ..pep(
                "pep(64,17)+epoch",
                64,
                17,
                "PEP(64,17) on the ring in an engine with epoch interruption ticking every 1 ms: its \"vs epoch\" is what PEP adds for an embedder who already runs with epochs",
            )
        },
        Spec {
            guide: Guide::SameInput,
            ..pep(
                "pep(64,17)+guide",
                64,
                17,
                "PEP(64,17) on the ring with smart numbering from the exact profile of the same input",
            )
        },
        Spec {
            label: "targeted(same input)",
            mode: Mode::Targeted,
            guide: Guide::SameInput,
            what: "TPP cold path elimination (5%) and register loops (a short loop's most frequent path counted in a local), the default, guide: exact profile of the measured input",
            ..base.clone()
        },
        Spec {
            label: "targeted-no-register-loops(same input)",
            mode: Mode::Targeted,
            guide: Guide::SameInput,
            register_loops: false,
            what: "TPP cold path elimination (5%) without register loops (`--loop-threshold 0`: every loop iteration's path end is a memory increment), guide: exact profile of the measured input",
            ..base.clone()
        },
        Spec {
            label: "targeted+obvious(same input)",
            mode: Mode::Targeted,
            guide: Guide::SameInput,
            obvious: true,
            what: "TPP cold (5%) + obvious path elimination (`--obvious`), guide: exact profile of the measured input",
            ..base.clone()
        },
        Spec {
            label: "targeted-classic(same input)",
            mode: Mode::Targeted,
            guide: Guide::SameInput,
            classic: true,
            what: "TPP cold path elimination (5%) and register loops with PP's counters (arrays up to 4,096 paths, a hash call beyond, no cache): the TPP paper's experiment, against `exact-paths-classic`",
            ..base.clone()
        },
        Spec {
            label: "targeted(other input)",
            mode: Mode::Targeted,
            guide: Guide::OtherInput,
            what: "TPP cold path elimination (5%), guide: exact profile of the workload's other input",
            ..base.clone()
        },
        Spec {
            label: "pep-every-1024",
            mode: Mode::Pep,
            every: Some(1024),
            what: "PEP, in-guest design: a counter check at every path end, every 1024th path hashed",
            ..base.clone()
        },
        Spec {
            label: "component-none",
            component: true,
            what: "the workload as a `wasi:cli/command` component (preview-1 adapter, WASI 0.2), uninstrumented: what the component path costs by itself",
            ..base.clone()
        },
        Spec {
            label: "component-pep(64,17)",
            component: true,
            what: "PEP(64,17) on the ring on the component (its program's module instrumented); overhead against the core module's baseline, so the component's own cost is in it",
            ..pep(
                "component-pep(64,17)",
                PEP_DEFAULT.samples,
                PEP_DEFAULT.stride,
                "",
            )
        },
    ]
}
