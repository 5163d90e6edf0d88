//! A deterministic dispatcher for unit tests of a [`Client`](crate::Client): the same
//! processors, client contract and code as a running dispatcher, with no threads, stepped
//! by the test.
//!
//! [`DispatcherBuilder::build_stepped`](crate::DispatcherBuilder::build_stepped) builds a
//! [`TestDispatcher`]: every processor of the configuration, its queue, outbox, client
//! table, flush list and timers, but no processor thread and no monitor. The test
//! dispatches and registers as usual (through the `TestDispatcher`, which derefs to its
//! [`DispatcherHandle`], or through handles it gives out), then runs the processors on its
//! own thread: [`run_until_idle`](TestDispatcher::run_until_idle) turns each processor's
//! loop (retry the outbox, drain the queue, run the timers due, flush) until none has
//! anything left to do; [`advance`](TestDispatcher::advance) moves the dispatcher's clock,
//! which only moves then, and runs the timers that came due. What the clients see is what
//! they see on threads: events in queue order, the flush contract (a flush when a queue
//! drains, every `max_batch` events, before a dispatcher callback or a timer, before an
//! unregistration), dispatcher callbacks, timers in deadline order, [`Context`](crate::Context) and its
//! dispatcher handle, outboxes between processors. Only time and interleaving are the
//! test's.
//!
//! Nothing waits: a dispatch to a full queue hands its event back (`Full`) instead of
//! waiting for a processor that only the test can run; [`call`](DispatcherHandle::call)
//! and [`synchronize`](DispatcherHandle::synchronize) run the processors until idle and
//! answer. The dispatcher is meant for one thread: a dispatch from another thread is
//! accepted, but runs only at the test's next step.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use zerodispatch_core::testing::TestDispatcher;
//! use zerodispatch_core::*;
//!
//! /// Buffers confirms and sends them at its flush.
//! struct Queue { pending: u64, sent: Arc<Mutex<Vec<u64>>> }
//! impl Client<u64> for Queue {
//!     fn on_message(&mut self, n: u64, _ctx: &mut Context<u64>) { self.pending += n }
//!     fn flush(&mut self, _ctx: &mut Context<u64>) {
//!         if self.pending > 0 { self.sent.lock().unwrap().push(std::mem::take(&mut self.pending)) }
//!     }
//! }
//!
//! let test: TestDispatcher<u64> = Dispatcher::<u64>::builder()
//!     .pool(ClientType::Queue, PoolConfig::new(1))
//!     .build_stepped()?;
//! let sent = Arc::new(Mutex::new(Vec::new()));
//! let queue = test.register(ClientType::Queue, Queue { pending: 0, sent: sent.clone() }, Placement::LeastLoaded)?;
//! for n in [1, 2, 3] {
//!     test.dispatch(queue, Event::Message(n))?;
//! }
//! assert!(sent.lock().unwrap().is_empty(), "nothing runs until the test steps");
//! assert_eq!(test.run_until_idle(), 3);
//! assert_eq!(*sent.lock().unwrap(), [6], "one drain, one flush of the three");
//!
//! // A timer on the queue's processor: due only when the test moves the clock.
//! let later = sent.clone();
//! test.schedule_in(queue, Duration::from_millis(10), Callback::new(move || later.lock().unwrap().push(0)))?;
//! test.run_until_idle();
//! assert_eq!(*sent.lock().unwrap(), [6]);
//! test.advance(Duration::from_millis(10));
//! assert_eq!(*sent.lock().unwrap(), [6, 0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::ops::Deref;
use std::sync::Mutex;
use std::time::Duration;

use crate::client::ClientType;
use crate::error::DispatchError;
use crate::event::Item;
use crate::handle::DispatcherHandle;
use crate::processor::{ProcessorShared, Runner};

/// How many turns of every processor [`TestDispatcher::run_until_idle`] makes at most
/// before it decides a client keeps it busy for ever (one asking to be flushed again at
/// every flush, or two bouncing an event between them).
pub const MAX_TURNS: usize = 100_000;

/// A dispatcher with no threads, stepped by the test (the module docs). Derefs to its
/// [`DispatcherHandle`] for every call of a dispatcher. Dropping it shuts it down.
#[must_use = "dropping the TestDispatcher shuts it down"]
pub struct TestDispatcher<M: Send + 'static> {
    handle: DispatcherHandle<M>,
}

