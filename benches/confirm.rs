//! The broker's confirm path (`zerodispatch-broker`), end to end, in its three confirm modes:
//! `inline` (a confirm functor stored inline and handed the queue's client), `typed` (a
//! plain-data confirm message) and `boxed` (the same functor in a `Box`, one allocation per
//! confirm). Every broker has one session processor,
//! one queue processor and the cluster processor (`SpinThenPark`, the default capacity and
//! batch).
//!
//! * `confirm_priority`: messages per second through the whole path: the bench thread
//!   publishes (one producer), the session sends the PUT, the priority queue stores it,
//!   sends the ACK (stored) and PUSHes it to its one consumer, the producer's session
//!   reports the ACK to `on_ack`, the consumer's session hands the message to `on_delivery`
//!   (which counts it) and sends the CONFIRM in the function's mode, and the queue releases
//!   the message. A run publishes `iters` messages and is timed until `iters` more `Stored`
//!   outcomes have been reported and every app has had `iters` more deliveries; the bench
//!   thread keeps at most [`IN_FLIGHT`] messages unacknowledged or undelivered to some
//!   app (the ACK alone no longer paces it: it comes at store), so nothing is ever
//!   rejected. Any outcome other than `Stored` panics the bench. Throughput only: the
//!   perftest reports publish -> confirm and publish -> consume latencies.
//! * `confirm_fanout4`: the same with a fanout queue of 4 apps and one consumer per app: per
//!   message, 4 PUSHes, 4 deliveries and 4 CONFIRMs before its release.
//! * `confirm_fanout30`: the same with 30 apps, the shape BlazingMQ measured inline
//!   against boxed confirm functors in (+12.5% throughput): per message, 30 PUSHes, 30
//!   deliveries and 30 CONFIRMs, so confirms are most of the work. Fewer messages in flight
//!   ([`in_flight`]), so that the PUSHes fit the session processor's queue.
//! * `confirm_cluster`: confirms per second through the cluster processor: the bench thread
//!   plays a replica calling `Broker::replica_confirm`, the cluster processor routes each
//!   confirm to the queue's processor in the function's mode, and the queue applies it. The
//!   queue holds [`HELD`] messages, delivered once to a consumer that kept their tokens and
//!   closed without confirming them, and the confirms cycle over their GUIDs and tokens; as
//!   no consumer holds their shares, every confirm is counted `gone_consumer` and changes
//!   nothing, so a run can repeat them forever. A run sends `iters` confirms and is timed
//!   until the queue has counted `iters` more. What is measured is the bench thread's
//!   dispatch, the routing, the cluster-to-queue hop and the queue's check of the token;
//!   not a release or an ACK.
//! * `confirm_held`: the same replica confirms, typed, against a queue holding 10,000
//!   (`10000`) and 2^20 (`1048576`) messages, the confirms cycling over all of them in the
//!   order they were delivered: what the messages a queue holds cost each confirm. Each
//!   confirm finds its message by its token (the slot of the queue's table), so the
//!   table's size should cost only the cache misses of a larger table.
//!
//! Every subject is started once per function and dropped (shut down) before the next
//! starts. With `ZERODISPATCH_BENCH_STATS=1` each broker prints its processors' parks,
//! flushes and batch sizes when its function ends.
//!
//! Run: `cargo bench --bench confirm`.

mod ours;
mod peers;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use crossbeam_utils::{Backoff, CachePadded};
use zerodispatch::broker::{
    Ack, AckStatus, AppId, Broker, BrokerConfig, Confirm, ConfirmMode, Confirms, Consumer,
    ConsumerId, ConsumerOptions, Delivery, DeliveryToken, Guid, Payload, Producer, QueueConfig,
    QueueId, QueueMode, QueueStats,
};

use ours::{bench_runs, throughput_group};

/// The functions of every group: the consumer's (or the cluster's) confirm mode.
const MODES: [(&str, ConfirmMode); 3] = [
    ("inline", ConfirmMode::Inline),
    ("typed", ConfirmMode::Typed),
    ("boxed", ConfirmMode::Boxed),
];

/// Messages the bench thread keeps unacknowledged or undelivered at most in the end-to-end
/// groups, for up to 4 apps. Bounds what sits in each processor's queue: at most `IN_FLIGHT` publishes,
/// PUTs and ACKs plus `apps * IN_FLIGHT` PUSHes or CONFIRMs, 49,152 events for the 4-app
/// fanout queue, under the default event capacity of 65,536 (16,384 would reach it
/// exactly).
const IN_FLIGHT: u64 = 1 << 13;

