//! Proof that the async door allocates nothing per event once warm (a hand-made `block_on`).

#![cfg(not(loom))]

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::Thread;

use common::*;
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const EVENTS: u64 = 100_000;
const WARM_UP: u64 = 20_000;

/// Unparks the thread that runs [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` until it resolves, parking while pending (counted in `waits`).
fn block_on<F: Future>(future: F, waker: &Waker, waits: &mut u64) -> F::Output {
    let mut future = pin!(future);
    let mut cx = TaskContext::from_waker(waker);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => return output,
            Poll::Pending => {
                *waits += 1;
                thread::park();
            }
        }
    }
}

common::proof_main!(the_async_door_allocates_nothing_per_event);

fn the_async_door_allocates_nothing_per_event() {
    let dispatcher = one_queue(PoolConfig::new(1).capacity(64));
    let tally = Tally::default();
    let sink = on_queue(&dispatcher, tally.clone());
    let handle = dispatcher.handle();
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut waits = 0;
    // One event in four goes in a batch of four, the others one by one.
    let send = |range: std::ops::Range<u64>, waits: &mut u64| {
        let handle = &handle;
        block_on(
            async move {
                let mut seq = range.start;
                while seq < range.end {
                    if seq % 64 == 1 {
                        // Every 64 events a call, answered through the task's slot.
                        let queue = sink.processor();
                        assert_eq!(handle.call_async(queue, move || seq * 2).await, Ok(seq * 2));
                    }
                    if seq.is_multiple_of(16) && seq + 4 <= range.end {
                        let mut batch = (seq..seq + 4).map(Event::Message);
                        let enqueued = handle.dispatch_batch_async(sink, &mut batch).await;
                        assert_eq!(enqueued.unwrap(), 4);
                        seq += 4;
                    } else {
                        let sent = handle.dispatch_async(sink, Event::Message(seq)).await;
                        sent.unwrap();
                        seq += 1;
                    }
                }
            },
            &waker,
            waits,
        );
    };

    send(0..WARM_UP, &mut waits);
    tally.wait_for(WARM_UP);
    let warm_waits = waits;
    let before = CountingAllocator::allocations();
    send(WARM_UP..WARM_UP + EVENTS, &mut waits);
    tally.wait_for(WARM_UP + EVENTS);
    let after = CountingAllocator::allocations();

    let total = WARM_UP + EVENTS;
    let handled_once = total * (total - 1) / 2;
    let why = "every event handled once";
    assert_eq!(tally.sum.load(Ordering::Relaxed), handled_once, "{why}");
    let measured_waits = waits - warm_waits;
    let waited = "the futures waited for room while measured";
    assert!(waits > warm_waits, "{waited} ({measured_waits} waits)");
    let what = format_args!("{EVENTS} events through the async door");
    assert_none_allocated(after - before, what);
}
