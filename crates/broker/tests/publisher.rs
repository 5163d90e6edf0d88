//! The producer's sending side: flushes, the unconfirmed cap, confirm timeouts and close.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use zerodispatch_broker::*;

mod support;

use support::*;

fn broker() -> Broker {
    start(one_queue(QueueMode::Priority))
}

/// The replica's receipts for `guids`, once the queue has stored what was sent.
fn receipts(broker: &Broker, guids: &[Guid]) {
    broker.quiesce().unwrap();
    support::receipts(broker, guids, 0);
}

/// Sends `n` messages of 8 bytes to queue 0; their GUIDs.
fn send(p: &Producer, n: usize) -> Vec<Guid> {
    (0..n)
        .map(|_| p.send(QueueId(0), payload(8)).unwrap())
        .collect()
}

/// Waits until the producer's session has handled (and, flushing dynamically, sent on) all.
fn sent_on(broker: &Broker) {
    support::handled(broker, session(broker));
}

/// A payload of `len` bytes.
fn payload(len: u32) -> Payload {
    Payload { handle: 0, len }
}

/// The frames and messages the sessions put.
fn frames(broker: &Broker) -> (u64, u64) {
    let s = broker.session_stats();
    (s.put_frames, s.put_messages)
}

#[test]
fn dynamic_send_flushes_each_message_at_once_when_the_queue_drains() {
    let broker = broker();
    let _c = drain(&broker, 0);
    let (p, acks) = producer_with(&broker, ProducerConfig::default());
    for _ in 0..20 {
        p.send(QueueId(0), payload(8)).unwrap();
        broker.quiesce().unwrap(); // low rate: the session's queue drains after each message
    }
    assert_eq!(frames(&broker), (20, 20), "one frame per message");
    assert!(outcomes(&acks).values().all(|s| *s == AckStatus::Stored));
}

/// The (frames, messages) put for `n` messages of `len` bytes sent while the session is held.
fn held_burst(config: ProducerConfig, n: usize, len: u32) -> (u64, u64) {
    let broker = broker();
    let (p, _acks) = producer_with(&broker, config);
    let gate = hold(&broker, session(&broker));
    for _ in 0..n {
        p.send(QueueId(0), payload(len)).unwrap();
    }
    gate.wait();
    broker.quiesce().unwrap();
    frames(&broker)
}

#[test]
fn a_batch_is_sent_when_it_reaches_batch_size_or_fills_a_frame() {
    // 10 messages, batches of at most 4 cut by the cap: 4 + 4 + 2 (the last at the drain).
    let config = producer_config(|c| c.batch_size = 4);
    assert_eq!(held_burst(config, 10, 8), (3, 10));
    // Frame size: 3 messages of 100 bytes fit (3 x 132 = 396 <= 400), a fourth does not.
    let config = producer_config(|c| c.max_frame_bytes = 400);
    assert_eq!(held_burst(config, 7, 100), (3, 7), "frames of 3, 3 and 1");
}

#[test]
fn a_message_larger_than_a_frame_is_refused_and_handed_back() {
    let broker = broker();
    let (p, _acks) = producer_with(&broker, producer_config(|c| c.max_frame_bytes = 1000));
    let refused = Err(SendError::TooLarge {
        payload: payload(1000),
        needs: 1000 + FRAME_OVERHEAD,
        max_frame_bytes: 1000,
    });
    assert_eq!(p.send(QueueId(0), payload(1000)), refused);
    assert_eq!(p.try_send(QueueId(0), payload(1000)), refused);
    // `publish` takes no credit, but the frame is the same: refused, handed back.
    assert_eq!(p.publish(QueueId(0), payload(1000)), refused);
    let fits = payload(1000 - FRAME_OVERHEAD as u32);
    assert!(p.send(QueueId(0), fits).is_ok());
}

#[test]
fn timer_aggregation_waits_for_the_tick() {
    let broker = broker();
    let _c = drain(&broker, 0);
    let (p, acks) = producer_with(&broker, timer(Duration::from_millis(50)));
    let start = std::time::Instant::now();
    send(&p, 5);
    // Nothing is sent before a tick, however long the session's queue has been drained.
    thread::sleep(Duration::from_millis(10));
    assert!(acks.lock().unwrap().is_empty(), "sent before the tick");
    let limit = Duration::from_secs(5).saturating_sub(start.elapsed());
    wait_up_to(limit, "the tick", || len(&acks) >= 5);
    let (frames, messages) = frames(&broker);
    assert_eq!(messages, 5);
    let one_tick = "the five messages went in one tick (two if a tick fell between sends)";
    assert!(frames <= 2, "{one_tick}: {frames}");
}

