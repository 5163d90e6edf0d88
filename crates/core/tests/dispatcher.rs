//! Integration tests of the dispatcher core, one section per numbered point of its design:
//! configuration, processors, clients, events, flush, back-pressure and shutdown, the
//! BlazingMQ-style API, faults, stats.

// Under `--cfg loom` the protocols' primitives are loom's, usable only inside a model:
// only the loom models (`--lib`) run then.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{Recorder, Seen};
use zerodispatch_core::*;

fn one_queue(config: PoolConfig) -> Dispatcher<u64> {
    Dispatcher::builder()
        .pool(ClientType::Queue, config)
        .build()
        .expect("valid config")
}

/// One queue processor and a monitor that never probes in the test's lifetime, for tests
/// that count queue slots exactly (a probe takes a slot).
fn one_queue_unprobed(config: PoolConfig) -> Dispatcher<u64> {
    Dispatcher::builder()
        .pool(ClientType::Queue, config)
        .monitor_interval(Duration::from_secs(3600))
        .build()
        .expect("valid config")
}

/// Blocks the processor of `handle` until the returned barrier is waited on twice (once to
/// know it is blocked, once to release it).
fn block_processor(d: &DispatcherHandle<u64>, handle: ClientHandle) -> Arc<Barrier> {
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    d.execute(
        handle.processor(),
        Callback::new(move || {
            b.wait();
            b.wait();
        }),
    )
    .unwrap();
    barrier.wait();
    barrier
}

/// The first processor's stats once `ready` holds. Histograms are merged into the shared
/// copy when asked (by `stats()` or the monitor) at the processor's next flush point or
/// before it sleeps, so an idle processor publishes when it next wakes: `synchronize`
/// wakes it.
fn stats_once_published(
    d: &Dispatcher<u64>,
    ready: impl Fn(&ProcessorSnapshot) -> bool,
) -> ProcessorSnapshot {
    let deadline = Instant::now() + Duration::from_secs(10);
    let processor = d.processors(ClientType::Queue)[0];
    loop {
        let s = d.stats()[0].clone();
        if ready(&s) || Instant::now() > deadline {
            return s;
        }
        d.synchronize(processor).unwrap();
    }
}

// 1. Configuration ---------------------------------------------------------------------

