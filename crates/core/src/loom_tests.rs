//! `loom` models of the wake, shutdown, outbox, register hand-off, `call` and timer protocols,
//! run with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p zerodispatch-core --lib --release loom
//! ```
//!
//! They drive the real code: a [`ProcessorShared`] whose gate, stop flag, thread handle,
//! thread-locals and queue are loom's under `--cfg loom` (see `sync.rs`; the queue is a
//! model with `ArrayQueue`'s contract), and its own methods: `try_push` on the producer's
//! side, `sleep` / `may_exit` in the processor's loop, `close` and `request_stop` for
//! shutdown, `send_from` and `retry_outbox` for the outbox, `hand_in` and the arrivals
//! for registration. Only the loop around them
//! is the model's: pop until empty, exit when allowed, else sleep. Loom reports a
//! processor parked forever as a deadlock, so a lost wake-up fails a model.

use std::task::{Poll, Wake, Waker};

use loom::sync::Arc;
use loom::thread;

use zerodispatch_callback::InlineValue;

use crate::call::{self, Answer};
use crate::config::PoolConfig;
use crate::error::DispatchError;
use crate::event::{Event, Item};
use crate::ids::{ClientKey, ClientType, ProcessorId};
use crate::pack::PACK;
use crate::processor::{Door, ProcessorShared, current_outbox_len, set_current};
use crate::room::Wait;

fn processor(index: u16, capacity: usize) -> Arc<ProcessorShared<u64>> {
    let id = ProcessorId {
        client_type: ClientType::Queue,
        index,
    };
    Arc::new(ProcessorShared::new(
        id,
        // No timers: each would be loom state to explore.
        PoolConfig::new(1).capacity(capacity).timers(0),
    ))
}

fn message(n: u64) -> Item<u64> {
    Item::Message {
        key: ClientKey {
            slot: 0,
            generation: 0,
        },
        message: n,
    }
}

/// The processor's loop around the real protocol steps: pop until empty, wake the futures
/// waiting for room; return once `until` events were handled, or when allowed to exit;
/// otherwise sleep by the wake protocol. Returns the events handled.
fn run_processor(shared: &ProcessorShared<u64>, until: Option<usize>) -> usize {
    let mut handled = 0;
    let mut waking = Vec::new();
    loop {
        while shared.queue.pop().is_some() {
            handled += 1;
        }
        shared.wake_waiters(handled, &mut waking);
        if until == Some(handled) || shared.may_exit(handled) {
            return handled;
        }
        if shared.stop_requested() {
            // Told to stop but not settled: look again after a timed park (a yield under
            // loom), as the processor's loop does.
            shared.sleep(handled, thread::yield_now, false);
        } else {
            shared.sleep(handled, thread::park, true);
        }
    }
}

/// [`run_processor`] that also looks at its waiters after every pop, as the processor's
/// drain does every `DEPTH_CHECK_INTERVAL` (64) pops within a run: here every pop, which
/// explores every point of a run at which the look may fall.
fn run_processor_waking_in_runs(shared: &ProcessorShared<u64>, until: Option<usize>) -> usize {
    let mut handled = 0;
    let mut waking = Vec::new();
    loop {
        while shared.queue.pop().is_some() {
            handled += 1;
            shared.wake_waiters(handled, &mut waking);
        }
        shared.wake_waiters(handled, &mut waking);
        if until == Some(handled) || shared.may_exit(handled) {
            return handled;
        }
        if shared.stop_requested() {
            shared.sleep(handled, thread::yield_now, false);
        } else {
            shared.sleep(handled, thread::park, true);
        }
    }
}

/// Starts the processor thread of `shared` and publishes its handle, as `build` does
/// before any producer can reach it.
fn start(shared: &Arc<ProcessorShared<u64>>, until: Option<usize>) -> thread::JoinHandle<usize> {
    let me = shared.clone();
    let handle = thread::spawn(move || run_processor(&me, until));
    assert!(shared.thread.set(handle.thread().clone()).is_ok());
    handle
}

/// Shutdown of one processor, as `Dispatcher::shutdown` does it.
fn shut_down(shared: &ProcessorShared<u64>) {
    shared.close();
    shared.request_stop();
}

