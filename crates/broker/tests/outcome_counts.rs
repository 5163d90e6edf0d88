//! The producers' counts conserve (issue 18, items 8 and 11), once the broker is quiet:
//! * ACKs sent = received: `Σ queues (acked + rejected_full + out_of_window + superseded) == acks + late_acks`;
//! * `published == acks + rejected_producer_full + rejected_unknown_queue + timed_out +
//!   closed_reported + not_sent`, each counter equal to the outcomes of its status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zerodispatch_broker::*;
use zerodispatch_testkit::within;

mod support;

use support::*;

/// How many outcomes of each status, by the status's name.
type Outcomes = BTreeMap<String, u64>;

/// `outcomes`' count of `status`.
fn count(outcomes: &Outcomes, status: AckStatus) -> u64 {
    outcomes.get(&format!("{status:?}")).copied().unwrap_or(0)
}

/// ACKs the queues sent: stored, refused (full, out of window), and superseded (`Closed`).
fn acks_sent(broker: &Broker) -> u64 {
    let sent = |q: &QueueStats| q.acked + q.rejected_full + q.out_of_window + q.superseded;
    broker.queue_stats().iter().map(sent).sum()
}

/// The outcomes of every log of `logs`, by status.
fn merged<'a>(logs: impl IntoIterator<Item = &'a Log<Ack>>) -> Outcomes {
    let mut all = Outcomes::new();
    for a in logs.into_iter().flat_map(support::logged) {
        *all.entry(format!("{:?}", a.status)).or_insert(0) += 1;
    }
    all
}

/// Checks both equations of the module's doc against the outcomes the applications got.
fn check_conservation(broker: &Broker, outcomes: &Outcomes) {
    let s = broker.session_stats();
    let count = |status| count(outcomes, status);
    let q = broker.queue_stats();
    let once = format!("every ACK sent is received and counted once: {s:?}, {q:?}");
    assert_eq!(acks_sent(broker), s.acks + s.late_acks, "{once}");
    let refused = s.rejected_producer_full + s.rejected_unknown_queue;
    let unacked = refused + s.timed_out + s.closed_reported + s.not_sent;
    let one = format!("every message has one outcome, in one counter: {s:?}");
    assert_eq!(s.published, s.acks + unacked, "{one}");
    assert_eq!(s.closed_reported, count(AckStatus::Closed), "{s:?}");
    assert_eq!(s.not_sent, count(AckStatus::NotSent), "{s:?}");
    assert_eq!(s.timed_out, count(AckStatus::TimedOut), "{s:?}");
    let all: u64 = outcomes.values().sum();
    assert_eq!(s.published, all, "one outcome each: {s:?}");
}

/// ACKs after a producer's close are counted `late_acks` by its waiting session, not stale.
#[test]
fn acks_arriving_after_a_producers_close_are_counted_late() {
    let broker = start(replicated());
    let (p, log) = producer_with(&broker, ProducerConfig::default());
    let guids = support::publish(&p, 0, 0..5);
    broker.quiesce().unwrap();
    // Stored, waiting for their receipts, and no wait: each is reported `Closed`.
    assert!(!p.close(Duration::ZERO));
    broker.quiesce().unwrap();
    assert_eq!(count(&merged([&log]), AckStatus::Closed), 5);
    assert_eq!(sessions_alive(&broker), 1, "waiting for its ACKs");
    let stale_before = stale(&broker);
    receipts(&broker, &guids, 0);
    broker.quiesce().unwrap();
    let s = broker.session_stats();
    assert_eq!(broker.queue_stats()[0].acked, 5);
    assert_eq!((s.acks, s.late_acks), (0, 5), "{s:?}");
    assert_eq!(stale(&broker), stale_before, "no ACK dropped unseen");
    assert_eq!(log.lock().unwrap().len(), 5, "late ACKs are not reported");
    let alive = sessions_alive(&broker);
    assert_eq!(alive, 0, "its last ACK in, the session is gone");
    check_conservation(&broker, &merged([&log]));
    broker.shutdown();
}

