//! Named producers and deduplication: a message published again is stored and delivered
//! once; anonymous producers are never deduplicated; the name table is bounded (LRU of the
//! closed names); `last_stored` says where to resume.

use std::collections::BTreeMap;
use std::time::Duration;

use zerodispatch_broker::*;

mod support;

use support::*;

const Q: QueueId = QueueId(0);

use support::priority_broker as start;

/// A broker of one priority queue configured by `f`, and a consumer of it that logs.
fn start_consumed(f: impl FnOnce(&mut BrokerConfig)) -> (Broker, Consumer, Log<Delivery>) {
    let broker = start(f);
    let (c, seen) = consumer(&broker, 0, 0, ConsumerOptions::default());
    (broker, c, seen)
}

/// Publishes each of `ids` as its publish id and payload handle; waits until all are handled.
fn publish_ids(broker: &Broker, p: &Producer, ids: impl IntoIterator<Item = u64>) {
    for id in ids {
        p.publish_with_id(Q, payload(id), id).unwrap();
    }
    broker.quiesce().unwrap();
}

/// How many times each publish id was delivered.
fn delivered_ids(seen: &Log<Delivery>) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for d in seen.lock().unwrap().iter() {
        *counts.entry(d.guid.seq()).or_default() += 1;
    }
    counts
}

/// Checks that the ids delivered are `ids`, each once.
fn assert_delivered_once(seen: &Log<Delivery>, ids: &[u64]) {
    let counts = delivered_ids(seen);
    let delivered: Vec<u64> = counts.keys().copied().collect();
    assert_eq!(delivered, ids, "{counts:?}");
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
}

#[test]
fn a_message_published_again_is_acked_again_but_stored_and_delivered_once() {
    let (broker, _c, seen) = start_consumed(|_| {});
    let (first, first_acks) = named(&broker, "orders", capped(64));
    publish_ids(&broker, &first, 0..10);
    // Its connection is lost (with the ACKs of 5..10, say): the next one publishes 5..15.
    assert!(first.close(Duration::from_secs(5)));
    assert_eq!(len(&first_acks), 10);
    let (second, second_acks) = named(&broker, "orders", capped(64));
    assert_eq!(second.id(), first.id(), "a name keeps its id");
    assert_eq!(broker.last_stored("orders", Q).unwrap(), Some(9));
    publish_ids(&broker, &second, 5..15);
    assert_eq!(statuses(&second_acks), [AckStatus::Stored; 10]);
    assert_delivered_once(&seen, &(0..15).collect::<Vec<_>>());
    let q = broker.queue_stats()[0];
    assert_eq!((q.stored, q.deduplicated, q.acked), (15, 5, 20));
    assert_eq!(broker.last_stored("orders", Q).unwrap(), Some(14));
}

#[test]
fn old_and_new_producers_of_a_name_interleaving_the_same_ids_lose_and_duplicate_nothing() {
    const N: u64 = 5_000;
    for round in 0..20 {
        let (broker, _c, seen) = start_consumed(|c| c.session_processors = 2);
        let (old, _) = named(&broker, "p", capped(N as usize));
        for id in 0..N {
            old.publish_with_id(Q, payload(id), id).unwrap();
        }
        // Closed at once, its PUTs on their way while the new producer sends the same ids.
        old.close(Duration::ZERO);
        let (new, new_acks) = named(&broker, "p", capped(N as usize));
        publish_ids(&broker, &new, 0..N);
        let acks = statuses(&new_acks);
        assert_eq!(acks.len() as u64, N, "round {round}");
        let stored = acks.iter().all(|s| *s == AckStatus::Stored);
        assert!(stored, "round {round}");
        let counts = delivered_ids(&seen);
        assert_eq!(counts.len() as u64, N, "round {round}: lost some");
        let once = counts.values().all(|&n| n == 1);
        assert!(once, "round {round}: duplicated some");
        let q = broker.queue_stats()[0];
        assert_eq!(q.stored, N, "round {round}");
        // The old one's batch at its close was `NotSent`; the rest reached the queue.
        assert!(q.deduplicated <= N, "round {round}");
        broker.shutdown();
    }
}

#[test]
fn anonymous_producers_are_never_deduplicated() {
    let (broker, _c, seen) = start_consumed(|_| {});
    let (p, _acks) = producer(&broker, 16);
    assert!(p.id().0 >= 1024, "anonymous ids start above the names");
    p.publish_with_id(Q, payload(1), 3).unwrap();
    broker.quiesce().unwrap();
    p.publish_with_id(Q, payload(2), 3).unwrap();
    p.publish(Q, payload(3)).unwrap();
    broker.quiesce().unwrap();
    assert_eq!(len(&seen), 3);
    let q = broker.queue_stats()[0];
    assert_eq!((q.stored, q.deduplicated), (3, 0));
}

