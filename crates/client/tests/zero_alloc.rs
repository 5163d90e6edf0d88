//! Proof that producers and consumers, once warm, allocate nothing per message (sent,
//! confirmed, delivered, confirmed), counted by a `#[global_allocator]`. Without libtest.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use support::*;
use zerodispatch_client::{AppId, Client, Producer, QueueId};
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const MESSAGES: u64 = if cfg!(miri) { 100 } else { 100_000 };
const WARM_UP: u64 = 20_000;

/// Sends `n` messages from `first` on; waits until each of `counters` counts them all.
async fn round(producer: &Producer, counters: [&AtomicU64; 2], first: u64, n: u64) {
    for i in first..first + n {
        producer.send(&i.to_le_bytes()).await.unwrap();
    }
    while counters
        .iter()
        .any(|c| c.load(Ordering::Acquire) < first + n)
    {
        tokio::task::yield_now().await;
    }
}

/// The proof without libtest: its main thread allocates when a test passes 60 s.
fn main() {
    zerodispatch_testkit::proof_main(
        "steady_state_sends_and_confirms_allocate_nothing",
        steady_state_sends_and_confirms_allocate_nothing,
    );
}

fn steady_state_sends_and_confirms_allocate_nothing() {
    // One thread for all, so the runtime's per-thread lists are warm where they are used.
    current_thread().block_on(async {
        let config = Config::default().with(|c| (c.no_log, c.echo_to) = (true, Some(1)));
        let broker = FakeBroker::start(config).await;
        let client = Client::connect(broker.addr, quiet()).await.unwrap();
        // Consumer 1 gets every message published, its credit over the producer's cap.
        let consumed = Arc::new(AtomicU64::new(0));
        let delivered = Arc::clone(&consumed);
        let consumer = client
            .open_consumer(QueueId(0), AppId(0), credit(4096, true), move |batch| {
                batch.confirm_all();
                delivered.fetch_add(batch.len() as u64, Ordering::Release);
            })
            .await
            .unwrap();
        assert_eq!(consumer.id().0, 1);
        let (settled, stored, on_confirm) = counting();
        let producer = client.open_producer(QueueId(0), proof_options(), on_confirm);
        let producer = producer.await.unwrap();

        round(&producer, [&settled, &consumed], 0, WARM_UP).await;
        let before = CountingAllocator::allocations();
        round(&producer, [&settled, &consumed], WARM_UP, MESSAGES).await;
        let allocated = CountingAllocator::allocations() - before;

        assert_eq!(stored.load(Ordering::Relaxed), WARM_UP + MESSAGES);
        assert_eq!(
            allocated, 0,
            "{allocated} allocations for {MESSAGES} messages sent, confirmed, delivered and confirmed"
        );
        producer.close().await.unwrap();
        consumer.close().await.unwrap();
        client.close().await;
    });
}
