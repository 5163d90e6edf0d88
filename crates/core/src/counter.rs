//! Counters with one writer: the figures a processor thread keeps about itself and the
//! clients it owns, read by anyone at any time.
//!
//! The writer updates them with a relaxed load and a store rather than a read-modify-write
//! (no locked instruction on the event path); a reader sees a value the writer stored.
//! Keep each writer's counters together, on cache lines of their own
//! (`crossbeam_utils::CachePadded`), so that counting never makes two threads share a
//! line. The dispatcher's processor statistics use them, and so do crates built on the
//! dispatcher (the broker's queue and session counters).

use std::sync::atomic::{AtomicU64, Ordering};

/// A count that only grows, with a single writer.
///
/// ```
/// use zerodispatch_core::counter::Counter;
///
/// let confirms = Counter::default();
/// confirms.add(3);
/// confirms.add(1);
/// assert_eq!(confirms.get(), 4);
/// ```
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning thread calls this: two writers would lose counts.
    #[inline]
    pub fn add(&self, n: u64) {
        // Relaxed load and store, not fetch_add: this thread is the only writer.
        self.0
            .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Adds `n` from a thread other than the owner: a read-modify-write, for the rare
    /// count another thread keeps about the owner (the monitor's stuck reports).
    pub fn add_shared(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// [`add`](Self::add) with a release store, for a counter read with
    /// [`get_acquire`](Self::get_acquire) to bound another value read after it.
    #[inline]
    pub fn add_release(&self, n: u64) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + n, Ordering::Release);
    }

    /// Raises the value to `n` if `n` is larger (a high-water mark). Owner only.
    #[inline]
    pub fn max(&self, n: u64) {
        if n > self.0.load(Ordering::Relaxed) {
            self.0.store(n, Ordering::Relaxed);
        }
    }

    /// The value (relaxed: a figure, nothing is published through it).
    #[inline]
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// The value, read with acquire: whatever the writer did before an
    /// [`add_release`](Self::add_release) that stored it is visible.
    #[must_use]
    pub fn get_acquire(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// A live count that goes up and down, with a single writer: a reader sees one value the
/// writer stored, never a figure made of two counters read at different times.
///
/// ```
/// use zerodispatch_core::counter::Gauge;
///
/// let held = Gauge::default();
/// held.up();
/// held.up();
/// held.down();
/// assert_eq!(held.get(), 1);
/// ```
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// One more. Owner only.
    #[inline]
    pub fn up(&self) {
        // Load and store rather than a read-modify-write: this thread is the only writer.
        self.0
            .store(self.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// One fewer. Owner only.
    ///
    /// # Panics
    ///
    /// In debug builds, below zero (more downs than ups: a bug of the writer).
    #[inline]
    pub fn down(&self) {
        let now = self.0.load(Ordering::Relaxed);
        debug_assert!(now > 0, "a gauge taken below zero");
        self.0.store(now.saturating_sub(1), Ordering::Relaxed);
    }

    /// The value now.
    #[inline]
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
