//! The server over loopback: delivery, credit, fanout, redelivery, bad input, refusals, slots.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Barrier, atomic::AtomicUsize, atomic::Ordering};

use common::*;
use zerodispatch_broker::{Broker, Callback, ClientType, QueueConfig};
use zerodispatch_server::{PayloadStore, ServerError};

/// Publishes `n` messages in one frame; consumer 7 takes, checks and confirms them all.
fn round_trip(producer: &mut Client, consumer: &mut Client, first: u64, n: u64) {
    producer.publish(1, first..first + n, payload_of);
    let (mut seen, mut guids) = (Vec::new(), Vec::new());
    consumer.deliveries(7, n as usize, |guid, payload| {
        assert_payload_of(id_in(payload), payload);
        seen.push(id_in(payload));
        guids.push(guid);
    });
    seen.sort_unstable();
    assert_eq!(seen, (first..first + n).collect::<Vec<_>>());
    consumer.confirm(7, &guids, true);
}

#[test]
fn publishes_are_delivered_with_their_bytes_and_confirmed_stored_by_id() {
    let server = priority_server();
    let (mut producer, mut consumer) = open_pair(server.local_addr(), 100, 64);
    round_trip(&mut producer, &mut consumer, 0, 20);
    assert_eq!(producer.stored_ids(1, 20), (0..20).collect::<Vec<_>>());
    all_slots_free(&server);
}

#[test]
fn nothing_is_delivered_without_credit() {
    let server = priority_server();
    let (mut producer, mut consumer) = open_pair(server.local_addr(), 100, 0);
    producer.publish(1, 0..5, payload_of);
    assert!(consumer.quiet_for(QUIET), "delivered without credit");
    consumer.credit(7, 2);
    let mut guids = consumer.delivered(7, 2);
    assert!(consumer.quiet_for(QUIET), "delivered past the credit");
    consumer.credit(7, 3);
    guids.extend(consumer.delivered(7, 3));
    consumer.confirm(7, &guids, false);
    producer.all_stored(1, 5);
    all_slots_free(&server);
}

#[test]
fn a_fanout_queue_delivers_every_message_to_every_app() {
    let server = server(&[QueueMode::Fanout { apps: 3 }], limits());
    let addr = server.local_addr();
    let mut producer = Client::producer(addr, 1, 0, 100);
    let mut apps: Vec<_> = (0..3)
        .map(|app| Client::consumer(addr, 7, 0, app, 64))
        .collect();
    producer.publish(1, 0..30, payload_of);
    for app in &mut apps {
        let (mut guids, mut ids) = (Vec::new(), HashSet::new());
        app.deliveries(7, 30, |guid, payload| {
            ids.insert(id_in(payload));
            guids.push(guid);
        });
        assert_eq!(ids.len(), 30);
        app.confirm(7, &guids, true);
    }
    producer.all_stored(1, 30);
    all_slots_free(&server);
}

#[test]
fn a_closed_consumers_unconfirmed_messages_go_to_another_consumer() {
    let server = priority_server();
    let (mut producer, mut first) = open_pair(server.local_addr(), 100, 64);
    let mut second = Client::hello(server.local_addr());
    producer.publish(1, 0..10, payload_of);
    let delivered: HashSet<Guid> = first.delivered(7, 10).iter().map(|d| d.0).collect();
    first.close_consumer(7);
    second.open_consumer(3, 0, 0, 64);
    // The same messages, each with a token of the new delivery.
    let again = second.delivered(3, 10);
    assert_eq!(again.iter().map(|d| d.0).collect::<HashSet<_>>(), delivered);
    second.confirm(3, &again, true);
    producer.all_stored(1, 10);
    all_slots_free(&server);
}

