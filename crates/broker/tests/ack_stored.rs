//! A producer's ACK means stored (with its replication quorum), not consumed: it goes once,
//! and the credits come back with it. Each test failed on the code that ACKed at release.

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use zerodispatch_broker::*;

mod support;

use support::*;

/// A broker of one queue of `mode` with `replication`, on `session_processors`.
fn start(replication: Option<Replication>, mode: QueueMode, session_processors: usize) -> Broker {
    let config = with(one_queue(mode), |c| c.replication = replication);
    support::start(with(config, |c| c.session_processors = session_processors))
}

/// Each outcome in `acks`, as (GUID, status).
fn statuses(acks: &Log<Ack>) -> Vec<(Guid, AckStatus)> {
    mapped(acks, |a| (a.guid, a.status))
}

/// `Stored` for each of `guids`.
fn acked(guids: &[Guid]) -> Vec<(Guid, AckStatus)> {
    guids.iter().map(|&g| (g, AckStatus::Stored)).collect()
}

/// Checks the queue's (`first`, released, held), `first` read by `read` (confirms or acked).
fn assert_queue(broker: &Broker, read: fn(&QueueStats) -> u64, expected: (u64, u64, u64)) {
    let q = broker.queue_stats()[0];
    assert_eq!((read(&q), q.released, q.held), expected, "{q:?}");
}

#[test]
fn an_ack_arrives_with_no_consumer_attached_at_all() {
    let broker = start(None, QueueMode::Priority, 1);
    let (_p, acks, guids) = published(&broker, 100, 10);
    assert_eq!(statuses(&acks), acked(&guids), "ACKed at store, in order");
    let q = broker.queue_stats()[0];
    let counts = (q.stored, q.acked, q.pushed, q.released, q.held);
    assert_eq!(counts, (10, 10, 0, 0, 10), "ACKed, not delivered, held");
    // A consumer now gets every message; its confirms release them, and no ACK comes.
    let (_c, seen) = consumer_of(&broker, 0);
    broker.quiesce().unwrap();
    assert_eq!(support::guids(&seen), guids);
    assert_queue(&broker, |q| q.confirms, (10, 10, 0));
    assert_eq!(len(&acks), 10, "nothing more at release");
    assert_eq!(broker.session_stats().acks, 10);
}

#[test]
fn an_ack_arrives_before_the_consumer_confirms_and_the_credits_come_back_at_store() {
    // The consumer's session processor holds its delivery; the producer's reports the ACK.
    let broker = start(None, QueueMode::Priority, 2);
    let (ack_tx, ack_rx) = mpsc::channel();
    let acks: Log<Ack> = Log::default();
    let mut record = recording(&acks);
    let p = broker.open_producer(1, move |b: &[Ack]| {
        record(b);
        let _ = ack_tx.send(());
    });
    let p = p.unwrap();
    let (in_tx, in_rx) = mpsc::channel();
    let (out_tx, out_rx) = mpsc::channel::<()>();
    let out_rx = Mutex::new(out_rx);
    let _c = consumer_calling(&broker, move |b: &[Delivery]| {
        let _ = in_tx.send(b.len());
        // Hold the delivery (unconfirmed) until the test lets go.
        let _ = out_rx.lock().unwrap().recv_timeout(Duration::from_secs(20));
    });
    let first = p.try_send(QueueId(0), Payload::default()).unwrap();
    let ten = Duration::from_secs(10);
    assert_eq!(in_rx.recv_timeout(ten), Ok(1), "delivered");
    let unconfirmed = "the ACK came while the consumer holds the message unconfirmed";
    ack_rx.recv_timeout(ten).expect(unconfirmed);
    assert_eq!(statuses(&acks), acked(&[first]));
    assert_queue(&broker, |q| q.confirms, (0, 0, 1));
    // At a cap of 1, the credit came back with the ACK: another message can go now.
    wait_for("the credit", || p.unconfirmed() == 0);
    assert_eq!(p.unconfirmed(), 0, "the credit is back at store");
    let free = "a credit is free while the first is still unconsumed";
    let second = p.try_send(QueueId(0), Payload::default()).expect(free);
    ack_rx.recv_timeout(ten).unwrap();
    assert_eq!(statuses(&acks), acked(&[first, second]));
    // Let the consumer go: both are confirmed and released, and no more ACKs come.
    drop(out_tx);
    broker.quiesce().unwrap();
    assert_queue(&broker, |q| q.confirms, (2, 2, 0));
    assert_eq!(len(&acks), 2);
}

