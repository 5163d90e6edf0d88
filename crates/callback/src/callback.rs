//! [`Callback`]: a type-erased `FnOnce() + Send + 'static` kept in a fixed inline buffer,
//! and [`InlineCallbackWith`], its form that is handed a target and a context when it runs.
//!
//! # Contract
//!
//! * [`InlineCallback::new`] never allocates. A closure that does not fit the space `S` in size
//!   or in alignment is a compile error naming the problem, not a silent move to the heap.
//!   The check is an inline `const` block, which stable Rust evaluates when it generates
//!   code: `cargo build` (and `cargo test`) reject such a closure, `cargo check` and an IDE
//!   do not (why: the crate's docs, "When the size check runs").
//! * [`InlineCallback::spill`] is the one way to store a closure that does not fit: it boxes the
//!   closure (one allocation, one free) and [`InlineCallback::is_inline`] then returns `false`.
//! * [`InlineCallback::call`] runs the closure exactly once, consuming the callback. If the
//!   closure panics, its captures are dropped exactly once while unwinding.
//! * A callback dropped without being called drops the closure's captures exactly once.
//! * A callback is `Send` (its closure must be) and `Sync` whatever its closure captures:
//!   a shared `&Callback` answers [`InlineCallback::is_inline`] and `Debug` only, which
//!   never touch the closure (the argument is beside the `unsafe impl Sync`). So an error
//!   that hands a callback back (`DispatchError<Event<M>>`) is `Send + Sync` and goes into
//!   `anyhow::Error` or `Box<dyn Error + Send + Sync>` with `?`.
//! * All of this holds for [`InlineCallbackWith`] too; [`InlineCallback`] is an
//!   `InlineCallbackWith<(), (), S>` whose closure ignores the two `()` it is handed, so
//!   there is one storage mechanism and one `unsafe` call path for both.
//!
//! # How it is stored
//!
//! [`Callback`] is [`InlineCallback`] in the default space.
//!
//! The closure `F` is stored by value in a `smallbox::SmallBox<dyn Invoke<T, C>, S>`, which keeps
//! the value in its space `S` beside a 16-byte trait-object pointer (smallbox's marker for
//! "inline" plus the vtable). `Invoke` is implemented for the closure's wrapper: calling it
//! moves the closure out of the buffer and runs it, after which the buffer is forgotten
//! rather than dropped. Because a `Callback`'s box is inline by construction (checked at
//! compile time; `spill` stores a thin `Box<F>` inline), forgetting it frees nothing.
//!
//! A common alternative stores `Option<F>` and `take()`s it on call. It costs a tag that
//! can grow the closure by up to its alignment (8 bytes for most closures) and a branch on
//! every call; moving out and forgetting needs neither.

use core::fmt;
use core::mem::{self, ManuallyDrop};
use core::ptr;

use smallbox::SmallBox;

use crate::fit::Fit;
use crate::space::DefaultSpace;

/// A closure that can be run once, in place, out of the storage that holds it, handed a
/// target `&mut T` and a context `&mut C` (both `()` for a plain [`InlineCallback`]).
trait Invoke<T: ?Sized, C: ?Sized>: Send {
    /// Moves the closure out of `*self` and runs it on `target` and `context`.
    ///
    /// # Safety
    ///
    /// `*self` must be initialised. After this call returns or unwinds, `*self` is moved
    /// out: the caller must neither use nor drop it again (it forgets the storage).
    unsafe fn invoke_in_place(&mut self, target: &mut T, context: &mut C);

    /// Whether the closure lives on the heap (see [`InlineCallbackWith::spill`]).
    fn is_spilled(&self) -> bool;
}

/// A closure stored in the callback's space: by value (`SPILLED` false), or boxed by
/// [`InlineCallbackWith::spill`] (`SPILLED` true: the thin `Box` is what sits in the
/// space). One implementation of [`Invoke`] serves both: a `Box` of a closure is a closure.
#[repr(transparent)]
struct Stored<F, const SPILLED: bool>(F);

