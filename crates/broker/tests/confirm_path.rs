//! The confirm path end to end (delivery, ACKs, back-pressure, closes, confirm modes); each
//! test ends with a conservation check.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use zerodispatch_broker::*;

mod support;

use support::guids as delivered;
use support::*;

/// [`check_conservation`] of what `acks` holds, and a check that each of `guids` is `Stored`.
fn all_stored(broker: &Broker, guids: &[Guid], acks: &Log<Ack>) -> Outcome {
    let outcome = check_conservation(broker, guids, acks);
    assert_each(&outcome, guids, AckStatus::Stored);
    outcome
}

/// One outcome per GUID at most, none without a held message, stored = released + held.
fn check_conservation(broker: &Broker, guids: &[Guid], acks: &Log<Ack>) -> Outcome {
    let outcome = support::outcomes(acks);
    let queues = broker.queue_stats();
    let sessions = broker.session_stats();
    let total = |read: fn(&QueueStats) -> u64| queues.iter().map(read).sum::<u64>();
    let (held, stored) = (total(|q| q.held), total(|q| q.stored));
    let (acked, released) = (total(|q| q.acked), total(|q| q.released));
    let count = |status| support::count_of(&outcome, status);
    let without = |g: &&Guid| !outcome.contains_key(g);
    let no_outcome = guids.iter().filter(without).count() as u64;
    assert_eq!(sessions.published, guids.len() as u64);
    let accounted = outcome.len() as u64 + no_outcome;
    let not_published = "no outcome for a GUID not published";
    assert_eq!(accounted, guids.len() as u64, "{not_published}");
    let only = format!("{no_outcome} messages without outcome but only {held} held");
    assert!(no_outcome <= held, "{only}");
    let acked_outcomes = count(AckStatus::Stored);
    let sent = format!("{acked_outcomes} Stored outcomes but the queues sent {acked}");
    assert!(acked_outcomes <= acked, "{sent}");
    assert!(acked <= stored, "an ACK for a message never stored");
    // Held and not acked-unreleased: waiting for the quorum, pending or reported closed.
    let waiting = held - (acked - released).min(held);
    let pending = "held messages are acked, pending or reported closed";
    assert!(
        waiting <= no_outcome + count(AckStatus::Closed),
        "{pending}"
    );
    let every = "every stored message is released or held";
    assert_eq!(stored, released + held, "{every}");
    outcome
}

#[test]
fn priority_delivers_each_message_to_one_consumer_and_acks_it_once() {
    let broker = start_on(vec![priority()], 2);
    let (p, acks) = producer(&broker, 4096);
    let (_a, seen_a) = consumer_of(&broker, 0);
    let (_b, seen_b) = consumer_of(&broker, 0);
    let guids = publish(&p, 0, 0..2000);
    broker.quiesce().unwrap();
    let (a, b) = (delivered(&seen_a), delivered(&seen_b));
    let both = format!("both consumers got messages: {} and {}", a.len(), b.len());
    assert!(!a.is_empty() && !b.is_empty(), "{both}");
    let mut all: Vec<Guid> = a.into_iter().chain(b).collect();
    all.sort();
    let mut expected = guids.clone();
    expected.sort();
    assert_eq!(all, expected, "every message delivered exactly once");
    all_stored(&broker, &guids, &acks);
    let q = broker.queue_stats()[0];
    let counts = (q.stored, q.pushed, q.confirms, q.acked, q.released, q.held);
    assert_eq!(counts, (2000, 2000, 2000, 2000, 2000, 0));
}

#[test]
fn queues_on_the_session_processors_deliver_ack_and_shut_down_as_on_their_own() {
    for session_processors in [1, 2] {
        let broker = support::start(BrokerConfig {
            queues: vec![priority(), fanout(2)],
            session_processors,
            queue_processors: 0,
            ..BrokerConfig::default()
        });
        let processors = broker.processor_stats().len();
        assert_eq!(processors, session_processors + 1, "sessions and cluster");
        assert!(broker.processors(ClientType::Queue).is_empty());
        let (p, acks) = producer(&broker, 4096);
        let (_a, seen_a) = consumer_of(&broker, 0);
        let (_f0, seen_f0) = consumer(&broker, 1, 0, Default::default());
        let (_f1, seen_f1) = consumer(&broker, 1, 1, Default::default());
        let mut guids = publish(&p, 0, 0..500);
        guids.extend(publish(&p, 1, 500..1000));
        broker.quiesce().unwrap();
        assert_eq!(delivered(&seen_a), guids[..500]);
        assert_eq!(delivered(&seen_f0), guids[500..]);
        assert_eq!(delivered(&seen_f1), guids[500..]);
        all_stored(&broker, &guids, &acks);
        let released: u64 = broker.queue_stats().iter().map(|q| q.released).sum();
        assert_eq!(released, 1000);
        broker.shutdown();
    }
}