#[test]
fn loom_wake_protocol_loses_no_wakeup() {
    loom::model(|| {
        let shared = processor(0, 4);
        let processor = start(&shared, Some(2));
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || assert!(shared.try_push(message(1)).is_ok()))
        };
        assert!(shared.try_push(message(2)).is_ok());
        producer.join().unwrap();
        // Both events are handled: had a wake-up been lost, the processor would be parked
        // forever and loom would report a deadlock here.
        assert_eq!(processor.join().unwrap(), 2);
    });
}

#[test]
fn loom_shutdown_racing_two_dispatches_loses_no_event() {
    loom::model(|| {
        let shared = processor(0, 4);
        let processor = start(&shared, None);
        let producers: Vec<_> = (0..2)
            .map(|n| {
                let shared = shared.clone();
                thread::spawn(move || shared.try_push(message(n)).is_ok())
            })
            .collect();
        shut_down(&shared);
        let accepted = producers
            .into_iter()
            .map(|p| usize::from(p.join().unwrap()))
            .sum::<usize>();
        // Every event is either handed back (not accepted) or handled: never both, never
        // neither.
        assert_eq!(processor.join().unwrap(), accepted);
        assert!(shared.queue.is_empty());
    });
}

/// The outbox's part of shutdown (`outbox.rs`): processor `X` dispatches to `T`, whose
/// one-slot queue is full, so the event waits in `X`'s outbox holding its entry in `T`'s
/// gate; `X` retries until it goes through, while `T` drains and a shutdown closes `T` and
/// tells it to stop. Whenever `T` finds it may exit, it must have popped the kept event: an
/// accepted event is never left behind.
///
/// (`T`'s real loop repeats that look until it may exit; the model takes one pass, since
/// loops that wait by yielding multiply loom's paths beyond what CI can explore, and one
/// pass is where the order is decided.)
#[test]
fn loom_an_outboxed_event_holds_its_gate_through_shutdown() {
    loom::model(|| {
        let target = processor(0, 1);
        assert!(target.try_push(message(0)).is_ok()); // the one slot is taken
        // This thread plays `X`: its dispatch finds the queue full and keeps the event.
        let own = processor(1, 1);
        set_current(0, own.id);
        assert!(own.send_from(&target, message(1), true).is_ok());
        assert_eq!(current_outbox_len(), 1);
        let shutdown = {
            let target = target.clone();
            thread::spawn(move || {
                target.close();
                target.request_stop();
            })
        };
        let one_pass = {
            let target = target.clone();
            thread::spawn(move || {
                let mut popped = 0;
                while target.queue.pop().is_some() {
                    popped += 1;
                }
                if target.may_exit(popped) {
                    assert_eq!(popped, 2, "may exit before the kept event was popped");
                }
                popped
            })
        };
        while own.retry_outbox(|_| Some(&*target)) == 0 {
            thread::yield_now();
        }
        shutdown.join().unwrap();
        let popped = one_pass.join().unwrap();
        // What the pass left is still queued: nothing is lost either way.
        assert_eq!(popped + target.queue.len(), 2);
    });
}

/// The end of a processor's life (`Runner::end_of_life`): its client's drop, after its
/// loop could have ended, dispatches to `T`, a processor of a pool that shuts down later,
/// whose queue is full; the event waits in `X`'s outbox, holding its entry in `T`'s gate,
/// and `X` keeps handing its outbox on before it exits. `T` drains, and may park, meanwhile;
/// only once `X` has exited is `T`'s pool shut down. The kept event must reach `T` (no lost
/// wake-up: loom reports a `T` parked for ever) and be popped before `T` exits.
#[test]
fn loom_an_event_dispatched_at_a_processors_end_of_life_is_run_by_a_later_pool() {
    loom::model(|| {
        let target = processor(0, 1);
        assert!(target.try_push(message(0)).is_ok()); // the one slot is taken
        let t = start(&target, None);
        // This thread plays `X` at its end of life: its client's drop dispatches.
        let own = processor(1, 1);
        set_current(0, own.id);
        assert!(own.send_from(&target, message(1), true).is_ok());
        // `X` turns until its outbox is empty (a timed park between turns: a yield here).
        while own.retry_outbox(|_| Some(&*target)) == 0 {
            thread::yield_now();
        }
        assert_eq!(current_outbox_len(), 0);
        // `X` has exited: the shutdown goes on to `T`'s pool.
        shut_down(&target);
        assert_eq!(t.join().unwrap(), 2, "T exited without the kept event");
    });
}

