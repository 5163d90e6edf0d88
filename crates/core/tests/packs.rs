//! Packs (`src/pack.rs`): up to 16 batched events in a slot, each still counted as one.

#![cfg(not(loom))]

mod common;

use common::*;

/// Batches of 1 to 40 between single dispatches: each event once, in order, by packs.
#[test]
fn packed_batches_keep_their_order_among_single_dispatches() {
    let (d, h, log) = recorded(PoolConfig::new(1).capacity(256));
    let mut next = 0_u64;
    for len in 1..=40_u64 {
        d.dispatch(h, Event::Message(next)).unwrap();
        next += 1;
        let mut batch = (next..next + len).map(Event::Message);
        assert_eq!(d.dispatch_batch(h, &mut batch).unwrap() as u64, len);
        next += len;
    }
    assert_eq!(handled(&d, h, &log), upto(next));
    let stats = &d.stats()[0];
    assert!(stats.packs >= 40, "{} packs", stats.packs);
    assert!(stats.processed >= next, "{} processed", stats.processed);
}

/// A panic on one event of a pack is counted; the events after it still arrive in order.
#[test]
fn a_panic_inside_a_pack_is_contained_and_the_rest_of_the_pack_is_delivered() {
    let d = one_queue(PoolConfig::new(1));
    let (h, log) = panicking_recorder_on(&d, 5);
    d.dispatch_batch(h, &mut (0..16).map(Event::Message))
        .unwrap();
    assert_eq!(handled(&d, h, &log), upto(16));
    let stats = &d.stats()[0];
    assert_eq!((stats.panics, stats.packs), (1, 1));
}

/// `max_batch` splits a pack at its flush points too.
#[test]
fn a_pack_is_split_at_the_flush_points_of_max_batch() {
    let (d, h, log) = recorded(PoolConfig::new(1).max_batch(5));
    // Held, so that the three batches queue up: 48 events drained without emptying.
    let held = block_processor(&d, h);
    thread::scope(|s| {
        s.spawn(|| {
            for b in 0..3_u64 {
                let mut batch = (b * 16..b * 16 + 16).map(Event::Message);
                d.dispatch_batch(h, &mut batch).unwrap();
            }
        });
        while d.stats()[0].depth < 3 {
            thread::sleep(Duration::from_millis(1));
        }
        held.wait();
    });
    d.synchronize(h.processor()).unwrap();
    let log = log.lock().unwrap().clone();
    let mut run = 0;
    for seen in &log {
        match seen {
            Seen::Message(_) => run += 1,
            Seen::Flush => run = 0,
            Seen::Callback => {}
        }
        let why = "more than max_batch events between flushes";
        assert!(run <= 5, "{why}: {log:?}");
    }
    let messages = log.iter().filter(|s| matches!(s, Seen::Message(_)));
    assert_eq!(messages.count(), 48);
    assert!(d.stats()[0].packs >= 3);
}

/// Other types' callbacks, spilled callbacks and a stale key in packs: each counted once.
#[test]
fn a_packs_events_are_counted_one_by_one_wrong_type_spilled_and_stale() {
    let (d, h, log) = recorded(PoolConfig::new(1));
    let h = h.erase();
    let ran = Counter::default();
    let wrong_type = |_: &mut Sink, _: &mut _| unreachable!("not run on a client of another type");
    let mut events = (0..12_u64).map(|i| match i % 3 {
        0 => Event::from(Event::to_client(wrong_type)),
        1 => Event::Callback(Callback::spill(ran.adder())),
        _ => Event::Message(i),
    });
    assert_eq!(d.dispatch_batch(h, &mut events).unwrap(), 12);
    d.synchronize(h.processor()).unwrap();
    let s = d.stats()[0].clone();
    assert_eq!((s.wrong_client_type, s.spilled, ran.get()), (4, 4, 4));
    assert_eq!(messages(&log), vec![2, 5, 8, 11]);

    // A stale key: every event of the pack is stale; a spilled one among them counted too.
    d.unregister(h).unwrap();
    let never = Event::Callback(Callback::spill(|| unreachable!("stale: not run")));
    let mut stale = std::iter::once(never).chain((1..16).map(Event::Message));
    d.dispatch_batch(h, &mut stale).unwrap();
    d.synchronize(h.processor()).unwrap();
    let stats = d.stats()[0].clone();
    assert_eq!((stats.stale, stats.spilled, stats.packs), (16, 5, 2));
}

/// Four threads batching into 32 slots and two packs: each event once, each thread in order.
#[test]
fn threads_sharing_a_short_pool_of_packs_lose_nothing_and_keep_their_order() {
    const THREADS: u64 = 4;
    const EVENTS: u64 = 20_000;
    let (d, h, log) = recorded(PoolConfig::new(1).capacity(32));
    thread::scope(|s| {
        for t in 0..THREADS {
            let d = &d;
            s.spawn(move || {
                let (mut seq, mut len) = (0, t);
                while seq < EVENTS {
                    len = len % 37 + 1;
                    let end = (seq + len).min(EVENTS);
                    let mut batch = (seq..end).map(|i| Event::Message(t << 32 | i));
                    d.dispatch_batch(h, &mut batch).unwrap();
                    seq = end;
                }
            });
        }
    });
    let seen = handled(&d, h, &log);
    assert_eq!(seen.len() as u64, THREADS * EVENTS);
    for t in 0..THREADS {
        assert_eq!(of_producer(&seen, t), upto(EVENTS), "thread {t}");
    }
    assert!(d.stats()[0].packs > 0);
}

