//! The counter counts allocations, zeroed allocations and reallocations on any thread, and
//! not frees. Small enough for Miri.

use std::hint::black_box;

use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn counted(f: impl FnOnce()) -> u64 {
    let before = CountingAllocator::allocations();
    f();
    CountingAllocator::allocations() - before
}

#[test]
fn counts_allocations_not_frees_on_every_thread() {
    let mut boxed = None;
    assert!(
        counted(|| boxed = Some(black_box(Box::new(7_u64)))) >= 1,
        "alloc"
    );
    assert_eq!(
        counted(|| drop(boxed.take())),
        0,
        "a free is not an allocation"
    );
    let mut v: Vec<u64> = Vec::with_capacity(1);
    v.push(1);
    assert!(
        counted(|| v.extend(black_box([2, 3, 4, 5]))) >= 1,
        "realloc"
    );
    assert!(
        counted(|| drop(black_box(vec![0_u8; 64]))) >= 1,
        "alloc_zeroed"
    );
    let spawned = counted(|| {
        std::thread::spawn(|| drop(black_box(Box::new(7_u64))))
            .join()
            .unwrap();
    });
    assert!(
        spawned >= 2,
        "the thread's own allocations are counted: {spawned}"
    );
}
