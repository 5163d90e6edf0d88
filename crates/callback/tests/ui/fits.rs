use zerodispatch_callback::Callback;

fn main() {
    // A confirm functor: queue id, message GUID, sub-queue id, and a spare word.
    let (queue, guid, sub_queue, spare) = (1_u32, [2_u8; 16], 3_u32, 4_u64);
    let cb = Callback::new(move || assert_eq!((queue, guid[0], sub_queue, spare), (1, 2, 3, 4)));
    assert!(cb.is_inline());
    cb.call();
}
