//! Proof that the confirm path (PUT -> ACK, PUSH -> CONFIRM -> release) allocates nothing
//! per message on any thread, over the cases listed in its `main`; boxed confirms do (so
//! the counter is seen to work). Its own binary (`harness = false`): see `proofs/mod.rs`.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use zerodispatch_broker::*;
use zerodispatch_testkit::CountingAllocator;

mod proofs;

use proofs::{AckCounts, one_queue_of};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const MESSAGES: u64 = 1_000_000;
const WARM_UP: u64 = 20_000;
/// Messages the sender keeps unacknowledged, and ahead of the slowest app, at most.
const IN_FLIGHT: u64 = 4096;
/// Replicas, and the quorum, of the replicated run.
const REPLICATION: Replication = Replication {
    replicas: 3,
    quorum: 2,
};
/// Each processor's event capacity, but in the run with tiny queues.
const EVENTS: usize = 1 << 16;

/// How the producer sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// `publish`.
    Publish,
    /// `send`, with its credits.
    Send,
    /// A named producer's `publish_with_id`, one message in [`DUPLICATE_EVERY`] followed
    /// by a duplicate of one [`DUPLICATE_LAG`] before it.
    Named,
}

/// A named producer follows each multiple of this id (from [`DUPLICATE_LAG`]) with a duplicate.
const DUPLICATE_EVERY: u64 = 8;
/// How far behind a duplicate's id is: twice the in-flight bound, so stored and ACKed.
const DUPLICATE_LAG: u64 = 2 * IN_FLIGHT;

/// One run of [`allocations`].
#[derive(Clone, Copy)]
struct Case {
    apps: u16,
    mode: ConfirmMode,
    messages: u64,
    sending: Sending,
    confirm_timeout: Option<Duration>,
    event_capacity: usize,
    replication: Option<Replication>,
}

/// `messages` sent with `sending` to `apps` apps confirming by `mode`, on [`EVENTS`] events.
fn case(apps: u16, mode: ConfirmMode, messages: u64, sending: Sending) -> Case {
    Case {
        apps,
        mode,
        messages,
        sending,
        confirm_timeout: None,
        event_capacity: EVENTS,
        replication: None,
    }
}

