//! Behaviour of `InlineCallbackWith`: the callback handed its target and a context runs
//! once on them, drops once, survives panics, spills when asked, and reaches an unsized
//! target. Small enough to run under Miri.

mod common;

use std::any::Any;
use std::mem::size_of;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::SeqCst;

use common::Counts;
use zerodispatch_callback::{Align8, Callback, DefaultSpace, InlineCallbackWith};

#[derive(Default)]
struct Queue {
    confirmed: Vec<u64>,
}

type ToQueue = InlineCallbackWith<Queue, u64, DefaultSpace>;

/// A callback that confirms `seq` on its queue and counts its call in the context, holding
/// a guard of `counts`, and then panics if told to.
fn confirming(counts: &Counts, seq: u64, then_panic: bool) -> ToQueue {
    let guard = counts.guard();
    ToQueue::new(move |queue, calls| {
        let _keep = &guard;
        queue.confirmed.push(seq);
        *calls += 1;
        if then_panic {
            panic!("planned");
        }
    })
}

#[test]
fn same_size_as_the_plain_callback() {
    assert_eq!(size_of::<ToQueue>(), size_of::<Callback>());
    let to_any = size_of::<InlineCallbackWith<dyn Any, u64>>();
    assert_eq!(to_any, size_of::<Callback>());
}

#[test]
fn runs_once_on_the_target_and_context_it_is_handed() {
    let counts = Counts::default();
    let cb = confirming(&counts, 42, false);
    assert!(cb.is_inline());
    let (mut queue, mut calls) = (Queue::default(), 0);
    cb.call(&mut queue, &mut calls);
    assert_eq!(queue.confirmed, [42]);
    assert_eq!(calls, 1);
    assert_eq!(counts.drops.load(SeqCst), 1);
}

#[test]
fn dropped_uncalled_drops_captures_once_and_never_touches_a_target() {
    let counts = Counts::default();
    drop(confirming(&counts, 1, false));
    counts.assert(0, 1);
}

#[test]
fn panic_drops_captures_once_and_leaves_the_target_usable() {
    let counts = Counts::default();
    let cb = confirming(&counts, 7, true);
    let (mut queue, mut calls) = (Queue::default(), 0);
    let result = catch_unwind(AssertUnwindSafe(|| cb.call(&mut queue, &mut calls)));
    assert!(result.is_err());
    assert_eq!(counts.drops.load(SeqCst), 1);
    assert_eq!(queue.confirmed, [7]);
}

#[test]
fn an_unsized_target_is_reached_through_its_trait_object() {
    let cb = InlineCallbackWith::<dyn Any, u64>::new(|target, seen| {
        if let Some(queue) = target.downcast_mut::<Queue>() {
            queue.confirmed.push(3);
            *seen += 1;
        }
    });
    let (mut queue, mut seen) = (Queue::default(), 0);
    cb.call(&mut queue as &mut dyn Any, &mut seen);
    assert_eq!((queue.confirmed.as_slice(), seen), (&[3][..], 1));
}

#[test]
fn spill_holds_a_large_closure_and_frees_it_once() {
    type To32 = InlineCallbackWith<Queue, u64, Align8<32>>;
    let counts = Counts::default();
    let guard = counts.guard();
    let big = [5_u64; 16];
    let cb = To32::spill(move |queue: &mut Queue, _: &mut u64| {
        let _keep = &guard;
        queue.confirmed.extend_from_slice(&big[..2]);
    });
    assert!(!cb.is_inline());
    let mut queue = Queue::default();
    cb.call(&mut queue, &mut 0);
    assert_eq!(queue.confirmed, [5, 5]);
    counts.assert(0, 1);

    assert!(To32::new_or_spill(|_, _| {}).is_inline());
    let large = To32::new_or_spill(move |q, _| q.confirmed.push(big[15]));
    assert!(!large.is_inline());
    drop(large);
}

#[test]
fn moves_across_threads_to_the_thread_that_owns_the_target() {
    let cb = ToQueue::new(|queue, calls| {
        queue.confirmed.push(9);
        *calls += 1;
    });
    let owner = std::thread::spawn(move || {
        let mut queue = Queue::default();
        cb.call(&mut queue, &mut 0);
        queue
    });
    let queue = owner.join().unwrap();
    assert_eq!(queue.confirmed, [9]);
    assert!(format!("{:?}", ToQueue::new(|_, _| {})).contains("inline: true"));
}
