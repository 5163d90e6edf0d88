//! A run: up to `N` events in hand, pushed together by one claim ([`Ring::push_run`]).

use std::fmt;
use std::mem::MaybeUninit;

#[cfg(doc)]
use crate::Ring;

/// Up to `N` events in hand, in order, to be pushed together with
/// [`Ring::push_run`]: one compare-and-swap for all of them.
///
/// A run lives on its producer's stack and never allocates. The events are gathered
/// first, so a push never waits for the code that makes them, and a panic while they are
/// made leaves nothing half-claimed in the ring (the run drops what it holds).
///
/// ```
/// use zerodispatch_ring::{Ring, Run};
///
/// let ring = Ring::new(8);
/// let mut run = Run::<u32, 4>::new();
/// for event in 1..=4 {
///     run.push(event).unwrap();
/// }
/// ring.push_run(&mut run).unwrap();
/// assert!(run.is_empty());
/// let mut consumer = ring.consumer().unwrap();
/// assert_eq!(std::iter::from_fn(|| consumer.pop()).collect::<Vec<_>>(), [1, 2, 3, 4]);
/// ```
pub struct Run<T, const N: usize> {
    /// Events `0..len` are written; the rest are not.
    items: [MaybeUninit<T>; N],
    len: usize,
}

impl<T, const N: usize> Run<T, N> {
    /// An empty run.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            items: [const { MaybeUninit::uninit() }; N],
            len: 0,
        }
    }

    /// Events in the run.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the run holds no event.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the run holds `N` events.
    #[must_use]
    pub const fn is_full(&self) -> bool {
        self.len == N
    }

    /// Adds `value` after the others; hands it back if the run holds `N` already.
    ///
    /// # Errors
    ///
    /// `Err(value)` when the run is full.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        if self.len == N {
            return Err(value);
        }
        self.items[self.len].write(value);
        self.len += 1;
        Ok(())
    }

    /// Moves every event out, in order, into `write(i, event)`, and leaves the run empty.
    pub(crate) fn drain_into(&mut self, mut write: impl FnMut(usize, T)) {
        let len = self.len;
        // Empty first: should `write` unwind, the events not yet moved leak, never drop twice.
        self.len = 0;
        for (i, item) in self.items[..len].iter().enumerate() {
            // SAFETY: items `0..len` were written by `push` and not moved out since (`len`
            // was cut to 0 above, so none is read again).
            write(i, unsafe { item.assume_init_read() });
        }
    }
}

impl<T, const N: usize> Default for Run<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> Drop for Run<T, N> {
    fn drop(&mut self) {
        self.drain_into(|_, event| drop(event));
    }
}

impl<T, const N: usize> fmt::Debug for Run<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("len", &self.len)
            .field("capacity", &N)
            .finish()
    }
}
