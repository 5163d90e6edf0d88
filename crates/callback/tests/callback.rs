//! Behaviour of `Callback` and `BoxedCallback`: run once, drop once, panics, sizes,
//! alignment, threads. Small enough to run under Miri.

mod common;

use std::mem::{align_of, size_of};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::Counts;
use zerodispatch_callback::{Align8, Align16, BoxedCallback, Callback, InlineCallback};

#[test]
fn size_of_callback_is_48_bytes() {
    assert_eq!(size_of::<Callback>(), 48);
    assert_eq!(align_of::<Callback>(), 8);
    assert_eq!(size_of::<InlineCallback<Align8<64>>>(), 80);
    assert_eq!(size_of::<InlineCallback<Align16<32>>>(), 48);
    assert_eq!(align_of::<InlineCallback<Align16<32>>>(), 16);
    assert_eq!(size_of::<BoxedCallback>(), 16);
}

#[test]
fn call_runs_exactly_once_and_drops_captures_once() {
    let counts = Counts::default();
    let cb = Callback::new(counts.closure());
    assert!(cb.is_inline());
    counts.assert(0, 0);
    cb.call();
    counts.assert(1, 1);
}

#[test]
fn drop_without_call_drops_captures_once_and_never_runs() {
    let counts = Counts::default();
    drop(Callback::new(counts.closure()));
    counts.assert(0, 1);
}

#[test]
fn panic_during_call_drops_captures_once_and_runs_once() {
    let counts = Counts::default();
    let cb = Callback::new(counts.closure_then(|| panic!("confirm handler failed")));
    let outcome = catch_unwind(AssertUnwindSafe(move || cb.call()));
    let message = outcome.expect_err("the panic must reach the caller");
    let message = message.downcast_ref::<&str>();
    assert_eq!(message, Some(&"confirm handler failed"));
    counts.assert(1, 1);
}

