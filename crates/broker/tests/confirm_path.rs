//! The confirm path end to end: priority and fanout delivery, acknowledgements, table-full
//! back-pressure, the robustness cases, closing consumers and producers, and the three
//! confirm modes giving identical results. Every test ends with a conservation check.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use zerodispatch_broker::*;

mod support;

use support::{Log, consumer, producer, publish, receipt, replicated, wait_for};

fn start(queues: Vec<QueueConfig>, session_processors: usize) -> Broker {
    support::start(BrokerConfig {
        queues,
        session_processors,
        ..BrokerConfig::default()
    })
}

/// Each published GUID has at most one outcome, and the outcomes add up: a message without
/// one is held by its queue (waiting for its replication quorum); every `Stored` outcome was
/// sent by a queue; every stored message is released or held.
fn check_conservation(
    broker: &Broker,
    published: &[Guid],
    acks: &[Ack],
) -> HashMap<Guid, AckStatus> {
    let mut outcome = HashMap::new();
    for a in acks {
        assert!(
            outcome.insert(a.guid, a.status).is_none(),
            "{:?} has two outcomes",
            a.guid
        );
    }
    for g in published {
        let _ = outcome.get(g); // held messages have none yet
    }
    let queues = broker.queue_stats();
    let sessions = broker.session_stats();
    let held: u64 = queues.iter().map(|q| q.held).sum();
    let closed = outcome
        .values()
        .filter(|s| **s == AckStatus::Closed)
        .count() as u64;
    let no_outcome = published
        .iter()
        .filter(|g| !outcome.contains_key(g))
        .count() as u64;
    assert_eq!(sessions.published, published.len() as u64);
    assert_eq!(
        outcome.len() as u64 + no_outcome,
        published.len() as u64,
        "no outcome for a GUID not published"
    );
    // A message without an outcome is held by its queue (its ACK waits for the quorum).
    assert!(
        no_outcome <= held,
        "{no_outcome} messages without outcome but only {held} held"
    );
    let stored: u64 = queues.iter().map(|q| q.stored).sum();
    let acked: u64 = queues.iter().map(|q| q.acked).sum();
    let released: u64 = queues.iter().map(|q| q.released).sum();
    let acked_outcomes = outcome
        .values()
        .filter(|s| **s == AckStatus::Stored)
        .count() as u64;
    assert!(
        acked_outcomes <= acked,
        "{acked_outcomes} Stored outcomes but the queues sent {acked}"
    );
    assert!(acked <= stored, "an ACK for a message never stored");
    // Stored, not yet released: stored and unconsumed; the rest of the held wait for the
    // quorum, pending or reported closed.
    assert!(
        held - (acked - released).min(held) <= no_outcome + closed,
        "held messages are acked, pending or reported closed"
    );
    assert_eq!(
        stored,
        released + held,
        "every stored message is released or held"
    );
    outcome
}

#[test]
fn priority_delivers_each_message_to_one_consumer_and_acks_it_once() {
    let broker = start(vec![QueueConfig::new(QueueMode::Priority)], 2);
    let (p, acks) = producer(&broker, 4096);
    let (_a, seen_a) = consumer(&broker, 0, 0, ConsumerOptions::default());
    let (_b, seen_b) = consumer(&broker, 0, 0, ConsumerOptions::default());
    let guids = publish(&p, 0, 0..2000);
    broker.quiesce().unwrap();
    let (a, b) = (
        seen_a.lock().unwrap().clone(),
        seen_b.lock().unwrap().clone(),
    );
    assert!(
        !a.is_empty() && !b.is_empty(),
        "both consumers got messages: {} and {}",
        a.len(),
        b.len()
    );
    let mut delivered: Vec<Guid> = a.iter().chain(&b).map(|d| d.guid).collect();
    delivered.sort();
    let mut expected = guids.clone();
    expected.sort();
    assert_eq!(delivered, expected, "every message delivered exactly once");
    let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
    assert!(guids.iter().all(|g| outcome[g] == AckStatus::Stored));
    let q = broker.queue_stats()[0];
    assert_eq!(
        (q.stored, q.pushed, q.confirms, q.acked, q.released, q.held),
        (2000, 2000, 2000, 2000, 2000, 0)
    );
}