#[test]
fn the_producers_credits_come_back_at_store_with_no_consumer() {
    let broker = start(None, QueueMode::Priority, 1);
    let (p, acks) = producer(&broker, 4);
    for round in 1..=3 {
        for _ in 0..4 {
            let back = "a credit: the last round's came back at store";
            p.try_send(QueueId(0), Payload::default()).expect(back);
        }
        broker.quiesce().unwrap();
        assert_eq!(p.unconfirmed(), 0);
        assert_eq!(len(&acks), 4 * round);
    }
    assert_eq!(broker.queue_stats()[0].held, 12, "none consumed");
}

#[test]
fn with_a_quorum_no_ack_until_the_receipts_then_exactly_one() {
    let broker = start(replication(3, 2), QueueMode::Fanout { apps: 2 }, 1);
    let (p, acks) = producer(&broker, 100);
    let (_c0, seen0) = consumer_of(&broker, 0);
    let (_c1, seen1) = consumer_of(&broker, 1);
    let guids = publish(&p, 0, 0..5);
    broker.quiesce().unwrap();
    // Confirmed by both apps, but neither ACKed nor released before the quorum.
    assert_eq!((len(&seen0), len(&seen1), len(&acks)), (5, 5, 0));
    let q = broker.queue_stats()[0];
    assert_eq!((q.confirms, q.acked, q.released, q.held), (10, 0, 0, 5));
    // One replica: below the quorum. The same replica again: a duplicate, not a second.
    receipts(&broker, &guids, 0);
    receipted(&broker, &guids, 0);
    assert_eq!(len(&acks), 0, "one distinct receipt of 2");
    let q = broker.queue_stats()[0];
    assert_eq!((q.receipts, q.duplicate_receipts), (5, 5));
    // A second replica: the quorum. Each is ACKed once and released (shares confirmed).
    receipted(&broker, &guids, 2);
    assert_eq!(statuses(&acks), acked(&guids));
    assert_queue(&broker, |q| q.acked, (5, 5, 0));
    // The third replica's receipts come after the release: counted, ignored, no ACK.
    receipts(&broker, &guids, 1);
    receipted(&broker, &[Guid::new(ProducerId(99), 0)], 1);
    assert_eq!(len(&acks), 5, "exactly one ACK each");
    let q = broker.queue_stats()[0];
    assert_eq!((q.receipts, q.unknown_receipts), (10, 6));
    assert_eq!(broker.cluster_state().unwrap().receipts_routed, 21);
}

#[test]
fn a_quorum_reached_before_the_confirms_acks_at_once_and_the_confirms_release() {
    let broker = start(replication(1, 1), QueueMode::Priority, 1);
    let (_p, acks, guids) = published(&broker, 100, 3);
    receipted(&broker, &guids, 0);
    assert_eq!(statuses(&acks), acked(&guids), "ACKed with no consumer");
    assert_eq!(broker.queue_stats()[0].held, 3, "held for the consumers");
    let (_c, seen) = consumer_of(&broker, 0);
    broker.quiesce().unwrap();
    assert_queue(&broker, |q| q.acked, (3, 3, 0));
    assert_eq!((len(&seen), len(&acks)), (3, 3));
}

#[test]
fn a_quorum_that_never_comes_times_out_at_the_producer_and_is_closed_at_shutdown() {
    let broker = start(replication(2, 2), QueueMode::Priority, 1);
    let (timed, acks) = producer_with(&broker, timeout(Duration::from_millis(30)));
    let late = timed.send(QueueId(0), Payload::default()).unwrap();
    let (open, open_acks) = producer(&broker, 100);
    let pending = open.send(QueueId(0), Payload::default()).unwrap();
    broker.quiesce().unwrap();
    receipt(&broker, late, 0).unwrap();
    receipt(&broker, pending, 1).unwrap();
    // One receipt of two: the confirm timeout reports it, once.
    wait_for("the timeout", || !acks.lock().unwrap().is_empty());
    assert_eq!(statuses(&acks), vec![(late, AckStatus::TimedOut)]);
    assert_eq!(timed.unconfirmed(), 0);
    // Its second receipt: the ACK comes late, counted and not reported.
    receipted(&broker, &[late], 1);
    assert_eq!((len(&acks), broker.session_stats().late_acks), (1, 1));
    let held = broker.queue_stats()[0].held;
    assert_eq!(held, 2, "no consumer: both still held");
    // The other never reaches its quorum: shutdown reports it `Closed`, once.
    assert_eq!(len(&open_acks), 0);
    broker.shutdown();
    assert_eq!(statuses(&open_acks), vec![(pending, AckStatus::Closed)]);
    let refused = open.send(QueueId(0), Payload::default());
    assert!(matches!(refused, Err(SendError::ShutDown(_))));
}

