//! [`Outbound`]: what the broker's processors hand one connection (outcomes of its
//! producers' messages, deliveries to its consumers, and word that a session is gone), in a
//! bounded lock-free queue that grows with the connection's sessions, with a waker for the
//! connection's task.
//!
//! The processors call the producers' `on_ack` and the consumers' `on_delivery` on their
//! own threads, which must never wait: they push here and wake the task once per batch.
//! The connection sizes the queue, before each open, for what can then be in flight to it
//! (the sum of its producers' `max_unconfirmed`, its consumers' windows, one place per
//! session for its last word) and, before each publish frame, for that frame's outcomes
//! it gives itself; it enforces those bounds, so the queue cannot fill. If it somehow
//! does, the item is counted, never waited for, and the connection closes with `INTERNAL`.
//!
//! # How the queue grows without a lock
//!
//! A silent connection must cost little, so the queue starts at [`FIRST_SEGMENT`] places
//! and grows in segments, each an `ArrayQueue` of its own, up to the capacity the limits
//! allow. Only the connection's task grows it ([`Outbound::reserve`]) and only it pops;
//! processors push. The steps:
//!
//! 1. Pushers push to the newest segment, `current`. To push, a pusher *enters* it:
//!    increments its `writers`, then loads `current` again; if `current` moved meanwhile
//!    it leaves and enters the new one.
//! 2. `reserve` sets up the next segment, larger, then moves `current` to it. Pushers that
//!    entered the old one before still finish their push there.
//! 3. The task pops from the oldest segment it has not retired. It moves past that
//!    segment only when the segment is not `current`, has no writer (`writers` 0, loaded
//!    after `current` moved), and is empty: from then on no push can reach it, since a
//!    pusher entering after that load sees the new `current` and leaves (the entry and
//!    the task's check are a Dekker pair: all four accesses `SeqCst`). A pusher that
//!    leaves a segment no longer `current` wakes the task, which may be waiting for it.
//!
//! So one thread's items come out in the order it pushed them (its later pushes go to the
//! same segment or a newer one, and a segment is popped to its end before the next), which
//! the connection relies on: a session's outcomes come before its word that it is gone.
//! A retired segment stays allocated until the connection ends: the segments grow at
//! least fourfold, so all of them together are at most a third more than the newest.

use std::future::poll_fn;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;

use atomic_waker::AtomicWaker;
use crossbeam_queue::ArrayQueue;
use zerodispatch_broker::Guid;
use zerodispatch_wire::ConfirmStatus;

/// Places in a connection's first segment: 64 (about 3 KiB), enough for the word that its
/// sessions are gone and a few outcomes; a connection that opens a producer or consumer
/// grows the queue for it. Raising it costs every silent connection; lowering it only
/// makes the first growth come sooner.
pub(crate) const FIRST_SEGMENT: usize = 64;

/// Each segment is at least this many times the previous one, so that a queue reaches
/// its largest in few segments (the task scans them in order) and the retired ones add at
/// most a third to it.
const GROWTH: usize = 4;

/// Segments at most: from [`FIRST_SEGMENT`] growing [`GROWTH`]-fold, 12 reach 2^28 places,
/// past the largest queue the limits allow (2^26).
const SEGMENTS: usize = 12;

/// One thing a processor hands a connection. `slot` is the connection's index of the
/// producer or consumer, `generation` which of the sessions that held that index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutItem {
    /// A message's outcome (its payload's references already dropped by `on_ack`).
    Confirm {
        slot: u16,
        generation: u32,
        publish_id: u64,
        status: ConfirmStatus,
    },
    /// A message delivered to a consumer; its bytes are in the payload store at `handle`.
    Deliver {
        slot: u16,
        generation: u32,
        guid: Guid,
        handle: u64,
    },
    /// The producer's session is gone: no outcome of it follows.
    ProducerGone { slot: u16, generation: u32 },
    /// The consumer's session is gone: no delivery to it follows.
    ConsumerGone { slot: u16, generation: u32 },
}

/// One segment of the queue.
#[derive(Debug)]
struct Segment {
    queue: ArrayQueue<OutItem>,
    /// Pushers inside the segment now (step 1 of the module's protocol). Once the segment
    /// is not `current` and this is seen 0, no push reaches the segment any more.
    writers: AtomicUsize,
}

/// A connection's queue of [`OutItem`]s and its task's waker.
#[derive(Debug)]
pub(crate) struct Outbound {
    /// `segments[..=current]` are set, each larger than the one before; the rest unset.
    segments: [OnceLock<Box<Segment>>; SEGMENTS],
    /// The segment pushers push to: the newest. Only the task moves it, forward only,
    /// after setting the segment it moves to.
    current: AtomicUsize,
    /// The oldest segment not retired: where the task pops. Only the task reads or
    /// writes it (an atomic only because `Outbound` is shared).
    oldest: AtomicUsize,
    /// The most places the queue may grow to.
    limit: usize,
    waker: AtomicWaker,
    /// Items that found the queue full (a defect of the sizing): the connection closes.
    overflows: AtomicU64,
}

