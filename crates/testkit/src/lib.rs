//! Test support shared by the zerodispatch crates.
//!
//! * [`within`]: a watchdog that fails a test which used to hang, instead of stalling CI.
//! * [`quiet_planned_panics`]: a panic hook that keeps the report of every panic but the
//!   ones a fault test plans (and the processors catch and count).
//! * [`proof_main`]: the `main` of a zero-allocation proof that runs without libtest.
//!
//! [`CountingAllocator`] proves "no allocation per event": a test binary installs it as its
//! `#[global_allocator]`, warms up, reads [`CountingAllocator::allocations`], runs the
//! events, and asserts the difference is exactly zero. It counts on every thread, so the
//! processors' and producers' allocations are seen too.
//!
//! ```
//! use zerodispatch_testkit::CountingAllocator;
//!
//! #[global_allocator]
//! static GLOBAL: CountingAllocator = CountingAllocator;
//!
//! fn main() {
//!     let before = CountingAllocator::allocations();
//!     let on_the_stack = [1_u64; 4];
//!     assert_eq!(CountingAllocator::allocations() - before, 0);
//!     let on_the_heap = vec![on_the_stack];
//!     assert!(CountingAllocator::allocations() - before >= 1);
//!     drop(on_the_heap);
//! }
//! ```

mod proof_main;

pub use proof_main::proof_main;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

/// Runs `f` on a thread of its own and returns its result; fails the test if it has not
/// finished after `limit` (the thread is left behind: the test binary exits without it).
/// A panic in `f` is the test's own panic.
///
/// ```no_run
/// use std::time::Duration;
/// let sum = zerodispatch_testkit::within(Duration::from_secs(10), "adding", || 2 + 2);
/// assert_eq!(sum, 4);
/// ```
///
/// # Panics
///
/// When `f` panics, or runs longer than `limit`.
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            worker.join().expect("the worker finished");
            v
        }
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it ends"),
        },
        Err(RecvTimeoutError::Timeout) => panic!("{what}: still running after {limit:?} (a hang)"),
    }
}

/// Installs a panic hook that reports every panic as the default hook does, except those
/// whose message starts with `planned panic`: the faults a test injects, which the code
/// under test catches and counts.
pub fn quiet_planned_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("");
        if !message.starts_with("planned panic") {
            report(info);
        }
    }));
}

/// Allocations (including reallocations) made through a [`CountingAllocator`], on all
/// threads.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting every allocation and reallocation on every thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct CountingAllocator;

impl CountingAllocator {
    /// Allocations and reallocations so far, on all threads.
    #[must_use]
    pub fn allocations() -> u64 {
        // SeqCst: a test reads the count before and after a run on another thread's
        // behalf; the run's own synchronisation orders its allocations before the read.
        ALLOCATIONS.load(Ordering::SeqCst)
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees are ours; the counter has no effect on the memory returned.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` and `layout` come from this allocator, hence from `System`, and the
        // caller upholds `GlobalAlloc::realloc`'s contract for `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, hence from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}
