use zerodispatch_callback::IntoCallback;

/// A call that takes work as a dispatcher's calls do: it names the check, so that the
/// error's note points at its caller.
fn run<W: IntoCallback>(work: W) {
    let () = W::CHECK;
    work.into_callback().call();
}

fn main() {
    // 48 bytes of captures, passed as work: the error names the call of `run`.
    let words = [7_u64; 6];
    run(move || assert_eq!(words[5], 7));
}
