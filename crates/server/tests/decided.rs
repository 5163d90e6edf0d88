//! What the protocol document once left open, as decided (each test under a watchdog).

mod common;

use common::*;

/// Reads until `delivered` deliveries and `confirms` publish confirms came; those to `to`.
fn deliveries_to(c: &mut Client, to: u32, delivered: usize, confirms: usize) -> Vec<Delivered> {
    let read = c.read_until(|r| r.delivered.len() >= delivered && r.confirms.len() >= confirms);
    read.deliveries(to)
}

#[test]
fn a_kind_the_broker_never_receives_is_fatal_whatever_id_it_names() {
    watched("unexpected kind", || {
        let server = priority_server();
        // Consumer 99 and producer 99 (its message 0 `Stored`) are not open: the kind first.
        let confirm = body(0x13, &[99, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let deliver = built(|out| deliver(out, 99, [([1; 16], 0, &b"x"[..])]));
        for frame in [deliver, confirm] {
            let mut c = Client::hello(server.local_addr());
            c.send_raw(&frame);
            c.expect_fatal(ErrorCode::UNEXPECTED_KIND);
        }
    });
}

#[test]
fn an_error_frame_before_hello_is_answered_handshake_required() {
    watched("error before hello", || {
        let server = priority_server();
        for code in [ErrorCode::INTERNAL, ErrorCode::UNKNOWN_QUEUE] {
            let mut c = Client::connect(server.local_addr());
            c.send(Frame::Error(fatal(code, "")));
            c.expect_fatal(ErrorCode::HANDSHAKE_REQUIRED);
        }
    });
}

#[test]
fn between_a_close_and_its_echo_the_id_is_in_use_and_unknown() {
    watched("close then echo", || {
        let server = priority_server();
        let mut c = Client::producer(server.local_addr(), 1, 0, 16);
        // The three in one write: the server reads them before the close is done.
        let close = encoded(Frame::CloseProducer(close_producer(1)));
        let open = encoded(Frame::OpenProducer(open_producer(1, 0, 16, "")));
        c.send_raw(&[close.as_slice(), &open, &close].concat());
        c.expect_refusal(ErrorCode::ID_IN_USE, FrameKind::OpenProducer, 1);
        c.expect_refusal(ErrorCode::UNKNOWN_PRODUCER, FrameKind::CloseProducer, 1);
        c.next(|frame| assert_eq!(frame, Frame::CloseProducer(close_producer(1))));
        // After the echo the id opens again.
        c.open_producer(1, 0, 16);
    });
}

#[test]
fn a_confirm_of_several_unknown_guids_gets_one_error_and_the_others_are_confirmed() {
    watched("unknown guids", || {
        let server = priority_server();
        let mut c = Client::producer(server.local_addr(), 1, 0, 16);
        c.open_consumer(7, 0, 0, 16);
        c.publish(1, 0..2, payload_of);
        let delivered = deliveries_to(&mut c, 7, 2, 2);
        let slots = server.stats().slots;
        assert_eq!(server.stats().free_slots, slots - 2);
        let (t0, t1) = (delivered[0].1, delivered[1].1);
        let confirm = [
            (Guid([0xEE; 16]), t0),
            delivered[0],
            (Guid([0xEF; 16]), DeliveryToken(1 << 30)),
            delivered[1],
        ];
        assert_ne!(t0, t1);
        c.confirm(7, &confirm, false);
        c.expect_refusal(ErrorCode::UNKNOWN_CONSUMER, FrameKind::ConsumerConfirm, 7);
        free_slots_become(&server, slots, "both known GUIDs confirmed");
        assert!(c.quiet_for(QUIET), "a second error for the same frame");
    });
}

#[test]
fn an_empty_payload_takes_a_slot_of_the_store() {
    watched("empty payload", || {
        let server = priority_server();
        let mut c = Client::producer(server.local_addr(), 1, 0, 16);
        let slots = server.stats().slots;
        c.publish(1, 0..3, |_, _| 0);
        c.all_stored(1, 3);
        assert_eq!(server.stats().free_slots, slots - 3);
    });
}

#[test]
fn a_fanout_message_holds_its_slot_until_every_app_confirms() {
    watched("fanout slot", || {
        let server = server(&[QueueMode::Fanout { apps: 2 }], limits());
        let mut c = Client::producer(server.local_addr(), 1, 0, 16);
        c.open_consumer(10, 0, 0, 16);
        c.open_consumer(11, 0, 1, 16);
        let slots = server.stats().slots;
        c.publish(1, 0..1, payload_of);
        let read = c.read_until(|r| r.delivered.len() >= 2);
        c.confirm(10, &read.deliveries(10), false);
        // Give the confirm time to reach the queue: the slot stays held all the same.
        std::thread::sleep(QUIET);
        let free = server.stats().free_slots;
        assert_eq!(free, slots - 1, "freed by one app's confirm");
        c.confirm(11, &read.deliveries(11), false);
        free_slots_become(&server, slots, "freed by the last app's confirm");
    });
}

#[test]
fn welcome_tells_the_deduplication_window() {
    watched("dedup window", || {
        let server = priority_server();
        let mut c = Client::connect(server.local_addr());
        let limits = c.shake_hands(0).limits;
        let kept = server.broker().dedup_window();
        assert_eq!(limits.dedup_window as usize, kept, "the queues' window");
        assert_eq!(limits.dedup_window, 16_384);
        assert!(limits.dedup_window >= limits.max_unconfirmed_named);
    });
}

#[test]
fn a_confirm_by_an_unknown_stale_or_foreign_token_confirms_nothing() {
    watched("delivery tokens", || {
        let server = priority_server();
        let slots = server.stats().slots;
        let server = &server;
        let held = move |n| move || server.stats().free_slots == slots - n;
        let mut c = Client::producer(server.local_addr(), 1, 0, 16);
        c.open_consumer(7, 0, 0, 2);
        c.publish(1, 0..2, payload_of);
        let d = deliveries_to(&mut c, 7, 2, 2);
        let (d0, d1) = (d[0], d[1]);
        assert_ne!(d0.1, d1.1, "one token per delivery held");
        // Each refused confirm: the frame's one error, and nothing confirmed by it.
        let refused = |c: &mut Client, consumer: u32, pairs: &[Delivered], what: &str| {
            c.confirm(consumer, pairs, false);
            let refusal = c.expect_error(ErrorCode::UNKNOWN_CONSUMER);
            let expected = (Some(FrameKind::ConsumerConfirm), consumer);
            assert_eq!(refusal, expected, "{what}");
            assert!(c.quiet_for(ms(100)), "{what}: one error");
        };

        // (a) A token out of range.
        refused(&mut c, 7, &[(d0.0, DeliveryToken(1 << 20))], "out of range");
        // (d) A right token with a wrong GUID: another held message's, or none at all.
        let wrong = [(d1.0, d0.1), (Guid([0xEE; 16]), d1.1)];
        refused(&mut c, 7, &wrong, "wrong GUID");
        assert!(held(2)(), "both still held");

        c.confirm(7, &[d0], false);
        eventually("d0 confirmed", held(1));
        assert!(c.quiet_for(ms(100)), "no error");

        // (b) A stale token: its delivery confirmed already (a free entry) ...
        refused(&mut c, 7, &[d0], "confirmed already");
        // ... and then its entry reused by a later delivery of another message.
        c.credit(7, 1);
        c.publish(1, [2], payload_of);
        let d2 = deliveries_to(&mut c, 7, 1, 1)[0];
        assert_eq!(d2.1, d0.1, "the freed entry is reused");
        assert_ne!(d2.0, d0.0);
        refused(&mut c, 7, &[d0], "stale: the right slot, another GUID");
        assert!(held(2)(), "d1, d2 held: the stale confirm took neither");

        // (c) Another consumer's token: of 3 and 4, one is kept for 7, one goes to 8 (round-robin).
        c.open_consumer(8, 0, 0, 1);
        c.publish(1, [3, 4], payload_of);
        let d3 = deliveries_to(&mut c, 8, 1, 2)[0];
        assert_eq!(d3.1, d2.1, "8's token names 7's held entry too");
        refused(&mut c, 7, &[d3], "8's delivery confirmed by 7");
        refused(&mut c, 8, &[d2], "7's delivery confirmed by 8");
        refused(&mut c, 8, &[d1], "7's delivery, out of 8's range");
        assert!(held(4)(), "d1, d2, d3 and the one kept for 7 still held");

        // Nothing was misapplied: every right pair still confirms, with no error.
        c.confirm(7, &[d1, d2], false);
        c.confirm(8, &[d3], false);
        eventually("all but the one kept for 7 confirmed", held(1));
        assert!(c.quiet_for(QUIET), "no error");
        c.credit(7, 4);
        let d4 = c.delivered(7, 1)[0];
        assert_ne!(d4.0, d3.0);
        c.confirm(7, &[d4], false);
        eventually("every message confirmed", held(0));
        // And nothing is delivered again: every message was confirmed once.
        assert!(c.quiet_for(QUIET), "no error, no redelivery");
    });
}
