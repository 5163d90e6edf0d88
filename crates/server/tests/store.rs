//! The payload store under pressure: a full store is answered per message
//! (`RejectedStoreFull`), never by a publish that waits inside its connection's task; each
//! queue has a part of the store of its own, so no queue can take the slots another needs;
//! what a frame stores is confirmed as it is stored.

mod common;

use std::time::{Duration, Instant};

use common::*;
use zerodispatch_broker::QueueMode;
use zerodispatch_testkit::within;
use zerodispatch_wire::*;

/// Issue: with 4 payload slots, a connection publishing 12 messages to a queue whose only
/// consumer was on the same connection waited for a slot inside its task, and so never
/// wrote the deliveries nor read the confirms that would free one: 0 delivered and 0
/// confirmed after 5 s. Now the store's refusals are the messages' outcomes, and the
/// connection goes on.
#[test]
fn a_connection_whose_own_consumer_frees_the_slots_never_stalls() {
    let server = priority_server_with(|l| l.store_slots = 4);
    let mut client = Client::hello(server.local_addr());
    client.open_consumer(7, 0, 0, 64);
    client.open_producer(1, 0, 100);
    let mut pending: Vec<u64> = (0..12).collect();
    let mut stored = Vec::new();
    for round in 0.. {
        assert!(round < 20, "no progress: {} stored", stored.len());
        client.publish(1, pending.iter().copied(), payload_of);
        let want = pending.len();
        let read = client.read_until(|r| {
            let stored = r.ids(ConfirmStatus::Stored).len();
            r.confirms.len() == want && r.delivered.len() == stored
        });
        let (now_stored, refused) = (
            read.ids(ConfirmStatus::Stored),
            read.ids(ConfirmStatus::RejectedStoreFull),
        );
        assert_eq!(
            now_stored.len() + refused.len(),
            want,
            "{:?}",
            read.confirms
        );
        if round == 0 {
            assert_eq!(now_stored.len(), 4, "as many as the slots");
        }
        assert!(!now_stored.is_empty(), "round {round} stored nothing");
        // The consumer on the same connection frees the slots; the refused go again.
        client.confirm(7, &read.deliveries(7), true);
        eventually("the slots freed", || server.stats().free_slots == 4);
        stored.extend(now_stored);
        pending = refused;
        if pending.is_empty() {
            break;
        }
    }
    stored.sort_unstable();
    assert_eq!(stored, (0..12).collect::<Vec<_>>());
}

/// Issue: a queue without a consumer filled the store that every queue shared, and from
/// then on the server stopped reading every publishing connection: a producer on another
/// queue got 4 of 401 confirms. Now each queue has a part of the store: the flooded queue's
/// publishes are refused `RejectedStoreFull` while another queue's round trips go on. The
/// canary's publish -> confirm latencies under the flood are printed (the test asserts
/// progress, not time).
#[test]
fn a_queue_that_fills_its_part_of_the_store_does_not_stall_another_queue() {
    let mut limits = limits();
    limits.store_slots = 64;
    let server = server(&[QueueMode::Priority, QueueMode::Priority], limits);
    let addr = server.local_addr();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // Queue 0 has no consumer: its part (32 slots) fills, then every publish is
            // refused; the flood goes on until the canary is done.
            let mut flood = Client::hello(addr);
            flood.open_producer(1, 0, 4096);
            let (mut next, mut refused) = (0_u64, 0_u64);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                flood.publish(1, next..next + 64, payload_of);
                flood.confirms(1, 64, |_, status| {
                    if status == ConfirmStatus::RejectedStoreFull {
                        refused += 1;
                    }
                });
                next += 64;
            }
            refused
        })
    };
    let mut producer = Client::hello(addr);
    let mut consumer = Client::hello(addr);
    producer.open_producer(2, 1, 64);
    consumer.open_consumer(9, 1, 0, 64);
    let mut latencies = Vec::new();
    for id in 0..400 {
        let sent = Instant::now();
        producer.publish(2, [id], payload_of);
        producer.all_stored(2, 1);
        latencies.push(sent.elapsed());
        let guids = consumer.delivered(9, 1);
        consumer.confirm(9, &guids, true);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let refused = flooder.join().unwrap();
    assert!(refused > 0, "the flooded queue's part filled");
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "canary under flood: publish -> confirm p50 {:?}, p99 {:?}, max {:?} ({} flood refusals)",
        at(0.5),
        at(0.99),
        latencies[latencies.len() - 1],
        refused
    );
}

/// Issue: with 256 slots, one `Publish` of 300 messages got no confirm in 3 s although 256
/// of them fit (the publish waited for slots before the frame's confirms went). Now what
/// is stored is confirmed as it is stored, and the rest is refused.
#[test]
fn a_frame_larger_than_the_store_is_confirmed_as_far_as_it_is_stored() {
    let server = priority_server();
    let mut producer = Client::hello(server.local_addr());
    producer.open_producer(1, 0, 1024);
    producer.publish(1, 0..300, payload_of);
    let statuses = producer.statuses(1, 300);
    let status = |id| match id {
        0..256 => ConfirmStatus::Stored,
        _ => ConfirmStatus::RejectedStoreFull,
    };
    assert_eq!(
        statuses,
        (0..300).map(|id| (id, status(id))).collect::<Vec<_>>()
    );
    assert_eq!(server.stats().free_slots, 0);
}