/// The allocations while `case` runs after a warm-up: one producer, two consumers per app.
fn allocations(case: Case) -> u64 {
    let Case {
        apps,
        mode,
        messages,
        sending,
        replication,
        ..
    } = case;
    let (priority, fanout) = (QueueMode::Priority, QueueMode::Fanout { apps });
    let queue = if apps == 1 { priority } else { fanout };
    let mut config = one_queue_of(queue, 4 * IN_FLIGHT as usize);
    (config.event_capacity, config.replication) = (case.event_capacity, replication);
    let broker = Broker::start(config).unwrap();
    let acks = AckCounts::of(AckStatus::Stored);
    let config = ProducerConfig {
        max_unconfirmed: 2 * IN_FLIGHT as usize,
        confirm_timeout: case.confirm_timeout,
        ..ProducerConfig::default()
    };
    let on_ack = acks.on_ack();
    let producer = if sending == Sending::Named {
        broker.open_named_producer("zero-alloc", config, on_ack)
    } else {
        broker.open_producer_with(config, on_ack)
    }
    .unwrap();
    // The ACKs of the first `n` messages: one more for each duplicate.
    let acks_for = |n: u64| {
        if sending == Sending::Named {
            // Multiples of DUPLICATE_EVERY in DUPLICATE_LAG..n (DUPLICATE_LAG is one).
            n + n
                .div_ceil(DUPLICATE_EVERY)
                .saturating_sub(DUPLICATE_LAG / DUPLICATE_EVERY)
        } else {
            n
        }
    };
    let delivered: Arc<[AtomicU64]> = (0..apps).map(|_| AtomicU64::new(0)).collect();
    let slowest = || delivered.iter().map(|d| d.load(Ordering::Acquire)).min();
    let slowest = || slowest().unwrap_or(0);
    let mut consumers = Vec::new();
    for app in 0..apps {
        for route in [ConfirmRoute::Direct, ConfirmRoute::ViaCluster] {
            let seen = delivered.clone();
            let mut options = ConsumerOptions::default();
            (options.mode, options.route) = (mode, route);
            let count = move |batch: &[Delivery]| {
                seen[usize::from(app)].fetch_add(batch.len() as u64, Ordering::Release);
            };
            let c = broker.open_consumer(QueueId(0), AppId(app), options, count);
            consumers.push(c.unwrap());
        }
    }
    let no_refusal = || {
        let n = acks.others();
        assert_eq!(n, 0, "{n} messages refused: every message must be stored");
    };
    // Every replica's receipt for each message stored (seen delivered to every app).
    let receipted = Cell::new(0);
    let replicate = || {
        if replication.is_none() {
            return;
        }
        for seq in receipted.get()..slowest() {
            let guid = Guid::new(producer.id(), seq);
            for replica in (0..REPLICATION.replicas).map(ReplicaId) {
                let queue = QueueId(0);
                let receipt = Receipt {
                    queue,
                    guid,
                    replica,
                };
                broker.replica_receipt(receipt).unwrap();
            }
            receipted.set(seq + 1);
        }
    };
    let send = |range: std::ops::Range<u64>| {
        for i in range {
            while acks_for(i).saturating_sub(acks.matching()) >= IN_FLIGHT
                || i - slowest() >= IN_FLIGHT
            {
                no_refusal();
                replicate();
                thread::yield_now();
            }
            let payload = Payload { handle: i, len: 64 };
            match sending {
                Sending::Send => drop(producer.send(QueueId(0), payload).unwrap()),
                Sending::Publish => drop(producer.publish(QueueId(0), payload).unwrap()),
                Sending::Named => {
                    producer.publish_with_id(QueueId(0), payload, i).unwrap();
                    if i % DUPLICATE_EVERY == 0 && i >= DUPLICATE_LAG {
                        let handle = i - DUPLICATE_LAG;
                        let again = Payload { handle, len: 64 };
                        producer.publish_with_id(QueueId(0), again, handle).unwrap();
                    }
                }
            }
        }
    };
    let wait_done = |n: u64| {
        while acks.matching() < acks_for(n) || slowest() < n {
            no_refusal();
            replicate();
            thread::yield_now();
        }
    };
    send(0..WARM_UP);
    wait_done(WARM_UP);
    let before = CountingAllocator::allocations();
    send(WARM_UP..WARM_UP + messages);
    wait_done(WARM_UP + messages);
    if mode == ConfirmMode::Boxed {
        // A confirm's box is made after its delivery: wait for every confirm too (the stats
        // read allocates, adding to a count expected high).
        let shares = (WARM_UP + messages) * u64::from(apps);
        while broker.queue_stats()[0].confirms < shares {
            thread::yield_now();
        }
    }
    let after = CountingAllocator::allocations();
    let q = broker.queue_stats()[0];
    assert_eq!(q.acked, acks_for(WARM_UP + messages));
    assert_eq!(q.stored, WARM_UP + messages, "duplicates are not stored");
    let all = |d: &AtomicU64| d.load(Ordering::Relaxed) == WARM_UP + messages;
    assert!(delivered.iter().all(all));
    if replication.is_some() {
        broker.quiesce().unwrap();
        let q = broker.queue_stats()[0];
        let sent = (WARM_UP + messages) * u64::from(REPLICATION.replicas);
        assert_eq!(q.receipts + q.unknown_receipts, sent);
    }
    let routed = broker.cluster_state().unwrap().routed;
    let some = "some confirms went through the cluster";
    assert!(routed > 0 && routed < q.confirms, "{some}: {routed}");
    broker.shutdown();
    after - before
}

/// Holds the session processor while a burst is queued (see [`rejected_burst`]).
static GATE_OPEN: AtomicBool = AtomicBool::new(true);

/// The producer's cap in [`rejected_burst`].
const BURST_CAP: usize = 4;

