//! Timers: deadline order, flush first, cancellation, a full set, repeating, shutdown.

mod common;

use common::*;

/// One queue processor with room for `timers` timers, and its id.
fn dispatcher(timers: usize) -> (Dispatcher<u64>, ProcessorId) {
    let d = one_queue(PoolConfig::new(1).timers(timers));
    let queue = first_queue(&d);
    (d, queue)
}

#[test]
fn timers_run_in_deadline_order_whatever_the_order_they_were_scheduled_in() {
    let (d, queue) = dispatcher(16);
    let (tx, rx) = mpsc::channel();
    let start = d.now();
    for ms in [30_u64, 10, 20, 10, 0] {
        let tx = tx.clone();
        let at = start + Duration::from_millis(ms);
        d.schedule(queue, at, move || tx.send(ms).unwrap()).unwrap();
    }
    let order: Vec<u64> = (0..5).map(|_| rx.recv().unwrap()).collect();
    assert_eq!(order, [0, 10, 10, 20, 30]);
    let why = "none ran early";
    assert!(d.now() >= start + Duration::from_millis(30), "{why}");
    let stats = &d.stats()[0];
    assert_eq!((stats.timers_fired, stats.timers_pending), (5, 0));
}

/// A client that buffers what it receives and writes it out at its flush.
struct Buffering {
    pending: Vec<u64>,
    out: Arc<Mutex<Vec<String>>>,
}

impl Client<u64> for Buffering {
    fn on_message(&mut self, n: u64, _ctx: &mut Context<u64>) {
        self.pending.push(n);
    }
    fn flush(&mut self, _ctx: &mut Context<u64>) {
        for n in self.pending.drain(..) {
            self.out.lock().unwrap().push(format!("sent {n}"));
        }
    }
}

#[test]
fn a_timer_runs_after_the_clients_are_flushed() {
    let (d, _) = dispatcher(4);
    let out = Arc::new(Mutex::new(Vec::new()));
    let (pending, seen) = (Vec::new(), out.clone());
    let client = on_queue(&d, Buffering { pending, out: seen });
    // Hold the processor so that the message and the due timer are handled in one turn.
    let held = block_processor(&d, client);
    let seen = out.clone();
    let timer = Callback::new(move || seen.lock().unwrap().push("timer".into()));
    d.schedule(client, d.now(), timer).unwrap();
    d.dispatch(client, Event::Message(1)).unwrap();
    held.wait();
    d.synchronize(client).unwrap();
    let both = "the message sent and the timer run";
    eventually(both, || out.lock().unwrap().len() >= 2);
    assert_eq!(*out.lock().unwrap(), ["sent 1", "timer"]);
}

#[test]
fn a_cancelled_timer_never_runs_and_its_captures_are_dropped() {
    let (d, queue) = dispatcher(4);
    let (ran, captured) = (Counter::default(), Arc::new(()));
    let (r, keep) = (ran.clone(), captured.clone());
    let timer = Callback::new(move || {
        let _keep = &keep;
        r.incr();
    });
    let in_20_ms = Duration::from_millis(20);
    let token = d.schedule_in(queue, in_20_ms, timer).unwrap();
    assert_eq!(token.processor(), queue);
    assert!(d.cancel(token));
    assert!(!d.cancel(token), "cancelled once only");
    // At its deadline the processor drops it unrun and frees its slot.
    let dropped = "the cancelled timer dropped";
    eventually(dropped, || Arc::strong_count(&captured) <= 1);
    assert_eq!(ran.get(), 0);
    assert_eq!(d.stats()[0].timers_fired, 0);
    // A token of another dispatcher cancels nothing.
    let (other, _) = dispatcher(4);
    let mine = d.schedule_in(queue, Duration::from_secs(60), Callback::new(|| ()));
    let mine = mine.unwrap();
    assert!(!other.cancel(mine));
    assert!(d.cancel(mine));
}