#[test]
fn captures_are_moved_in_and_out_intact() {
    let guid: [u8; 16] = core::array::from_fn(|i| i as u8);
    let (queue, sub_queue) = (0xdead_beef_u32, 42_u32);
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let cb = Callback::new(move || {
        assert_eq!(queue, 0xdead_beef);
        assert_eq!(sub_queue, 42);
        assert!(guid.iter().enumerate().all(|(i, b)| *b == i as u8));
        s.fetch_add(1, Ordering::SeqCst);
    });
    // Move the callback around (into a Vec and out, through an Option) before calling it.
    let mut slot = vec![cb];
    let mut option = slot.pop();
    option.take().unwrap().call();
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[test]
fn zero_sized_closure_fits_a_zero_byte_space() {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let f = || _ = RUNS.fetch_add(1, Ordering::SeqCst);
    assert_eq!(size_of_val(&f), 0);
    let cb = InlineCallback::<Align8<0>>::new(f);
    assert!(cb.is_inline());
    assert_eq!(size_of::<InlineCallback<Align8<0>>>(), 16);
    cb.call();
    assert_eq!(RUNS.load(Ordering::SeqCst), 1);
}

#[test]
fn over_aligned_capture_fits_an_align16_space() {
    #[repr(align(16))]
    #[derive(Clone, Copy)]
    struct Guid([u8; 16]);
    let guid = Guid([9; 16]);
    let f = move || {
        let p = &guid as *const Guid as usize;
        assert_eq!(p % 16, 0, "capture must keep its alignment in the space");
        assert_eq!(guid.0, [9; 16]);
    };
    assert_eq!(align_of_val(&f), 16);
    assert!(!Callback::fits_closure(&f));
    assert!(InlineCallback::<Align16<32>>::fits_closure(&f));
    let cb = InlineCallback::<Align16<32>>::new(f);
    assert!(cb.is_inline());
    cb.call();
}

#[test]
fn moves_across_threads() {
    let counts = Counts::default();
    std::thread::scope(|s| {
        for i in 0..4 {
            let r = counts.runs.clone();
            // Counts its run, and `i` more.
            let then = move || _ = r.fetch_add(i, Ordering::SeqCst);
            let cb = Callback::new(counts.closure_then(then));
            s.spawn(move || cb.call());
        }
    });
    counts.assert(1 + 2 + 3 + 4, 4);
}

#[test]
fn spill_stores_a_large_closure_on_the_heap_and_says_so() {
    let counts = Counts::default();
    let big = [3_u64; 16];
    let f = counts.closure_then(move || assert_eq!(big.iter().sum::<u64>(), 48));
    assert!(!Callback::fits_closure(&f));
    let cb = Callback::spill(f);
    assert!(!cb.is_inline());
    cb.call();
    counts.assert(1, 1);

    // Dropped unrun, a spilled closure is freed and its captures dropped once.
    let unrun = counts.closure_then(move || assert_eq!(big[0], 3));
    drop(Callback::spill(unrun));
    counts.assert(1, 2);
}

#[test]
fn spilled_closure_that_panics_drops_once() {
    let counts = Counts::default();
    let big = [0_u8; 100];
    let cb = Callback::spill(counts.closure_then(move || panic!("boom {}", big.len())));
    assert!(catch_unwind(AssertUnwindSafe(move || cb.call())).is_err());
    counts.assert(1, 1);
}

#[test]
fn new_or_spill_picks_inline_when_it_fits() {
    let (small, big) = ([1_u8; 8], [1_u8; 64]);
    let a = Callback::new_or_spill(move || assert_eq!(small[0], 1));
    let b = Callback::new_or_spill(move || assert_eq!(big[63], 1));
    assert!(a.is_inline());
    assert!(!b.is_inline());
    a.call();
    b.call();
}

#[test]
fn boxed_callback_runs_once_and_drops_once() {
    let counts = Counts::default();
    let cb = BoxedCallback::new(counts.closure());
    assert!(!cb.is_inline());
    cb.call();
    counts.assert(1, 1);
    drop(BoxedCallback::new(counts.closure()));
    counts.assert(1, 2);
}

#[test]
fn debug_says_where_the_closure_lives() {
    let inline = Callback::new(|| ());
    let big = [0_u8; 64];
    let spilled = Callback::spill(move || _ = std::hint::black_box(big));
    let shown = [format!("{inline:?}"), format!("{spilled:?}")];
    assert_eq!(
        shown,
        [
            "Callback { inline: true, space_bytes: 32, .. }",
            "Callback { inline: false, space_bytes: 32, .. }",
        ]
    );
}

/// `Callback` is `Sync` whatever it captures (here a `Cell`): four threads share it under
/// Miri without a race, then its owner calls it and finds its captures intact.
#[test]
fn a_shared_callback_never_touches_its_closure() {
    use std::cell::Cell;
    use zerodispatch_callback::{DefaultSpace, InlineCallbackWith};

    fn is_sync<T: Sync>(_: &T) -> bool {
        true
    }

    let seen = Arc::new(AtomicUsize::new(0));
    let (cell, out) = (Cell::new(41_usize), seen.clone());
    let inline = Callback::new(move || {
        cell.set(cell.get() + 1);
        out.store(cell.get(), Ordering::SeqCst);
    });
    let (cell, out, big) = (Cell::new(100_usize), seen.clone(), [1_usize; 8]);
    let spilled = Callback::spill(move || {
        cell.set(cell.get() + big.iter().sum::<usize>());
        out.fetch_add(cell.get(), Ordering::SeqCst);
    });
    let cell = Cell::new(7_u64);
    let with: InlineCallbackWith<u64, u64, DefaultSpace> =
        InlineCallbackWith::new(move |target: &mut u64, context: &mut u64| {
            *target += cell.get();
            *context += 1;
        });
    assert!(is_sync(&inline) && is_sync(&spilled) && is_sync(&with));

    let asked = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..3 {
                    assert!(inline.is_inline() && !spilled.is_inline() && with.is_inline());
                    assert!(format!("{inline:?}").contains("inline: true"));
                    assert!(format!("{spilled:?}").contains("inline: false"));
                    assert!(format!("{with:?}").contains("inline: true"));
                    asked.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(asked.load(Ordering::Relaxed), 12);

    inline.call();
    assert_eq!(seen.load(Ordering::SeqCst), 42);
    spilled.call();
    assert_eq!(seen.load(Ordering::SeqCst), 42 + 108);
    let (mut target, mut context) = (1_u64, 0_u64);
    with.call(&mut target, &mut context);
    assert_eq!((target, context), (8, 1));
}
