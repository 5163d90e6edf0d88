//! [`IntoCallback`]: what a call that takes work accepts, a closure or a prepared callback.

use crate::callback::InlineCallback;
use crate::fit::Fit;
use crate::space::DefaultSpace;

/// Work for a call that takes a callback: a closure `FnOnce() + Send + 'static`, stored
/// inline as by [`InlineCallback::new`], or an [`InlineCallback<S>`] already made (a
/// [`Callback`](crate::Callback) in the default space), passed on as it is.
///
/// So a function that takes `impl IntoCallback` is called with a closure, and with a
/// callback prepared earlier (spilled, or kept in an error that handed it back) without
/// wrapping it a second time: the callback is moved, not boxed again or nested in another.
/// Converting a closure never allocates: one that does not fit the space `S` is a compile
/// error, the one [`InlineCallback::new`] gives (at `cargo build`, not at `cargo check`:
/// [when the size check runs](crate#when-the-size-check-runs)).
///
/// ```
/// use zerodispatch_callback::{Callback, IntoCallback};
///
/// fn run(work: impl IntoCallback) {
///     work.into_callback().call();
/// }
///
/// let (tx, rx) = std::sync::mpsc::channel();
/// let again = tx.clone();
/// run(move || tx.send("a closure").unwrap());
/// run(Callback::new(move || again.send("a callback").unwrap()));
/// assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["a closure", "a callback"]);
/// ```
///
/// A closure that does not fit is a compile error. Its note names the call that
/// instantiated the check: the call of `into_callback`, or, in a function that names
/// [`CHECK`](IntoCallback::CHECK) in its body, the call of that function, which is the line
/// a user wrote (every call of the dispatcher that takes work does):
///
/// ```compile_fail
/// # use zerodispatch_callback::IntoCallback;
/// fn run<W: IntoCallback>(work: W) {
///     let () = W::CHECK; // the error's note names the call of `run`
///     work.into_callback().call();
/// }
///
/// let big = [0_u8; 64];
/// run(move || assert_eq!(big[0], 0)); // error: does not fit the inline space
/// ```
///
/// Implemented for every closure and for [`InlineCallback<S>`]; a type of your own may
/// implement it too, to be passed where work is taken.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not work for a callback: neither a closure `FnOnce() + Send + 'static` nor an `InlineCallback<{S}>`",
    label = "expected a closure or a `Callback`",
    note = "a closure that returns a value is not a callback: run it with `call` to get its value back"
)]
pub trait IntoCallback<S = DefaultSpace> {
    /// The compile-time check that the work fits the space `S`: `()` for a callback (made
    /// already), and for a closure the check of [`InlineCallback::new`], which fails to
    /// compile if it does not fit. [`into_callback`](IntoCallback::into_callback) checks
    /// anyway; a generic function that takes work names it (`let () = W::CHECK;`) so that
    /// the error's note points at its caller's line rather than at its own body.
    const CHECK: () = ();

    /// The callback: the closure stored inline, or the callback itself.
    fn into_callback(self) -> InlineCallback<S>;
}

impl<S, F> IntoCallback<S> for F
where
    F: FnOnce() + Send + 'static,
{
    /// `InlineCallback::new`'s own constant: one error, wherever it is named first.
    const CHECK: () = Fit::<F, S>::CALLBACK;

    #[inline]
    fn into_callback(self) -> InlineCallback<S> {
        let () = <Self as IntoCallback<S>>::CHECK;
        InlineCallback::new(self)
    }
}

impl<S> IntoCallback<S> for InlineCallback<S> {
    #[inline]
    fn into_callback(self) -> InlineCallback<S> {
        self
    }
}
