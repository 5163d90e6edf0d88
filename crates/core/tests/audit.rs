//! Regressions from the outside audit, each failing before its fix; former hangs run watched.

#![cfg(not(loom))]

mod common;

use common::*;
use zerodispatch_testkit::within;

const TEN_S: Duration = Duration::from_secs(10);

// 1. A processor never waits for another processor ------------------------------------

/// Bounces each message to its peer (`.0`) with one hop less; counts those that end (`.1`).
struct Bouncer(Arc<Mutex<Option<ClientHandle>>>, Counter);

impl Client<u64> for Bouncer {
    fn on_message(&mut self, hops: u64, ctx: &mut Context<u64>) {
        let peer = self.0.lock().unwrap().expect("peer set before traffic");
        let dispatcher = ctx.dispatcher();
        // Ended here, or refused (outbox full): counted either way, so that conservation holds.
        if hops == 0 || dispatcher.dispatch(peer, Event::Message(hops - 1)).is_err() {
            self.1.incr();
        }
    }
}

/// Two processors bouncing through queues of 8 under overload never wait for each other.
#[test]
fn two_processors_dispatching_to_each_other_on_tiny_queues_never_deadlock() {
    const PRODUCERS: u64 = 4;
    const PER_PRODUCER: u64 = 2_000;
    const HOPS: u64 = 6;
    let tiny = PoolConfig::new(2).capacity(8).outbox_capacity(64);
    let d = Arc::new(one_queue(tiny));
    let ended = Counter::default();
    let peers: [Arc<Mutex<_>>; 2] = Default::default();
    let bouncer = |i: usize| Bouncer(peers[i].clone(), ended.clone());
    let handles = [0, 1].map(|i| on_queue_processor(&d, i as u16, bouncer(i)));
    *peers[0].lock().unwrap() = Some(handles[1].erase());
    *peers[1].lock().unwrap() = Some(handles[0].erase());
    let (total, ended_in_time, dd) = (PRODUCERS * PER_PRODUCER, ended.clone(), d.clone());
    let what = "a cycle of two processors on queues of 8";
    within(Duration::from_secs(60), what, move || {
        let d = &dd;
        thread::scope(|s| {
            for p in 0..PRODUCERS {
                let target = handles[(p % 2) as usize];
                s.spawn(move || {
                    for _ in 0..PER_PRODUCER {
                        d.dispatch(target, Event::Message(HOPS)).unwrap();
                    }
                });
            }
        });
        let all_ended = "every message finishes or is refused";
        eventually(all_ended, || ended_in_time.get() as u64 == total);
    });
    let outboxed: u64 = d.stats().iter().map(|s| s.outboxed).sum();
    assert!(outboxed > 0, "the test never filled a queue");
    assert_eq!(ended.get() as u64, total);
}

/// 15: two clients that `synchronize` on each other are refused, not deadlocked.
#[test]
fn synchronize_on_a_processor_thread_is_refused_so_two_cannot_wait_for_each_other() {
    let d = one_queue(PoolConfig::new(2));
    let a = recorder_at(&d, Placement::Processor(0)).0;
    let b = recorder_at(&d, Placement::Processor(1)).0;
    let barrier = Arc::new(Barrier::new(2));
    let results = Arc::new(Mutex::new(Vec::new()));
    for (me, other) in [(a, b), (b, a)] {
        let (handle, barrier, results) = (d.handle(), barrier.clone(), results.clone());
        let wait_for_other = Callback::spill(move || {
            barrier.wait();
            let r = handle.synchronize(other);
            results.lock().unwrap().push((me.processor(), r));
        });
        d.execute(me.processor(), wait_for_other).unwrap();
    }
    let what = "dropping the dispatcher after a mutual synchronize";
    within(TEN_S, what, move || {
        let both = "both synchronize calls returned";
        eventually(both, || results.lock().unwrap().len() == 2);
        for (me, r) in results.lock().unwrap().iter() {
            assert_eq!(*r, Err(SyncError::OnProcessorThread(*me)));
        }
        drop(d);
    });
}

/// 7: to dispatcher B, a processor of dispatcher A with the same id is an application thread.
#[test]
fn a_processor_of_one_dispatcher_waits_on_a_full_processor_of_another() {
    let a = one_queue(PoolConfig::new(1));
    // Unprobed: a probe landing while B is held would take the slot the dispatch of 1 waits for.
    let b = one_queue_unprobed(PoolConfig::new(1).capacity(1));
    let (target, log) = recorder_on(&b);
    b.synchronize(target).unwrap();
    // Hold B's processor in a callback and fill its one slot.
    let hold = block_processor(&b, target);
    b.dispatch(target, Event::Message(1)).unwrap();
    let result = Arc::new(Mutex::new(None));
    let (bh, out) = (b.handle(), result.clone());
    let send = move || *out.lock().unwrap() = Some(bh.dispatch(target, Event::Message(2)).is_ok());
    a.execute(first_queue(&a), Callback::spill(send)).unwrap();
    thread::sleep(Duration::from_millis(50));
    let early = *result.lock().unwrap();
    hold.wait(); // release B's processor before asserting, so that a failure cannot hang
    assert_eq!(early, None, "it must wait, not hand back");
    let through = "the waiting dispatch went through";
    eventually(through, || *result.lock().unwrap() == Some(true));
    assert_eq!(handled(&b, target, &log), [1, 2]);
}

