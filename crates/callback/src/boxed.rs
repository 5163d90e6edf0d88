//! [`BoxedCallback`]: the `Box<dyn FnOnce() + Send>` baseline.

use core::fmt;

/// A `Box<dyn FnOnce() + Send>` with the same API as [`Callback`](crate::Callback).
///
/// It allocates on every [`BoxedCallback::new`] (for a closure that captures anything) and
/// frees on call or drop, which on a cross-thread hop means a free on another thread than
/// the allocation. It exists so that the benches, and users in their own code, can compare
/// the two side by side by changing one type.
///
/// # Examples
///
/// ```
/// use zerodispatch_callback::BoxedCallback;
///
/// let guid = [1_u8; 16];
/// let cb = BoxedCallback::new(move || assert_eq!(guid[0], 1));
/// assert!(!cb.is_inline());
/// cb.call();
/// ```
pub struct BoxedCallback(Box<dyn FnOnce() + Send>);

impl BoxedCallback {
    /// Boxes `f`: one allocation unless `f` captures nothing.
    #[inline]
    pub fn new<F>(f: F) -> Self
    where
        F: FnOnce() + Send + 'static,
    {
        Self(Box::new(f))
    }

    /// Runs the closure, exactly once, and frees its box.
    #[inline]
    pub fn call(self) {
        (self.0)()
    }

    /// Always `false`: the closure is on the heap.
    #[inline]
    #[must_use]
    pub fn is_inline(&self) -> bool {
        false
    }
}

impl fmt::Debug for BoxedCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoxedCallback").finish_non_exhaustive()
    }
}
