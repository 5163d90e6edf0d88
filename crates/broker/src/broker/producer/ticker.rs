//! A producer's ticker: a timer on its session's processor (the core's timers) that sends
//! the session a `Tick` (timer aggregation, confirm timeouts) every interval, how often,
//! and how it stops at the producer's close. No thread of its own, nothing allocated per
//! tick.
//!
//! Each tick runs on the session's processor, sends `Tick` to the session through that
//! processor's own queue (or outbox: it never waits) and schedules the next tick. The
//! tickers are bounded: each session processor runs at most
//! [`BrokerConfig::timed_producers`](crate::BrokerConfig::timed_producers), which is also
//! its number of timers. A ticker's place is a [`TickerSlot`]: reserved when its producer
//! is placed (so that two producers opened at once cannot both take a processor's last
//! place), then held by the live [`Tick`], and given back when that is dropped (after its
//! last tick, or at shutdown with its timer). A tick frees its timer before it runs (the
//! core frees a timer's slot before its callback), so the next tick always finds one;
//! scheduling never waits and is refused only at shutdown.
//!
//! At the producer's close the pending tick is cancelled; the core frees its timer at the
//! processor's next turn, then drops the callback, and with it the `Tick`: the slot is
//! given back once the timer is free. The close waits for that (see [`stop_ticker`]), so
//! that a producer opened after it returns finds the place free.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use zerodispatch_core::{
    Callback, ClientHandle, ClientType, DispatchError, DispatcherHandle, Event, ProcessorId,
    TimerToken,
};

use crate::error::BrokerError;
use crate::protocol::BrokerMsg;
use crate::session::{FlushStrategy, ProducerConfig};

/// A ticker's place on a session processor: counted in the processor's tickers from its
/// reservation ([`reserve`]) until it is dropped, which says so to whoever waits for it.
#[derive(Debug)]
pub(crate) struct TickerSlot {
    /// The index of the session processor, in its pool.
    index: u16,
    /// The processor's tickers, this one counted.
    running: Arc<AtomicUsize>,
    /// Set once this slot is given back.
    freed: Arc<Freed>,
}

impl TickerSlot {
    /// Where the producer's session is to be registered.
    pub(super) fn index(&self) -> u16 {
        self.index
    }
}

impl Drop for TickerSlot {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
        self.freed.set();
    }
}

/// Whether a ticker's slot is given back: a flag to wait on.
#[derive(Debug, Default)]
struct Freed {
    done: Mutex<bool>,
    cond: Condvar,
}

impl Freed {
    fn set(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cond.notify_all();
    }

