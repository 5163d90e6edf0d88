//! Test support for zerodispatch and its users: proving that a path allocates nothing.
//!
//! * [`CountingAllocator`], [`assert_no_alloc`], [`allocations_during`]: the proof that a
//!   path allocates nothing, on any thread (the facade re-exports them as
//!   `zerodispatch::testing`, with the feature `testing`).
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

/// Runs `f` and returns its result with the allocations (and reallocations) made while it
/// ran, on every thread of the process. Needs [`CountingAllocator`] as the binary's
/// `#[global_allocator]`.
///
/// Before `f`, one probe allocation checks that the allocator is installed (otherwise every
/// count would be a false zero); it is taken back out of the process's count, so that an
/// enclosing `allocations_during` (or [`assert_no_alloc`]) does not count it.
///
/// # Panics
///
/// If the binary's global allocator is not a [`CountingAllocator`].
#[track_caller]
pub fn allocations_during<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = CountingAllocator::allocations();
    drop(std::hint::black_box(Box::new(0_u64)));
    assert!(
        CountingAllocator::allocations() > before,
        "zerodispatch-testkit: CountingAllocator is not this binary's #[global_allocator]: \
         add `#[global_allocator] static GLOBAL: CountingAllocator = CountingAllocator;`"
    );
    // The probe was exactly one counted allocation: uncount it.
    ALLOCATIONS.fetch_sub(1, Ordering::SeqCst);
    let start = CountingAllocator::allocations();
    let result = f();
    (result, CountingAllocator::allocations() - start)
}

/// Runs `f` once, as it is, and returns its result, panicking if anything allocated while
/// it ran, on any thread. Needs [`CountingAllocator`] as the binary's `#[global_allocator]`.
///
/// It does no warm-up: what `f` allocates on a first run (a table's first use, a thread's
/// first call, a lazy initialisation) fails it. Warm up before the call (run the path once,
/// preallocate), as the example does. Its probe is not counted by an enclosing
/// [`allocations_during`].
///
/// The count is the process's, so run the proof where nothing else allocates meanwhile: in
/// a test binary of its own, with `harness = false` and [`proof_main`] (libtest's main
/// thread allocates a warning for a test that runs over 60 s, and runs other tests on
/// other threads).
///
/// ```
/// use zerodispatch_testkit::{CountingAllocator, assert_no_alloc};
///
/// #[global_allocator]
/// static GLOBAL: CountingAllocator = CountingAllocator;
///
/// fn main() {
///     let mut ring = Vec::with_capacity(64); // the warm-up, before the call: allocated once
///     let sum = assert_no_alloc(|| {
///         for i in 0..64_u64 {
///             ring.push(i); // within its capacity: no allocation
///         }
///         ring.iter().sum::<u64>()
///     });
///     assert_eq!(sum, 2016);
///     let grew = std::panic::catch_unwind(move || assert_no_alloc(|| ring.push(64)));
///     assert!(grew.is_err(), "a push past the capacity allocates");
/// }
/// ```
///
/// # Panics
///
/// If `f` allocated, or if the allocator is not installed ([`allocations_during`]).
#[track_caller]
pub fn assert_no_alloc<R>(f: impl FnOnce() -> R) -> R {
    let (result, allocations) = allocations_during(f);
    assert_eq!(
        allocations, 0,
        "{allocations} allocation(s) where none was allowed"
    );
    result
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