#[test]
fn fanout_delivers_every_message_to_every_app_acks_it_once_and_releases_it_after_the_last() {
    // 30: BlazingMQ's fanout figure; MAX_APPS: every bit of the share mask.
    for apps in [3, 30, MAX_APPS] {
        let broker = start(vec![QueueConfig::new(QueueMode::Fanout { apps })], 2);
        let (p, acks) = producer(&broker, 4096);
        let seen: Vec<_> = (0..apps)
            .map(|app| consumer(&broker, 0, app, ConsumerOptions::default()))
            .collect();
        let guids = publish(&p, 0, 0..300);
        broker.quiesce().unwrap();
        for (app, (_, log)) in seen.iter().enumerate() {
            let got: Vec<Guid> = log.lock().unwrap().iter().map(|d| d.guid).collect();
            assert_eq!(
                got, guids,
                "{apps} apps: app {app} got every message once, in order"
            );
            assert!(
                log.lock()
                    .unwrap()
                    .iter()
                    .all(|d| d.app == AppId(app as u16))
            );
        }
        let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
        assert!(guids.iter().all(|g| outcome[g] == AckStatus::Stored));
        let q = broker.queue_stats()[0];
        let shares = 300 * u64::from(apps);
        assert_eq!(
            (q.pushed, q.confirms, q.acked, q.released),
            (shares, shares, 300, 300)
        );
    }
}

#[test]
fn a_full_table_rejects_with_a_clear_status_and_overwrites_nothing() {
    let broker = start(
        vec![QueueConfig {
            capacity: 4,
            ..QueueConfig::new(QueueMode::Priority)
        }],
        1,
    );
    let (p, acks) = producer(&broker, 100);
    let guids = publish(&p, 0, 0..10);
    broker.quiesce().unwrap();
    let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
    let rejected: Vec<&Guid> = guids
        .iter()
        .filter(|g| outcome.get(g) == Some(&AckStatus::RejectedQueueFull))
        .collect();
    assert_eq!(rejected.len(), 6);
    assert_eq!(broker.queue_stats()[0].held, 4);
    // The four stored are ACKed already: stored, with no consumer attached.
    assert!(guids[..4].iter().all(|g| outcome[g] == AckStatus::Stored));
    // The four held messages are the first four, intact: a consumer now gets exactly them.
    let (_c, seen) = consumer(&broker, 0, 0, ConsumerOptions::default());
    broker.quiesce().unwrap();
    let got: Vec<(Guid, u64)> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|d| (d.guid, d.payload.handle))
        .collect();
    assert_eq!(
        got,
        guids[..4].iter().copied().zip(0..4).collect::<Vec<_>>()
    );
    check_conservation(&broker, &guids, &acks.lock().unwrap());
    assert_eq!(broker.queue_stats()[0].held, 0);
}

#[test]
fn a_producer_past_its_unacked_cap_gets_rejections_and_unknown_queues_are_rejected() {
    let broker = start(vec![QueueConfig::new(QueueMode::Priority)], 1);
    let (p, acks) = producer(&broker, 3);
    let mut guids = publish(&p, 0, 0..5);
    guids.push(p.publish(QueueId(9), Payload::default()).unwrap());
    broker.quiesce().unwrap();
    let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
    assert_eq!(
        outcome
            .values()
            .filter(|s| **s == AckStatus::RejectedProducerFull)
            .count(),
        2
    );
    assert_eq!(outcome[&guids[5]], AckStatus::RejectedUnknownQueue);
    let s = broker.session_stats();
    assert_eq!((s.rejected_producer_full, s.rejected_unknown_queue), (2, 1));
}

