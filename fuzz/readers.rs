//! Everything a reader does with a profile: shared by the fuzz target and the test that
//! mutates real profiles (`crates/pepper/tests/profile_fuzz.rs`).

use pepper_profile::{report, Profile};

/// Reports, JSON, compare, merge and every export of `p`; none may panic.
pub fn read_everything(p: &Profile) {
    let _ = report::text(p, &Default::default());
    let _ = serde_json::to_string(&report::json(p));
    let _ = pepper_profile::compare::compare(p, p);
    if let Some(c) = &p.contexts {
        let _ = pepper_profile::context_accuracy::compare_contexts(c, c);
        let _ = pepper_export::pprof(p);
        let _ = pepper_export::folded(p);
        let _ = pepper_export::firefox(p);
        let _ = pepper_export::flamegraph(p, std::io::sink());
    }
    let _ = Profile::merge(&[p.clone(), p.clone()]);
}
