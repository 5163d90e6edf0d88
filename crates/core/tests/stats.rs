//! Stats read while processors run, and the watermark alarms.

// Under `--cfg loom` the protocols' primitives are loom's, usable only inside a model:
// only the loom models (`--lib`) run then.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use zerodispatch_core::*;

#[test]
fn stats_count_while_the_processor_runs() {
    let d = one_queue_probed(PoolConfig::new(1));
    let (h, _log) = recorder_on(&d);
    let big = [1_u8; 64];
    let spilled = Callback::spill(move || assert_eq!(big[0], 1));
    d.dispatch(h, Event::Callback(spilled)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let producer = {
        let (handle, stop, sent) = (d.handle(), stop.clone(), sent.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                handle.dispatch(h, Event::Message(1)).unwrap();
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    thread::sleep(Duration::from_millis(100));
    let running = d.stats()[0].clone();
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    d.synchronize(h).unwrap();
    let s = &d.stats()[0];
    assert!(running.processed > 0, "stats are readable while running");
    assert_eq!(s.spilled, 1);
    // The spilled callback and the messages. (Not the monitor's probes; the registration
    // is not queued; the synchronize marker is counted once its handler has returned,
    // which may be after `synchronize` returned.)
    assert!(s.processed > sent.load(Ordering::Relaxed));
    assert_eq!(s.enqueued, s.processed + s.depth as u64);
    assert!(s.flushes > 0);
    let s = stats_once_published(&d, |s| {
        s.batch_size.count > 0 && s.time_in_queue_ns.count > 0
    });
    assert!(s.batch_size.count > 0);
    let sampled = s.time_in_queue_ns.count > 0 && s.time_in_queue_ns.max > 0;
    assert!(sampled, "probes sampled the time in queue: {s:?}");
}

#[test]
fn watermark_alarms_are_edge_triggered_and_clear_at_the_low_mark() {
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(256).watermarks(16, 128));
    let h = recorder_on(&d).0;
    for _round in 0..2 {
        // Depth is sampled after the first event of a drain and every 64 events after it: with
        // 200 queued, a sample within the drain sees at least 135, above the high mark.
        let gate = block_processor(&d.handle(), h);
        for i in 0..200 {
            d.dispatch(h, Event::Message(i)).unwrap();
        }
        gate.wait();
        d.synchronize(h).unwrap();
    }
    let s = &d.stats()[0];
    let alarms = s.high_watermark_alarms;
    assert_eq!(alarms, 2, "raised once per fill, cleared in between: {s:?}");
    assert!(s.max_depth >= 128);
}

/// `enqueued` never exceeds what was ever enqueued, while the queue drains (a stalled
/// processor, a queue of 65,536 filled by `try_dispatch`, then `stats()` in a loop) and
/// after. On the code before the fix the monitor's probes, which no caller enqueues, were
/// counted in `processed` and so in `enqueued` (`processed + depth`): the figure ran ahead
/// of everything enqueued by the probes handled (1 in the review's run).
#[test]
fn enqueued_never_exceeds_what_callers_enqueued_with_the_monitor_probing() {
    const CAPACITY: usize = 65_536;
    let d = one_queue_probed(PoolConfig::new(1).capacity(CAPACITY));
    let h = recorder_on(&d).0;
    let processor = h.processor();
    // Everything this test enqueues: the registration (a queued item before the fix), the
    // stall, the events accepted, and each `synchronize`.
    let mut enqueued = 1_u64;
    let stall = block_processor(&d.handle(), h);
    enqueued += 1;
    for i in 0..CAPACITY as u64 {
        if d.try_dispatch(h, Event::Message(i)).is_ok() {
            enqueued += 1;
        }
    }
    stall.wait();
    let deadline = Instant::now() + Duration::from_secs(30);
    let check = |s: &ProcessorSnapshot, enqueued: u64| {
        let (figure, processed, depth) = (s.enqueued, s.processed, s.depth);
        assert!(
            figure <= enqueued,
            "enqueued {figure} > {enqueued} ever enqueued (processed {processed}, depth {depth})"
        );
    };
    // While it drains.
    loop {
        let s = d.stats().remove(0);
        check(&s, enqueued);
        if s.depth == 0 || Instant::now() > deadline {
            break;
        }
    }
    // Until a probe has been handled (the monitor probes an awake processor every
    // millisecond; each `synchronize` wakes it).
    loop {
        d.synchronize(processor).unwrap();
        enqueued += 1;
        let s = d.stats().remove(0);
        check(&s, enqueued);
        if s.time_in_queue_ns.count > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no probe was handled in 30 s");
    }
}
