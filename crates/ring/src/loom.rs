//! `loom` models of the ring, on the real code:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p zerodispatch-ring --release loom
//! ```
//!
//! No thread of a model waits for another (each push and pop is tried once), so that the
//! models stay small: what was refused is handed back, what was accepted is popped once,
//! either by the racing consumer or by the drain after the joins. A lost or doubled event,
//! one read before it was written, a slot written while the consumer still reads it (loom's
//! cell checks) or a run cut by another producer's event fails a model.

use loom::sync::Arc;
use loom::thread;

use crate::{Ring, Run};

/// Every event left, in order.
fn drain(ring: &Ring<u32>) -> Vec<u32> {
    let mut consumer = ring.consumer().expect("the one consumer");
    std::iter::from_fn(|| consumer.pop()).collect()
}

/// A ring of two whose slot 0 was taken and freed, so that a run of two wraps across its
/// end.
fn wrapped_ring() -> Arc<Ring<u32>> {
    let ring = Arc::new(Ring::new(2));
    ring.push(0).unwrap();
    assert_eq!(drain(&ring), [0]);
    ring
}

/// Pushes the run `[10, 11]` once: whether it went in (whole) or was refused (whole).
fn push_run_once(ring: &Ring<u32>) -> bool {
    let mut run = Run::<u32, 2>::new();
    run.push(10).unwrap();
    run.push(11).unwrap();
    let pushed = ring.push_run(&mut run).is_ok();
    assert_eq!(run.len(), if pushed { 0 } else { 2 }, "all or nothing");
    pushed
}

/// Checks that `got` holds each accepted event once, the run whole and in order.
fn check(got: &[u32], run_in: bool, single_in: Option<u32>) {
    let mut expected: Vec<u32> = single_in.into_iter().collect();
    if run_in {
        expected.extend([10, 11]);
        let at = got.iter().position(|&e| e == 10).unwrap();
        assert_eq!(
            got.get(at + 1),
            Some(&11),
            "the run whole, in order: {got:?}"
        );
    }
    let mut sorted = got.to_vec();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "each accepted event once: {got:?}");
}

#[test]
fn loom_a_run_and_a_single_event_race_for_a_ring_that_wraps_under_them() {
    loom::model(|| {
        let ring = wrapped_ring();
        let runs = {
            let ring = ring.clone();
            thread::spawn(move || push_run_once(&ring))
        };
        let single_in = ring.push(20).is_ok().then_some(20);
        let run_in = runs.join().unwrap();
        assert!(
            run_in || single_in.is_some(),
            "an empty ring of two refused both"
        );
        check(&drain(&ring), run_in, single_in);
    });
}

#[test]
fn loom_a_run_wraps_across_the_end_while_the_consumer_takes_what_was_there() {
    loom::model(|| {
        let ring = wrapped_ring();
        ring.push(20).unwrap();
        let runs = {
            let ring = ring.clone();
            thread::spawn(move || push_run_once(&ring))
        };
        let mut got: Vec<u32> = {
            let mut consumer = ring.consumer().expect("the one consumer");
            std::iter::from_fn(|| consumer.pop()).take(2).collect()
        };
        let run_in = runs.join().unwrap();
        got.extend(drain(&ring));
        assert_eq!(got.first(), Some(&20), "what was there first: {got:?}");
        check(&got, run_in, Some(20));
    });
}

#[test]
fn loom_two_producers_race_a_consumer_in_a_ring_of_one() {
    loom::model(|| {
        let ring = Arc::new(Ring::new(1));
        let producers: Vec<_> = [1, 2]
            .into_iter()
            .map(|event| {
                let ring = ring.clone();
                thread::spawn(move || ring.push(event).is_ok().then_some(event))
            })
            .collect();
        let mut got: Vec<u32> = {
            let mut consumer = ring.consumer().expect("the one consumer");
            consumer.pop().into_iter().collect()
        };
        let accepted: Vec<u32> = producers
            .into_iter()
            .filter_map(|p| p.join().unwrap())
            .collect();
        got.extend(drain(&ring));
        assert!(!accepted.is_empty(), "the first push finds the slot free");
        got.sort_unstable();
        assert_eq!(got, accepted, "each accepted event once");
        assert!(ring.is_empty());
    });
}
