//! Dispatching: order, sizes, back-pressure, batches, and handles of another dispatcher.

#![cfg(not(loom))]

mod common;

use common::*;

/// How long a dispatch that must go through may wait.
const LONG: Duration = Duration::from_secs(30);

#[test]
fn event_sizes() {
    assert_eq!(std::mem::size_of::<Callback>(), 48);
    // A confirm-sized message: queue id, 16-byte GUID, sub-queue id.
    assert_eq!(__private::item_size::<Confirm>(), 56);
    assert_eq!(__private::item_size::<u64>(), 56);
    // A tag beside the 48-byte callback, as in the queued item.
    assert_eq!(std::mem::size_of::<Event<Confirm>>(), 56);
}

/// The key ends where the callback starts, 8 bytes in (`ClientKey`'s alignment): a copy of
/// an item then moves the callback in pieces aligned to it (no store-forwarding stall).
#[test]
fn a_queued_callback_follows_its_key_with_no_gap() {
    assert_eq!(__private::callback_item_offsets(), (4, 8));
}

#[test]
fn a_client_dispatches_to_another_processor_through_its_context() {
    let d = sessions_and_queues(PoolConfig::new(1), PoolConfig::new(1));
    let (sink, log) = recorder_on(&d);
    let fwd = on_session(&d, Forwarder(sink.erase(), |m| m * 10));
    d.dispatch(fwd, Event::Message(7)).unwrap();
    d.synchronize(fwd).unwrap();
    d.synchronize(sink).unwrap();
    assert_eq!(*log.lock().unwrap(), [Seen::Message(70), Seen::Flush]);
}

/// On a queue full until the deadline the event comes back in `Timeout`; nothing is lost.
#[test]
fn a_dispatch_with_a_deadline_hands_the_event_back_when_the_queue_stays_full() {
    use DispatchError::Timeout;
    let (d, h, log) = recorded_queue(4);
    let gate = block_processor(&d.handle(), h);
    let past = Instant::now();
    d.dispatch_deadline(h, Event::Message(0), past).unwrap();
    let zero = Duration::ZERO;
    (1..4).for_each(|i| d.dispatch_timeout(h, Event::Message(i), zero).unwrap());
    let start = Instant::now();
    match d.dispatch_timeout(h, Event::Message(4), Duration::from_millis(30)) {
        Err(e @ Timeout(_)) => {
            assert!(e.is_timeout() && !e.is_full());
            assert!(e.to_string().contains("until the deadline"), "{e}");
            assert!(matches!(e.into_inner(), Event::Message(4)));
        }
        other => panic!("expected Timeout(Message(4)), got {other:?}"),
    }
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(30), "gave up early: {took:?}");
    assert!(took < Duration::from_secs(2), "gave up late: {took:?}");
    let passed = d.dispatch_deadline(h, Event::Message(4), past);
    assert!(matches!(passed, Err(Timeout(Event::Message(4)))));
    // A batch: the event that did not fit comes back, the rest stay in the iterator.
    let mut events = (4..7).map(Event::Message);
    let err = d.dispatch_batch_timeout(h, &mut events, Duration::from_millis(5));
    let err = err.unwrap_err();
    assert_eq!(err.enqueued, 0);
    assert!(matches!(err.error, Timeout(Event::Message(4))));
    let next = events.next().map(|e| matches!(e, Event::Message(5)));
    assert_eq!(next, Some(true));

    // Room comes while a dispatch waits: it goes through.
    let handle = d.handle();
    let waiter = thread::spawn(move || handle.dispatch_timeout(h, Event::Message(4), LONG));
    thread::sleep(Duration::from_millis(20));
    gate.wait();
    waiter.join().unwrap().unwrap();
    let mut rest = (5..7).map(Event::Message);
    let far = Instant::now() + LONG;
    assert_eq!(d.dispatch_batch_deadline(h, &mut rest, far).unwrap(), 2);
    d.synchronize(h).unwrap();
    assert_eq!(without_flushes(&log), seen_messages(0..7));
}

