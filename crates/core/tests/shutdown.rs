//! Shutdown: every queue drained and flushed in order, every later dispatch handed back.

#![cfg(not(loom))]

mod common;

use common::*;

/// A dispatcher shut down, a handle of it, and a recorder registered before.
fn shut_down() -> (Dispatcher<u64>, DispatcherHandle<u64>, ClientHandle) {
    let (mut d, h, _log) = recorded(PoolConfig::new(1));
    let handle = d.handle();
    d.shutdown();
    (d, handle, h.erase())
}

#[test]
fn dispatch_after_shutdown_hands_the_event_back() {
    let (mut d, handle, h) = shut_down();
    use DispatchError::ShutDown;
    let tried = handle.try_dispatch(h, Event::Message(1));
    assert!(matches!(tried, Err(ShutDown(Event::Message(1)))));
    let waited = handle.dispatch(h, Event::Message(2));
    assert!(matches!(waited, Err(ShutDown(Event::Message(2)))));
    assert_eq!(handle.synchronize(h), Err(SyncError::ShutDown));
    let refused = handle.register(ClientType::Queue, Recorder::new().0, Placement::LeastLoaded);
    assert_eq!(refused.unwrap_err().reason, RegisterRefusal::ShutDown);
    d.shutdown(); // idempotent
}

#[test]
fn a_batch_after_shutdown_hands_back_its_first_event() {
    let (_d, handle, h) = shut_down();
    use DispatchError::ShutDown;
    let mut events = (0..3).map(Event::Message);
    let err = handle.dispatch_batch(h, &mut events).unwrap_err();
    assert_eq!(err.enqueued, 0);
    assert!(matches!(err.error, ShutDown(Event::Message(0))));
    assert_eq!(events.count(), 2);
    let empty = handle.try_dispatch_batch(h, &mut std::iter::empty::<Event<u64>>());
    assert!(matches!(empty, Ok(0)));
}

#[test]
fn shutdown_drains_every_queue_and_flushes_in_order() {
    let order = Arc::new(Mutex::new(Vec::new()));
    struct Last(Arc<Mutex<Vec<&'static str>>>, &'static str, u64);
    impl Client<u64> for Last {
        fn on_message(&mut self, _: u64, _ctx: &mut Context<u64>) {
            self.2 += 1;
        }
    }
    impl Drop for Last {
        fn drop(&mut self) {
            self.0.lock().unwrap().push(self.1);
            assert_eq!(self.2, 1000, "{} dropped before its events ran", self.1);
        }
    }
    let builder = Dispatcher::<u64>::builder().pool(ClientType::Session, PoolConfig::new(1));
    let builder = builder.pool(ClientType::Queue, PoolConfig::new(1));
    let builder = builder.pool(ClientType::Cluster, PoolConfig::new(1));
    let mut d = builder.build().unwrap();
    for t in [ClientType::Cluster, ClientType::Session, ClientType::Queue] {
        let h = d.register(t, Last(order.clone(), t.name(), 0), Placement::LeastLoaded);
        dispatch_all(&d, h.unwrap(), 0..1000);
    }
    d.shutdown();
    assert_eq!(*order.lock().unwrap(), ["queue", "session", "cluster"]);
}

#[test]
fn dropping_the_dispatcher_shuts_it_down() {
    let ran = Counter::default();
    let (d, h, _log) = recorded(PoolConfig::new(1));
    (0..100).for_each(|_| d.dispatch(h, Event::Callback(ran.callback())).unwrap());
    drop(d);
    let why = "every accepted event ran before the drop returned";
    assert_eq!(ran.get(), 100, "{why}");
}

/// Only the first shutdown shuts down: a drop during it does not close the pools at once.
#[test]
fn a_second_shutdown_while_the_first_drains_does_not_close_the_later_pools_early() {
    let d = sessions_and_queues(PoolConfig::new(1), PoolConfig::new(1));
    let session = on_session(&d, Sink).erase();
    let queue = on_queue(&d, Sink);
    let handle = d.handle();
    let (sent, outcome) = std::sync::mpsc::channel();
    // Everything the handler needs behind one `Arc`: a callback holds 32 bytes inline.
    let owner = Arc::new((Mutex::new(Some(d)), handle.clone(), Mutex::new(sent)));
    let in_handler = owner.clone();
    let handler = Callback::new(move || {
        let (dispatcher, on_processor, sent) = &*in_handler;
        // Shutdown starts on its own thread and waits for this handler; the drop calls again.
        let mut d = dispatcher.lock().unwrap().take().unwrap();
        d.shutdown();
        drop(d);
        std::thread::sleep(Duration::from_millis(100));
        let reached = on_processor.dispatch(session, Event::Message(1));
        sent.lock().unwrap().send(reached.is_ok()).unwrap();
    });
    handle.dispatch(queue, Event::Callback(handler)).unwrap();
    let reached = outcome.recv_timeout(Duration::from_secs(10));
    let why = "the session pool is open until the queue pool has drained";
    assert_eq!(reached, Ok(true), "{why}");
    drop(owner);
}

/// Dispatches a goodbye to `to` from its drop (after its processor's loop), then goes on.
struct SaysGoodbye {
    to: ClientHandle<Recorder>,
    handle: DispatcherHandle<u64>,
    /// Waited on once the goodbye is dispatched.
    sent: Arc<Barrier>,
}

impl Client<u64> for SaysGoodbye {}

impl Drop for SaysGoodbye {
    fn drop(&mut self) {
        let accepted = self.handle.dispatch(self.to, Event::Message(99));
        self.sent.wait();
        accepted.expect("accepted: the session pool shuts down after the queues");
    }
}

#[test]
fn an_event_a_client_dispatches_from_its_drop_at_shutdown_is_run_and_the_shutdown_ends() {
    // Unprobed: a probe landing while the session is held would take the slot 2 waits for.
    let mut d = sessions_and_queues_unprobed(PoolConfig::new(1).capacity(2), PoolConfig::new(1));
    let (session, seen) = Recorder::new();
    let session = on_session(&d, session);
    // The session processor is held in a handler while its queue is full.
    let release = block_processor(&d, session);
    dispatch_all(&d, session, [1, 2]);
    let (to, handle, sent) = (session, d.handle(), Arc::new(Barrier::new(2)));
    let dispatched = sent.clone();
    on_queue(&d, SaysGoodbye { to, handle, sent });
    let releaser = std::thread::spawn(move || {
        // The goodbye found the session's queue full; now let the session drain.
        dispatched.wait();
        release.wait();
    });
    let ended = d.shutdown_timeout(Duration::from_secs(10));
    releaser.join().unwrap();
    assert_eq!(ended, Ok(()), "the session processor never exited");
    assert_eq!(messages(&seen), [1, 2, 99]);
}
