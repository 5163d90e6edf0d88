//! Proof that a network front end's path (`publish_async`, explicit confirms with credit
//! given back, a release hook) allocates nothing per message on any thread. Its own binary
//! (`harness = false`): see `proofs/mod.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use zerodispatch_broker::*;
use zerodispatch_testkit::CountingAllocator;

mod proofs;

use proofs::{AckCounts, one_queue_of, wait_until};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const MESSAGES: u64 = 200_000;
const WARM_UP: u64 = 20_000;
const IN_FLIGHT: u64 = 1024;
const CREDIT: u32 = 256;

/// Runs the proof without libtest (`zerodispatch_testkit::proof_main`).
fn main() {
    zerodispatch_testkit::proof_main(
        "publish_async_explicit_confirms_and_credit_allocate_nothing_per_message",
        publish_async_explicit_confirms_and_credit_allocate_nothing_per_message,
    );
}

fn publish_async_explicit_confirms_and_credit_allocate_nothing_per_message() {
    let released = Arc::new(AtomicU64::new(0));
    let freed = released.clone();
    let on_release = OnRelease::new(move |batch: &[Payload]| {
        freed.fetch_add(batch.len() as u64, Ordering::Relaxed);
    });
    let mut config = one_queue_of(QueueMode::Priority, 4 * IN_FLIGHT as usize);
    config.on_release = Some(on_release);
    let broker = Arc::new(Broker::start(config).unwrap());
    let acks = AckCounts::of(AckStatus::Stored);
    let producer = broker.open_producer(2 * IN_FLIGHT as usize, acks.on_ack());
    let producer = producer.unwrap();
    // Handed and not confirmed yet: preallocated for more than the credit lets it hold.
    let handed = Arc::new(Mutex::new(Vec::<Guid>::with_capacity(4 * CREDIT as usize)));
    let into = handed.clone();
    let mut options = ConsumerOptions::default();
    (options.confirms, options.credit) = (Confirms::Explicit, Some(CREDIT));
    let on_delivery = move |batch: &[Delivery]| {
        let mut handed = into.lock().unwrap();
        assert!(handed.len() + batch.len() <= handed.capacity());
        handed.extend(batch.iter().map(|d| d.guid));
    };
    let consumer = broker.open_consumer(QueueId(0), AppId(0), options, on_delivery);
    let consumer = consumer.unwrap();

    // The application's confirming thread: confirms what it was handed, one credit back each.
    let stop = Arc::new(AtomicBool::new(false));
    let confirmed = Arc::new(AtomicU64::new(0));
    let app = {
        let (broker, handed) = (broker.clone(), handed.clone());
        let (stop, confirmed) = (stop.clone(), confirmed.clone());
        thread::spawn(move || {
            let mut mine: Vec<Guid> = Vec::with_capacity(4 * CREDIT as usize);
            while !stop.load(Ordering::Acquire) {
                std::mem::swap(&mut mine, &mut *handed.lock().unwrap());
                for &guid in &mine {
                    broker.confirm(&consumer, guid).unwrap();
                    broker.add_credit(&consumer, 1).unwrap();
                }
                confirmed.fetch_add(mine.len() as u64, Ordering::Release);
                if mine.is_empty() {
                    thread::yield_now();
                }
                mine.clear();
            }
        })
    };

    let stored = || acks.matching();
    let runtime = tokio::runtime::Builder::new_current_thread().build();
    let runtime = runtime.unwrap();
    let send = |range: std::ops::Range<u64>| {
        runtime.block_on(async {
            for i in range {
                // At most IN_FLIGHT unconfirmed; the runtime's only task, it may yield the
                // thread (tokio's `yield_now` allocates on first use).
                while i - confirmed.load(Ordering::Acquire) >= IN_FLIGHT {
                    thread::yield_now();
                }
                let payload = Payload { handle: i, len: 64 };
                producer.publish_async(QueueId(0), payload).await.unwrap();
            }
        });
    };
    let wait_stored = |n: u64| {
        while stored() < n {
            thread::yield_now();
        }
    };
    send(0..WARM_UP);
    wait_stored(WARM_UP);
    wait_until(&confirmed, WARM_UP);
    let before = CountingAllocator::allocations();
    send(WARM_UP..WARM_UP + MESSAGES);
    wait_stored(WARM_UP + MESSAGES);
    wait_until(&confirmed, WARM_UP + MESSAGES);
    wait_until(&released, WARM_UP + MESSAGES);
    let after = CountingAllocator::allocations();
    stop.store(true, Ordering::Release);
    app.join().unwrap();

    assert_eq!(acks.others(), 0, "every message stored");
    let stats = broker.session_stats();
    assert_eq!(stats.delivered, WARM_UP + MESSAGES);
    assert_eq!(stats.unknown_confirms, 0);
    let went = format!("allocations while {MESSAGES} messages went through");
    assert_eq!(after - before, 0, "{went}");
}
