//! Waiting for a processor from an application thread: `synchronize` and `call`.

#![cfg(not(loom))]

mod common;

use common::*;

#[test]
fn synchronize_waits_for_earlier_events_and_refuses_its_own_thread() {
    let (d, h, log) = recorded(PoolConfig::new(1));
    dispatch_all(&d, h, 0..1000);
    assert_eq!(handled(&d, h, &log).len(), 1000);
    let result = Arc::new(Mutex::new(None));
    let (handle, r) = (d.handle(), result.clone());
    let own = Callback::new(move || *r.lock().unwrap() = Some(handle.synchronize(h)));
    d.execute(h.processor(), own).unwrap();
    d.synchronize(h).unwrap();
    let refused = Err(SyncError::OnProcessorThread(h.processor()));
    assert_eq!(*result.lock().unwrap(), Some(refused));
}

/// `call` runs after earlier events and their flush, and brings back any result type.
#[test]
fn call_runs_on_the_processor_after_earlier_events_and_returns_the_result() {
    let (d, h, log) = recorded(PoolConfig::new(1));
    dispatch_all(&d, h, 0..100);
    let seen = log.clone();
    let answer = d.call(h, move || {
        let log = seen.lock().unwrap();
        let on = std::thread::current().name() == Some("zd-queue-0");
        (log.len(), log.last() == Some(&Seen::Flush), on)
    });
    let (events, flushed, on) = answer.unwrap();
    assert_eq!(events, 101, "100 messages and the flush before the call");
    assert!(flushed && on);
    let handle = d.handle();
    assert_eq!(handle.call(h.processor(), || "a str"), Ok("a str"));
    assert_eq!(handle.call(h, || [7_u64; 4]), Ok([7; 4]));
    assert_eq!(d.call(h, || ()), Ok(()));
}

/// A panicking closure answers `Panicked`; the processor counts it and goes on.
#[test]
fn a_call_that_panics_answers_panicked_and_the_processor_goes_on() {
    let d = one_queue(PoolConfig::new(1));
    let queue = first_queue(&d);
    zerodispatch_testkit::quiet_planned_panics();
    let panicked = d.call(queue, || -> u64 { panic!("planned panic in a call") });
    assert_eq!(panicked, Err(SyncError::Panicked(queue)));
    assert_eq!(d.call(queue, || 5_u32), Ok(5));
    assert_eq!(d.stats()[0].panics, 1);
}

/// `call` refuses processor threads, bad ids, and shutdown (without running anything).
#[test]
fn call_refuses_processor_threads_bad_ids_and_shutdown() {
    let mut d = sessions_and_queues(PoolConfig::new(1), PoolConfig::new(1));
    let (queue, session) = (first_queue(&d), d.processors(ClientType::Session)[0]);
    let handle = d.handle();
    let call_inside = move || handle.call(queue, || 1_u8);
    let inner = d.call(session, call_inside).unwrap();
    assert_eq!(inner, Err(SyncError::OnProcessorThread(session)));
    let (client_type, index) = (ClientType::Cluster, 0);
    let missing = ProcessorId { client_type, index };
    let refused = d.call(missing, || 1_u8);
    assert_eq!(refused, Err(SyncError::NoSuchProcessor(missing)));

    let handle = d.handle();
    d.shutdown();
    let ran = Counter::default();
    let refused = handle.call(queue, ran.adder());
    assert_eq!((refused, ran.get()), (Err(SyncError::ShutDown), 0));
    // The thread's slot is left ready: a call to a live dispatcher still works.
    let live = one_queue(PoolConfig::new(1));
    assert_eq!(live.call(first_queue(&live), || 9_i64), Ok(9));
}