#[test]
fn a_named_producer_numbers_its_messages_itself() {
    let broker = start(|_| {});
    let (p, _) = named(&broker, "n", capped(16));
    let refused = p.publish(Q, payload(1)).unwrap_err();
    assert_eq!(refused, SendError::NeedsPublishId(payload(1)));
    assert_eq!(refused.into_payload(), payload(1));
    let (sent, tried) = (p.send(Q, payload(2)), p.try_send(Q, payload(3)));
    assert!(matches!(sent, Err(SendError::NeedsPublishId(_))));
    assert!(matches!(tried, Err(SendError::NeedsPublishId(_))));
    let guid = p.publish_with_id(Q, payload(4), 41).unwrap();
    assert_eq!(guid, Guid::new(p.id(), 41));
}

#[test]
fn the_name_table_is_bounded_by_open_names_and_a_new_name_takes_the_least_recently_closed() {
    let broker = start(|c| c.max_producer_names = 2);
    let (_c, seen) = consumer(&broker, 0, 0, ConsumerOptions::default());
    let (a, _) = named(&broker, "a", capped(4));
    let (b, _) = named(&broker, "b", capped(4));
    let open = |name| broker.open_named_producer(name, ProducerConfig::default(), |_: &[Ack]| {});
    assert!(matches!(open("a"), Err(BrokerError::NameInUse(ref n)) if &**n == "a"));
    let max_producer_names = 2;
    assert!(open("c").map(|_| ()) == Err(BrokerError::TooManyNames { max_producer_names }));
    let old_guid = a.publish_with_id(Q, payload(0), 0).unwrap();
    let (a_id, b_id) = (a.id(), b.id());
    a.close(Duration::from_secs(1));
    b.close(Duration::from_secs(1));
    assert_eq!(broker.last_stored("a", Q).unwrap(), Some(0));
    // Closed, `a` first: the new name takes `a`'s place, at its next generation.
    let (c, _) = named(&broker, "c", capped(4));
    assert_eq!((c.id(), c.generation()), (a_id, 1));
    assert!(!broker.knows_name("a") && broker.knows_name("b"));
    assert_eq!(broker.last_stored("a", Q).unwrap(), None, "forgotten");
    let c_stored = broker.last_stored("c", Q).unwrap();
    assert_eq!(c_stored, None, "nothing of `a`'s");
    // `b` is still known: same id, same generation, its record kept.
    let (b, _) = named(&broker, "b", capped(4));
    assert_eq!((b.id(), b.generation()), (b_id, 0));
    // Every name is held: a new one (or the forgotten `a`) is refused.
    assert!(matches!(open("a"), Err(BrokerError::TooManyNames { .. })));
    c.close(Duration::from_secs(1));
    // `a` again: a new name now, with new GUIDs, and its id 0 is stored again.
    let (a, acks) = named(&broker, "a", capped(4));
    assert_eq!((a.id(), a.generation()), (a_id, 2));
    let new_guid = a.publish_with_id(Q, payload(1), 0).unwrap();
    assert_ne!(new_guid, old_guid);
    assert_eq!(new_guid, a.guid(0));
    assert_eq!(new_guid.generation(), 2);
    wait_for("the new `a`'s ACK", || len(&acks) == 1);
    assert_eq!(acks.lock().unwrap()[0].status, AckStatus::Stored);
    wait_for("both deliveries", || len(&seen) == 2);
    assert_eq!(support::guids(&seen), [old_guid, new_guid]);
    // Anonymous producers are not bounded by the table: their ids start above it.
    assert_eq!(support::deaf_producer(&broker, 4).id(), ProducerId(2));
}

#[test]
fn a_broker_without_names_refuses_named_producers_and_a_table_too_large_is_refused() {
    let broker = start(|c| c.max_producer_names = 0);
    let refused = broker.open_named_producer("x", ProducerConfig::default(), |_: &[Ack]| {});
    assert!(matches!(refused, Err(BrokerError::TooManyNames { .. })));
    assert_eq!(support::deaf_producer(&broker, 4).id(), ProducerId(0));
    let too_many = with(support::one_queue(QueueMode::Priority), |c| {
        c.max_producer_names = MAX_PRODUCER_NAMES + 1
    });
    let err = Broker::start(too_many).unwrap_err();
    let out_of_range = matches!(err, BrokerError::ProducerNamesOutOfRange { .. });
    assert!(out_of_range, "{err}");
}

