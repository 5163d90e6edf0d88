//! The executor and `execute_on_all`: closures run on processors.

// Under `--cfg loom` the protocols' primitives are loom's, usable only inside a model:
// only the loom models (`--lib`) run then.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use common::*;
use zerodispatch_core::*;

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
