//! Soak: producers at random rates into a priority and a fanout queue, consumers joining and
//! leaving at random, then a shutdown: every message ends with exactly one outcome, and the
//! counts add up. Bounded to a few seconds (`SOAK` below).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_broker::*;

const SOAK: Duration = Duration::from_secs(4);

/// xorshift64*: a small deterministic generator, seeded per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn conservation_holds_under_random_load_churn_and_shutdown() {
    let broker = Arc::new(
        Broker::start(BrokerConfig {
            queues: vec![
                QueueConfig {
                    capacity: 2048,
                    window: 64,
                    ..QueueConfig::new(QueueMode::Priority)
                },
                QueueConfig {
                    capacity: 2048,
                    window: 64,
                    ..QueueConfig::new(QueueMode::Fanout { apps: 2 })
                },
            ],
            session_processors: 2,
            queue_processors: 2,
            ..BrokerConfig::default()
        })
        .unwrap(),
    );
    let outcomes: Arc<Mutex<Vec<Ack>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));

    let producers: Vec<_> = (0..2_u64)
        .map(|n| {
            let (broker, outcomes, stop) = (broker.clone(), outcomes.clone(), stop.clone());
            thread::spawn(move || {
                let sink = outcomes.clone();
                let p = broker
                    .open_producer(512, move |b: &[Ack]| {
                        sink.lock().unwrap().extend_from_slice(b)
                    })
                    .unwrap();
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (n + 1));
                let mut published = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    // A burst of 1 to 200 messages, then a pause of 0 to 2 ms: rates from idle
                    // to saturation.
                    for _ in 0..1 + rng.below(200) {
                        let queue = QueueId(rng.below(2) as u32);
                        published.push(
                            p.publish(
                                queue,
                                Payload {
                                    handle: rng.next(),
                                    len: 16,
                                },
                            )
                            .unwrap(),
                        );
                    }
                    thread::sleep(Duration::from_micros(rng.below(2000)));
                }
                // Keep the producer open until the test has checked: dropping it closes it,
                // and messages still waiting for a consumer would be reported `Closed`.
                (published, p)
            })
        })
        .collect();

    // Consumers join and leave.
    let mut rng = Rng(42);
    let mut live: Vec<(Consumer, u32, u16)> = Vec::new();
    let start = Instant::now();
    let (mut joined, mut left) = (0, 0);
    while start.elapsed() < SOAK {
        if live.is_empty() || rng.below(3) != 0 {
            let queue = rng.below(2) as u32;
            let app = if queue == 0 { 0 } else { rng.below(2) as u16 };
            let mode = [ConfirmMode::Inline, ConfirmMode::Typed, ConfirmMode::Boxed]
                [rng.below(3) as usize];
            let route = if rng.below(2) == 0 {
                ConfirmRoute::Direct
            } else {
                ConfirmRoute::ViaCluster
            };
            let c = broker
                .open_consumer(
                    QueueId(queue),
                    AppId(app),
                    ConsumerOptions { mode, route },
                    |_: &[Delivery]| {},
                )
                .unwrap();
            live.push((c, queue, app));
            joined += 1;
        } else {
            let (c, _, _) = live.swap_remove(rng.below(live.len() as u64) as usize);
            broker.close_consumer(&c).unwrap();
            left += 1;
        }
        thread::sleep(Duration::from_millis(rng.below(50)));
    }
    stop.store(true, Ordering::Relaxed);
    let (published, open_producers): (Vec<Vec<Guid>>, Vec<Producer>) =
        producers.into_iter().map(|t| t.join().unwrap()).unzip();
    let published: Vec<Guid> = published.into_iter().flatten().collect();

    // Make sure every app has a consumer, let everything drain, then check.
    for (queue, app) in [(0, 0), (1, 0), (1, 1)] {
        broker
            .open_consumer(
                QueueId(queue),
                AppId(app),
                ConsumerOptions::default(),
                |_: &[Delivery]| {},
            )
            .unwrap();
    }
    broker.quiesce().unwrap();
    let stats = broker.queue_stats();
    let mut outcome: HashMap<Guid, AckStatus> = HashMap::new();
    for a in outcomes.lock().unwrap().iter() {
        assert!(
            outcome.insert(a.guid, a.status).is_none(),
            "{:?} has two outcomes",
            a.guid
        );
    }
    assert_eq!(
        outcome.len(),
        published.len(),
        "every message has an outcome once drained"
    );
    assert!(published.iter().all(|g| outcome.contains_key(g)));
    let acked = outcome.values().filter(|s| **s == AckStatus::Acked).count() as u64;
    let rejected = outcome.values().filter(|s| **s != AckStatus::Acked).count() as u64;
    assert_eq!(stats.iter().map(|q| q.acked).sum::<u64>(), acked);
    assert_eq!(stats.iter().map(|q| q.held).sum::<u64>(), 0);
    assert_eq!(broker.session_stats().published, published.len() as u64);
    println!(
        "soak: {} published, {acked} acked, {rejected} rejected, {joined} consumers joined, {left} left, \
         {} redelivered, {} shares dropped",
        published.len(),
        stats[0].redelivered + stats[1].redelivered,
        stats[1].dropped_shares
    );
    drop(open_producers);
    Arc::try_unwrap(broker)
        .expect("every producer thread has finished")
        .shutdown();
}