/// The queue processor is held so that 0 and 1 free no place before the session saw 2 to 4.
#[test]
fn publishes_past_max_unconfirmed_are_rejected_producer_full() {
    let server = priority_server();
    let queue = server.broker().processors(ClientType::Queue)[0];
    let held = Arc::new(Barrier::new(2));
    let h = held.clone();
    let hold = Callback::new(move || {
        h.wait();
        h.wait();
    });
    server.broker().execute(queue, hold).unwrap();
    held.wait();
    let mut producer = Client::producer(server.local_addr(), 1, 0, 2);
    producer.publish(1, 0..5, payload_of);
    let rejected = producer.ids_all(1, 3, ConfirmStatus::RejectedProducerFull);
    assert_eq!(rejected, [2, 3, 4]);
    held.wait();
    assert_eq!(producer.ids_all(1, 2, ConfirmStatus::Stored), [0, 1]);
}

#[test]
fn closing_a_producer_confirms_its_messages_then_echoes() {
    let server = priority_server();
    let (mut producer, mut consumer) = open_pair(server.local_addr(), 100, 64);
    round_trip(&mut producer, &mut consumer, 0, 5);
    producer.close_producer(1);
    let (mut confirmed, mut echoed) = (0, false);
    while !echoed {
        producer.next(|frame| match frame {
            Frame::PublishConfirm(batch) => confirmed += batch.count(),
            Frame::CloseProducer(close) => {
                assert_eq!(close.producer, ProducerId(1));
                echoed = true;
            }
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(confirmed, 5, "every confirm before the echo");
    // The id may be opened again, and a publish to the closed one is refused.
    producer.open_producer(1, 0, 100);
    producer.close_producer_echoed(1);
    producer.publish(1, 0..1, payload_of);
    producer.expect_refusal(ErrorCode::UNKNOWN_PRODUCER, FrameKind::Publish, 1);
}

#[test]
fn refusals_name_the_frame_and_id_and_keep_the_connection() {
    let queues = [QueueMode::Priority, QueueMode::Fanout { apps: 2 }];
    let server = server(&queues, limits());
    let addr = server.local_addr();
    let mut c = Client::hello(addr);
    let mut other = Client::producer(addr, 5, 0, 10);
    other.open_consumer(6, 1, 0, 10);

    let open = |producer, queue, max| Frame::OpenProducer(open_producer(producer, queue, max, ""));
    c.send(open(1, 9, 10));
    c.expect_refusal(ErrorCode::UNKNOWN_QUEUE, FrameKind::OpenProducer, 1);
    c.send(open(1, 0, (1 << 24) + 1));
    c.expect_error(ErrorCode::LIMIT_OUT_OF_RANGE);
    c.send(open(1, 0, 5000));
    c.expect_error(ErrorCode::LIMIT_OUT_OF_RANGE);
    c.open_producer(1, 0, 10);
    c.send(open(1, 0, 10));
    c.expect_error(ErrorCode::ID_IN_USE);

    let consumer =
        |consumer, queue, app| Frame::OpenConsumer(open_consumer(consumer, queue, app, 1));
    c.send(consumer(2, 9, 0));
    c.expect_error(ErrorCode::UNKNOWN_QUEUE);
    c.send(consumer(2, 1, 2));
    c.expect_refusal(ErrorCode::UNKNOWN_APP, FrameKind::OpenConsumer, 2);
    c.send(consumer(2, 0, 1));
    c.expect_error(ErrorCode::UNKNOWN_APP);

    // Ids of another connection are unknown here.
    c.publish(5, 0..1, payload_of);
    c.expect_refusal(ErrorCode::UNKNOWN_PRODUCER, FrameKind::Publish, 5);
    c.close_producer(5);
    c.expect_error(ErrorCode::UNKNOWN_PRODUCER);
    c.credit(6, 1);
    c.expect_refusal(ErrorCode::UNKNOWN_CONSUMER, FrameKind::Credit, 6);
    c.confirm(6, &[(Guid([1; 16]), DeliveryToken(0))], false);
    c.expect_error(ErrorCode::UNKNOWN_CONSUMER);
    c.send(Frame::CloseConsumer(close_consumer(6)));
    c.expect_error(ErrorCode::UNKNOWN_CONSUMER);

    // A consumer confirming what it was never sent.
    c.open_consumer(2, 0, 0, 1);
    c.confirm(2, &[(Guid([9; 16]), DeliveryToken(0))], false);
    c.expect_refusal(ErrorCode::UNKNOWN_CONSUMER, FrameKind::ConsumerConfirm, 2);

    // A payload larger than the server's slots: that one refused TooLarge, the other stored.
    c.publish(1, [100, 101], |id, _| if id == 100 { 5 } else { 1025 });
    let mut read = c.read_until(|r| r.confirms.len() >= 2 && !r.delivered.is_empty());
    assert_eq!(read.delivered.len(), 1, "only the small one");
    c.confirm(2, &read.deliveries(2), true);
    read.confirms.sort_unstable_by_key(|&(id, _)| id);
    let expected = [(100, ConfirmStatus::Stored), (101, ConfirmStatus::TooLarge)];
    assert_eq!(read.confirms, expected);

    // Still open: the producer publishes and its consumer gets it.
    c.publish(1, 0..1, payload_of);
    c.deliveries_among(2, 1, true, |_, payload| assert_eq!(payload.len(), 8));
}

/// Sends `bytes` (after a handshake if `handshake`): a fatal error of `code`, then the end.
fn refused_fatally(handshake: bool, bytes: &[u8], code: ErrorCode) {
    let server = priority_server();
    let mut c = if handshake {
        Client::hello(server.local_addr())
    } else {
        Client::connect(server.local_addr())
    };
    c.send_raw(bytes);
    c.expect_fatal(code);
}

/// As [`refused_fatally`], with `MALFORMED`.
fn malformed(handshake: bool, bytes: &[u8]) {
    refused_fatally(handshake, bytes, ErrorCode::MALFORMED);
}

#[test]
fn every_bad_header_is_answered_with_its_code_then_closed() {
    refused_fatally(false, b"GET / HTTP/1.1\r\n", ErrorCode::BAD_MAGIC);
    let version = raw(1, 0x03, 0, 0, &[]);
    refused_fatally(true, &version, ErrorCode::UNSUPPORTED_VERSION);
    refused_fatally(true, &body(0x7f, &[]), ErrorCode::UNKNOWN_KIND);
    let flags = raw(VERSION, 0x03, 1, 0, &[]);
    refused_fatally(true, &flags, ErrorCode::UNKNOWN_FLAGS);
    let large = raw(VERSION, 0x12, 0, MAX_FRAME_LEN + 1, &[]);
    refused_fatally(true, &large, ErrorCode::FRAME_TOO_LARGE);
}

#[test]
fn every_bad_body_is_answered_malformed_then_closed() {
    let mut large = vec![1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    large.extend_from_slice(&(MAX_PAYLOAD_LEN + 1).to_le_bytes());
    let not_utf8 = [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0xff, 0xfe];
    let name_cut = [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, b'a'];
    // A heartbeat with a body.
    malformed(true, &body(0x03, &[0]));
    // A publish of count 0.
    malformed(true, &body(0x12, &[1, 0, 0, 0, 0, 0, 0, 0]));
    // A publish whose count announces more than its body holds.
    let short = [[1, 0, 0, 0, 2, 0, 0, 0].as_slice(), &[0; 12]].concat();
    malformed(true, &body(0x12, &short));
    // A payload over MAX_PAYLOAD_LEN.
    malformed(true, &body(0x12, &large));
    // A credit of 0.
    malformed(true, &body(0x24, &[1, 0, 0, 0, 0, 0, 0, 0]));
    // An OpenProducer of max_unconfirmed 0.
    malformed(true, &body(0x10, &[0; 13]));
    // A Hello whose lowest version is above its highest.
    malformed(false, &body(0x01, &[2, 1, 0, 0, 0, 0]));
    // An OpenProducer whose name is not UTF-8.
    malformed(true, &body(0x10, &not_utf8));
    // An OpenProducer whose name_len announces more than its body holds.
    malformed(true, &body(0x10, &name_cut));
}

#[test]
fn the_handshake_is_enforced() {
    let open = encoded(Frame::OpenProducer(open_producer(1, 0, 1, "")));
    refused_fatally(false, &open, ErrorCode::HANDSHAKE_REQUIRED);
    let hello = encoded(hello_frame(0));
    refused_fatally(true, &hello, ErrorCode::HANDSHAKE_REQUIRED);
    let newer = body(0x01, &[VERSION + 1, VERSION + 2, 0, 0, 0, 0]);
    refused_fatally(false, &newer, ErrorCode::UNSUPPORTED_VERSION);
    // Older clients (4 included: before delivery tokens), by header or by range: refused.
    assert_eq!(VERSION, 5);
    for old in 1..VERSION {
        let hello = raw(old, 0x01, 0, 6, &[old, old, 0, 0, 0, 0]);
        refused_fatally(false, &hello, ErrorCode::UNSUPPORTED_VERSION);
        let range = body(0x01, &[1, old, 0, 0, 0, 0]);
        refused_fatally(false, &range, ErrorCode::UNSUPPORTED_VERSION);
        let only = body(0x01, &[old, old, 0, 0, 0, 0]);
        refused_fatally(false, &only, ErrorCode::UNSUPPORTED_VERSION);
    }
}

#[test]
fn a_frame_the_broker_never_receives_is_unexpected() {
    let deliver = built(|out| deliver(out, 1, [([0; 16], 0, &b"x"[..])]));
    refused_fatally(true, &deliver, ErrorCode::UNEXPECTED_KIND);
}

#[test]
fn a_silent_client_is_closed_at_the_idle_limit_whatever_its_heartbeat() {
    let server = priority_server_with(|l| (l.heartbeat, l.idle_timeout) = (ms(30), ms(90)));
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.shake_hands(30).version, VERSION);
    c.expect_fatal(ErrorCode::HEARTBEAT_TIMEOUT);
}

#[test]
fn the_server_sends_heartbeats_at_the_clients_interval_when_it_has_nothing_else_to_say() {
    // The server asks for its own interval (5 s), and sends at the client's (20 ms).
    let server = priority_server();
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.shake_hands(20).heartbeat_ms, 5000);
    c.expect_heartbeat();
    c.expect_heartbeat();
}

#[test]
fn a_truncated_frame_then_the_end_closes_quietly() {
    let server = priority_server();
    let mut c = Client::hello(server.local_addr());
    c.send_raw(&raw(VERSION, 0x24, 0, 8, &[])[..7]);
    c.close_write();
    c.expect_closed();
    connections_become(&server, 0);
}

#[test]
fn a_dropped_connection_frees_every_payload_slot() {
    let server = server(&[QueueMode::Fanout { apps: 1 }], limits());
    let mut c = Client::producer(server.local_addr(), 1, 0, 100);
    c.open_consumer(7, 0, 0, 64);
    c.publish(1, 0..40, payload_of);
    // Publish confirms may come first, as soon as the messages are stored.
    c.deliveries_among(7, 40, true, |_, _| {});
    assert!(server.stats().free_slots < 256);
    drop(c);
    all_slots_free(&server);
    connections_become(&server, 0);
    assert_eq!(server.stats().stale_handles, 0);
}

#[test]
fn a_dropped_consumer_connection_hands_its_messages_to_another() {
    let server = priority_server();
    let (mut producer, mut first) = open_pair(server.local_addr(), 100, 64);
    producer.publish(1, 0..10, payload_of);
    first.delivered(7, 10);
    drop(first);
    let mut second = Client::consumer(server.local_addr(), 7, 0, 0, 64);
    let guids = second.delivered(7, 10);
    second.confirm(7, &guids, true);
    producer.all_stored(1, 10);
    // Closed before its confirms are in, a consumer leaves them late; after, nothing.
    let released = || server.broker().queue_stats()[0].released;
    eventually("the confirms", || released() == 10);
    drop(producer);
    drop(second);
    all_slots_free(&server);
}

#[test]
fn shutdown_tells_every_client() {
    let server = priority_server();
    let mut c = Client::producer(server.local_addr(), 1, 0, 10);
    let stopping = std::thread::spawn(move || server.shutdown());
    c.expect_fatal(ErrorCode::SHUTTING_DOWN);
    stopping.join().unwrap();
}

#[test]
fn many_batches_through_one_connection_pair() {
    let server = priority_server();
    let (mut producer, mut consumer) = open_pair(server.local_addr(), 1000, 64);
    let mut next = 0;
    for _ in 0..50 {
        round_trip(&mut producer, &mut consumer, next, 64);
        next += 64;
    }
    producer.all_stored(1, next as usize);
    all_slots_free(&server);
}

#[test]
fn a_connection_past_the_limit_is_told_and_closed() {
    let server = priority_server_with(|l| l.max_connections = 1);
    let _first = Client::hello(server.local_addr());
    let mut second = Client::connect(server.local_addr());
    second.expect_fatal(ErrorCode::TOO_MANY_CONNECTIONS);
}

#[test]
fn closing_a_fanout_consumer_without_credit_frees_the_slots_of_what_it_held_back() {
    let server = server(&[QueueMode::Fanout { apps: 1 }], limits());
    let (mut producer, mut consumer) = open_pair(server.local_addr(), 100, 0);
    producer.publish(1, 0..10, payload_of);
    // The queue pushes them to the consumer's session, which holds them for want of credit.
    assert!(consumer.quiet_for(QUIET));
    consumer.close_consumer(7);
    all_slots_free(&server);
    let quiet = consumer.quiet_for(QUIET);
    assert!(quiet, "nothing delivered after the echo");
}

#[test]
fn more_bad_bodies_are_answered_malformed_then_closed() {
    // A batch over MAX_MESSAGES_PER_FRAME.
    let count = [1, MAX_MESSAGES_PER_FRAME + 1].map(u32::to_le_bytes);
    malformed(true, &body(0x23, &count.concat()));
    // A Hello of version 0.
    malformed(false, &body(0x01, &[0, 1, 0, 0, 0, 0]));
    // A publish confirm (never sent to the broker) of an unknown status: the body is
    // refused before its kind is.
    let confirm = [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10];
    malformed(true, &body(0x13, &confirm));
}

#[test]
fn error_frames_from_the_client() {
    let server = priority_server();
    let addr = server.local_addr();
    let error = |code, message| encoded(Frame::Error(fatal(code, message)));
    // A refusal: nothing to answer, the connection stays.
    let mut c = Client::hello(addr);
    c.send_raw(&error(ErrorCode::UNKNOWN_QUEUE, "hm"));
    c.open_producer(1, 0, 1);
    // A fatal one: the server closes without answering.
    c.send_raw(&error(ErrorCode::INTERNAL, "bye"));
    c.expect_closed();
    // A bad one (its message not UTF-8): closed without an answer too.
    let mut c = Client::hello(addr);
    c.send_raw(&body(0x04, &[11, 0, 0, 0, 0, 0, 0, 1, 0, 0xff]));
    c.expect_closed();
}

#[test]
fn a_running_broker_is_served_and_outlives_the_server() {
    let store = Arc::new(PayloadStore::try_new(limits().store_slots, limits().slot_size).unwrap());
    let broker = Arc::new(
        Broker::start(BrokerConfig {
            queues: vec![QueueConfig::new(QueueMode::Priority)],
            on_release: Some(store.on_release()),
            ..BrokerConfig::default()
        })
        .unwrap(),
    );
    let server = Server::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .broker(broker.clone(), vec![QueueMode::Priority], store.clone())
        .limits(limits())
        .start()
        .unwrap();
    let (mut producer, mut consumer) = open_pair(server.local_addr(), 10, 10);
    round_trip(&mut producer, &mut consumer, 0, 3);
    producer.all_stored(1, 3);
    eventually("the confirms", || broker.queue_stats()[0].released == 3);
    server.shutdown();
    assert!(broker.quiesce().is_ok(), "the broker still runs");
    assert_eq!(broker.queue_stats()[0].acked, 3);
    let free = store.free_slots();
    assert_eq!(free, store.slots(), "every slot freed by the release hook");
}

#[test]
fn a_queue_window_above_the_consumer_window_is_refused_at_start() {
    let refused = Server::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .broker_config(BrokerConfig {
            queues: vec![QueueConfig {
                window: 2048,
                ..QueueConfig::new(QueueMode::Priority)
            }],
            ..BrokerConfig::default()
        })
        .limits(Limits {
            consumer_window: 1024,
            ..Limits::default()
        })
        .start();
    match refused {
        Err(ServerError::Limits(e)) => assert_eq!(e.field, "consumer_window"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn many_producers_and_consumers_on_their_own_threads_exactly_once() {
    const PRODUCERS: u64 = 4;
    const PER_PRODUCER: u64 = 1500;
    const BATCH: u64 = 50;
    const TOTAL: usize = (PRODUCERS * PER_PRODUCER) as usize;
    let server = priority_server();
    let addr = server.local_addr();
    let delivered = Arc::new(AtomicUsize::new(0));
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let delivered = delivered.clone();
            std::thread::spawn(move || {
                let mut c = Client::consumer(addr, 7, 0, 0, 64);
                let (mut seen, mut guids) = (Vec::new(), Vec::new());
                while delivered.load(Ordering::Relaxed) < TOTAL {
                    if c.quiet_for(ms(20)) {
                        continue;
                    }
                    guids.clear();
                    c.next(|frame| match frame {
                        Frame::Deliver(batch) => {
                            for (guid, token, payload) in batch.messages() {
                                seen.push(id_in(payload));
                                guids.push((guid, token));
                            }
                        }
                        other => panic!("{other:?}"),
                    });
                    delivered.fetch_add(guids.len(), Ordering::Relaxed);
                    c.confirm(7, &guids, true);
                }
                seen
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = Client::producer(addr, 1, 0, 200);
                let mut confirmed = vec![0_u8; PER_PRODUCER as usize];
                for first in (0..PER_PRODUCER).step_by(BATCH as usize) {
                    // What the store refuses (full while the consumers catch up) goes again.
                    let mut ids: Vec<u64> = (first..first + BATCH).collect();
                    while !ids.is_empty() {
                        c.publish(1, ids.iter().copied(), |id, buf| {
                            buf[..8].copy_from_slice(&(p << 32 | id).to_le_bytes());
                            8 + (id % 50) as usize
                        });
                        let mut refused = Vec::new();
                        c.confirms(1, ids.len(), |id, status| match status {
                            ConfirmStatus::Stored => confirmed[id.0 as usize] += 1,
                            ConfirmStatus::RejectedStoreFull => refused.push(id.0),
                            other => panic!("message {}: {other:?}", id.0),
                        });
                        if !refused.is_empty() {
                            std::thread::sleep(ms(1));
                        }
                        ids = refused;
                    }
                }
                assert!(confirmed.iter().all(|&n| n == 1), "each confirmed once");
            })
        })
        .collect();
    producers.into_iter().for_each(|p| p.join().unwrap());
    let mut all: Vec<u64> = consumers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    all.sort_unstable();
    let expected: Vec<u64> = (0..PRODUCERS)
        .flat_map(|p| (0..PER_PRODUCER).map(move |id| p << 32 | id))
        .collect();
    assert_eq!(all, expected, "each delivered once");
    all_slots_free(&server);
}
