//! Proof that the reliable producer allocates nothing per message once warm: its ring
//! keeps every payload until its outcome without an allocation. A counting
//! `#[global_allocator]`, 100,000 sends through the fake broker (in this process, its
//! allocations counted too) and their confirms, after warm-up, delta exactly 0.
//!
//! Its own test binary without libtest (`harness = false`, `zerodispatch_testkit::proof_main`),
//! so that no other test, nor libtest's own thread, allocates while it measures.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};

use support::{Config, FakeBroker, counting, proof_options, quiet};
use zerodispatch_client::{QueueId, ReliableProducer, ReliableProducerOptions};
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const MESSAGES: u64 = if cfg!(miri) { 100 } else { 100_000 };
const WARM_UP: u64 = 20_000;

async fn round(producer: &ReliableProducer, settled: &AtomicU64, first: u64, n: u64) {
    for i in first..first + n {
        producer.send(&i.to_le_bytes()).await.unwrap();
    }
    while settled.load(Ordering::Acquire) < first + n {
        tokio::task::yield_now().await;
    }
}

/// Runs the proof without libtest (`zerodispatch_testkit::proof_main`): libtest's main
/// thread allocates when a test passes 60 s, which under load fell inside the window.
fn main() {
    zerodispatch_testkit::proof_main(
        "steady_state_reliable_sends_allocate_nothing",
        steady_state_reliable_sends_allocate_nothing,
    );
}

fn steady_state_reliable_sends_allocate_nothing() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let broker = FakeBroker::start(Config::default().with(|c| c.record = false)).await;
        let options = ReliableProducerOptions {
            producer: proof_options(),
            client: quiet(),
            buffer_bytes: 1 << 20,
            ..ReliableProducerOptions::new("zero-alloc")
        };
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
