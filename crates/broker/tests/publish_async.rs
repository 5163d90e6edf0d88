//! `Producer::publish_async`: the async door on the publish path. It resolves at once with
//! room, waits without blocking its thread while the session processor's queue is full, and
//! is cancel-safe: a future dropped before it resolved published nothing and owes no
//! outcome, so that `close` still sees every outcome it waits for.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use zerodispatch_broker::*;
use zerodispatch_testkit::within;

mod support;

use support::{drain, hold, one_queue, payload, producer, runtime, session};

const LIMIT: Duration = Duration::from_secs(20);

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn start(event_capacity: usize) -> Broker {
    support::start(BrokerConfig {
        session_processors: 1,
        event_capacity,
        ..one_queue(QueueMode::Priority)
    })
}

#[test]
fn publish_async_publishes_in_order_with_one_outcome_each() {
    within(LIMIT, "publish_async on tokio", || {
        let broker = Arc::new(start(64));
        let (producer, acks) = producer(&broker, 1 << 12);
        let _consumer = drain(&broker, 0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        // Many more than the session's queue holds (64): the future waits for room.
        runtime.block_on(async {
            for handle in 0..2_000 {
                producer
                    .publish_async(QueueId(0), payload(handle))
                    .await
                    .unwrap();
            }
        });
        // Sent before the close: a close reports what is still in the session's batch
        // `NotSent`.
        broker.quiesce().unwrap();
        assert!(producer.close(Duration::from_secs(10)));
        let acks = acks.lock().unwrap();
        assert_eq!(acks.len(), 2_000);
        // The queue may refuse a message when its table is full; nothing else happens.
        assert!(
            acks.iter()
                .all(|a| matches!(a.status, AckStatus::Stored | AckStatus::RejectedQueueFull))
        );
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

        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
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
                // The queue is full: drop the waiting future.
                Poll::Pending => break,
            }
            assert!(
                Instant::now() < deadline,
                "the session's queue never filled"
            );
        }
        assert!(published > 0);
        gate.wait();

        // Every published message gets its outcome, and nothing more is owed: the close
        // does not wait for the dropped one.
        assert!(
            producer.close(Duration::from_secs(10)),
            "close waited for an outcome"
        );
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
