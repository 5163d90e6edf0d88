//! One regression test per defect of the outside audit (issue 8, section 2); one that used
//! to hang runs under [`within`], a watchdog that fails it instead.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_broker::*;
use zerodispatch_testkit::within;

mod support;

use support::start_on as start;
use support::*;

/// The producer itself, as a handler of its own sees it: set once it is opened.
type Me = OnceLock<Weak<Producer>>;

/// A producer whose `on_ack` is handed, with each batch, where to find the producer itself.
fn reentrant(
    broker: &Broker,
    max_unconfirmed: usize,
    mut on_ack: impl FnMut(&Me, &[Ack]) + Send + 'static,
) -> Arc<Producer> {
    let me: Arc<Me> = Arc::default();
    let mine = me.clone();
    let on_ack = move |b: &[Ack]| on_ack(&mine, b);
    let p = Arc::new(broker.open_producer(max_unconfirmed, on_ack).unwrap());
    me.set(Arc::downgrade(&p)).unwrap();
    p
}

/// A handler that appends each batch to `log`, and panics (planned) the first time.
fn panicking_once<T: Clone + Send + 'static>(
    log: &Log<T>,
    what: &'static str,
) -> impl FnMut(&[T]) + Send + 'static {
    let mut record = recording(log);
    let mut first = true;
    move |b: &[T]| {
        record(b);
        if std::mem::take(&mut first) {
            panic!("{what} fails once (expected by the test)");
        }
    }
}

