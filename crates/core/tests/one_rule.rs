//! One rule for every call that takes work: a closure or a `Callback`, refused ones back.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::*;

/// Every call that takes work, each given a closure and then a callback: each runs once.
#[test]
fn every_call_that_takes_work_takes_a_closure_and_a_callback() {
    let d = one_queue(PoolConfig::new(1));
    let queue = first_queue(&d);
    let sink = on_queue(&d, Sink);
    let executor = d.executor(queue);
    let count = Counter::default();
    let (closure, callback) = (|| count.adder(), || count.callback());

    d.execute(queue, closure()).unwrap();
    d.execute(queue, callback()).unwrap();
    d.schedule(queue, d.now(), closure()).unwrap();
    d.schedule(queue, d.now(), callback()).unwrap();
    d.schedule_in(queue, Duration::ZERO, closure()).unwrap();
    d.schedule_in(queue, Duration::ZERO, callback()).unwrap();
    executor.post(closure()).unwrap();
    executor.post(callback()).unwrap();
    executor.dispatch(closure()).unwrap();
    executor.dispatch(callback()).unwrap();
    d.dispatch_callback(sink, closure()).unwrap();
    d.dispatch_callback(sink, callback()).unwrap();

    eventually("every work ran", || count.get() == 12);
    d.synchronize(queue).unwrap();
    assert_eq!(count.get(), 12, "each ran once");
}

/// A refused closure comes back as a `Callback`; a refused callback comes back as given.
#[test]
fn a_refused_work_comes_back_as_a_callback_that_the_same_call_takes_again() {
    let d = one_queue(PoolConfig::new(1));
    let queue = first_queue(&d);
    let (client_type, index) = (ClientType::Cluster, 0);
    let nowhere = ProcessorId { client_type, index };
    let (tx, rx) = mpsc::channel();

    let ran = move || tx.send("ran").unwrap();
    let refused = d.execute(nowhere, ran).unwrap_err();
    assert!(refused.is_no_such_processor());
    let callback: Callback = refused.into_inner();
    assert!(callback.is_inline());
    d.execute(queue, callback).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "ran");

    let big = [3_u64; 16];
    let (tx, rx) = mpsc::channel();
    let spilled = Callback::spill(move || tx.send(big.iter().sum::<u64>()).unwrap());
    let refused = d.schedule(nowhere, d.now(), spilled).unwrap_err();
    let spilled = refused.into_inner();
    let why = "handed back as it was given, still spilled";
    assert!(!spilled.is_inline(), "{why}");
    let refused = d.executor(nowhere).post(spilled).unwrap_err().into_inner();
    d.schedule_in(queue, Duration::ZERO, refused).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 48);
    assert_eq!(d.stats()[0].spilled, 1, "one spilled callback, run once");
}

/// Code generic over the work, as the dispatcher's own calls are, passes it on.
#[test]
fn generic_code_passes_work_on() {
    fn post_it<W: IntoCallback>(d: &Dispatcher<u64>, queue: ProcessorId, work: W) {
        assert!(d.executor(queue).post(work).err().is_none());
    }
    let d = one_queue(PoolConfig::new(1));
    let queue = first_queue(&d);
    let (tx, rx) = mpsc::channel();
    let again = tx.clone();
    post_it(&d, queue, move || tx.send(1).unwrap());
    post_it(&d, queue, Callback::new(move || again.send(2).unwrap()));
    let mut got = [rx.recv().unwrap(), rx.recv().unwrap()];
    got.sort_unstable();
    assert_eq!(got, [1, 2]);
}

/// Counts down by sending itself callbacks on itself through its own typed handle.
struct Countdown {
    from: u32,
    handles: mpsc::Sender<ClientHandle<Countdown>>,
}

impl Client<u64> for Countdown {
    fn on_message(&mut self, _: u64, ctx: &mut Context<u64>) {
        let me = ctx.own_handle::<Self>();
        self.handles.send(me).unwrap();
        if self.from > 0 {
            let tick = Event::to_client(|c: &mut Countdown, ctx: &mut Context<u64>| {
                c.from -= 1;
                c.on_message(0, ctx);
            });
            ctx.dispatcher().dispatch(me, tick).unwrap();
        }
    }
}

#[test]
fn a_client_gets_its_own_typed_handle_from_its_context() {
    let test = one_queue_stepped(PoolConfig::new(1));
    // A client before it, so that the countdown is not in the table's first slot.
    let _sink = on_queue(&test, Sink);
    let (handles, seen) = mpsc::channel();
    let countdown = on_queue(&test, Countdown { from: 3, handles });
    test.dispatch(countdown, Event::Message(0)).unwrap();
    test.run_until_idle();
    let seen: Vec<ClientHandle<Countdown>> = seen.try_iter().collect();
    assert_eq!(seen.len(), 4, "the message and three callbacks on itself");
    let all_its_own = seen.iter().all(|&h| h == countdown);
    assert!(all_its_own, "{seen:?} vs {countdown:?}");
    let stats = &test.stats()[0];
    assert_eq!((stats.wrong_client_type, stats.panics), (0, 0));
}

/// A context lent to another client object (`.0`) panics on `own`, naming both types.
struct Outer(Inner, mpsc::Sender<String>);

struct Inner;

impl Client<u64> for Inner {}

impl Client<u64> for Outer {
    fn on_message(&mut self, _: u64, ctx: &mut Context<u64>) {
        let _ = &self.0;
        let asked = catch_unwind(AssertUnwindSafe(|| ctx.own_handle::<Inner>()));
        let message = match asked {
            Ok(handle) => format!("no panic: {handle}"),
            Err(panic) => panic
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "a panic without a message".into()),
        };
        self.1.send(message).unwrap();
        // Its own type is still right.
        let _ = ctx.own_handle::<Outer>();
    }
}

#[test]
fn asking_for_another_type_than_the_clients_panics_naming_both() {
    let test = one_queue_stepped(PoolConfig::new(1));
    let (answers, answered) = mpsc::channel();
    let outer = on_queue(&test, Outer(Inner, answers));
    test.dispatch(outer, Event::Message(0)).unwrap();
    test.run_until_idle();
    let message = answered.try_recv().unwrap();
    let asked = "zerodispatch: `Context::own_handle::<one_rule::Inner>()`";
    assert!(message.starts_with(asked), "{message}");
    let is = "which is a `one_rule::Outer`, not a `one_rule::Inner`";
    assert!(message.contains(is), "{message}");
    assert!(message.contains("Context::handle()"), "{message}");
    assert!(message.contains(&outer.to_string()), "{message}");
    assert_eq!(test.stats()[0].panics, 0, "caught in the client");
}
