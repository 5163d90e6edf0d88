//! [`Outbound`]: what the broker's processors hand one connection (outcomes of its
//! producers' messages, deliveries to its consumers, and word that a session is gone), in a
//! bounded lock-free queue, with a waker for the connection's task.
//!
//! The processors call the producers' `on_ack` and the consumers' `on_delivery` on their
//! own threads, which must never wait: they push here and wake the task once per batch.
//! The queue is sized from what can be in flight on the connection (the sum of its
//! producers' `max_unconfirmed`, its consumers' windows, one place per session for its
//! last word), which the connection enforces, so it cannot fill. If it somehow does, the
//! item is counted, never waited for, and the connection closes with `INTERNAL`.

use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;

use atomic_waker::AtomicWaker;
use crossbeam_queue::ArrayQueue;
use zerodispatch_broker::Guid;
use zerodispatch_wire::ConfirmStatus;

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

/// A connection's queue of [`OutItem`]s and its task's waker.
#[derive(Debug)]
pub(crate) struct Outbound {
    queue: ArrayQueue<OutItem>,
    waker: AtomicWaker,
    /// Items that found the queue full (a defect of the sizing): the connection closes.
    overflows: AtomicU64,
}

impl Outbound {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: ArrayQueue::new(capacity.max(1)),
            waker: AtomicWaker::new(),
            overflows: AtomicU64::new(0),
        }
    }

    /// Pushes `item` without waking the task (call [`wake`](Self::wake) once the batch is
    /// in). Never waits: a full queue counts the item and hands it back.
    pub(crate) fn push(&self, item: OutItem) -> Result<(), OutItem> {
        self.queue.push(item).inspect_err(|_| {
            self.overflows.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// Wakes the connection's task.
    pub(crate) fn wake(&self) {
        self.waker.wake();
    }

    /// The next item, if any.
    pub(crate) fn pop(&self) -> Option<OutItem> {
        self.queue.pop()
    }

    /// Items that found the queue full so far.
    pub(crate) fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }

    /// Resolves once the queue holds an item or has overflowed. Cancel-safe.
    pub(crate) async fn ready(&self) {
        poll_fn(|cx| {
            if !self.queue.is_empty() || self.overflows() != 0 {
                return Poll::Ready(());
            }
            self.waker.register(cx.waker());
            // Again after registering: a push between the check and the registration woke
            // no one.
            if !self.queue.is_empty() || self.overflows() != 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_push_from_another_thread_wakes_the_waiting_task() {
        let outbound = std::sync::Arc::new(Outbound::new(2));
        let remote = outbound.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            remote
                .push(OutItem::ProducerGone {
                    slot: 1,
                    generation: 2,
                })
                .unwrap();
            remote.wake();
        });
        outbound.ready().await;
        assert_eq!(
            outbound.pop(),
            Some(OutItem::ProducerGone {
                slot: 1,
                generation: 2
            })
        );
    }

    #[test]
    fn a_full_queue_counts_and_hands_back() {
        let outbound = Outbound::new(1);
        let item = OutItem::ConsumerGone {
            slot: 0,
            generation: 0,
        };
        outbound.push(item).unwrap();
        assert_eq!(outbound.push(item), Err(item));
        assert_eq!(outbound.overflows(), 1);
    }
}