#[test]
fn invalid_configurations_are_errors_with_messages() {
    let build = |c: PoolConfig| {
        Dispatcher::<u64>::builder()
            .pool(ClientType::Queue, c)
            .build()
            .map(drop)
    };
    let msg = |r: Result<(), ConfigError>| r.unwrap_err().to_string();
    assert_eq!(
        msg(build(PoolConfig::new(0))),
        "queue pool: 0 processors; a pool needs at least 1 (omit the pool to have none)"
    );
    assert!(msg(build(PoolConfig::new(1).capacity(0).watermarks(0, 0))).contains("capacity 0"));
    assert!(
        msg(build(PoolConfig::new(1).watermarks(8, 8)))
            .contains("low watermark 8 must be below the high watermark 8")
    );
    assert!(
        msg(build(PoolConfig::new(1).capacity(16).watermarks(1, 17)))
            .contains("above the queue capacity 16")
    );
    assert!(msg(build(PoolConfig::new(1).max_batch(0))).contains("max_batch 0"));
    assert!(msg(build(PoolConfig::new(1).pin_to([1024]))).contains("core id 1024 is out of range"));
    assert!(msg(build(PoolConfig::new(1).pin_to([usize::MAX]))).contains("out of range"));
    assert!(
        msg(build(PoolConfig::new(1).pin_to([1000])))
            .contains("core id 1000 is not one this process may run on")
    );
    assert_eq!(
        Dispatcher::<u64>::builder().build().unwrap_err().problem,
        Problem::NoPools
    );
    let zero = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .stuck_warning(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(
        zero.to_string()
            .contains("stuck_warning must be greater than zero")
    );
    let order = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .shutdown_order([ClientType::Queue, ClientType::Queue, ClientType::Cluster])
        .build()
        .unwrap_err();
    assert!(
        order
            .to_string()
            .contains("must name session, queue and cluster once each")
    );
}

#[test]
fn pinning_to_a_usable_core_is_reported_in_stats() {
    let cores: Vec<usize> = core_affinity_ids();
    let d = one_queue(PoolConfig::new(1).pin_to([cores[0]]));
    let (client, _log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    d.synchronize(h).unwrap();
    let pinning = d.stats()[0].pinning;
    assert!(
        matches!(pinning, Pinning::Pinned(c) | Pinning::Refused(c) if c == cores[0]),
        "{pinning:?}"
    );
    let unpinned = one_queue(PoolConfig::new(1));
    unpinned
        .synchronize(unpinned.processors(ClientType::Queue)[0])
        .unwrap();
    assert_eq!(unpinned.stats()[0].pinning, Pinning::NotRequested);
}

fn core_affinity_ids() -> Vec<usize> {
    // The usable cores are exactly those a pool may be pinned to: probe by building.
    (0..MAX_CORE_ID)
        .filter(|&c| {
            Dispatcher::<u64>::builder()
                .pool(ClientType::Queue, PoolConfig::new(1).pin_to([c]))
                .build()
                .is_ok()
        })
        .take(1)
        .collect()
}

// 2. Processors --------------------------------------------------------------------------

#[test]
fn processors_are_named_threads_per_client_type() {
    let d = Dispatcher::<u64>::builder()
        .pool(ClientType::Session, PoolConfig::new(2))
        .pool(ClientType::Cluster, PoolConfig::new(1))
        .build()
        .unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    for p in d
        .processors(ClientType::Session)
        .into_iter()
        .chain(d.processors(ClientType::Cluster))
    {
        let names = names.clone();
        d.execute(
            p,
            Callback::new(move || {
                names
                    .lock()
                    .unwrap()
                    .push(thread::current().name().unwrap().to_owned())
            }),
        )
        .unwrap();
        d.synchronize(p).unwrap();
    }
    assert_eq!(
        *names.lock().unwrap(),
        ["zd-session-0", "zd-session-1", "zd-cluster-0"]
    );
    assert!(d.processors(ClientType::Queue).is_empty());
}

// 3. Clients -----------------------------------------------------------------------------

#[test]
fn least_loaded_placement_spreads_clients_and_explicit_placement_pins_them() {
    let d = one_queue(PoolConfig::new(3));
    let handles: Vec<ClientHandle> = (0..6)
        .map(|_| {
            d.register(ClientType::Queue, Recorder::new().0, Placement::LeastLoaded)
                .unwrap()
        })
        .collect();
    let mut per_processor = [0; 3];
    for h in &handles {
        per_processor[usize::from(h.processor().index)] += 1;
    }
    assert_eq!(per_processor, [2, 2, 2]);
    let pinned = d
        .register(
            ClientType::Queue,
            Recorder::new().0,
            Placement::Processor(1),
        )
        .unwrap();
    assert_eq!(pinned.processor().index, 1);
    assert_eq!(
        d.register(
            ClientType::Queue,
            Recorder::new().0,
            Placement::Processor(3)
        )
        .unwrap_err(),
        RegisterError::NoSuchProcessor(ProcessorId {
            client_type: ClientType::Queue,
            index: 3
        })
    );
    assert_eq!(
        d.register(
            ClientType::Session,
            Recorder::new().0,
            Placement::LeastLoaded
        )
        .unwrap_err(),
        RegisterError::NoProcessors(ClientType::Session)
    );
}

#[test]
fn in_dispatcher_thread_is_true_only_on_the_owning_processor() {
    let d = one_queue(PoolConfig::new(2));
    let a = d
        .register(
            ClientType::Queue,
            Recorder::new().0,
            Placement::Processor(0),
        )
        .unwrap();
    let b = d
        .register(
            ClientType::Queue,
            Recorder::new().0,
            Placement::Processor(1),
        )
        .unwrap();
    assert!(!d.in_dispatcher_thread(a));
    let answers = Arc::new(Mutex::new(None));
    let (handle, out) = (d.handle(), answers.clone());
    // Two 16-byte handles and two pointers: more than the default space holds.
    d.execute(
        a.processor(),
        Callback::spill(move || {
            *out.lock().unwrap() = Some((
                handle.in_dispatcher_thread(a),
                handle.in_dispatcher_thread(b),
            ))
        }),
    )
    .unwrap();
    d.synchronize(a).unwrap();
    assert_eq!(*answers.lock().unwrap(), Some((true, false)));
}

#[test]
fn unregister_flushes_then_drops_and_later_events_are_stale() {
    let d = one_queue(PoolConfig::new(1));
    let (client, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    let gate = block_processor(&d.handle(), h);
    d.dispatch(h, Event::Message(1)).unwrap();
    d.unregister(h).unwrap();
    d.dispatch(h, Event::Message(2)).unwrap();
    gate.wait();
    d.synchronize(h).unwrap();
    assert_eq!(*log.lock().unwrap(), [Seen::Message(1), Seen::Flush]);
    assert_eq!(d.stats()[0].stale, 1);
    // The slot is reused with a new generation: the old handle still does not reach it.
    let (client2, log2) = Recorder::new();
    let h2 = d
        .register(ClientType::Queue, client2, Placement::LeastLoaded)
        .unwrap();
    assert_ne!(h, h2);
    d.dispatch(h, Event::Message(3)).unwrap();
    d.dispatch(h2, Event::Message(4)).unwrap();
    d.synchronize(h2).unwrap();
    assert_eq!(*log2.lock().unwrap(), [Seen::Message(4), Seen::Flush]);
    assert_eq!(d.stats()[0].stale, 2);
}

// 4. Events and 5. Flush -----------------------------------------------------------------

#[test]
fn events_reach_the_client_in_order_and_one_flush_follows_a_drained_batch() {
    let d = one_queue(PoolConfig::new(1));
    let (client, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    let gate = block_processor(&d.handle(), h);
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..5 {
        d.dispatch(h, Event::Message(i)).unwrap();
        let r = ran.clone();
        d.dispatch(
            h,
            Event::Callback(Callback::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })),
        )
        .unwrap();
    }
    gate.wait();
    d.synchronize(h).unwrap();
    let log = log.lock().unwrap().clone();
    let mut expected = Vec::new();
    for i in 0..5 {
        expected.extend([Seen::Message(i), Seen::Callback]);
    }
    expected.push(Seen::Flush); // one flush for the whole drained batch (the dedup flag)
    assert_eq!(log, expected);
    assert_eq!(ran.load(Ordering::SeqCst), 5);
}

#[test]
fn a_dispatcher_callback_flushes_first_and_bypasses_the_client() {
    let d = one_queue(PoolConfig::new(1));
    let (client, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    let gate = block_processor(&d.handle(), h);
    d.dispatch(h, Event::Message(1)).unwrap();
    let l = log.clone();
    d.dispatch(
        h,
        Event::DispatcherCallback(Callback::new(move || {
            l.lock().unwrap().push(Seen::Message(99))
        })),
    )
    .unwrap();
    d.dispatch(h, Event::Message(2)).unwrap();
    gate.wait();
    d.synchronize(h).unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            Seen::Message(1),
            Seen::Flush,
            Seen::Message(99),
            Seen::Message(2),
            Seen::Flush
        ]
    );
}

#[test]
fn a_queue_that_never_drains_still_flushes_every_max_batch_events() {
    let d = one_queue(PoolConfig::new(1).max_batch(4));
    let (client, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    let gate = block_processor(&d.handle(), h);
    for i in 0..10 {
        d.dispatch(h, Event::Message(i)).unwrap();
    }
    gate.wait();
    d.synchronize(h).unwrap();
    let log = log.lock().unwrap().clone();
    // The barrier callback counts as the first event of the first batch.
    let flushes_at: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == Seen::Flush)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        log.iter().filter(|s| matches!(s, Seen::Message(_))).count(),
        10
    );
    assert!(
        flushes_at.len() >= 3,
        "a flush at least every 4 events: {log:?}"
    );
    let stats = stats_once_published(&d, |s| s.batch_size.count > 0);
    assert!(stats.batch_size.count > 0);
    assert!(
        stats.batch_size.max <= 4,
        "no batch above max_batch: {:?}",
        stats.batch_size
    );
}

