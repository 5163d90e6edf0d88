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
