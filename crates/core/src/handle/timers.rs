//! Timers on processors (the protocol in `timers.rs` at the crate's root), and the clock
//! they are measured on.
use std::time::{Duration, Instant};

use zerodispatch_callback::{Callback, IntoCallback};

use crate::error::DispatchError;
use crate::ids::ProcessorId;
use crate::timers::TimerToken;

use super::DispatcherHandle;

impl<M: Send + 'static> DispatcherHandle<M> {
    /// Runs `work` on `processor` at `deadline` (on the dispatcher's clock,
    /// [`now`](Self::now)), as a dispatcher callback: after the processor has flushed its
    /// clients, in deadline order among its timers (ties in the order they reached it). A
    /// deadline already past runs at the processor's next loop turn. Never allocates: the
    /// processor's timers are preallocated (`PoolConfig::timers`); the protocol is in
    /// `timers.rs`.
    ///
    /// `work` is a closure or a [`Callback`], as [`execute`](Self::execute) takes it
    /// ([`IntoCallback`]).
    ///
    /// Never waits, on any thread (a processor's, an async task's): the callback goes to the
    /// processor beside its queue, on arrivals as large as its timers, which a free timer
    /// guarantees have room. A timer runs once; one that repeats schedules its next turn
    /// from its callback (the processor frees a timer before it runs it, so the next turn
    /// finds one). Timers not due at shutdown are dropped unrun.
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// # use std::time::Duration;
    /// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let queue = d.processors(ClientType::Queue)[0];
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let tick = tx.clone();
    /// d.schedule(queue, d.now() + Duration::from_millis(5), move || tick.send("late").unwrap())?;
    /// let early = d.schedule(queue, d.now() + Duration::from_millis(1), move || tx.send("early").unwrap())?;
    /// assert_eq!(rx.recv()?, "early");
    /// assert!(!d.cancel(early), "it has run");
    /// assert_eq!(rx.recv()?, "late");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The work comes back, as a [`Callback`], in [`DispatchError::TimersFull`] when every timer of the
    /// processor is in use, [`DispatchError::ShutDown`] once shutdown has started, and
    /// [`DispatchError::NoSuchProcessor`] for a processor this dispatcher does not have.
    pub fn schedule<W: IntoCallback>(
        &self,
        processor: impl Into<ProcessorId>,
        deadline: Instant,
        work: W,
    ) -> Result<TimerToken, DispatchError<Callback>> {
        let () = W::CHECK;
        self.schedule_callback(processor.into(), deadline, work.into_callback())
    }

    /// [`schedule`](Self::schedule), its work a callback already.
    fn schedule_callback(
        &self,
        processor: ProcessorId,
        deadline: Instant,
        callback: Callback,
    ) -> Result<TimerToken, DispatchError<Callback>> {
        let Some(p) = self.processor(processor) else {
            return Err(DispatchError::NoSuchProcessor(callback));
        };
        let Some((slot, generation)) = p.timers.take(self.shared.clock.ns_of(deadline)) else {
            return Err(DispatchError::TimersFull(callback));
        };
        match p.push_timer(slot, callback) {
            Ok(()) => Ok(TimerToken {
                dispatcher: self.shared.id,
                processor,
                slot,
                generation,
            }),
            Err(callback) => {
                p.timers.release(slot);
                Err(DispatchError::ShutDown(callback))
            }
        }
    }

    /// [`schedule`](Self::schedule) at `delay` from [`now`](Self::now).
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule).
    /// A delay too long for the clock (`Duration::MAX`) is a timer that never comes due
    /// while the dispatcher runs.
    pub fn schedule_in<W: IntoCallback>(
        &self,
        processor: impl Into<ProcessorId>,
        delay: Duration,
        work: W,
    ) -> Result<TimerToken, DispatchError<Callback>> {
        let () = W::CHECK;
        let deadline = self.shared.clock.after(delay);
        self.schedule_callback(processor.into(), deadline, work.into_callback())
    }

    /// Cancels a timer: `true` if it had not started, and then it never runs (its callback
    /// is dropped, and its slot freed, on its processor at its next turn); `false` if it has
    /// run, is running, was cancelled already, was dropped at shutdown, or the token is
    /// another dispatcher's. From any thread, never waits: a compare-and-swap, then the
    /// processor is told through its gate (`timers.rs`).
    pub fn cancel(&self, token: TimerToken) -> bool {
        if token.dispatcher != self.shared.id {
            return false;
        }
        let Some(p) = self.processor(token.processor) else {
            return false;
        };
        let cancelled = p.timers.cancel(token.slot, token.generation);
        if cancelled {
            p.push_reclaim(token.slot, token.generation);
        }
        cancelled
    }

    /// Now, on the clock timers are measured on: the monotonic clock, or the test's clock
    /// of a [`testing`](crate::testing) dispatcher, which moves only when advanced.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.shared.clock.now()
    }
}