#[test]
fn last_stored_answers_per_name_and_queue() {
    let broker = start(|c| c.queues = vec![QueueConfig::new(QueueMode::Priority); 2]);
    assert_eq!(broker.last_stored("never", Q).unwrap(), None);
    let (p, _) = named(&broker, "p", capped(16));
    assert_eq!(broker.last_stored("p", Q).unwrap(), None);
    p.publish_with_id(Q, payload(0), 7).unwrap();
    p.publish_with_id(QueueId(1), payload(1), 3).unwrap();
    broker.quiesce().unwrap();
    assert_eq!(broker.last_stored("p", Q).unwrap(), Some(7));
    assert_eq!(broker.last_stored("p", QueueId(1)).unwrap(), Some(3));
    let unknown = Err(BrokerError::UnknownQueue(QueueId(2)));
    assert_eq!(broker.last_stored("p", QueueId(2)), unknown);
    let rt = runtime();
    let p_stored = rt.block_on(broker.last_stored_async("p", Q)).unwrap();
    assert_eq!(p_stored, Some(7));
    assert_eq!(rt.block_on(broker.last_stored_async("q", Q)).unwrap(), None);
    // A message the queue rejects (full) is not recorded.
    let small = start(|c| c.queues = vec![sized(QueueMode::Priority, 1)]);
    let (p, acks) = named(&small, "p", capped(16));
    p.publish_with_id(Q, payload(0), 1).unwrap();
    p.publish_with_id(Q, payload(1), 2).unwrap();
    small.quiesce().unwrap();
    let full = [AckStatus::Stored, AckStatus::RejectedQueueFull];
    assert_eq!(statuses(&acks), full);
    assert_eq!(small.last_stored("p", Q).unwrap(), Some(1));
}

#[test]
fn a_duplicate_payload_is_released_and_a_duplicate_awaiting_its_quorum_is_acked_to_the_new_producer()
 {
    let released: Log<u64> = Log::default();
    let sink = released.clone();
    let (broker, _c, seen) = start_consumed(|c| {
        c.replication = replication(1, 1);
        c.on_release = Some(OnRelease::new(move |p: &[Payload]| {
            sink.lock().unwrap().extend(p.iter().map(|p| p.handle))
        }));
    });
    let (old, old_acks) = named(&broker, "r", capped(16));
    let guid = old.publish_with_id(Q, payload(100), 0).unwrap();
    broker.quiesce().unwrap();
    old.close(Duration::ZERO); // stored, no receipt yet: no ACK
    broker.quiesce().unwrap();
    assert_eq!(old_acks.lock().unwrap()[0].status, AckStatus::Closed);
    let (new, new_acks) = named(&broker, "r", capped(16));
    new.publish_with_id(Q, payload(200), 0).unwrap();
    broker.quiesce().unwrap();
    assert_eq!(len(&new_acks), 0, "stored, not yet replicated");
    assert_eq!(*released.lock().unwrap(), [200], "the duplicate's payload");
    receipted(&broker, &[guid], 0);
    let acks = support::logged(&new_acks);
    assert_eq!(acks.len(), 1);
    let ack = (acks[0].status, acks[0].payload);
    assert_eq!(ack, (AckStatus::Stored, payload(200)));
    assert_eq!(len(&seen), 1);
    assert_eq!(*released.lock().unwrap(), [200, 100]);
    // The old PUT's ACK (`Closed`, counted late) lets its session go; two sessions stay.
    assert_eq!(broker.queue_stats()[0].superseded, 1);
    let gone = "the old producer's session never went";
    wait_for(gone, || sessions_alive(&broker) == 2);
    assert_eq!(sessions_alive(&broker), 2, "{gone}");
}

/// The outcomes by payload handle, once a timer producer's 50 ms tick sent its batch.
fn after_the_tick(broker: &Broker, acks: &Log<Ack>) -> Vec<(u64, AckStatus)> {
    std::thread::sleep(Duration::from_millis(200));
    broker.quiesce().unwrap();
    let mut outcomes = mapped(acks, |a| (a.payload.handle, a.status));
    outcomes.sort_by_key(|&(h, _)| h);
    outcomes
}