/// A producer waiting on a full queue parks: 300 ms blocked uses little CPU time.
#[cfg(target_os = "linux")]
#[test]
fn a_producer_waiting_for_room_does_not_burn_its_core() {
    /// The calling thread's CPU time (user and system), from `/proc/thread-self/stat`.
    fn thread_cpu_time() -> Duration {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // After the command name (ending at the last ')'): utime and stime, fields 12 and 13.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }
    let (d, h, _log) = recorded_queue(2);
    let gate = hold_full(&d, h, 2);
    let handle = d.handle();
    let producer = thread::spawn(move || {
        let before = (thread_cpu_time(), Instant::now());
        handle.dispatch(h, Event::Message(2)).unwrap();
        (thread_cpu_time() - before.0, before.1.elapsed())
    });
    thread::sleep(Duration::from_millis(300));
    gate.wait();
    let (cpu, blocked) = producer.join().unwrap();
    assert!(blocked >= Duration::from_millis(250), "{blocked:?}");
    let why = format!("a producer blocked for {blocked:?} used {cpu:?} of CPU");
    assert!(cpu < blocked / 4, "{why}");
}

#[test]
fn a_full_queue_hands_the_event_back_and_dispatch_waits() {
    let (d, h, log) = recorded_queue(4);
    let gate = hold_full(&d, h, 4);
    match d.try_dispatch(h, Event::Message(4)) {
        Err(DispatchError::Full(Event::Message(4))) => {}
        other => panic!("expected Full(Message(4)), got {other:?}"),
    }
    // A blocking dispatch waits until the processor makes room.
    let handle = d.handle();
    let waiter = thread::spawn(move || handle.dispatch(h, Event::Message(4)));
    thread::sleep(Duration::from_millis(20));
    assert!(!waiter.is_finished());
    gate.wait();
    waiter.join().unwrap().unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(without_flushes(&log), seen_messages(0..5));
}

#[test]
fn dispatch_on_its_own_full_queue_waits_in_the_outbox_and_hands_back_only_when_that_is_full() {
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(2).outbox_capacity(2));
    let (h, log) = recorder_on(&d);
    let outcome = Arc::new(Mutex::new(Vec::new()));
    let (handle, out) = (d.handle(), outcome.clone());
    let dispatch_six = Callback::new(move || {
        for i in 0..6 {
            let sent = handle.dispatch(h, Event::Message(i));
            out.lock().unwrap().push(sent.is_ok());
        }
    });
    d.execute(h.processor(), dispatch_six).unwrap();
    d.synchronize(h).unwrap();
    // Queue 2 (one may be our `synchronize` marker), outbox 2: the rest come back, none lost.
    let outcome = outcome.lock().unwrap().clone();
    assert_eq!(outcome[..3], [true, true, true], "{outcome:?}");
    assert_eq!(outcome[4..], [false, false], "{outcome:?}");
    let accepted = outcome.iter().filter(|&&ok| ok).count() as u64;
    // The outboxed events are handed on at the processor's next loop turns.
    let delivered = || messages(&log).len() as u64;
    eventually("the accepted events delivered", || delivered() >= accepted);
    assert_eq!(messages(&log), upto(accepted));
    assert!(d.stats()[0].outboxed >= 1);
}

#[test]
fn ids_of_another_dispatcher_are_errors_that_hand_the_event_back() {
    let small = one_queue(PoolConfig::new(1));
    let big = one_queue(PoolConfig::new(3));
    let far = recorder_at(&big, Placement::Processor(2)).0;
    use DispatchError::NoSuchProcessor;
    let tried = small.try_dispatch(far, Event::Message(1));
    assert!(matches!(tried, Err(NoSuchProcessor(Event::Message(1)))));
    let waited = small.dispatch(far, Event::Message(2));
    assert!(matches!(waited, Err(NoSuchProcessor(Event::Message(2)))));
    let executed = small.execute(far.processor(), Callback::new(|| ()));
    assert!(matches!(executed, Err(NoSuchProcessor(_))));
    let nowhere = Err(SyncError::NoSuchProcessor(far.processor()));
    assert_eq!(small.synchronize(far), nowhere);
    assert!(matches!(small.unregister(far), Err(NoSuchProcessor(h)) if h == far));
}

#[test]
fn a_batch_goes_in_order_and_a_full_queue_hands_back_the_event_that_did_not_fit() {
    let (d, h, log) = recorded_queue(8);
    let gate = block_processor(&d.handle(), h);
    let mut events = (0..12).map(Event::Message);
    match d.try_dispatch_batch(h, &mut events) {
        Err(BatchError {
            enqueued: 8,
            error: DispatchError::Full(Event::Message(8)),
        }) => {}
        other => panic!("expected 8 enqueued and Message(8) handed back, got {other:?}"),
    }
    // The events after the one handed back are still in the caller's iterator.
    let rest = events.map(|e| match e {
        Event::Message(m) => m,
        _ => unreachable!(),
    });
    assert_eq!(rest.collect::<Vec<_>>(), [9, 10, 11]);
    // The blocking batch waits for room and enqueues everything.
    let handle = d.handle();
    let waiter =
        thread::spawn(move || handle.dispatch_batch(h, &mut (100..120).map(Event::Message)));
    thread::sleep(Duration::from_millis(20));
    assert!(!waiter.is_finished());
    gate.wait();
    assert_eq!(waiter.join().unwrap().unwrap(), 20);
    let expected: Vec<_> = (0..8).chain(100..120).collect();
    assert_eq!(handled(&d, h, &log), expected);
}
