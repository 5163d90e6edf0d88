//! Stats read while processors run, and the watermark alarms.

#![cfg(not(loom))]

mod common;

use common::*;

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
    // The spilled callback and the messages (not probes, nor the registration).
    assert!(s.processed > sent.load(Ordering::Relaxed));
    assert_eq!(s.enqueued, s.processed + s.depth as u64);
    assert!(s.flushes > 0);
    let published = |s: &ProcessorSnapshot| s.batch_size.count > 0 && s.time_in_queue_ns.count > 0;
    let s = stats_once_published(&d, published);
    assert!(s.batch_size.count > 0);
    let sampled = s.time_in_queue_ns.count > 0 && s.time_in_queue_ns.max > 0;
    assert!(sampled, "probes sampled the time in queue: {s:?}");
}

#[test]
fn watermark_alarms_are_edge_triggered_and_clear_at_the_low_mark() {
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(256).watermarks(16, 128));
    let h = recorder_on(&d).0;
    for _round in 0..2 {
        // Depth is sampled every 64 events: with 200 queued a sample sees at least 135.
        let gate = block_processor(&d.handle(), h);
        dispatch_all(&d, h, 0..200);
        gate.wait();
        d.synchronize(h).unwrap();
    }
    let s = &d.stats()[0];
    let why = "raised once per fill, cleared in between";
    assert_eq!(s.high_watermark_alarms, 2, "{why}: {s:?}");
    assert!(s.max_depth >= 128);
}

/// `enqueued` never exceeds what callers enqueued, even counting the monitor's probes.
#[test]
fn enqueued_never_exceeds_what_callers_enqueued_with_the_monitor_probing() {
    const CAPACITY: usize = 65_536;
    let d = one_queue_probed(PoolConfig::new(1).capacity(CAPACITY));
    let h = recorder_on(&d).0;
    let processor = h.processor();
    // Everything enqueued: the registration, the stall, the events and each `synchronize`.
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
    // Until a probe has been handled (synchronizing in a loop keeps the processor awake,
    // which a tick of the monitor finds).
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
