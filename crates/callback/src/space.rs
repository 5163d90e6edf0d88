//! Inline spaces: the fixed buffers a [`Callback`](crate::Callback) stores its closure in.
//!
//! A space is only a size and an alignment; its bytes are never read as a space. A closure
//! fits a space when its size is at most the space's size *and* its alignment is at most
//! the space's alignment. Both are checked at compile time by
//! [`Callback::new`](crate::InlineCallback::new).
//!
//! `N` is in bytes and is the same on every target (unlike `smallbox::space::S4`, which is
//! four `usize`s: 16 bytes on a 32-bit target, 32 on a 64-bit one).

use core::mem::MaybeUninit;

/// `N` bytes aligned to 8: room for any closure of at most `N` bytes whose captures are
/// aligned to 8 or less (integers, pointers, `Arc`s, byte arrays).
#[repr(C, align(8))]
pub struct Align8<const N: usize>([MaybeUninit<u8>; N]);

/// `N` bytes aligned to 16: for closures that capture a `u128` on targets where it is
/// 16-aligned, SIMD values, or types marked `#[repr(align(16))]`.
#[repr(C, align(16))]
pub struct Align16<const N: usize>([MaybeUninit<u8>; N]);

/// The space [`Callback`](crate::Callback) uses unless told otherwise: 32 bytes, aligned to 8.
///
/// Why 32: a broker's confirm functor carries a queue handle (4-8 bytes), a 16-byte message
/// GUID and a sub-queue id (4 bytes): 24-28 bytes, leaving room for one more word. With the
/// 16-byte trait-object pointer that smallbox keeps beside its space, a `Callback` is then
/// 48 bytes, and a dispatcher event made of a `Callback`, a client handle and an enum tag is
/// 56 bytes: with the 8-byte stamp of a `crossbeam_queue::ArrayQueue` slot, a 64-byte slot
/// per queued event. That is a cache line's size, not a cache line: a slot sits on one line
/// only if the queue's buffer starts on a 64-byte boundary, and `ArrayQueue` allocates it
/// with its slot's alignment, 8, so wherever the allocator does not happen to return a
/// 64-aligned buffer every slot straddles two lines (`docs/benchmarks.md`, "Where the hop
/// goes"). Measurements on a 2-core VM (see `docs/benchmarks.md`) show that the size of the
/// queued item, not the callback mechanism, decides the cost of a cross-thread hop once no
/// allocation is involved; a 48-byte space would make each slot 80 bytes, for every event
/// including the small ones.
///
/// Why align 8: every capture a confirm functor needs is aligned to 8 or less, and a
/// 16-aligned space would pad the event (and its queue slot) to a multiple of 16.
pub type DefaultSpace = Align8<32>;
