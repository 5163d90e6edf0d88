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

std::thread_local! {
    /// Depth of [`allow_blocking`] on this thread.
    static ALLOWED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether a blocking call of the dispatcher may be made on this thread: `false` on a
/// tokio runtime's worker thread (with the feature `tokio`), outside [`allow_blocking`].
/// For a library on the dispatcher that must decide whether to wait (a `close` that waits
/// for outcomes, say): a thread-local read.
#[must_use]
#[inline]
pub fn may_block() -> bool {
    #[cfg(all(feature = "tokio", not(loom)))]
    {
        ALLOWED.with(std::cell::Cell::get) > 0 || tokio::runtime::worker_index().is_none()
    }
    #[cfg(not(all(feature = "tokio", not(loom))))]
    {
        true
    }
}

/// Runs `f` with the check of blocking calls off on this thread: for code that must block
/// where it runs and bounds how long, as a `Drop` that has to hand an event on (a drop
/// cannot be async). The check comes back when `f` returns or unwinds.
///
/// ```
/// # use zerodispatch_core::*;
/// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
/// let queue = d.processors(ClientType::Queue)[0];
/// // Allowed anywhere, a tokio worker included (where it stalls that worker meanwhile).
/// allow_blocking(|| d.synchronize(queue))?;
/// assert!(may_block());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn allow_blocking<R>(f: impl FnOnce() -> R) -> R {
    struct Allowed;
    impl Drop for Allowed {
        fn drop(&mut self) {
            ALLOWED.with(|a| a.set(a.get() - 1));
        }
    }
    ALLOWED.with(|a| a.set(a.get() + 1));
    let _allowed = Allowed;
    f()
}

/// Panics, naming `instead`, if a blocking call (`call`, by its name) may not be made on
/// this thread ([`may_block`]): the check every blocking call of the dispatcher makes, for
/// a library's own blocking calls on top of it to make too.
///
/// # Panics
///
/// On a tokio runtime's worker thread (feature `tokio`), outside [`allow_blocking`].
#[inline]
#[track_caller]
pub fn assert_may_block(call: &'static str, instead: &'static str) {
    if !may_block() {
        refused(call, instead);
    }
}

/// [`assert_may_block`], inside the crate.
#[inline]
#[track_caller]
pub(crate) fn refuse_on_runtime(call: &'static str, instead: &'static str) {
    assert_may_block(call, instead);
}

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