#[test]
fn fanout_delivers_every_message_to_every_app_acks_it_once_and_releases_it_after_the_last() {
    // 30: BlazingMQ's fanout figure; MAX_APPS: every bit of the share mask.
    for apps in [3, 30, MAX_APPS] {
        let broker = start_on(vec![fanout(apps)], 2);
        let (p, acks) = producer(&broker, 4096);
        let seen: Vec<_> = (0..apps).map(|app| consumer_of(&broker, app)).collect();
        let guids = publish(&p, 0, 0..300);
        broker.quiesce().unwrap();
        for (app, (_, log)) in seen.iter().enumerate() {
            let in_order = format!("{apps} apps: app {app} got every message once, in order");
            assert_eq!(delivered(log), guids, "{in_order}");
            let own_app = |d: &Delivery| d.app == AppId(app as u16);
            assert!(log.lock().unwrap().iter().all(own_app));
        }
        all_stored(&broker, &guids, &acks);
        let q = broker.queue_stats()[0];
        let shares = 300 * u64::from(apps);
        let counts = (q.pushed, q.confirms, q.acked, q.released);
        assert_eq!(counts, (shares, shares, 300, 300));
    }
}

#[test]
fn a_full_table_rejects_with_a_clear_status_and_overwrites_nothing() {
    let broker = start_on(vec![sized(QueueMode::Priority, 4)], 1);
    let (_p, acks, guids) = published(&broker, 100, 10);
    let outcome = check_conservation(&broker, &guids, &acks);
    assert_eq!(support::count_of(&outcome, AckStatus::RejectedQueueFull), 6);
    assert_eq!(broker.queue_stats()[0].held, 4);
    assert_each(&outcome, &guids[..4], AckStatus::Stored); // ACKed with no consumer
    // The four held are the first four, intact: a consumer now gets exactly them.
    let (_c, seen) = consumer_of(&broker, 0);
    broker.quiesce().unwrap();
    let got = support::mapped(&seen, |d| (d.guid, d.payload.handle));
    let first_four: Vec<(Guid, u64)> = guids[..4].iter().copied().zip(0..4).collect();
    assert_eq!(got, first_four);
    check_conservation(&broker, &guids, &acks);
    assert_eq!(broker.queue_stats()[0].held, 0);
}

#[test]
fn a_producer_past_its_unacked_cap_gets_rejections_and_unknown_queues_are_rejected() {
    let broker = start_on(vec![priority()], 1);
    let (p, acks) = producer(&broker, 3);
    let mut guids = publish(&p, 0, 0..5);
    guids.push(p.publish(QueueId(9), Payload::default()).unwrap());
    broker.quiesce().unwrap();
    let outcome = check_conservation(&broker, &guids, &acks);
    let full = support::count_of(&outcome, AckStatus::RejectedProducerFull);
    assert_eq!(full, 2);
    assert_eq!(outcome[&guids[5]], AckStatus::RejectedUnknownQueue);
    let s = broker.session_stats();
    assert_eq!((s.rejected_producer_full, s.rejected_unknown_queue), (2, 1));
}

#[test]
fn robustness_cases_are_counted_never_a_panic() {
    let broker = start_on(vec![fanout(2)], 1);
    let (p, acks) = producer(&broker, 100);
    let guids = publish(&p, 0, 0..1);
    let (c0, seen0) = consumer_of(&broker, 0);
    broker.quiesce().unwrap();
    let g = guids[0];
    let token = seen0.lock().unwrap()[0].token;
    let confirm = |at, guid, consumer, mode| {
        let confirm = confirm_of(at, guid, token, consumer);
        broker.replica_confirm(confirm, mode).unwrap();
    };
    let unknown = Guid::new(ProducerId(77), 1); // at the token of a held message
    confirm((0, 0), unknown, c0.id(), ConfirmMode::Typed);
    confirm((5, 0), g, c0.id(), ConfirmMode::Inline); // unknown queue
    confirm((0, 0), g, c0.id(), ConfirmMode::Inline); // app 0 confirmed already: a duplicate
    // App 1 has no consumer: a confirm from a consumer the share was not pushed to.
    confirm((0, 1), g, ConsumerId(99), ConfirmMode::Boxed);
    broker.quiesce().unwrap();
    let q = broker.queue_stats()[0];
    let counted = (q.unknown_guid, q.duplicate_confirms, q.gone_consumer);
    assert_eq!(counted, (1, 1, 1));
    let cluster = ClusterState {
        routed: 3,
        receipts_routed: 0,
        unknown_queue: 1,
        queues: 1,
    };
    assert_eq!(broker.cluster_state().unwrap(), cluster);
    assert_eq!(q.held, 1, "still waiting for app 1");
    // A confirm arriving twice after release: the second finds no message (unknown GUID).
    let (c1, _) = consumer_of(&broker, 1);
    broker.quiesce().unwrap();
    confirm((0, 1), g, c1.id(), ConfirmMode::Typed);
    broker.quiesce().unwrap();
    assert_eq!(broker.queue_stats()[0].unknown_guid, 2);
    all_stored(&broker, &guids, &acks);
}

