//! The async door on tokio and polled by hand: room, waiting, order, cancellation, shutdown.

#![cfg(not(loom))]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use common::*;
use tokio::runtime::{Builder, Runtime};
use zerodispatch_testkit::within;

const LIMIT: Duration = Duration::from_secs(20);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.incr();
    }
}

/// A waker that counts its wakes, and its count.
fn counting_waker() -> (Counter, Waker) {
    let count = Counter::default();
    (count.clone(), Waker::from(Arc::new(count)))
}

/// `future` polled once, with `waker`.
fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(future).poll(&mut TaskContext::from_waker(waker))
}

/// Whether `future` resolves to `Ok(())` at this poll.
fn ready_ok<F: Future<Output = Result<(), E>> + Unpin, E>(future: &mut F, waker: &Waker) -> bool {
    matches!(poll_once(future, waker), Poll::Ready(Ok(())))
}

/// Lets the runtime's threads run for `ms` milliseconds.
fn pause(rt: &Runtime, ms: u64) {
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(ms)).await });
}

/// A runtime of four workers, with time.
fn runtime() -> Runtime {
    let mut builder = Builder::new_multi_thread();
    builder.worker_threads(4).enable_time().build().unwrap()
}

#[test]
fn a_dispatch_with_room_resolves_at_its_first_poll() {
    within(LIMIT, "dispatch_async with room", || {
        let (d, c, log) = recorded_queue(8);
        let (count, waker) = counting_waker();
        let mut first = d.dispatch_async(c, Event::Message(1));
        assert!(ready_ok(&mut first, &waker));
        drop(first);
        runtime().block_on(async {
            d.dispatch_async(c, Event::Message(2)).await.unwrap();
            let mut batch = (3..6).map(Event::Message);
            assert_eq!(d.dispatch_batch_async(c, &mut batch).await.unwrap(), 3);
        });
        assert_eq!(handled(&d, c, &log), [1, 2, 3, 4, 5]);
        assert_eq!(count.get(), 0, "never waited");
    });
}

/// A full queue leaves the future pending; the drain wakes it once and it enqueues in order.
#[test]
fn a_dispatch_to_a_full_queue_waits_for_room_and_keeps_order() {
    within(LIMIT, "dispatch_async on a full queue", || {
        let (d, c, log) = recorded_queue(4);
        let held = hold_full(&d, c, 4);
        let (count, waker) = counting_waker();
        let mut future = d.dispatch_async(c, Event::Message(4));
        assert!(poll_once(&mut future, &waker).is_pending());
        assert!(poll_once(&mut future, &waker).is_pending(), "polled again");
        assert_eq!(count.get(), 0);
        held.wait();
        eventually("the drain wakes the future", || count.get() > 0);
        assert!(ready_ok(&mut future, &waker));
        drop(future);
        assert_eq!(handled(&d, c, &log), [0, 1, 2, 3, 4]);
        assert_eq!(count.get(), 1, "woken once, not per pop");

        // The same on tokio: a batch larger than the queue waits until the processor is released.
        let held = block_processor(&d.handle(), c);
        let rt = runtime();
        let handle = d.handle();
        let task = rt.spawn(async move {
            let mut batch = (10..30).map(Event::Message);
            handle.dispatch_batch_async(c, &mut batch).await.unwrap()
        });
        pause(&rt, 50);
        assert!(!task.is_finished(), "a full queue: the batch waits");
        held.wait();
        assert_eq!(rt.block_on(task).unwrap(), 20);
        assert_eq!(handled(&d, c, &log)[5..], (10..30).collect::<Vec<_>>());
    });
}

/// Many tasks into a small queue: every event arrives once, each task's in order.
#[test]
fn many_async_producers_lose_nothing() {
    const TASKS: u64 = 8;
    const EACH: u64 = 5_000;
    within(LIMIT * 3, "many async producers", || {
        let (d, c, log) = recorded_queue(16);
        let rt = runtime();
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let handle = d.handle();
                rt.spawn(async move {
                    for i in 0..EACH {
                        let event = Event::Message(t << 32 | i);
                        if i % 2 == 0 {
                            handle.dispatch_async(c, event).await.unwrap();
                        } else {
                            let mut one = std::iter::once(event);
                            let enqueued = handle.dispatch_batch_async(c, &mut one).await;
                            assert_eq!(enqueued.unwrap(), 1);
                        }
                    }
                })
            })
            .collect();
        tasks.into_iter().for_each(|t| rt.block_on(t).unwrap());
        let seen = handled(&d, c, &log);
        assert_eq!(seen.len() as u64, TASKS * EACH, "every event once");
        for t in 0..TASKS {
            assert_eq!(of_producer(&seen, t), upto(EACH), "task {t}: in order");
        }
    });
}