#[test]
fn the_flush_gate_keeps_a_client_off_the_flush_list() {
    struct Gated(Arc<AtomicUsize>);
    impl Client<u64> for Gated {
        fn on_event(&mut self, event: ClientEvent<u64>, ctx: &mut Context<u64>) {
            if let ClientEvent::Message(m) = event {
                ctx.set_flush_enabled(m != 0);
            }
        }
        fn flush(&mut self, _ctx: &mut Context<u64>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let d = one_queue(PoolConfig::new(1));
    let flushes = Arc::new(AtomicUsize::new(0));
    let h = d
        .register(
            ClientType::Queue,
            Gated(flushes.clone()),
            Placement::LeastLoaded,
        )
        .unwrap();
    d.dispatch(h, Event::Message(0)).unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(flushes.load(Ordering::SeqCst), 0);
    d.dispatch(h, Event::Message(1)).unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(flushes.load(Ordering::SeqCst), 1);
}

#[test]
fn a_client_dispatches_to_another_processor_through_its_context() {
    struct Forwarder {
        to: ClientHandle,
    }
    impl Client<u64> for Forwarder {
        fn on_event(&mut self, event: ClientEvent<u64>, ctx: &mut Context<u64>) {
            if let ClientEvent::Message(m) = event {
                ctx.dispatcher()
                    .dispatch(self.to, Event::Message(m * 10))
                    .unwrap();
            }
        }
        fn flush(&mut self, _ctx: &mut Context<u64>) {}
    }
    let d = Dispatcher::<u64>::builder()
        .pool(ClientType::Session, PoolConfig::new(1))
        .pool(ClientType::Queue, PoolConfig::new(1))
        .build()
        .unwrap();
    let (sink, log) = Recorder::new();
    let sink = d
        .register(ClientType::Queue, sink, Placement::LeastLoaded)
        .unwrap();
    let fwd = d
        .register(
            ClientType::Session,
            Forwarder { to: sink },
            Placement::LeastLoaded,
        )
        .unwrap();
    d.dispatch(fwd, Event::Message(7)).unwrap();
    d.synchronize(fwd).unwrap();
    d.synchronize(sink).unwrap();
    assert_eq!(*log.lock().unwrap(), [Seen::Message(70), Seen::Flush]);
}

#[test]
fn event_sizes() {
    assert_eq!(std::mem::size_of::<Callback>(), 48);
    // A confirm-sized message: queue id, 16-byte GUID, sub-queue id.
    #[allow(dead_code)]
    struct Confirm {
        queue: u32,
        guid: [u8; 16],
        sub_queue: u32,
    }
    assert_eq!(__private::item_size::<Confirm>(), 56);
    assert_eq!(__private::item_size::<u64>(), 56);
    assert_eq!(std::mem::size_of::<Event<Confirm>>(), 56);
}

// 7. Back-pressure, shutdown, watermarks --------------------------------------------------

#[test]
fn a_full_queue_hands_the_event_back_and_dispatch_waits() {
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(4));
    let (client, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    let gate = block_processor(&d.handle(), h);
    for i in 0..4 {
        d.try_dispatch(h, Event::Message(i)).unwrap();
    }
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
    let messages: Vec<Seen> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|s| **s != Seen::Flush)
        .cloned()
        .collect();
    assert_eq!(messages, (0..5).map(Seen::Message).collect::<Vec<_>>());
}

#[test]
fn dispatch_after_shutdown_hands_the_event_back() {
    let mut d = one_queue(PoolConfig::new(1));
    let h = d
        .register(ClientType::Queue, Recorder::new().0, Placement::LeastLoaded)
        .unwrap();
    let handle = d.handle();
    d.shutdown();
    assert!(matches!(
        handle.try_dispatch(h, Event::Message(1)),
        Err(DispatchError::ShutDown(Event::Message(1)))
    ));
    assert!(matches!(
        handle.dispatch(h, Event::Message(2)),
        Err(DispatchError::ShutDown(Event::Message(2)))
    ));
    assert_eq!(handle.synchronize(h), Err(SyncError::ShutDown));
    assert_eq!(
        handle.register(ClientType::Queue, Recorder::new().0, Placement::LeastLoaded),
        Err(RegisterError::ShutDown)
    );
    d.shutdown(); // idempotent
}

#[test]
fn shutdown_drains_every_queue_and_flushes_in_order() {
    let order = Arc::new(Mutex::new(Vec::new()));
    struct Last(Arc<Mutex<Vec<&'static str>>>, &'static str, u64);
    impl Client<u64> for Last {
        fn on_event(&mut self, _event: ClientEvent<u64>, _ctx: &mut Context<u64>) {
            self.2 += 1;
        }
        fn flush(&mut self, _ctx: &mut Context<u64>) {}
    }
    impl Drop for Last {
        fn drop(&mut self) {
            self.0.lock().unwrap().push(self.1);
            assert_eq!(self.2, 1000, "{} dropped before its events ran", self.1);
        }
    }
    let mut d = Dispatcher::<u64>::builder()
        .pool(ClientType::Session, PoolConfig::new(1))
        .pool(ClientType::Queue, PoolConfig::new(1))
        .pool(ClientType::Cluster, PoolConfig::new(1))
        .build()
        .unwrap();
    let mut handles = Vec::new();
    for (t, name) in [
        (ClientType::Cluster, "cluster"),
        (ClientType::Session, "session"),
        (ClientType::Queue, "queue"),
    ] {
        handles.push(
            d.register(t, Last(order.clone(), name, 0), Placement::LeastLoaded)
                .unwrap(),
        );
    }
    for h in &handles {
        for i in 0..1000 {
            d.dispatch(*h, Event::Message(i)).unwrap();
        }
    }
    d.shutdown();
    assert_eq!(*order.lock().unwrap(), ["queue", "session", "cluster"]);
}

#[test]
fn dropping_the_dispatcher_shuts_it_down() {
    let ran = Arc::new(AtomicUsize::new(0));
    {
        let d = one_queue(PoolConfig::new(1));
        let h = d
            .register(ClientType::Queue, Recorder::new().0, Placement::LeastLoaded)
            .unwrap();
        for _ in 0..100 {
            let r = ran.clone();
            d.dispatch(
                h,
                Event::Callback(Callback::new(move || {
                    r.fetch_add(1, Ordering::SeqCst);
                })),
            )
            .unwrap();
        }
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        100,
        "every accepted event ran before the drop returned"
    );
}

#[test]
fn watermark_alarms_are_edge_triggered_and_clear_at_the_low_mark() {
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(256).watermarks(16, 128));
    let h = d
        .register(ClientType::Queue, Recorder::new().0, Placement::LeastLoaded)
        .unwrap();
    for _round in 0..2 {
        // Depth is sampled after the first event of a drain and every 64 events after it: with
        // 200 queued, a sample within the drain sees at least 135, above the high mark.
        let gate = block_processor(&d.handle(), h);
        for i in 0..200 {
            d.dispatch(h, Event::Message(i)).unwrap();
        }
        gate.wait();
        d.synchronize(h).unwrap();
    }
    let s = &d.stats()[0];
    assert_eq!(
        s.high_watermark_alarms, 2,
        "raised once per fill, cleared in between: {s:?}"
    );
    assert!(s.max_depth >= 128);
}