#[test]
fn closing_a_producer_reports_every_pending_message_and_counts_later_acks_late() {
    let broker = support::start(replicated());
    let (p, acks, guids) = published(&broker, 100, 5);
    // No wait: stored, waiting for receipts, each is reported `Closed`.
    assert!(!p.close(Duration::ZERO));
    broker.quiesce().unwrap();
    let outcome = check_conservation(&broker, &guids, &acks);
    assert_each(&outcome, &guids, AckStatus::Closed);
    // The receipts now come: their ACKs are counted late, not reported twice, none stale.
    let stale_before = support::stale(&broker);
    receipts(&broker, &guids, 0);
    broker.quiesce().unwrap();
    let s = broker.session_stats();
    assert_eq!((s.closed_reported, s.late_acks), (5, 5));
    assert_eq!(support::stale(&broker) - stale_before, 0);
    assert_eq!(acks.lock().unwrap().len(), 5);
    assert_eq!(broker.queue_stats()[0].acked, 5);
    let closed = Err(SendError::Closed(Payload::default()));
    assert_eq!(p.publish(QueueId(0), Payload::default()), closed);
    check_conservation(&broker, &guids, &acks);
}

/// A consumer whose handler blocks on `gate` twice ("I am in", "let me out") the first time.
fn blocking_consumer(broker: &Broker, app: u16, gate: Arc<Barrier>) -> (Consumer, Log<Delivery>) {
    let seen = Log::default();
    let (mut record, mut first) = (support::recording(&seen), true);
    let handler = move |batch: &[Delivery]| {
        record(batch);
        if std::mem::take(&mut first) {
            gate.wait();
            gate.wait();
        }
    };
    let c = support::open_consumer(broker, (0, app), ConsumerOptions::default(), handler);
    (c, seen)
}

/// A close waits behind the batch `a` holds (its detach overtook its confirms); the rest goes to b.
#[test]
fn closing_a_priority_consumer_redelivers_only_what_it_did_not_take() {
    let broker = start_on(vec![priority()], 3);
    let (p, acks) = producer(&broker, 100);
    let gate = Arc::new(Barrier::new(2));
    let (a, seen_a) = blocking_consumer(&broker, 0, gate.clone());
    let (_b, seen_b) = consumer_of(&broker, 0);
    let guids = publish(&p, 0, 0..10);
    gate.wait(); // consumer a holds its first batch, unconfirmed
    broker.close_consumer(&a).unwrap();
    gate.wait();
    wait_for("every release", || broker.queue_stats()[0].released >= 10);
    broker.quiesce().unwrap();
    all_stored(&broker, &guids, &acks);
    let a_got: HashSet<Guid> = delivered(&seen_a).into_iter().collect();
    let b_got: HashSet<Guid> = delivered(&seen_b).into_iter().collect();
    assert!(!a_got.is_empty(), "a was handed its first batch");
    let not_twice = "what a handled (confirmed on return) was not handed to b too";
    assert!(a_got.is_disjoint(&b_got), "{not_twice}");
    assert_eq!(a_got.len() + b_got.len(), 10, "every message handed out");
    let q = broker.queue_stats()[0];
    assert_eq!(q.released, 10, "{q:?}");
    let late = q.gone_consumer + q.unknown_guid;
    assert_eq!(late, 0, "no confirm came late: {q:?}");
}