/// Defect 8: `held` was `held - released` of two unordered loads, and wrapped.
#[test]
fn queue_stats_held_never_wraps_while_messages_flow() {
    const CAPACITY: usize = 64;
    within(Duration::from_secs(30), "held under load", || {
        let broker = Arc::new(start(vec![sized(QueueMode::Priority, CAPACITY)], 2));
        let _c = drain(&broker, 0);
        let p = broker.open_producer(CAPACITY, |_: &[Ack]| {}).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (broker, stop) = (broker.clone(), stop.clone());
                thread::spawn(move || {
                    let mut reads = 0_u64;
                    while !stop.load(Ordering::Relaxed) {
                        let held = broker.queue_stats()[0].held;
                        assert!(held <= CAPACITY as u64, "held {held} above {CAPACITY}");
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let start = Instant::now();
        let mut sent = 0_u64;
        while start.elapsed() < Duration::from_millis(1500) {
            p.send(QueueId(0), payload(sent)).unwrap();
            sent += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        broker.quiesce().unwrap();
        assert!(reads > 0 && sent > 0);
        assert_eq!(broker.queue_stats()[0].held, 0);
    });
}

/// Defect 10: a panic in `on_ack` left its batch to be reported again, credits kept.
#[test]
fn a_panicking_on_ack_reports_each_outcome_once() {
    let broker = start(vec![priority()], 1);
    let _c = drain(&broker, 0);
    let acks: Log<Ack> = Log::default();
    let p = broker.open_producer(100, panicking_once(&acks, "on_ack"));
    let p = p.unwrap();
    let g1 = p.send(QueueId(0), payload(1)).unwrap();
    broker.quiesce().unwrap();
    let g2 = p.send(QueueId(0), payload(2)).unwrap();
    broker.quiesce().unwrap();
    let all = outcomes(&acks);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!((all[&g1], all[&g2]), (AckStatus::Stored, AckStatus::Stored));
    let credits = p.unconfirmed();
    assert_eq!(credits, 0, "the panicking batch gave its credits back");
    assert_eq!(broker.session_stats().handler_panics, 1);
}

/// Defect 10 (consumer side): a panic in `on_delivery` left its batch, unconfirmed.
#[test]
fn a_panicking_on_delivery_delivers_each_message_once_and_confirms_it() {
    let broker = start(vec![priority()], 1);
    let seen: Log<Delivery> = Log::default();
    let _c = consumer_calling(&broker, panicking_once(&seen, "on_delivery"));
    let (p, acks) = producer(&broker, 100);
    let g1 = p.publish(QueueId(0), payload(1)).unwrap();
    broker.quiesce().unwrap();
    let g2 = p.publish(QueueId(0), payload(2)).unwrap();
    broker.quiesce().unwrap();
    assert_eq!(support::guids(&seen), [g1, g2], "each delivered once");
    let all = outcomes(&acks);
    let (stored, both) = (Some(&AckStatus::Stored), (all.get(&g1), all.get(&g2)));
    assert_eq!(both, (stored, stored), "the panicking batch was confirmed");
    let s = broker.session_stats();
    assert_eq!((s.delivered, s.confirms_sent, s.handler_panics), (2, 2, 1));
}

/// Defect 2: `on_ack` ran before its batch's credits came back: `send` in it at the cap hung.
#[test]
fn send_from_on_ack_at_a_cap_of_one_does_not_hang() {
    const CHAIN: usize = 20;
    within(Duration::from_secs(10), "send from on_ack", || {
        let broker = start(vec![priority()], 1);
        let _c = drain(&broker, 0);
        let acked = Arc::new(AtomicUsize::new(0));
        let count = acked.clone();
        let p = reentrant(&broker, 1, move |mine, b| {
            assert!(b.iter().all(|a| a.status == AckStatus::Stored), "{b:?}");
            let n = count.fetch_add(b.len(), Ordering::AcqRel) + b.len();
            if n < CHAIN
                && let Some(p) = mine.get().and_then(Weak::upgrade)
            {
                p.send(QueueId(0), payload(n as u64)).unwrap();
            }
        });
        p.send(QueueId(0), payload(0)).unwrap();
        while acked.load(Ordering::Acquire) < CHAIN {
            thread::sleep(Duration::from_millis(1));
        }
        broker.quiesce().unwrap();
        assert_eq!(acked.load(Ordering::Acquire), CHAIN);
    });
}

/// Defect 11: a closed session kept its client slot: 80,000 sessions on one processor.
#[test]
fn closed_sessions_free_their_slots() {
    const ROUNDS: u64 = 40_000;
    within(Duration::from_secs(60), "open and close", || {
        let queue = with(sized(QueueMode::Priority, 16), |q| q.window = 4);
        let broker = start(vec![queue], 1);
        let acks: Log<Ack> = Log::default();
        let options = ConsumerOptions::default();
        for i in 0..ROUNDS {
            let p = broker.open_producer(1, recording(&acks));
            let p = p.unwrap_or_else(|e| panic!("round {i}: {e}"));
            let c = broker.open_consumer(QueueId(0), AppId(0), options, |_: &[Delivery]| {});
            let c = c.unwrap_or_else(|e| panic!("round {i}: {e}"));
            if i % 1000 == 0 {
                p.publish(QueueId(0), payload(i)).unwrap();
                broker.quiesce().unwrap();
            }
            broker.close_consumer(&c).unwrap();
            if i % 2 == 0 {
                p.close(Duration::ZERO);
                // Its session is gone: a later publish is refused, not lost.
                let refused = Err(SendError::Closed(payload(i)));
                assert_eq!(p.publish(QueueId(0), payload(i)), refused);
            } else {
                drop(p);
            }
        }
        broker.quiesce().unwrap();
        // The closed sessions' counters are still in the totals.
        let s = broker.session_stats();
        for counted in [s.published, s.delivered, s.confirms_sent, s.acks] {
            assert_eq!(counted, ROUNDS / 1000, "{s:?}");
        }
        let all = outcomes(&acks);
        assert_eq!(all.len() as u64, ROUNDS / 1000);
        assert!(all.values().all(|s| *s == AckStatus::Stored), "{all:?}");
    });
}

/// Defect 13: `close` waited only for credited messages, not for `publish`ed ones.
#[test]
fn close_waits_for_published_messages_too() {
    within(Duration::from_secs(20), "close after publish", || {
        let broker = start(vec![priority()], 1);
        // Stored in the queue, which has no consumer yet: in flight.
        let (p, acks, guids) = support::published(&broker, 1000, 50);
        assert_eq!(broker.queue_stats()[0].held, 50);
        let closed = thread::scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(30));
                drain(&broker, 0)
            });
            p.close(Duration::from_secs(5))
        });
        assert!(closed, "everything had its outcome within the wait");
        let all = outcomes(&acks);
        assert_eq!(all.len(), guids.len());
        assert!(guids.iter().all(|g| all[g] == AckStatus::Stored), "{all:?}");
    });
}