/// Messages kept unacknowledged or undelivered at most with `apps` apps: [`IN_FLIGHT`] up to 4 apps, then
/// fewer, so that the PUSHes and CONFIRMs in flight stay at 32,768 (1,092 messages for 30
/// apps).
fn in_flight(apps: u16) -> u64 {
    (IN_FLIGHT * 4 / u64::from(apps)).min(IN_FLIGHT)
}

/// The queue's table: room for every message in flight, and every consumer's window of
/// delivered messages not yet confirmed, so that nothing is rejected.
const QUEUE_CAPACITY: usize = 1 << 16;

/// The producer's cap on unconfirmed messages: far above [`IN_FLIGHT`].
const MAX_UNCONFIRMED: usize = 1 << 16;

/// Messages held in the `confirm_cluster` queue, whose GUIDs and tokens the confirms cycle
/// over. Few on purpose, so that the bench measures the confirms' hops rather than the
/// queue's table.
const HELD: u64 = 16;

/// Benches group `name` in each of the [`MODES`]: the subject that `start` makes for the
/// mode, measured by `run`.
fn in_each_mode<P>(
    c: &mut Criterion,
    name: &str,
    start: impl Fn(ConfirmMode) -> P,
    run: impl Fn(&P, u64) -> Duration + Copy,
) {
    let mut group = throughput_group(c, name);
    for (mode_name, mode) in MODES {
        bench_runs(&mut group, mode_name, || start(mode), run);
    }
    group.finish();
}

/// The confirm path end to end, one producer to one queue of `queue`'s mode and one
/// consumer per app: group `name`, in each mode.
fn end_to_end(c: &mut Criterion, name: &str, queue: QueueMode) {
    in_each_mode(c, name, |mode| EndToEnd::start(queue, mode), EndToEnd::run);
}

/// One producer, one priority queue, one consumer.
fn confirm_priority(c: &mut Criterion) {
    end_to_end(c, "confirm_priority", QueueMode::Priority);
}

/// One producer, one fanout queue of 4 apps, one consumer per app.
fn confirm_fanout4(c: &mut Criterion) {
    end_to_end(c, "confirm_fanout4", QueueMode::Fanout { apps: 4 });
}

/// One producer, one fanout queue of 30 apps, one consumer per app.
fn confirm_fanout30(c: &mut Criterion) {
    end_to_end(c, "confirm_fanout30", QueueMode::Fanout { apps: 30 });
}

/// Replica confirms routed by the cluster processor to one queue processor.
fn confirm_cluster(c: &mut Criterion) {
    in_each_mode(
        c,
        "confirm_cluster",
        |mode| ReplicaConfirms::start(mode, HELD),
        ReplicaConfirms::run,
    );
}

/// Typed replica confirms against a queue holding 10,000 messages and one holding 2^20.
fn confirm_held(c: &mut Criterion) {
    let mut group = throughput_group(c, "confirm_held");
    for held in [10_000, 1 << 20] {
        bench_runs(
            &mut group,
            &held.to_string(),
            || ReplicaConfirms::start(ConfirmMode::Typed, held),
            ReplicaConfirms::run,
        );
    }
    group.finish();
}

/// A broker of one session processor, one queue processor and the cluster processor, with
/// one queue.
fn one_queue_broker(queue: QueueConfig) -> Broker {
    Broker::start(BrokerConfig {
        queues: vec![queue],
        session_processors: 1,
        queue_processors: 1,
        ..Default::default()
    })
    .expect("a valid bench configuration")
}

/// Waits, spinning then yielding, until `done` returns `Some`.
fn wait_for<T>(mut done: impl FnMut() -> Option<T>) -> T {
    let backoff = Backoff::new();
    loop {
        if let Some(value) = done() {
            return value;
        }
        backoff.snooze();
    }
}

/// What the producer's `on_ack` counts, on the session processor.
#[derive(Default)]
struct AckCounts {
    /// `Stored` outcomes so far; Release, so that the bench thread's Acquire load orders it.
    acked: CachePadded<AtomicU64>,
    /// Any other outcome: the bench is wrong.
    other: AtomicU64,
}

