//! The release hook (`BrokerConfig::on_release`) hears of each stored payload once, when
//! its queue releases it for good (not at its ACK); of one never stored, never.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use zerodispatch_broker::*;
use zerodispatch_testkit::within;

mod support;

use support::{deaf_producer, drain, explicit, len, open_consumer, paced, wait_for, with};

const LIMIT: Duration = Duration::from_secs(20);

/// The payload handles released, in order.
type Log = support::Log<u64>;

/// A broker of `queue` whose release hook logs (after one planned panic if `panic_once`).
fn start(queue: QueueConfig, panic_once: bool) -> (Broker, Log) {
    let released = Log::default();
    let sink = released.clone();
    let panicked = AtomicBool::new(!panic_once);
    let hook = OnRelease::new(move |batch: &[Payload]| {
        if !panicked.swap(true, Ordering::Relaxed) {
            panic!("planned panic in the release hook");
        }
        sink.lock().unwrap().extend(batch.iter().map(|p| p.handle));
    });
    let config = support::queues(vec![queue]);
    let broker = support::start(with(config, |c| c.on_release = Some(hook)));
    (broker, released)
}

/// Each handle's count in `log`.
fn counts(log: &Log) -> HashMap<u64, usize> {
    let mut counts = HashMap::new();
    for &h in log.lock().unwrap().iter() {
        *counts.entry(h).or_insert(0) += 1;
    }
    counts
}

#[test]
fn a_payload_is_released_once_its_message_is_consumed_not_when_it_is_acked() {
    within(LIMIT, "release after consumption", || {
        let (broker, released) = start(QueueConfig::new(QueueMode::Priority), false);
        let (producer, acks) = support::producer(&broker, 1024);
        let consumer = open_consumer(&broker, (0, 0), paced(0), |_: &[Delivery]| {});
        support::publish(&producer, 0, 0..10);
        support::settled(&broker, "10 ACKs", || len(&acks) == 10);
        assert!(len(&released) == 0, "acked, not consumed: not released");

        broker.add_credit(&consumer, 10).unwrap();
        support::settled(&broker, "10 releases", || len(&released) == 10);
        let counts = counts(&released);
        assert_eq!(counts.len(), 10);
        assert!(counts.iter().all(|(&h, &n)| h < 10 && n == 1), "{counts:?}");
        assert_eq!(broker.queue_stats()[0].released, 10);
    });
}

#[test]
fn a_fanout_share_dropped_by_a_closing_consumer_still_releases_its_payload() {
    within(LIMIT, "release in fanout", || {
        let (broker, released) = start(QueueConfig::new(QueueMode::Fanout { apps: 2 }), false);
        let producer = deaf_producer(&broker, 1024);
        let _consumer = drain(&broker, 0);
        // App 1's consumer takes its deliveries and never confirms them.
        let holder = open_consumer(&broker, (0, 1), explicit(None), |_: &[Delivery]| {});
        support::publish(&producer, 0, 0..20);
        let confirms = || broker.queue_stats()[0].confirms;
        support::settled(&broker, "app 0's confirms", || confirms() == 20);
        assert!(len(&released) == 0, "app 1 holds every message");

        broker.close_consumer(&holder).unwrap();
        support::settled(&broker, "20 releases", || len(&released) == 20);
        let counts = counts(&released);
        assert!(counts.values().all(|&n| n == 1));
        assert_eq!(counts.len(), 20);
    });
}

#[test]
fn a_message_never_stored_is_never_released() {
    within(LIMIT, "no release without a store", || {
        let (broker, released) = start(support::sized(QueueMode::Priority, 4), false);
        let (producer, outcomes) = support::producer(&broker, 1024);
        support::publish(&producer, 0, 0..6);
        wait_for("6 outcomes", || len(&outcomes) == 6);
        let full = |a: &Ack| (a.status == AckStatus::RejectedQueueFull).then_some(a.payload.handle);
        let refused: Vec<u64> = support::logged(&outcomes).iter().filter_map(full).collect();
        assert_eq!(refused.len(), 2, "a queue of 4 stores 4");

        let _consumer = drain(&broker, 0);
        support::settled(&broker, "4 releases", || len(&released) == 4);
        let counts = counts(&released);
        assert_eq!(counts.len(), 4);
        let none = refused.iter().all(|h| !counts.contains_key(h));
        assert!(none, "a refused payload released");
    });
}

#[test]
fn a_panicking_release_hook_is_counted_and_the_queue_goes_on() {
    within(LIMIT, "a panicking release hook", || {
        zerodispatch_testkit::quiet_planned_panics();
        let (broker, released) = start(QueueConfig::new(QueueMode::Priority), true);
        let producer = deaf_producer(&broker, 1024);
        let _consumer = drain(&broker, 0);
        support::publish(&producer, 0, 0..1);
        wait_for("the panic", || broker.queue_stats()[0].release_panics == 1);
        support::publish(&producer, 0, 1..11);
        support::settled(&broker, "the later releases", || len(&released) == 10);
        let q = broker.queue_stats()[0];
        assert_eq!((q.release_panics, q.released), (1, 11));
    });
}
