//! The client against a fake broker over loopback: sends, cap, timeouts, close, loss, errors,
//! heartbeats, credit and confirms; one outcome per message.

mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::*;
use zerodispatch_client::ConfirmStatus::{Closed, NotSent};
use zerodispatch_client::{
    AppId, Client, ClientError, ConfirmStatus, ConsumerOptions, ProducerOptions, QueueId,
    TrySendError,
};
use zerodispatch_wire::{ErrorCode, Frame, FrameKind, MAX_PAYLOAD_LEN};

/// The code of a protocol error (the client's own refusal of what it read).
fn protocol_code(error: &ClientError) -> Option<ErrorCode> {
    match error {
        ClientError::Protocol { code, .. } => Some(*code),
        _ => None,
    }
}

/// The code of a refusal, and the kind of frame refused.
fn refusal(error: &ClientError) -> Option<(ErrorCode, Option<FrameKind>)> {
    match error {
        ClientError::Refused { code, refused, .. } => Some((*code, *refused)),
        _ => None,
    }
}

/// The error of a broker's fatal `Error` frame saying `message`.
fn broker_error(code: ErrorCode, message: &str) -> ClientError {
    let message = message.into();
    ClientError::Broker { code, message }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_send_sends_single_messages_at_a_low_rate() {
    let (broker, _client, producer, outcomes) = producing(Config::default(), dynamic(64)).await;
    for i in 0..20 {
        producer.send(format!("m{i}").as_bytes()).await.unwrap();
        wait_outcomes(&outcomes, i + 1).await;
    }
    let counts = broker.publish_counts();
    assert_eq!(counts, vec![1; 20], "one message per frame at a low rate");
    for outcome in exactly_once(&outcomes, 20) {
        assert_eq!(outcome.status, ConfirmStatus::Stored);
        assert!(outcome.settled_at >= outcome.taken_at);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_send_forms_batches_under_load_cut_at_batch_size() {
    let (broker, _client, producer, outcomes) = producing(Config::default(), dynamic(64)).await;
    const N: u64 = 20_000;
    // From a plain thread, as fast as the cap allows: messages pile up behind writes.
    std::thread::scope(|s| {
        s.spawn(|| (0..N).for_each(|i| _ = producer.send_blocking(&i.to_le_bytes()).unwrap()));
    });
    wait_exactly_once(&outcomes, N).await;
    let counts = broker.publish_counts();
    assert_eq!(counts.iter().sum::<usize>(), N as usize);
    let cut = counts.iter().all(|&c| (1..=64).contains(&c));
    assert!(cut, "cut at batch_size: {counts:?}");
    let (frames, few) = (counts.len(), counts.len() < N as usize / 4);
    assert!(few, "batches under load: {frames} frames for {N}");
    assert!(counts.contains(&64), "some batch reached batch_size");
    // Every message in order: dynamic send keeps the order taken.
    assert_eq!(broker.publish_ids().concat(), ids(N));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_sends_on_its_ticks() {
    let options = timer(ms(100));
    let (broker, _client, producer, outcomes) = producing(Config::default(), options).await;
    for round in 0..2_u64 {
        let start = Instant::now();
        for i in 0..5_u64 {
            producer.send(&(round * 5 + i).to_le_bytes()).await.unwrap();
        }
        tokio::time::sleep(ms(20)).await;
        let settled = outcomes.lock().unwrap().len() as u64;
        assert_eq!(settled, round * 5, "nothing before the tick");
        wait_outcomes(&outcomes, (round as usize + 1) * 5).await;
        assert!(start.elapsed() <= ms(400), "sent at the tick");
    }
    assert_eq!(broker.publish_counts(), vec![5, 5], "one frame per tick");
    let times = broker.times_of(|f| matches!(f, Received::Publish { .. }));
    let gap = times[1] - times[0];
    assert!(gap >= ms(80), "ticks 100 ms apart: {gap:?}");
    exactly_once(&outcomes, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_makes_send_wait_then_resume_and_try_send_hand_back() {
    let (broker, _client, producer, outcomes) = producing(Config::holding(), capped(4)).await;
    let producer = Arc::new(producer);
    send_n(&producer, 4).await;
    let full = producer.try_send(b"x");
    assert_eq!(full, Err(TrySendError::Full), "handed back at the cap");
    let dropped = tokio::time::timeout(ms(20), producer.send(b"dropped")).await;
    assert!(dropped.is_err(), "send waits at the cap");
    let unconfirmed = producer.unconfirmed();
    assert_eq!(unconfirmed, 4, "a send dropped while waiting took nothing");
    let waiting = Arc::clone(&producer);
    let fifth = tokio::spawn(async move { waiting.send(b"fifth").await });
    tokio::time::sleep(ms(50)).await;
    assert!(!fifth.is_finished(), "send waits at the cap");
    assert_eq!(producer.unconfirmed(), 4);
    wait_until("4 messages", || broker.published() == 4).await;
    broker.act(Action::ConfirmHeld(ConfirmStatus::Stored));
    let id = tokio::time::timeout(Duration::from_secs(5), fifth).await;
    let id = id.unwrap().unwrap().unwrap().0;
    assert_eq!(id, 4, "resumes once confirms free room");
    wait_outcomes(&outcomes, 4).await;
    assert!(producer.try_send(b"sixth").is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_blocks_send_blocking_then_resumes() {
    let (broker, _client, producer, outcomes) = producing(Config::holding(), capped(2)).await;
    let producer = Arc::new(producer);
    let done = Arc::new(AtomicUsize::new(0));
    let (sender, sent) = (Arc::clone(&producer), Arc::clone(&done));
    let thread = std::thread::spawn(move || {
        for i in 0..3_u8 {
            sender.send_blocking(&[i]).unwrap();
            sent.fetch_add(1, Ordering::SeqCst);
        }
    });
    // Waits for the two the cap allows, then gives the third time to go (it must not).
    wait_until("two sent", || done.load(Ordering::SeqCst) >= 2).await;
    tokio::time::sleep(ms(100)).await;
    let sent = done.load(Ordering::SeqCst);
    assert_eq!(sent, 2, "the third blocks at the cap");
    broker.wait_published(1).await;
    broker.act(Action::ConfirmHeld(ConfirmStatus::Stored));
    let joined = tokio::task::spawn_blocking(move || thread.join()).await;
    joined.unwrap().unwrap();
    assert_eq!(done.load(Ordering::SeqCst), 3);
    wait_outcomes(&outcomes, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_timeout_fires_once_and_a_late_confirm_is_ignored() {
    let options = ProducerOptions {
        confirm_timeout: Some(ms(50)),
        ..ProducerOptions::default()
    };
    let (broker, _client, producer, outcomes) = producing(Config::holding(), options).await;
    let start = Instant::now();
    send_n(&producer, 3).await;
    wait_outcomes(&outcomes, 3).await;
    assert!(start.elapsed() >= ms(50));
    broker.act(Action::ConfirmHeld(ConfirmStatus::Stored));
    tokio::time::sleep(ms(100)).await;
    for outcome in exactly_once(&outcomes, 3) {
        assert_eq!(outcome.status, ConfirmStatus::TimedOut);
        assert!(outcome.settled_at - outcome.taken_at >= ms(50));
    }
    assert_eq!(producer.unconfirmed(), 0);
    producer.send(b"after").await.unwrap();
    broker.wait_published(3).await;
    broker.act(Action::ConfirmHeld(ConfirmStatus::Stored));
    wait_outcomes(&outcomes, 4).await;
    assert_eq!(outcomes.lock().unwrap()[3].status, ConfirmStatus::Stored);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_gives_every_message_in_flight_one_outcome() {
    for close_confirms in [true, false] {
        let config = Config::holding().with(|c| c.close_echo_only = !close_confirms);
        let (broker, client, producer, outcomes) = producing(config, dynamic(4)).await;
        send_n(&producer, 10).await;
        producer.close().await.unwrap();
        // Every outcome is in when close returns.
        all_settled(&outcomes, 10, ConfirmStatus::Closed);
        let sent = broker.published();
        assert_eq!(sent, 10, "what was pending went before the close");
        let last = broker.frames().pop();
        assert!(matches!(last, Some(Received::CloseProducer { .. })));
        client.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_loss_closes_every_message_in_flight_once() {
    let (broker, client, producer, outcomes) = producing(Config::holding(), dynamic(64)).await;
    send_n(&producer, 10).await;
    broker.wait_published(9).await;
    broker.act(Action::Drop);
    assert_eq!(client.closed().await, ClientError::ConnectionClosed);
    all_settled(&outcomes, 10, ConfirmStatus::Closed);
    let closed = ClientError::ConnectionClosed;
    assert_eq!(producer.send(b"late").await, Err(closed.clone()));
    let failed = Err(TrySendError::Failed(closed));
    assert_eq!(producer.try_send(b"late"), failed);
    assert_eq!(producer.close().await, Err(ClientError::ConnectionClosed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_close_reports_what_has_no_outcome() {
    let (_broker, client, producer, outcomes) = producing(Config::holding(), dynamic(64)).await;
    send_n(&producer, 5).await;
    client.close().await;
    for outcome in exactly_once(&outcomes, 5) {
        assert!(matches!(outcome.status, Closed | NotSent));
    }
    assert_eq!(producer.send(b"late").await, Err(ClientError::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_typed_and_the_connection_stays_open() {
    let (_broker, client) = connected(Config::default()).await;
    let open = client.open_producer(QueueId(UNKNOWN_QUEUE), ProducerOptions::default(), |_| {});
    let refused = open.await.unwrap_err();
    let ClientError::Refused { subject, .. } = &refused else {
        panic!("not a refusal: {refused:?}");
    };
    let expected = (ErrorCode::UNKNOWN_QUEUE, Some(FrameKind::OpenProducer));
    assert_eq!((refusal(&refused), *subject), (Some(expected), 1));
    assert!(!refused.is_fatal());
    let options = ConsumerOptions::default();
    let consumer = client.open_consumer(QueueId(UNKNOWN_QUEUE), AppId(0), options, |_| {});
    let refused = refusal(&consumer.await.unwrap_err());
    let expected = (ErrorCode::UNKNOWN_QUEUE, Some(FrameKind::OpenConsumer));
    assert_eq!(refused, Some(expected));
    let (producer, outcomes) = producer_of(&client, ProducerOptions::default()).await;
    producer.send(b"still open").await.unwrap();
    wait_outcomes(&outcomes, 1).await;
    assert_eq!(client.error(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_error_frame_ends_the_connection_with_a_typed_error() {
    let (broker, client, producer, outcomes) =
        producing(Config::holding(), ProducerOptions::default()).await;
    producer.send(b"in flight").await.unwrap();
    let bye = error_bytes(ErrorCode::SHUTTING_DOWN, None, 0, "bye");
    broker.act(Action::Raw(bye));
    let bye = broker_error(ErrorCode::SHUTTING_DOWN, "bye");
    assert_eq!(client.closed().await, bye);
    let all = exactly_once(&outcomes, 1);
    assert!(matches!(all[0].status, Closed | NotSent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bytes_from_the_broker_are_answered_with_an_error_frame() {
    let (broker, client) = connected(Config::default()).await;
    broker.act(Action::Raw(b"XY\x01\x03\0\0\0\0\0\0".to_vec()));
    let error = client.closed().await;
    let code = ErrorCode::BAD_MAGIC;
    assert_eq!(protocol_code(&error), Some(code), "{error:?}");
    broker.wait_received(Received::Error { code }).await;

    // A frame a client never receives.
    let (broker, client) = connected(Config::default()).await;
    let credit = zerodispatch_wire::Credit {
        consumer: zerodispatch_wire::ConsumerId(1),
        credit: 1,
    };
    broker.act(Action::Raw(frame_bytes(Frame::Credit(credit))));
    let error = client.closed().await;
    let unexpected = Some(ErrorCode::UNEXPECTED_KIND);
    assert_eq!(protocol_code(&error), unexpected, "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_broker_is_detected_after_three_of_the_clients_heartbeat_intervals() {
    // The broker asks for 5 s, the client announces 30 ms: it gives up after 90 ms of silence.
    let config = Config::default().with(|c| (c.heartbeat_ms, c.silent_heartbeats) = (5_000, true));
    let broker = FakeBroker::start(config).await;
    let start = Instant::now();
    let mut options = quiet();
    options.heartbeat = ms(30);
    let client = Client::connect(broker.addr, options).await.unwrap();
    assert_eq!(client.broker_heartbeat(), Duration::from_secs(5));
    assert_eq!(client.closed().await, ClientError::HeartbeatTimeout);
    let elapsed = start.elapsed();
    assert!(elapsed >= ms(90), "three intervals: {elapsed:?}");
    assert!(elapsed < ms(2_000), "not the broker's 15 s: {elapsed:?}");
    let code = ErrorCode::HEARTBEAT_TIMEOUT;
    broker.wait_received(Received::Error { code }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_client_sends_heartbeats() {
    // The broker asks for 20 ms; the client announces none, so never times the broker out.
    let broker = FakeBroker::start(Config::default().with(|c| c.heartbeat_ms = 20)).await;
    let client = Client::connect(broker.addr, quiet()).await.unwrap();
    tokio::time::sleep(ms(150)).await;
    let frames = broker.frames();
    assert_eq!(frames[0], Received::Hello { heartbeat_ms: 0 });
    let beats = frames.iter().filter(|f| **f == Received::Heartbeat).count();
    let about = (2..=9).contains(&beats);
    assert!(about, "about one per 20 ms idle: {beats}");
    assert_eq!(client.error(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_gets_no_more_than_its_credit() {
    let (broker, client) = connected(Config::default()).await;
    let (consumer, got) = consuming(&client, credit(3, false), |batch| batch.confirm_all()).await;
    let payloads: Vec<Vec<u8>> = (0..10_u8).map(|i| vec![i; 3]).collect();
    broker.deliver(consumer.id().0, payloads);
    // Waits for what the credit allows, then gives a fourth time to arrive (it must not).
    wait_until("the initial credit's 3", || got.lock().unwrap().len() >= 3).await;
    tokio::time::sleep(ms(100)).await;
    assert_eq!(got.lock().unwrap().len(), 3, "the initial credit");
    consumer.add_credit(2).unwrap();
    wait_until("two more", || got.lock().unwrap().len() >= 5).await;
    tokio::time::sleep(ms(100)).await;
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 5, "three and two");
    let token = support::token_of(1, consumer.id().0, 4);
    assert_eq!(got[4], (support::guid(4), token, vec![4; 3]));
    wait_until("5 confirms", || broker.confirmed() == 5).await;
    assert_eq!(broker.log().bad_tokens, 0, "each its own token");
    assert_eq!(broker.credits(), vec![2], "no automatic credit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_credit_keeps_messages_flowing_and_confirms_are_batched() {
    let (broker, client) = connected(Config::default()).await;
    let options = credit(500, true);
    let (consumer, received) = consuming(&client, options, |batch| batch.confirm_all()).await;
    let payloads: Vec<Vec<u8>> = (0..2_000_u32).map(|i| i.to_le_bytes().to_vec()).collect();
    broker.deliver(consumer.id().0, payloads);
    wait_until("2000 confirms", || broker.confirmed() == 2_000).await;
    assert_eq!(received.lock().unwrap().len(), 2_000);
    let frames = broker.confirm_counts().len();
    let few = frames <= 8;
    assert!(
        few,
        "a batch of 500 confirmed in a frame or a few: {frames}"
    );
    let credit: u32 = broker.credits().iter().sum();
    assert_eq!(credit, 2_000, "one credit back per confirm");
    consumer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirms_from_outside_the_handler_go_one_by_one_at_a_low_rate() {
    let (broker, client) = connected(Config::default()).await;
    let (consumer, handed) = consuming(&client, ConsumerOptions::default(), |_| {}).await;
    broker.deliver(consumer.id().0, vec![b"a".to_vec(); 4]);
    wait_until("delivery", || handed.lock().unwrap().len() == 4).await;
    let delivered = handed.lock().unwrap().clone();
    for (i, (guid, token, _)) in delivered.into_iter().enumerate() {
        consumer.confirm(guid, token).unwrap();
        wait_until("a confirm", || broker.confirm_counts().len() == i + 1).await;
    }
    assert_eq!(broker.confirm_counts(), vec![1; 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_without_losing_anything() {
    let (_broker, client) = connected(Config::default()).await;
    let error = client.open_producer(QueueId(0), capped(0), |_| {}).await;
    assert_eq!(invalid_option(&error.unwrap_err()), Some("max_unconfirmed"));
    let error = client.open_producer(QueueId(0), dynamic(0), |_| {}).await;
    assert_eq!(invalid_option(&error.unwrap_err()), Some("batch_size"));
    let (producer, outcomes) = producer_of(&client, ProducerOptions::default()).await;
    let big = vec![0; MAX_PAYLOAD_LEN as usize + 1];
    assert!(matches!(
        producer.send(&big).await,
        Err(ClientError::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        producer.try_send(&big),
        Err(TrySendError::Failed(ClientError::PayloadTooLarge { .. }))
    ));
    let largest = vec![7; MAX_PAYLOAD_LEN as usize];
    let id = producer.send(&largest).await.unwrap().0;
    assert_eq!(id, 0, "the refused ones took no id");
    wait_outcomes(&outcomes, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_counted_and_the_connection_goes_on() {
    let (_broker, client) = connected(Config::default()).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let producer = client
        .open_producer(QueueId(0), ProducerOptions::default(), move |_| {
            if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("planned panic in on_confirm");
            }
        })
        .await
        .unwrap();
    zerodispatch_testkit::quiet_planned_panics();
    producer.send(b"one").await.unwrap();
    wait_until("the first call", || calls.load(Ordering::SeqCst) >= 1).await;
    producer.send(b"two").await.unwrap();
    wait_until("the second call", || calls.load(Ordering::SeqCst) >= 2).await;
    assert_eq!(producer.handler_panics(), 1);
    assert_eq!(producer.unconfirmed(), 0);
    assert_eq!(client.error(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_is_not_there_is_an_io_error() {
    // A port bound and held but not listening: a connection is refused, and no other
    // process can take the port meanwhile (as it could a port bound and released).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let error = Client::connect(addr, quiet()).await.unwrap_err();
    assert!(matches!(error, ClientError::Io { .. }), "{error:?}");
    drop(socket);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_error_frame_closes_without_an_answer() {
    let (broker, client) = connected(Config::default()).await;
    // An error frame whose message_len (5) overruns its body.
    let mut raw = b"ZD\x05\x04\0\0".to_vec();
    raw.extend_from_slice(&9_u32.to_le_bytes());
    raw.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 5, 0]);
    broker.act(Action::Raw(raw));
    let error = client.closed().await;
    let malformed = Some(ErrorCode::MALFORMED);
    assert_eq!(protocol_code(&error), malformed, "{error:?}");
    broker.wait_for("the end", |log| log.ended).await;
    let answers = broker.times_of(|f| matches!(f, Received::Error { .. }));
    assert!(answers.is_empty(), "not answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_fails_with_a_typed_error() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A broker that refuses Hello.
    let (listener, addr) = listen().await;
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut hello = [0; 16];
        stream.read_exact(&mut hello).await.unwrap();
        let refused = Some(FrameKind::Hello);
        let no = error_bytes(ErrorCode::UNSUPPORTED_VERSION, refused, 0, "no");
        stream.write_all(&no).await.unwrap();
    });
    let error = Client::connect(addr, quiet()).await.unwrap_err();
    assert_eq!(error, broker_error(ErrorCode::UNSUPPORTED_VERSION, "no"));

    // A broker that never answers.
    let (listener, addr) = listen().await;
    let mut options = quiet();
    options.handshake_timeout = ms(50);
    let error = Client::connect(addr, options).await.unwrap_err();
    assert_eq!(error, ClientError::HandshakeTimeout);
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_never_written_are_not_sent_when_the_connection_ends() {
    // A tick that never comes: the messages stay pending.
    let options = timer(Duration::from_secs(3600));
    let (broker, client, producer, outcomes) = producing(Config::default(), options).await;
    send_n(&producer, 3).await;
    broker.act(Action::Drop);
    assert_eq!(client.closed().await, ClientError::ConnectionClosed);
    all_settled(&outcomes, 3, ConfirmStatus::NotSent);
    assert!(broker.publish_counts().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_out_while_the_broker_keeps_sending() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A broker that answers the open, then sends heartbeats nonstop while it counts publishes.
    let (listener, addr) = listen().await;
    let published = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&published);
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        answer_hello_and_open(&mut stream, 0).await;
        let (mut reader, mut writer) = stream.into_split();
        tokio::spawn(async move {
            let mut buf = vec![0; 1 << 21];
            let mut filled = 0;
            loop {
                match reader.read(&mut buf[filled..]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => filled += n,
                }
                let mut at = 0;
                while let Ok(Some((frame, n))) = zerodispatch_wire::decode(&buf[at..filled]) {
                    if let Frame::Publish(publish) = frame {
                        count.fetch_add(publish.count() as usize, Ordering::SeqCst);
                    }
                    at += n;
                }
                buf.copy_within(at..filled, 0);
                filled -= at;
            }
        });
        let beats = frame_bytes(Frame::Heartbeat).repeat(10_000);
        while writer.write_all(&beats).await.is_ok() {}
    });
    let client = Client::connect(addr, quiet()).await.unwrap();
    let (producer, _) = producer_of(&client, dynamic(64)).await;
    let start = Instant::now();
    for i in 0..100_u8 {
        producer.send(&[i]).await.unwrap();
        tokio::time::sleep(ms(1)).await;
    }
    wait_count("published", 100, || published.load(Ordering::SeqCst)).await;
    let waited = start.elapsed();
    assert!(waited < Duration::from_secs(5), "5 s for 100 published");
    assert_eq!(client.error(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_producer_numbers_on_from_the_names_last_stored() {
    let (broker, client) = connected(Config::default().with(|c| c.dedup = true)).await;
    for bad in ["", &"n".repeat(256)] {
        let (opened, _) = named_producer_of(&client, bad, dynamic(8)).await;
        let error = opened.unwrap_err();
        assert_eq!(invalid_option(&error), Some("name"), "{error}");
    }
    let (producer, outcomes) = named_producer_of(&client, "orders", dynamic(8)).await;
    let producer = producer.unwrap();
    let last = producer.last_stored();
    assert_eq!(last, None, "nothing stored for the name yet");
    send_n(&producer, 3).await;
    wait_outcomes(&outcomes, 3).await;
    producer.close().await.unwrap();
    let (again, outcomes) = named_producer_of(&client, "orders", dynamic(8)).await;
    let again = again.unwrap();
    assert_eq!(again.last_stored().map(|id| id.0), Some(2));
    let id = again.send(b"m").await.unwrap().0;
    assert_eq!(id, 3, "on from the last stored");
    wait_outcomes(&outcomes, 1).await;
    assert_eq!(broker.stored(), vec![0, 1, 2, 3]);
    let (anonymous, _) = producer_of(&client, dynamic(8)).await;
    assert_eq!(anonymous.last_stored(), None);
}

/// A `Publish` refused with its producer left open: the client closes it on both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_refused_with_the_producer_left_open_closes_it_on_both_sides() {
    let (broker, client, producer, outcomes) =
        producing(Config::holding(), ProducerOptions::default()).await;
    producer.send(b"one").await.unwrap();
    wait_until("one published", || broker.published() >= 1).await;
    let publish = Some(FrameKind::Publish);
    let twice = error_bytes(ErrorCode::DUPLICATE_ID, publish, producer.id().0, "twice");
    broker.act(Action::Raw(twice));
    wait_outcomes(&outcomes, 1).await;
    let refused = refusal(&producer.send(b"two").await.unwrap_err());
    assert_eq!(refused.map(|(code, _)| code), Some(ErrorCode::DUPLICATE_ID));
    wait_until("a CloseProducer sent", || {
        matches!(broker.frames().last(), Some(Received::CloseProducer { .. }))
    })
    .await;
    all_settled(&outcomes, 1, ConfirmStatus::Closed);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_blocking_on_a_runtime_thread_panics_naming_send_and_sends_nothing() {
    let (_broker, _client, producer, outcomes) =
        producing(Config::default(), ProducerOptions::default()).await;
    let producer = Arc::new(producer);
    // On a worker thread: refused even with room to spare (it would not have waited).
    let on_worker = Arc::clone(&producer);
    let message = tokio::spawn(async move {
        let refused = catch_unwind(AssertUnwindSafe(|| on_worker.send_blocking(b"x")));
        let message = refused.unwrap_err().downcast::<String>();
        message.map(|text| *text).unwrap_or_default()
    });
    let message = message.await.unwrap();
    assert!(message.contains("`send_blocking` blocks"), "{message}");
    assert!(message.contains("use `send` instead"), "{message}");
    // `send` on the runtime and `send_blocking` on a blocking thread both send.
    let first = producer.send(b"a").await.unwrap();
    let sender = Arc::clone(&producer);
    let second = tokio::task::spawn_blocking(move || sender.send_blocking(b"b")).await;
    let second = second.unwrap().unwrap();
    assert_eq!((first.0, second.0), (0, 1), "the refused call took no id");
    wait_outcomes(&outcomes, 2).await;
}
