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
    let alloc = counted(|| boxed = Some(black_box(Box::new(7_u64))));
    assert!(alloc >= 1, "alloc");
    let free = counted(|| drop(boxed.take()));
    assert_eq!(free, 0, "a free is not an allocation");
    let mut v: Vec<u64> = Vec::with_capacity(1);
    v.push(1);
    let realloc = counted(|| v.extend(black_box([2, 3, 4, 5])));
    assert!(realloc >= 1, "realloc");
    let zeroed = counted(|| drop(black_box(vec![0_u8; 64])));
    assert!(zeroed >= 1, "alloc_zeroed");
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