// 2. Handles ----------------------------------------------------------------------------

/// 4: dispatcher B delivered dispatcher A's handle to B's client in the same slot.
#[test]
fn a_handle_of_another_dispatcher_is_refused() {
    let a = one_queue(PoolConfig::new(1));
    let b = one_queue(PoolConfig::new(1));
    let from_a = recorder_on(&a).0;
    let (in_b, log) = recorder_on(&b);
    let why = "same processor id, same slot";
    assert_eq!(from_a.processor(), in_b.processor(), "{why}");
    use DispatchError::NoSuchProcessor;
    let sent = b.dispatch(from_a, Event::Message(7));
    assert!(matches!(sent, Err(NoSuchProcessor(Event::Message(7)))));
    let tried = b.try_dispatch(from_a, Event::Message(7));
    assert!(matches!(tried, Err(NoSuchProcessor(_))));
    let mut events = (0..3).map(Event::Message);
    let batch = b.dispatch_batch(from_a, &mut events).unwrap_err();
    let outcome = (batch.enqueued, batch.error);
    assert!(matches!(outcome, (0, NoSuchProcessor(_))));
    assert!(matches!(b.unregister(from_a), Err(NoSuchProcessor(_))));
    assert!(!b.in_dispatcher_thread(from_a));
    b.synchronize(in_b).unwrap();
    assert!(!log.lock().unwrap().contains(&Seen::Message(7)));
}

// 3. User code that could end a processor ------------------------------------------------

/// An event whose drop counts, then panics.
struct PanicsOnDrop(Counter);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        self.0.incr();
        panic!("a capture's drop panics");
    }
}

impl Client<u64> for PanicsOnDrop {}

/// 6: a stale event whose drop panics no longer kills the processor.
#[test]
fn a_stale_event_whose_drop_panics_is_contained() {
    let (d, h, _log) = recorded(PoolConfig::new(1));
    d.unregister(h).unwrap();
    let drops = Counter::default();
    let bomb = PanicsOnDrop(drops.clone());
    d.dispatch_callback(h, move || drop(bomb)).unwrap();
    let handle = d.handle();
    let what = "synchronize after a panicking stale drop";
    within(TEN_S, what, move || handle.synchronize(h).unwrap());
    assert_eq!(drops.get(), 1);
    let stats = &d.stats()[0];
    assert_eq!((stats.stale, stats.panics), (1, 1));
    // The processor is alive: a new client gets its events.
    let (h2, log) = recorder_on(&d);
    d.dispatch(h2, Event::Message(5)).unwrap();
    d.synchronize(h2).unwrap();
    assert!(log.lock().unwrap().contains(&Seen::Message(5)));
}

/// 17: clients whose drop panics at shutdown no longer abort the process.
#[test]
fn clients_whose_drop_panics_at_shutdown_are_contained() {
    let mut d = one_queue(PoolConfig::new(2));
    let drops = Counter::default();
    for _ in 0..4 {
        on_queue(&d, PanicsOnDrop(drops.clone()));
    }
    let handle = d.handle();
    d.shutdown();
    assert_eq!((drops.get(), total(&handle, |s| s.panics)), (4, 4));
}

/// 5: a panicking batch iterator no longer leaves the producer inside the gate.
#[test]
fn a_panicking_batch_iterator_leaves_the_gate() {
    let (mut d, h, _log) = recorded(PoolConfig::new(1));
    let handle = d.handle();
    let panicked = thread::spawn(move || {
        let mut events = (0..10_u64).map(|i| {
            assert!(i < 3, "the iterator panics");
            Event::Message(i)
        });
        let _ = handle.dispatch_batch(h, &mut events);
    })
    .join();
    assert!(panicked.is_err());
    let what = "shutdown after a panicking batch iterator";
    within(TEN_S, what, move || d.shutdown());
}

/// 14: if `f` panicked on one processor, `done` never ran.
#[test]
fn execute_on_all_runs_done_once_even_when_f_panics() {
    let d = one_queue(PoolConfig::new(3));
    let (ran, done) = (Counter::default(), Counter::default());
    let (r, dn) = (ran.clone(), done.clone());
    let f = move || assert!(r.add(1) != 1, "f panics on one processor");
    let done_once = move || dn.incr();
    d.execute_on_all(ClientType::Queue, f, done_once).unwrap();
    eventually("done ran", || done.get() == 1);
    let queues = d.processors(ClientType::Queue);
    queues.into_iter().for_each(|p| d.synchronize(p).unwrap());
    assert_eq!((ran.get(), done.get()), (3, 1));
    assert_eq!(total(&d, |s| s.panics), 1);
}

