//! An inline `Callback` allocates nothing on a cross-thread hop; a `BoxedCallback` is seen
//! allocating (its own binary with one test: the counting allocator counts every thread).

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use crossbeam_queue::ArrayQueue;
use zerodispatch_callback::{BoxedCallback, Callback};

use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const EVENTS: u64 = 1_000_000;
const WARM_UP: u64 = 10_000;

/// What every confirm callback adds to, so that the test can check each one ran.
static CONFIRMED_SUM: AtomicU64 = AtomicU64::new(0);

/// A confirm functor's worth of captures: queue id, message GUID, sub-queue id.
fn confirm(seq: u64) -> impl FnOnce() + Send + 'static {
    let queue = (seq % 8) as u32;
    let mut guid = [0_u8; 16];
    guid[..8].copy_from_slice(&seq.to_le_bytes());
    let sub_queue = 1_u32;
    move || {
        let seq = u64::from_le_bytes(guid[..8].try_into().unwrap());
        assert_eq!(queue as u64, seq % 8);
        CONFIRMED_SUM.fetch_add(seq + u64::from(sub_queue), Ordering::Relaxed);
    }
}

/// Runs `WARM_UP` then `EVENTS` callbacks made by `make` on this thread through an
/// `ArrayQueue` to a consumer thread that calls them; returns the allocations counted
/// during the `EVENTS`, on all threads.
fn allocations_per_hop<T: Send>(make: fn(u64) -> T, call: fn(T)) -> u64 {
    let (queue, consumed) = (ArrayQueue::<T>::new(1024), AtomicU64::new(0));
    let total = WARM_UP + EVENTS;
    let produce = |range: std::ops::Range<u64>| {
        for mut item in range.map(make) {
            while let Err(back) = queue.push(item) {
                item = back;
                thread::yield_now();
            }
        }
    };
    let wait_consumed = |n: u64| {
        while consumed.load(Ordering::Acquire) < n {
            thread::yield_now();
        }
    };
    thread::scope(|s| {
        s.spawn(|| {
            // The only consumer: once the queue is not empty, its pop succeeds.
            for n in 1..=total {
                while queue.is_empty() {
                    thread::yield_now();
                }
                call(queue.pop().unwrap());
                consumed.store(n, Ordering::Release);
            }
        });
        produce(0..WARM_UP);
        wait_consumed(WARM_UP);
        let before = CountingAllocator::allocations();
        produce(WARM_UP..total);
        wait_consumed(total);
        CountingAllocator::allocations() - before
    })
}

/// [`allocations_per_hop`], checking that every callback ran once.
fn every_one_run<T: Send>(make: fn(u64) -> T, call: fn(T)) -> u64 {
    CONFIRMED_SUM.store(0, Ordering::SeqCst);
    let allocations = allocations_per_hop(make, call);
    let once = (0..WARM_UP + EVENTS).map(|seq| seq + 1).sum::<u64>();
    let sum = CONFIRMED_SUM.load(Ordering::SeqCst);
    assert_eq!(sum, once, "every callback ran once");
    allocations
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a million cross-thread hops; the unsafe code it exercises is covered by tests/callback.rs under Miri"
)]
fn inline_callbacks_allocate_nothing_boxed_ones_allocate_per_event() {
    let inline = every_one_run(|seq| Callback::new(confirm(seq)), Callback::call);
    assert_eq!(
        inline, 0,
        "{EVENTS} inline callbacks across threads allocated {inline} times"
    );

    let boxed = every_one_run(|seq| BoxedCallback::new(confirm(seq)), BoxedCallback::call);
    assert!(
        boxed >= EVENTS,
        "the counter must see one allocation per boxed callback: counted {boxed} for {EVENTS}"
    );
    println!("allocations for {EVENTS} hops: inline {inline}, boxed {boxed}");
}