#[test]
fn the_cap_blocks_send_and_try_send_hands_back_without_exceeding_it() {
    let broker = start(replicated());
    let (p, acks) = producer_with(&broker, capped(3));
    let first: Vec<Guid> = (0..3)
        .map(|_| p.try_send(QueueId(0), payload(8)).unwrap())
        .collect();
    let full = Err(SendError::Full(payload(9)));
    assert_eq!(p.try_send(QueueId(0), payload(9)), full);
    assert_eq!(p.unconfirmed(), 3);
    // A blocking send waits until a message is ACKed: here by its replica's receipt.
    let p = Arc::new(p);
    let sender = {
        let p = p.clone();
        thread::spawn(move || p.send(QueueId(0), payload(10)))
    };
    thread::sleep(Duration::from_millis(30));
    assert!(!sender.is_finished(), "send must wait at the cap");
    receipts(&broker, &first);
    let last = sender.join().unwrap().unwrap();
    receipts(&broker, &[last]);
    broker.quiesce().unwrap();
    assert_eq!(outcomes(&acks).len(), 4);
    assert_eq!(p.unconfirmed(), 0);
}

#[test]
fn many_senders_at_a_tiny_cap_never_exceed_it_and_never_hang() {
    let broker = Arc::new(broker());
    let _c = drain(&broker, 0);
    let cap = 4;
    let peak = Arc::new(AtomicUsize::new(0));
    let (p, acks) = producer_with(&broker, capped(cap));
    let p = Arc::new(p);
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let (p, peak) = (p.clone(), peak.clone());
            thread::spawn(move || {
                for _ in 0..2000 {
                    p.send(QueueId(0), payload(8)).unwrap();
                    peak.fetch_max(p.unconfirmed(), Ordering::Relaxed);
                }
            })
        })
        .collect();
    let finished = || senders.iter().all(|s| s.is_finished());
    let limit = Duration::from_secs(60);
    wait_up_to(limit, "a stuck sender: a lost wake-up", finished);
    senders.into_iter().for_each(|s| s.join().unwrap());
    broker.quiesce().unwrap();
    let peak = peak.load(Ordering::Relaxed);
    assert!(peak <= cap, "the cap was exceeded: {peak}");
    let all = outcomes(&acks);
    assert_eq!(all.len(), 8000);
    assert!(all.values().all(|s| *s == AckStatus::Stored));
}

#[test]
fn an_unconfirmed_message_times_out_once_and_a_late_ack_is_counted() {
    // Stored, and waiting for the replica's receipt that makes the quorum.
    let broker = start(replicated());
    let (p, acks) = producer_with(&broker, timeout(Duration::from_millis(40)));
    let guids = send(&p, 5);
    let start = std::time::Instant::now();
    wait_up_to(Duration::from_secs(5), "a timeout", || len(&acks) >= 5);
    assert!(start.elapsed() >= Duration::from_millis(30));
    assert_each(&outcomes(&acks), &guids, AckStatus::TimedOut);
    let credits = p.unconfirmed();
    assert_eq!(credits, 0, "a timed-out message gives its credit back");
    // The receipts come now: the ACKs come late, are counted, not reported again.
    receipts(&broker, &guids);
    broker.quiesce().unwrap();
    assert_eq!(len(&acks), 5);
    let s = broker.session_stats();
    assert_eq!((s.timed_out, s.late_acks), (5, 5));
}

#[test]
fn a_late_ack_whose_slot_holds_a_newer_message_leaves_that_message_waiting() {
    // A cap of 1: the newer message takes the timed-out one's slot, which the old ACK names;
    // the timeout outlasts the test's use of the newer one.
    let broker = start(replicated());
    let config = with(timeout(Duration::from_millis(400)), |c| {
        c.max_unconfirmed = 1
    });
    let (p, acks) = producer_with(&broker, config);
    let old = p.send(QueueId(0), payload(8)).unwrap();
    wait_for("the first message's timeout", || len(&acks) == 1);
    let newer = p.send(QueueId(0), payload(8)).unwrap();
    // Both stored, both waiting for the replica's receipt; the old one's comes first.
    receipts(&broker, &[old]);
    broker.quiesce().unwrap();
    let reported = "the old ACK reported the newer message";
    assert_eq!(statuses(&acks), [AckStatus::TimedOut], "{reported}");
    let s = broker.session_stats();
    assert_eq!((s.timed_out, s.acks, s.late_acks), (1, 0, 1));
    // The newer message's own ACK reports it.
    receipts(&broker, &[newer]);
    broker.quiesce().unwrap();
    assert_eq!(statuses(&acks), [AckStatus::TimedOut, AckStatus::Stored]);
    assert_eq!(acks.lock().unwrap()[1].guid, newer);
    let s = broker.session_stats();
    assert_eq!((s.timed_out, s.acks, s.late_acks), (1, 1, 1));
}