    fn is_set(&self) -> bool {
        *self.done.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = self.cond.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Reserves a ticker's place on the session processor (by index in `processors`, each
/// one's tickers running) with the fewest tickers, below `limit`: counted at once, so
/// that a producer placed meanwhile sees it taken.
///
/// # Errors
///
/// `TooManyTimedProducers`: every processor runs `limit` tickers.
pub(super) fn reserve(
    processors: &[Arc<AtomicUsize>],
    limit: usize,
) -> Result<TickerSlot, BrokerError> {
    loop {
        let (index, running, seen) = processors
            .iter()
            .enumerate()
            .map(|(index, running)| (index, running, running.load(Ordering::Acquire)))
            .min_by_key(|&(_, _, seen)| seen)
            .expect("a broker has a session processor (the dispatcher refuses a pool of none)");
        let index = u16::try_from(index).expect("a pool's processors are indexed by u16");
        if seen >= limit {
            return Err(BrokerError::TooManyTimedProducers {
                processor: ProcessorId {
                    client_type: ClientType::Session,
                    index,
                },
                limit,
            });
        }
        // Taken only at the count it was chosen by; another reservation in between, and the
        // choice is made again.
        if running
            .compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Ok(TickerSlot {
                index,
                running: running.clone(),
                freed: Arc::default(),
            });
        }
    }
}

/// A running ticker, kept by its producer to stop it.
#[derive(Debug)]
pub(crate) struct Ticker {
    tick: Arc<Tick>,
    /// Set once the `Tick`, and so its slot, is dropped.
    freed: Arc<Freed>,
}

/// What every tick of one producer shares.
#[derive(Debug)]
struct Tick {
    dispatcher: DispatcherHandle<BrokerMsg>,
    session: ClientHandle,
    every: Duration,
    /// Set at the producer's close, under `pending`'s lock: the next tick does nothing,
    /// and a tick scheduled after it is cancelled at once.
    stopped: AtomicBool,
    /// The pending tick, to cancel at the close.
    pending: Mutex<Option<TimerToken>>,
    /// The ticker's place, given back when the last tick's callback is dropped.
    _slot: TickerSlot,
}

/// Starts ticking `session` (registered on `slot`'s processor) every `every`.
///
/// # Errors
///
/// `ShutDown`; `TooManyTimedProducers` if the processor's timers are all taken (by
/// cancelled ticks its processor has not reclaimed yet: a close on a processor thread
/// does not wait for that).
pub(super) fn start_ticker(
    dispatcher: DispatcherHandle<BrokerMsg>,
    session: ClientHandle,
    every: Duration,
    (slot, limit): (TickerSlot, usize),
) -> Result<Ticker, BrokerError> {
    let freed = slot.freed.clone();
    let tick = Arc::new(Tick {
        dispatcher,
        session,
        every,
        stopped: AtomicBool::new(false),
        pending: Mutex::new(None),
        _slot: slot,
    });
    // An interval too long for the clock: the first tick would never come.
    let Some(first) = tick.dispatcher.now().checked_add(every) else {
        return Ok(Ticker { tick, freed });
    };
    match schedule(&tick, first) {
        Ok(()) => Ok(Ticker { tick, freed }),
        Err(DispatchError::TimersFull(_)) => Err(BrokerError::TooManyTimedProducers {
            processor: session.processor(),
            limit,
        }),
        Err(_) => Err(BrokerError::ShutDown),
    }
}

/// Schedules the tick due `at`; cancels it at once if the ticker was stopped meanwhile.
fn schedule(tick: &Arc<Tick>, at: Instant) -> Result<(), DispatchError<Callback>> {
    let next = Arc::clone(tick);
    let token = tick.dispatcher.schedule(
        tick.session.processor(),
        at,
        // 24 bytes of captures: inline.
        Callback::new(move || fire(next, at)),
    )?;
    let mut pending = tick.pending.lock().unwrap_or_else(|e| e.into_inner());
    if tick.stopped.load(Ordering::Acquire) {
        // `stop_ticker` has taken what was pending before this one: nobody else cancels it.
        drop(pending);
        tick.dispatcher.cancel(token);
    } else {
        *pending = Some(token);
    }
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
        // Shutdown; never `TimersFull`: this ticker's slot holds a timer for it.
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

/// Stops a ticker at its producer's close: its pending tick is cancelled, or, if one is
/// running, it schedules no other. With `wait`, returns once the ticker's slot (and its
/// timer) is free: at the session processor's next turn, which reclaims the cancelled
/// timer. Without (on a processor thread, where that turn may be this very one), the slot
/// is given back at that turn. On a stepped broker (`stepped`), whose processors turn only
/// on this thread, waiting runs them until idle instead.
///
/// # Panics
///
/// On a stepped broker, if the slot is still held once the processors are idle: where
/// threads would wait forever, it fails, naming why.
pub(super) fn stop_ticker(ticker: Ticker, wait: bool, stepped: bool) {
    let Ticker { tick, freed } = ticker;
    let pending = {
        let mut pending = tick.pending.lock().unwrap_or_else(|e| e.into_inner());
        tick.stopped.store(true, Ordering::Release);
        pending.take()
    };
    if let Some(token) = pending {
        tick.dispatcher.cancel(token);
    }
    let processor = tick.session.processor();
    let dispatcher = (wait && stepped).then(|| tick.dispatcher.clone());
    drop(tick);
    if let Some(dispatcher) = dispatcher {
        // Refused at shutdown only, where the slot is given back as the timers are dropped.
        if super::super::stepped::run_until_idle(&dispatcher, processor).is_ok() {
            assert!(
                freed.is_set(),
                "zerodispatch_broker: a closed producer's ticker still holds its place once the processors are idle"
            );
        }
    } else if wait {
        freed.wait();
    }
}
