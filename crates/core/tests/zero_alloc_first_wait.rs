//! Proof that a thread's first wait for room allocates nothing once the thread has made
//! one blocking call: the waker it parks with is made at its first call that may wait, not
//! at its first wait, so that a warm-up of the path sees it (a wait comes only when a
//! queue happens to be full: an allocation there made `assert_no_alloc` flaky).
//!
//! Its own test binary without libtest (`harness = false`,
//! `zerodispatch_testkit::proof_main`), so that nothing else allocates while it measures.

#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_core::*;
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Counts the messages it gets.
struct Counter(Arc<AtomicU64>);

impl Client<u64> for Counter {
    fn on_message(&mut self, _n: u64, _ctx: &mut Context<u64>) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

fn main() {
    zerodispatch_testkit::proof_main(
        "a_threads_first_wait_allocates_nothing_after_its_first_blocking_call",
        a_threads_first_wait_allocates_nothing_after_its_first_blocking_call,
    );
}

/// Spins until `flag` is set (no allocation, unlike a channel's first use).
fn until(flag: &AtomicBool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !flag.load(Ordering::Acquire) {
        assert!(
            Instant::now() < deadline,
            "the proof's threads lost each other"
        );
        thread::yield_now();
    }
}

fn a_threads_first_wait_allocates_nothing_after_its_first_blocking_call() {
    const CAPACITY: u64 = 4;
    let d = Dispatcher::<u64>::builder()
        .pool(
            ClientType::Queue,
            PoolConfig::new(1).capacity(CAPACITY as usize),
        )
        .monitor_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let got = Arc::new(AtomicU64::new(0));
    let client = d
        .register(
            ClientType::Queue,
            Counter(got.clone()),
            Placement::LeastLoaded,
        )
        .unwrap();
    let [warmed, measuring, blocked, release, done] =
        std::array::from_fn(|_| Arc::new(AtomicBool::new(false)));

    let producer = {
        let h = d.handle();
        let (warmed, measuring, done) = (warmed.clone(), measuring.clone(), done.clone());
        thread::spawn(move || {
            // The warm-up a user's proof makes: one dispatch, which never had to wait.
            h.dispatch(client, Event::Message(0)).unwrap();
            warmed.store(true, Ordering::Release);
            until(&measuring);
            // The queue fills, then the last dispatch waits for the blocked processor.
            for n in 1..=CAPACITY + 1 {
                h.dispatch(client, Event::Message(n)).unwrap();
            }
            done.store(true, Ordering::Release);
        })
    };
    until(&warmed);
    while got.load(Ordering::Acquire) < 1 {
        thread::yield_now();
    }
    // The processor is held in a dispatcher callback until released.
    let (b, r) = (blocked.clone(), release.clone());
    d.execute(
        client.processor(),
        Callback::new(move || {
            b.store(true, Ordering::Release);
            until(&r);
        }),
    )
    .unwrap();
    until(&blocked);

    let before = CountingAllocator::allocations();
    measuring.store(true, Ordering::Release);
    // Long enough for the waiting dispatch to spin, register its waker and park.
    thread::sleep(Duration::from_millis(100));
    assert!(
        !done.load(Ordering::Acquire),
        "the last dispatch did not wait"
    );
    release.store(true, Ordering::Release);
    until(&done);
    let allocations = CountingAllocator::allocations() - before;

    producer.join().unwrap();
    assert_eq!(
        allocations, 0,
        "a thread's first wait allocated {allocations} time(s) after its first dispatch"
    );
    assert_eq!(
        d.synchronize(client).map(|()| got.load(Ordering::Acquire)),
        Ok(CAPACITY + 2)
    );
}