/// Defect 18: a queue capacity of `u32::MAX` passed validation, then aborted on allocation.
#[test]
fn a_huge_queue_capacity_is_an_error_not_an_abort() {
    for capacity in [
        u32::MAX as usize,
        usize::MAX,
        MAX_QUEUE_CAPACITY + 1,
        1 << 40,
    ] {
        let config = support::queues(vec![sized(QueueMode::Priority, capacity)]);
        let err = Broker::start(config).unwrap_err();
        let queue = QueueId(0);
        let expected = BrokerError::QueueCapacityOutOfRange { queue, capacity };
        assert!(err == expected, "{capacity}: {err:?}");
        let limit = err.to_string().contains(&MAX_QUEUE_CAPACITY.to_string());
        assert!(limit, "the message says the limit: {err}");
    }
    // A huge producer cap is refused the same way, not a "capacity overflow" panic.
    let broker = start(vec![priority()], 1);
    for cap in [usize::MAX, MAX_UNCONFIRMED + 1] {
        let err = broker.open_producer(cap, |_: &[Ack]| {}).unwrap_err();
        let max_unconfirmed = cap;
        let out_of_range = BrokerError::MaxUnconfirmedOutOfRange { max_unconfirmed };
        assert_eq!(err, out_of_range);
        let limit = err.to_string().contains(&MAX_UNCONFIRMED.to_string());
        assert!(limit, "{err}");
    }
    // A batch never holds more than the cap: a huge batch size allocates no more.
    let huge = with(ProducerConfig::default(), |c| c.batch_size = usize::MAX);
    broker.open_producer_with(huge, |_: &[Ack]| {}).unwrap();
}

/// Defect 20: dropping a producer in its own `on_ack` stalled its processor for the wait.
#[test]
fn dropping_a_producer_in_its_own_on_ack_does_not_stall_its_processor() {
    within(Duration::from_secs(20), "drop in on_ack", || {
        // ACKs wait for the replica's receipt: a message without one stays in flight.
        let broker = priority_broker(|c| c.replication = replication(1, 1));
        let _c = drain(&broker, 0);
        let holder: Slot<Producer> = Slot::default();
        let took: Slot<Duration> = Slot::default();
        let acks: Log<Ack> = Log::default();
        let (mine, time, mut record) = (holder.clone(), took.clone(), recording(&acks));
        let p = broker.open_producer(100, move |b: &[Ack]| {
            record(b);
            let p = mine.lock().unwrap().take();
            if let Some(p) = p {
                let t = Instant::now();
                drop(p);
                *time.lock().unwrap() = Some(t.elapsed());
            }
        });
        let p = p.unwrap();
        let stays = p.send(QueueId(0), payload(1)).unwrap();
        broker.quiesce().unwrap();
        let mut slot = holder.lock().unwrap();
        let acked = slot.insert(p).send(QueueId(0), payload(0)).unwrap();
        drop(slot);
        broker.quiesce().unwrap(); // stored: the replica has it
        receipt(&broker, acked, 0).unwrap();
        let took = answer(&took, Duration::from_secs(5), "the drop in on_ack");
        let stalled = format!("the drop stalled the session processor for {took:?}");
        assert!(took < Duration::from_millis(300), "{stalled}");
        broker.quiesce().unwrap();
        let all = outcomes(&acks);
        assert_eq!(all[&acked], AckStatus::Stored);
        assert_eq!(all[&stays], AckStatus::Closed);
        assert_eq!(all.len(), 2);
    });
}