/// The whole path: one producer (the bench thread), one queue, one consumer per app.
struct EndToEnd {
    /// Taken and shut down on drop.
    broker: Option<Broker>,
    producer: Producer,
    /// Kept for the runs: a consumer is closed when dropped.
    _consumers: Vec<Consumer>,
    counts: Arc<AckCounts>,
    /// Deliveries so far, per app; Release, as `AckCounts::acked`.
    delivered: Arc<[CachePadded<AtomicU64>]>,
    /// Messages published (and, between runs, acknowledged and delivered) so far.
    published: Cell<u64>,
    /// Messages kept unacknowledged or undelivered at most ([`in_flight`]).
    in_flight: u64,
}

impl EndToEnd {
    fn start(mode: QueueMode, confirm: ConfirmMode) -> Self {
        let apps = match mode {
            QueueMode::Priority => 1,
            QueueMode::Fanout { apps } => apps,
        };
        let in_flight = in_flight(apps);
        let broker = one_queue_broker(QueueConfig {
            mode,
            capacity: QUEUE_CAPACITY,
            // Every message in flight can be pushed at once: none waits in the queue for
            // room in a consumer's window.
            window: in_flight as u32,
        });
        let options = ConsumerOptions {
            mode: confirm,
            ..ConsumerOptions::default()
        };
        let delivered: Arc<[CachePadded<AtomicU64>]> =
            (0..apps).map(|_| CachePadded::default()).collect();
        let mut consumers = Vec::new();
        for app in 0..apps {
            let seen = delivered.clone();
            let consumer = broker
                .open_consumer(QueueId(0), AppId(app), options, move |b: &[Delivery]| {
                    seen[usize::from(app)].fetch_add(b.len() as u64, Ordering::Release);
                })
                .expect("a running broker with this queue and app");
            consumers.push(consumer);
        }
        let counts = Arc::new(AckCounts::default());
        let on_ack = {
            let counts = counts.clone();
            move |batch: &[Ack]| {
                let acked = batch
                    .iter()
                    .filter(|a| a.status == AckStatus::Stored)
                    .count() as u64;
                if acked < batch.len() as u64 {
                    counts
                        .other
                        .fetch_add(batch.len() as u64 - acked, Ordering::Relaxed);
                }
                counts.acked.fetch_add(acked, Ordering::Release);
            }
        };
        let producer = broker
            .open_producer(MAX_UNCONFIRMED, on_ack)
            .expect("a running broker");
        Self {
            broker: Some(broker),
            producer,
            _consumers: consumers,
            counts,
            delivered,
            published: Cell::new(0),
            in_flight,
        }
    }

    /// Waits until at least `target` messages are acknowledged and delivered to every app;
    /// returns how many are.
    fn wait_done(&self, target: u64) -> u64 {
        wait_for(|| {
            let other = self.counts.other.load(Ordering::Relaxed);
            assert_eq!(
                other, 0,
                "{other} messages had an outcome other than Stored"
            );
            let acked = self.counts.acked.load(Ordering::Acquire);
            let done = self
                .delivered
                .iter()
                .map(|d| d.load(Ordering::Acquire))
                .fold(acked, u64::min);
            (done >= target).then_some(done)
        })
    }

    /// Publishes `count` messages, at most `in_flight` unacknowledged or undelivered, and
    /// returns the time until all of them are acknowledged and delivered to every app.
    fn run(&self, count: u64) -> Duration {
        let first = self.published.get();
        let mut done = first;
        let start = Instant::now();
        for seq in first..first + count {
            if seq - done >= self.in_flight {
                done = self.wait_done(seq - self.in_flight + 1);
            }
            let payload = Payload {
                handle: seq,
                len: 64,
            };
            self.producer
                .publish(QueueId(0), payload)
                .expect("the broker runs until the subject is dropped");
        }
        self.wait_done(first + count);
        let elapsed = start.elapsed();
        self.published.set(first + count);
        elapsed
    }
}

impl Drop for EndToEnd {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            ours::print_stats(|| broker.processor_stats());
            broker.shutdown();
        }
    }
}

/// A replica (the bench thread) confirming through the cluster processor.
struct ReplicaConfirms {
    /// Taken and shut down on drop.
    broker: Option<Broker>,
    mode: ConfirmMode,
    /// The held messages' GUIDs and delivery tokens, in the order they were delivered.
    held: Vec<(Guid, DeliveryToken)>,
    /// Confirms sent (and, between runs, counted by the queue) so far.
    sent: Cell<u64>,
}

