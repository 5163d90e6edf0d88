//! A user's proof with `zerodispatch::testing` that a client on the stepped dispatcher
//! allocates nothing over ten thousand events, flushes, callbacks and timers (`harness =
//! false`: the counting allocator counts the whole process).

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
    let (batch, sent) = (Vec::with_capacity(64), 0);
    let client = Queue { batch, sent };
    let queue = test
        .register(ClientType::Queue, client, Placement::LeastLoaded)
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
    let flushes = stats.flushes - flushes_before;
    assert!(
        flushes >= 10_000 / 64,
        "flushed every 64 events at most: {flushes}"
    );
    let timers = stats.timers_fired;
    assert!(timers >= 100, "{timers} timers ran");
}

fn main() {
    proof_main(
        "a_users_client_on_the_stepped_dispatcher_allocates_nothing_per_event",
        proof,
    );
}
