//! Named producers: a reconnecting one resends, each message delivered once; one name, one open.

mod common;

use std::collections::BTreeMap;

use common::*;

/// The publish id a GUID of a named producer carries (its bytes 4 to 12).
fn seq(guid: Guid) -> u64 {
    u64::from_le_bytes(guid.0[4..12].try_into().unwrap())
}

/// Opens `name` as `producer`, again while a lost connection's producer still holds it.
fn reopen(addr: std::net::SocketAddr, producer: u32, name: &str) -> (Client, Option<u64>) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Client::hello(addr);
        match c.open_named_producer(producer, 0, 100, name) {
            Ok(last) => return (c, last),
            Err(code) => assert_eq!(code, ErrorCode::NAME_IN_USE),
        }
        assert!(Instant::now() < until, "still in use after 10 s");
        std::thread::sleep(ms(5));
    }
}

#[test]
fn a_producer_reconnecting_under_its_name_resends_and_every_message_is_delivered_once() {
    let server = priority_server();
    let addr = server.local_addr();
    let mut consumer = Client::consumer(addr, 7, 0, 0, 64);
    for round in 0..10_u64 {
        let name = format!("orders-{round}");
        let mut first = Client::hello(addr);
        assert_eq!(first.open_named_producer(1, 0, 100, &name), Ok(None));
        first.publish(1, 0..20, payload_of);
        first.all_stored(1, 20);
        // 20 more, lost before their confirms: some, all or none are stored.
        first.publish(1, 20..40, payload_of);
        drop(first);
        let (mut second, last) = reopen(addr, 3, &name);
        let last = last.expect("the first 20 are stored");
        assert!((19..40).contains(&last), "round {round}: last {last}");
        // What is not confirmed goes again with its id: the client need not know what was stored.
        second.publish(3, 20..40, payload_of);
        let confirmed = second.stored_ids(3, 20);
        assert_eq!(confirmed, (20..40).collect::<Vec<_>>(), "round {round}");
        let (mut counts, mut guids) = (BTreeMap::new(), Vec::new());
        consumer.deliveries(7, 40, |guid, payload| {
            assert_payload_of(seq(guid.0), payload);
            *counts.entry(seq(guid.0)).or_insert(0) += 1;
            guids.push(guid);
        });
        let quiet = consumer.quiet_for(ms(100));
        assert!(quiet, "round {round}: more than 40 delivered");
        assert_eq!(counts.len(), 40, "round {round}: {counts:?}");
        let once = counts.values().all(|&n| n == 1);
        assert!(once, "round {round}: {counts:?}");
        consumer.confirm(7, &guids, true);
    }
    all_slots_free(&server);
}

#[test]
fn producer_opened_carries_the_last_stored_id_and_a_name_is_open_once() {
    let server = priority_server();
    let addr = server.local_addr();
    let mut c = Client::hello(addr);
    assert_eq!(c.open_named_producer(1, 0, 10, "n"), Ok(None));
    c.publish(1, [3, 5, 8], payload_of);
    c.all_stored(1, 3);
    // Open on this connection and on any other: refused, and the connection stays.
    let in_use = Err(ErrorCode::NAME_IN_USE);
    assert_eq!(c.open_named_producer(2, 0, 10, "n"), in_use);
    let mut other = Client::hello(addr);
    assert_eq!(other.open_named_producer(1, 0, 10, "n"), in_use);
    // Closed, the name opens again, with what its queue has stored.
    c.close_producer_echoed(1);
    assert_eq!(other.open_named_producer(1, 0, 10, "n"), Ok(Some(8)));
    // A duplicate is confirmed Stored again; an anonymous producer is not deduplicated.
    other.publish(1, [8], payload_of);
    other.confirms(1, 1, |id, status| {
        assert_eq!((id, status), (PublishId(8), ConfirmStatus::Stored));
    });
    c.open_producer(4, 0, 10);
    c.publish(4, [8], payload_of);
    c.all_stored(4, 1);
    c.open_consumer(7, 0, 0, 64);
    let guids = c.delivered(7, 4);
    let quiet = c.quiet_for(ms(100));
    assert!(quiet, "4 stored: 3, 5, 8 and the anonymous 8");
    c.confirm(7, &guids, false);
    all_slots_free(&server);
}