impl<T, C, F, const SPILLED: bool> Invoke<T, C> for Stored<F, SPILLED>
where
    T: ?Sized,
    C: ?Sized,
    F: FnOnce(&mut T, &mut C) + Send,
{
    #[inline]
    unsafe fn invoke_in_place(&mut self, target: &mut T, context: &mut C) {
        // SAFETY: the caller guarantees `self.0` is initialised and is never used or dropped
        // after this call, so this read makes `f` the closure's only owner. If `f()`
        // unwinds, `f` (already consumed by the call) drops its captures once; a spilled
        // closure's `Box`, read here too, frees it once, after the call or while unwinding.
        let f = unsafe { ptr::read(&self.0) };
        f(target, context)
    }

    #[inline]
    fn is_spilled(&self) -> bool {
        SPILLED
    }
}

/// A type-erased `FnOnce() + Send + 'static`, stored inline in the [`DefaultSpace`]
/// (32 bytes, aligned to 8): the callback type almost everyone wants. See
/// [`InlineCallback`] for the API and for other spaces.
pub type Callback = InlineCallback<DefaultSpace>;

/// A type-erased `FnOnce() + Send + 'static`, stored inline in a space `S`.
///
/// Most code names it through the [`Callback`] alias (the default space); a different
/// space is a type away: `InlineCallback::<Align8<64>>::new(f)`, or an alias of your own.
///
/// `size_of::<Callback>()` is 48 bytes on 64-bit targets: the 32-byte space and smallbox's
/// 16-byte trait-object pointer. In general it is `size_of::<S>()` plus two pointers,
/// rounded up to the alignment of `S`.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use zerodispatch_callback::Callback;
///
/// static CONFIRMED: AtomicU64 = AtomicU64::new(0);
///
/// let (queue, guid, sub_queue) = (7_u32, [0xab_u8; 16], 1_u32);
/// let confirm = Callback::new(move || {
///     assert_eq!((queue, guid[0], sub_queue), (7, 0xab, 1));
///     CONFIRMED.fetch_add(1, Ordering::Relaxed);
/// });
/// assert!(confirm.is_inline());
///
/// // Callbacks are `Send`: run it on another thread.
/// std::thread::spawn(move || confirm.call()).join().unwrap();
/// assert_eq!(CONFIRMED.load(Ordering::Relaxed), 1);
/// ```
///
/// A closure larger than the space does not build (a post-monomorphization error: `cargo
/// check` accepts it, see [when the size check runs](crate#when-the-size-check-runs)):
///
/// ```compile_fail
/// use zerodispatch_callback::Callback;
/// let big = [0_u8; 64];
/// let cb = Callback::new(move || assert_eq!(big[0], 0)); // error: does not fit the inline space
/// ```
pub struct InlineCallback<S> {
    /// The closure, as a callback with nothing to be handed.
    inner: InlineCallbackWith<(), (), S>,
}

impl<S> InlineCallback<S> {
    /// Whether a closure of type `F` fits the space `S`, that is, whether
    /// [`InlineCallback::new`] accepts it.
    #[must_use]
    pub const fn fits<F>() -> bool {
        InlineCallbackWith::<(), (), S>::fits::<F>()
    }

    /// Whether the closure `f` fits the space `S`: [`InlineCallback::fits`] for a closure
    /// whose type cannot be named.
    #[must_use]
    pub const fn fits_closure<F>(_f: &F) -> bool {
        Self::fits::<F>()
    }

    /// Stores `f` inline. Never allocates.
    ///
    /// # Compile errors
    ///
    /// Fails to compile if `f` is larger than the space `S` or more aligned than it, with a
    /// message that gives both sizes (or alignments) and the space that would hold `f`: at
    /// `cargo build`, not at `cargo check`
    /// ([why](crate#when-the-size-check-runs)). Capture less (a handle or an index rather than the data),
    /// pick a larger space (`InlineCallback<Align8<64>>`, `InlineCallback<Align16<32>>`), or, for a
    /// rare large closure, use [`InlineCallback::spill`].
    #[inline]
    pub fn new<F>(f: F) -> Self
    where
        F: FnOnce() + Send + 'static,
    {
        // Checked here, so that the compile error names the caller's closure rather than
        // the adapter; the adapter captures `f` alone (same size and alignment).
        let () = Fit::<F, S>::CALLBACK;
        Self {
            inner: InlineCallbackWith::from_invoke(Stored::<_, false>(
                move |_: &mut (), _: &mut ()| f(),
            )),
        }
    }

