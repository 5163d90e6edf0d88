//! What a broker engineer writes to prove their own client allocates nothing per event,
//! with the facade's `zerodispatch::testing`: a client on the stepped dispatcher (no
//! threads, so nothing else allocates meanwhile), warmed up, then `assert_no_alloc` over
//! ten thousand events, flushes, client callbacks and timers. Its own binary
//! (`harness = false`): the counting allocator counts the whole process.

use std::time::Duration;

use zerodispatch::testing::{CountingAllocator, TestDispatcher, assert_no_alloc, proof_main};
use zerodispatch::*;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// A queue that batches confirms in a preallocated buffer and "sends" them at its flush.
struct Queue {
    batch: Vec<u64>,
    sent: u64,
}

impl Client<u64> for Queue {
    fn on_message(&mut self, confirm: u64, _ctx: &mut Context<u64>) {
        self.batch.push(confirm);
    }
    fn flush(&mut self, _ctx: &mut Context<u64>) {
        self.sent += self.batch.drain(..).sum::<u64>();
    }
}

fn proof() {
    let test: TestDispatcher<u64> = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1).max_batch(64))
        .build_stepped()
        .unwrap();
    let queue = test
        .register(
            ClientType::Queue,
            Queue {
                batch: Vec::with_capacity(64),
                sent: 0,
            },
            Placement::LeastLoaded,
        )
        .unwrap();
    let round = |n: u64| {
        for i in 0..n {
            test.dispatch(queue, Event::Message(i)).unwrap();
            if i % 100 == 0 {
                test.dispatch(queue, Event::to_client(|q: &mut Queue, _ctx| q.sent += 1))
                    .unwrap();
                test.schedule_in(queue, Duration::from_millis(1), Callback::new(|| ()))
                    .unwrap();
            }
            if i % 1000 == 999 {
                test.run_until_idle();
                test.advance(Duration::from_millis(1));
            }
        }
        test.run_until_idle();
    };
    // Warm-up: the client's first event adopts it (its table grows once).
    round(1000);
    let flushes_before = test.stats()[0].flushes;
    assert_no_alloc(|| round(10_000));
    let stats = &test.stats()[0];
    assert!(
        stats.flushes - flushes_before >= 10_000 / 64,
        "flushed every 64 events at most: {}",
        stats.flushes - flushes_before
    );
    assert!(
        stats.timers_fired >= 100,
        "{} timers ran",
        stats.timers_fired
    );
}

fn main() {
    proof_main(
        "a_users_client_on_the_stepped_dispatcher_allocates_nothing_per_event",
        proof,
    );
}