#[test]
fn robustness_cases_are_counted_never_a_panic() {
    let broker = start(vec![QueueConfig::new(QueueMode::Fanout { apps: 2 })], 1);
    let (p, acks) = producer(&broker, 100);
    let guids = publish(&p, 0, 0..1);
    let (c0, _) = consumer(&broker, 0, 0, ConsumerOptions::default());
    broker.quiesce().unwrap();
    let g = guids[0];
    let confirm = |guid, consumer: ConsumerId, app| Confirm {
        queue: QueueId(0),
        guid,
        consumer,
        app: AppId(app),
    };
    // Unknown GUID.
    broker
        .replica_confirm(
            confirm(Guid::new(ProducerId(77), 1), c0.id(), 0),
            ConfirmMode::Typed,
        )
        .unwrap();
    // Unknown queue.
    broker
        .replica_confirm(
            Confirm {
                queue: QueueId(5),
                ..confirm(g, c0.id(), 0)
            },
            ConfirmMode::Inline,
        )
        .unwrap();
    // App 0 already confirmed (consumer 0 did): a duplicate, while app 1 keeps the message.
    broker
        .replica_confirm(confirm(g, c0.id(), 0), ConfirmMode::Inline)
        .unwrap();
    // App 1 has no consumer: a confirm for it comes from a consumer the share is not
    // pushed to.
    broker
        .replica_confirm(confirm(g, ConsumerId(99), 1), ConfirmMode::Boxed)
        .unwrap();
    broker.quiesce().unwrap();
    let q = broker.queue_stats()[0];
    assert_eq!(
        (q.unknown_guid, q.duplicate_confirms, q.gone_consumer),
        (1, 1, 1)
    );
    assert_eq!(
        broker.cluster_state().unwrap(),
        ClusterState {
            routed: 3,
            receipts_routed: 0,
            unknown_queue: 1,
            queues: 1
        }
    );
    assert_eq!(q.held, 1, "still waiting for app 1");
    // A confirm arriving twice after release: the second finds no message (unknown GUID).
    let (c1, _) = consumer(&broker, 0, 1, ConsumerOptions::default());
    broker.quiesce().unwrap();
    broker
        .replica_confirm(confirm(g, c1.id(), 1), ConfirmMode::Typed)
        .unwrap();
    broker.quiesce().unwrap();
    assert_eq!(broker.queue_stats()[0].unknown_guid, 2);
    let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
    assert_eq!(outcome[&g], AckStatus::Stored);
}

#[test]
fn closing_a_producer_reports_every_pending_message_and_counts_later_acks_late() {
    let broker = support::start(replicated());
    let (p, acks) = producer(&broker, 100);
    let guids = publish(&p, 0, 0..5);
    broker.quiesce().unwrap();
    // No wait: stored, waiting for their receipts, each is reported `Closed`.
    assert!(!p.close(Duration::ZERO));
    broker.quiesce().unwrap();
    let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
    assert!(guids.iter().all(|g| outcome[g] == AckStatus::Closed));
    // The queue still holds them; the replica's receipts now come, and their ACKs reach
    // the closed producer's session, which waited for them: counted late, not reported
    // twice, none dropped as stale.
    let stale = |broker: &Broker| -> u64 { broker.processor_stats().iter().map(|s| s.stale).sum() };
    let stale_before = stale(&broker);
    for &g in &guids {
        receipt(&broker, g, 0).unwrap();
    }
    broker.quiesce().unwrap();
    let s = broker.session_stats();
    assert_eq!((s.closed_reported, s.late_acks), (5, 5));
    assert_eq!(stale(&broker) - stale_before, 0);
    assert_eq!(acks.lock().unwrap().len(), 5);
    assert_eq!(broker.queue_stats()[0].acked, 5);
    // Publishing after close is refused.
    assert_eq!(
        p.publish(QueueId(0), Payload::default()),
        Err(SendError::Closed(Payload::default()))
    );
    check_conservation(&broker, &guids, &acks.lock().unwrap());
}

/// A consumer whose delivery handler blocks on `gate` (twice: "I am in", "let me out")
/// the first time it is called.
fn blocking_consumer(broker: &Broker, app: u16, gate: Arc<Barrier>) -> (Consumer, Log<Delivery>) {
    let seen = Log::default();
    let sink = seen.clone();
    let mut first = true;
    let c = broker
        .open_consumer(
            QueueId(0),
            AppId(app),
            ConsumerOptions::default(),
            move |batch: &[Delivery]| {
                sink.lock().unwrap().extend_from_slice(batch);
                if std::mem::take(&mut first) {
                    gate.wait();
                    gate.wait();
                }
            },
        )
        .unwrap();
    (c, seen)
}

