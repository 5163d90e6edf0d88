//! A fault soak (`ZD_SOAK_SECS`, default 20 s) of producers and consumers churning on tiny
//! queues while handlers panic at random: one outcome per message, no 3 s without an
//! outcome, the counters conserve, and every client slot is given back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_broker::*;
use zerodispatch_testkit::quiet_planned_panics;

mod support;

use support::*;

/// How long the soak runs.
fn soak() -> Duration {
    let var = std::env::var("ZD_SOAK_SECS");
    let secs = var.map_or(20, |s| s.parse().unwrap_or(20));
    Duration::from_secs(secs)
}

/// Clients registered on all processors.
fn live_clients(broker: &Broker) -> usize {
    broker.processor_stats().iter().map(|s| s.clients).sum()
}

#[test]
fn faults_churn_and_tiny_queues_lose_no_outcome_and_stall_nothing() {
    quiet_planned_panics();
    let broker = Arc::new(start(two_queues(512, 16, 64)));
    let clients_at_start = live_clients(&broker);
    let outcomes = Arc::new(Outcomes::default());
    let stop = Arc::new(AtomicBool::new(false));
    // One consumer per app for the whole run, so that every message can be confirmed.
    let resident = TWO_QUEUES_APPS.map(|app| drain_app(&broker, app));

    let producers: Vec<_> = (0..3_u64)
        .map(|n| {
            let (broker, outcomes, stop) = (broker.clone(), outcomes.clone(), stop.clone());
            thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (n + 1));
                let mut published = Vec::new();
                let mut opened = 0_u64;
                while !stop.load(Ordering::Relaxed) {
                    // A producer's life: open, a few bursts, close (or drop).
                    let sink = outcomes.clone();
                    let mut handler_rng = Rng(rng.next() | 1);
                    let on_ack = move |batch: &[Ack]| {
                        sink.record(batch);
                        if handler_rng.below(100) == 0 {
                            panic!("planned panic in on_ack");
                        }
                    };
                    let p = broker.open_producer(16 + rng.below(500) as usize, on_ack);
                    let p = p.unwrap();
                    opened += 1;
                    for _ in 0..1 + rng.below(20) {
                        for _ in 0..1 + rng.below(100) {
                            let queue = QueueId(rng.below(2) as u32);
                            let (handle, len) = (rng.next(), 16);
                            let payload = Payload { handle, len };
                            let sent = match rng.below(3) {
                                0 => p.send(queue, payload).map_err(|e| e.to_string()),
                                1 => p.try_send(queue, payload).map_err(|e| e.to_string()),
                                _ => p.publish(queue, payload).map_err(|e| e.to_string()),
                            };
                            match sent {
                                Ok(guid) => published.push(guid),
                                // `try_send` at the cap: handed back, not published.
                                Err(e) => assert!(e.contains("cap is reached"), "{e}"),
                            }
                        }
                        thread::sleep(Duration::from_micros(rng.below(1000)));
                    }
                    if rng.below(2) == 0 {
                        p.close(Duration::from_millis(rng.below(20)));
                    } else {
                        drop(p);
                    }
                }
                (published, opened)
            })
        })
        .collect();

    // Consumers join and leave; the application panics now and then.
    let mut rng = Rng(42);
    let mut live: Vec<Consumer> = Vec::new();
    let (mut joined, mut left) = (0, 0);
    let start = Instant::now();
    let (mut last, mut since) = (0, Instant::now());
    while start.elapsed() < soak() {
        if live.len() < 2 || rng.below(3) != 0 {
            let queue = rng.below(2) as u32;
            let app = if queue == 0 { 0 } else { rng.below(2) as u16 };
            let mode = [ConfirmMode::Inline, ConfirmMode::Typed, ConfirmMode::Boxed]
                [rng.below(3) as usize];
            let route = [ConfirmRoute::Direct, ConfirmRoute::ViaCluster][rng.below(2) as usize];
            let mut app_rng = Rng(rng.next() | 1);
            let options = support::confirming(mode, route);
            let c = open_consumer(&broker, (queue, app), options, move |_: &[Delivery]| {
                if app_rng.below(50) == 0 {
                    panic!("planned panic in on_delivery");
                }
            });
            live.push(c);
            joined += 1;
        } else {
            let c = live.swap_remove(rng.below(live.len() as u64) as usize);
            broker.close_consumer(&c).unwrap();
            left += 1;
        }
        thread::sleep(Duration::from_millis(rng.below(20)));
        let now = outcomes.count();
        if now != last {
            (last, since) = (now, Instant::now());
        }
        assert!(
            since.elapsed() < Duration::from_secs(3),
            "no outcome for 3 s: stalled; processors {:#?}",
            broker.processor_stats()
        );
    }
    stop.store(true, Ordering::Relaxed);
    let mut published = Vec::new();
    let mut opened = 0;
    for t in producers {
        let (p, o) = t.join().unwrap();
        published.extend(p);
        opened += o;
    }
    for c in live.iter().chain(&resident) {
        broker.close_consumer(c).unwrap();
    }
    broker.quiesce().unwrap();

    let outcome = outcomes.one_each(&published);
    let stats = broker.queue_stats();
    let sessions = broker.session_stats();
    let acked = count_of(&outcome, AckStatus::Stored);
    // An ACK reaching a closed producer was reported `Closed` (or `NotSent`) instead.
    let by_status = |s: AckStatus| count_of(&outcome, s);
    let closed = by_status(AckStatus::Closed) + by_status(AckStatus::NotSent);
    let queue_acked: u64 = stats.iter().map(|q| q.acked).sum();
    let counts = format!("acked by the queues {queue_acked}, reported {acked}, closed {closed}");
    let conserved = acked <= queue_acked && queue_acked <= acked + closed;
    assert!(conserved, "{counts}");
    assert_eq!(stats.iter().map(|q| q.held).sum::<u64>(), 0);
    assert_eq!(sessions.published, published.len() as u64);
    let injected = "the handlers' panics were injected";
    assert!(sessions.handler_panics > 0, "{injected}");
    let given_back = "every closed session gave its client slot back";
    assert_eq!(live_clients(&broker), clients_at_start, "{given_back}");
    println!(
        "soak: {} published by {opened} producers, {acked} acked, {} rejected (queue full), {} rejected (producer full), {} closed or not sent; \
         {joined} consumers joined, {left} left; {} handler panics; {} redelivered, {} shares dropped",
        published.len(),
        by_status(AckStatus::RejectedQueueFull),
        by_status(AckStatus::RejectedProducerFull),
        closed,
        sessions.handler_panics,
        stats[0].redelivered + stats[1].redelivered,
        stats[1].dropped_shares
    );
    let broker = Arc::try_unwrap(broker).expect("every producer thread has finished");
    broker.shutdown();
}