/// A batch enters once and adds its other entries after its pushes: the processor may pop
/// the first event, find the count matching what it popped, and park while the second
/// event is still to come. The addition then reads `SLEEPING` and the producer wakes it.
#[test]
fn loom_a_batch_that_counts_its_events_late_loses_no_wakeup() {
    loom::model(|| {
        let shared = processor(0, 4);
        let processor = start(&shared, Some(2));
        let mut batch = [message(1), message(2)].into_iter();
        let mut pushed = 0;
        assert!(shared.try_push_batch(&mut batch, &mut pushed).is_ok());
        assert_eq!(pushed, 2);
        assert_eq!(processor.join().unwrap(), 2);
    });
}

/// The `call` hand-off (`call.rs`), on the real slot and request: two calls in a row from
/// one thread, each answered by a processor thread, the first with a value and the second
/// by a request dropped unrun. The waiter never parks forever (loom would report the
/// deadlock), takes each answer once, and the late unpark of the first answer, which can
/// reach it during the second call, does not make the second call return early.
#[test]
fn loom_a_call_answer_is_never_lost_nor_taken_by_the_next_call() {
    loom::model(|| {
        let (slot, request) = call::request();
        let answering = thread::spawn(move || request.ran(InlineValue::new(7_u64)));
        match slot.wait() {
            Answer::Ran(value) => assert_eq!(value.take::<u64>().unwrap(), 7),
            other => panic!("first call: {other:?}"),
        }
        let (again, request) = call::request();
        let dropping = thread::spawn(move || drop(request));
        assert!(matches!(again.wait(), Answer::Dropped), "second call");
        answering.join().unwrap();
        dropping.join().unwrap();
    });
}

/// The `call_async` hand-off (`call.rs`), on the real task slot: a task polls for its
/// answer with a waker while a processor thread answers. The answer set under the lock
/// either is seen by the poll or finds the waker the poll left, so the task is always woken
/// (loom reports a park that nothing ends as a deadlock) and takes the answer once.
#[test]
fn loom_a_task_call_answer_always_wakes_its_task() {
    loom::model(|| {
        let (slot, request) = call::task_request();
        let answering = thread::spawn(move || request.ran(InlineValue::new(7_u64)));
        let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
        let answer = loop {
            match slot.poll(&waker) {
                Poll::Ready(answer) => break answer,
                Poll::Pending => thread::park(),
            }
        };
        match answer {
            Answer::Ran(value) => assert_eq!(value.take::<u64>().unwrap(), 7),
            other => panic!("{other:?}"),
        }
        assert!(slot.poll(&waker).is_pending(), "the answer is taken once");
        answering.join().unwrap();
    });
}

/// A waker that unparks a model thread (the task's thread, in a real runtime).
struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls the async door's real steps for `item` until it is done, parking between polls
/// as a task waits for its waker: a lost wake-up leaves this thread parked forever, which
/// loom reports as a deadlock.
fn poll_until_done(
    shared: &ProcessorShared<u64>,
    item: Item<u64>,
) -> Result<(), DispatchError<Item<u64>>> {
    let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
    let mut registration = None;
    let mut item = item;
    loop {
        match shared.poll_push(item, &waker, &mut registration, |i| shared.try_push(i)) {
            Door::Done(done) => return done,
            Door::Wait(back) => {
                item = back;
                thread::park();
            }
        }
    }
}

/// The async door (`waiters.rs`): a future finds the one-slot queue full and registers its
/// waker while the processor drains it. Either its retry succeeds or the processor sees
/// the registration and wakes it: the future always gets its event in, and the processor
/// handles both events.
#[test]
fn loom_a_future_waiting_for_room_is_woken_or_its_retry_succeeds() {
    loom::model(|| {
        let shared = processor(0, 1);
        assert!(shared.try_push(message(0)).is_ok()); // the one slot is taken
        let processor = start(&shared, Some(2));
        assert!(poll_until_done(&shared, message(1)).is_ok());
        assert_eq!(processor.join().unwrap(), 2);
    });
}

/// Shutdown closing the gate of a full queue (its processor stalled) wakes a future
/// waiting for room, which then gets its event back: none waits forever.
#[test]
fn loom_shutdown_wakes_a_future_waiting_for_room() {
    loom::model(|| {
        let shared = processor(0, 1);
        assert!(shared.try_push(message(0)).is_ok());
        let closing = {
            let shared = shared.clone();
            thread::spawn(move || shared.close())
        };
        assert!(matches!(
            poll_until_done(&shared, message(1)),
            Err(DispatchError::ShutDown(_))
        ));
        closing.join().unwrap();
    });
}