/// Issue: a payload larger than the server's slots got a `LIMIT_OUT_OF_RANGE` error for
/// its whole frame (a code documented for opens only) while the server kept the producer
/// open; a client that took the refusal for the end of its producer left it half-closed,
/// its name held. Now such a message is confirmed `TooLarge`, the others of the frame are
/// stored, and the producer stays open on both sides: closed, its name opens again.
#[test]
fn a_payload_larger_than_the_slots_is_refused_alone_and_its_producer_stays_open() {
    let server = priority_server_with(|l| l.slot_size = 64);
    let mut client = Client::hello(server.local_addr());
    assert_eq!(client.open_named_producer(1, 0, 16, "n"), Ok(None));
    client.publish(
        1,
        0..3,
        |id, buf| if id == 1 { 200 } else { payload_of(id, buf) },
    );
    assert_eq!(
        client.statuses(1, 3),
        [
            (0, ConfirmStatus::Stored),
            (1, ConfirmStatus::TooLarge),
            (2, ConfirmStatus::Stored)
        ]
    );
    // Still open: it publishes on.
    client.publish(1, [3], payload_of);
    client.all_stored(1, 1);
    client.close_producer_echoed(1);
    let window = client
        .open_producer_window(2, 0, 16, "n")
        .expect("the name is free once its producer closed");
    assert_eq!(window.last_stored, Some(3));
    assert_eq!(
        (0..4).map(|id| window.stored(id)).collect::<Vec<_>>(),
        [Some(true), Some(false), Some(true), Some(true)],
        "id by id: the refused one is not stored"
    );
}

/// Issue: the same publish id twice in one frame got `(20, NotSent), (20, Stored)`,
/// confirms that cannot be matched to their messages. Now such a frame is refused whole,
/// `DUPLICATE_ID`, before anything of it is stored; the producer stays open.
#[test]
fn a_frame_that_names_an_id_twice_is_refused_whole() {
    let server = priority_server();
    let mut client = Client::hello(server.local_addr());
    client.open_producer(1, 0, 64);
    client.publish(1, [19, 20, 21, 20], payload_of);
    assert_eq!(
        client.expect_error(ErrorCode::DUPLICATE_ID),
        (Some(FrameKind::Publish), 1)
    );
    // Out of order but distinct: taken.
    client.publish(1, [21, 20, 19], payload_of);
    assert_eq!(client.stored_ids(1, 3), [19, 20, 21]);
    assert_eq!(server.broker().queue_stats()[0].stored, 3);
}

/// A consumer that stops reading cannot hold its connection, its deliveries and their
/// slots for ever: it is dropped, and what it held goes back to its queue. (A guard: every
/// write now waits at most the idle limit, the bound that makes this hold whatever the
/// connection's task was doing when the client stopped reading.)
#[test]
fn a_client_that_stops_reading_is_dropped_at_the_idle_limit() {
    let server = priority_server_with(|l| {
        (l.slot_size, l.store_slots, l.consumer_window) = (64 << 10, 1024, 1024);
        l.heartbeat = Duration::from_millis(100);
        l.idle_timeout = Duration::from_millis(500);
    });
    let addr = server.local_addr();
    // Opens a consumer with room for everything, then never reads again.
    let mut sleeper = Client::hello(addr);
    sleeper.open_consumer(7, 0, 0, 1024);
    let _held = sleeper.into_stream();
    let mut producer = Client::hello(addr);
    producer.open_producer(1, 0, 1024);
    // 512 messages of 64 KiB: 32 MiB of deliveries, far more than the socket buffers take.
    let payload = vec![7_u8; 64 << 10];
    for first in (0..512_u64).step_by(8) {
        producer.send_raw(&publish_frame(1, first..first + 8, &payload));
        producer.all_stored(1, 8);
    }
    eventually("the sleeper's connection dropped", || {
        server.stats().connections == 1
    });
}

/// With its queue's part of the store full, a named producer's message is answered from
/// its queue's record first: a duplicate of a stored id is confirmed `Stored` (and not
/// stored again), an id older than the window `RejectedOutOfWindow`; only an id the queue
/// has not stored is refused `RejectedStoreFull`.
#[test]
fn a_full_store_checks_the_record_before_the_quota() {
    within(Duration::from_secs(30), "record before quota", || {
        let server = priority_server_with(|l| l.store_slots = 8);
        let mut c = Client::hello(server.local_addr());
        assert_eq!(c.open_named_producer(1, 0, 100, "orders"), Ok(None));
        // Eight messages fill the queue's part of the store (no consumer frees them).
        let stored = [4000, 4001, 4002, 4003, 4004, 4005, 4006, 20_000];
        c.publish(1, stored, payload_of);
        c.all_stored(1, 8);
        assert_eq!(server.stats().free_slots, 0);
        // The window is the 16,384 ids from 20,000 down: 100 is older; 10,000 is in it,
        // not stored.
        c.publish(1, [100, 4003, 10_000, 20_000], payload_of);
        assert_eq!(
            c.statuses(1, 4),
            [
                (100, ConfirmStatus::RejectedOutOfWindow),
                (4003, ConfirmStatus::Stored),
                (10_000, ConfirmStatus::RejectedStoreFull),
                (20_000, ConfirmStatus::Stored),
            ]
        );
        // Stored once each: eight deliveries, and then nothing.
        c.open_consumer(7, 0, 0, 64);
        c.delivered(7, 8);
        assert!(
            c.quiet_for(Duration::from_millis(200)),
            "a duplicate was delivered"
        );
    });
}
