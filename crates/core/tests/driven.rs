//! Driven processors (`PoolConfig::driven`): a dispatch finding one parked runs its turn itself.

#![cfg(not(loom))]

mod common;

use std::thread::ThreadId;

use common::*;

/// A processor that parks as soon as its queue is empty.
fn parking(driven: bool) -> PoolConfig {
    PoolConfig::new(1).wait(WaitStrategy::Park).driven(driven)
}

/// Of `tries` callbacks executed after a pause to park, how many ran on this thread (inside
/// `execute`: the thread that runs a callback reports itself, whenever that is).
fn inline_runs(d: &DispatcherHandle<u64>, tries: usize) -> usize {
    let queue = first_queue(d);
    let me = thread::current().id();
    let mut inline = 0;
    for _ in 0..tries {
        thread::sleep(Duration::from_millis(5));
        let (tx, rx) = mpsc::channel::<ThreadId>();
        let report = move || tx.send(thread::current().id()).unwrap();
        d.execute(queue, report).unwrap();
        inline += usize::from(rx.recv().unwrap() == me);
    }
    inline
}

#[test]
fn a_dispatch_that_finds_a_driven_processor_parked_runs_its_turn_on_the_calling_thread() {
    let d = one_queue(parking(true));
    // Under load a try may find the processor awake; most find it parked.
    assert!(inline_runs(&d.handle(), 20) >= 5);
}

#[test]
fn a_processor_not_driven_runs_every_callback_on_its_own_thread() {
    let d = one_queue(parking(false));
    assert_eq!(inline_runs(&d.handle(), 10), 0);
}

/// Four producers, some events driven, some threaded: each's events arrive once, in order.
#[test]
fn driven_and_threaded_turns_lose_nothing_and_keep_each_producers_order() {
    let (d, h, log) = recorded(parking(true));
    let producers: Vec<_> = (0..4_u64)
        .map(|t| {
            let d = d.handle();
            thread::spawn(move || {
                for i in 0..500 {
                    d.dispatch(h, Event::Message(t << 32 | i)).unwrap();
                    if i % 50 == 0 {
                        thread::sleep(Duration::from_millis(1));
                    }
                }
            })
        })
        .collect();
    producers.into_iter().for_each(|p| p.join().unwrap());
    let seen = handled(&d, h, &log);
    assert_eq!(seen.len(), 2_000);
    (0..4).for_each(|t| assert_eq!(of_producer(&seen, t), upto(500)));
}

/// A timer armed in a driven turn wakes the parked thread (no park timeout), which fires it.
#[test]
fn a_timer_armed_in_a_driven_turn_fires_on_time() {
    let d = one_queue(parking(true));
    let queue = first_queue(&d.handle());
    let (tx, rx) = mpsc::channel::<ThreadId>();
    let handle = d.handle();
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(5));
        let (ran_tx, ran_rx) = mpsc::channel::<()>();
        // One box for what the callback holds: the inline space holds a few words.
        let held = Arc::new((handle.clone(), tx.clone(), ran_tx));
        d.execute(queue, move || {
            let (handle, tx, ran_tx) = &*held;
            let tx = tx.clone();
            let fire = move || tx.send(thread::current().id()).unwrap();
            let in_20_ms = Duration::from_millis(20);
            handle.schedule_in(queue, in_20_ms, fire).unwrap();
            ran_tx.send(()).unwrap();
        })
        .unwrap();
        let driven = ran_rx.try_recv().is_ok();
        let fired = rx.recv_timeout(Duration::from_secs(5));
        assert!(fired.is_ok(), "the timer never fired");
        if driven {
            // Fired on the processor's thread, woken for it, not on this one.
            assert_ne!(fired.unwrap(), thread::current().id());
            return;
        }
    }
    panic!("no execute found the processor parked in 20 tries");
}

/// A driven turn's clients dispatch as their processor's: through its outbox, to another.
#[test]
fn a_client_in_a_driven_turn_dispatches_as_its_processor() {
    let d = sessions_and_queues(parking(true), parking(true));
    let (sink, log) = recorder_on(&d);
    let forwarder = on_session(&d, Forwarder(sink.erase(), |m| m + 1));
    for i in 0..50 {
        if i % 10 == 0 {
            thread::sleep(Duration::from_millis(5));
        }
        d.dispatch(forwarder, Event::Message(i * 10)).unwrap();
    }
    d.synchronize(forwarder).unwrap();
    d.synchronize(sink).unwrap();
    let expected: Vec<u64> = (0..50).map(|i| i * 10 + 1).collect();
    assert_eq!(messages(&log), expected);
}

#[test]
fn a_driven_dispatcher_shuts_down_with_every_event_handled() {
    let (mut d, h, log) = recorded(parking(true));
    dispatch_all(&d, h, 0..100);
    d.shutdown();
    assert_eq!(messages(&log), upto(100));
}