#[test]
fn bad_replication_settings_and_receipts_are_errors_that_say_what_to_change() {
    for (replicas, quorum) in [(0, 0), (3, 0), (3, 4), (MAX_REPLICAS + 1, 1)] {
        let config = one_queue(QueueMode::Priority);
        let config = with(config, |c| c.replication = replication(replicas, quorum));
        let e = Broker::start(config).unwrap_err();
        assert_eq!(e, BrokerError::ReplicationOutOfRange { replicas, quorum });
        assert!(e.to_string().contains("MAX_REPLICAS (32)"), "{e}");
    }
    let guid = Guid::new(ProducerId(0), 0);
    // Without replication, no replica exists.
    let broker = start(None, QueueMode::Priority, 1);
    let unknown = |replica, replicas| BrokerError::UnknownReplica {
        replica: ReplicaId(replica),
        replicas,
    };
    let e = receipt(&broker, guid, 0).unwrap_err();
    assert_eq!(e, unknown(0, 0));
    assert!(e.to_string().contains("no replica 0"), "{e}");
    broker.shutdown();
    let broker = start(replication(2, 1), QueueMode::Priority, 1);
    assert_eq!(receipt(&broker, guid, 2).unwrap_err(), unknown(2, 2));
    let elsewhere = Receipt {
        queue: QueueId(4),
        guid,
        replica: ReplicaId(0),
    };
    let refused = broker.replica_receipt(elsewhere).unwrap_err();
    assert_eq!(refused, BrokerError::UnknownQueue(QueueId(4)));
    // Well formed, for a message never stored: counted, ignored.
    receipted(&broker, &[guid], 1);
    assert_eq!(broker.queue_stats()[0].unknown_receipts, 1);
}

#[test]
fn a_fanout_share_dropped_by_a_closing_consumer_releases_only_after_the_quorum() {
    let broker = start(replication(1, 1), QueueMode::Fanout { apps: 2 }, 3);
    let (p, acks) = producer(&broker, 100);
    let (_c0, seen0) = consumer_of(&broker, 0);
    // App 1's consumer confirms explicitly, and never does: it holds its delivery.
    let (in_tx, in_rx) = mpsc::channel();
    let in_tx = Mutex::new(in_tx);
    let c1 = open_consumer(&broker, (0, 1), explicit(None), move |_: &[Delivery]| {
        let _ = in_tx.lock().unwrap().send(());
    });
    let guid = publish(&p, 0, 0..1)[0];
    in_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // Closed holding the share: dropped; app 0 confirms; without a receipt, no ACK nor release.
    broker.close_consumer(&c1).unwrap();
    wait_for("the drop", || broker.queue_stats()[0].dropped_shares > 0);
    broker.quiesce().unwrap();
    let q = broker.queue_stats()[0];
    let counts = (q.confirms, q.dropped_shares, q.acked, q.released, q.held);
    assert_eq!(counts, (1, 1, 0, 0, 1));
    assert_eq!((len(&seen0), len(&acks)), (1, 0));
    // The receipt: ACKed once, and released at once (no share is left).
    receipted(&broker, &[guid], 0);
    assert_eq!(statuses(&acks), acked(&[guid]));
    assert_queue(&broker, |q| q.acked, (1, 1, 0));
}

/// Only messages awaiting their quorum are found by GUID: a receipt past it is unknown.
#[test]
fn a_receipt_past_the_quorum_for_a_message_still_held_is_unknown() {
    let broker = start(replication(3, 1), QueueMode::Priority, 1);
    let (_p, acks, guids) = published(&broker, 100, 3);
    receipted(&broker, &guids, 0);
    assert_eq!(statuses(&acks), acked(&guids), "the quorum of one: ACKed");
    // No consumer: the messages are held, past their quorum.
    receipts(&broker, &guids, 1);
    receipted(&broker, &guids, 0);
    let q = broker.queue_stats()[0];
    let counts = (q.receipts, q.unknown_receipts, q.duplicate_receipts);
    assert_eq!(counts, (3, 6, 0), "{q:?}");
    assert_eq!((q.acked, q.held, q.released), (3, 3, 0), "{q:?}");
    assert_eq!(len(&acks), 3, "one ACK each");
    // A consumer still gets them, and its confirms release them.
    let (_c, seen) = consumer_of(&broker, 0);
    broker.quiesce().unwrap();
    assert_eq!(len(&seen), 3);
    assert_queue(&broker, |q| q.confirms, (3, 3, 0));
}
