//! `Producer::publish_async` waits without blocking while the session's queue is full, and
//! is cancel-safe: a future dropped unresolved published nothing and owes no outcome.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use zerodispatch_broker::*;
use zerodispatch_testkit::within;

mod support;

use support::{drain, hold, payload, producer, runtime, session};

const LIMIT: Duration = Duration::from_secs(20);

/// A waker that counts its wakes.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A broker of one priority queue on one session processor of `event_capacity` events.
fn start(event_capacity: usize) -> Broker {
    support::priority_broker(|c| (c.session_processors, c.event_capacity) = (1, event_capacity))
}

#[test]
fn publish_async_publishes_in_order_with_one_outcome_each() {
    within(LIMIT, "publish_async on tokio", || {
        let broker = Arc::new(start(64));
        let (producer, acks) = producer(&broker, 1 << 12);
        let _consumer = drain(&broker, 0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build();
        let runtime = runtime.unwrap();
        // Many more than the session's queue holds (64): the future waits for room.
        runtime.block_on(async {
            for handle in 0..2_000 {
                let publish = producer.publish_async(QueueId(0), payload(handle));
                publish.await.unwrap();
            }
        });
        // Sent before the close, which reports what is still in the batch `NotSent`.
        broker.quiesce().unwrap();
        assert!(producer.close(Duration::from_secs(10)));
        let acks = acks.lock().unwrap();
        assert_eq!(acks.len(), 2_000);
        // The queue may refuse a message when its table is full; nothing else happens.
        let stored = |a: &Ack| matches!(a.status, AckStatus::Stored | AckStatus::RejectedQueueFull);
        assert!(acks.iter().all(stored));
        let mut handles: Vec<u64> = acks.iter().map(|a| a.payload.handle).collect();
        handles.sort_unstable();
        assert_eq!(handles, (0..2_000).collect::<Vec<_>>());
    });
}

#[test]
fn a_dropped_publish_async_publishes_nothing_and_owes_no_outcome() {
    within(LIMIT, "a cancelled publish_async", || {
        let broker = start(16);
        let (producer, acks) = producer(&broker, 1 << 12);
        let _consumer = drain(&broker, 0);
        // Hold the session processor, so that its queue fills.
        let gate = hold(&broker, session(&broker));

        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        let mut cx = Context::from_waker(&waker);
        let mut published = 0_u64;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut future = pin!(producer.publish_async(QueueId(0), payload(published)));
            match future.as_mut().poll(&mut cx) {
                Poll::Ready(result) => {
                    result.unwrap();
                    published += 1;
                }
                Poll::Pending => break,
            }
            let filled = Instant::now() < deadline;
            assert!(filled, "the session's queue never filled");
        }
        assert!(published > 0);
        gate.wait();

        // Every published message gets its outcome; the close does not wait for the dropped.
        let closed = producer.close(Duration::from_secs(10));
        assert!(closed, "close waited for an outcome");
        let acks = acks.lock().unwrap();
        assert_eq!(acks.len() as u64, published);
        assert!(acks.iter().all(|a| a.payload.handle < published));
        assert_eq!(broker.session_stats().published, published);
    });
}

#[test]
fn publish_async_after_close_hands_the_payload_back() {
    within(LIMIT, "publish_async after close", || {
        let broker = start(64);
        let producer = broker.open_producer(16, |_: &[Ack]| {}).unwrap();
        assert!(producer.close(Duration::from_secs(1)));
        let refused = runtime().block_on(producer.publish_async(QueueId(0), payload(9)));
        match refused {
            Err(SendError::Closed(p)) => assert_eq!(p, payload(9)),
            other => panic!("expected Closed, got {other:?}"),
        }
    });
}