// 8. Executor, execute_on_all, synchronize -------------------------------------------------

#[test]
fn executor_posts_always_and_dispatches_in_place_on_its_own_thread() {
    let d = one_queue(PoolConfig::new(1));
    let p = d.processors(ClientType::Queue)[0];
    let exec = d.executor(p);
    let order = Arc::new(Mutex::new(Vec::new()));
    let (o, e) = (order.clone(), exec.clone());
    exec.post(Callback::new(move || {
        let o2 = o.clone();
        e.post(Callback::new(move || o2.lock().unwrap().push("posted")))
            .unwrap();
        let o3 = o.clone();
        e.dispatch(Callback::new(move || o3.lock().unwrap().push("in place")))
            .unwrap();
        o.lock().unwrap().push("outer done");
    }))
    .unwrap();
    d.synchronize(p).unwrap();
    d.synchronize(p).unwrap();
    assert_eq!(*order.lock().unwrap(), ["in place", "outer done", "posted"]);
}

#[test]
fn execute_on_all_runs_f_on_every_processor_then_done_once() {
    let d = one_queue(PoolConfig::new(3));
    let threads = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let (t, dn, t2) = (threads.clone(), done.clone(), threads.clone());
    d.execute_on_all(
        ClientType::Queue,
        move || {
            t.lock()
                .unwrap()
                .push(thread::current().name().unwrap().to_owned())
        },
        move || {
            assert_eq!(t2.lock().unwrap().len(), 3, "done runs after every f");
            dn.fetch_add(1, Ordering::SeqCst);
        },
    )
    .unwrap();
    for p in d.processors(ClientType::Queue) {
        d.synchronize(p).unwrap();
    }
    let mut names = threads.lock().unwrap().clone();
    names.sort();
    assert_eq!(names, ["zd-queue-0", "zd-queue-1", "zd-queue-2"]);
    assert_eq!(done.load(Ordering::SeqCst), 1);
}

