//! Consumers confirming explicitly (`Confirms::Explicit`) and paced by credit, as a network
//! front end's consumers are.

use std::time::Duration;

use zerodispatch_broker::*;
use zerodispatch_testkit::within;

const LIMIT: Duration = Duration::from_secs(20);

mod support;

use support::{Log, deaf_producer, explicit, len, paced, payload, runtime, wait_for, with};

/// A broker of one priority queue on one session processor.
fn start() -> Broker {
    support::priority_broker(|c| c.session_processors = 1)
}

/// Opens a consumer of queue 0's app 0 that records what it is handed.
fn consumer(broker: &Broker, options: ConsumerOptions) -> (Consumer, Log<Delivery>) {
    support::consumer(broker, 0, 0, options)
}

/// A broker of [`start`], a logging consumer with `options`, and a producer that published `n`.
fn started(options: ConsumerOptions, n: u64) -> (Broker, Consumer, Log<Delivery>, Producer) {
    let broker = start();
    let (consumer, seen) = consumer(&broker, options);
    let producer = deaf_producer(&broker, 1024);
    support::publish(&producer, 0, 0..n);
    (broker, consumer, seen, producer)
}

/// Messages queue 0 holds.
fn held(broker: &Broker) -> u64 {
    broker.queue_stats()[0].held
}

/// Confirms each of `deliveries` to `consumer`.
fn confirm(broker: &Broker, consumer: &Consumer, deliveries: &[Delivery]) {
    for d in deliveries {
        broker.confirm(consumer, d.guid).unwrap();
    }
}

#[test]
fn explicit_confirms_release_only_what_the_application_confirms() {
    within(LIMIT, "explicit confirms", || {
        let (broker, consumer, seen, _producer) = started(explicit(None), 10);
        support::settled(&broker, "10 deliveries", || len(&seen) == 10);
        // Handed over, not confirmed: the queue still holds every message.
        assert_eq!(held(&broker), 10);

        let delivered = support::logged(&seen);
        confirm(&broker, &consumer, &delivered[..4]);
        wait_for("4 releases", || held(&broker) == 6);

        // A GUID never delivered, and one confirmed already: counted, nothing released.
        broker.confirm(&consumer, Guid([0xEE; 16])).unwrap();
        broker.confirm(&consumer, delivered[0].guid).unwrap();
        let unknown = || broker.session_stats().unknown_confirms;
        support::settled(&broker, "2 unknown confirms", || unknown() == 2);
        assert_eq!(held(&broker), 6);

        let rest = delivered[4..].iter().map(|d| d.guid);
        let confirmed = runtime().block_on(broker.confirm_batch_async(&consumer, rest));
        confirmed.unwrap();
        wait_for("every release", || held(&broker) == 0);
        assert_eq!(unknown(), 2);
    });
}

#[test]
fn on_return_confirms_are_unchanged_and_count_no_unknown_confirm() {
    within(LIMIT, "on-return confirms", || {
        let (broker, consumer, seen, _producer) = started(ConsumerOptions::default(), 10);
        wait_for("every release", || len(&seen) == 10 && held(&broker) == 0);
        // A confirm for a consumer that confirms on return: nothing to confirm.
        broker.confirm(&consumer, Guid([1; 16])).unwrap();
        let unknown = || broker.session_stats().unknown_confirms;
        wait_for("the unknown confirm", || unknown() == 1);
    });
}

#[test]
fn credit_paces_deliveries() {
    within(LIMIT, "credit pacing", || {
        let (broker, consumer, seen, _producer) = started(paced(0), 10);
        // Started paused: the session holds what the queue pushed.
        support::settled(&broker, "the pushes", || held(&broker) == 10);
        assert_eq!(len(&seen), 0);

        broker.add_credit(&consumer, 3).unwrap();
        support::settled(&broker, "3 deliveries", || len(&seen) == 3);
        assert_eq!(len(&seen), 3, "more than the credit");

        let all = broker.add_credit_async(&consumer, u32::MAX);
        runtime().block_on(all).unwrap();
        wait_for("every delivery", || len(&seen) == 10);
        wait_for("every release", || held(&broker) == 0);
        // In publish order, each once.
        let handles = support::mapped(&seen, |d| d.payload.handle);
        assert_eq!(handles, (0..10).collect::<Vec<_>>());
    });
}

