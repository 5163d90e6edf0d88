//! The executor and `execute_on_all`: closures run on processors.

#![cfg(not(loom))]

mod common;

use common::*;

#[test]
fn executor_posts_always_and_dispatches_in_place_on_its_own_thread() {
    let d = one_queue(PoolConfig::new(1));
    let p = first_queue(&d);
    let exec = d.executor(p);
    let order = Arc::new(Mutex::new(Vec::new()));
    let (o, e) = (order.clone(), exec.clone());
    let outer = Callback::new(move || {
        let push = |what| {
            let o = o.clone();
            Callback::new(move || o.lock().unwrap().push(what))
        };
        e.post(push("posted")).unwrap();
        e.dispatch(push("in place")).unwrap();
        o.lock().unwrap().push("outer done");
    });
    exec.post(outer).unwrap();
    (0..2).for_each(|_| d.synchronize(p).unwrap());
    assert_eq!(*order.lock().unwrap(), ["in place", "outer done", "posted"]);
}

#[test]
fn execute_on_all_runs_f_on_every_processor_then_done_once() {
    let d = one_queue(PoolConfig::new(3));
    let threads = Arc::new(Mutex::new(Vec::new()));
    let done = Counter::default();
    let (t, dn, t2) = (threads.clone(), done.clone(), threads.clone());
    let name = || thread::current().name().unwrap().to_owned();
    let f = move || t.lock().unwrap().push(name());
    let then = move || {
        assert_eq!(t2.lock().unwrap().len(), 3, "done runs after every f");
        dn.incr();
    };
    d.execute_on_all(ClientType::Queue, f, then).unwrap();
    let queues = d.processors(ClientType::Queue);
    queues.into_iter().for_each(|p| d.synchronize(p).unwrap());
    let mut names = threads.lock().unwrap().clone();
    names.sort();
    assert_eq!(names, ["zd-queue-0", "zd-queue-1", "zd-queue-2"]);
    assert_eq!(done.get(), 1);
}

/// `execute_on_all` with outbox room for part of the pool runs `f` everywhere or hands it back.
#[test]
fn execute_on_all_on_a_processor_runs_everywhere_or_is_refused() {
    let d = one_queue_unprobed(PoolConfig::new(2).capacity(2).outbox_capacity(2));
    let own = recorder_at(&d, Placement::Processor(0)).0;
    let (ran, done) = (Counter::default(), Counter::default());
    let (told, outcome) = mpsc::channel();
    let (handle, f, then) = (d.handle(), ran.adder(), done.adder());
    let on_own = Callback::spill(move || {
        // Own queue full, one event in the outbox: room for one more of the two processors.
        while handle.try_dispatch(own, Event::Message(0)).is_ok() {}
        handle.dispatch(own, Event::Message(1)).unwrap();
        let result = handle.execute_on_all(ClientType::Queue, f, then);
        let told_ok = told.send((result.is_ok(), format!("{result:?}"), result.err()));
        told_ok.unwrap();
    });
    d.execute(own.processor(), on_own).unwrap();
    let (ok, shown, refused) = outcome.recv_timeout(Duration::from_secs(20)).unwrap();
    for p in d.processors(ClientType::Queue) {
        d.synchronize(p).unwrap();
        d.synchronize(p).unwrap();
    }
    let counts = || (ran.get(), done.get());
    assert!(
        !ok,
        "reported a success: {shown}; (f, done) ran {:?} times",
        counts()
    );
    assert_eq!(counts(), (0, 0), "refused, yet f or done ran");
    let refused = refused.unwrap();
    let outbox_full = ExecuteOnAllRefusal::OutboxFull {
        processor: own.processor(),
        room: 1,
        needed: 2,
    };
    assert_eq!(refused.reason, outbox_full);
    assert_eq!(refused.not_reached, d.processors(ClientType::Queue));
    let says = "reached none of the 2 processors";
    assert!(refused.to_string().contains(says), "{refused}");
    // Nothing lost: what came back runs everywhere once the outbox has room.
    let (f, done_again) = refused.into_inner();
    let (finished, waited) = mpsc::channel();
    d.execute_on_all(ClientType::Queue, f, move || {
        done_again();
        finished.send(()).unwrap();
    })
    .unwrap();
    waited.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(counts(), (2, 1));
}
