//! The payload store under pressure: refusals per message, never a wait, a part per queue.

mod common;

use std::sync::{Arc, atomic::AtomicBool, atomic::Ordering};

use common::*;

/// With 4 slots, 12 publishes to the connection's own consumer: refused ones go again, none waits.
#[test]
fn a_connection_whose_own_consumer_frees_the_slots_never_stalls() {
    let server = priority_server_with(|l| l.store_slots = 4);
    let mut client = Client::consumer(server.local_addr(), 7, 0, 0, 64);
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
        let now_stored = read.ids(ConfirmStatus::Stored);
        let refused = read.ids(ConfirmStatus::RejectedStoreFull);
        let outcomes = now_stored.len() + refused.len();
        assert_eq!(outcomes, want, "{:?}", read.confirms);
        if round == 0 {
            assert_eq!(now_stored.len(), 4, "as many as the slots");
        }
        assert!(!now_stored.is_empty(), "round {round} stored nothing");
        // The consumer on the same connection frees the slots; the refused go again.
        client.confirm(7, &read.deliveries(7), true);
        free_slots_become(&server, 4, "the slots freed");
        stored.extend(now_stored);
        pending = refused;
        if pending.is_empty() {
            break;
        }
    }
    stored.sort_unstable();
    assert_eq!(stored, (0..12).collect::<Vec<_>>());
}

/// A queue without a consumer does not stall 400 round trips on another (latencies printed).
#[test]
fn a_queue_that_fills_its_part_of_the_store_does_not_stall_another_queue() {
    let mut limits = limits();
    limits.store_slots = 64;
    let server = server(&[QueueMode::Priority, QueueMode::Priority], limits);
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let flooder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // Queue 0 has no consumer: its 32 slots fill, then every publish is refused.
            let mut flood = Client::producer(addr, 1, 0, 4096);
            let (mut next, mut refused) = (0_u64, 0_u64);
            while !stop.load(Ordering::Relaxed) {
                flood.publish(1, next..next + 64, payload_of);
                let full =
                    |_, status| refused += u64::from(status == ConfirmStatus::RejectedStoreFull);
                flood.confirms(1, 64, full);
                next += 64;
            }
            refused
        })
    };
    let mut producer = Client::producer(addr, 2, 1, 64);
    let mut consumer = Client::consumer(addr, 9, 1, 0, 64);
    let mut latencies = Vec::new();
    for id in 0..400 {
        let sent = Instant::now();
        producer.publish(2, [id], payload_of);
        producer.all_stored(2, 1);
        latencies.push(sent.elapsed());
        let guids = consumer.delivered(9, 1);
        consumer.confirm(9, &guids, true);
    }
    stop.store(true, Ordering::Relaxed);
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

/// One `Publish` of 300 into 256 slots: 256 are stored, 44 refused.
#[test]
fn a_frame_larger_than_the_store_is_confirmed_as_far_as_it_is_stored() {
    let server = priority_server();
    let mut producer = Client::producer(server.local_addr(), 1, 0, 1024);
    producer.publish(1, 0..300, payload_of);
    let statuses = producer.statuses(1, 300);
    let status = |id| match id {
        0..256 => ConfirmStatus::Stored,
        _ => ConfirmStatus::RejectedStoreFull,
    };
    let expected: Vec<_> = (0..300).map(|id| (id, status(id))).collect();
    assert_eq!(statuses, expected);
    assert_eq!(server.stats().free_slots, 0);
}

/// A payload over the slot size alone is `TooLarge`; its producer stays open, its name free after.
#[test]
fn a_payload_larger_than_the_slots_is_refused_alone_and_its_producer_stays_open() {
    let server = priority_server_with(|l| l.slot_size = 64);
    let mut client = Client::hello(server.local_addr());
    assert_eq!(client.open_named_producer(1, 0, 16, "n"), Ok(None));
    let one_too_large = |id, buf: &mut [u8]| if id == 1 { 200 } else { payload_of(id, buf) };
    client.publish(1, 0..3, one_too_large);
    assert_eq!(
        client.statuses(1, 3),
        [
            (0, ConfirmStatus::Stored),
            (1, ConfirmStatus::TooLarge),
            (2, ConfirmStatus::Stored)
        ]
    );
    client.publish(1, [3], payload_of);
    client.all_stored(1, 1);
    client.close_producer_echoed(1);
    let window = |w: StoredWindow| (w.last_stored, [0, 1, 2, 3].map(|id| w.stored(id)));
    let opened = client.open_producer_window(2, 0, 16, "n", window);
    let (last, stored) = opened.expect("the name is free once its producer closed");
    assert_eq!(last, Some(3));
    let expected = [Some(true), Some(false), Some(true), Some(true)];
    assert_eq!(stored, expected, "id by id: the refused one is not stored");
}

/// A frame that names an id twice is refused whole.
#[test]
fn a_frame_that_names_an_id_twice_is_refused_whole() {
    let server = priority_server();
    let mut client = Client::producer(server.local_addr(), 1, 0, 64);
    client.publish(1, [19, 20, 21, 20], payload_of);
    client.expect_refusal(ErrorCode::DUPLICATE_ID, FrameKind::Publish, 1);
    // Out of order but distinct: taken.
    client.publish(1, [21, 20, 19], payload_of);
    assert_eq!(client.stored_ids(1, 3), [19, 20, 21]);
    assert_eq!(server.broker().queue_stats()[0].stored, 3);
}

/// A consumer that stops reading is dropped at the idle limit (every write waits at most it).
#[test]
fn a_client_that_stops_reading_is_dropped_at_the_idle_limit() {
    let server = priority_server_with(|l| {
        (l.slot_size, l.store_slots, l.consumer_window) = (64 << 10, 1024, 1024);
        l.heartbeat = ms(100);
        l.idle_timeout = ms(500);
    });
    let addr = server.local_addr();
    // A consumer with room for everything, which never reads again.
    let _held = Client::consumer(addr, 7, 0, 0, 1024).into_stream();
    let mut producer = Client::producer(addr, 1, 0, 1024);
    // 512 messages of 64 KiB: 32 MiB of deliveries, far more than the socket buffers take.
    let payload = vec![7_u8; 64 << 10];
    for first in (0..512_u64).step_by(8) {
        let ids = (first..first + 8).map(|id| (id, &payload[..]));
        producer.send_raw(&built(|out| publish(out, 1, ids)));
        producer.all_stored(1, 8);
    }
    connections_become(&server, 1);
}

/// With the store full, a duplicate is `Stored`, an old id out of window, a new one store-full.
#[test]
fn a_full_store_checks_the_record_before_the_quota() {
    watched("record before quota", || {
        let server = priority_server_with(|l| l.store_slots = 8);
        let mut c = Client::hello(server.local_addr());
        assert_eq!(c.open_named_producer(1, 0, 100, "orders"), Ok(None));
        // Eight messages fill the queue's part of the store (no consumer frees them).
        let stored = [4000, 4001, 4002, 4003, 4004, 4005, 4006, 20_000];
        c.publish(1, stored, payload_of);
        c.all_stored(1, 8);
        assert_eq!(server.stats().free_slots, 0);
        // The window is the 16,384 ids from 20,000 down: 100 is older; 10,000 not stored.
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
        assert!(c.quiet_for(QUIET), "a duplicate was delivered");
    });
}