    /// Stores `f` on the heap: the escape hatch for a closure that does not fit the space.
    ///
    /// This allocates once here and frees once when the callback is called or dropped,
    /// possibly on another thread. [`InlineCallback::is_inline`] returns `false`, and a
    /// dispatcher counts such callbacks in its stats, so that a spill on a hot path shows.
    ///
    /// # Compile errors
    ///
    /// Fails to compile if the space is too small for a pointer (fewer than 8 bytes on a
    /// 64-bit target).
    pub fn spill<F>(f: F) -> Self
    where
        F: FnOnce() + Send + 'static,
    {
        Self {
            inner: InlineCallbackWith::spill(move |_: &mut (), _: &mut ()| f()),
        }
    }

    /// Stores `f` inline if it fits the space, and spills it to the heap otherwise.
    ///
    /// For generic code that cannot know the closure's size; prefer [`InlineCallback::new`],
    /// which turns a closure that would allocate into a compile error (at `cargo build`).
    pub fn new_or_spill<F>(f: F) -> Self
    where
        F: FnOnce() + Send + 'static,
    {
        Self {
            inner: InlineCallbackWith::new_or_spill(move |_: &mut (), _: &mut ()| f()),
        }
    }

    /// Runs the closure, exactly once.
    ///
    /// If the closure panics, the panic propagates to the caller after the closure's
    /// captures have been dropped (once). A spilled closure's box is freed here.
    #[inline]
    pub fn call(self) {
        self.inner.call(&mut (), &mut ());
    }

    /// `true` if the closure is stored inline, `false` if it was spilled to the heap by
    /// [`InlineCallback::spill`] or [`InlineCallback::new_or_spill`].
    #[inline]
    #[must_use]
    pub fn is_inline(&self) -> bool {
        self.inner.is_inline()
    }
}

impl<S> fmt::Debug for InlineCallback<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback")
            .field("inline", &self.is_inline())
            .field("space_bytes", &mem::size_of::<S>())
            .finish_non_exhaustive()
    }
}

/// A type-erased `FnOnce(&mut T, &mut C) + Send + 'static`, stored inline in a space `S`:
/// a callback handed, when it runs, the object it was sent to (`T`) and a context (`C`).
///
/// This is what lets a callback reach its target without the target living in a global or
/// thread-local registry: the code that runs callbacks owns the target and lends it to
/// each one. `T` and `C` may be unsized (`dyn Any`, a trait object). Everything else is as
/// for [`InlineCallback`] (which is this type with nothing to be handed): never
/// allocates, a closure that does not fit is a compile error (at `cargo build`: [when the
/// size check runs](crate#when-the-size-check-runs)), runs exactly once, drops its
/// captures exactly once. Its size is that of the plain callback in the same space.
///
/// # Examples
///
/// ```
/// use zerodispatch_callback::{DefaultSpace, InlineCallbackWith};
///
/// struct Queue { confirmed: Vec<[u8; 16]> }
///
/// let guid = [7_u8; 16];
/// let confirm: InlineCallbackWith<Queue, u64, DefaultSpace> =
///     InlineCallbackWith::new(move |queue: &mut Queue, confirms: &mut u64| {
///         queue.confirmed.push(guid);
///         *confirms += 1;
///     });
///
/// let (mut queue, mut confirms) = (Queue { confirmed: Vec::new() }, 0_u64);
/// confirm.call(&mut queue, &mut confirms);
/// assert_eq!((queue.confirmed[0], confirms), (guid, 1));
/// ```
pub struct InlineCallbackWith<T: ?Sized, C: ?Sized, S = DefaultSpace> {
    /// The closure. Invariant: never on the heap (`!body.is_heap()`), so that forgetting
    /// it after `invoke_in_place` frees nothing.
    body: SmallBox<dyn Invoke<T, C>, S>,
}

impl<T: ?Sized, C: ?Sized, S> InlineCallbackWith<T, C, S> {
    /// Whether a closure of type `F` fits the space `S`, that is, whether
    /// [`InlineCallbackWith::new`] accepts it.
    #[must_use]
    pub const fn fits<F>() -> bool {
        Fit::<F, S>::FITS
    }

