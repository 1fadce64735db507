//! What instrumenting returns: the module to run, the runtime's view of it
//! ([`pepper_layout::Guest`]) and the plan that decodes what it counted. The only type the
//! runtime needs from this crate besides the options.

use crate::module::FuncIndex;
use crate::plan::{Plan, SwitchPlacement};
use pepper_layout::ContextMode;
use std::sync::Arc;

/// An instrumented module: the bytes to run, what the runtime must know to sample it, and
/// the plan that decodes what it counted.
pub struct Instrumented {
    /// The module to compile and run.
    pub wasm: Vec<u8>,
    /// What the rewriter decided: read by [`Instrumented::decode`], and public for tools
    /// that inspect the decisions (tests, the benchmark's statistics); the runtime needs
    /// only `guest`.
    pub plan: Plan,
    /// The runtime's view: where pepper's data lives, how to name native frames.
    pub guest: pepper_layout::Guest,
}

impl Instrumented {
    pub(crate) fn new(wasm: Vec<u8>, plan: Plan) -> Instrumented {
        let guest = plan.guest(&wasm);
        Instrumented { wasm, plan, guest }
    }

    /// The export that holds pepper's memory, for the runtime to copy out; `None` when
    /// the module was left unchanged.
    pub fn counters_export(&self) -> Option<String> {
        self.plan
            .rewritten
            .then(|| pepper_layout::COUNTERS_EXPORT.to_string())
    }

    /// Whether the engine should read the module's branch hints: the switch's checks are
    /// hinted unlikely, and only engines with hinting on (wasmtime's
    /// `Config::wasm_branch_hinting`) lay their switching code out of line.
    pub fn wants_branch_hinting(&self) -> bool {
        self.plan.switch_hints > 0
    }

    /// Path windows: what turns the PEP path words a stack sample copies into the calls
    /// they stand for; `None` unless the plan asked for them.
    pub fn path_decoder(&self) -> Option<Arc<dyn pepper_cct::PathDecoder>> {
        let sites = crate::decode::PathSites::for_plan(&self.plan, &self.wasm)?;
        Some(Arc::new(sites))
    }

    /// The profile of a run of this module: `counters` is pepper's memory after it (`None`
    /// when the run did not get that far), `outcome` what the runtime adds, `lines` the
    /// source line of an original code offset when known.
    pub fn decode(
        &self,
        counters: Option<&[u8]>,
        outcome: crate::decode::RunOutcome,
        lines: &dyn Fn(u64) -> Option<String>,
    ) -> pepper_profile::Profile {
        self.plan.profile(counters, outcome, lines)
    }
}

impl Plan {
    /// The runtime's view of the module this plan made (`output`).
    fn guest(&self, output: &[u8]) -> pepper_layout::Guest {
        use pepper_layout::{CallSite, SiteIndex};
        let site_offsets = match self.contexts {
            ContextMode::Native => crate::decode::site_offsets(output, self)
                .unwrap_or_default()
                .into_iter()
                .map(|(offset, site)| (offset, SiteIndex(site)))
                .collect(),
            _ => Default::default(),
        };
        pepper_layout::Guest {
            mode: self.mode,
            layout: self.layout,
            switch: self.switch.map(SwitchPlacement::name),
            ephemeral_windows: self.ephemeral_windows,
            slot: self.module_slot,
            contexts: self.contexts,
            num_funcs: self.imports.len() + self.functions.len(),
            num_imports: self.imports.len(),
            sites: self
                .call_sites
                .iter()
                .map(|s| CallSite {
                    caller: FuncIndex(s.func),
                    callee: s.callee.map(FuncIndex),
                })
                .collect(),
            site_offsets,
            origins: self
                .functions
                .iter()
                .flat_map(|f| f.copy_indices().map(|c| (FuncIndex(c), f.index)))
                .collect(),
        }
    }
}
