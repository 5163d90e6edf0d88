//! Clients: placement, ownership by one processor thread, unregistering.

#![cfg(not(loom))]

mod common;

use common::*;

#[test]
fn least_loaded_placement_spreads_clients_and_explicit_placement_pins_them() {
    let d = one_queue(PoolConfig::new(3));
    let mut per_processor = [0; 3];
    (0..6).for_each(|_| per_processor[usize::from(recorder_on(&d).0.processor().index)] += 1);
    assert_eq!(per_processor, [2, 2, 2]);
    let pinned = recorder_at(&d, Placement::Processor(1)).0;
    assert_eq!(pinned.processor().index, 1);
    let refusal = |t, placement| d.register(t, Recorder::new().0, placement).unwrap_err();
    let (client_type, index) = (ClientType::Queue, 3);
    let fourth = RegisterRefusal::NoSuchProcessor(ProcessorId { client_type, index });
    assert_eq!(refusal(client_type, Placement::Processor(3)).reason, fourth);
    let refused = refusal(ClientType::Session, Placement::LeastLoaded).reason;
    assert_eq!(refused, RegisterRefusal::NoProcessors(ClientType::Session));
}

#[test]
fn in_dispatcher_thread_is_true_only_on_the_owning_processor() {
    let d = one_queue(PoolConfig::new(2));
    let a = recorder_at(&d, Placement::Processor(0)).0;
    let b = recorder_at(&d, Placement::Processor(1)).0;
    assert!(!d.in_dispatcher_thread(a));
    let answers = Arc::new(Mutex::new(None));
    let (h, out) = (d.handle(), answers.clone());
    // Two 16-byte handles and two pointers: more than the default space holds.
    let ask = move || (h.in_dispatcher_thread(a), h.in_dispatcher_thread(b));
    let ask = Callback::spill(move || *out.lock().unwrap() = Some(ask()));
    d.execute(a.processor(), ask).unwrap();
    d.synchronize(a).unwrap();
    assert_eq!(*answers.lock().unwrap(), Some((true, false)));
}

#[test]
fn unregister_flushes_then_drops_and_later_events_are_stale() {
    let (d, h, log) = recorded(PoolConfig::new(1));
    let gate = block_processor(&d.handle(), h);
    d.dispatch(h, Event::Message(1)).unwrap();
    d.unregister(h).unwrap();
    d.dispatch(h, Event::Message(2)).unwrap();
    gate.wait();
    d.synchronize(h).unwrap();
    assert_eq!(*log.lock().unwrap(), [Seen::Message(1), Seen::Flush]);
    assert_eq!(d.stats()[0].stale, 1);
    // The slot is reused with a new generation: the old handle still does not reach it.
    let (h2, log2) = recorder_on(&d);
    assert_ne!(h, h2);
    d.dispatch(h, Event::Message(3)).unwrap();
    d.dispatch(h2, Event::Message(4)).unwrap();
    d.synchronize(h2).unwrap();
    assert_eq!(*log2.lock().unwrap(), [Seen::Message(4), Seen::Flush]);
    assert_eq!(d.stats()[0].stale, 2);
}

/// How long a step of a test may wait before the test fails instead of hanging.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

/// A handle registered on a full processor from another processor is reached at once.
#[test]
fn a_handle_registered_on_a_processor_is_reached_by_the_next_event_from_any_thread() {
    let d = one_queue_unprobed(PoolConfig::new(2).capacity(4));
    let first = recorder_at(&d, Placement::Processor(1)).0;
    // Processor 1 stalled, its queue full.
    let stall = block_processor(&d.handle(), first);
    while d.try_dispatch(first, Event::Message(0)).is_ok() {}
    // On processor 0: register on 1, hand the handle over, and stay, retrying no outbox.
    let (client, log) = Recorder::new();
    let (handed, handle_rx) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let handle = d.handle();
    let register = Callback::spill(move || {
        let registered = handle.register(ClientType::Queue, client, Placement::Processor(1));
        handed.send(registered).unwrap();
        let _ = go_rx.recv_timeout(PATIENCE);
    });
    d.execute(first_queue(&d), register).unwrap();
    let registered = handle_rx.recv_timeout(PATIENCE);
    stall.wait(); // processor 1 drains
    let seen = registered.as_ref().ok().and_then(|r| r.as_ref().ok());
    let seen = seen.map(|&h| {
        d.dispatch(h, Event::Message(42)).unwrap();
        d.synchronize(h).unwrap();
        (log.lock().unwrap().clone(), d.stats()[1].stale)
    });
    go.send(()).unwrap();
    let (log, stale) = seen.unwrap_or_else(|| panic!("no handle: {registered:?}"));
    let why = "the event sent with the new handle was dropped as stale";
    assert_eq!(stale, 0, "{why}");
    assert_eq!(log, [Seen::Message(42), Seen::Flush]);
}
