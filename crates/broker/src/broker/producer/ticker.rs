//! A producer's ticker: a timer on its session's processor (the core's timers) that sends
//! the session a `Tick` (timer aggregation, confirm timeouts) every interval, how often,
//! and how it stops at the producer's close. No thread of its own, nothing allocated per
//! tick.
//!
//! Each tick runs on the session's processor, sends `Tick` to the session through that
//! processor's own queue (or outbox: it never waits) and schedules the next tick. The
//! ticker's slots are bounded: each session processor runs at most
//! [`BrokerConfig::timed_producers`](crate::BrokerConfig::timed_producers) tickers, one
//! per live [`Tick`] (counted when it is made, uncounted when it is dropped: after its last
//! tick, or at shutdown with its timer), which is also the processor's number of timers.
//! A tick frees its timer before it runs (the core frees a timer's slot before its
//! callback), so the next tick always finds one; scheduling never waits and is refused
//! only at shutdown. At the producer's close the pending tick is cancelled, and the core
//! reclaims it at once: the count comes back then, not an interval later.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zerodispatch_core::{
    Callback, ClientHandle, DispatchError, DispatcherHandle, Event, TimerToken,
};

use crate::error::BrokerError;
use crate::message::BrokerMsg;
use crate::session::{FlushStrategy, ProducerConfig};

/// A running ticker, kept by its producer to stop it.
#[derive(Debug)]
pub(crate) struct Ticker {
    tick: Arc<Tick>,
}

/// What every tick of one producer shares.
#[derive(Debug)]
struct Tick {
    dispatcher: DispatcherHandle<BrokerMsg>,
    session: ClientHandle,
    every: Duration,
    /// Set at the producer's close: the next tick does nothing and schedules no other.
    stopped: AtomicBool,
    /// The pending tick, to cancel at the close.
    pending: Mutex<Option<TimerToken>>,
    /// The tickers of the session's processor, this one counted.
    running: Arc<AtomicUsize>,
}

impl Drop for Tick {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Starts ticking `session` every `every`, counted in `running` (the tickers of its
/// processor) against `limit`.
pub(super) fn start_ticker(
    dispatcher: DispatcherHandle<BrokerMsg>,
    session: ClientHandle,
    every: Duration,
    (running, limit): (Arc<AtomicUsize>, usize),
) -> Result<Ticker, BrokerError> {
    if running.fetch_add(1, Ordering::AcqRel) >= limit {
        running.fetch_sub(1, Ordering::AcqRel);
        return Err(BrokerError::TooManyTimedProducers {
            processor: session.processor(),
            limit,
        });
    }
    let tick = Arc::new(Tick {
        dispatcher,
        session,
        every,
        stopped: AtomicBool::new(false),
        pending: Mutex::new(None),
        running,
    });
    // An interval too long for the clock: the first tick would never come.
    let Some(first) = tick.dispatcher.now().checked_add(every) else {
        return Ok(Ticker { tick });
    };
    match schedule(&tick, first) {
        Ok(()) => Ok(Ticker { tick }),
        // The processor's timers are the tickers' alone, and this one is counted: only a
        // shutdown refuses it.
        Err(DispatchError::TimersFull(_)) => Err(BrokerError::TooManyTimedProducers {
            processor: session.processor(),
            limit,
        }),
        Err(_) => Err(BrokerError::ShutDown),
    }
}

/// Schedules the tick due `at`.
fn schedule(tick: &Arc<Tick>, at: Instant) -> Result<(), DispatchError<Callback>> {
    let next = Arc::clone(tick);
    let token = tick.dispatcher.schedule(
        tick.session.processor(),
        at,
        // 24 bytes of captures: inline.
        Callback::new(move || fire(next, at)),
    )?;
    *tick.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(token);
    Ok(())
}

/// One tick, on the session's processor: `Tick` to the session, then the next one,
/// free-running (due every `every` from the first, whatever the load; a tick that fell
/// behind by more than an interval skips to the next one ahead).
fn fire(tick: Arc<Tick>, at: Instant) {
    if tick.stopped.load(Ordering::Acquire) {
        return;
    }
    // The outbox full: this tick is skipped, the next one comes. Shutting down: no more.
    if let Err(DispatchError::ShutDown(_)) = tick
        .dispatcher
        .dispatch(tick.session, Event::Message(BrokerMsg::Tick))
    {
        return;
    }
    let now = tick.dispatcher.now();
    let next = match at.checked_add(tick.every) {
        Some(next) if next > now => Some(next),
        _ => now.checked_add(tick.every),
    };
    let Some(next) = next else {
        return;
    };
    if let Err(e) = schedule(&tick, next) {
        // Shutdown; never `TimersFull`: this ticker's count holds a timer for it.
        debug_assert!(
            !matches!(e, DispatchError::TimersFull(_)),
            "a ticker found no timer"
        );
        tracing::debug!(session = %tick.session, "producer ticker ends: {e}");
    }
}

/// How often producer `config`'s session is ticked, if at all: the timer's interval, and a
/// quarter of the confirm timeout (so that a timeout is reported at most a quarter late),
/// whichever is shorter.
pub(super) fn tick_every(config: ProducerConfig) -> Option<Duration> {
    let timer = match config.flush {
        FlushStrategy::Timer(d) => Some(d),
        FlushStrategy::Dynamic => None,
    };
    let expiry = config
        .confirm_timeout
        .map(|t| (t / 4).max(Duration::from_micros(100)));
    match (timer, expiry) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Stops a ticker at its producer's close: its pending tick is cancelled (and reclaimed by
/// the processor at once), or, if it is running, schedules no other. Never waits.
pub(super) fn stop_ticker(ticker: Ticker) {
    let tick = &ticker.tick;
    tick.stopped.store(true, Ordering::Release);
    let pending = tick
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(token) = pending {
        tick.dispatcher.cancel(token);
    }
}
