use zerodispatch_callback::{DefaultSpace, InlineValue};

fn main() {
    // 64 bytes: twice the default space.
    let value = InlineValue::<DefaultSpace>::new([1_u64; 8]);
    assert!(value.is::<[u64; 8]>());
}
