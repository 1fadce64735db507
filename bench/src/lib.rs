//! The part of pepper's benchmark that others read too: the corpus manifest, which the
//! harness measures and pepper's tests run under every mode.

pub mod corpus;