#[test]
fn synchronize_waits_for_earlier_events_and_refuses_its_own_thread() {
    let d = one_queue(PoolConfig::new(1));
    let (client, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    for i in 0..1000 {
        d.dispatch(h, Event::Message(i)).unwrap();
    }
    d.synchronize(h).unwrap();
    assert_eq!(
        log.lock()
            .unwrap()
            .iter()
            .filter(|s| matches!(s, Seen::Message(_)))
            .count(),
        1000
    );
    let result = Arc::new(Mutex::new(None));
    let (handle, r) = (d.handle(), result.clone());
    d.execute(
        h.processor(),
        Callback::new(move || *r.lock().unwrap() = Some(handle.synchronize(h))),
    )
    .unwrap();
    d.synchronize(h).unwrap();
    assert_eq!(
        *result.lock().unwrap(),
        Some(Err(SyncError::OnProcessorThread(h.processor())))
    );
}

#[test]
fn dispatch_on_its_own_full_queue_waits_in_the_outbox_and_hands_back_only_when_that_is_full() {
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(2).outbox_capacity(2));
    let (recorder, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, recorder, Placement::LeastLoaded)
        .unwrap();
    let outcome = Arc::new(Mutex::new(Vec::new()));
    let (handle, out) = (d.handle(), outcome.clone());
    d.execute(
        h.processor(),
        Callback::new(move || {
            for i in 0..6 {
                out.lock()
                    .unwrap()
                    .push(handle.dispatch(h, Event::Message(i)).is_ok());
            }
        }),
    )
    .unwrap();
    d.synchronize(h).unwrap();
    // The queue holds 2 (one slot may be taken by the test's own `synchronize` marker),
    // the outbox 2 more: the dispatches that find both full hand their events back; none
    // waits for its own thread, and every accepted event reaches the client.
    let outcome = outcome.lock().unwrap().clone();
    assert_eq!(outcome[..3], [true, true, true], "{outcome:?}");
    assert_eq!(outcome[4..], [false, false], "{outcome:?}");
    let accepted = outcome.iter().filter(|&&ok| ok).count() as u64;
    // The outboxed events are handed on at the processor's next loop turns.
    let deadline = Instant::now() + Duration::from_secs(10);
    let delivered = loop {
        let delivered: Vec<u64> = log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|s| match s {
                Seen::Message(m) => Some(*m),
                _ => None,
            })
            .collect();
        if delivered.len() as u64 >= accepted || Instant::now() > deadline {
            break delivered;
        }
        thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(delivered, (0..accepted).collect::<Vec<_>>());
    assert!(d.stats()[0].outboxed >= 1);
}

