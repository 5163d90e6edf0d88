//! A small broker wired end to end: two producers publishing from their own threads, one
//! fanout queue of three apps, one consumer per app, and the confirms of one consumer
//! routed through the cluster processor (as a replica's confirms reach a primary).
//!
//! ```text
//! cargo run --release --example broker
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use zerodispatch::broker::{
    Ack, AckStatus, AppId, Broker, BrokerConfig, BrokerError, ConfirmRoute, ConsumerOptions,
    Delivery, Payload, QueueConfig, QueueId, QueueMode,
};

const PRODUCERS: u64 = 2;
const MESSAGES_PER_PRODUCER: u64 = 10_000;
/// The fanout queue's apps: each message is acknowledged to its producer when the queue
/// stores it, delivered once to each app, and released when all of them have confirmed
/// it.
const APPS: u16 = 3;
const QUEUE: QueueId = QueueId(0);

fn main() -> Result<(), BrokerError> {
    // One queue. Its table (allocated here, like every table of the broker) holds every
    // message both producers publish (2 x 10,000) until it is consumed, so none is
    // rejected.
    let broker = Broker::start(BrokerConfig {
        queues: vec![QueueConfig {
            capacity: 1 << 15,
            ..QueueConfig::new(QueueMode::Fanout { apps: APPS })
        }],
        ..BrokerConfig::default()
    })?;

    // One consumer per app. `on_delivery` gets batches on a session processor (keep it
    // short); each message of a batch is confirmed when it returns. The last app's confirms
    // go through the cluster processor instead of straight to the queue.
    let delivered: Vec<Arc<AtomicU64>> = (0..APPS).map(|_| Arc::default()).collect();
    let mut consumers = Vec::new();
    for (app, count) in (0..APPS).zip(&delivered) {
        // By default a consumer confirms with inline functors (`ConfirmMode::Inline`; also
        // `Typed` or `Boxed`), straight to the queue (`ConfirmRoute::Direct`).
        let mut options = ConsumerOptions::default();
        if app == APPS - 1 {
            options.route = ConfirmRoute::ViaCluster;
        }
        let count = count.clone();
        // Kept: a consumer is closed when dropped.
        consumers.push(broker.open_consumer(
            QUEUE,
            AppId(app),
            options,
            move |batch: &[Delivery]| {
                count.fetch_add(batch.len() as u64, Ordering::Relaxed);
            },
        )?);
    }

    // Two producers. Each message's outcome comes back to `on_ack`, in batches, on the
    // producer's session processor: count those stored (`Stored`).
    let acked: Vec<Arc<AtomicU64>> = (0..PRODUCERS).map(|_| Arc::default()).collect();
    let mut producers = Vec::new();
    for count in &acked {
        let count = count.clone();
        producers.push(broker.open_producer(1 << 14, move |batch: &[Ack]| {
            let ok = batch
                .iter()
                .filter(|a| a.status == AckStatus::Stored)
                .count();
            count.fetch_add(ok as u64, Ordering::Relaxed);
        })?);
    }

    // Each producer publishes from a thread of its own. A payload is a handle to bytes the
    // application keeps (here just a number) and their length: the broker never copies them.
    thread::scope(|s| {
        for producer in &producers {
            s.spawn(move || {
                for handle in 0..MESSAGES_PER_PRODUCER {
                    let payload = Payload { handle, len: 100 };
                    producer
                        .publish(QUEUE, payload)
                        .expect("the broker is running");
                }
            });
        }
    });

    // Wait until every message in flight has been delivered, confirmed and acknowledged.
    broker.quiesce()?;
    for (p, count) in acked.iter().enumerate() {
        let n = count.load(Ordering::Relaxed);
        println!("producer {p}: {n} of {MESSAGES_PER_PRODUCER} messages acked");
    }
    for (app, count) in delivered.iter().enumerate() {
        let n = count.load(Ordering::Relaxed);
        println!("consumer of app {app}: {n} deliveries");
    }
    println!("cluster: {:?}", broker.cluster_state()?);
    println!("queue: {:?}", broker.queue_stats()[0]);
    broker.shutdown();
    Ok(())
}
