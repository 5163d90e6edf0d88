//! The synchronisation primitives of the protocols in [`wake`](crate::wake) and
//! [`gate`](crate::gate), swapped for `loom`'s under `--cfg loom` so that the model checker
//! explores every interleaving of the real code.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