#[test]
fn close_sends_the_batch_reports_unsent_as_not_sent_and_gives_in_flight_its_time() {
    // In flight, held unconfirmed a moment by a consumer: confirmed within the wait.
    let broker = broker();
    let gate = Arc::new(std::sync::Barrier::new(2));
    let (g, entered) = (gate.clone(), Arc::new(AtomicBool::new(false)));
    let (mut first, inside) = (true, entered.clone());
    let _c = consumer_calling(&broker, move |_: &[Delivery]| {
        if std::mem::take(&mut first) {
            inside.store(true, Ordering::SeqCst);
            g.wait();
        }
    });
    let (p, acks) = producer_with(&broker, ProducerConfig::default());
    let guids = send(&p, 50);
    // Stored, or the consumer's handler in: not `sent_on`, whose callback would wait behind
    // the handler on the one session processor (regression: it hung under load); nor only
    // stored, since the handler may hold the processor before the session has sent all 50
    // (then the rest wait behind it, sent once it lets go, before the close).
    let stored = || broker.queue_stats()[0].stored == 50;
    let ready = || stored() || entered.load(Ordering::SeqCst);
    wait_for("stored, or held by the consumer", ready);
    let releaser = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        gate.wait();
    });
    let closed = p.close(Duration::from_secs(5));
    assert!(closed, "everything had its outcome within the wait");
    releaser.join().unwrap();
    assert_each(&outcomes(&acks), &guids, AckStatus::Stored);
    assert!(matches!(
        p.send(QueueId(0), payload(8)),
        Err(SendError::Closed(_))
    ));

    // In flight, waiting for a receipt that never comes: `Closed` when the wait ends.
    let broker = start(replicated());
    let (p, acks) = producer_with(&broker, ProducerConfig::default());
    let guids = send(&p, 5);
    sent_on(&broker);
    let closed = p.close(Duration::from_millis(30));
    assert!(!closed, "nothing could confirm them");
    broker.quiesce().unwrap();
    assert_each(&outcomes(&acks), &guids, AckStatus::Closed);

    // Not sent yet (before the timer's tick), closed without a wait: `NotSent`.
    let config = timer(Duration::from_secs(3600));
    let broker = self::broker();
    let (p, acks) = producer_with(&broker, config);
    let guids = send(&p, 5);
    sent_on(&broker);
    assert!(!p.close(Duration::ZERO));
    broker.quiesce().unwrap();
    assert_each(&outcomes(&acks), &guids, AckStatus::NotSent);
    let stored = broker.queue_stats()[0].stored;
    assert_eq!(stored, 0, "nothing reached the queue");

    // The same with a wait: the close sends the batch at once; each gets its real outcome.
    let broker = self::broker();
    let (p, acks) = producer_with(&broker, config);
    let guids = send(&p, 5);
    sent_on(&broker);
    assert!(p.close(Duration::from_secs(5)));
    assert_each(&outcomes(&acks), &guids, AckStatus::Stored);
    assert_eq!(broker.queue_stats()[0].stored, 5);
}

#[test]
fn every_message_gets_exactly_one_outcome_under_a_random_close() {
    for seed in 1..=6_u64 {
        let broker = broker();
        let _c = drain(&broker, 0);
        let mut config = capped(64);
        config.confirm_timeout = Some(Duration::from_millis(5 + seed));
        if seed % 2 == 1 {
            config.flush = FlushStrategy::Timer(Duration::from_millis(2));
        }
        let (p, acks) = producer_with(&broker, config);
        let p = Arc::new(p);
        let sent: Arc<Mutex<Vec<Guid>>> = Arc::default();
        let sender = {
            let (p, sent) = (p.clone(), sent.clone());
            thread::spawn(move || {
                while let Ok(g) = p.send(QueueId(0), payload(8)) {
                    sent.lock().unwrap().push(g);
                }
            })
        };
        // The close comes while messages are being sent: after the first, even if loaded.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while sent.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(5 * seed));
        p.close(Duration::from_millis(seed));
        sender.join().unwrap();
        broker.quiesce().unwrap();
        let all = outcomes(&acks);
        let sent = sent.lock().unwrap();
        assert!(!sent.is_empty());
        let every = format!("seed {seed}: an outcome for every message sent, no more");
        assert_eq!(all.len(), sent.len(), "{every}");
        assert!(sent.iter().all(|g| all.contains_key(g)));
        assert_eq!(p.unconfirmed(), 0);
    }
}