/// Producers opened, used and closed at random from two threads: the counts conserve.
#[test]
fn acks_and_outcomes_conserve_under_producer_churn() {
    within(Duration::from_secs(120), "churn", || {
        let broker = Arc::new(start(BrokerConfig {
            queues: vec![sized(QueueMode::Priority, 64)],
            session_processors: 2,
            replication: replication(1, 1),
            ..BrokerConfig::default()
        }));
        let _consumer = drain(&broker, 0);
        let churn = |seed: u64| {
            let broker = broker.clone();
            thread::spawn(move || {
                let mut rng = Rng(seed);
                let mut logs = Vec::new();
                for _ in 0..150 {
                    let config = ProducerConfig {
                        max_unconfirmed: 1 + rng.below(40) as usize,
                        flush: match rng.below(4) {
                            0 => FlushStrategy::Timer(Duration::from_millis(rng.below(3) + 1)),
                            _ => FlushStrategy::Dynamic,
                        },
                        confirm_timeout: (rng.below(8) == 0).then(|| Duration::from_millis(1)),
                        ..ProducerConfig::default()
                    };
                    let (p, log) = producer_with(&broker, config);
                    let mut guids = Vec::new();
                    for i in 0..rng.below(60) {
                        let queue = QueueId(u32::from(rng.below(50) == 0));
                        let sent = match rng.below(3) {
                            0 => p.try_send(queue, payload(i)),
                            _ => p.publish(queue, payload(i)),
                        };
                        guids.extend(sent.ok().filter(|_| queue == QueueId(0)));
                    }
                    thread::sleep(Duration::from_micros(rng.below(2000)));
                    let receipts = |guids: &[Guid]| {
                        // Behind the PUTs: a receipt overtaking its message is ignored.
                        broker.quiesce().unwrap();
                        receipts(&broker, guids, 0);
                    };
                    let before_close = rng.below(2) == 0;
                    if before_close {
                        receipts(&guids);
                    }
                    p.close(match rng.below(3) {
                        0 => Duration::ZERO,
                        1 => Duration::from_micros(rng.below(500)),
                        _ => Duration::from_millis(5),
                    });
                    // Always after too: a close sends what a timer batch held (duplicates
                    // are harmless).
                    receipts(&guids);
                    logs.push(log);
                }
                logs
            })
        };
        let logs: Vec<Log<Ack>> = [churn(0x9e37_79b9_7f4a_7c15), churn(0x2545_f491_4f6c_dd1d)]
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        broker.quiesce().unwrap();
        let outcomes = merged(&logs);
        for status in [AckStatus::Closed, AckStatus::Stored] {
            assert!(count(&outcomes, status) > 0, "{status:?} in {outcomes:?}");
        }
        check_conservation(&broker, &outcomes);
        let alive = sessions_alive(&broker);
        let left = "only the consumer's: every producer's session left once its ACKs were in";
        assert_eq!(alive, 1, "{left}");
    });
}

/// `closed_reported` counts `Closed` outcomes and `not_sent` counts `NotSent` ones.
#[test]
fn closed_reported_counts_closed_outcomes_and_not_sent_counts_not_sent() {
    let broker = start(replicated());
    let (batching, batch_log) = producer_with(&broker, timer(Duration::from_secs(3600)));
    support::publish(&batching, 0, 0..3);
    let (in_flight, flight_log) = producer_with(&broker, ProducerConfig::default());
    let publish = |i, id| in_flight.publish_with_id(QueueId(0), payload(i), id);
    for i in 0..4 {
        publish(i, i).unwrap();
    }
    // Stored and waiting for a receipt: the same id again is not sent.
    broker.quiesce().unwrap();
    publish(9, 2).unwrap();
    broker.quiesce().unwrap();
    // Closed without a wait: the batch is not sent, its messages are `NotSent`.
    let closed = batching.close(Duration::ZERO);
    assert!(!closed, "three messages without an outcome at the close");
    assert!(!in_flight.close(Duration::ZERO));
    broker.quiesce().unwrap();
    let (batch, flight) = (merged([&batch_log]), merged([&flight_log]));
    assert_eq!((count(&batch, AckStatus::NotSent), batch.len()), (3, 1));
    let closed = count(&flight, AckStatus::Closed);
    let not_sent = count(&flight, AckStatus::NotSent);
    assert_eq!((closed, not_sent, flight.len()), (4, 1, 2));
    let s = broker.session_stats();
    assert_eq!((s.closed_reported, s.not_sent), (4, 4), "{s:?}");
    check_conservation(&broker, &merged([&batch_log, &flight_log]));
    broker.shutdown();
}

/// Regression: a close with a wait discarded the batch (`NotSent`); it sends it and waits.
#[test]
fn a_close_with_a_wait_sends_what_the_batch_held() {
    let broker = start(one_queue(QueueMode::Priority));
    for flush in [
        FlushStrategy::Timer(Duration::from_secs(3600)),
        FlushStrategy::Dynamic,
    ] {
        let config = with(ProducerConfig::default(), |c| c.flush = flush);
        let (p, log) = producer_with(&broker, config);
        support::publish(&p, 0, 0..3);
        let closed = p.close(Duration::from_secs(10));
        assert!(closed, "{flush:?}: every outcome in");
        let outcomes = merged([&log]);
        let stored = count(&outcomes, AckStatus::Stored);
        assert_eq!((stored, outcomes.len()), (3, 1), "{flush:?}: {outcomes:?}");
    }
    assert_eq!(broker.queue_stats()[0].stored, 6);
    broker.shutdown();
}
