//! [`InlineValue`]: a value of any `Send + 'static` type, stored inline, taken back out by
//! its type. What carries a result from one thread to another without a `Box`, when the
//! place that holds it cannot be generic over the result's type (a slot reused by calls of
//! different result types).

use core::any::Any;
use core::fmt;

use smallbox::SmallBox;

use crate::fit::Fit;
use crate::space::DefaultSpace;

/// A type-erased value of at most the space `S` in size and alignment, stored inline:
/// never on the heap.
///
/// ```
/// use zerodispatch_callback::InlineValue;
///
/// let v = InlineValue::<zerodispatch_callback::DefaultSpace>::new((7_u64, [1_u8; 16]));
/// let v = v.take::<String>().unwrap_err(); // the wrong type hands it back
/// assert_eq!(v.take::<(u64, [u8; 16])>().unwrap(), (7, [1; 16]));
/// ```
///
/// A value larger than the space does not build (at `cargo build`, not at `cargo check`:
/// [when the size check runs](crate#when-the-size-check-runs)):
///
/// ```compile_fail
/// use zerodispatch_callback::InlineValue;
/// let v = InlineValue::<zerodispatch_callback::DefaultSpace>::new([0_u8; 64]);
/// ```
pub struct InlineValue<S = DefaultSpace> {
    /// The value. Invariant: never on the heap (`!value.is_heap()`).
    value: SmallBox<dyn Any + Send, S>,
}

impl<S> InlineValue<S> {
    /// Whether a value of type `T` fits the space `S`, that is, whether
    /// [`InlineValue::new`] accepts it.
    #[must_use]
    pub const fn fits<T>() -> bool {
        Fit::<T, S>::FITS
    }

    /// Stores `value` inline. Never allocates.
    ///
    /// # Compile errors
    ///
    /// Fails to compile, with a message saying which, if `T` is larger than the space `S`
    /// or more aligned than it, at `cargo build` ([not at `cargo
    /// check`](crate#when-the-size-check-runs)). Return a handle, an index or a `Box` of your own instead.
    #[inline]
    pub fn new<T: Any + Send>(value: T) -> Self {
        let () = Fit::<T, S>::VALUE;
        let value: SmallBox<dyn Any + Send, S> = smallbox::smallbox!(value);
        debug_assert!(!value.is_heap(), "an InlineValue must be inline");
        Self { value }
    }

    /// Whether the value is a `T`.
    #[must_use]
    pub fn is<T: Any>(&self) -> bool {
        (*self.value).is::<T>()
    }

    /// The value, if it is a `T`; otherwise `self`, unchanged.
    ///
    /// # Errors
    ///
    /// `self` back if the value is not a `T`.
    pub fn take<T: Any>(self) -> Result<T, Self> {
        match self.value.downcast::<T>() {
            Ok(value) => Ok(value.into_inner()),
            Err(value) => Err(Self { value }),
        }
    }
}

impl<S> fmt::Debug for InlineValue<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InlineValue").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A value taken out is the one put in, dropped once; one dropped unread is dropped
    /// once too.
    #[test]
    fn a_value_is_dropped_exactly_once_taken_or_not() {
        let counted = Arc::new(());
        let v = InlineValue::<DefaultSpace>::new(counted.clone());
        assert!(v.is::<Arc<()>>() && !v.is::<u64>());
        let back: Arc<()> = v.take().unwrap();
        assert_eq!(Arc::strong_count(&counted), 2);
        drop(back);
        assert_eq!(Arc::strong_count(&counted), 1);
        drop(InlineValue::<DefaultSpace>::new(counted.clone()));
        assert_eq!(Arc::strong_count(&counted), 1);
        assert!(InlineValue::<DefaultSpace>::fits::<[u64; 4]>());
        assert!(!InlineValue::<DefaultSpace>::fits::<[u64; 5]>());
    }
}