/// Each message taken before `close` gets one outcome; closing again or dropping adds none.
#[test]
fn closing_again_or_dropping_after_close_reports_nothing_more() {
    let broker = start(replicated());
    let (p, acks) = producer_with(&broker, ProducerConfig::default());
    let mut guids: Vec<Guid> = (0..3)
        .map(|_| p.publish(QueueId(0), payload(8)).unwrap())
        .collect();
    guids.extend(send(&p, 2));
    sent_on(&broker);
    // No receipt, so nothing can ACK them, and no wait: each is reported `Closed`.
    assert!(!p.close(Duration::ZERO));
    broker.quiesce().unwrap();
    let all = outcomes(&acks);
    assert_eq!(all.len(), 5);
    assert_each(&all, &guids, AckStatus::Closed);
    assert_eq!(p.unconfirmed(), 0);
    // Closing again does nothing, and says that nothing is left.
    assert!(p.close(Duration::ZERO));
    assert!(p.close(Duration::from_secs(1)));
    // Every call that takes a message refuses it and hands it back.
    let m = payload(9);
    assert_eq!(p.publish(QueueId(0), m), Err(SendError::Closed(m)));
    assert_eq!(p.send(QueueId(0), m), Err(SendError::Closed(m)));
    assert_eq!(p.try_send(QueueId(0), m), Err(SendError::Closed(m)));
    assert!(SendError::Closed(m).to_string().contains("closed"));
    drop(p);
    broker.quiesce().unwrap();
    assert_eq!(outcomes(&acks).len(), 5, "nothing more");
    assert_eq!(broker.session_stats().closed_reported, 5);
}

/// After shutdown, `publish`, `send` and `try_send` say `ShutDown` (not `Closed`).
#[test]
fn after_shutdown_every_call_says_shut_down_and_hands_the_payload_back() {
    let broker = start(replicated());
    let (p, acks) = producer_with(&broker, ProducerConfig::default());
    let g = send(&p, 1)[0];
    sent_on(&broker);
    broker.shutdown();
    // In flight, without its receipt: its session reported it `Closed` at shutdown.
    assert_eq!(outcomes(&acks)[&g], AckStatus::Closed);
    let m = payload(9);
    for r in [
        p.publish(QueueId(0), m),
        p.send(QueueId(0), m),
        p.try_send(QueueId(0), m),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e, SendError::ShutDown(m));
        assert_eq!(e.into_payload(), m);
        assert!(e.to_string().contains("shutting down"), "{e}");
    }
    assert_eq!(p.unconfirmed(), 0, "a refused send gives its credit back");
    let closed = p.close(Duration::from_secs(1));
    assert!(closed, "every outcome was reported at shutdown");
}

#[test]
fn invalid_producer_configurations_are_errors_that_name_the_setting() {
    let broker = broker();
    let check = |config, expected: BrokerError, names: &str| {
        let e = broker.open_producer_with(config, |_: &[Ack]| {});
        let e = e.unwrap_err();
        assert_eq!(e, expected);
        assert!(e.to_string().contains(names), "{e}");
        let source = std::error::Error::source(&e);
        assert!(source.is_none(), "{e:?}: no core error behind it");
    };
    let zero = BrokerError::MaxUnconfirmedOutOfRange { max_unconfirmed: 0 };
    check(capped(0), zero, "max_unconfirmed");
    let no_batch = producer_config(|c| c.batch_size = 0);
    check(no_batch, BrokerError::ZeroBatchSize, "batch_size");
    let max_frame_bytes = FRAME_OVERHEAD;
    let frame = producer_config(|c| c.max_frame_bytes = max_frame_bytes);
    let too_small = BrokerError::FrameTooSmall { max_frame_bytes };
    check(frame, too_small, "max_frame_bytes");
    let no_tick = timer(Duration::ZERO);
    check(no_tick, BrokerError::ZeroTimerInterval, "interval");
    let no_wait = timeout(Duration::ZERO);
    check(no_wait, BrokerError::ZeroConfirmTimeout, "timeout");
    // `open_producer` takes the same cap, and refuses 0 the same way.
    let refused = broker.open_producer(0, |_: &[Ack]| {}).unwrap_err();
    let max_unconfirmed = 0;
    let out_of_range = BrokerError::MaxUnconfirmedOutOfRange { max_unconfirmed };
    assert_eq!(refused, out_of_range);
}