/// The fanout mirror: the closed consumer's handled shares are confirmed, the rest dropped.
#[test]
fn closing_a_fanout_consumer_drops_only_the_share_it_did_not_take() {
    let broker = start_on(vec![fanout(2)], 3);
    let (p, acks) = producer(&broker, 100);
    let (_c0, seen0) = consumer_of(&broker, 0);
    let gate = Arc::new(Barrier::new(2));
    let (c1, seen1) = blocking_consumer(&broker, 1, gate.clone());
    let guids = publish(&p, 0, 0..6);
    gate.wait();
    // All six stored before the close: a PUT reaching the queue after c1's detach would
    // leave its app-1 share waiting for a consumer, never released (it timed out under
    // load). Counters, not a callback: c1's handler holds its session processor.
    let stored = || broker.queue_stats()[0].stored == 6;
    wait_for("the queue stores them", stored);
    broker.close_consumer(&c1).unwrap();
    gate.wait();
    wait_for("every release", || broker.queue_stats()[0].released >= 6);
    broker.quiesce().unwrap();
    all_stored(&broker, &guids, &acks);
    assert_eq!(seen0.lock().unwrap().len(), 6);
    let handled = seen1.lock().unwrap().len() as u64;
    assert!(handled >= 1, "c1 was handed its first batch");
    let q = broker.queue_stats()[0];
    assert_eq!(q.dropped_shares, 6 - handled, "{q:?}");
    let each = format!("each of the 12 shares confirmed or dropped: {q:?}");
    assert_eq!(q.confirms + q.dropped_shares, 12, "{each}");
}

#[test]
fn the_three_confirm_modes_and_both_routes_give_identical_results() {
    let mut results = Vec::new();
    for mode in [ConfirmMode::Inline, ConfirmMode::Typed, ConfirmMode::Boxed] {
        for route in [ConfirmRoute::Direct, ConfirmRoute::ViaCluster] {
            let broker = start_on(vec![fanout(2)], 2);
            let (p, acks) = producer(&broker, 1000);
            let options = support::confirming(mode, route);
            let _consumers = [0, 1].map(|app| consumer(&broker, 0, app, options));
            let guids = publish(&p, 0, 0..500);
            broker.quiesce().unwrap();
            let outcome = check_conservation(&broker, &guids, &acks);
            let stored = guids.iter().all(|g| outcome[g] == AckStatus::Stored);
            assert!(stored, "{mode:?} {route:?}");
            let routed = broker.cluster_state().unwrap().routed;
            let via_cluster = route == ConfirmRoute::ViaCluster;
            assert_eq!(routed, if via_cluster { 1000 } else { 0 });
            results.push(broker.queue_stats()[0]);
            broker.shutdown();
        }
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]), "{results:?}");
}

#[test]
fn shutdown_reports_unacknowledged_messages_closed() {
    // Stored and unconsumed: ACKed already, so shutdown has nothing to report.
    let broker = start_on(vec![priority()], 1);
    let (_p, acks, _) = published(&broker, 100, 3);
    broker.shutdown();
    assert_eq!(support::statuses(&acks), [AckStatus::Stored; 3]);
    // Stored and waiting for the replicas' receipts: reported `Closed` at shutdown, once.
    let broker = support::start(replicated());
    let (p, acks, guids) = published(&broker, 100, 3);
    assert_eq!(support::len(&acks), 0);
    broker.shutdown();
    let acks = acks.lock().unwrap();
    assert_eq!(acks.len(), 3);
    let closed = |a: &Ack| a.status == AckStatus::Closed && guids.contains(&a.guid);
    assert!(acks.iter().all(closed));
    let refused = p.publish(QueueId(0), Payload::default()).is_err();
    assert!(refused, "publishing after shutdown is an error");
}

#[test]
fn invalid_queue_configurations_are_errors_that_name_the_setting() {
    let check = |q, expected: BrokerError, says: &str| {
        let e = Broker::start(support::queues(vec![priority(), q])).unwrap_err();
        assert_eq!(e, expected);
        let text = e.to_string();
        let names = text.starts_with("queue 1:") && text.contains(says);
        assert!(names, "{text}");
    };
    let (queue, apps) = (QueueId(1), MAX_APPS + 1);
    let no_capacity = BrokerError::QueueCapacityOutOfRange { queue, capacity: 0 };
    check(sized(QueueMode::Priority, 0), no_capacity, "capacity 0");
    let too_many = BrokerError::AppsOutOfRange { queue, apps };
    check(fanout(apps), too_many, "give 1 to MAX_APPS (64)");
    let none = BrokerError::AppsOutOfRange { queue, apps: 0 };
    check(fanout(0), none, "0 fanout apps");
    let no_window = support::with(priority(), |q| q.window = 0);
    check(no_window, BrokerError::ZeroWindow { queue }, "window");
    let broker = start_on(vec![fanout(2)], 1);
    let options = ConsumerOptions::default();
    let open = |q, a| {
        let c = broker.open_consumer(QueueId(q), AppId(a), options, |_: &[Delivery]| {});
        c.unwrap_err()
    };
    assert_eq!(open(0, 2), BrokerError::UnknownApp(QueueId(0), AppId(2)));
    assert_eq!(open(3, 0), BrokerError::UnknownQueue(QueueId(3)));
}

