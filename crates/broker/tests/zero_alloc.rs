//! Proof that the confirm path allocates nothing per message: PUT -> PUSH -> CONFIRM (half
//! of them through the cluster processor) -> ACK, in fanout 1 and fanout 3, with inline and
//! typed confirms: 1,000,000 messages in all after warm-up, allocation delta exactly 0 on
//! every thread; then the sending side with `send` and with a confirm timeout on (the
//! session's send-time queue stays within its preallocated bound); the same with boxed
//! confirms allocates (so the counter is seen to work). One more run has event queues far
//! too small for the flow, so that events wait in the processors' outboxes and the
//! broker's clients keep what a full outbox refuses.
//!
//! Its own test binary with a single `#[test]`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use zerodispatch_broker::*;
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const MESSAGES: u64 = 1_000_000;
const WARM_UP: u64 = 20_000;
/// Messages a producer keeps unacknowledged at most (it waits for ACKs beyond).
const IN_FLIGHT: u64 = 4096;
/// Each processor's event capacity, but in the run with tiny queues.
const EVENTS: usize = 1 << 16;

/// A broker with one queue of `apps` apps, two consumers per app (one confirming straight
/// to the queue, one through the cluster) and one producer (with `confirm_timeout`, if
/// any); returns the allocations made while `messages` messages went through, after a
/// warm-up.
fn allocations(
    apps: u16,
    mode: ConfirmMode,
    messages: u64,
    via_send: bool,
    confirm_timeout: Option<Duration>,
    event_capacity: usize,
) -> u64 {
    let mode_for = if apps == 1 {
        QueueMode::Priority
    } else {
        QueueMode::Fanout { apps }
    };
    let broker = Broker::start(BrokerConfig {
        queues: vec![QueueConfig {
            capacity: 2 * IN_FLIGHT as usize,
            ..QueueConfig::new(mode_for)
        }],
        session_processors: 2,
        event_capacity,
        ..BrokerConfig::default()
    })
    .unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let sink = acked.clone();
    let config = ProducerConfig {
        max_unconfirmed: 2 * IN_FLIGHT as usize,
        confirm_timeout,
        ..ProducerConfig::default()
    };
    let producer = broker
        .open_producer_with(config, move |batch: &[Ack]| {
            assert!(
                batch.iter().all(|a| a.status == AckStatus::Acked),
                "every message acked"
            );
            sink.fetch_add(batch.len() as u64, Ordering::Release);
        })
        .unwrap();
    let delivered = Arc::new(AtomicU64::new(0));
    let mut consumers = Vec::new();
    for app in 0..apps {
        for route in [ConfirmRoute::Direct, ConfirmRoute::ViaCluster] {
            let seen = delivered.clone();
            let options = ConsumerOptions {
                mode,
                route,
                ..ConsumerOptions::default()
            };
            consumers.push(
                broker
                    .open_consumer(
                        QueueId(0),
                        AppId(app),
                        options,
                        move |batch: &[Delivery]| {
                            seen.fetch_add(batch.len() as u64, Ordering::Relaxed);
                        },
                    )
                    .unwrap(),
            );
        }
    }
    let send = |range: std::ops::Range<u64>| {
        for i in range {
            while i - acked.load(Ordering::Acquire) >= IN_FLIGHT {
                thread::yield_now();
            }
            let payload = Payload { handle: i, len: 64 };
            if via_send {
                producer.send(QueueId(0), payload).unwrap();
            } else {
                producer.publish(QueueId(0), payload).unwrap();
            }
        }
    };
    let wait_acked = |n: u64| {
        while acked.load(Ordering::Acquire) < n {
            thread::yield_now();
        }
    };
    send(0..WARM_UP);
    wait_acked(WARM_UP);
    let before = CountingAllocator::allocations();
    send(WARM_UP..WARM_UP + messages);
    wait_acked(WARM_UP + messages);
    let after = CountingAllocator::allocations();
    let q = broker.queue_stats()[0];
    assert_eq!(q.acked, WARM_UP + messages);
    assert_eq!(
        delivered.load(Ordering::Relaxed),
        (WARM_UP + messages) * u64::from(apps)
    );
    let routed = broker.cluster_state().unwrap().routed;
    assert!(
        routed > 0 && routed < q.confirms,
        "some confirms went through the cluster: {routed}"
    );
    broker.shutdown();
    after - before
}

#[test]
fn the_confirm_path_allocates_nothing_per_message() {
    let per_case = MESSAGES / 4;
    for apps in [1, 3] {
        for mode in [ConfirmMode::Inline, ConfirmMode::Typed] {
            let n = allocations(apps, mode, per_case, false, None, EVENTS);
            println!("fanout {apps}, {mode:?}: {per_case} messages, {n} allocations");
            assert_eq!(
                n, 0,
                "fanout {apps}, {mode:?}: {per_case} messages allocated {n} times"
            );
        }
    }
    // The sending side of dynamic send: `send` with its unconfirmed cap (credits taken and
    // given back) and frames cut by the drain.
    let n = allocations(1, ConfirmMode::Typed, per_case, true, None, EVENTS);
    println!("fanout 1, Typed, via send: {per_case} messages, {n} allocations");
    assert_eq!(n, 0, "dynamic send allocated {n} times");
    // With a confirm timeout: the send-time queue gets an entry per message and stays
    // within its preallocated bound (nothing times out; the ticks that check run all
    // along, one every 500 ms).
    let half = per_case / 2;
    let n = allocations(
        1,
        ConfirmMode::Typed,
        half,
        true,
        Some(Duration::from_secs(2)),
        EVENTS,
    );
    println!("fanout 1, Typed, confirm timeout: {half} messages, {n} allocations");
    assert_eq!(
        n, 0,
        "a producer with a confirm timeout allocated {n} times"
    );
    // Processors' queues (and outboxes) of 64 events, far below what flows: events wait
    // in outboxes, and when those are full the queues, sessions and cluster keep what
    // they could not hand on for their next flush, all in preallocated tables.
    let n = allocations(3, ConfirmMode::Inline, half, true, None, 64);
    println!("fanout 3, Inline, 64-event queues: {half} messages, {n} allocations");
    assert_eq!(n, 0, "handing on through full outboxes allocated {n} times");
    let boxed = allocations(3, ConfirmMode::Boxed, 10_000, false, None, EVENTS);
    println!("fanout 3, Boxed: 10000 messages, {boxed} allocations");
    assert!(
        boxed >= 30_000,
        "one box per confirm (3 per message): counted {boxed}"
    );
}
