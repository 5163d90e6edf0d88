//! Driven processors ([`PoolConfig::driven`](crate::PoolConfig::driven)): an application
//! thread whose event finds the processor parked runs the processor's turn itself, instead
//! of waking the processor's thread.
//!
//! # Protocol
//!
//! The processor's state (its [`Runner`](super::Runner): clients, flush list, timers) is
//! the processor thread's, except while the thread is parked: then it lies in the
//! `parked` slot of [`ProcessorShared`], behind a mutex.
//!
//! Processor thread, going to sleep (`Runner::rest`):
//!
//! 1. put its state in the slot;
//! 2. sleep by the wake protocol (`wake.rs`): announce `SLEEPING`, re-check, park;
//! 3. take its state back (waiting, on the mutex, for a driver that holds it).
//!
//! Producer on an application thread, whose gate entry read `SLEEPING` (it would unpark the
//! thread): `try_lock` the slot; if it holds the state, run turns while events are queued,
//! at most `max_batch` events, on the calling thread, playing the processor
//! (`current.rs`); unpark the thread only if the turns leave it something to do: events
//! still queued, retries (an outbox, a flush again), a timer due before the thread's park
//! ends, or a stop. If the slot is locked or empty, unpark, as without driving.
//!
//! # Why nothing is lost or run twice
//!
//! * One turn at a time: the state is in exactly one place, the thread's stack or the slot,
//!   and a driver uses it only under the slot's lock.
//! * No event is left unseen. A driver's turns pop until the queue is empty or its budget is
//!   spent; it then unparks the thread if the queue is not empty. A producer whose entry
//!   comes while a driver holds the slot fails its `try_lock` and unparks the thread, which
//!   takes its state back once the driver is done and turns. A producer whose entry comes
//!   before the thread's `SLEEPING` is counted by the wake protocol as without driving.
//! * The thread's park ends in time: a driver that leaves a timer due earlier than the
//!   thread's park would end (`parked_until`), or retries, unparks it.
//! * The count of events popped moves on in the state, wherever it is turned; the thread's
//!   sleep compares the count it had before its park (never ahead of the true one), so at
//!   worst it parks briefly and looks again (`wake.rs`).
//!
//! A push a driven turn makes to its own processor (a client dispatching to a client of
//! the same processor) wakes nothing: the driver turns again while events are queued.
//!
//! A driver is never a processor thread (nor a thread playing one): a processor's
//! dispatches go through its outbox and never run another processor's turn, so no turn
//! nests in another and no processor waits for another. Nor is it the monitor, whose
//! watchdog a client stuck in a driven turn would stall (`never_drive`).
//!
//! Model-checked with `loom` (`loom/drive.rs`).

use std::any::Any;
use std::cell::Cell;

use super::current::current_processor;
use super::parked::Parked;
use super::shared::ProcessorShared;
use crate::sync::thread;

#[cfg(not(loom))]
std::thread_local! {
    /// The processor this thread drives now (its `ProcessorShared`), null if none, dangling
    /// on a thread that never drives.
    static DRIVING: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
}

#[cfg(loom)]
loom::thread_local! {
    static DRIVING: Cell<*const ()> = Cell::new(std::ptr::null());
}

/// Marks the calling thread as one that never drives (the monitor: a client stuck in a
/// turn it drove would stall the watchdog that reports it).
pub(crate) fn never_drive() {
    DRIVING.with(|d| d.set(std::ptr::dangling()));
}

/// This thread driving the processor at `me` until dropped, an unwind included: a mark
/// left behind would make this thread's later pushes to it wake nothing.
struct Driving;

impl Driving {
    fn start(me: *const ()) -> Self {
        DRIVING.with(|d| d.set(me));
        Self
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.with(|d| d.set(std::ptr::null()));
    }
}

impl<M> ProcessorShared<M> {
    /// Wakes the processor after a push that read `SLEEPING`: on an application thread of
    /// a driven pool, by running its turn if its thread is parked; otherwise (or if the
    /// turn leaves it work) by unparking its thread.
    pub(super) fn wake(&self) {
        if !self.config.driven {
            return self.unpark();
        }
        let me = std::ptr::from_ref(self).cast::<()>();
        let driving = DRIVING.with(Cell::get);
        if driving == me {
            // Its own push, from a turn this thread drives: the driver turns again.
            return;
        }
        let may_drive = driving.is_null() && current_processor().is_none();
        if may_drive && !thread::panicking() {
            let Ok(mut slot) = self.parked.try_lock() else {
                return self.unpark();
            };
            if let Some(state) = slot.as_mut() {
                let _driving = Driving::start(me);
                if !state.drive() {
                    return;
                }
            }
        }
        self.unpark();
    }

    /// Processor thread, going to sleep: puts its state where a driver finds it.
    pub(crate) fn lend(&self, state: Box<dyn Parked>) {
        let mut slot = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert!(slot.is_none(), "{}: state lent twice", self.id);
        *slot = Some(state);
    }

    /// Processor thread, awake: takes its state back, once no driver holds it.
    pub(crate) fn take_back(&self) -> Box<dyn Any> {
        let mut slot = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        slot.take()
            .expect("a processor's state is lent before it is taken back")
            .into_any()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    use crate::{ClientType, Dispatcher, PoolConfig, WaitStrategy};

    /// The monitor's thread (and any marked so) wakes a parked driven processor: its
    /// callbacks run on the processor's thread, never on the marked one.
    #[test]
    fn a_thread_that_never_drives_wakes_the_processor_instead() {
        let queues = PoolConfig::new(1).wait(WaitStrategy::Park).driven(true);
        let builder = Dispatcher::<u64>::builder().pool(ClientType::Queue, queues);
        let dispatcher = builder.build().unwrap();
        let handle = dispatcher.handle();
        let marked = thread::spawn(move || {
            super::never_drive();
            let queue = handle.processors(ClientType::Queue)[0];
            let me = thread::current().id();
            (0..10)
                .filter(|_| {
                    thread::sleep(Duration::from_millis(5));
                    let (tx, rx) = mpsc::channel();
                    let report = move || tx.send(thread::current().id()).unwrap();
                    handle.execute(queue, report).unwrap();
                    rx.recv().unwrap() == me
                })
                .count()
        });
        assert_eq!(marked.join().unwrap(), 0, "turns driven by a marked thread");
    }
}