/// A consumer closed while its application holds a batch: the close waits behind the
/// batch (its session detaches it once the batch's confirms are sent), so what it handled
/// is not handed to another consumer too, and what it had not taken goes to the other.
/// On the code before the session detached its own consumer, the detach overtook the
/// batch's confirms and `b` was handed `a`'s batch again.
#[test]
fn closing_a_priority_consumer_redelivers_only_what_it_did_not_take() {
    let broker = start(vec![QueueConfig::new(QueueMode::Priority)], 3);
    let (p, acks) = producer(&broker, 100);
    let gate = Arc::new(Barrier::new(2));
    let (a, seen_a) = blocking_consumer(&broker, 0, gate.clone());
    let (_b, seen_b) = consumer(&broker, 0, 0, ConsumerOptions::default());
    let guids = publish(&p, 0, 0..10);
    gate.wait(); // consumer a holds its first batch, unconfirmed
    broker.close_consumer(&a).unwrap();
    gate.wait();
    wait_for("every release", || broker.queue_stats()[0].released >= 10);
    broker.quiesce().unwrap();
    let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
    assert!(
        guids.iter().all(|g| outcome[g] == AckStatus::Stored),
        "{outcome:?}"
    );
    let a_got: HashSet<Guid> = seen_a.lock().unwrap().iter().map(|d| d.guid).collect();
    let b_got: HashSet<Guid> = seen_b.lock().unwrap().iter().map(|d| d.guid).collect();
    assert!(!a_got.is_empty(), "a was handed its first batch");
    assert!(
        a_got.is_disjoint(&b_got),
        "what a handled (confirmed on return) was not handed to b too"
    );
    assert_eq!(a_got.len() + b_got.len(), 10, "every message handed out");
    let q = broker.queue_stats()[0];
    assert_eq!(q.released, 10, "{q:?}");
    assert_eq!(
        q.gone_consumer + q.unknown_guid,
        0,
        "no confirm came late: {q:?}"
    );
}

/// The fanout mirror: the closed consumer's share of what it handled is confirmed, its
/// share of the rest dropped; each of the 12 shares is one or the other.
#[test]
fn closing_a_fanout_consumer_drops_only_the_share_it_did_not_take() {
    let broker = start(vec![QueueConfig::new(QueueMode::Fanout { apps: 2 })], 3);
    let (p, acks) = producer(&broker, 100);
    let (_c0, seen0) = consumer(&broker, 0, 0, ConsumerOptions::default());
    let gate = Arc::new(Barrier::new(2));
    let (c1, seen1) = blocking_consumer(&broker, 1, gate.clone());
    let guids = publish(&p, 0, 0..6);
    gate.wait();
    broker.close_consumer(&c1).unwrap();
    gate.wait();
    wait_for("every release", || broker.queue_stats()[0].released >= 6);
    broker.quiesce().unwrap();
    let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
    assert!(guids.iter().all(|g| outcome[g] == AckStatus::Stored));
    assert_eq!(seen0.lock().unwrap().len(), 6);
    let handled = seen1.lock().unwrap().len() as u64;
    assert!(handled >= 1, "c1 was handed its first batch");
    let q = broker.queue_stats()[0];
    assert_eq!(q.dropped_shares, 6 - handled, "{q:?}");
    assert_eq!(
        q.confirms + q.dropped_shares,
        12,
        "each of the 12 shares confirmed or dropped: {q:?}"
    );
}

#[test]
fn the_three_confirm_modes_and_both_routes_give_identical_results() {
    let mut results = Vec::new();
    for mode in [ConfirmMode::Inline, ConfirmMode::Typed, ConfirmMode::Boxed] {
        for route in [ConfirmRoute::Direct, ConfirmRoute::ViaCluster] {
            let broker = start(vec![QueueConfig::new(QueueMode::Fanout { apps: 2 })], 2);
            let (p, acks) = producer(&broker, 1000);
            let options = ConsumerOptions {
                mode,
                route,
                ..ConsumerOptions::default()
            };
            let _consumers: Vec<_> = (0..2)
                .map(|app| consumer(&broker, 0, app, options))
                .collect();
            let guids = publish(&p, 0, 0..500);
            broker.quiesce().unwrap();
            let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
            assert!(
                guids.iter().all(|g| outcome[g] == AckStatus::Stored),
                "{mode:?} {route:?}"
            );
            let routed = broker.cluster_state().unwrap().routed;
            assert_eq!(
                routed,
                if route == ConfirmRoute::ViaCluster {
                    1000
                } else {
                    0
                }
            );
            results.push(broker.queue_stats()[0]);
            broker.shutdown();
        }
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]), "{results:?}");
}

