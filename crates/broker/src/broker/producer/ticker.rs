//! A producer's ticker: the thread that sends its session a `Tick` (timer aggregation,
//! confirm timeouts), how often, and how it stops at the producer's close.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use zerodispatch_core::{ClientHandle, DispatcherHandle, Event};

use crate::message::BrokerMsg;
use crate::session::{FlushStrategy, ProducerConfig};

/// Starts a thread that sends `Tick` to `session` every `every`, until `stop`.
pub(super) fn start_ticker(
    dispatcher: DispatcherHandle<BrokerMsg>,
    session: ClientHandle,
    every: Duration,
) -> (Arc<AtomicBool>, JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let ticker = thread::Builder::new()
        .name("zd-producer-ticker".into())
        .spawn(move || {
            let mut next = Instant::now() + every;
            while !flag.load(Ordering::Acquire) {
                // Free-running: ticks fall every `every` whatever the load, as the old
                // clients' aggregation timer did.
                let left = next.saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    thread::park_timeout(left);
                    continue;
                }
                next += every;
                if dispatcher
                    .dispatch(session, Event::Message(BrokerMsg::Tick))
                    .is_err()
                {
                    break;
                }
            }
        })
        .expect("cannot spawn a producer's ticker thread");
    (stop, ticker)
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

/// Stops a ticker at its producer's close: on a processor thread (`on_processor`), without
/// joining it.
pub(super) fn stop_ticker((stop, ticker): (Arc<AtomicBool>, JoinHandle<()>), on_processor: bool) {
    stop.store(true, Ordering::Release);
    ticker.thread().unpark();
    // On a processor thread, not joined: the ticker may be waiting to dispatch to
    // this very thread's full queue. It sees `stop` and ends by itself.
    if !on_processor {
        let _ = ticker.join();
    }
}
