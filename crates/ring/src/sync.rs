//! The primitives the ring is built on, swapped for `loom`'s under `--cfg loom` so that the
//! model checker explores every interleaving of the real code.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A cell whose contents one thread at a time may touch, as the slot's stamp decides.
#[derive(Debug)]
pub(crate) struct Cell<T>(
    #[cfg(not(loom))] std::cell::UnsafeCell<T>,
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
);

impl<T> Cell<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(loom))]
        return Self(std::cell::UnsafeCell::new(value));
        #[cfg(loom)]
        return Self(loom::cell::UnsafeCell::new(value));
    }

    /// Runs `f` on a pointer to the contents; the caller's protocol says no other thread
    /// touches them meanwhile (loom checks that it does not).
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with_mut(f);
    }
}

/// One turn of a wait for another thread's write: crossbeam's spin (growing to a yield),
/// or under loom a yield, which lets the model checker run the thread waited for.
#[inline]
pub(crate) fn snooze(backoff: &crossbeam_utils::Backoff) {
    #[cfg(not(loom))]
    backoff.snooze();
    #[cfg(loom)]
    {
        let _ = backoff;
        loom::thread::yield_now();
    }
}

/// One turn of a retry after losing a race to another producer: crossbeam's spin (never a
/// yield), or under loom a yield.
#[inline]
pub(crate) fn spin(backoff: &crossbeam_utils::Backoff) {
    #[cfg(not(loom))]
    backoff.spin();
    #[cfg(loom)]
    {
        let _ = backoff;
        loom::thread::yield_now();
    }
}