/// Mixed numberings (which the docs forbid) cannot put one GUID in flight twice either.
#[test]
fn a_guid_in_flight_from_the_other_numbering_is_not_sent_and_both_get_one_outcome() {
    let (broker, _c, seen) = start_consumed(|_| {});
    // The timer holds the batch while the others come; anonymous, to number both ways.
    let (p, acks) = support::producer_with(&broker, timer(Duration::from_millis(50)));
    // The producer's own numbering first, then the caller's repeating its GUID.
    let own = p.publish(Q, payload(1)).unwrap();
    p.publish_with_id(Q, payload(2), own.seq()).unwrap();
    // The caller's first, then the producer's own reaching its GUID.
    p.publish_with_id(Q, payload(3), own.seq() + 1).unwrap();
    let next = p.publish(Q, payload(4)).unwrap();
    assert_eq!(next.seq(), own.seq() + 1, "the producer's next own number");
    let outcomes = after_the_tick(&broker, &acks);
    let (stored, unsent) = (AckStatus::Stored, AckStatus::NotSent);
    let each = [(1, stored), (2, unsent), (3, stored), (4, unsent)];
    assert_eq!(outcomes, each);
    assert_eq!(len(&seen), 2);
}

#[test]
fn a_publish_id_in_flight_on_the_producer_is_not_sent_and_both_get_one_outcome() {
    let (broker, _c, seen) = start_consumed(|_| {});
    // Timer aggregation holds the first in the session's batch while the second comes.
    let (p, acks) = named(&broker, "twice", timer(Duration::from_millis(50)));
    p.publish_with_id(Q, payload(1), 9).unwrap();
    p.publish_with_id(Q, payload(2), 9).unwrap();
    let outcomes = after_the_tick(&broker, &acks);
    assert_eq!(outcomes, [(1, AckStatus::Stored), (2, AckStatus::NotSent)]);
    broker.quiesce().unwrap();
    assert_eq!(len(&seen), 1);
}

/// Regression: a queue remembering only the highest id took a lower unstored id for a duplicate.
#[test]
fn a_lower_id_never_stored_is_stored_when_published_after_a_higher_one() {
    let (broker, _c, seen) = start_consumed(|_| {});
    let (producer, acks) = named(&broker, "orders", capped(64));
    publish_ids(&broker, &producer, [0, 1, 3]);
    let window = broker.stored_window("orders", Q).unwrap();
    assert_eq!(window.highest(), Some(3));
    let by_id: Vec<_> = (0..5).map(|id| window.stored(id)).collect();
    let (yes, no) = (Some(true), Some(false));
    assert_eq!(by_id, [yes, yes, no, yes, no], "2 is not stored");
    publish_ids(&broker, &producer, [2, 3]);
    assert_delivered_once(&seen, &[0, 1, 2, 3]);
    let q = broker.queue_stats()[0];
    assert_eq!((q.stored, q.deduplicated), (4, 1), "only 3 was a duplicate");
    assert_eq!(len(&acks), 5);
    assert!((0..=3).all(|id| broker.stored_window("orders", Q).unwrap().stored(id) == Some(true)));
}

/// An id older than the window is refused `RejectedOutOfWindow`, not stored nor ACKed.
#[test]
fn an_id_older_than_the_window_is_refused_not_acked() {
    let (broker, _c, seen) = start_consumed(|c| c.dedup_window = 64);
    let (producer, acks) = named(&broker, "orders", capped(64));
    publish_ids(&broker, &producer, [100]);
    publish_ids(&broker, &producer, [36, 37]);
    let by_id = mapped(&acks, |a| (a.guid.seq(), a.status));
    let expected = [
        (100, AckStatus::Stored),
        (36, AckStatus::RejectedOutOfWindow),
        (37, AckStatus::Stored),
    ];
    assert_eq!(by_id, expected);
    let delivered: Vec<u64> = delivered_ids(&seen).keys().copied().collect();
    assert_eq!(delivered, [37, 100]);
    let q = broker.queue_stats()[0];
    assert_eq!((q.stored, q.out_of_window, q.deduplicated), (2, 1, 0));
    assert_eq!(broker.stored_window("orders", Q).unwrap().stored(36), None);
}

/// Regression: `u64::MAX` meant "nothing stored", erasing the name's history when stored.
#[test]
fn u64_max_is_an_id_like_any_other() {
    let (broker, _c, seen) = start_consumed(|_| {});
    let (producer, acks) = named(&broker, "orders", capped(64));
    let max = u64::MAX;
    for id in [max - 1, max, max - 1, max] {
        publish_ids(&broker, &producer, [id]);
    }
    assert!(statuses(&acks).iter().all(|s| *s == AckStatus::Stored));
    assert_delivered_once(&seen, &[max - 1, max]);
    let q = broker.queue_stats()[0];
    assert_eq!((q.stored, q.deduplicated), (2, 2));
    assert_eq!(broker.last_stored("orders", Q).unwrap(), Some(max));
}