    /// Stores `f` inline. Never allocates.
    ///
    /// # Compile errors
    ///
    /// As [`InlineCallback::new`]: fails to compile if `f` is larger or more aligned than
    /// the space `S` (at `cargo build`, not at `cargo check`).
    #[inline]
    pub fn new<F>(f: F) -> Self
    where
        F: FnOnce(&mut T, &mut C) + Send + 'static,
    {
        let () = Fit::<F, S>::CALLBACK_WITH;
        Self::from_invoke(Stored::<_, false>(f))
    }

    /// Stores `f` on the heap: as [`InlineCallback::spill`] (one allocation, and
    /// [`InlineCallbackWith::is_inline`] returns `false`).
    ///
    /// # Compile errors
    ///
    /// Fails to compile if the space is too small for a pointer.
    pub fn spill<F>(f: F) -> Self
    where
        F: FnOnce(&mut T, &mut C) + Send + 'static,
    {
        const {
            assert!(
                Self::fits::<Stored<Box<F>, true>>(),
                "zerodispatch: the Callback's inline space cannot hold even a pointer"
            );
        }
        Self::from_invoke(Stored::<_, true>(Box::new(f)))
    }

    /// Stores `f` inline if it fits the space, and spills it to the heap otherwise.
    pub fn new_or_spill<F>(f: F) -> Self
    where
        F: FnOnce(&mut T, &mut C) + Send + 'static,
    {
        if Self::fits::<F>() {
            Self::from_invoke(Stored::<_, false>(f))
        } else {
            Self::spill(f)
        }
    }

    #[inline]
    fn from_invoke<I: Invoke<T, C> + 'static>(body: I) -> Self {
        debug_assert!(Self::fits::<I>());
        let body: SmallBox<dyn Invoke<T, C>, S> = smallbox::smallbox!(body);
        debug_assert!(!body.is_heap(), "a Callback's body must be inline");
        Self { body }
    }

    /// Runs the closure on `target` and `context`, exactly once.
    ///
    /// If the closure panics, the panic propagates to the caller after the closure's
    /// captures have been dropped (once). A spilled closure's box is freed here.
    #[inline]
    pub fn call(self, target: &mut T, context: &mut C) {
        let mut body = ManuallyDrop::new(self.body);
        // SAFETY: `body` holds an initialised closure (nothing has moved it out: `call`
        // takes `self` by value) and, being `ManuallyDrop`, is never dropped; it is not used
        // after this line. Its storage is inline (the invariant of `body`), so forgetting
        // it leaks nothing: the closure and any spilled box are owned by
        // `invoke_in_place` from here on.
        unsafe { body.invoke_in_place(target, context) }
    }

    /// `true` if the closure is stored inline, `false` if it was spilled to the heap.
    #[inline]
    #[must_use]
    pub fn is_inline(&self) -> bool {
        !self.body.is_spilled()
    }
}

// SAFETY: `Sync` lets `&InlineCallbackWith` (and so `&InlineCallback`, `&Callback`) be
// shared between threads, and it is sound for every closure, `Sync` or not, because no
// code reachable through a shared reference touches the closure. This module alone grants
// access to it: `body` is private, and `Invoke` is a private trait implemented only by
// `Stored` above. The closure is reached by `invoke_in_place`, which takes
// `&mut self` and is called only from `call`, which owns the callback by value; and by
// `Drop` (smallbox's, on an owned box). The one `&self` path is `is_inline` (and `Debug`,
// which calls it and `size_of::<S>()`): it reads the box's vtable pointer and calls
// `Invoke::is_spilled`, whose one implementation returns a constant (`SPILLED`) without
// reading `self.0`. The spaces (`Align8`, `Align16`) are never read as values. So sharing a
// callback shares nothing of the closure: a `Cell` it captures can only be used by the
// one thread that calls it, after having taken the callback by value (which `Send`
// governs: `Invoke: Send`). Adding a `&self` method that reads the closure would break
// this: such a method needs `F: Sync` and must not exist on this type. Checked under
// Miri by `tests/callback.rs` (`a_shared_callback_never_touches_its_closure`).
unsafe impl<T: ?Sized, C: ?Sized, S> Sync for InlineCallbackWith<T, C, S> {}

impl<T: ?Sized, C: ?Sized, S> fmt::Debug for InlineCallbackWith<T, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InlineCallbackWith")
            .field("inline", &self.is_inline())
            .field("space_bytes", &mem::size_of::<S>())
            .finish_non_exhaustive()
    }
}