/// The queue's count of confirms it has handled, whatever their outcome.
fn confirms_handled(stats: &QueueStats) -> u64 {
    stats.confirms + stats.duplicate_confirms + stats.unknown_guid + stats.gone_consumer
}

impl ReplicaConfirms {
    /// A queue holding `held` messages, delivered once to a consumer closed since.
    fn start(mode: ConfirmMode, held: u64) -> Self {
        let capacity = QueueConfig::new(QueueMode::Priority)
            .capacity
            .max(held as usize);
        let broker = one_queue_broker(QueueConfig {
            capacity,
            // The consumer is handed every message before it closes.
            window: held as u32,
            ..QueueConfig::new(QueueMode::Priority)
        });
        let producer = broker
            .open_producer(MAX_UNCONFIRMED, |_: &[Ack]| {})
            .expect("a running broker");
        // A consumer that keeps each delivery's token and confirms none: closed, its
        // shares are undelivered again, held with no consumer.
        let delivered = Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = delivered.clone();
        let options = ConsumerOptions {
            confirms: Confirms::Explicit,
            ..ConsumerOptions::default()
        };
        let consumer = broker
            .open_consumer(
                QueueId(0),
                AppId(0),
                options,
                move |batch: &[Delivery]| {
                    let mut kept = keep.lock().expect("not poisoned");
                    kept.extend(batch.iter().map(|d| (d.guid, d.token)));
                },
            )
            .expect("a running broker");
        assert_eq!(consumer.id(), ConsumerId(0), "the id the confirms name");
        for handle in 0..held {
            // `send` waits at the producer's cap: every message is stored.
            producer
                .send(QueueId(0), Payload { handle, len: 64 })
                .expect("a running broker");
        }
        broker.quiesce().expect("a running broker");
        broker.close_consumer(&consumer).expect("a running broker");
        broker.quiesce().expect("a running broker");
        let delivered = std::mem::take(&mut *delivered.lock().expect("not poisoned"));
        assert_eq!(delivered.len() as u64, held, "every message delivered once");
        let stats = broker.queue_stats()[0];
        assert_eq!(
            (stats.stored, stats.held),
            (held, held),
            "every message is held"
        );
        Self {
            broker: Some(broker),
            mode,
            held: delivered,
            sent: Cell::new(0),
        }
    }

    fn broker(&self) -> &Broker {
        self.broker.as_ref().expect("the broker runs until drop")
    }

    /// Sends `count` replica confirms and returns the time until the queue has handled them.
    fn run(&self, count: u64) -> Duration {
        let broker = self.broker();
        let first = self.sent.get();
        let start = Instant::now();
        for seq in first..first + count {
            let (guid, token) = self.held[(seq % self.held.len() as u64) as usize];
            let confirm = Confirm {
                queue: QueueId(0),
                guid,
                token,
                // No consumer holds the share: the queue counts the confirm `gone_consumer`.
                consumer: ConsumerId(0),
                app: AppId(0),
            };
            broker
                .replica_confirm(confirm, self.mode)
                .expect("the broker runs until the subject is dropped");
        }
        let target = first + count;
        wait_for(|| (confirms_handled(&broker.queue_stats()[0]) >= target).then_some(()));
        let elapsed = start.elapsed();
        self.sent.set(target);
        elapsed
    }
}

impl Drop for ReplicaConfirms {
    fn drop(&mut self) {
        let Some(broker) = self.broker.take() else {
            return;
        };
        if !std::thread::panicking() {
            broker.quiesce().expect("a running broker");
            let sent = self.sent.get();
            let cluster = broker.cluster_state().expect("a running broker");
            let queue = broker.queue_stats()[0];
            assert_eq!(cluster.routed, sent, "every confirm was routed");
            assert_eq!(
                (queue.gone_consumer, queue.confirms, queue.held),
                (sent, 0, self.held.len() as u64),
                "every confirm found its message held and no consumer holding it"
            );
        }
        ours::print_stats(|| broker.processor_stats());
        broker.shutdown();
    }
}

criterion_group!(
    benches,
    confirm_priority,
    confirm_fanout4,
    confirm_fanout30,
    confirm_cluster,
    confirm_held
);
criterion_main!(benches);