#[test]
fn a_dropped_consumer_is_closed_and_receives_nothing_more() {
    let broker = start_on(vec![priority()], 1);
    let (p, acks) = producer(&broker, 64);
    let (dropped, seen_dropped) = consumer_of(&broker, 0);
    drop(dropped);
    let (_kept, seen_kept) = consumer_of(&broker, 0);
    let guids = publish(&p, 0, 0..10);
    broker.quiesce().unwrap();
    let n = support::len(&seen_dropped);
    assert!(n == 0, "a dropped consumer was delivered {n} messages");
    assert_eq!(support::len(&seen_kept), 10, "the other takes them all");
    all_stored(&broker, &guids, &acks);
}

/// `consumer`'s typed confirm of `(guid, token)` through the cluster, as a replica sends it.
fn confirmer(broker: &Broker, consumer: ConsumerId) -> impl Fn(Guid, DeliveryToken) + '_ {
    move |guid, token| {
        let confirm = confirm_of((0, 0), guid, token, consumer);
        broker.replica_confirm(confirm, ConfirmMode::Typed).unwrap();
    }
}

/// A token out of range, free or reused makes an unknown confirm that releases nothing.
#[test]
fn a_confirm_with_a_forged_out_of_range_or_stale_token_is_unknown_and_releases_nothing() {
    let capacity = 4;
    let broker = start_on(vec![sized(QueueMode::Priority, capacity)], 1);
    let (p, acks) = producer(&broker, 100);
    let (c, seen) = consumer(&broker, 0, 0, support::explicit(None));
    let first = publish(&p, 0, 0..1)[0];
    broker.quiesce().unwrap();
    let old = seen.lock().unwrap()[0];
    assert_eq!(old.guid, first);
    broker.confirm(&c, first).unwrap();
    broker.quiesce().unwrap();
    assert_eq!(broker.queue_stats()[0].released, 1);
    // Publish until a slot holds another message at the old token; keep one more, `live`.
    let mut published = vec![first];
    let (mut reused, mut live) = (None, None);
    for handle in 1..=(2 * capacity as u64) {
        published.extend(publish(&p, 0, handle..handle + 1));
        broker.quiesce().unwrap();
        let d = *seen.lock().unwrap().last().unwrap();
        if d.token == old.token && reused.is_none() {
            reused = Some(d);
        } else if live.is_none() {
            live = Some(d);
        } else {
            broker.confirm(&c, d.guid).unwrap();
        }
        if reused.is_some() && live.is_some() {
            break;
        }
    }
    broker.quiesce().unwrap();
    let (reused, live) = (reused.expect("the old slot reused"), live.unwrap());
    // And a slot freed again: stored, delivered and confirmed.
    published.extend(publish(&p, 0, 100..101));
    broker.quiesce().unwrap();
    let gone = *seen.lock().unwrap().last().unwrap();
    broker.confirm(&c, gone.guid).unwrap();
    broker.quiesce().unwrap();
    let before = broker.queue_stats()[0];
    assert_eq!(before.held, 2, "{before:?}");
    let confirm = confirmer(&broker, c.id());
    // Out of the table (with a GUID the queue holds).
    confirm(live.guid, DeliveryToken(capacity as u32));
    confirm(live.guid, DeliveryToken(u32::MAX));
    // Stale: a released GUID at its old, reused token; a held GUID at another's slot.
    confirm(old.guid, old.token);
    confirm(live.guid, reused.token);
    // A free slot's token, with the GUID it last held and with a held one.
    confirm(gone.guid, gone.token);
    confirm(live.guid, gone.token);
    broker.quiesce().unwrap();
    let after = broker.queue_stats()[0];
    assert_eq!(after.unknown_guid - before.unknown_guid, 6, "{after:?}");
    let kept = (after.released, after.held, after.confirms);
    let unchanged = (before.released, 2, before.confirms);
    assert_eq!(kept, unchanged, "nothing released: {after:?}");
    let counted = |q: QueueStats| (q.duplicate_confirms, q.gone_consumer);
    assert_eq!(counted(after), counted(before));
    // The messages are still confirmable, each by its own token.
    confirm(live.guid, live.token);
    broker.confirm(&c, reused.guid).unwrap();
    broker.quiesce().unwrap();
    let end = broker.queue_stats()[0];
    assert_eq!(end.held, 0, "{end:?}");
    assert_eq!(end.unknown_guid, after.unknown_guid);
    all_stored(&broker, &published, &acks);
}