/// 16: dropping the dispatcher on its own processor shuts every processor down.
#[test]
fn dropping_the_dispatcher_on_its_own_processor_shuts_everything_down() {
    let d = sessions_and_queues(PoolConfig::new(1), PoolConfig::new(2));
    let dropped = Counter::default();
    let on = |t| d.register(t, DropCounted(dropped.clone()), Placement::LeastLoaded);
    let handles = [ClientType::Session, ClientType::Queue].map(|t| on(t).unwrap());
    on(ClientType::Queue).unwrap();
    let dispatcher = d.handle();
    let (owner, returned) = (Arc::new(Mutex::new(Some(d))), Counter::default());
    let (in_handler, r) = (owner.clone(), returned.clone());
    let drop_it = Event::Callback(Callback::new(move || {
        drop(in_handler.lock().unwrap().take());
        r.incr();
    }));
    dispatcher.dispatch(handles[1], drop_it).unwrap();
    let what = "every processor stopped and dropped its clients";
    within(TEN_S, what, move || {
        eventually("all three clients dropped", || dropped.get() == 3)
    });
    assert!(returned.get() == 1, "the drop returned in the handler");
    let refused = dispatcher.dispatch(handles[0], Event::Message(1));
    assert!(matches!(refused, Err(DispatchError::ShutDown(_))));
}

// 4. Configuration and figures -----------------------------------------------------------

/// 18: huge capacities panicked ("capacity overflow") or aborted on the allocation.
#[test]
fn huge_capacities_are_configuration_errors() {
    let refused = |c| queue_pool::<u64>(c).build().unwrap_err();
    for capacity in [usize::MAX, 1 << 40, MAX_CAPACITY + 1] {
        let err = refused(PoolConfig::new(1).capacity(capacity));
        assert_eq!(err.problem, Problem::CapacityTooLarge(capacity));
        assert!(err.to_string().contains("above the limit"), "{err}");
    }
    let err = refused(PoolConfig::new(1).outbox_capacity(usize::MAX));
    assert_eq!(err.problem, Problem::CapacityTooLarge(usize::MAX));
}

/// 9: `enqueued` (once `processed + depth`, depth read first) never overcounts.
#[test]
fn the_enqueued_figure_never_exceeds_what_was_dispatched() {
    // No monitor probes in the test's lifetime: the figure would count them too.
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(1024));
    let h = recorder_on(&d).0;
    let dispatched = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (d, dispatched, stop) = (d.handle(), dispatched.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                d.dispatch_callback(h, || ()).unwrap();
                dispatched.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let mut worst = i64::MIN;
    for _ in 0..20_000 {
        let before = dispatched.load(Ordering::SeqCst);
        let snapshot = d.stats().remove(0);
        let after = dispatched.load(Ordering::SeqCst);
        // Accepted by the snapshot: at most `after`, the one in flight and the registration.
        let bound = after + 1 + 1;
        worst = worst.max(snapshot.enqueued as i64 - bound as i64);
        assert!(before <= after);
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let why = format!("enqueued exceeded what was dispatched by {worst}");
    assert!(worst <= 0, "{why}");
}

// 5. Shutdown with a deadline --------------------------------------------------------------

/// `shutdown_timeout` returns at its deadline naming a stuck processor, which still ends.
#[test]
fn shutdown_timeout_names_a_stuck_processor_and_returns() {
    let mut d = one_queue(PoolConfig::new(2));
    let dropped = Counter::default();
    let stuck = on_queue_processor(&d, 0, DropCounted(dropped.clone()));
    on_queue_processor(&d, 1, DropCounted(dropped.clone()));
    let (entered, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (e, r) = (entered.clone(), release.clone());
    d.dispatch_callback(stuck, move || {
        e.wait();
        r.wait();
    })
    .unwrap();
    entered.wait(); // the processor is inside the handler
    let started = Instant::now();
    let outcome = d.shutdown_timeout(Duration::from_millis(100));
    let why = "it returned at its deadline";
    assert!(started.elapsed() < Duration::from_secs(5), "{why}");
    let unfinished = vec![stuck.processor()];
    assert_eq!(outcome, Err(ShutdownTimedOut { unfinished }));
    // The other processor finished; the stuck one finishes once its handler returns.
    eventually("the free processor's client dropped", || dropped.get() == 1);
    release.wait();
    let stuck_dropped = "the stuck processor's client dropped";
    eventually(stuck_dropped, || dropped.get() == 2);
    let again = d.shutdown_timeout(Duration::from_millis(1));
    assert_eq!(again, Ok(()), "idempotent");
}
