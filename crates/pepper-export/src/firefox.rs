//! The Firefox profiler's processed format, through `fxprof-processed-profile` (the crate
//! and version wasmtime's own guest profiler writes with).

use crate::{contexts, frame_name};
use fxprof_processed_profile::{
    CategoryColor, CpuDelta, FrameFlags, FrameInfo, Profile as FxProfile, ReferenceTimestamp,
    SamplingInterval, Timestamp,
};
use pepper_profile::{ContextKind, Profile};

/// The profile's contexts as one thread of samples: each context with a value becomes one
/// sample whose weight is its value in sampling periods (sampled trees) or its calls
/// (exact trees). The timeline is synthetic (contexts in tree order); the call tree, flame
/// graph and stack chart views are what it is for.
pub fn firefox(p: &Profile) -> anyhow::Result<Vec<u8>> {
    let c = contexts(p)?;
    let interval_us = c.sampling.as_ref().map_or(1000, |s| s.interval_us.max(1));
    let mut fx = FxProfile::new(
        &format!("pepper: {}", p.module.path),
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        // Saturating: a profile's numbers are read from a file (checked for shape, not
        // for range).
        SamplingInterval::from_nanos(interval_us.saturating_mul(1000)),
    );
    let category = fx.add_category("wasm", CategoryColor::Blue);
    let process = fx.add_process(
        &p.module.path,
        1,
        Timestamp::from_millis_since_reference(0.0),
    );
    let thread = fx.add_thread(
        process,
        1,
        Timestamp::from_millis_since_reference(0.0),
        true,
    );
    fx.set_thread_name(thread, "main");
    let mut t_us = 0u64;
    for (i, v) in c.valued() {
        let frames: Vec<FrameInfo> = c
            .ancestry(i)
            .into_iter()
            .map(|n| {
                let name = fx.intern_string(&frame_name(p, c.nodes[n].func));
                FrameInfo {
                    frame: fxprof_processed_profile::Frame::Label(name),
                    category_pair: category.into(),
                    flags: FrameFlags::empty(),
                }
            })
            .collect();
        let stack = fx.intern_stack_frames(thread, frames.into_iter());
        let (weight, cpu_us) = match c.kind {
            ContextKind::Sampled => ((v / interval_us).max(1), v),
            ContextKind::Exact => (v, 0),
        };
        fx.add_sample(
            thread,
            Timestamp::from_nanos_since_reference(t_us.saturating_mul(1000)),
            stack,
            CpuDelta::from_micros(cpu_us),
            weight.min(i32::MAX as u64) as i32,
        );
        t_us = t_us.saturating_add(cpu_us.max(interval_us));
    }
    Ok(serde_json::to_vec(&fx)?)
}
