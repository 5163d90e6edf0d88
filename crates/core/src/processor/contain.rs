//! Every call into user code on a processor thread, with its panic contained.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::ids::ProcessorId;
use crate::stats::ProcessorStats;

/// Runs `f`, containing a panic: counted in `stats` and logged with `what`. Every call
/// into user code on a processor thread (handlers, flushes, callbacks, and the drops of
/// clients, captures and messages) goes through here, so that none can end the thread.
/// Returns whether `f` panicked.
pub(super) fn contain(
    stats: &ProcessorStats,
    id: ProcessorId,
    what: &'static str,
    f: impl FnOnce(),
) -> bool {
    let Err(payload) = catch_unwind(AssertUnwindSafe(f)) else {
        return false;
    };
    stats.counters.panics.add(1);
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)");
    tracing::error!(processor = %id, what, message, "panic caught; the processor goes on");
    // The payload's own drop is user code too.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    true
}
