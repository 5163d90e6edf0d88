//! Proof that the reliable producer, once warm, allocates nothing per message (sent and
//! confirmed), counted by a `#[global_allocator]`. Without libtest.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};

use support::*;
use zerodispatch_client::{QueueId, ReliableProducer, ReliableProducerOptions};
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const MESSAGES: u64 = if cfg!(miri) { 100 } else { 100_000 };
const WARM_UP: u64 = 20_000;

/// Sends `n` messages from `first` on, and waits until `settled` counts them all.
async fn round(producer: &ReliableProducer, settled: &AtomicU64, first: u64, n: u64) {
    for i in first..first + n {
        producer.send(&i.to_le_bytes()).await.unwrap();
    }
    while settled.load(Ordering::Acquire) < first + n {
        tokio::task::yield_now().await;
    }
}

/// The proof without libtest: its main thread allocates when a test passes 60 s.
fn main() {
    zerodispatch_testkit::proof_main(
        "steady_state_reliable_sends_allocate_nothing",
        steady_state_reliable_sends_allocate_nothing,
    );
}

fn steady_state_reliable_sends_allocate_nothing() {
    current_thread().block_on(async {
        let broker = FakeBroker::start(Config::default().with(|c| c.no_log = true)).await;
        let mut options = ReliableProducerOptions::new("zero-alloc");
        (options.producer, options.client) = (proof_options(), quiet());
        options.buffer_bytes = 1 << 20;
        let (settled, stored, on_confirm) = counting();
        let producer = ReliableProducer::connect(broker.addr, QueueId(0), options, on_confirm)
            .await
            .unwrap();

        round(&producer, &settled, 0, WARM_UP).await;
        let before = CountingAllocator::allocations();
        round(&producer, &settled, WARM_UP, MESSAGES).await;
        let allocated = CountingAllocator::allocations() - before;

        assert_eq!(stored.load(Ordering::Relaxed), WARM_UP + MESSAGES);
        assert_eq!(
            allocated, 0,
            "{allocated} allocations for {MESSAGES} messages sent and confirmed"
        );
        producer.close().await;
    });
}
