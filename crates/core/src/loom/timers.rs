//! Timers (`timers.rs`): a cancel racing the fire of the same timer, a timer scheduled to
//! a sleeping processor, and the reclaim of a cancelled timer.

use loom::sync::Arc;
use loom::thread;

use zerodispatch_callback::Callback;

use super::mock::{spawn_processor, with_one_timer};
use crate::timers::TimerSlots;

/// The timer protocol, on the real `TimerSlots`: a cancel racing the fire of the same
/// timer, while the processor frees the slot and a scheduler takes it again. Exactly one
/// of the cancel and the fire wins, and the cancel of the old token never reaches the
/// slot's next timer.
#[test]
fn loom_a_timer_is_cancelled_or_run_never_both_and_a_stale_token_cancels_nothing() {
    loom::model(|| {
        let slots = Arc::new(TimerSlots::new(1));
        let (slot, first) = slots.take(10).expect("one free slot");
        let canceller = {
            let slots = slots.clone();
            thread::spawn(move || slots.cancel(slot, first))
        };
        let ran = slots.fire(slot);
        slots.release(slot);
        let (again, second) = slots.take(20).expect("the slot came back");
        let cancelled = canceller.join().unwrap();
        assert_eq!(again, slot);
        assert!(second > first, "a new generation");
        assert!(
            ran != cancelled,
            "ran {ran}, cancelled {cancelled}: exactly one wins"
        );
        // The next timer of the slot is pending: the old token did not touch it.
        assert!(slots.cancel(slot, second));
        assert!(!slots.fire(slot));
    });
}

/// A timer scheduled to a processor about to sleep (`push_timer`, through its gate onto its
/// arrivals) wakes it, by the wake protocol of any event: no lost wake-up, so a timer is
/// never left waiting for an unrelated event.
#[test]
fn loom_a_timer_scheduled_to_a_sleeping_processor_wakes_it() {
    loom::model(|| {
        let shared = with_one_timer();
        let processor = spawn_processor(&shared, |shared| {
            loop {
                if let Some((slot, callback)) = shared.timers.arrivals.pop() {
                    drop(callback);
                    return slot;
                }
                // Nothing popped yet: the gate's count is what the sleep weighs.
                shared.sleep(0, thread::park, true);
            }
        });
        let (slot, _) = shared.timers.take(0).expect("one free timer");
        assert!(shared.push_timer(slot, Callback::new(|| ())).is_ok());
        assert_eq!(processor.join().unwrap(), slot);
    });
}

/// A cancel racing a sleeping processor that holds the timer (or is about to take its
/// arrival): the reclaim, pushed under the gate like the arrival, wakes it, and the slot is
/// freed at the processor's next turn, by one of the two paths, never both and never lost.
#[test]
fn loom_a_cancelled_timer_is_reclaimed_by_a_woken_processor() {
    loom::model(|| {
        let shared = with_one_timer();
        let processor = spawn_processor(&shared, |shared| {
            let mut popped = 0_usize;
            let mut held = None;
            loop {
                while let Some((slot, callback)) = shared.timers.arrivals.pop() {
                    popped += 1;
                    let (generation, cancelled) = shared.timers.current(slot);
                    if cancelled {
                        shared.timers.release(slot);
                        drop(callback);
                        return "cancelled before taken";
                    }
                    held = Some((slot, generation, callback));
                }
                while let Some((slot, generation)) = shared.timers.next_cancelled() {
                    popped += 1;
                    if held
                        .as_ref()
                        .is_some_and(|(s, g, _)| (*s, *g) == (slot, generation))
                    {
                        shared.timers.release(slot);
                        drop(held.take());
                        return "reclaimed";
                    }
                }
                shared.sleep(popped, thread::park, true);
            }
        });
        let (slot, generation) = shared.timers.take(0).expect("one free timer");
        assert!(shared.push_timer(slot, Callback::new(|| ())).is_ok());
        assert!(
            shared.timers.cancel(slot, generation),
            "not run: it is not due"
        );
        shared.push_reclaim(slot, generation);
        let _how = processor.join().unwrap();
        assert_eq!(shared.timers.in_use(), 0, "the slot is free");
    });
}