// 9. Faults --------------------------------------------------------------------------------

#[test]
fn a_panicking_handler_flush_or_callback_is_counted_and_the_processor_goes_on() {
    struct PanickyFlush;
    impl Client<u64> for PanickyFlush {
        fn on_event(&mut self, _e: ClientEvent<u64>, _c: &mut Context<u64>) {}
        fn flush(&mut self, _c: &mut Context<u64>) {
            panic!("flush fails");
        }
    }
    let d = one_queue(PoolConfig::new(1));
    let (mut client, log) = Recorder::new();
    client.panic_on = Some(2);
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    let f = d
        .register(ClientType::Queue, PanickyFlush, Placement::LeastLoaded)
        .unwrap();
    for i in 0..4 {
        d.dispatch(h, Event::Message(i)).unwrap();
    }
    d.dispatch(
        h,
        Event::Callback(Callback::new(|| panic!("callback fails"))),
    )
    .unwrap();
    d.dispatch(f, Event::Message(0)).unwrap();
    d.execute(
        h.processor(),
        Callback::new(|| panic!("dispatcher callback fails")),
    )
    .unwrap();
    d.dispatch(h, Event::Message(5)).unwrap();
    d.synchronize(h).unwrap();
    let messages: Vec<Seen> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|s| matches!(s, Seen::Message(_)))
        .cloned()
        .collect();
    assert_eq!(messages, [0, 1, 2, 3, 5].map(Seen::Message));
    assert_eq!(d.stats()[0].panics, 4);
}

