//! Typed indices (cranelift-entity style): a node id can never be passed as an edge id.

macro_rules! typed_index {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub struct $name(pub u32);

        impl $name {
            /// The index as a `usize`, for indexing the owning vector.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
            /// Builds an id from a vector position.
            #[inline]
            pub fn new(i: usize) -> Self {
                Self(u32::try_from(i).expect("index space exceeds u32"))
            }
        }
    };
}

typed_index!(
    /// A node (basic block) of a [`crate::Cfg`].
    NodeId
);
typed_index!(
    /// An edge of a [`crate::Cfg`].
    EdgeId
);
typed_index!(
    /// An edge of a [`crate::PathDag`]: a real CFG edge or a dummy edge.
    DagEdgeId
);
