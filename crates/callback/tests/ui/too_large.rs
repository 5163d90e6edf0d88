use zerodispatch_callback::Callback;

fn main() {
    // 40 bytes of captures: more than the default 32-byte space.
    let words = [7_u64; 5];
    Callback::new(move || assert_eq!(words[4], 7)).call();
}
