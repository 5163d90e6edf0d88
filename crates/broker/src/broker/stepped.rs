//! A broker on a stepped dispatcher (the core's `testing` module): [`Broker::start_stepped`],
//! the [`BrokerSimulator`] that drives it from a seed, and what the broker's waiting calls
//! do there.
//!
//! A stepped dispatcher has no processor threads: its processors run only when the thread
//! that drives them turns them. So no call of the broker may wait for a processor there:
//! the thread that would wait is the one that must turn it. Each call that waits on
//! threads either hands its work back, as it does on a processor thread, or runs the
//! processors until idle itself (the core's `synchronize` does that on a stepped
//! dispatcher) and then answers; [`Broker::start_stepped`] lists which. Nothing of this is
//! on the threaded path: the checks sit where a threaded call would wait, or on an error
//! that never comes back there.

use std::fmt;
use std::time::{Duration, Instant};

use zerodispatch_core::testing::{SimRng, Simulator, TestDispatcher};
use zerodispatch_core::{
    ClientHandle, DispatchError, Dispatcher, DispatcherHandle, Event, ProcessorId, SyncError,
};

use crate::error::BrokerError;
use crate::protocol::BrokerMsg;

use super::{Broker, BrokerConfig};

// Named in the docs only.
#[cfg(doc)]
use super::{Consumer, Producer};
#[cfg(doc)]
use crate::error::SendError;

/// What owns the broker's dispatcher: its threads, or its stepped processors.
pub(super) enum Owner {
    /// [`Broker::start`]: a processor thread each.
    Threads(Dispatcher<BrokerMsg>),
    /// [`Broker::start_stepped`]: no threads.
    Stepped(TestDispatcher<BrokerMsg>),
}

impl Owner {
    /// A handle of the dispatcher.
    pub(super) fn handle(&self) -> DispatcherHandle<BrokerMsg> {
        match self {
            Owner::Threads(d) => d.handle(),
            Owner::Stepped(t) => t.handle(),
        }
    }

    /// Shuts the dispatcher down: drains and stops the threads, or runs the stepped
    /// processors to their end.
    pub(super) fn shutdown(&mut self) {
        match self {
            Owner::Threads(d) => d.shutdown(),
            Owner::Stepped(t) => t.shutdown(),
        }
    }
}

/// `dispatcher.dispatch(to, event)`, for a call an application thread makes and that
/// waits for room on threads: on a stepped broker (`stepped`), off its processors, a full
/// queue runs the processors until idle and the event is dispatched again, into the room
/// that made. On threads it is the plain dispatch (a full queue comes back from it only on
/// a processor thread, whose outbox is full, and that is handed back as ever).
#[inline]
pub(crate) fn dispatch_waiting(
    dispatcher: &DispatcherHandle<BrokerMsg>,
    stepped: bool,
    to: ClientHandle,
    event: Event<BrokerMsg>,
) -> Result<(), DispatchError<Event<BrokerMsg>>> {
    match dispatcher.dispatch(to, event) {
        Err(DispatchError::Full(event)) if stepped && dispatcher.current_processor().is_none() => {
            // Refused only at shutdown, which the dispatch below reports too.
            let _ = run_until_idle(dispatcher, to.processor());
            dispatcher.dispatch(to, event)
        }
        sent => sent,
    }
}

/// On a stepped broker, runs every processor until none has anything left to do (the
/// core's `synchronize` of `processor` does that there). For the calls that would wait for
/// a processor on threads.
pub(crate) fn run_until_idle(
    dispatcher: &DispatcherHandle<BrokerMsg>,
    processor: ProcessorId,
) -> Result<(), SyncError> {
    dispatcher.synchronize(processor)
}

