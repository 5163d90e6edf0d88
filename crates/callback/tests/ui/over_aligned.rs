use zerodispatch_callback::Callback;

#[repr(align(16))]
struct Guid([u8; 16]);

fn main() {
    // 16 bytes fit the default space in size, but not in alignment (it is aligned to 8).
    let guid = Guid([1; 16]);
    Callback::new(move || {
        let whole = guid; // capture the whole aligned value, not just its field
        assert_eq!(whole.0[0], 1);
    })
    .call();
}
