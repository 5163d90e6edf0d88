//! The flush contract: one flush after a drained batch, before a dispatcher callback, every
//! `max_batch` events, and never for a client that closed its flush gate.

// Under `--cfg loom` the protocols' primitives are loom's, usable only inside a model:
// only the loom models (`--lib`) run then.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use zerodispatch_core::*;

#[test]
fn events_reach_the_client_in_order_and_one_flush_follows_a_drained_batch() {
    let d = one_queue(PoolConfig::new(1));
    let (h, log) = recorder_on(&d);
    let gate = block_processor(&d.handle(), h);
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..5 {
        d.dispatch(h, Event::Message(i)).unwrap();
        d.dispatch(h, Event::Callback(counting_callback(&ran)))
            .unwrap();
    }
    gate.wait();
    d.synchronize(h).unwrap();
    let log = log.lock().unwrap().clone();
    let mut expected = Vec::new();
    for i in 0..5 {
        expected.extend([Seen::Message(i), Seen::Callback]);
    }
    expected.push(Seen::Flush); // one flush for the whole drained batch (the dedup flag)
    assert_eq!(log, expected);
    assert_eq!(ran.load(Ordering::SeqCst), 5);
}

#[test]
fn a_dispatcher_callback_flushes_first_and_bypasses_the_client() {
    let d = one_queue(PoolConfig::new(1));
    let (h, log) = recorder_on(&d);
    let gate = block_processor(&d.handle(), h);
    d.dispatch(h, Event::Message(1)).unwrap();
    let l = log.clone();
    d.execute(
        h.processor(),
        Callback::new(move || l.lock().unwrap().push(Seen::Message(99))),
    )
    .unwrap();
    d.dispatch(h, Event::Message(2)).unwrap();
    gate.wait();
    d.synchronize(h).unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            Seen::Message(1),
            Seen::Flush,
            Seen::Message(99),
            Seen::Message(2),
            Seen::Flush
        ]
    );
}

#[test]
fn a_queue_that_never_drains_still_flushes_every_max_batch_events() {
    let d = one_queue(PoolConfig::new(1).max_batch(4));
    let (h, log) = recorder_on(&d);
    let gate = block_processor(&d.handle(), h);
    for i in 0..10 {
        d.dispatch(h, Event::Message(i)).unwrap();
    }
    gate.wait();
    d.synchronize(h).unwrap();
    let log = log.lock().unwrap().clone();
    // The barrier callback counts as the first event of the first batch.
    let flushes_at: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == Seen::Flush)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        log.iter().filter(|s| matches!(s, Seen::Message(_))).count(),
        10
    );
    assert!(
        flushes_at.len() >= 3,
        "a flush at least every 4 events: {log:?}"
    );
    let stats = stats_once_published(&d, |s| s.batch_size.count > 0);
    assert!(stats.batch_size.count > 0);
    assert!(
        stats.batch_size.max <= 4,
        "no batch above max_batch: {:?}",
        stats.batch_size
    );
}

#[test]
fn the_flush_gate_keeps_a_client_off_the_flush_list() {
    struct Gated(Arc<AtomicUsize>);
    impl Client<u64> for Gated {
        fn on_event(&mut self, event: ClientEvent<u64>, ctx: &mut Context<u64>) {
            if let ClientEvent::Message(m) = event {
                ctx.set_flush_enabled(m != 0);
            }
        }
        fn flush(&mut self, _ctx: &mut Context<u64>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = one_queue(PoolConfig::new(1));
    let flushes = Arc::new(AtomicUsize::new(0));
    let h = on_queue(&d, Gated(flushes.clone()));
    d.dispatch(h, Event::Message(0)).unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(flushes.load(Ordering::SeqCst), 0);
    d.dispatch(h, Event::Message(1)).unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(flushes.load(Ordering::SeqCst), 1);
}
