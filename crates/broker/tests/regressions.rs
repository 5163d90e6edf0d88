//! Regression tests for defects found by an outside audit (issue 8, section 2), one test per
//! defect, named after what it guards. Each failed on the code before its fix. A test that
//! used to hang runs under [`within`], a watchdog that fails it instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_broker::*;

/// Runs `f` on a thread of its own and returns its result; fails the test if it has not
/// finished after `limit` (the thread is left behind: the test binary exits without it).
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            worker.join().expect("the worker finished");
            v
        }
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it ends"),
        },
        Err(RecvTimeoutError::Timeout) => panic!("{what}: still running after {limit:?} (a hang)"),
    }
}

fn start(queues: Vec<QueueConfig>, session_processors: usize) -> Broker {
    Broker::start(BrokerConfig {
        queues,
        session_processors,
        ..BrokerConfig::default()
    })
    .expect("valid config")
}

fn priority() -> QueueConfig {
    QueueConfig::new(QueueMode::Priority)
}

fn consume(broker: &Broker, queue: u32) -> Consumer {
    broker
        .open_consumer(
            QueueId(queue),
            AppId(0),
            ConsumerOptions::default(),
            |_: &[Delivery]| {},
        )
        .unwrap()
}

fn payload(handle: u64) -> Payload {
    Payload { handle, len: 8 }
}

/// Defect 8: `held` was `held - released` from two unordered loads, and wrapped (a panic in
/// debug builds) when a release fell between them.
#[test]
fn queue_stats_held_never_wraps_while_messages_flow() {
    const CAPACITY: usize = 64;
    within(Duration::from_secs(30), "held under load", || {
        let broker = Arc::new(start(
            vec![QueueConfig {
                capacity: CAPACITY,
                ..priority()
            }],
            2,
        ));
        let _c = consume(&broker, 0);
        let p = broker.open_producer(CAPACITY, |_: &[Ack]| {}).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (broker, stop) = (broker.clone(), stop.clone());
                thread::spawn(move || {
                    let mut reads = 0_u64;
                    while !stop.load(Ordering::Relaxed) {
                        let held = broker.queue_stats()[0].held;
                        assert!(
                            held <= CAPACITY as u64,
                            "held {held} above the capacity {CAPACITY}"
                        );
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let start = Instant::now();
        let mut sent = 0_u64;
        while start.elapsed() < Duration::from_millis(1500) {
            p.send(QueueId(0), payload(sent)).unwrap();
            sent += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        broker.quiesce().unwrap();
        assert!(reads > 0 && sent > 0);
        assert_eq!(broker.queue_stats()[0].held, 0);
    });
}