/// A client whose drops are counted.
struct Counted(Arc<loom::sync::atomic::AtomicUsize>);

impl crate::client::Client<u64> for Counted {}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, loom::sync::atomic::Ordering::SeqCst);
    }
}

/// The register hand-off (`slots.rs`), on the real `hand_in`, slot lock and arrivals: a
/// client is registered while a shutdown closes the processor, and a second thread, given
/// the key once `hand_in` returned, dispatches to it. The processor adopts the client at
/// that event (never finds it missing: the event is never stale) or, if no event reached
/// it, takes it from the arrivals at exit; a refused registration drops it on the caller.
/// Either way the client is dropped exactly once.
#[test]
fn loom_a_registered_client_is_found_by_its_first_event_or_dropped_at_exit() {
    loom::model(|| {
        let shared = processor(0, 2);
        let processor = {
            let me = shared.clone();
            let handle = thread::spawn(move || {
                let (mut popped, mut adopted, mut stale) = (0, 0, 0);
                loop {
                    while let Some(item) = me.queue.pop() {
                        popped += 1;
                        if let Item::Message { key, .. } = item {
                            let client = me.slots.lock().unwrap().adopt(key);
                            match client {
                                Some(client) => {
                                    adopted += 1;
                                    drop(client);
                                }
                                None => stale += 1,
                            }
                        }
                    }
                    if me.may_exit(popped) {
                        let left: Vec<_> = me.slots.lock().unwrap().take_arrivals().collect();
                        return (adopted, stale, left.len());
                    }
                    if me.stop_requested() {
                        me.sleep(popped, thread::yield_now, false);
                    } else {
                        me.sleep(popped, thread::park, true);
                    }
                }
            });
            assert!(shared.thread.set(handle.thread().clone()).is_ok());
            handle
        };
        let shutdown = {
            let shared = shared.clone();
            thread::spawn(move || shut_down(&shared))
        };
        let drops = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let registered = shared
            .hand_in(Counted(drops.clone()))
            .map_err(|(reason, client)| {
                // Refused, the client comes back: dropped here, counted like any drop.
                drop(client);
                reason
            });
        let dispatched = registered.as_ref().ok().map(|&key| {
            let shared = shared.clone();
            thread::spawn(move || shared.try_push(Item::Message { key, message: 0 }).is_ok())
        });
        let accepted = dispatched.map(|d| d.join().unwrap());
        shutdown.join().unwrap();
        let (adopted, stale, taken_at_exit) = processor.join().unwrap();
        assert_eq!(stale, 0, "an event with the new key found no client");
        match (registered, accepted) {
            (Err(crate::error::RegisterRefusal::ShutDown), None) => {
                assert_eq!((adopted, taken_at_exit), (0, 0));
            }
            (Ok(_), Some(true)) => assert_eq!((adopted, taken_at_exit), (1, 0)),
            (Ok(_), Some(false)) => assert_eq!((adopted, taken_at_exit), (0, 1)),
            other => panic!("impossible outcome {other:?}"),
        }
        assert_eq!(drops.load(loom::sync::atomic::Ordering::SeqCst), 1);
    });
}

/// `execute_on_all`'s all or nothing, on the real `enter_all` and a push under each entry:
/// racing a shutdown that closes and stops both processors of a pool, its events are
/// accepted by both or by neither (never one), and a processor that finds it may exit has
/// popped its event first. (Each processor takes one pass, as in the outbox's model: its
/// real loop repeats that look until it may exit.)
#[test]
fn loom_execute_on_all_reaches_every_processor_or_none_through_shutdown() {
    loom::model(|| {
        let pool = [processor(0, 1), processor(1, 1)];
        let shutdown = {
            let pool = pool.clone();
            thread::spawn(move || {
                pool.iter().for_each(|p| p.close());
                pool.iter().for_each(|p| p.request_stop());
            })
        };
        let passes: Vec<_> = pool
            .iter()
            .map(|p| {
                let p = p.clone();
                thread::spawn(move || {
                    let mut popped = 0;
                    while p.queue.pop().is_some() {
                        popped += 1;
                    }
                    (popped, p.may_exit(popped))
                })
            })
            .collect();
        let entered = ProcessorShared::enter_all(pool.iter().map(|p| &**p))
            .map(|entries| entries.into_iter().for_each(|e| e.push_waiting(message(1))))
            .is_some();
        shutdown.join().unwrap();
        let expected = usize::from(entered);
        for (p, pass) in pool.iter().zip(passes) {
            let (popped, may_exit) = pass.join().unwrap();
            assert!(
                !may_exit || popped == expected,
                "may exit before its event was popped"
            );
            // What the pass left is still queued: accepted by both or by neither.
            assert_eq!(popped + p.queue.len(), expected, "entered: {entered}");
        }
    });
}