impl Outbound {
    /// A queue of [`FIRST_SEGMENT`] places (fewer if `limit` is smaller) that may grow to
    /// `limit` places.
    pub(crate) fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        let outbound = Self {
            segments: Default::default(),
            current: AtomicUsize::new(0),
            oldest: AtomicUsize::new(0),
            limit,
            waker: AtomicWaker::new(),
            overflows: AtomicU64::new(0),
        };
        let _ = outbound.segments[0].set(Segment::boxed(FIRST_SEGMENT.min(limit)));
        outbound
    }

    fn segment(&self, at: usize) -> &Segment {
        self.segments[at]
            .get()
            .expect("segments up to `current` are set before `current` reaches them")
    }

    /// Places in the newest segment: what can wait in the queue at once, whatever the
    /// retired segments still hold.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.segment(self.current.load(Ordering::Relaxed))
            .queue
            .capacity()
    }

    /// Grows the queue, if need be, so that `places` items (at most its limit) can wait in
    /// it at once. Allocates only when it grows. Call only from the connection's task.
    pub(crate) fn reserve(&self, places: usize) {
        let places = places.min(self.limit);
        // Only this task writes `current`.
        let at = self.current.load(Ordering::Relaxed);
        let capacity = self.segment(at).queue.capacity();
        if places <= capacity || at + 1 == SEGMENTS {
            return;
        }
        let grown = places
            .max(capacity.saturating_mul(GROWTH))
            .next_power_of_two()
            .min(self.limit);
        let _ = self.segments[at + 1].set(Segment::boxed(grown));
        // SeqCst: the task's half of the Dekker pair (the module's step 3); its store also
        // publishes the segment set just before.
        self.current.store(at + 1, Ordering::SeqCst);
    }

    /// Pushes `item` without waking the task (call [`wake`](Self::wake) once the batch is
    /// in). Never waits: a full queue counts the item and hands it back.
    pub(crate) fn push(&self, item: OutItem) -> Result<(), OutItem> {
        let mut pusher = self.pusher();
        pusher.push(item)
    }

    /// A pusher for a batch of items: it enters the newest segment once for all of them.
    pub(crate) fn pusher(&self) -> Pusher<'_> {
        Pusher {
            outbound: self,
            at: self.enter(),
        }
    }

    /// Enters the newest segment (step 1 of the module's protocol); returns its index.
    fn enter(&self) -> usize {
        loop {
            // SeqCst, each of the four: the pushers' half of the Dekker pair with the
            // task's move of `current` and its load of `writers`. Acquire alone would let
            // the load of `current` pass the increment, and a push land in a segment the
            // task has retired.
            let at = self.current.load(Ordering::SeqCst);
            let segment = self.segment(at);
            segment.writers.fetch_add(1, Ordering::SeqCst);
            if self.current.load(Ordering::SeqCst) == at {
                return at;
            }
            segment.writers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Leaves segment `at`; wakes the task if the segment is no longer the newest (it may
    /// be waiting for this pusher to leave before it moves on).
    fn leave(&self, at: usize) {
        self.segment(at).writers.fetch_sub(1, Ordering::SeqCst);
        if self.current.load(Ordering::SeqCst) != at {
            self.waker.wake();
        }
    }

    /// Wakes the connection's task.
    pub(crate) fn wake(&self) {
        self.waker.wake();
    }

    /// The next item, if any: items of one pusher come in the order they were pushed.
    /// Call only from the connection's task.
    pub(crate) fn pop(&self) -> Option<OutItem> {
        loop {
            let at = self.oldest.load(Ordering::Relaxed);
            let segment = self.segment(at);
            if let Some(item) = segment.queue.pop() {
                return Some(item);
            }
            if !self.retirable(at) {
                return None;
            }
            // Nothing reaches the segment any more; what reached it is visible now (the
            // writers' decrements were seen).
            if let Some(item) = segment.queue.pop() {
                return Some(item);
            }
            self.oldest.store(at + 1, Ordering::Relaxed);
        }
    }

    /// Whether no push can reach segment `at` any more: it is not the newest, and no pusher
    /// is inside it.
    fn retirable(&self, at: usize) -> bool {
        // SeqCst: the task's half of the Dekker pair (see `enter`).
        at != self.current.load(Ordering::SeqCst)
            && self.segment(at).writers.load(Ordering::SeqCst) == 0
    }

    /// Whether [`pop`](Self::pop) would return an item now.
    fn poppable(&self) -> bool {
        let mut at = self.oldest.load(Ordering::Relaxed);
        loop {
            if !self.segment(at).queue.is_empty() {
                return true;
            }
            if !self.retirable(at) {
                return false;
            }
            at += 1;
        }
    }

    /// Items that found the queue full so far.
    pub(crate) fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }

    /// Resolves once the queue holds an item or has overflowed. Cancel-safe. Call only
    /// from the connection's task.
    pub(crate) async fn ready(&self) {
        poll_fn(|cx| {
            if self.poppable() || self.overflows() != 0 {
                return Poll::Ready(());
            }
            self.waker.register(cx.waker());
            // Again after registering: a push between the check and the registration woke
            // no one.
            if self.poppable() || self.overflows() != 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

impl Segment {
    fn boxed(capacity: usize) -> Box<Self> {
        Box::new(Self {
            queue: ArrayQueue::new(capacity),
            writers: AtomicUsize::new(0),
        })
    }
}

/// Pushes a batch of items into an [`Outbound`], inside one segment while it has room.
pub(crate) struct Pusher<'a> {
    outbound: &'a Outbound,
    /// The segment entered.
    at: usize,
}

impl Pusher<'_> {
    /// Pushes `item` without waking the task. Never waits: a full queue counts the item
    /// and hands it back.
    pub(crate) fn push(&mut self, item: OutItem) -> Result<(), OutItem> {
        let outbound = self.outbound;
        let mut item = item;
        loop {
            match outbound.segment(self.at).queue.push(item) {
                Ok(()) => return Ok(()),
                Err(back) => item = back,
            }
            // Full: into the newest segment if the task has grown the queue since.
            if outbound.current.load(Ordering::SeqCst) == self.at {
                outbound.overflows.fetch_add(1, Ordering::Relaxed);
                return Err(item);
            }
            outbound.leave(self.at);
            self.at = outbound.enter();
        }
    }
}

impl Drop for Pusher<'_> {
    fn drop(&mut self) {
        self.outbound.leave(self.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(slot: u16, generation: u32) -> OutItem {
        OutItem::ProducerGone { slot, generation }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_push_from_another_thread_wakes_the_waiting_task() {
        let outbound = std::sync::Arc::new(Outbound::new(2));
        let remote = outbound.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            remote.push(gone(1, 2)).unwrap();
            remote.wake();
        });
        outbound.ready().await;
        assert_eq!(outbound.pop(), Some(gone(1, 2)));
    }

    #[test]
    fn a_full_queue_counts_and_hands_back() {
        let outbound = Outbound::new(1);
        let item = gone(0, 0);
        outbound.push(item).unwrap();
        assert_eq!(outbound.push(item), Err(item));
        assert_eq!(outbound.overflows(), 1);
    }

    #[test]
    fn the_queue_starts_small_and_grows_to_its_limit_only() {
        let outbound = Outbound::new(10_000);
        assert_eq!(outbound.capacity(), FIRST_SEGMENT);
        outbound.reserve(10);
        assert_eq!(outbound.capacity(), FIRST_SEGMENT, "no growth when it fits");
        outbound.reserve(65);
        assert_eq!(outbound.capacity(), 256, "at least fourfold");
        outbound.reserve(1_000_000);
        assert_eq!(outbound.capacity(), 10_000, "never past the limit");
        for i in 0..10_000 {
            outbound.push(gone(0, i)).unwrap();
        }
        assert!(outbound.push(gone(0, 0)).is_err());
        for i in 0..10_000 {
            assert_eq!(outbound.pop(), Some(gone(0, i)));
        }
        assert_eq!(outbound.pop(), None);
    }

    /// Pushers on their own threads while the task grows the queue and pops: every item
    /// comes out once, and each pusher's in the order it pushed them.
    #[test]
    fn each_pushers_items_come_out_in_order_across_growth() {
        const PUSHERS: u16 = 3;
        const EACH: u32 = 20_000;
        let outbound = std::sync::Arc::new(Outbound::new(1 << 20));
        let threads: Vec<_> = (0..PUSHERS)
            .map(|slot| {
                let outbound = outbound.clone();
                std::thread::spawn(move || {
                    let mut next = 0;
                    while next < EACH {
                        // Batches of up to 16, as the processors push them.
                        let mut pusher = outbound.pusher();
                        for _ in 0..16.min(EACH - next) {
                            if pusher.push(gone(slot, next)).is_err() {
                                break;
                            }
                            next += 1;
                        }
                        drop(pusher);
                        outbound.wake();
                    }
                })
            })
            .collect();
        let mut seen = [0_u32; PUSHERS as usize];
        let mut total = 0;
        let mut places = FIRST_SEGMENT;
        while total < u64::from(EACH) * u64::from(PUSHERS) {
            // Grow now and then, while the pushers push; pop half of what fits, so that the
            // queue fills at times and the pushers find it full and push again.
            places = (places * 2).min(1 << 20);
            outbound.reserve(places);
            for _ in 0..places / 2 {
                match outbound.pop() {
                    Some(OutItem::ProducerGone { slot, generation }) => {
                        assert_eq!(generation, seen[usize::from(slot)], "pusher {slot}");
                        seen[usize::from(slot)] += 1;
                        total += 1;
                    }
                    Some(other) => panic!("{other:?}"),
                    None => std::thread::yield_now(),
                }
            }
        }
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(seen, [EACH; PUSHERS as usize]);
        assert_eq!(outbound.pop(), None);
    }
}