impl<M: Send + 'static> TestDispatcher<M> {
    pub(crate) fn new(handle: DispatcherHandle<M>) -> Self {
        Self { handle }
    }

    /// A handle, for clients and for code under test that takes one.
    #[must_use]
    pub fn handle(&self) -> DispatcherHandle<M> {
        self.handle.clone()
    }

    /// Runs every processor's loop on this thread until none has anything to do: no event
    /// queued, none kept in an outbox, no timer due, no client asking to be flushed again.
    /// Returns the work done: events and dispatcher callbacks handled, timers taken in, run
    /// or reclaimed after a cancel, outboxed events handed on.
    ///
    /// # Panics
    ///
    /// If the processors are still busy after [`MAX_TURNS`] turns (a client that asks to
    /// be flushed again at every flush, or events bounced between clients without end).
    pub fn run_until_idle(&self) -> u64 {
        self.handle.run_stepped()
    }

    /// Moves the dispatcher's clock on by `by` and runs until idle: the timers that came
    /// due run, in deadline order. Returns the work done, as
    /// [`run_until_idle`](Self::run_until_idle).
    ///
    /// # Panics
    ///
    /// As [`run_until_idle`](Self::run_until_idle).
    pub fn advance(&self, by: Duration) -> u64 {
        let moved = self.handle.shared.clock.advance(by);
        debug_assert!(moved, "a stepped dispatcher's clock is manual");
        self.run_until_idle()
    }

    /// Shuts down as a running dispatcher does: every gate closes, then the processors run
    /// until their queues and outboxes are drained, their clients flushed, and drop their
    /// timers not due and their clients. Idempotent; also run on drop.
    pub fn shutdown(&mut self) {
        self.handle.shutdown_stepped();
    }
}

impl<M: Send + 'static> Deref for TestDispatcher<M> {
    type Target = DispatcherHandle<M>;

    fn deref(&self) -> &DispatcherHandle<M> {
        &self.handle
    }
}

impl<M: Send + 'static> Drop for TestDispatcher<M> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl<M: Send + 'static> fmt::Debug for TestDispatcher<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestDispatcher")
            .field("handle", &self.handle)
            .finish()
    }
}

/// A stepped dispatcher's processors, behind a trait object so that the state every
/// handle shares need not name their message type's bounds.
pub(crate) trait Steps: Send + Sync {
    /// [`TestDispatcher::run_until_idle`]: 0 after the shutdown.
    fn run_until_idle(&self) -> u64;
    /// [`TestDispatcher::shutdown`], pool by pool in `order`: idempotent.
    fn shut_down(&self, order: [ClientType; 3]);
}

/// The runners of a stepped dispatcher, taken at its shutdown (they hold handles to the
/// state that holds them: taking them ends the cycle).
pub(crate) struct Stepped<M: Send + 'static> {
    runners: Mutex<Option<Vec<Runner<M>>>>,
}

impl<M: Send + 'static> Stepped<M> {
    pub(crate) fn new(runners: Vec<Runner<M>>) -> Self {
        Self {
            runners: Mutex::new(Some(runners)),
        }
    }
}

impl<M: Send + 'static> Steps for Stepped<M> {
    fn run_until_idle(&self) -> u64 {
        let mut runners = self.runners.lock().unwrap_or_else(|e| e.into_inner());
        let Some(runners) = runners.as_mut() else {
            return 0;
        };
        let mut done = 0;
        for _ in 0..MAX_TURNS {
            let turn: u64 = runners.iter_mut().map(Runner::step).sum();
            if turn == 0 {
                return done;
            }
            done += turn;
        }
        panic!(
            "zerodispatch::testing: the processors are still busy after {MAX_TURNS} turns (a \
             client asking to be flushed again at every flush, or events bounced for ever?)"
        );
    }

    fn shut_down(&self, order: [ClientType; 3]) {
        let mut taken = self.runners.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mut running) = taken.take() else {
            return;
        };
        drop(taken);
        // As a running dispatcher's shutdown: pool by pool, every gate of the pool closed
        // and its processors told to stop, then run (with the pools still running) until
        // they may exit, and finished.
        for client_type in order {
            let (stopping, rest): (Vec<_>, Vec<_>) = running
                .into_iter()
                .partition(|r| r.shared().id.client_type == client_type);
            running = rest;
            let mut stopping = stopping;
            for runner in &stopping {
                runner.shared().close();
            }
            for runner in &stopping {
                runner.shared().request_stop();
            }
            for _ in 0..MAX_TURNS {
                if stopping.iter().all(Runner::may_exit_stepped) {
                    break;
                }
                for runner in stopping.iter_mut().chain(running.iter_mut()) {
                    runner.step();
                }
            }
            for runner in stopping {
                runner.finish_stepped();
            }
        }
    }
}

impl<M: Send + 'static> DispatcherHandle<M> {
    /// The stepping of [`TestDispatcher::run_until_idle`], for it and for `call` on a
    /// stepped dispatcher.
    pub(crate) fn run_stepped(&self) -> u64 {
        self.shared.runners.get().map_or(0, |r| r.run_until_idle())
    }

    /// Pushes `item` (a `call`'s task) to `processor` of this stepped dispatcher, which
    /// never waits: runs the processors first (room for it, and everything before it
    /// handled), and again each time the push finds the queue full (another thread filled
    /// it meanwhile). Refused only by a closed gate.
    pub(crate) fn push_stepped(
        &self,
        processor: &ProcessorShared<M>,
        item: Item<M>,
    ) -> Result<(), DispatchError<Item<M>>> {
        let mut item = item;
        loop {
            self.run_stepped();
            match processor.try_push(item) {
                Err(DispatchError::Full(back)) => item = back,
                other => return other,
            }
        }
    }

    /// The shutdown of [`TestDispatcher::shutdown`].
    pub(crate) fn shutdown_stepped(&self) {
        self.shared
            .shutting_down
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(runners) = self.shared.runners.get() {
            runners.shut_down(self.shared.global.shutdown_order);
        }
    }
}
