//! Callbacks handed their client: typed, in order, flushed; a wrong type is dropped unrun.
#![cfg(not(loom))]

mod common;

use common::*;

#[test]
fn reaches_its_client_in_order_with_its_other_events_and_flushes_it() {
    let (mut d, h, log) = recorded(PoolConfig::new(1));
    // The processor is held until the three events are queued: they arrive in one drain.
    let gate = block_processor(&d.handle(), h);
    d.dispatch(h, Event::Message(1)).unwrap();
    let two = move |r: &mut Recorder, ctx: &mut Context<u64>| {
        assert_eq!(ctx.handle(), h, "the context names the client");
        r.log.lock().unwrap().push(Seen::Message(2));
    };
    d.dispatch(h, Event::to_client(two)).unwrap();
    d.dispatch(h, Event::Message(3)).unwrap();
    gate.wait();
    d.synchronize(h).unwrap();
    let log = log.lock().unwrap().clone();
    use Seen::{Flush, Message};
    let expected = [Message(1), Message(2), Message(3), Flush];
    assert_eq!(log, expected, "in order, then one flush");
    d.shutdown();
}

#[test]
fn a_callback_for_another_client_type_is_dropped_unrun_and_counted() {
    let (mut d, recorder, log) = recorded(PoolConfig::new(1));
    let other = on_queue(&d, Sink);
    let (drops, ran) = (Counter::default(), Counter::default());
    let (guard, r) = (DropCounted(drops.clone()), ran.clone());
    let wrong = Event::from(Event::to_client(move |_: &mut Recorder, _| {
        let _keep = &guard;
        r.incr();
    }));
    // Erased, the handle takes a callback of any client type (typed, this does not compile).
    d.dispatch(other.erase(), wrong).unwrap();
    // The processor goes on: a later event to the right client arrives.
    d.dispatch(recorder, Event::Message(9)).unwrap();
    d.synchronize(other).unwrap();
    assert_eq!(ran.get(), 0, "never run on the wrong client");
    assert_eq!(drops.get(), 1, "captures dropped once");
    let counts = (total(&d, |s| s.wrong_client_type), total(&d, |s| s.panics));
    assert_eq!(counts, (1, 0));
    assert!(log.lock().unwrap().contains(&Seen::Message(9)));
    d.shutdown();
}

#[test]
fn a_panicking_callback_is_contained_and_the_client_lives_on() {
    zerodispatch_testkit::quiet_planned_panics();
    let (mut d, h, log) = recorded(PoolConfig::new(1));
    let panics = |_: &mut Recorder, _: &mut _| panic!("planned panic in a client callback");
    d.dispatch(h, Event::to_client(panics)).unwrap();
    d.dispatch(h, Event::Message(5)).unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(total(&d, |s| s.panics), 1);
    assert!(log.lock().unwrap().contains(&Seen::Message(5)));
    d.shutdown();
}

#[test]
fn handed_back_whole_when_refused() {
    let (mut dispatcher, h, _log) = recorded(PoolConfig::new(1));
    dispatcher.shutdown();
    let ran = Counter::default();
    let r = ran.clone();
    let count = Event::to_client(move |_: &mut Recorder, _| r.incr());
    let err = dispatcher.dispatch(h, count).unwrap_err();
    assert!(err.is_shut_down());
    assert!(matches!(err.into_inner(), Event::ClientCallback(_)));
    assert_eq!(ran.get(), 0);
}