/// A queue too small for two packs takes a batch one event to a slot.
#[test]
fn a_queue_too_small_for_packs_takes_batches_one_event_to_a_slot() {
    let (d, h, log) = recorded(PoolConfig::new(1).capacity(16));
    d.dispatch_batch(h, &mut (0..100).map(Event::Message))
        .unwrap();
    assert_eq!(handled(&d, h, &log), upto(100));
    assert_eq!(d.stats()[0].packs, 0);
}

/// Shutdown during blocking batches: what was enqueued arrives, the first not comes back.
#[test]
fn shutdown_during_packed_batches_delivers_what_was_accepted_and_hands_back_the_rest() {
    const THREADS: u64 = 3;
    let (mut d, h, log) = recorded(PoolConfig::new(1).capacity(64));
    let senders: Vec<_> = (0..THREADS)
        .map(|t| {
            let dispatcher = d.handle();
            thread::spawn(move || {
                let mut accepted = 0_u64;
                loop {
                    let mut batch = (accepted..accepted + 50).map(|i| Event::Message(t << 32 | i));
                    match dispatcher.dispatch_batch(h, &mut batch) {
                        Ok(n) => accepted += n as u64,
                        Err(e) => {
                            accepted += e.enqueued as u64;
                            let DispatchError::ShutDown(Event::Message(m)) = e.error else {
                                panic!("only shutdown ends a blocking batch: {:?}", e.error);
                            };
                            assert_eq!(m, t << 32 | accepted, "the first event not enqueued");
                            return accepted;
                        }
                    }
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(50));
    d.shutdown();
    let accepted: Vec<u64> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    let delivered = messages(&log);
    for (t, &n) in accepted.iter().enumerate() {
        let mine = of_producer(&delivered, t as u64);
        assert_eq!(mine, upto(n), "thread {t}: accepted {n}");
    }
}

/// A batch that fills every pack returns at its last event, not waiting for a free pack.
#[test]
fn a_batch_that_fills_the_last_free_pack_returns_without_waiting_for_another() {
    let (d, h, log) = recorded(PoolConfig::new(1).capacity(32));
    let held = block_processor(&d, h);
    let dispatcher = d.handle();
    let sender = thread::spawn(move || {
        // The pool of a 32-slot queue has two packs: this batch takes both.
        dispatcher.dispatch_batch(h, &mut (0..32).map(Event::Message))
    });
    let ms = Duration::from_millis(1);
    let returned = wait_until(Duration::from_secs(5), ms, || sender.is_finished());
    held.wait();
    assert_eq!(sender.join().unwrap().unwrap(), 32);
    assert!(returned, "the batch waited for a pack after its last event");
    assert_eq!(handled(&d, h, &log), upto(32));
}

/// An iterator without a `size_hint` of two is not read ahead of the queue.
#[test]
fn an_iterator_that_promises_nothing_is_not_read_ahead() {
    let (d, h, log) = recorded(PoolConfig::new(1));
    let base = d.stats()[0].enqueued;
    let handle = d.handle();
    let mut next = 0_u64;
    let mut events = std::iter::from_fn(|| {
        // Every event yielded so far is in the queue (or handled) before the next.
        let deadline = Instant::now() + Duration::from_secs(5);
        while handle.stats()[0].enqueued < base + next {
            let held_back = next - 1;
            assert!(Instant::now() < deadline, "event {held_back} was held back");
            thread::yield_now();
        }
        (next < 20).then(|| {
            next += 1;
            Event::Message(next - 1)
        })
    });
    assert_eq!(d.dispatch_batch(h, &mut events).unwrap(), 20);
    assert_eq!(handled(&d, h, &log), upto(20));
    assert_eq!(d.stats()[0].packs, 0);
}

/// An iterator panicking mid-pack: what it yielded is delivered, the panic reaches the caller.
#[test]
fn the_events_yielded_before_an_iterator_panics_are_delivered() {
    let (d, h, log) = recorded(PoolConfig::new(1));
    let dispatched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut events = (0..16_u64).map(|i| {
            assert!(i != 9, "the iterator panics at 9");
            Event::Message(i)
        });
        d.dispatch_batch(h, &mut events)
    }));
    assert!(dispatched.is_err(), "the panic reaches the caller");
    assert_eq!(handled(&d, h, &log), upto(9));
}

/// A slow pack counts each event as handled, so the monitor sees it progress.
#[test]
fn a_long_pack_is_counted_event_by_event() {
    let d = one_queue(PoolConfig::new(1));
    struct Slow;
    impl Client<u64> for Slow {
        fn on_event(&mut self, _event: ClientEvent<u64>, _ctx: &mut Context<u64>) {
            thread::sleep(Duration::from_millis(20));
        }
    }
    let h = on_queue(&d, Slow);
    let before = d.stats()[0].processed;
    d.dispatch_batch(h, &mut (0..16).map(Event::Message))
        .unwrap();
    // The 16 events take about 320 ms: a count between none and all is seen meanwhile.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let counted = d.stats()[0].processed - before;
        seen.push(counted);
        if counted >= 16 || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    let meanwhile = seen.iter().any(|c| (1..16).contains(c));
    assert!(meanwhile, "the pack was counted all at once: {seen:?}");
    assert!(seen.last().is_some_and(|&c| c >= 16), "{seen:?}");
}