/// The allocations of bursts of `publish`es far past the cap, held behind [`GATE_OPEN`].
fn rejected_burst() -> u64 {
    let max_batch = BrokerConfig::default().max_batch;
    let mut config = BrokerConfig::default();
    (config.queues, config.session_processors) = (vec![QueueConfig::new(QueueMode::Priority)], 1);
    let broker = Broker::start(config).unwrap();
    let session = broker.processors(ClientType::Session)[0];
    let acks = AckCounts::of(AckStatus::RejectedProducerFull);
    let producer = broker.open_producer(BURST_CAP, acks.on_ack()).unwrap();
    let options = ConsumerOptions::default();
    let c = broker.open_consumer(QueueId(0), AppId(0), options, |_: &[Delivery]| {});
    let _consumer = c.unwrap();
    let mut published = 0;
    let mut burst = |n: usize| {
        GATE_OPEN.store(false, Ordering::SeqCst);
        let held = Callback::new(|| {
            while !GATE_OPEN.load(Ordering::SeqCst) {
                thread::yield_now();
            }
        });
        broker.execute(session, held).unwrap();
        let payload = Payload { handle: 0, len: 8 };
        for _ in 0..n {
            producer.publish(QueueId(0), payload).unwrap();
        }
        GATE_OPEN.store(true, Ordering::SeqCst);
        published += n as u64;
        while acks.all() < published {
            thread::yield_now();
        }
    };
    for _ in 0..100 {
        burst(BURST_CAP);
    }
    assert_eq!(acks.matching(), 0);
    let before = CountingAllocator::allocations();
    for _ in 0..100 {
        burst(max_batch);
    }
    let after = CountingAllocator::allocations();
    let rejected = acks.matching();
    let past_cap = rejected >= 100 * (max_batch - 2 * BURST_CAP) as u64;
    let cap = "the bursts were rejected past the cap";
    assert!(past_cap, "{cap}: {rejected}");
    broker.shutdown();
    after - before
}

/// Runs the proof without libtest (`zerodispatch_testkit::proof_main`).
fn main() {
    zerodispatch_testkit::proof_main(
        "the_confirm_path_allocates_nothing_per_message",
        the_confirm_path_allocates_nothing_per_message,
    );
}

fn the_confirm_path_allocates_nothing_per_message() {
    use ConfirmMode::{Inline, Typed};
    use Sending::{Named, Publish, Send};
    let per_case = MESSAGES / 4;
    let half = per_case / 2;
    let cases = [
        ("fanout 1, Inline", case(1, Inline, per_case, Publish)),
        ("fanout 1, Typed", case(1, Typed, per_case, Publish)),
        ("fanout 3, Inline", case(3, Inline, per_case, Publish)),
        ("fanout 3, Typed", case(3, Typed, per_case, Publish)),
        // `send`: credits taken and given back, frames cut by the drain.
        ("fanout 1, Typed, via send", case(1, Typed, per_case, Send)),
        // A confirm timeout: the send-time queue stays within its preallocated bound.
        (
            "fanout 1, Typed, confirm timeout",
            Case {
                confirm_timeout: Some(Duration::from_secs(2)),
                ..case(1, Typed, half, Send)
            },
        ),
        // Queues and outboxes of 64 events: what waits is kept in preallocated tables.
        (
            "fanout 3, Inline, 64-event queues",
            Case {
                event_capacity: 64,
                ..case(3, Inline, half, Send)
            },
        ),
        // Three receipts per message through the cluster processor, the ACK at the second.
        (
            "fanout 3, Inline, replication 2 of 3",
            Case {
                replication: Some(REPLICATION),
                ..case(3, Inline, half, Send)
            },
        ),
        // A named producer: ids of its own, duplicates ACKed again and not stored.
        (
            "fanout 3, Inline, named with duplicates",
            case(3, Inline, half, Named),
        ),
    ];
    for (what, case) in cases {
        let n = allocations(case);
        let messages = case.messages;
        println!("{what}: {messages} messages, {n} allocations");
        assert_eq!(n, 0, "{what}: {messages} messages allocated {n} times");
    }
    // Bursts past the cap: each rejection in the session's preallocated outcome tables.
    let n = rejected_burst();
    println!("bursts past the cap: {n} allocations");
    assert_eq!(n, 0, "a burst rejected past the cap allocated {n} times");
    let boxed = allocations(case(3, ConfirmMode::Boxed, 10_000, Sending::Publish));
    println!("fanout 3, Boxed: 10000 messages, {boxed} allocations");
    let boxes = "one box per confirm (3 per message)";
    assert!(boxed >= 30_000, "{boxes}: counted {boxed}");
}