/// A named producer asking for more in flight than the window covers is refused at open.
#[test]
fn a_named_producer_may_not_have_more_in_flight_than_the_window_covers() {
    let broker = start(|c| c.dedup_window = 128);
    let refused = broker.open_named_producer("big", capped(129), |_: &[Ack]| {});
    let Err(error @ BrokerError::WindowBelowUnconfirmed { .. }) = refused else {
        panic!(
            "expected WindowBelowUnconfirmed, got {:?}",
            refused.map(|_| ())
        );
    };
    assert!(error.to_string().contains("129") && error.to_string().contains("128"));
    let opened = broker.open_named_producer("big", capped(128), |_: &[Ack]| {});
    assert!(opened.is_ok());
    // Anonymous producers are not deduplicated: no such bound.
    let anonymous = broker.open_producer_with(capped(1024), |_: &[Ack]| {});
    assert!(anonymous.is_ok());
    for dedup_window in [0, 63, 100, (MAX_DEDUP_WINDOW << 1)] {
        let config = with(BrokerConfig::default(), |c| c.dedup_window = dedup_window);
        let refused = Err(BrokerError::DedupWindowOutOfRange { dedup_window });
        let started = Broker::start(config).map(|_| ());
        assert!(started == refused, "window {dedup_window}");
    }
}

/// A resend while the first copy awaits its quorum: both PUTs answered, the first counted late.
#[test]
fn a_message_resent_by_its_own_producer_while_awaiting_its_quorum_has_an_ack_per_put() {
    let (broker, _c, _seen) = start_consumed(|c| c.replication = replication(1, 1));
    // Long enough for the resend's ACK on a loaded machine (5 ms failed 1 in 20 runs).
    let (p, acks) = named(&broker, "again", timeout(Duration::from_millis(300)));
    let guid = p.publish_with_id(Q, payload(1), 0).unwrap();
    wait_for("the first outcome", || !acks.lock().unwrap().is_empty());
    assert_eq!(acks.lock().unwrap()[0].status, AckStatus::TimedOut);
    p.publish_with_id(Q, payload(2), 0).unwrap();
    broker.quiesce().unwrap();
    receipted(&broker, &[guid], 0);
    assert_eq!(statuses(&acks), [AckStatus::TimedOut, AckStatus::Stored]);
    let late = broker.session_stats().late_acks;
    assert_eq!(late, 1, "the first PUT's ACK, late");
    assert_eq!(broker.queue_stats()[0].superseded, 0);
    assert!(p.close(Duration::from_secs(5)));
    let gone = "the producer's session went: its ACKs are all in";
    wait_for(gone, || sessions_alive(&broker) == 1);
    assert_eq!(sessions_alive(&broker), 1, "{gone}");
}

#[test]
fn a_closed_producers_put_arriving_after_the_new_producers_copy_leaves_it_the_quorums_ack() {
    let broker = start(|c| (c.session_processors, c.replication) = (2, replication(1, 1)));
    // The old producer's processor is held: its PUT waits while the new one stores the same.
    let (old, old_acks) = named(&broker, "late", capped(16));
    assert_eq!(session_clients(&broker), [1, 0]);
    let held = hold(&broker, support::session(&broker));
    old.publish_with_id(Q, payload(1), 0).unwrap();
    // Its drain (which sends the PUT) waits behind the held processor: no outcome in time.
    assert!(!old.close(Duration::from_millis(20)));
    let (new, new_acks) = named(&broker, "late", capped(16));
    assert_eq!(session_clients(&broker), [1, 1]);
    let guid = new.publish_with_id(Q, payload(2), 0).unwrap();
    let q = || broker.queue_stats()[0];
    wait_for("the new producer's copy stored", || q().stored == 1);
    held.wait();
    wait_for("the old PUT deduplicated", || q().deduplicated == 1);
    receipted(&broker, &[guid], 0);
    let outcomes = |log| mapped(log, |a: &Ack| (a.status, a.payload));
    let quorums = "the open producer's message is stored: the quorum's ACK is its";
    let stored = [(AckStatus::Stored, payload(2))];
    assert_eq!(outcomes(&new_acks), stored, "{quorums}");
    assert_eq!(outcomes(&old_acks), [(AckStatus::Closed, payload(1))]);
    // The old PUT was answered `Closed` (superseded) and counted late by its session.
    assert_eq!(broker.queue_stats()[0].superseded, 1);
    assert_eq!(broker.session_stats().late_acks, 1);
}
