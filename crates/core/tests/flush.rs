//! The flush contract: after a batch, before a callback, every `max_batch`, never if gated.

#![cfg(not(loom))]

mod common;

use common::*;

#[test]
fn events_reach_the_client_in_order_and_one_flush_follows_a_drained_batch() {
    let (d, h, log) = recorded(PoolConfig::new(1));
    let gate = block_processor(&d.handle(), h);
    let ran = Counter::default();
    for i in 0..5 {
        d.dispatch(h, Event::Message(i)).unwrap();
        d.dispatch(h, Event::Callback(ran.callback())).unwrap();
    }
    gate.wait();
    d.synchronize(h).unwrap();
    let log = log.lock().unwrap().clone();
    let each = (0..5).flat_map(|i| [Seen::Message(i), Seen::Callback]);
    // One flush for the whole drained batch (the dedup flag).
    assert_eq!(log, each.chain([Seen::Flush]).collect::<Vec<_>>());
    assert_eq!(ran.get(), 5);
}

#[test]
fn a_dispatcher_callback_flushes_first_and_bypasses_the_client() {
    let (d, h, log) = recorded(PoolConfig::new(1));
    let gate = block_processor(&d.handle(), h);
    d.dispatch(h, Event::Message(1)).unwrap();
    let l = log.clone();
    let bypass = Callback::new(move || l.lock().unwrap().push(Seen::Message(99)));
    d.execute(h.processor(), bypass).unwrap();
    d.dispatch(h, Event::Message(2)).unwrap();
    gate.wait();
    d.synchronize(h).unwrap();
    use Seen::{Flush, Message};
    let expected = [Message(1), Flush, Message(99), Message(2), Flush];
    assert_eq!(*log.lock().unwrap(), expected);
}

#[test]
fn a_queue_that_never_drains_still_flushes_every_max_batch_events() {
    let (d, h, log) = recorded(PoolConfig::new(1).max_batch(4));
    let gate = block_processor(&d.handle(), h);
    dispatch_all(&d, h, 0..10);
    gate.wait();
    d.synchronize(h).unwrap();
    let log = log.lock().unwrap().clone();
    // The barrier callback counts as the first event of the first batch.
    let flushes = log.iter().filter(|s| **s == Seen::Flush).count();
    let messages = log.iter().filter(|s| matches!(s, Seen::Message(_)));
    assert_eq!(messages.count(), 10);
    assert!(flushes >= 3, "a flush at least every 4 events: {log:?}");
    let batches = stats_once_published(&d, |s| s.batch_size.count > 0).batch_size;
    assert!(batches.count > 0);
    assert!(batches.max <= 4, "no batch above max_batch: {batches:?}");
}

#[test]
fn the_flush_gate_keeps_a_client_off_the_flush_list() {
    struct Gated(Counter);
    impl Client<u64> for Gated {
        fn on_message(&mut self, m: u64, ctx: &mut Context<u64>) {
            ctx.set_flush_enabled(m != 0);
        }
        fn flush(&mut self, _ctx: &mut Context<u64>) {
            self.0.incr();
        }
    }
    let d = one_queue(PoolConfig::new(1));
    let flushes = Counter::default();
    let h = on_queue(&d, Gated(flushes.clone()));
    for (m, flushed) in [(0, 0), (1, 1)] {
        d.dispatch(h, Event::Message(m)).unwrap();
        d.synchronize(h).unwrap();
        assert_eq!(flushes.get(), flushed, "after message {m}");
    }
}