/// A blocking dispatch (`room.rs`) into a full one-slot queue: the producer registers its
/// thread's waker, retries through the gate, and parks (untimed under loom) while the
/// processor drains and looks at its waiters within its run. Either the retry succeeds
/// or the processor wakes the producer: a lost wake-up would leave the producer parked
/// forever, which loom reports as a deadlock.
#[test]
fn loom_a_producer_blocked_on_a_full_queue_is_woken_or_its_retry_succeeds() {
    loom::model(|| {
        let shared = processor(0, 1);
        assert!(shared.try_push(message(0)).is_ok()); // the one slot is taken
        let me = shared.clone();
        let processor = thread::spawn(move || run_processor_waking_in_runs(&me, Some(3)));
        assert!(shared.thread.set(processor.thread().clone()).is_ok());
        // On a thread of its own: a late wake (of a registration taken just before its
        // withdrawal) may unpark it after it is done, which under loom would end the
        // main thread's join.
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || {
                // Two in a row: the second registers again after the first's wake.
                assert!(shared.push(message(1), Wait::Forever).is_ok());
                assert!(shared.push(message(2), Wait::Forever).is_ok());
            })
        };
        producer.join().unwrap();
        assert_eq!(processor.join().unwrap(), 3);
    });
}

/// A blocking batch of three packs (`pack.rs`) into a queue whose pool has two: the
/// third waits for a free pack by the waiter protocol (register, retry through the gate,
/// park, untimed under loom) while the processor hands packs back and looks at its
/// waiters within its run. Either the retry finds a pack or the processor wakes the
/// producer; a lost wake-up leaves it parked forever, which loom reports as a deadlock.
#[test]
fn loom_a_batch_waiting_for_a_free_pack_is_woken_or_its_retry_finds_one() {
    loom::model(|| {
        let shared = processor(0, 2 * PACK);
        let me = shared.clone();
        let processor = thread::spawn(move || {
            let mut handled = 0;
            let mut events = 0;
            let mut waking = Vec::new();
            while handled < 3 {
                while let Some(item) = me.queue.pop() {
                    handled += 1;
                    if let Item::Pack { events: pack, .. } = item {
                        events += pack.len();
                        me.give_back_pack(pack);
                    }
                    me.wake_waiters(handled, &mut waking);
                }
                me.wake_waiters(handled, &mut waking);
                if handled < 3 {
                    me.sleep(handled, thread::park, true);
                }
            }
            events
        });
        assert!(shared.thread.set(processor.thread().clone()).is_ok());
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || {
                let key = ClientKey {
                    slot: 0,
                    generation: 0,
                };
                let mut events = (0..3 * PACK as u64).map(Event::Message);
                let mut pushed = 0;
                assert!(shared.push_packed(key, &mut events, &mut pushed).is_ok());
                pushed
            })
        };
        assert_eq!(producer.join().unwrap(), 3 * PACK);
        assert_eq!(processor.join().unwrap(), 3 * PACK);
    });
}

/// Shutdown closing the gate of a full queue (its processor stalled) wakes a producer
/// blocked in `dispatch`, which then gets its event back: none waits forever.
#[test]
fn loom_shutdown_wakes_a_producer_blocked_on_a_full_queue() {
    loom::model(|| {
        let shared = processor(0, 1);
        assert!(shared.try_push(message(0)).is_ok());
        let closing = {
            let shared = shared.clone();
            thread::spawn(move || shared.close())
        };
        assert!(matches!(
            shared.push(message(1), Wait::Forever),
            Err(DispatchError::ShutDown(_))
        ));
        closing.join().unwrap();
    });
}

