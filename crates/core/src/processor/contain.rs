//! Every call into user code on a processor thread, with its panic contained.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::ids::ProcessorId;
use crate::stats::ProcessorStats;

/// Runs `f`, containing a panic: counted in `stats` and logged with `what`. Every call
/// into user code on a processor thread (handlers, flushes, callbacks, and the drops of
/// clients, captures and messages) goes through here, so that none can end the thread.
/// Returns whether `f` panicked.
///
/// Inlined, so that what `f` captures (an event, on the hot path) is built where the call
/// runs it rather than copied into a frame of its own; the report of a panic is not.
#[inline(always)]
pub(super) fn contain(
    stats: &ProcessorStats,
    id: ProcessorId,
    what: &'static str,
    f: impl FnOnce(),
) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => false,
        Err(payload) => {
            report(stats, id, what, payload);
            true
        }
    }
}

/// Counts and logs a contained panic, then drops its payload (user code too) contained.
#[cold]
#[inline(never)]
fn report(
    stats: &ProcessorStats,
    id: ProcessorId,
    what: &'static str,
    payload: Box<dyn Any + Send>,
) {
    stats.counters.panics.add(1);
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)");
    tracing::error!(processor = %id, what, message, "panic caught; the processor goes on");
    // The payload's own drop is user code too.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
}
