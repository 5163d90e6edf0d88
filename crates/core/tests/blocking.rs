//! Blocking calls panic on a tokio worker thread (feature `tokio`), elsewhere they block.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::*;
use tokio::runtime::{Builder, Runtime};

/// One queue processor and a client on it.
fn dispatcher() -> (Dispatcher<u64>, ClientHandle<Sink>) {
    let d = one_queue(PoolConfig::new(1));
    let sink = on_queue(&d, Sink);
    (d, sink)
}

/// The message of the panic `f` makes on a runtime's worker (the thread's own runtime).
fn panic_on_a_worker<T: std::fmt::Debug>(f: impl FnOnce() -> T) -> String {
    let rt = Builder::new_current_thread().build().unwrap();
    rt.block_on(async { panic_message(f) })
}

/// A runtime of one worker thread of its own.
fn one_worker() -> Runtime {
    let mut builder = Builder::new_multi_thread();
    builder.worker_threads(1).build().unwrap()
}

/// The message of the panic `f` makes (it must panic).
fn panic_message<T: std::fmt::Debug>(f: impl FnOnce() -> T) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).unwrap_err();
    let text = payload.downcast_ref::<&str>().map(|s| (*s).to_owned());
    let owned = payload.downcast_ref::<String>().cloned();
    owned.or(text).unwrap_or_default()
}

#[test]
fn a_blocking_dispatch_on_a_runtime_thread_panics_naming_the_async_form() {
    let (d, sink) = dispatcher();
    let handle = d.handle();
    let message = panic_on_a_worker(|| handle.dispatch(sink, Event::Message(1)));
    assert!(message.contains("`dispatch` blocks"), "{message}");
    assert!(message.contains("`dispatch_async`"), "{message}");
    // The queue's room never mattered: the event was not sent, the processor is fine.
    assert_eq!(d.synchronize(sink), Ok(()));
}

#[test]
fn synchronize_and_call_in_a_task_of_a_multi_thread_runtime_panic_naming_call_async() {
    let (d, sink) = dispatcher();
    let handle = d.handle();
    let rt = one_worker();
    let task = rt.spawn(async move {
        let sync = panic_message(|| handle.synchronize(sink));
        (sync, panic_message(|| handle.call(sink, || 7)))
    });
    let (sync, call) = rt.block_on(task).unwrap();
    let names = sync.contains("`synchronize` blocks") && sync.contains("`call_async`");
    assert!(names, "{sync}");
    assert!(call.contains("`call` blocks"), "{call}");
}

#[test]
fn blocking_calls_in_spawn_blocking_and_the_async_forms_on_the_runtime_work() {
    let (d, sink) = dispatcher();
    let handle = d.handle();
    let rt = one_worker();
    let blocking = handle.clone();
    let task = rt.spawn_blocking(move || {
        blocking.dispatch(sink, Event::Message(1)).unwrap();
        blocking.call(sink, || 42).unwrap()
    });
    assert_eq!(rt.block_on(task).unwrap(), 42);
    let on_runtime = handle.clone();
    let answer = rt.block_on(async move {
        let sent = on_runtime.dispatch_async(sink, Event::Message(2)).await;
        sent.unwrap();
        on_runtime.call_async(sink, || 43).await.unwrap()
    });
    assert_eq!(answer, 43);
    // A plain thread (here the test's) blocks as usual.
    assert_eq!(handle.call(sink, || 44), Ok(44));
}

#[test]
fn an_executors_dispatch_on_a_runtime_thread_panics_naming_itself() {
    let (d, sink) = dispatcher();
    let executor = d.executor(sink.processor());
    let message = panic_on_a_worker(|| executor.dispatch(Callback::new(|| ())));
    assert!(message.contains("`Executor::dispatch` blocks"), "{message}");
}