/// The timer protocol of `timers.rs`, on the real `TimerSlots`: a cancel racing the fire
/// of the same timer, while the processor frees the slot and a scheduler takes it again.
/// Exactly one of the cancel and the fire wins, and the cancel of the old token never
/// reaches the slot's next timer.
#[test]
fn loom_a_timer_is_cancelled_or_run_never_both_and_a_stale_token_cancels_nothing() {
    use crate::timers::TimerSlots;
    loom::model(|| {
        let slots = Arc::new(TimerSlots::new(1));
        let (slot, first) = slots.take(10).expect("one free slot");
        let canceller = {
            let slots = slots.clone();
            thread::spawn(move || slots.cancel(slot, first))
        };
        let ran = slots.fire(slot);
        slots.release(slot);
        let (again, second) = slots.take(20).expect("the slot came back");
        let cancelled = canceller.join().unwrap();
        assert_eq!(again, slot);
        assert!(second > first, "a new generation");
        assert!(
            ran != cancelled,
            "ran {ran}, cancelled {cancelled}: exactly one wins"
        );
        // The next timer of the slot is pending: the old token did not touch it.
        assert!(slots.cancel(slot, second));
        assert!(!slots.fire(slot));
    });
}

/// A processor of queue capacity 2 with one timer.
fn with_one_timer() -> Arc<ProcessorShared<u64>> {
    let id = ProcessorId {
        client_type: ClientType::Queue,
        index: 0,
    };
    Arc::new(ProcessorShared::new(
        id,
        PoolConfig::new(1).capacity(2).timers(1),
    ))
}

/// A timer scheduled to a processor about to sleep (`push_timer`, through its gate onto its
/// arrivals) wakes it, by the wake protocol of any event: no lost wake-up, so a timer is
/// never left waiting for an unrelated event.
#[test]
fn loom_a_timer_scheduled_to_a_sleeping_processor_wakes_it() {
    loom::model(|| {
        let shared = with_one_timer();
        let processor = {
            let shared = shared.clone();
            thread::spawn(move || {
                loop {
                    if let Some((slot, callback)) = shared.timers.arrivals.pop() {
                        drop(callback);
                        return slot;
                    }
                    // Nothing popped yet: the gate's count is what the sleep weighs.
                    shared.sleep(0, thread::park, true);
                }
            })
        };
        assert!(shared.thread.set(processor.thread().clone()).is_ok());
        let (slot, _) = shared.timers.take(0).expect("one free timer");
        assert!(
            shared
                .push_timer(slot, zerodispatch_callback::Callback::new(|| ()))
                .is_ok()
        );
        assert_eq!(processor.join().unwrap(), slot);
    });
}

/// A cancel racing a sleeping processor that holds the timer (or is about to take its
/// arrival): the reclaim, pushed under the gate like the arrival, wakes it, and the slot is
/// freed at the processor's next turn, by one of the two paths, never both and never lost.
#[test]
fn loom_a_cancelled_timer_is_reclaimed_by_a_woken_processor() {
    loom::model(|| {
        let shared = with_one_timer();
        let processor = {
            let shared = shared.clone();
            thread::spawn(move || {
                let mut popped = 0_usize;
                let mut held = None;
                loop {
                    while let Some((slot, callback)) = shared.timers.arrivals.pop() {
                        popped += 1;
                        let (generation, cancelled) = shared.timers.current(slot);
                        if cancelled {
                            shared.timers.release(slot);
                            drop(callback);
                            return "cancelled before taken";
                        }
                        held = Some((slot, generation, callback));
                    }
                    while let Some((slot, generation)) = shared.timers.next_cancelled() {
                        popped += 1;
                        if held
                            .as_ref()
                            .is_some_and(|(s, g, _)| (*s, *g) == (slot, generation))
                        {
                            shared.timers.release(slot);
                            drop(held.take());
                            return "reclaimed";
                        }
                    }
                    shared.sleep(popped, thread::park, true);
                }
            })
        };
        assert!(shared.thread.set(processor.thread().clone()).is_ok());
        let (slot, generation) = shared.timers.take(0).expect("one free timer");
        assert!(
            shared
                .push_timer(slot, zerodispatch_callback::Callback::new(|| ()))
                .is_ok()
        );
        assert!(
            shared.timers.cancel(slot, generation),
            "not run: it is not due"
        );
        shared.push_reclaim(slot, generation);
        let _how = processor.join().unwrap();
        assert_eq!(shared.timers.in_use(), 0, "the slot is free");
    });
}