impl Broker {
    /// Starts the broker, as [`start`](Self::start) does, on a stepped dispatcher: the same
    /// queues, sessions, cluster and processors, with no thread. Its processors run only
    /// when a test turns them, through [`simulator`](Self::simulator) (one `u64` seed draws
    /// every turn and every move of the clock), or when one of the calls below runs them
    /// until idle. The broker's clock is the dispatcher's manual one: confirm timeouts and
    /// timer flushes come due only as the simulator moves it. For tests, from one thread.
    ///
    /// The calls that wait for a processor on threads cannot wait here, since the waiting
    /// thread is the one that turns the processors:
    ///
    /// * a publish ([`Producer::publish`], `publish_with_id`, `send`, `try_send`) that finds
    ///   the session processor's queue full hands the message back,
    ///   [`SendError::WouldBlock`], as on a processor thread with its outbox full: step,
    ///   and publish it again;
    /// * [`Producer::send`] at the unconfirmed-message cap hands the message back,
    ///   `WouldBlock`, as on a processor thread;
    /// * [`Producer::close`] (and its drop) with a nonzero `wait` runs the processors until
    ///   idle, without moving the clock, instead of waiting up to `wait`: what has no
    ///   outcome then is reported `Closed`. A timed producer's close runs them too, so that
    ///   its ticker's place is free when it returns, as on threads;
    /// * [`quiesce`](Self::quiesce), [`cluster_state`](Self::cluster_state),
    ///   [`stored_window`](Self::stored_window) and [`last_stored`](Self::last_stored) run
    ///   the processors until idle, then answer;
    /// * [`replica_confirm`](Self::replica_confirm) and
    ///   [`replica_receipt`](Self::replica_receipt) without a free credit run the
    ///   processors until idle (which routes everything and gives the credits back);
    /// * the other dispatches of an application's call that wait for room on threads
    ///   ([`confirm`](Self::confirm), [`add_credit`](Self::add_credit),
    ///   [`open_consumer`](Self::open_consumer), [`close_consumer`](Self::close_consumer)
    ///   and a [`Consumer`]'s drop, a producer's close) run the processors until idle when
    ///   the queue is full, and dispatch again;
    /// * [`execute`](Self::execute) to a full queue hands the callback back, `Full`;
    /// * [`shutdown`](Self::shutdown) (and the broker's drop) runs the processors to their
    ///   end; [`BrokerSimulator::shutdown`] does it turn by turn from the seed.
    ///
    /// A call made on a processor (in `on_ack` or `on_delivery`, as the simulator turns it)
    /// is answered as on a processor thread: it never waits, nor runs the processors.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use zerodispatch_broker::*;
    ///
    /// let broker = Broker::start_stepped(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     ..BrokerConfig::default()
    /// })?;
    /// let acks = Arc::new(Mutex::new(Vec::new()));
    /// let sink = acks.clone();
    /// let producer = broker.open_producer(16, move |b: &[Ack]| sink.lock().unwrap().extend_from_slice(b))?;
    /// producer.publish(QueueId(0), Payload { handle: 1, len: 8 })?;
    /// assert!(acks.lock().unwrap().is_empty(), "nothing runs until the test turns it");
    /// broker.quiesce()?; // runs the processors until idle
    /// assert_eq!(acks.lock().unwrap()[0].status, AckStatus::Stored);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_stepped(config: BrokerConfig) -> Result<Self, BrokerError> {
        Self::start_on(config, |builder| {
            builder.build_stepped().map(Owner::Stepped)
        })
    }

    /// Whether this broker was started by [`start_stepped`](Self::start_stepped).
    #[must_use]
    pub fn is_stepped(&self) -> bool {
        self.stepped
    }

    /// The simulator of a stepped broker ([`start_stepped`](Self::start_stepped)), every
    /// turn of its processors and move of its clock drawn from `seed`; `None` for a broker
    /// with threads. Several may be made; each draws from its own seed.
    #[must_use]
    pub fn simulator(&self, seed: u64) -> Option<BrokerSimulator> {
        self.stepped.then(|| BrokerSimulator {
            sim: Simulator::new(self.dispatcher.clone(), seed),
        })
    }

    /// On a stepped broker, runs the processors until idle (see `start_stepped`); nothing
    /// on threads.
    pub(super) fn run_stepped(&self) -> Result<(), BrokerError> {
        if self.stepped {
            run_until_idle(&self.dispatcher, self.cluster.processor()).map_err(super::sync_refused)
        } else {
            Ok(())
        }
    }
}