/// Defect 2 (second half): `send` at the cap on a processor thread waited for a credit.
#[test]
fn send_at_the_cap_on_a_processor_thread_hands_the_message_back() {
    within(Duration::from_secs(10), "send at the cap in on_ack", || {
        let broker = start(vec![priority()], 1);
        let _c = drain(&broker, 0);
        let results: Log<Result<Guid, SendError>> = Log::default();
        let sink = results.clone();
        let mut first = true;
        let p = reentrant(&broker, 1, move |mine, _| {
            if !std::mem::take(&mut first) {
                return;
            }
            if let Some(p) = mine.get().and_then(Weak::upgrade) {
                // The first takes the credit just given back; the second finds none.
                let mut r = sink.lock().unwrap();
                r.push(p.send(QueueId(0), payload(1)));
                r.push(p.send(QueueId(0), payload(2)));
            }
        });
        p.send(QueueId(0), payload(0)).unwrap();
        wait_up_to(Duration::from_secs(5), "on_ack's sends", || {
            support::len(&results) == 2
        });
        let r = results.lock().unwrap();
        assert!(r[0].is_ok(), "{:?}", r[0]);
        assert_eq!(r[1], Err(SendError::WouldBlock(payload(2))));
        let why = r[1].as_ref().unwrap_err().to_string();
        assert!(why.contains("processor thread"), "{why}");
        drop(r);
        broker.quiesce().unwrap();
        assert_eq!(p.unconfirmed(), 0);
    });
}

/// Defect 12: `cluster_state` on the cluster processor's thread waited for itself.
#[test]
fn cluster_state_on_a_processor_thread_is_an_error_not_a_hang() {
    within(Duration::from_secs(10), "cluster_state on it", || {
        let broker = Arc::new(start(vec![priority()], 1));
        let slot: Slot<Result<ClusterState, BrokerError>> = Slot::default();
        let (weak, sink) = (Arc::downgrade(&broker), slot.clone());
        let cluster = broker.processors(ClientType::Cluster)[0];
        on(&broker, cluster, move || {
            if let Some(broker) = weak.upgrade() {
                *sink.lock().unwrap() = Some(broker.cluster_state());
            }
        });
        let answer = answer(&slot, Duration::from_secs(5), "the answer");
        assert_eq!(answer, Err(BrokerError::OnProcessorThread(cluster)));
        assert!(answer.unwrap_err().to_string().contains("processor thread"));
        // From an application thread it answers.
        assert_eq!(broker.cluster_state().unwrap().queues, 1);
    });
}

/// Defect 20 (first half): `quiesce` in `on_ack` said `ShutDown`, not `OnProcessorThread`.
#[test]
fn quiesce_in_on_ack_says_it_is_on_a_processor_thread() {
    within(Duration::from_secs(10), "quiesce in on_ack", || {
        let broker = Arc::new(start(vec![priority()], 1));
        let _c = drain(&broker, 0);
        let slot: Slot<Result<(), BrokerError>> = Slot::default();
        let (weak, sink) = (Arc::downgrade(&broker), slot.clone());
        let p = broker.open_producer(10, move |_: &[Ack]| {
            if let Some(broker) = weak.upgrade() {
                sink.lock().unwrap().get_or_insert(broker.quiesce());
            }
        });
        let p = p.unwrap();
        p.send(QueueId(0), payload(0)).unwrap();
        let answer = answer(&slot, Duration::from_secs(5), "the answer");
        let session = support::session(&broker);
        assert_eq!(answer, Err(BrokerError::OnProcessorThread(session)));
        broker.quiesce().unwrap();
    });
}

