//! Waiting for room on a full queue: a producer blocked in `dispatch` (`room.rs`) or a
//! future of the async door (`waiters.rs`) is woken or its retry succeeds, and a shutdown
//! that closes the gate wakes it with its event handed back.

use loom::thread;

use super::mock::{Looks, Unpark, full_one_slot, message, run_processor, spawn_processor, start};
use crate::error::DispatchError;
use crate::event::Item;
use crate::processor::{Door, ProcessorShared};
use crate::room::Wait;

/// Polls the async door's real steps for `item` until it is done, parking between polls
/// as a task waits for its waker: a lost wake-up leaves this thread parked forever, which
/// loom reports as a deadlock.
fn poll_until_done(
    shared: &ProcessorShared<u64>,
    item: Item<u64>,
) -> Result<(), DispatchError<Item<u64>>> {
    let waker = Unpark::current();
    let mut registration = None;
    let mut item = item;
    loop {
        match shared.poll_push(item, &waker, &mut registration, |i| shared.try_push(i)) {
            Door::Done(done) => return done,
            Door::Wait(back) => {
                item = back;
                thread::park();
            }
        }
    }
}

/// A future finds the one-slot queue full and registers its waker while the processor
/// drains it. Either its retry succeeds or the processor sees the registration and wakes
/// it: the future always gets its event in, and the processor handles both events.
#[test]
fn loom_a_future_waiting_for_room_is_woken_or_its_retry_succeeds() {
    loom::model(|| {
        let shared = full_one_slot();
        let processor = start(&shared, Some(2));
        assert!(poll_until_done(&shared, message(1)).is_ok());
        assert_eq!(processor.join().unwrap(), 2);
    });
}

/// Shutdown closing the gate of a full queue (its processor stalled) wakes a producer that
/// waits for room by `push`, which then gets its event back: none waits forever.
fn shutdown_wakes(push: Push) {
    loom::model(move || {
        let shared = full_one_slot();
        let closing = {
            let shared = shared.clone();
            thread::spawn(move || shared.close())
        };
        assert!(matches!(
            push(&shared, message(1)),
            Err(DispatchError::ShutDown(_))
        ));
        closing.join().unwrap();
    });
}

/// A way to wait for room: the async door's, or a blocking dispatch's.
type Push = fn(&ProcessorShared<u64>, Item<u64>) -> Result<(), DispatchError<Item<u64>>>;

/// [`shutdown_wakes`] a future waiting for room.
#[test]
fn loom_shutdown_wakes_a_future_waiting_for_room() {
    shutdown_wakes(poll_until_done);
}

/// A blocking dispatch into a full one-slot queue: the producer registers its thread's
/// waker, retries through the gate, and parks (untimed under loom) while the processor
/// drains and looks at its waiters within its run. Either the retry succeeds or the
/// processor wakes the producer: a lost wake-up would leave the producer parked forever,
/// which loom reports as a deadlock.
#[test]
fn loom_a_producer_blocked_on_a_full_queue_is_woken_or_its_retry_succeeds() {
    loom::model(|| {
        let shared = full_one_slot();
        let processor =
            spawn_processor(&shared, |me| run_processor(me, Some(3), Looks::WithinRuns));
        // On a thread of its own: a late wake (of a registration taken just before its
        // withdrawal) may unpark it after it is done, which under loom would end the
        // main thread's join.
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || {
                // Two in a row: the second registers again after the first's wake.
                assert!(shared.push(message(1), Wait::Forever).is_ok());
                assert!(shared.push(message(2), Wait::Forever).is_ok());
            })
        };
        producer.join().unwrap();
        assert_eq!(processor.join().unwrap(), 3);
    });
}

/// [`shutdown_wakes`] a producer blocked in `dispatch`.
#[test]
fn loom_shutdown_wakes_a_producer_blocked_on_a_full_queue() {
    shutdown_wakes(|shared, item| shared.push(item, Wait::Forever));
}
