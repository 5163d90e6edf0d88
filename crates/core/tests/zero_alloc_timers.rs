//! Proof that timers, a thread's and a self-rescheduling ticker's, allocate nothing once warm.

#![cfg(not(loom))]

mod common;

use common::*;
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const TIMERS: u64 = 50_000;
const WARM_UP: u64 = 2_000;

common::proof_main!(timers_allocate_nothing_per_timer);

/// One turn of a ticker: counts, then schedules the next, `left` more times.
fn tick(d: DispatcherHandle<NoMessage>, queue: ProcessorId, ticks: Arc<AtomicU64>, left: u32) {
    ticks.fetch_add(1, Ordering::Relaxed);
    if left > 0 {
        let next = d.clone();
        let next = Callback::new(move || tick(next, queue, ticks, left - 1));
        let scheduled = d.schedule_in(queue, Duration::from_micros(50), next);
        scheduled.expect("the ticker's own slot was freed before it ran");
    }
}

/// Starts a ticker on `ticker` now: its first turn and `n` more.
fn start_ticker(d: &Dispatcher<NoMessage>, ticker: ProcessorId, ticks: &Arc<AtomicU64>, n: u32) {
    let (h, t) = (d.handle(), ticks.clone());
    let first = Callback::new(move || tick(h, ticker, t, n));
    d.schedule_in(ticker, Duration::ZERO, first).unwrap();
}

/// Schedules `n` timers: three in four due now, one in four cancelled; a full set retries.
fn schedule(d: &Dispatcher<NoMessage>, queue: ProcessorId, fired: &Arc<AtomicU64>, n: u64) -> u64 {
    let mut cancelled = 0;
    for i in 0..n {
        let fired = fired.clone();
        let mut callback = Callback::new(move || _ = fired.fetch_add(1, Ordering::Relaxed));
        let cancel = i % 4 == 3;
        let at = d.now() + Duration::from_millis(u64::from(cancel));
        let token = loop {
            match d.schedule(queue, at, callback) {
                Ok(token) => break token,
                Err(DispatchError::TimersFull(back)) => {
                    callback = back;
                    std::thread::yield_now();
                }
                Err(e) => panic!("{e}"),
            }
        };
        if cancel && d.cancel(token) {
            cancelled += 1;
        }
    }
    cancelled
}

fn timers_allocate_nothing_per_timer() {
    let queues = PoolConfig::new(2).timers(256);
    let d = queue_pool::<NoMessage>(queues).build().unwrap();
    // The application's timers on one processor, the ticker alone on the other.
    let [queue, ticker] = d.processors(ClientType::Queue)[..] else {
        unreachable!("two queue processors")
    };
    let fired = Arc::new(AtomicU64::new(0));
    let ticks = Arc::new(AtomicU64::new(0));
    let settled = |expected: u64| {
        while fired.load(Ordering::Relaxed) < expected
            || d.stats().iter().any(|p| p.timers_pending > 0)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    };

    // Warm-up: the calling thread's first `call`, the first timers, a ticker's first turns.
    let cancelled = schedule(&d, queue, &fired, WARM_UP);
    start_ticker(&d, ticker, &ticks, 100);
    settled(WARM_UP - cancelled);
    d.synchronize(queue).unwrap();
    d.synchronize(ticker).unwrap();
    let _ = d.stats();

    let before = CountingAllocator::allocations();
    let fired_before = fired.load(Ordering::Relaxed);
    start_ticker(&d, ticker, &ticks, 1_000);
    let cancelled = schedule(&d, queue, &fired, TIMERS);
    while fired.load(Ordering::Relaxed) < fired_before + TIMERS - cancelled
        || ticks.load(Ordering::Relaxed) < 101 + 1_001
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    d.synchronize(queue).unwrap();
    d.synchronize(ticker).unwrap();
    let after = CountingAllocator::allocations();

    assert!(
        cancelled > TIMERS / 8,
        "a quarter were cancelled in time: {cancelled}"
    );
    let what = format_args!("{TIMERS} timers and 1,001 ticks");
    assert_none_allocated(after - before, what);
    // Not counted: a snapshot allocates its vector.
    let fired_in_all: u64 = d.stats().iter().map(|p| p.timers_fired).sum();
    assert!(fired_in_all >= TIMERS - cancelled + 1_001);
}