#[test]
fn a_stuck_processor_is_reported() {
    let d = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .stuck_warning(Duration::from_millis(50))
        .monitor_interval(Duration::from_millis(5))
        .build()
        .unwrap();
    let p = d.processors(ClientType::Queue)[0];
    d.execute(
        p,
        Callback::new(|| thread::sleep(Duration::from_millis(300))),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while d.stats()[0].stuck_reports == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(d.stats()[0].stuck_reports, 1);
    d.synchronize(p).unwrap();
    assert_eq!(d.stats()[0].stuck_reports, 1, "one report per episode");
}

// 10. Stats ---------------------------------------------------------------------------------

#[test]
fn stats_count_while_the_processor_runs() {
    let d = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .monitor_interval(Duration::from_millis(1))
        .build()
        .unwrap();
    let (client, _log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
    let big = [1_u8; 64];
    d.dispatch(
        h,
        Event::Callback(Callback::spill(move || assert_eq!(big[0], 1))),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let producer = {
        let (handle, stop, sent) = (d.handle(), stop.clone(), sent.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                handle.dispatch(h, Event::Message(1)).unwrap();
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    thread::sleep(Duration::from_millis(100));
    let running = d.stats()[0].clone();
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    d.synchronize(h).unwrap();
    let s = &d.stats()[0];
    assert!(running.processed > 0, "stats are readable while running");
    assert_eq!(s.spilled, 1);
    // register + spilled callback + messages + the synchronize marker, plus probes.
    assert!(s.processed >= sent.load(Ordering::Relaxed) + 3);
    assert_eq!(s.enqueued, s.processed + s.depth as u64);
    assert!(s.flushes > 0);
    let s = stats_once_published(&d, |s| {
        s.batch_size.count > 0 && s.time_in_queue_ns.count > 0
    });
    assert!(s.batch_size.count > 0);
    assert!(
        s.time_in_queue_ns.count > 0 && s.time_in_queue_ns.max > 0,
        "probes sampled the time in queue: {s:?}"
    );
}

#[test]
fn ids_of_another_dispatcher_are_errors_that_hand_the_event_back() {
    let small = one_queue(PoolConfig::new(1));
    let big = one_queue(PoolConfig::new(3));
    let far = big
        .register(
            ClientType::Queue,
            Recorder::new().0,
            Placement::Processor(2),
        )
        .unwrap();
    assert!(matches!(
        small.try_dispatch(far, Event::Message(1)),
        Err(DispatchError::NoSuchProcessor(Event::Message(1)))
    ));
    assert!(matches!(
        small.dispatch(far, Event::Message(2)),
        Err(DispatchError::NoSuchProcessor(Event::Message(2)))
    ));
    assert!(matches!(
        small.execute(far.processor(), Callback::new(|| ())),
        Err(DispatchError::NoSuchProcessor(_))
    ));
    assert_eq!(
        small.synchronize(far),
        Err(SyncError::NoSuchProcessor(far.processor()))
    );
    assert!(matches!(small.unregister(far), Err(DispatchError::NoSuchProcessor(h)) if h == far));
}

#[test]
fn a_batch_goes_in_order_and_a_full_queue_hands_back_the_event_that_did_not_fit() {
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(8));
    let (client, log) = Recorder::new();
    let h = d
        .register(ClientType::Queue, client, Placement::LeastLoaded)
        .unwrap();
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
    let rest: Vec<u64> = events
        .map(|e| match e {
            Event::Message(m) => m,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(rest, [9, 10, 11]);
    // The blocking batch waits for room and enqueues everything.
    let handle = d.handle();
    let waiter =
        thread::spawn(move || handle.dispatch_batch(h, &mut (100..120).map(Event::Message)));
    thread::sleep(Duration::from_millis(20));
    assert!(!waiter.is_finished());
    gate.wait();
    assert_eq!(waiter.join().unwrap().unwrap(), 20);
    d.synchronize(h).unwrap();
    let got: Vec<u64> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|s| match s {
            Seen::Message(m) => Some(*m),
            _ => None,
        })
        .collect();
    assert_eq!(got, (0..8).chain(100..120).collect::<Vec<_>>());
}

#[test]
fn a_batch_after_shutdown_hands_back_its_first_event() {
    let mut d = one_queue(PoolConfig::new(1));
    let h = d
        .register(ClientType::Queue, Recorder::new().0, Placement::LeastLoaded)
        .unwrap();
    let handle = d.handle();
    d.shutdown();
    let mut events = (0..3).map(Event::Message);
    assert!(matches!(
        handle.dispatch_batch(h, &mut events),
        Err(BatchError {
            enqueued: 0,
            error: DispatchError::ShutDown(Event::Message(0))
        })
    ));
    assert_eq!(events.count(), 2);
    assert!(matches!(
        handle.try_dispatch_batch(h, &mut std::iter::empty()),
        Ok(0)
    ));
}
