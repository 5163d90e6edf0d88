//! Set-up shared by the broker's tests: a broker from a configuration, producers and
//! consumers that log what they are handed, the usual payload, receipts, waits, and a small
//! random generator. Each test binary uses some of it.

#![allow(dead_code)]

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zerodispatch_broker::*;

/// What a handler was handed, in order.
pub type Log<T> = Arc<Mutex<Vec<T>>>;

/// A broker started from `config`, which the test means to be valid.
pub fn start(config: BrokerConfig) -> Broker {
    Broker::start(config).expect("valid config")
}

/// A configuration with one queue of `mode`, the rest default.
pub fn one_queue(mode: QueueMode) -> BrokerConfig {
    BrokerConfig {
        queues: vec![QueueConfig::new(mode)],
        ..BrokerConfig::default()
    }
}

/// Replication by `replicas` nodes, ACKs at `quorum` receipts.
pub fn replication(replicas: u8, quorum: u8) -> Option<Replication> {
    Some(Replication { replicas, quorum })
}

/// One priority queue whose ACKs wait for the receipt of its one replica: a message stays
/// without an outcome until the test sends a [`receipt`] for it.
pub fn replicated() -> BrokerConfig {
    BrokerConfig {
        replication: replication(1, 1),
        ..one_queue(QueueMode::Priority)
    }
}

/// The payload of handle `handle`, 8 bytes long.
pub fn payload(handle: u64) -> Payload {
    Payload { handle, len: 8 }
}

/// A producer of at most `max_unconfirmed` messages in flight, and the log of its outcomes.
pub fn producer(broker: &Broker, max_unconfirmed: usize) -> (Producer, Log<Ack>) {
    producer_with(
        broker,
        ProducerConfig {
            max_unconfirmed,
            ..ProducerConfig::default()
        },
    )
}

/// A producer configured with `config`, and the log of its outcomes.
pub fn producer_with(broker: &Broker, config: ProducerConfig) -> (Producer, Log<Ack>) {
    let acks = Log::default();
    let sink = acks.clone();
    let p = broker
        .open_producer_with(config, move |b: &[Ack]| {
            sink.lock().unwrap().extend_from_slice(b)
        })
        .unwrap();
    (p, acks)
}

/// A consumer of `queue`'s app `app`, and the log of its deliveries.
pub fn consumer(
    broker: &Broker,
    queue: u32,
    app: u16,
    options: ConsumerOptions,
) -> (Consumer, Log<Delivery>) {
    let seen = Log::default();
    let sink = seen.clone();
    let c = broker
        .open_consumer(
            QueueId(queue),
            AppId(app),
            options,
            move |b: &[Delivery]| sink.lock().unwrap().extend_from_slice(b),
        )
        .unwrap();
    (c, seen)
}

/// A consumer of queue 0's app 0, with the default options, that hands each batch to
/// `on_delivery`.
pub fn consumer_calling(
    broker: &Broker,
    on_delivery: impl FnMut(&[Delivery]) + Send + 'static,
) -> Consumer {
    let options = ConsumerOptions::default();
    broker
        .open_consumer(QueueId(0), AppId(0), options, on_delivery)
        .unwrap()
}

/// A consumer of `queue`'s app 0 that takes everything and keeps nothing.
pub fn drain(broker: &Broker, queue: u32) -> Consumer {
    let options = ConsumerOptions::default();
    broker
        .open_consumer(QueueId(queue), AppId(0), options, |_: &[Delivery]| {})
        .unwrap()
}

/// Publishes the payloads of `handles` to `queue`; their GUIDs, in order.
pub fn publish(p: &Producer, queue: u32, handles: Range<u64>) -> Vec<Guid> {
    let mut guids = Vec::new();
    for handle in handles {
        guids.push(p.publish(QueueId(queue), payload(handle)).unwrap());
    }
    guids
}

/// Replica `replica`'s receipt of `guid`, stored by queue 0.
pub fn receipt(broker: &Broker, guid: Guid, replica: u8) -> Result<(), BrokerError> {
    broker.replica_receipt(Receipt {
        queue: QueueId(0),
        guid,
        replica: ReplicaId(replica),
    })
}

/// Each GUID's single outcome; panics on a second one.
pub fn outcomes(acks: &[Ack]) -> HashMap<Guid, AckStatus> {
    let mut map = HashMap::new();
    for a in acks {
        let first = map.insert(a.guid, a.status).is_none();
        assert!(first, "{:?} reported twice: {acks:?}", a.guid);
    }
    map
}

/// Waits until `done` holds, failing the test after 10 s.
pub fn wait_for(what: &str, done: impl FnMut() -> bool) {
    wait_up_to(Duration::from_secs(10), what, done);
}

/// Waits until `done` holds, failing the test after `limit`.
pub fn wait_up_to(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// xorshift64*: a small deterministic generator, for choices reproducible from a seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
