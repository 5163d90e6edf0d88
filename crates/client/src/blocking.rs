//! The client's blocking calls refused on a tokio runtime's worker thread, where they would
//! stall every task of the worker (the connection's own tasks among them, which are what
//! makes the room a blocked `send_blocking` waits for): they panic, naming the async form,
//! as tokio's own `blocking_send` does. A thread of `tokio::task::spawn_blocking`, or any
//! thread outside the runtime, may block.
//!
//! What counts as a worker is what `tokio::runtime::worker_index` says: the threads of a
//! multi-thread runtime that run its tasks, and the thread driving a current-thread
//! runtime. The thread that waits in a multi-thread runtime's `block_on` (the body of
//! `#[tokio::main]`) is not one of them and is not refused, unlike tokio's own check:
//! tokio's public API does not tell it apart from a `spawn_blocking` thread, and refusing
//! those would refuse the very place blocking calls belong.

/// Panics if the calling thread is a worker of a tokio runtime: `call` is the blocking
/// call, `instead` its async form.
#[track_caller]
pub(crate) fn refuse_on_runtime(call: &'static str, instead: &'static str) {
    if tokio::runtime::worker_index().is_some() {
        panic!(
            "zerodispatch-client: `{call}` blocks its thread, and was called on a tokio \
             runtime's worker thread, where it would stall every task of that worker; use \
             `{instead}` instead, or make the call in `tokio::task::spawn_blocking`"
        );
    }
}
