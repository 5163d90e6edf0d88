//! [`proof_main`]: the `main` of a zero-allocation proof that runs without libtest.
//!
//! libtest's main thread allocates while a test runs: when a test passes 60 seconds it
//! records the test and formats its "has been running for over 60 seconds" warning (3
//! allocations). Under CPU load a proof passes 60 s, and those allocations fell inside its
//! measured window ("allocated 3 times"). A proof binary with `harness = false` and this
//! `main` has no thread but its own and the ones the code under proof starts.

/// libtest's options that take a value (the value is not a name filter).
const VALUED: [&str; 6] = [
    "--test-threads",
    "--skip",
    "--color",
    "--format",
    "--logfile",
    "-Z",
];

/// Whether `cargo test`'s arguments leave the test `name` out: as libtest, it runs when no
/// name filter is given or any one matches (the other arguments are libtest's options,
/// accepted and ignored).
fn filtered_out(name: &str, args: &[String]) -> bool {
    let mut filters = args.iter().enumerate().filter(|&(i, arg)| {
        let value = i > 0 && VALUED.contains(&args[i - 1].as_str());
        !arg.starts_with('-') && !value
    });
    let mut any = false;
    let matched = filters.any(|(_, filter)| {
        any = true;
        name.contains(filter.as_str())
    });
    any && !matched
}

/// Runs the proof `proof`, named `name`, as `cargo test` would run a test of that name:
/// `--list` lists it, a name filter that does not match skips it, any other libtest option
/// is accepted and ignored; a failing proof panics (the binary exits non-zero).
///
/// ```no_run
/// // tests/zero_alloc.rs, with `[[test]] name = "zero_alloc" harness = false`:
/// fn main() {
///     zerodispatch_testkit::proof_main("nothing_allocates", nothing_allocates);
/// }
///
/// fn nothing_allocates() {
///     // warm up, count, run, assert a delta of 0
/// }
/// ```
pub fn proof_main(name: &str, proof: fn()) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("{name}: test");
        return;
    }
    if filtered_out(name, &args) {
        println!("{name}: filtered out");
        return;
    }
    proof();
    println!("{name}: ok");
}

#[cfg(test)]
mod tests {
    use super::filtered_out;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_filter_skips_other_names_and_options_values_are_not_filters() {
        assert!(!filtered_out("a_proof", &args(&[])));
        assert!(!filtered_out("a_proof", &args(&["proof"])));
        assert!(filtered_out("a_proof", &args(&["other"])));
        assert!(!filtered_out(
            "a_proof",
            &args(&["--test-threads", "2", "--nocapture"])
        ));
        assert!(!filtered_out("a_proof", &args(&["--format", "pretty"])));
        assert!(
            !filtered_out("a_proof", &args(&["other", "proof"])),
            "any filter"
        );
    }
}