/// Defect 12 (second half): a full outbox on a processor thread said `ShutDown`, not `WouldBlock`.
#[test]
fn a_full_outbox_on_a_processor_thread_is_not_reported_as_closed() {
    within(Duration::from_secs(20), "publishes from on_ack", || {
        // Queues and outboxes of 8 events: 200 publishes from one `on_ack` fill them.
        let broker = priority_broker(|c| c.event_capacity = 8);
        let _c = drain(&broker, 0);
        let results: Log<Result<Guid, SendError>> = Log::default();
        let acks: Log<Ack> = Log::default();
        let (sink, mut record) = (results.clone(), recording(&acks));
        let mut first = true;
        let p = reentrant(&broker, 1000, move |mine, b| {
            record(b);
            if !std::mem::take(&mut first) {
                return;
            }
            if let Some(p) = mine.get().and_then(Weak::upgrade) {
                let mut r = sink.lock().unwrap();
                for i in 0..200 {
                    r.push(p.publish(QueueId(0), payload(i)));
                }
            }
        });
        let g0 = p.publish(QueueId(0), payload(0)).unwrap();
        wait_up_to(Duration::from_secs(5), "on_ack's publishes", || {
            support::len(&results) == 200
        });
        let results = results.lock().unwrap().clone();
        let refused = results.iter().filter(|r| r.is_err()).count();
        assert!(refused > 0, "the outbox never filled");
        let handed_back = |(r, i): (&Result<Guid, SendError>, u64)| {
            r.is_ok() || *r == Err(SendError::WouldBlock(payload(i)))
        };
        assert!(results.iter().zip(0..).all(handed_back), "{results:?}");
        // Every accepted message has its one outcome.
        broker.quiesce().unwrap();
        let all = outcomes(&acks);
        let accepted: Vec<Guid> = results.iter().filter_map(|r| r.ok()).collect();
        assert_eq!(all.len(), accepted.len() + 1);
        support::assert_each(&all, &accepted, AckStatus::Stored);
        assert_eq!(all[&g0], AckStatus::Stored);
    });
}

/// A full outbox on a processor thread is `OutboxFull`, with the core's `DispatchError` as source.
#[test]
fn a_full_outbox_is_its_own_error_with_the_core_refusal_as_source() {
    within(Duration::from_secs(20), "close_consumer on it", || {
        let broker = Arc::new(priority_broker(|c| c.event_capacity = 8));
        let consumers: Arc<Vec<Consumer>> = Arc::new((0..64).map(|_| drain(&broker, 0)).collect());
        broker.quiesce().unwrap();
        // The queue processor held: Detaches fill its queue, then the cluster's outbox.
        let cluster = broker.processors(ClientType::Cluster)[0];
        let gate = hold(&broker, broker.processors(ClientType::Queue)[0]);
        let slot: Slot<Result<(), BrokerError>> = Slot::default();
        let (weak, sink, all) = (Arc::downgrade(&broker), slot.clone(), consumers.clone());
        on(&broker, cluster, move || {
            if let Some(broker) = weak.upgrade() {
                let closes = all.iter().map(|c| broker.close_consumer(c));
                let first_error = closes.into_iter().find(Result::is_err);
                *sink.lock().unwrap() = Some(first_error.unwrap_or(Ok(())));
            }
        });
        let answer = answer(&slot, Duration::from_secs(5), "the answer");
        gate.wait();
        let err = answer.unwrap_err();
        assert_eq!(err, BrokerError::OutboxFull(cluster));
        assert!(err.to_string().contains("outbox full"), "{err}");
        let cause = std::error::Error::source(&err).expect("the core's refusal");
        let full = cause.downcast_ref::<DispatchError<()>>();
        assert!(full.is_some_and(DispatchError::is_full), "{cause:?}");
        // Nothing is stuck once the queue processor goes on.
        broker.quiesce().unwrap();
    });
}
