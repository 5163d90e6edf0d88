//! `IntoCallback` takes a closure and a prepared callback alike, passes the prepared one on
//! unwrapped, and allocates for neither (its own binary with one test: a counting allocator).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use zerodispatch_callback::{Align8, Callback, InlineCallback, IntoCallback};
use zerodispatch_testkit::{CountingAllocator, allocations_during};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// A call that takes work as the dispatcher's calls do.
fn take<S, W: IntoCallback<S>>(work: W) -> InlineCallback<S> {
    let () = W::CHECK;
    work.into_callback()
}

#[test]
fn closures_and_callbacks_are_taken_alike_without_a_second_wrapper_or_an_allocation() {
    let ran = Arc::new(AtomicU64::new(0));

    // A closure: stored inline, no allocation.
    let (r1, r2) = (ran.clone(), ran.clone());
    let (closure, allocated) =
        allocations_during(|| take(move || _ = r1.fetch_add(1, Ordering::Relaxed)));
    let closure: Callback = closure;
    assert_eq!(allocated, 0, "a closure taken as work allocates nothing");
    assert!(closure.is_inline());

    // A prepared callback: moved through, no allocation, the same callback.
    let prepared = Callback::new(move || _ = r2.fetch_add(10, Ordering::Relaxed));
    let (passed, allocated) = allocations_during(|| take(prepared));
    assert_eq!(allocated, 0, "a callback taken as work allocates nothing");
    assert!(passed.is_inline());

    // A spilled callback stays the one spilled box (a second wrapper would be inline).
    let (r3, big) = (ran.clone(), [1_u64; 8]);
    let spilled =
        Callback::spill(move || _ = r3.fetch_add(big.iter().sum::<u64>() * 100, Ordering::Relaxed));
    let (spilled, allocated) = allocations_during(|| take(spilled));
    assert_eq!(allocated, 0);
    assert!(
        !spilled.is_inline(),
        "a spilled callback is passed on as it is"
    );

    // A larger space is a type parameter of the work too.
    let (r4, words) = (ran.clone(), [1_u64; 5]);
    let (larger, allocated) = allocations_during(|| {
        take::<Align8<48>, _>(move || {
            _ = r4.fetch_add(words.iter().sum::<u64>() * 1000, Ordering::Relaxed)
        })
    });
    assert_eq!(allocated, 0);
    assert!(larger.is_inline());

    for callback in [closure, passed, spilled] {
        callback.call();
    }
    larger.call();
    let ran_once = 1 + 10 + 800 + 5000;
    assert_eq!(ran.load(Ordering::Relaxed), ran_once, "each ran once");
    assert_eq!(Arc::strong_count(&ran), 1, "each dropped its captures");
}