#[test]
fn shutdown_reports_unacknowledged_messages_closed() {
    // Stored and unconsumed (no consumer): ACKed already, so shutdown has nothing to
    // report.
    let broker = start(vec![QueueConfig::new(QueueMode::Priority)], 1);
    let (p, acks) = producer(&broker, 100);
    publish(&p, 0, 0..3);
    broker.quiesce().unwrap();
    broker.shutdown();
    assert!(
        acks.lock()
            .unwrap()
            .iter()
            .all(|a| a.status == AckStatus::Stored)
    );
    assert_eq!(acks.lock().unwrap().len(), 3);
    // Stored and waiting for the replicas' receipts: reported `Closed` at shutdown, once.
    let broker = support::start(replicated());
    let (p, acks) = producer(&broker, 100);
    let guids = publish(&p, 0, 0..3);
    broker.quiesce().unwrap();
    assert!(acks.lock().unwrap().is_empty());
    broker.shutdown();
    let acks = acks.lock().unwrap();
    assert_eq!(acks.len(), 3);
    assert!(
        acks.iter()
            .all(|a| a.status == AckStatus::Closed && guids.contains(&a.guid))
    );
    assert!(
        p.publish(QueueId(0), Payload::default()).is_err(),
        "publishing after shutdown is an error"
    );
}

#[test]
fn invalid_queue_configurations_are_errors_that_name_the_setting() {
    let err = |q: QueueConfig| {
        Broker::start(BrokerConfig {
            queues: vec![QueueConfig::new(QueueMode::Priority), q],
            ..BrokerConfig::default()
        })
        .unwrap_err()
    };
    let cases = [
        (
            QueueConfig {
                capacity: 0,
                ..QueueConfig::new(QueueMode::Priority)
            },
            BrokerError::QueueCapacityOutOfRange {
                queue: QueueId(1),
                capacity: 0,
            },
            "capacity 0",
        ),
        (
            QueueConfig::new(QueueMode::Fanout { apps: MAX_APPS + 1 }),
            BrokerError::AppsOutOfRange {
                queue: QueueId(1),
                apps: MAX_APPS + 1,
            },
            "give 1 to MAX_APPS (64)",
        ),
        (
            QueueConfig::new(QueueMode::Fanout { apps: 0 }),
            BrokerError::AppsOutOfRange {
                queue: QueueId(1),
                apps: 0,
            },
            "0 fanout apps",
        ),
        (
            QueueConfig {
                window: 0,
                ..QueueConfig::new(QueueMode::Priority)
            },
            BrokerError::ZeroWindow { queue: QueueId(1) },
            "window",
        ),
    ];
    for (queue, expected, says) in cases {
        let e = err(queue);
        assert_eq!(e, expected);
        let text = e.to_string();
        assert!(
            text.starts_with("queue 1:") && text.contains(says),
            "{text}"
        );
    }
    let broker = start(vec![QueueConfig::new(QueueMode::Fanout { apps: 2 })], 1);
    let open = |q, a| {
        broker
            .open_consumer(
                QueueId(q),
                AppId(a),
                ConsumerOptions::default(),
                |_: &[Delivery]| {},
            )
            .unwrap_err()
    };
    assert_eq!(open(0, 2), BrokerError::UnknownApp(QueueId(0), AppId(2)));
    assert_eq!(open(3, 0), BrokerError::UnknownQueue(QueueId(3)));
}

#[test]
fn a_dropped_consumer_is_closed_and_receives_nothing_more() {
    let broker = start(vec![QueueConfig::new(QueueMode::Priority)], 1);
    let (p, acks) = producer(&broker, 64);
    let (dropped, seen_dropped) = consumer(&broker, 0, 0, ConsumerOptions::default());
    drop(dropped);
    let (_kept, seen_kept) = consumer(&broker, 0, 0, ConsumerOptions::default());
    let guids = publish(&p, 0, 0..10);
    broker.quiesce().unwrap();
    assert!(
        seen_dropped.lock().unwrap().is_empty(),
        "a dropped consumer was delivered {} messages",
        seen_dropped.lock().unwrap().len()
    );
    assert_eq!(
        seen_kept.lock().unwrap().len(),
        10,
        "the other takes them all"
    );
    let outcome = check_conservation(&broker, &guids, &acks.lock().unwrap());
    assert!(guids.iter().all(|g| outcome[g] == AckStatus::Stored));
}