/// A pending future cancelled or dropped enqueues nothing later; cancel hands the event back.
#[test]
fn a_pending_future_given_up_loses_nothing_and_enqueues_nothing_later() {
    within(LIMIT, "cancelling a pending dispatch", || {
        let (d, c, log) = recorded_queue(4);
        let held = hold_full(&d, c, 4);
        let (count, waker) = counting_waker();
        let mut cancelled = d.dispatch_async(c, Event::Message(98));
        let mut dropped = d.dispatch_async(c, Event::Message(99));
        assert!(poll_once(&mut cancelled, &waker).is_pending());
        assert!(poll_once(&mut dropped, &waker).is_pending());
        match cancelled.cancel() {
            Some(Event::Message(98)) => {}
            other => panic!("the event back, got {:?}", other.map(|e| e.kind())),
        }
        drop(dropped);
        // A batch: two of its events went in before the queue filled.
        held.wait();
        d.synchronize(c.processor()).unwrap();
        assert_eq!(count.get(), 0, "withdrawn: not woken");
        let held = block_processor(&d.handle(), c);
        let mut events = (10..20).map(Event::Message);
        let mut batch = d.dispatch_batch_async(c, &mut events);
        assert!(poll_once(&mut batch, &waker).is_pending());
        assert_eq!(batch.enqueued(), 4);
        let (enqueued, back) = batch.cancel();
        assert_eq!(enqueued, 4);
        assert!(matches!(back, Some(Event::Message(14))));
        held.wait();
        assert_eq!(handled(&d, c, &log), [0, 1, 2, 3, 10, 11, 12, 13]);
        let rest = events.next().map(|e| e.kind());
        assert_eq!(rest, Some("message"), "the rest stay");
    });
}

/// Shutdown wakes a future waiting for room: it resolves with `ShutDown` and its event.
#[test]
fn shutdown_wakes_a_pending_future_with_its_event() {
    within(LIMIT, "shutdown with a pending dispatch", || {
        let (mut d, c, log) = recorded_queue(4);
        let handle = d.handle();
        let held = hold_full(&handle, c, 4);
        let rt = runtime();
        let waiting = handle.clone();
        let task = rt.spawn(async move { waiting.dispatch_async(c, Event::Message(99)).await });
        pause(&rt, 20);
        assert!(!task.is_finished());
        // The processor is held: shutdown closes the gate (waking the task) and waits.
        let shutdown = std::thread::spawn(move || d.shutdown());
        let outcome = rt.block_on(task).unwrap();
        let ok = matches!(outcome, Err(DispatchError::ShutDown(Event::Message(99))));
        let got = outcome.map_err(|e| e.is_full());
        assert!(ok, "ShutDown with the event, got {got:?}");
        held.wait();
        shutdown.join().unwrap();
        assert_eq!(messages(&log), [0, 1, 2, 3], "the accepted events are run");
        // After shutdown, a new future resolves at once with its event.
        let (_, waker) = counting_waker();
        let late = poll_once(&mut handle.dispatch_async(c, Event::Message(7)), &waker);
        use {DispatchError::ShutDown, Poll::Ready};
        assert!(matches!(late, Ready(Err(ShutDown(Event::Message(7))))));
    });
}

/// On a processor thread the door never waits: a full target goes through the outbox.
#[test]
fn on_a_processor_thread_the_door_goes_through_the_outbox() {
    struct Forward {
        to: ClientHandle,
        polled: Arc<Mutex<Vec<bool>>>,
    }
    impl Client<u64> for Forward {
        fn on_message(&mut self, m: u64, ctx: &mut Context<u64>) {
            let mut future = ctx.dispatcher().dispatch_async(self.to, Event::Message(m));
            let ready = ready_ok(&mut future, Waker::noop());
            self.polled.lock().unwrap().push(ready);
        }
    }
    within(LIMIT, "dispatch_async on a processor thread", || {
        let d = sessions_and_queues_unprobed(PoolConfig::new(1), PoolConfig::new(1).capacity(2));
        let (sink, log) = recorder_on(&d);
        let polled = Arc::new(Mutex::new(Vec::new()));
        let (to, seen) = (sink.erase(), polled.clone());
        let forward = on_session(&d, Forward { to, polled: seen });
        let held = block_processor(&d.handle(), sink);
        dispatch_all(&d, forward, 0..6);
        d.synchronize(forward.processor()).unwrap();
        let polled = polled.lock().unwrap().clone();
        assert_eq!(polled, [true; 6], "resolved at the first poll");
        held.wait();
        eventually("outboxed events arrive", || messages(&log).len() >= 6);
        assert_eq!(messages(&log), [0, 1, 2, 3, 4, 5]);
    });
}

