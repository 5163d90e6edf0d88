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
//! Where threads would hang, the double fails instead, naming why: a client that asks to be
//! flushed again at every flush makes [`run_until_idle`](TestDispatcher::run_until_idle)
//! and [`shutdown`](TestDispatcher::shutdown) panic with the client's type after
//! [`MAX_TURNS`] rounds.
//!
//! The [`Simulator`] drives the same processors from a seed: which processor turns next
//! and how far, when the clock moves, and (through its [`SimRng`]) what the test does in
//! between; [`explore`] runs a scenario over many seeds and reports a failing one with the
//! steps that led to it, replayable exactly.
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
use std::time::Duration;

use crate::handle::DispatcherHandle;

mod machine;
mod simulator;
pub(crate) mod steps;

pub use machine::MAX_TURNS;
pub(crate) use machine::Stepped;
pub use simulator::{Exploration, Failure, SimRng, Simulator, explore, explore_main};
use steps::Steps;

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
    /// If the processors are still busy after [`MAX_TURNS`] rounds, naming what keeps them
    /// busy (a client that asks to be flushed again at every flush, by its type, or events
    /// bounced between clients without end).
    pub fn run_until_idle(&self) -> u64 {
        self.handle.run_stepped()
    }

    /// Moves the dispatcher's clock on by `by`, deadline by deadline: at each timer's
    /// deadline on the way (on any processor) the processors run until idle, so timers
    /// run in deadline order across processors, as on threads; then at `now + by`. Returns
    /// the work done, as [`run_until_idle`](Self::run_until_idle).
    ///
    /// # Panics
    ///
    /// As [`run_until_idle`](Self::run_until_idle).
    pub fn advance(&self, by: Duration) -> u64 {
        self.handle.advance_stepped(by)
    }

    /// Shuts down as a running dispatcher does: pool by pool, every gate of the pool
    /// closes, then the processors run until their queues and outboxes are drained, their
    /// clients flushed, and drop their timers not due and their clients (handing on what
    /// those drops dispatch). Idempotent; also run on drop.
    ///
    /// # Panics
    ///
    /// Where a threaded shutdown would never end: if a stopping pool's processors are
    /// still busy after [`MAX_TURNS`] rounds, naming what keeps them (a client that asks
    /// to be flushed again at every flush, by its type; events kept in an outbox).
    pub fn shutdown(&mut self) {
        if let Err(stuck) = self.handle.shutdown_stepped() {
            panic!("zerodispatch::testing: {stuck}");
        }
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
        // A test already failing is not failed twice (a panic in a drop while unwinding
        // aborts): its processors are left as they are.
        if !std::thread::panicking() {
            self.shutdown();
        }
    }
}

impl<M: Send + 'static> fmt::Debug for TestDispatcher<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestDispatcher")
            .field("handle", &self.handle)
            .finish()
    }
}

impl<M: Send + 'static> DispatcherHandle<M> {
    /// A stepped dispatcher's processors; `None` on threads.
    pub(crate) fn steps(&self) -> Option<&dyn Steps> {
        self.shared.runners.get().map(|s| &**s)
    }

    /// The stepping of [`TestDispatcher::run_until_idle`], for it and for `call` on a
    /// stepped dispatcher.
    #[track_caller]
    pub(crate) fn run_stepped(&self) -> u64 {
        match self.steps().map(Steps::run_until_idle) {
            None => 0,
            Some(Ok(done)) => done,
            Some(Err(busy)) => panic!("zerodispatch::testing: {busy}"),
        }
    }

    /// Pushes `item` (a `call`'s task) to `processor` of this stepped dispatcher, which
    /// never waits: runs the processors first (room for it, and everything before it
    /// handled), and again each time the push finds the queue full (another thread filled
    /// it meanwhile). Refused only by a closed gate.
    pub(crate) fn push_stepped(
        &self,
        processor: &crate::processor::ProcessorShared<M>,
        item: crate::event::Item<M>,
    ) -> Result<(), crate::error::DispatchError<crate::event::Item<M>>> {
        let mut item = item;
        loop {
            self.run_stepped();
            match processor.try_push(item) {
                Err(crate::error::DispatchError::Full(back)) => item = back,
                other => return other,
            }
        }
    }

    /// The clock move of [`TestDispatcher::advance`].
    #[track_caller]
    pub(crate) fn advance_stepped(&self, by: Duration) -> u64 {
        let clock = &self.shared.clock;
        let to = clock
            .now_ns()
            .saturating_add(u64::try_from(by.as_nanos()).unwrap_or(u64::MAX));
        let mut done = self.run_stepped();
        while let Some(next) = self.steps().and_then(|s| s.next_deadline())
            && next <= to
        {
            clock.advance_to(next);
            done += self.run_stepped();
        }
        clock.advance_to(to);
        done + self.run_stepped()
    }

    /// Marks the dispatcher as shutting down and starts the stepped shutdown (its first
    /// pool closed): what a threaded shutdown does before it joins.
    pub(crate) fn begin_shutdown_stepped(&self) {
        self.shared
            .shutting_down
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(steps) = self.steps() {
            steps.begin_shutdown();
        }
    }

    /// The shutdown of [`TestDispatcher::shutdown`]: `Err` with what keeps it from ending.
    pub(crate) fn shutdown_stepped(&self) -> Result<(), String> {
        self.begin_shutdown_stepped();
        self.steps().map_or(Ok(()), Steps::shut_down)
    }
}
