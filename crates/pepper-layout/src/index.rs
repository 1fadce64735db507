//! Typed indices that cross crate boundaries, so a function index cannot be passed where a
//! call site is meant (and the other way round).

/// An index in the original module's function index space (imports first). pepper adds no
/// imports, so these indices are also valid in the rewritten module.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FuncIndex(pub u32);

/// A call instruction's id: its position among all call instructions of the instrumented
/// functions, in module order. Indexes [`crate::Guest::sites`] and the call-site counters.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct SiteIndex(pub u32);
