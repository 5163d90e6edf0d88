//! Blocking calls on a tokio runtime's worker thread panic, naming the async form
//! (feature `tokio`); on `spawn_blocking` threads and plain threads they block as usual.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::*;
use zerodispatch_core::*;

fn dispatcher() -> (Dispatcher<u64>, ClientHandle<Sink>) {
    let d = one_queue(PoolConfig::new(1));
    let sink = on_queue(&d, Sink);
    (d, sink)
}

/// A runtime whose one worker is the thread that calls `block_on`.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// A runtime of one worker thread of its own.
fn one_worker() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap()
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[test]
fn a_blocking_dispatch_on_a_runtime_thread_panics_naming_the_async_form() {
    let (d, sink) = dispatcher();
    let handle = d.handle();
    let rt = current_thread();
    let refused = rt.block_on(async {
        catch_unwind(AssertUnwindSafe(|| {
            handle.dispatch(sink, Event::Message(1))
        }))
    });
    let message = panic_message(refused.unwrap_err());
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
        let sync = catch_unwind(AssertUnwindSafe(|| handle.synchronize(sink)));
        let call = catch_unwind(AssertUnwindSafe(|| handle.call(sink, || 7)));
        (
            panic_message(sync.unwrap_err()),
            panic_message(call.unwrap_err()),
        )
    });
    let (sync, call) = rt.block_on(task).unwrap();
    assert!(
        sync.contains("`synchronize` blocks") && sync.contains("`call_async`"),
        "{sync}"
    );
    assert!(call.contains("`call` blocks"), "{call}");
}

#[test]
fn blocking_calls_in_spawn_blocking_and_the_async_forms_on_the_runtime_work() {
    let (d, sink) = dispatcher();
    let handle = d.handle();
    let rt = one_worker();
    let blocking = handle.clone();
    let answer = rt
        .block_on(rt.spawn_blocking(move || {
            blocking.dispatch(sink, Event::Message(1)).unwrap();
            blocking.call(sink, || 42).unwrap()
        }))
        .unwrap();
    assert_eq!(answer, 42);
    let on_runtime = handle.clone();
    let answer = rt.block_on(async move {
        on_runtime
            .dispatch_async(sink, Event::Message(2))
            .await
            .unwrap();
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
    let rt = current_thread();
    let refused = rt.block_on(async {
        catch_unwind(AssertUnwindSafe(|| executor.dispatch(Callback::new(|| ()))))
    });
    let message = panic_message(refused.unwrap_err());
    assert!(message.contains("`Executor::dispatch` blocks"), "{message}");
}
