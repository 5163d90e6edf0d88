//! Proof that a turn an application thread drives (`PoolConfig::driven`) allocates nothing.

#![cfg(not(loom))]

mod common;

use common::*;
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const WARM_UP: u64 = 50;
const EVENTS: u64 = 200;

common::proof_main!(a_driven_turn_allocates_nothing);

fn a_driven_turn_allocates_nothing() {
    let queues = PoolConfig::new(1).wait(WaitStrategy::Park).driven(true);
    let builder = Dispatcher::<u64>::builder().pool(ClientType::Queue, queues);
    let dispatcher = builder.build().unwrap();
    let queue = dispatcher.processors(ClientType::Queue)[0];
    let (ran, inline) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let me = thread::current().id();
    let send = |range: std::ops::Range<u64>| {
        for _ in range {
            // Time for the processor to park, so that the dispatch drives its turn.
            thread::sleep(Duration::from_micros(500));
            let (ran, inline) = (ran.clone(), inline.clone());
            let work = Callback::new(move || {
                ran.fetch_add(1, Ordering::Relaxed);
                if thread::current().id() == me {
                    inline.fetch_add(1, Ordering::Relaxed);
                }
            });
            dispatcher.execute(queue, work).unwrap();
        }
    };
    send(0..WARM_UP);
    dispatcher.synchronize(queue).unwrap();
    let before = CountingAllocator::allocations();
    let inline_before = inline.load(Ordering::Relaxed);
    send(WARM_UP..WARM_UP + EVENTS);
    dispatcher.synchronize(queue).unwrap();
    let after = CountingAllocator::allocations();
    assert_eq!(ran.load(Ordering::Relaxed), WARM_UP + EVENTS);
    // Most dispatches found the processor parked and ran the turn here.
    let driven = inline.load(Ordering::Relaxed) - inline_before;
    let turns = "turns driven";
    assert!(driven >= EVENTS / 4, "only {driven} of {EVENTS} {turns}");
    assert_none_allocated(after - before, "a driven turn");
}
