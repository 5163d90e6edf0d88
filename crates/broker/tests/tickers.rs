//! Producers' tickers run on their session processor's timers: no thread per producer, a
//! bound per processor (a clear error past it), and a place freed when a producer closes.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zerodispatch_broker::*;

mod support;

use support::{Log, len, payload, priority_broker, recording, timer};

/// A broker of one priority queue with `timed_producers` tickers per session processor.
fn broker(timed_producers: usize) -> Broker {
    priority_broker(|c| c.timed_producers = timed_producers)
}

/// A timer producer's configuration, ticking every 2 ms.
fn timed() -> ProducerConfig {
    timer(Duration::from_millis(2))
}

/// A broker of one priority queue on two session processors, one ticker each.
fn two_processors() -> Broker {
    priority_broker(|c| (c.session_processors, c.timed_producers) = (2, 1))
}

/// The threads of this process (Linux: its tasks).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

#[test]
fn two_hundred_timer_producers_start_no_thread_and_all_tick() {
    let broker = broker(256);
    let before = threads();
    let acks: Log<Ack> = Log::default();
    let open = |_| broker.open_producer_with(timed(), recording(&acks));
    let producers: Vec<_> = (0..200).map(open).map(Result::unwrap).collect();
    // A margin for the other tests' processor threads, far below 200 tickers' threads.
    if before > 0 {
        let after = threads();
        let per_ticker = format!("a thread per ticker: {before} threads before, {after} after");
        assert!(after <= before + 32, "{per_ticker}");
    }
    for p in &producers {
        p.send(QueueId(0), payload(0)).unwrap();
    }
    let ticked = || len(&acks) >= 200;
    support::wait_up_to(Duration::from_secs(10), "a ticker never ticked", ticked);
}

#[test]
fn a_processor_full_of_tickers_refuses_the_next_timed_producer_until_one_closes() {
    let broker = broker(2);
    let open = |config| broker.open_producer_with(config, |_: &[Ack]| ());
    // A minute between ticks: the count must come back at the close, not at the next tick.
    let a = open(timer(Duration::from_secs(60))).unwrap();
    let _b = open(timed()).unwrap();
    let refused = open(timed()).unwrap_err();
    let limit = matches!(refused, BrokerError::TooManyTimedProducers { limit: 2, .. });
    assert!(limit, "{refused:?}");
    assert!(refused.to_string().contains("timed_producers"), "{refused}");
    // A producer without a ticker needs no timer.
    open(ProducerConfig::default()).unwrap();
    // Closed, its pending tick is cancelled, and its place free once the close returns.
    drop(a);
    let third = open(timed()).unwrap();
    third.send(QueueId(0), payload(1)).unwrap();
}

#[test]
fn an_interval_too_long_for_the_clock_never_ticks_and_panics_nothing() {
    let broker = broker(2);
    let acks: Log<Ack> = Log::default();
    let p = broker.open_producer_with(timer(Duration::MAX), recording(&acks));
    let p = p.unwrap();
    p.send(QueueId(0), payload(2)).unwrap();
    thread::sleep(Duration::from_millis(30));
    assert_eq!(len(&acks), 0, "no tick came: nothing was sent");
    // The close sends the batch.
    assert!(p.close(Duration::from_secs(5)));
    assert_eq!(len(&acks), 1);
}

#[test]
fn a_timed_producer_goes_to_the_session_processor_with_the_fewest_tickers() {
    let broker = two_processors();
    let open = |config| broker.open_producer_with(config, |_: &[Ack]| ());
    // Placed by client count alone, the second timed one would land beside the first.
    let _timed = open(timed()).unwrap();
    let _plain = open(ProducerConfig::default()).unwrap();
    let _timed_too = open(timed()).unwrap();
    let refused = open(timed()).unwrap_err();
    let limit = matches!(refused, BrokerError::TooManyTimedProducers { limit: 1, .. });
    assert!(limit, "{refused:?}");
}

#[test]
fn a_closed_timed_producer_frees_its_ticker_before_close_returns() {
    // One ticker per processor: each re-open needs the place the close before it gave back.
    let broker = broker(1);
    let mut refused = 0;
    for round in 0..200 {
        // A pending tick cancelled, or one perhaps running as the close comes.
        let interval = [Duration::from_secs(60), Duration::from_micros(200)][round % 2];
        match broker.open_producer_with(timer(interval), |_: &[Ack]| ()) {
            Ok(p) => {
                if round % 3 == 0 {
                    drop(p);
                } else {
                    p.close(Duration::ZERO);
                }
            }
            Err(BrokerError::TooManyTimedProducers { .. }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(refused, 0, "re-opens refused over 200 rounds");
}

#[test]
fn two_timed_producers_opened_at_once_take_the_two_free_places() {
    // Opened at the same instant, the two must land one on each processor.
    let broker = Arc::new(two_processors());
    let mut refused = 0;
    for _ in 0..400 {
        let start = Arc::new(std::sync::Barrier::new(2));
        let openers: Vec<_> = (0..2)
            .map(|_| {
                let (broker, start) = (broker.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    broker.open_producer_with(timed(), |_: &[Ack]| ())
                })
            })
            .collect();
        for opened in openers.into_iter().map(|t| t.join().unwrap()) {
            match opened {
                Ok(p) => drop(p),
                Err(BrokerError::TooManyTimedProducers { .. }) => refused += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }
    let beside = "opens refused beside a free place, over 400 races";
    assert_eq!(refused, 0, "{beside}");
}
