//! `Callback::new` turns a closure that would allocate, or that is not `Send`, into a
//! compile error whose message names the problem.

#[test]
#[cfg_attr(miri, ignore = "trybuild runs the compiler; Miri cannot")]
fn closures_that_do_not_fit_do_not_compile() {
    let t = trybuild::TestCases::new();
    // A passing case also makes trybuild run `cargo build`, not `cargo check`, so that the
    // size checks (evaluated when `Callback::new` is instantiated) are certainly reached.
    t.pass("tests/ui/fits.rs");
    t.compile_fail("tests/ui/too_large.rs");
    t.compile_fail("tests/ui/over_aligned.rs");
    t.compile_fail("tests/ui/into_callback_too_large.rs");
    t.compile_fail("tests/ui/value_too_large.rs");
    t.compile_fail("tests/ui/not_send.rs");
}
