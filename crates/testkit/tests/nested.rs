//! `allocations_during` and `assert_no_alloc` nested: the inner call's probe (the
//! allocation that checks the counting allocator is installed) is not counted by the outer
//! one. A program of its own (`harness = false`): no libtest thread allocates beside it.

use zerodispatch_testkit::{CountingAllocator, allocations_during, assert_no_alloc, proof_main};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn main() {
    proof_main("a_nested_probe_is_not_counted", || {
        let ((), outer) = allocations_during(|| assert_no_alloc(|| ()));
        assert_eq!(outer, 0, "the inner probe was counted by the outer call");
        let ((), outer) = allocations_during(|| {
            let ((), inner) = allocations_during(|| drop(std::hint::black_box(Box::new(1_u8))));
            assert_eq!(inner, 1, "the inner call counts what its closure allocates");
        });
        let counted = "the outer call counts that allocation, not the probe";
        assert_eq!(outer, 1, "{counted}");
    });
}
