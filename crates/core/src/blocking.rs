//! Blocking calls refused on an async runtime's threads.
//!
//! A blocking call (`dispatch`, `dispatch_batch`, `execute`, `synchronize`, `call`, and their
//! timed forms) parks its thread until there is room or an answer. On a worker thread of an
//! async runtime that stalls every task the worker owns, and can deadlock outright when the
//! task that would make the room runs on the same worker. With the `tokio` feature, such a
//! call made on a tokio runtime's worker thread panics with a message that names the async
//! form to use instead, as tokio's own `blocking_send` does; a thread of
//! `tokio::task::spawn_blocking` is not a worker, and may block.
//!
//! What counts as a worker is what `tokio::runtime::worker_index` says: the threads of a
//! multi-thread runtime that run its tasks, and the thread driving a current-thread
//! runtime. The thread that waits in a multi-thread runtime's `block_on` (the body of
//! `#[tokio::main]`) is not one of them and is not refused, unlike tokio's own check:
//! tokio's public API does not tell it apart from a `spawn_blocking` thread, and refusing
//! those would refuse the very place blocking calls belong. The check is one
//! thread-local read, made whether or not the call would have had to wait, so that a
//! misplaced call fails in the first test that makes it rather than under load.
//!
//! Without the feature there is no check (the core does not depend on tokio then).

/// Panics if the calling thread is a worker of a tokio runtime (feature `tokio`): `call` is
/// the blocking call, `instead` its async form (empty if it has none).
#[inline]
#[track_caller]
pub(crate) fn refuse_on_runtime(call: &'static str, instead: &'static str) {
    #[cfg(all(feature = "tokio", not(loom)))]
    if tokio::runtime::worker_index().is_some() {
        refused(call, instead);
    }
    #[cfg(not(all(feature = "tokio", not(loom))))]
    let _ = (call, instead);
}

#[cfg(all(feature = "tokio", not(loom)))]
#[cold]
#[inline(never)]
#[track_caller]
fn refused(call: &'static str, instead: &'static str) -> ! {
    let instead = if instead.is_empty() {
        String::new()
    } else {
        format!("use `{instead}` instead, or ")
    };
    panic!(
        "zerodispatch: `{call}` blocks its thread, and was called on a tokio runtime's worker \
         thread, where it would stall every task of that worker; {instead}make the call in \
         `tokio::task::spawn_blocking`"
    )
}
