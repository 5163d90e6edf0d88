//! The dispatcher and the broker from tokio tasks: blocking calls panic on a worker naming
//! their async form and the caller's line; the async forms, `allow_blocking`, a producer
//! dropped in a task and a stepped dispatcher work.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zerodispatch::broker::{
    Ack, Broker, BrokerConfig, FlushStrategy, Payload, ProducerConfig, QueueConfig, QueueId,
    QueueMode,
};
use zerodispatch::*;

struct Sink;
impl Client<u64> for Sink {}

/// The text of a panic's `payload`.
fn message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[tokio::test(flavor = "current_thread")]
async fn synchronize_on_a_worker_panics_naming_itself_and_the_line_of_the_call() {
    let d = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .build()
        .unwrap();
    let queue = d.processors(ClientType::Queue)[0];
    let refused = catch_unwind(AssertUnwindSafe(|| d.synchronize(queue)));
    let text = message(refused.unwrap_err());
    assert!(
        text.contains("`synchronize` blocks") && text.contains("`call_async`"),
        "{text}"
    );
    // The async form, and the blocking one where blocking is allowed, work.
    d.call_async(queue, || ()).await.unwrap();
    allow_blocking(|| d.synchronize(queue)).unwrap();
    assert!(!may_block(), "on a worker again after allow_blocking");
    // The panic names the test's own line (`#[track_caller]`): checked with a hook.
    let seen = Arc::new(Mutex::new(None));
    let record = seen.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        *record.lock().unwrap() = info.location().map(|l| (l.file().to_owned(), l.line()));
    }));
    let line_of_call = line!() + 1;
    let _ = catch_unwind(AssertUnwindSafe(|| d.synchronize(queue)));
    std::panic::set_hook(previous);
    let (file, at) = seen.lock().unwrap().clone().unwrap();
    assert!(file.ends_with("on_a_runtime.rs"), "{file}");
    assert_eq!(at, line_of_call);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_producer_in_a_task_publishes_async_refuses_send_and_drops_without_panic() {
    let broker = Broker::start(BrokerConfig {
        queues: vec![QueueConfig::new(QueueMode::Priority)],
        ..BrokerConfig::default()
    })
    .unwrap();
    let acks = Arc::new(Mutex::new(0_usize));
    let seen = acks.clone();
    let producer = broker
        .open_producer_with(
            ProducerConfig {
                flush: FlushStrategy::Timer(Duration::from_millis(1)),
                confirm_timeout: Some(Duration::from_secs(5)),
                ..ProducerConfig::default()
            },
            move |batch: &[Ack]| *seen.lock().unwrap() += batch.len(),
        )
        .unwrap();
    let done = tokio::spawn(async move {
        producer
            .publish_async(QueueId(0), Payload { handle: 1, len: 8 })
            .await
            .unwrap();
        let refused = catch_unwind(AssertUnwindSafe(|| {
            producer.send(QueueId(0), Payload { handle: 2, len: 8 })
        }));
        let text = message(refused.unwrap_err());
        assert!(
            text.contains("`Producer::send` blocks") && text.contains("`try_send`"),
            "{text}"
        );
        // Dropped on a worker: it hands its close on without waiting or panicking.
        drop(producer);
    });
    done.await.unwrap();
    let start = std::time::Instant::now();
    while *acks.lock().unwrap() < 1 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the published message never got its outcome"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_stepped_dispatcher_in_an_async_test_never_refuses_and_its_call_async_resolves() {
    let test = Dispatcher::<u64>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1).capacity(2))
        .build_stepped()
        .unwrap();
    let sink = test
        .register(ClientType::Queue, Sink, Placement::LeastLoaded)
        .unwrap();
    // On the runtime's thread: nothing of a stepped dispatcher waits, nothing is refused.
    test.dispatch(sink, Event::Message(1)).unwrap();
    test.synchronize(sink).unwrap();
    assert_eq!(test.call_async(sink, || 6 * 7).await.unwrap(), 42);
    test.dispatch(sink, Event::Message(2)).unwrap();
    test.dispatch(sink, Event::Message(3)).unwrap();
    // A full stepped queue is not waited for, even by the async door.
    let refused = test.dispatch_async(sink, Event::Message(4)).await;
    assert!(refused.unwrap_err().is_full());
    assert_eq!(test.run_until_idle(), 2);
}
