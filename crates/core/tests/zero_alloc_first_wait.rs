//! Proof that a thread's first wait for room allocates nothing after its first blocking call.

#![cfg(not(loom))]

mod common;

use common::*;
use zerodispatch_testkit::CountingAllocator;

/// The counting allocator, also counting the measured thread's allocations apart.
struct OnThisThread;

std::thread_local! {
    /// Set by the producer while its allocations are counted.
    static MEASURED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Allocations of the measured thread while it was measured.
static ON_MEASURED_THREAD: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is handed to `CountingAllocator`, which upholds `GlobalAlloc`'s
// contract; the count beside it reads a const-initialised thread-local (no allocation,
// no destructor) and adds to an atomic.
unsafe impl std::alloc::GlobalAlloc for OnThisThread {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if MEASURED.with(std::cell::Cell::get) {
            ON_MEASURED_THREAD.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { CountingAllocator.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { CountingAllocator.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        if MEASURED.with(std::cell::Cell::get) {
            ON_MEASURED_THREAD.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { CountingAllocator.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: OnThisThread = OnThisThread;

common::proof_main!(a_threads_first_wait_allocates_nothing_after_its_first_blocking_call);

/// Spins until `flag` is set (no allocation, unlike a channel's first use).
fn until(flag: &AtomicBool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !flag.load(Ordering::Acquire) {
        let why = "the proof's threads lost each other";
        assert!(Instant::now() < deadline, "{why}");
        thread::yield_now();
    }
}

fn a_threads_first_wait_allocates_nothing_after_its_first_blocking_call() {
    const CAPACITY: u64 = 4;
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(CAPACITY as usize));
    let tally = Tally::default();
    let client = on_queue(&d, tally.clone());
    let got = tally.handled;
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
            MEASURED.with(|m| m.set(true));
            for n in 1..=CAPACITY + 1 {
                h.dispatch(client, Event::Message(n)).unwrap();
            }
            MEASURED.with(|m| m.set(false));
            done.store(true, Ordering::Release);
        })
    };
    until(&warmed);
    while got.load(Ordering::Acquire) < 1 {
        thread::yield_now();
    }
    // The processor warmed up too: a full queue once (raising its watermark), then drained.
    let held = Arc::new(AtomicBool::new(false));
    let h = held.clone();
    d.execute(client.processor(), Callback::new(move || until(&h)))
        .unwrap();
    while d.try_dispatch(client, Event::Message(0)).is_ok() {}
    held.store(true, Ordering::Release);
    d.synchronize(client).unwrap();
    let warmed_up = got.load(Ordering::Acquire);
    // The processor is held in a dispatcher callback until released.
    let (b, r) = (blocked.clone(), release.clone());
    let hold = Callback::new(move || {
        b.store(true, Ordering::Release);
        until(&r);
    });
    d.execute(client.processor(), hold).unwrap();
    until(&blocked);

    let before = CountingAllocator::allocations();
    measuring.store(true, Ordering::Release);
    // Long enough for the waiting dispatch to spin, register its waker and park.
    thread::sleep(Duration::from_millis(100));
    let why = "the last dispatch did not wait";
    assert!(!done.load(Ordering::Acquire), "{why}");
    release.store(true, Ordering::Release);
    until(&done);
    let allocations = CountingAllocator::allocations() - before;

    producer.join().unwrap();
    let on_producer = ON_MEASURED_THREAD.load(Ordering::SeqCst);
    assert_eq!(
        on_producer, 0,
        "a thread's first wait allocated {on_producer} time(s) after its first dispatch"
    );
    // The process's count is reported, not asserted: another thread's rare log allocations.
    if allocations != 0 {
        eprintln!(
            "the process allocated {allocations} time(s) in the window, none of them the producer's"
        );
    }
    let got_all = d.synchronize(client).map(|()| got.load(Ordering::Acquire));
    assert_eq!(got_all, Ok(warmed_up + CAPACITY + 1));
}