/// The seeded simulator of a stepped broker ([`Broker::simulator`]): the core's
/// [`Simulator`] of the broker's dispatcher, with the calls a test of the broker needs, and
/// the broker's own messages kept out of the test's reach. Each [`step`](Self::step) turns
/// one processor for a few events, or moves the clock; the test draws its own actions
/// (publish, open, close, confirm, a receipt, a shutdown in mid-stream) from
/// [`rng`](Self::rng), and runs a scenario over many seeds with the core's
/// [`explore`](zerodispatch_core::testing::explore).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use zerodispatch_broker::*;
///
/// let broker = Broker::start_stepped(BrokerConfig {
///     queues: vec![QueueConfig::new(QueueMode::Priority)],
///     ..BrokerConfig::default()
/// })?;
/// let mut sim = broker.simulator(7).expect("a stepped broker");
/// let acks = Arc::new(Mutex::new(Vec::new()));
/// let sink = acks.clone();
/// let producer = broker.open_producer(16, move |b: &[Ack]| sink.lock().unwrap().extend_from_slice(b))?;
/// let mut published = 0;
/// while published < 10 {
///     if sim.rng().one_in(2) {
///         match producer.publish(QueueId(0), Payload { handle: published, len: 8 }) {
///             Ok(_) => published += 1,
///             Err(SendError::WouldBlock(_)) => {} // the session's queue is full: step first
///             Err(e) => return Err(e.into()),
///         }
///     } else {
///         sim.step();
///     }
/// }
/// sim.settle();
/// assert_eq!(acks.lock().unwrap().len(), 10, "one outcome per message");
/// sim.shutdown();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BrokerSimulator {
    sim: Simulator<BrokerMsg>,
}

impl BrokerSimulator {
    /// The seed it draws from.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.sim.seed()
    }

    /// The generator, for the test's own draws between steps.
    pub fn rng(&mut self) -> &mut SimRng {
        self.sim.rng()
    }

    /// Writes `what` (the test's own action) among the steps a failure reports.
    pub fn note(&self, what: impl fmt::Display) {
        self.sim.note(what);
    }

    /// One step drawn from the seed: a turn of one processor (of at most a few, or all, of
    /// its events), or a move of the clock. Returns the work done.
    ///
    /// # Panics
    ///
    /// As the core's `Simulator::step`.
    pub fn step(&mut self) -> u64 {
        self.sim.step()
    }

    /// Steps until the processors are idle (random steps, then rounds of every processor).
    /// Returns the work done.
    ///
    /// # Panics
    ///
    /// If the processors are still busy after the core's `MAX_TURNS` rounds.
    pub fn settle(&mut self) -> u64 {
        self.sim.settle()
    }

    /// Runs every processor until none has anything left to do, in a fixed order. Returns
    /// the work done.
    ///
    /// # Panics
    ///
    /// As [`settle`](Self::settle).
    pub fn run_until_idle(&self) -> u64 {
        self.sim.run_until_idle()
    }

    /// Moves the broker's clock on by `by`, deadline by deadline, the processors run until
    /// idle at each. Returns the work done.
    ///
    /// # Panics
    ///
    /// As [`settle`](Self::settle).
    pub fn advance(&self, by: Duration) -> u64 {
        self.sim.advance(by)
    }

    /// The broker's clock now (it moves only with [`step`](Self::step) and
    /// [`advance`](Self::advance)).
    #[must_use]
    pub fn now(&self) -> Instant {
        self.sim.now()
    }

    /// Shuts the broker's dispatcher down as [`Broker::shutdown`] does, every turn of it
    /// drawn from the seed: queues drain first, then sessions (each producer session
    /// reports what it holds `Closed`), then the cluster. The broker refuses new work from
    /// then on (`ShutDown`); dropping it, or its `shutdown`, afterwards does nothing more.
    ///
    /// # Panics
    ///
    /// Where a threaded shutdown would never end, as the core's `Simulator::shutdown`.
    pub fn shutdown(&mut self) {
        self.sim.shutdown();
    }
}

impl fmt::Debug for BrokerSimulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerSimulator")
            .field("seed", &self.sim.seed())
            .finish_non_exhaustive()
    }
}
