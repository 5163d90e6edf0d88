//! A consumer opened on a processor thread (the cluster's, with the session processor
//! stalled and full) is reached by every event sent to it after `open_consumer` returns,
//! from any thread; before the core's fix such events overtook its registration (stale).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use zerodispatch_broker::*;

mod support;

use support::{consumer_calling, payload, stats_of};

/// How long any step may wait before the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(20);
/// The processors' event capacity: small, so that the session processor's queue fills.
const EVENT_CAPACITY: usize = 8;

/// What came on `signal` within [`PATIENCE`]; fails the test with `never` if nothing did.
fn arrived<T>(signal: &Receiver<T>, never: &str) -> T {
    let got = signal.recv_timeout(PATIENCE);
    assert!(got.is_ok(), "{never}");
    got.unwrap()
}

/// Signals on `signal`, which a handler may have stopped waiting on.
fn open(signal: &Sender<()>) {
    let _ = signal.send(());
}

/// The broker of the scene, its processors, and the signals that hold them.
struct Scene {
    broker: Arc<Broker>,
    session: ProcessorId,
    /// Sent by the test to let the stalled session processor go.
    release_session: Sender<()>,
    /// Sent by the test to let the cluster processor's handler return.
    release_cluster: Sender<()>,
    consumer: Consumer,
    delivered: Arc<AtomicU64>,
}

/// A broker of one queue on processors of [`EVENT_CAPACITY`] events, and those processors.
fn small_broker() -> (Arc<Broker>, [ProcessorId; 3]) {
    let broker = Arc::new(support::priority_broker(|c| {
        (c.session_processors, c.queue_processors) = (1, 1);
        (c.event_capacity, c.max_batch) = (EVENT_CAPACITY, 4);
    }));
    let processors = [ClientType::Session, ClientType::Queue, ClientType::Cluster]
        .map(|t| broker.processors(t)[0]);
    (broker, processors)
}

/// Stalls `stalled` until the signal returned is sent, and fills its queue from `filler`.
fn stall_and_fill(broker: &Arc<Broker>, stalled: ProcessorId, filler: ProcessorId) -> Sender<()> {
    let ((running, ran), (release, released)) = (channel(), channel());
    support::on(broker, stalled, move || {
        open(&running);
        arrived(&released, "the test never let the stalled processor go");
    });
    arrived(&ran, "the processor never ran the stall");
    let ((fill, filled), b) = (channel(), broker.clone());
    support::on(broker, filler, move || {
        for _ in 0..EVENT_CAPACITY {
            b.execute(stalled, Callback::new(|| ())).unwrap();
        }
        open(&fill);
    });
    arrived(&filled, "the stalled processor's queue was never filled");
    release
}

/// A consumer counting into `delivered`, opened on `cluster`, held there until the signal.
fn open_on(
    broker: &Arc<Broker>,
    cluster: ProcessorId,
    options: ConsumerOptions,
    delivered: Arc<AtomicU64>,
) -> (Consumer, Sender<()>) {
    let ((hand_over, opened), (release_cluster, released)) = (channel(), channel());
    let b = broker.clone();
    let hand = move || {
        let consumer = b.open_consumer(QueueId(0), AppId(0), options, move |batch| {
            delivered.fetch_add(batch.len() as u64, Ordering::SeqCst);
        });
        let _ = hand_over.send(consumer);
        arrived(&released, "the test never let the cluster processor go");
    };
    // Its captures pass the default space (32 bytes), so it is spilled (counted, visible).
    broker.execute(cluster, Callback::spill(hand)).unwrap();
    let consumer = arrived(&opened, "the cluster processor never opened the consumer");
    (consumer.unwrap(), release_cluster)
}

/// Waits until `processor` has handled what was sent to it (a callback queued behind ran).
fn marker(broker: &Broker, processor: ProcessorId) {
    let (handle, handled) = channel();
    support::on(broker, processor, move || open(&handle));
    arrived(&handled, "the session processor never got to the marker");
}

/// Shuts `broker` down once the handlers have dropped their clones of it.
fn shut_down(broker: Arc<Broker>) {
    let alone = eventually(|| Arc::strong_count(&broker) == 1);
    assert!(alone, "a handler still holds the broker");
    let broker =
        Arc::try_unwrap(broker).unwrap_or_else(|_| unreachable!("the last clone of the broker"));
    broker.shutdown();
}

/// A consumer opened on the cluster processor while the session processor is stalled, full.
fn open_on_a_processor(options: ConsumerOptions) -> Scene {
    let (broker, [session, queue, cluster]) = small_broker();
    let release_session = stall_and_fill(&broker, session, queue);
    let delivered = Arc::new(AtomicU64::new(0));
    let (consumer, release_cluster) = open_on(&broker, cluster, options, delivered.clone());
    Scene {
        broker,
        session,
        release_session,
        release_cluster,
        consumer,
        delivered,
    }
}

