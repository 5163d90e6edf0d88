//! The stepped dispatcher of `zerodispatch_core::testing`: the client contract, stepped.

mod common;

use common::*;
use zerodispatch_core::testing::TestDispatcher;

/// What the clients here saw, each line naming the client.
type Log = Arc<Mutex<Vec<String>>>;

/// Adds `line` to `log`.
fn note(log: &Log, line: String) {
    log.lock().unwrap().push(line);
}

/// A callback that notes "timer {ms}" in `log`.
fn timer(log: &Log, ms: u64) -> Callback {
    let log = log.clone();
    Callback::new(move || note(&log, format!("timer {ms}")))
}

/// Logs its events and flushes; forwards messages above 100 to `next`, minus 100.
struct Logger {
    name: &'static str,
    log: Log,
    next: Option<ClientHandle>,
}

impl Client<u64> for Logger {
    fn on_message(&mut self, n: u64, ctx: &mut Context<u64>) {
        note(&self.log, format!("{} got {n}", self.name));
        if let (Some(next), true) = (self.next, n > 100) {
            let forwarded = ctx.dispatcher().dispatch(next, Event::Message(n - 100));
            forwarded.unwrap();
        }
    }
    fn flush(&mut self, _ctx: &mut Context<u64>) {
        note(&self.log, format!("{} flush", self.name));
    }
}

/// A stepped dispatcher of one session processor and a queue pool.
fn stepped(queue: PoolConfig) -> TestDispatcher<u64> {
    stepped_with(PoolConfig::new(1), queue)
}

/// A stepped dispatcher of a session pool and a queue pool.
fn stepped_with(sessions: PoolConfig, queues: PoolConfig) -> TestDispatcher<u64> {
    let builder = queue_pool(queues).pool(ClientType::Session, sessions);
    builder.build_stepped().unwrap()
}

/// `client` registered on the least loaded processor of type `t`.
fn on<C: Client<u64>>(test: &TestDispatcher<u64>, t: ClientType, client: C) -> ClientHandle<C> {
    test.register(t, client, Placement::LeastLoaded).unwrap()
}

/// A [`Logger`] named `name` on a processor of type `t`.
fn logger(
    test: &TestDispatcher<u64>,
    t: ClientType,
    name: &'static str,
    log: &Log,
    next: Option<ClientHandle>,
) -> ClientHandle<Logger> {
    let log = log.clone();
    on(test, t, Logger { name, log, next })
}

/// Asks to be flushed again at every flush.
struct Restless;

impl Client<u64> for Restless {
    fn flush(&mut self, ctx: &mut Context<u64>) {
        ctx.flush_again();
    }
}

/// A stepped dispatcher with a [`Logger`] named "q" on its queue pool, and the log.
fn logged_queue(queue: PoolConfig) -> (TestDispatcher<u64>, Log, ClientHandle<Logger>) {
    let test = stepped(queue);
    let log = Log::default();
    let q = logger(&test, ClientType::Queue, "q", &log, None);
    (test, log, q)
}