#[test]
fn a_full_set_of_timers_hands_the_callback_back_and_frees_as_they_run() {
    let (d, queue) = dispatcher(2);
    let later = d.now() + Duration::from_secs(60);
    let a = d.schedule(queue, later, Callback::new(|| ())).unwrap();
    d.schedule(queue, later, Callback::new(|| ())).unwrap();
    let (tx, rx) = mpsc::channel();
    let three = Callback::new(move || tx.send(3).unwrap());
    let refused = d.schedule(queue, d.now(), three).unwrap_err();
    assert!(matches!(refused, DispatchError::TimersFull(_)));
    assert_eq!(d.stats()[0].timers_pending, 2);
    // Nothing lost: the callback comes back and runs elsewhere.
    refused.into_inner().call();
    assert_eq!(rx.recv().unwrap(), 3);
    // A cancelled timer's slot comes back at the next turn, not at its deadline.
    assert!(d.cancel(a));
    let freed = || d.stats()[0].timers_pending <= 1;
    let why = "the cancelled timer's slot never came back";
    eventually_within(Duration::from_secs(5), why, freed);
    d.schedule(queue, later, Callback::new(|| ())).unwrap();
    // No timers at all: every schedule is refused, and an impossible count is an error.
    let (none, q) = dispatcher(0);
    let refused = none.schedule(q, none.now(), Callback::new(|| ()));
    assert!(matches!(refused, Err(DispatchError::TimersFull(_))));
    let too_many = PoolConfig::new(1).timers(MAX_CAPACITY + 1);
    assert!(queue_pool::<u64>(too_many).build().is_err());
}

#[test]
fn a_timer_that_reschedules_itself_from_its_processor_repeats() {
    let (d, queue) = dispatcher(2);
    let ticks = Counter::default();
    fn tick(d: DispatcherHandle<u64>, queue: ProcessorId, ticks: Counter) {
        if ticks.add(1) + 1 < 5 {
            let next = d.clone();
            let next = Callback::new(move || tick(next, queue, ticks));
            d.schedule_in(queue, Duration::from_millis(1), next)
                .unwrap();
        }
    }
    let (h, t) = (d.handle(), ticks.clone());
    let first = Callback::new(move || tick(h, queue, t));
    d.schedule_in(queue, Duration::ZERO, first).unwrap();
    eventually("five ticks", || ticks.get() >= 5);
    d.synchronize(queue).unwrap();
    assert_eq!(d.stats()[0].timers_fired, 5);
}

#[test]
fn timers_not_due_at_shutdown_are_dropped_unrun_and_later_schedules_refused() {
    let (mut d, queue) = dispatcher(4);
    let captured = Arc::new(());
    let keep = captured.clone();
    let timer = Callback::new(move || drop(keep));
    let in_an_hour = Duration::from_secs(3600);
    d.schedule_in(queue, in_an_hour, timer).unwrap();
    let handle = d.handle();
    d.shutdown();
    let why = "dropped at the exit, unrun";
    assert_eq!(Arc::strong_count(&captured), 1, "{why}");
    let refused = handle.schedule(queue, handle.now(), Callback::new(|| ()));
    assert!(matches!(refused, Err(DispatchError::ShutDown(_))));
    assert_eq!(handle.stats()[0].timers_pending, 0, "its slot freed");
}

#[test]
fn a_timer_counts_in_processed_and_spilled_when_it_runs_and_a_cancelled_one_never_does() {
    let test = one_queue_stepped(PoolConfig::new(1).timers(4));
    let queue = first_queue(&test);
    let big = [7_u64; 8]; // 64 bytes: too big for the inline space
    let spilled = || Callback::spill(move || assert_eq!(std::hint::black_box(big)[0], 7));
    let ms = Duration::from_millis(1);
    let cancelled = test.schedule_in(queue, ms, spilled()).unwrap();
    test.run_until_idle(); // taken in
    assert!(test.cancel(cancelled));
    test.advance(Duration::from_millis(2));
    let stats = &test.stats()[0];
    let counts = (stats.processed, stats.enqueued, stats.spilled);
    assert_eq!(counts, (0, 0, 0), "{stats:?}");
    test.schedule_in(queue, ms, spilled()).unwrap();
    test.advance(Duration::from_millis(2));
    let s = &test.stats()[0];
    let counts = (s.processed, s.enqueued, s.spilled, s.timers_fired);
    assert_eq!(counts, (1, 1, 1, 1), "{s:?}");
}
