//! How stacks are sampled: where the shadow stack lives, how native frames are named, and
//! what the profile records about the tree they build.

use super::*;

/// Where the shadow stack lives and how the PCCT is built.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StackConfig {
    /// Byte address of the u32 stack pointer (frames × 16).
    pub pointer: u32,
    /// Byte address of the frames.
    pub base: u32,
    /// Frames in the ring.
    pub entries: u32,
    /// Most new frames one sample walks (Whaley's BUFSIZE).
    pub bufsize: usize,
    /// Most nodes the tree holds.
    pub budget: usize,
    /// Which reading of Whaley's edge weights the tree keeps.
    pub edge_mode: EdgeMode,
    /// Functions in the module (imports included).
    pub num_funcs: usize,
    /// The direct callee of each call site (names the import a host frame is in).
    pub callees: Arc<[Option<u32>]>,
    /// Sample the guest thread's native stack instead of a shadow stack; the map names
    /// call sites by their offset in the running module.
    pub native: Option<Arc<std::collections::HashMap<u64, u32>>>,
    /// The guest's call log, copied with every native sample and replayed into call
    /// windows (`pepper_cct::window`).
    pub call_log: Option<Ring>,
    /// Caller and direct callee of every call site, for the replay.
    pub sites: Arc<[pepper_cct::SiteInfo]>,
    /// Path windows: with native stacks and PEP's ring, the newest path words copied with
    /// every stack sample are replayed as calls (`pepper_cct::paths`); what each path word
    /// says about calls. Set by [`SamplerConfig::for_module`].
    pub path_windows: Option<Arc<dyn pepper_cct::PathDecoder>>,
    /// Switchable instrumentation: the function each copy is a copy of.
    pub origins: Arc<std::collections::HashMap<u32, u32>>,
}

impl StackConfig {
    /// New frames a sample walks at most (Whaley's BUFSIZE; deeper recursion between two
    /// samples starts a detached subtree). Whaley used 16 because his walk followed frame
    /// pointers through a suspended thread; pepper reads a contiguous shadow stack, one
    /// 4-byte load per frame, and only the first sample of a deep stack walks it all (the
    /// marks make later ones short). With 16, a program whose first sample lands 20 frames
    /// deep (an interpreter) would hang its whole tree under a detached root.
    pub const BUFSIZE: usize = 1024;
    /// Nodes the tree holds by default: about 5 MB.
    pub const BUDGET: usize = 1 << 17;

    /// How to sample the stacks of an instrumented module with sampled or native
    /// contexts, with Whaley's defaults (strict new-edge weights); `None` without contexts.
    pub fn for_guest(guest: &Guest) -> Option<StackConfig> {
        let l = &guest.layout;
        let native = match guest.contexts {
            ContextMode::Sampled => None,
            ContextMode::Native => Some(Arc::new(
                guest
                    .site_offsets
                    .iter()
                    .map(|(&offset, site)| (offset, site.0))
                    .collect(),
            )),
            _ => return None,
        };
        Some(StackConfig {
            pointer: l.stack_pointer,
            base: l.stack_base,
            entries: l.stack_entries,
            bufsize: Self::BUFSIZE,
            budget: Self::BUDGET,
            edge_mode: EdgeMode::StrictNewEdges,
            num_funcs: guest.num_funcs,
            callees: guest.sites.iter().map(|s| s.callee.map(|c| c.0)).collect(),
            call_log: native.as_ref().and(l.call_log()),
            sites: guest
                .sites
                .iter()
                .map(|s| pepper_cct::SiteInfo {
                    caller: s.caller.0,
                    callee: s.callee.map(|c| c.0),
                })
                .collect(),
            native,
            path_windows: None,
            origins: Arc::new(guest.origins.iter().map(|(c, f)| (c.0, f.0)).collect()),
        })
    }

    /// What the profile records about a finished sampler's tree.
    pub fn collected(
        &self,
        res: &SamplerResult,
        interval: Duration,
    ) -> Option<pepper_wasm::SampledContexts> {
        let pcct = res.pcct.clone()?;
        Some(pepper_wasm::SampledContexts {
            sampling: pepper_profile::ContextSampling {
                interval_us: interval.as_micros() as u64,
                samples: pcct.samples,
                edge_mode: match self.edge_mode {
                    EdgeMode::StrictNewEdges => "strict",
                    EdgeMode::Fig7Literal => "figure7",
                }
                .into(),
                bufsize: self.bufsize as u32,
                budget: self.budget as u64,
                detached: pcct.detached,
                truncated: pcct.truncated,
                in_host: res.in_host,
                empty: pcct.empty,
                torn: pcct.torn,
                window_calls: res.windows.calls,
                window_weighted: res.windows.weighted,
                window_cut: res.windows.cut,
                signal_delivery_ns: match res.signal_delivery {
                    (_, 0) => 0,
                    (total, n) => (total.as_nanos() / n as u128) as u64,
                },
            },
            pcct,
        })
    }
}