fn taken(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[test]
fn nothing_runs_until_stepped_then_a_drain_flushes_and_max_batch_flushes_a_queue_that_never_drains()
{
    let (test, log, q) = logged_queue(PoolConfig::new(1).max_batch(2));
    dispatch_all(&test, q, 1..=5);
    assert!(taken(&log).is_empty(), "no thread ran anything");
    assert_eq!(test.run_until_idle(), 5);
    let expected = [
        "q got 1", "q got 2", "q flush", "q got 3", "q got 4", "q flush", "q got 5", "q flush",
    ];
    assert_eq!(taken(&log), expected);
    assert_eq!(test.run_until_idle(), 0, "idle");
}

#[test]
fn a_client_dispatching_to_another_processor_goes_through_its_outbox_when_the_queue_is_full() {
    let (test, log, q) = logged_queue(PoolConfig::new(1).capacity(2));
    let s = logger(&test, ClientType::Session, "s", &log, Some(q.erase()));
    dispatch_all(&test, s, [101, 102, 103, 104]);
    test.run_until_idle();
    let log = taken(&log);
    let q_got: Vec<_> = log.iter().filter(|l| l.starts_with("q got")).collect();
    let expected = ["q got 1", "q got 2", "q got 3", "q got 4"];
    assert_eq!(q_got, expected, "{log:?}");
    let outboxed = total(&test, |p| p.outboxed);
    let why = "a queue of 2 took four from one drain";
    assert!(outboxed >= 2, "{why}: {outboxed} outboxed");
}

#[test]
fn a_dispatch_to_a_full_queue_hands_the_event_back_instead_of_waiting() {
    let (test, _log, q) = logged_queue(PoolConfig::new(1).capacity(2));
    dispatch_all(&test, q, [1, 2]);
    let back = test.dispatch(q, Event::Message(3)).unwrap_err();
    assert!(back.is_full());
    assert!(matches!(back.into_inner(), Event::Message(3)));
    test.run_until_idle();
    test.dispatch(q, Event::Message(3)).unwrap();
    assert_eq!(test.run_until_idle(), 1);
}

#[test]
fn call_and_synchronize_step_the_processors_and_answer() {
    let (test, log, q) = logged_queue(PoolConfig::new(1));
    test.dispatch(q, Event::Message(7)).unwrap();
    let on = test.handle();
    let seen = test.call(q, move || on.current_processor()).unwrap();
    assert_eq!(seen, Some(q.processor()), "ran as that processor");
    let why = "everything before the call first";
    assert_eq!(taken(&log), ["q got 7", "q flush"], "{why}");
    let why = "the test's thread between steps";
    assert_eq!(test.current_processor(), None, "{why}");
    test.dispatch(q, Event::Message(8)).unwrap();
    test.synchronize(q).unwrap();
    assert_eq!(taken(&log), ["q got 8", "q flush"]);
}

/// A `call` whose queue was filled between its run and its push is retried, not `ShutDown`.
#[test]
fn a_call_to_a_queue_another_thread_fills_meanwhile_is_answered_not_reported_shut_down() {
    use std::future::Future;
    use std::task::{Context as TaskContext, Poll, Waker};
    let test = stepped(PoolConfig::new(1).capacity(1));
    let q = on(&test, ClientType::Queue, Sink);
    let stop = Arc::new(AtomicBool::new(false));
    let pushed = Arc::new(AtomicU64::new(0));
    let filler = {
        let (handle, stop, pushed) = (test.handle(), stop.clone(), pushed.clone());
        // A push now and then, at no fixed phase, never at every turn of the processors.
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if handle.dispatch(q, Event::Message(1)).is_ok() {
                    pushed.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_micros(1));
            }
        })
    };
    let start = Instant::now();
    let mut calls = 0_u64;
    while start.elapsed() < Duration::from_millis(500) || pushed.load(Ordering::Relaxed) < 100 {
        assert_eq!(test.call(q, move || calls), Ok(calls), "call {calls}");
        // The async form, which a stepped dispatcher answers at its first poll.
        let mut answer = std::pin::pin!(test.call_async(q, move || calls + 1));
        let polled = answer
            .as_mut()
            .poll(&mut TaskContext::from_waker(Waker::noop()));
        assert_eq!(polled, Poll::Ready(Ok(calls + 1)), "call_async {calls}");
        calls += 1;
    }
    stop.store(true, Ordering::Relaxed);
    filler.join().unwrap();
}

#[test]
fn timers_run_when_the_test_moves_the_clock_in_deadline_order_after_a_flush() {
    let (test, log, q) = logged_queue(PoolConfig::new(1));
    let start = test.now();
    for ms in [30_u64, 10, 20] {
        let at = start + Duration::from_millis(ms);
        test.schedule(q, at, timer(&log, ms)).unwrap();
    }
    let never = Callback::new(|| panic!("cancelled"));
    let in_15_ms = Duration::from_millis(15);
    let cancelled = test.schedule_in(q, in_15_ms, never).unwrap();
    test.run_until_idle();
    assert!(taken(&log).is_empty(), "the clock has not moved");
    assert!(test.cancel(cancelled));
    test.dispatch(q, Event::Message(1)).unwrap();
    test.advance(Duration::from_millis(20));
    assert_eq!(taken(&log), ["q got 1", "q flush", "timer 10", "timer 20"]);
    assert_eq!(test.now(), start + Duration::from_millis(20));
    test.advance(Duration::from_millis(10));
    assert_eq!(taken(&log), ["timer 30"]);
    let pending = test.stats()[1].timers_pending;
    assert_eq!(pending, 0, "the cancelled one dropped at its deadline");
}

#[test]
fn unregister_flushes_first_and_shutdown_drains_flushes_and_drops() {
    let (mut test, log, q) = logged_queue(PoolConfig::new(1));
    let r = logger(&test, ClientType::Queue, "r", &log, None);
    test.dispatch(q, Event::Message(1)).unwrap();
    test.unregister(q).unwrap();
    test.run_until_idle();
    assert_eq!(taken(&log), ["q got 1", "q flush"]);
    let why = "accepted, then stale";
    assert!(test.dispatch(q, Event::Message(2)).is_ok(), "{why}");
    test.run_until_idle();
    assert_eq!(total(&test, |s| s.stale), 1);
    let dropped = Arc::new(());
    let keep = dropped.clone();
    test.dispatch(r, Event::Message(3)).unwrap();
    let timer = Callback::new(move || drop(keep));
    test.schedule_in(r, Duration::from_secs(1), timer).unwrap();
    test.shutdown();
    let why = "drained and flushed at shutdown";
    assert_eq!(taken(&log), ["r got 3", "r flush"], "{why}");
    let why = "the timer not due dropped unrun";
    assert_eq!(Arc::strong_count(&dropped), 1, "{why}");
    let refused = test.dispatch(r, Event::Message(4)).unwrap_err();
    assert!(refused.is_shut_down());
    assert_eq!(test.run_until_idle(), 0);
}