impl Scene {
    /// Lets the session processor go, runs `op`, and waits until the session handled it.
    fn act<T>(&self, op: impl FnOnce(&Broker, &Consumer) -> T) -> T {
        open(&self.release_session);
        let made = op(&self.broker, &self.consumer);
        marker(&self.broker, self.session);
        made
    }

    /// The session processor's count of events dropped as stale.
    fn stale(&self) -> u64 {
        stats_of(&self.broker, self.session).unwrap().stale
    }

    /// Lets the cluster processor go and shuts the broker down.
    fn end(self) {
        open(&self.release_cluster);
        shut_down(self.broker);
    }
}

/// Whether `ready` holds within [`PATIENCE`], looked at every millisecond.
fn eventually(ready: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    ready()
}

#[test]
fn a_credit_sent_from_another_thread_reaches_a_consumer_opened_on_a_processor() {
    let scene = open_on_a_processor(support::paced(0));
    // Paused at credit 0: the message waits in the session until the credit comes.
    let producer = scene.act(|broker, consumer| {
        let producer = broker.open_producer(16, |_| ()).unwrap();
        producer.publish(QueueId(0), payload(1)).unwrap();
        broker.add_credit(consumer, 1).unwrap();
        producer
    });
    let stale = scene.stale();
    let delivered = eventually(|| scene.delivered.load(Ordering::SeqCst) == 1);
    drop(producer);
    scene.end();
    assert_eq!(stale, 0, "the credit was dropped as stale");
    assert!(delivered, "the credit never let the message through");
}

#[test]
fn a_confirm_sent_from_another_thread_reaches_a_consumer_opened_on_a_processor() {
    let scene = open_on_a_processor(support::explicit(None));
    // A GUID the consumer was never handed: the session counts it, which proves it got it.
    scene.act(|broker, consumer| broker.confirm(consumer, Guid([7; 16])).unwrap());
    let stale = scene.stale();
    let unknown = scene.broker.session_stats().unknown_confirms;
    scene.end();
    assert_eq!(stale, 0, "the confirm was dropped as stale");
    assert_eq!(unknown, 1, "the session never saw the confirm");
}

#[test]
fn a_close_sent_from_another_thread_reaches_a_consumer_opened_on_a_processor() {
    let scene = open_on_a_processor(ConsumerOptions::default());
    scene.act(|broker, consumer| broker.close_consumer(consumer).unwrap());
    let stale = scene.stale();
    // Closed, the session detaches and unregisters itself: its slot goes.
    let session = || stats_of(&scene.broker, scene.session);
    let unregistered = eventually(|| session().is_some_and(|s| s.clients == 0));
    scene.end();
    assert_eq!(stale, 0, "the close was dropped as stale");
    assert!(unregistered, "the closed session never unregistered itself");
}

/// Regression: an outboxed `Attach` overtaken by a close's `Detach` attached a closed consumer.
#[test]
fn a_late_attach_never_attaches_a_consumer_closed_from_another_thread() {
    let (broker, [session, queue, cluster]) = small_broker();
    // The queue processor stalled, full from the session processor (its outbox keeps the rest).
    let release_queue = stall_and_fill(&broker, queue, session);

    // Consumer A, opened on the cluster processor, which then stays in its handler.
    let options = ConsumerOptions::default();
    let (a, release_cluster) = open_on(&broker, cluster, options, Arc::default());
    broker.close_consumer(&a).unwrap();
    marker(&broker, session); // the session processor handled the close

    // The queue goes first (it takes what the session processor kept: the detach), then
    // the cluster processor (its outbox, if it kept anything).
    open(&release_queue);
    let drained = eventually(|| stats_of(&broker, queue).is_some_and(|s| s.depth == 0));
    assert!(drained, "the queue processor never drained");
    std::thread::sleep(Duration::from_millis(20));
    open(&release_cluster);

    // Consumer B, and 16 messages: every one reaches B (none went to the closed A).
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    let b = consumer_calling(&broker, move |batch: &[Delivery]| {
        g.fetch_add(batch.len() as u64, Ordering::SeqCst);
    });
    let producer = broker.open_producer(64, |_| ()).unwrap();
    for i in 0..16 {
        producer.publish(QueueId(0), payload(i)).unwrap();
    }
    let all = eventually(|| got.load(Ordering::SeqCst) == 16);
    let seen = got.load(Ordering::SeqCst);
    drop(producer);
    broker.close_consumer(&b).unwrap();
    shut_down(broker);
    let rest = "the rest went to the closed consumer A";
    assert!(all, "B got {seen} of 16: {rest}");
}
