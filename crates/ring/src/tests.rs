//! The ring's contract, small enough for Miri (`cargo +nightly miri test -p zerodispatch-ring`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Full, Ring, Run};

/// An event that counts its drops.
struct Counted(u32, Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
}

fn drain<T>(ring: &Ring<T>) -> Vec<T> {
    let mut consumer = ring.consumer().expect("no other consumer");
    std::iter::from_fn(|| consumer.pop()).collect()
}

fn run_of<const N: usize>(events: impl IntoIterator<Item = u32>) -> Run<u32, N> {
    let mut run = Run::new();
    for event in events {
        run.push(event).expect("the run has room");
    }
    run
}

#[test]
fn events_come_out_in_order_over_many_laps_of_a_ring_whose_capacity_is_not_a_power_of_two() {
    let ring = Ring::new(3);
    let mut consumer = ring.consumer().unwrap();
    let mut next = 0;
    for lap in 0..10_u32 {
        for i in 0..3 {
            assert_eq!(ring.push(lap * 3 + i), Ok(()));
        }
        assert_eq!(ring.push(99), Err(99), "full after 3");
        assert!(ring.is_full());
        assert_eq!(ring.len(), 3);
        while let Some(event) = consumer.pop() {
            assert_eq!(event, next);
            next += 1;
        }
        assert!(ring.is_empty());
    }
    assert_eq!(next, 30);
}

#[test]
fn a_run_goes_in_whole_across_the_end_or_not_at_all() {
    let ring = Ring::new(5);
    let mut consumer = ring.consumer().unwrap();
    // Move the head to index 3, so that a run of 4 wraps.
    for i in 0..3 {
        ring.push(i).unwrap();
        assert_eq!(consumer.pop(), Some(i));
    }
    ring.push(100).unwrap();
    let mut run = run_of::<4>(10..14);
    assert_eq!(ring.push_run(&mut run), Ok(()));
    assert!(run.is_empty(), "the run's events moved into the ring");
    assert_eq!(ring.len(), 5);
    let mut again = run_of::<4>(20..22);
    assert_eq!(ring.push_run(&mut again), Err(Full));
    assert_eq!(again.len(), 2, "a refused run keeps its events");
    assert_eq!(consumer.pop(), Some(100));
    assert_eq!(
        ring.push_run(&mut again),
        Err(Full),
        "one slot free, two asked"
    );
    assert_eq!(consumer.pop(), Some(10));
    assert_eq!(ring.push_run(&mut again), Ok(()));
    drop(consumer);
    assert_eq!(drain(&ring), [11, 12, 13, 20, 21]);
}

#[test]
fn a_run_longer_than_the_ring_is_refused_and_an_empty_one_is_a_no_op() {
    let ring = Ring::new(2);
    let mut run = run_of::<3>(0..3);
    assert_eq!(ring.push_run(&mut run), Err(Full));
    assert_eq!(run.len(), 3);
    assert_eq!(ring.push_run(&mut Run::<u32, 3>::new()), Ok(()));
    assert!(ring.is_empty());
}

#[test]
fn a_full_run_refuses_one_more_event_and_hands_it_back() {
    let mut run = run_of::<2>(0..2);
    assert!(run.is_full());
    assert_eq!(run.push(7), Err(7));
}

#[test]
fn one_consumer_at_a_time_and_the_next_goes_on_where_the_last_stopped() {
    let ring = Ring::new(4);
    for i in 0..4 {
        ring.push(i).unwrap();
    }
    let mut first = ring.consumer().unwrap();
    assert!(ring.consumer().is_none());
    assert_eq!(first.pop(), Some(0));
    drop(first);
    let mut second = ring.consumer().unwrap();
    assert_eq!(second.pop(), Some(1));
    assert_eq!(ring.len(), 2);
}

#[test]
fn events_left_in_the_ring_or_in_a_run_are_dropped_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let ring = Ring::new(4);
    {
        let mut consumer = ring.consumer().unwrap();
        for i in 0..4 {
            assert!(ring.push(Counted(i, drops.clone())).is_ok());
        }
        // Two taken (and dropped by the test), so that what is left wraps after the next.
        assert_eq!(consumer.pop().map(|event| event.0), Some(0));
        assert_eq!(consumer.pop().map(|event| event.0), Some(1));
    }
    let mut run = Run::<Counted, 3>::new();
    for i in 10..12 {
        assert!(run.push(Counted(i, drops.clone())).is_ok());
    }
    assert_eq!(ring.push_run(&mut run), Ok(()));
    assert!(run.push(Counted(20, drops.clone())).is_ok());
    assert_eq!(drops.load(Ordering::Relaxed), 2);
    drop(run);
    assert_eq!(drops.load(Ordering::Relaxed), 3, "the run's one event");
    drop(ring);
    assert_eq!(drops.load(Ordering::Relaxed), 7, "the ring's four");
}

#[test]
fn producers_of_runs_and_of_single_events_race_one_consumer_and_each_keeps_its_order() {
    const PER_PRODUCER: u32 = if cfg!(miri) { 40 } else { 20_000 };
    let ring = Arc::new(Ring::<(u32, u32)>::new(7));
    let producers: Vec<_> = (0..3_u32)
        .map(|producer| {
            let ring = ring.clone();
            std::thread::spawn(move || {
                let mut seq = 0;
                while seq < PER_PRODUCER {
                    if producer == 0 {
                        // Single events.
                        while ring.push((producer, seq)).is_err() {
                            std::thread::yield_now();
                        }
                        seq += 1;
                    } else {
                        // Runs of 3 (producer 1) or 4 (producer 2).
                        let mut run = Run::<(u32, u32), 4>::new();
                        while seq < PER_PRODUCER && run.len() < producer as usize + 2 {
                            run.push((producer, seq)).unwrap();
                            seq += 1;
                        }
                        let len = run.len();
                        while ring.push_run(&mut run).is_err() {
                            assert_eq!(run.len(), len);
                            std::thread::yield_now();
                        }
                    }
                }
            })
        })
        .collect();
    let mut next = [0_u32; 3];
    let mut consumer = ring.consumer().unwrap();
    let mut taken = 0;
    let mut last: Option<(u32, u32)> = None;
    while taken < 3 * PER_PRODUCER {
        let Some((producer, seq)) = consumer.pop() else {
            std::thread::yield_now();
            continue;
        };
        assert_eq!(seq, next[producer as usize], "producer {producer} in order");
        next[producer as usize] += 1;
        // A run's events are consecutive: inside a run, nothing of another producer.
        if let Some((was, was_seq)) = last
            && producer != was
            && was != 0
        {
            let run = was + 2;
            assert!(
                (was_seq + 1) % run == 0 || was_seq + 1 == PER_PRODUCER,
                "producer {was}'s run cut after {was_seq}"
            );
        }
        last = Some((producer, seq));
        taken += 1;
    }
    for producer in producers {
        producer.join().unwrap();
    }
    assert!(consumer.pop().is_none());
    assert_eq!(next, [PER_PRODUCER; 3]);
}