/// `call_async` answers after earlier events, each call its own; refusals are `call`'s.
#[test]
fn call_async_brings_back_each_result() {
    within(LIMIT, "call_async", || {
        let (d, c, log) = recorded_queue(64);
        let queue = c.processor();
        let rt = runtime();
        let log_for_call = log.clone();
        let seen = rt.block_on(async {
            for m in 0..10 {
                d.dispatch_async(c, Event::Message(m)).await.unwrap();
            }
            // Everything enqueued before it has been handled.
            let handled = move || messages(&log_for_call).len();
            d.call_async(queue, handled).await.unwrap()
        });
        assert_eq!(seen, 10);

        // Many at once from one task: each its own slot and its own answer.
        let answers = rt.block_on(async {
            let calls: Vec<_> = (0..50_u64)
                .map(|i| d.call_async(queue, move || i * 3))
                .collect();
            let mut answers = Vec::new();
            for call in calls {
                answers.push(call.await.unwrap());
            }
            answers
        });
        assert_eq!(answers, (0..50).map(|i| i * 3).collect::<Vec<_>>());

        zerodispatch_testkit::quiet_planned_panics();
        let panicked = rt.block_on(d.call_async(queue, || -> u64 { panic!("planned panic") }));
        assert_eq!(panicked, Err(SyncError::Panicked(queue)));
        let (client_type, index) = (ClientType::Queue, 9);
        let nowhere = ProcessorId { client_type, index };
        let refused = rt.block_on(d.call_async(nowhere, || ()));
        assert_eq!(refused, Err(SyncError::NoSuchProcessor(nowhere)));
        // On a processor thread: refused, never waited for.
        let handle = d.handle();
        let on_processor = d.call(queue, move || {
            let mut future = handle.call_async(queue, || ());
            let (_, waker) = counting_waker();
            poll_once(&mut future, &waker)
        });
        let refused = Ok(Poll::Ready(Err(SyncError::OnProcessorThread(queue))));
        assert_eq!(on_processor, refused);
        // The calls are the dispatcher's callbacks, not the client's events.
        assert_eq!(messages(&log), (0..10).collect::<Vec<_>>());
    });
}

/// A `call_async` dropped while waiting never runs; dropped once enqueued it runs unanswered.
#[test]
fn call_async_is_cancel_safe() {
    within(LIMIT, "call_async cancelled", || {
        let (d, c, _log) = recorded_queue(4);
        let queue = c.processor();
        let ran = Counter::default();

        // Dropped while waiting for room: never runs.
        let held = hold_full(&d, c, 4);
        let (_, waker) = counting_waker();
        let r = ran.clone();
        let mut waiting = d.call_async(queue, move || r.add(1));
        assert!(poll_once(&mut waiting, &waker).is_pending());
        drop(waiting);

        // Dropped once enqueued, before its answer: runs, its answer goes nowhere.
        held.wait();
        let r = ran.clone();
        let mut sent = d.call_async(queue, move || r.add(10));
        let held = block_processor(&d.handle(), c);
        // Room now (the blocking callback took one place): the first poll enqueues it.
        assert!(poll_once(&mut sent, &waker).is_pending());
        drop(sent);
        held.wait();
        d.synchronize(queue).unwrap();
        assert_eq!(ran.get(), 10, "only the enqueued call ran");

        // The thread's next calls get their own answers.
        let rt = Builder::new_current_thread().build().unwrap();
        for i in 0..3_u64 {
            let answer = rt.block_on(d.call_async(queue, move || i + 100));
            assert_eq!(answer, Ok(i + 100));
        }
    });
}

/// A call under way at shutdown resolves (`ShutDown`, its answer or `Dropped`): none hangs.
#[test]
fn call_async_resolves_at_shutdown() {
    within(LIMIT, "call_async at shutdown", || {
        let (d, c, _log) = recorded_queue(4);
        let queue = c.processor();
        let held = hold_full(&d, c, 4);
        let rt = runtime();
        let handle = d.handle();
        let task = rt.spawn(async move { handle.call_async(queue, || 5_u64).await });
        pause(&rt, 20);
        assert!(!task.is_finished(), "a full queue: the call waits");
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            held.wait();
        });
        drop(d);
        releaser.join().unwrap();
        let outcome = rt.block_on(task).unwrap();
        use SyncError::{Dropped, ShutDown};
        let resolved = matches!(outcome, Ok(5) | Err(ShutDown | Dropped(_)));
        assert!(resolved, "{outcome:?}");
    });
}