#[test]
#[should_panic(expected = "still busy after")]
fn a_client_that_asks_to_be_flushed_again_at_every_flush_is_reported_not_stepped_for_ever() {
    let test = stepped(PoolConfig::new(1));
    let r = on(&test, ClientType::Queue, Restless);
    test.dispatch(r, Event::Message(1)).unwrap();
    test.run_until_idle();
}

/// Forwards its buffer to `to` at flush; records on drop which processor it is on.
struct Forwarding {
    pending: Vec<u64>,
    to: ClientHandle,
    dropped_on: Arc<Mutex<Option<Option<ProcessorId>>>>,
    handle: DispatcherHandle<u64>,
}

impl Client<u64> for Forwarding {
    fn on_message(&mut self, n: u64, _ctx: &mut Context<u64>) {
        self.pending.push(n);
    }
    fn flush(&mut self, ctx: &mut Context<u64>) {
        let dispatcher = ctx.dispatcher();
        for n in self.pending.drain(..) {
            dispatcher.dispatch(self.to, Event::Message(n)).unwrap();
        }
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        *self.dropped_on.lock().unwrap() = Some(self.handle.current_processor());
    }
}

#[test]
fn shutdown_goes_pool_by_pool_as_on_threads_and_clients_are_dropped_on_their_processor() {
    let mut test = stepped(PoolConfig::new(1));
    let log = Log::default();
    let session = logger(&test, ClientType::Session, "s", &log, None);
    let dropped_on = Arc::new(Mutex::new(None));
    let (pending, to, handle) = (Vec::new(), session.erase(), test.handle());
    let forwarding = Forwarding {
        pending,
        to,
        dropped_on: dropped_on.clone(),
        handle,
    };
    let queue = on(&test, ClientType::Queue, forwarding);
    test.dispatch(queue, Event::Message(5)).unwrap();
    // The queues stop first: the queue's last flush reaches the session, still running.
    test.shutdown();
    assert_eq!(taken(&log), ["s got 5", "s flush"]);
    assert_eq!(*dropped_on.lock().unwrap(), Some(Some(queue.processor())));
}

/// Dispatches `n` to `to` from its drop, as a client that says goodbye at shutdown does.
struct SaysGoodbye {
    to: ClientHandle<Logger>,
    handle: DispatcherHandle<u64>,
    n: u64,
}

impl Client<u64> for SaysGoodbye {}

impl Drop for SaysGoodbye {
    fn drop(&mut self) {
        let accepted = self.handle.dispatch(self.to, Event::Message(self.n));
        accepted.expect("accepted: the session pool shuts down after the queues");
    }
}

#[test]
fn an_event_a_client_dispatches_from_its_drop_at_shutdown_is_run_though_the_target_queue_is_full() {
    let mut test = stepped_with(PoolConfig::new(1).capacity(2), PoolConfig::new(1));
    let log = Log::default();
    let session = logger(&test, ClientType::Session, "s", &log, None);
    let (to, handle, n) = (session, test.handle(), 99);
    on(&test, ClientType::Queue, SaysGoodbye { to, handle, n });
    // The session's queue is full at the drop: the goodbye waits in the outbox, handed on.
    dispatch_all(&test, session, [1, 2]);
    test.shutdown();
    let expected = ["s got 1", "s got 2", "s flush", "s got 99", "s flush"];
    assert_eq!(taken(&log), expected);
}

#[test]
fn advance_runs_the_timers_of_every_processor_in_deadline_order() {
    let (test, log) = (one_queue_stepped(PoolConfig::new(2)), Log::default());
    let queues = test.processors(ClientType::Queue);
    // The later deadline on the processor stepped first.
    for (processor, ms) in [(queues[0], 2_u64), (queues[1], 1)] {
        let after = Duration::from_millis(ms);
        test.schedule_in(processor, after, timer(&log, ms)).unwrap();
    }
    test.run_until_idle();
    test.advance(Duration::from_millis(3));
    assert_eq!(taken(&log), ["timer 1", "timer 2"]);
}

#[test]
#[should_panic(expected = "Restless` (slot 0) asks to be flushed again")]
fn a_shutdown_that_a_client_keeps_asking_to_be_flushed_fails_naming_it_as_threads_would_hang() {
    let mut test = stepped(PoolConfig::new(1));
    let r = on(&test, ClientType::Queue, Restless);
    test.dispatch(r, Event::Message(1)).unwrap();
    test.shutdown();
}