#[test]
fn credit_and_explicit_confirms_together_keep_a_fixed_number_in_flight() {
    within(LIMIT, "credit and explicit confirms", || {
        let (broker, consumer, seen, _producer) = started(explicit(Some(4)), 100);
        let mut confirmed = 0;
        while confirmed < 100 {
            wait_for("a delivery", || len(&seen) > confirmed);
            let batch: Vec<Delivery> = seen.lock().unwrap()[confirmed..].to_vec();
            let in_flight = len(&seen) - confirmed;
            assert!(in_flight <= 4, "more in flight than the credit");
            for d in &batch {
                broker.confirm(&consumer, d.guid).unwrap();
                broker.add_credit(&consumer, 1).unwrap();
            }
            confirmed += batch.len();
        }
        wait_for("every release", || held(&broker) == 0);
        assert_eq!(broker.session_stats().unknown_confirms, 0);
    });
}

#[test]
fn what_a_closed_consumer_held_is_redelivered_and_confirmed_by_the_next() {
    within(LIMIT, "redelivery to an explicit consumer", || {
        let options = explicit(Some(64));
        let (broker, first, seen_first, _producer) = started(options, 10);
        wait_for("10 deliveries", || len(&seen_first) == 10);
        let (second, seen) = consumer(&broker, options);
        broker.quiesce().unwrap();
        broker.close_consumer(&first).unwrap();
        wait_for("10 redeliveries", || len(&seen) == 10);
        confirm(&broker, &second, &support::logged(&seen));
        wait_for("every release", || held(&broker) == 0);
        let q = broker.queue_stats()[0];
        assert_eq!((q.confirms, q.gone_consumer), (10, 0), "{q:?}");
    });
}

/// The session's table of handed messages churns through a small window (its check panicked).
#[test]
fn explicit_confirms_churn_through_a_small_window() {
    within(LIMIT, "explicit confirms through a small window", || {
        let queue = with(support::sized(QueueMode::Priority, 64), |q| q.window = 16);
        let broker = support::start_on(vec![queue], 1);
        let (consumer, seen) = consumer(&broker, explicit(None));
        let producer = deaf_producer(&broker, 64);
        // A full window (16) in flight at a time, each confirmed as it comes.
        let mut confirmed = 0;
        for handle in 0..2_000_u64 {
            producer.send(QueueId(0), payload(handle)).unwrap();
            if handle % 16 == 15 {
                wait_for("sixteen deliveries", || len(&seen) as u64 == handle + 1);
                let batch: Vec<Delivery> = seen.lock().unwrap()[confirmed..].to_vec();
                confirm(&broker, &consumer, &batch);
                confirmed += batch.len();
            }
        }
        wait_for("every release", || held(&broker) == 0);
        assert_eq!(broker.session_stats().unknown_confirms, 0);
        assert!(broker.processor_stats().iter().all(|p| p.panics == 0));
    });
}

/// Confirms made before `close_consumer` release their messages: its detach never overtakes them.
#[test]
fn confirms_made_before_a_close_are_not_overtaken_by_it() {
    within(LIMIT, "confirm then close", || {
        let broker = start();
        let producer = deaf_producer(&broker, 1024);
        for round in 0..200_u64 {
            // Both paths a confirm can take: straight to the queue, or through the cluster.
            let route = [ConfirmRoute::Direct, ConfirmRoute::ViaCluster][round as usize % 2];
            let (consumer, seen) = consumer(&broker, with(explicit(None), |o| o.route = route));
            for handle in 0..10 {
                producer.publish(QueueId(0), payload(handle)).unwrap();
            }
            wait_for("10 deliveries", || len(&seen) == 10);
            confirm(&broker, &consumer, &seen.lock().unwrap());
            broker.close_consumer(&consumer).unwrap();
            broker.quiesce().unwrap();
            let queue = &broker.queue_stats()[0];
            let released = "every confirmed message released, none kept for another consumer";
            let kept = (queue.held, queue.redelivered);
            assert_eq!(kept, (0, 0), "round {round} ({route:?}): {released}");
        }
    });
}
