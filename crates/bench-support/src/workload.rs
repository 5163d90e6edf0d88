//! The confirm-shaped work that the benches and the `compare` example run, so that every
//! variant does the same work and differences measure the mechanism that carries it.
//!
//! A broker's confirm names a queue, a 16-byte message GUID and a sub-queue. The handler
//! checks a few fields and counts the confirm; it is `#[inline(never)]` so that no variant
//! can have its work folded away or specialised by the optimiser.

use std::sync::atomic::{AtomicU64, Ordering};

/// The queues a confirm can name (the GUID's low word picks one).
pub const QUEUES: u64 = 8;

/// A confirm: 24 bytes, the captures of a confirm functor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirm {
    /// The queue the confirmed message belongs to.
    pub queue: u32,
    /// The confirmed message's GUID.
    pub guid: [u8; 16],
    /// The consumer's sub-queue (app) id.
    pub sub_queue: u32,
}

impl Confirm {
    /// The confirm of the message with sequence number `seq`.
    #[inline]
    #[must_use]
    pub fn for_seq(seq: u64) -> Self {
        let mut guid = [0_u8; 16];
        guid[..8].copy_from_slice(&seq.to_le_bytes());
        guid[8..].copy_from_slice(&GUID_TAG.to_le_bytes());
        Self {
            queue: (seq % QUEUES) as u32,
            guid,
            sub_queue: (seq % 3) as u32,
        }
    }
}

/// The high word of every GUID this workload makes.
const GUID_TAG: u64 = 0x5a5a_0000_0000_0001;

static CONFIRMED: AtomicU64 = AtomicU64::new(0);
static REJECTED: AtomicU64 = AtomicU64::new(0);

/// Handles one confirm: checks that the GUID names the queue and carries the tag, and
/// counts it as confirmed or rejected.
///
/// The counters are updated with a relaxed load and store, not a read-modify-write: the
/// work stays a few plain instructions, and a count lost to a race between two handler
/// threads does not matter to a benchmark.
#[inline(never)]
pub fn handle_confirm(confirm: Confirm) {
    let low = u64::from_le_bytes(confirm.guid[..8].try_into().expect("8 bytes"));
    let high = u64::from_le_bytes(confirm.guid[8..].try_into().expect("8 bytes"));
    let valid =
        high == GUID_TAG && u64::from(confirm.queue) == low % QUEUES && confirm.sub_queue < 3;
    let counter = if valid { &CONFIRMED } else { &REJECTED };
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Rounds of [`handle_confirm_slowly`]'s extra work: about 25-35 ns on this project's
/// 2-core VM (an AMD EPYC at about 3 GHz), which makes a processor that runs it slower per
/// event than a producer that only dispatches (about 15-25 ns per event): the producer
/// outruns it and keeps its queue full. Retune so that `dispatch_outrun`'s `drain_typed`
/// stays well above its `raw_array_queue` producer's cost.
pub const SLOW_ROUNDS: u64 = 24;

/// [`handle_confirm`], then [`SLOW_ROUNDS`] dependent multiply-adds through
/// `black_box` (so that none is folded away): the confirm work of a processor slower than
/// its producer (`benches/hop.rs`, `dispatch_outrun`).
#[inline(never)]
pub fn handle_confirm_slowly(confirm: Confirm) {
    handle_confirm(confirm);
    let mut x = u64::from(confirm.queue) | 1;
    for _ in 0..SLOW_ROUNDS {
        x = std::hint::black_box(
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        );
    }
    std::hint::black_box(x);
}

/// A confirm functor that runs [`handle_confirm_slowly`].
#[inline]
pub fn slow_confirm_functor(seq: u64) -> impl FnOnce() + Send + 'static {
    let confirm = Confirm::for_seq(seq);
    move || handle_confirm_slowly(confirm)
}

/// A confirm functor: a closure capturing the confirm of message `seq` (24 bytes) that
/// calls [`handle_confirm`].
#[inline]
pub fn confirm_functor(seq: u64) -> impl FnOnce() + Send + 'static {
    let confirm = Confirm::for_seq(seq);
    move || handle_confirm(confirm)
}

/// Confirms handled so far (valid, rejected), on all threads.
#[must_use]
pub fn handled() -> (u64, u64) {
    (
        CONFIRMED.load(Ordering::Relaxed),
        REJECTED.load(Ordering::Relaxed),
    )
}
