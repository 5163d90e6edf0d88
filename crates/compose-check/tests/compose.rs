//! Every public error is `Error + Send + Sync + 'static`, so `?` carries it from every call
//! into `anyhow::Error` or a boxed error, and what it hands back survives the trip.

use std::cell::Cell;
use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use zerodispatch_callback::Callback;
use zerodispatch_core::{
    BatchError, Client, ClientEvent, ClientHandle, ClientType, ConfigError, Context, DispatchError,
    Dispatcher, Event, ExecuteOnAllError, NoMessage, ParseWaitStrategyError, Placement, PoolConfig,
    RegisterError, RegisterRefusal, ShutdownTimedOut, SyncError, WaitStrategy,
};

/// Compiles only for an error that composes.
fn composes<E: Error + Send + Sync + 'static>() {}

/// A client that is `Send` and not `Sync` (never built: only its type is named).
#[allow(dead_code)]
struct SendOnly(std::cell::Cell<u64>);
impl Client<NoMessage> for SendOnly {}

/// A message of a broker's own: plain data, as the core asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Confirm {
    queue: u32,
    guid: [u8; 16],
}

#[test]
fn every_public_error_type_is_send_sync_static_and_an_error() {
    // The core's, with what they hand back: events (carrying `Callback`s, which are
    // `Sync` whatever they capture), callbacks, handles.
    composes::<DispatchError<Event<Confirm>>>();
    composes::<DispatchError<Event<NoMessage>>>();
    composes::<DispatchError<Callback>>();
    composes::<DispatchError<ClientHandle>>();
    composes::<BatchError<Event<Confirm>>>();
    // A client need only be `Send`: the error handing it back is `Sync` anyway.
    composes::<RegisterError<SendOnly>>();
    composes::<RegisterRefusal>();
    composes::<SyncError>();
    composes::<ShutdownTimedOut>();
    composes::<ConfigError>();
    composes::<ParseWaitStrategyError>();
    // `done` need not be `Sync`: the error keeps it where no `&` reaches it.
    type Done = Box<dyn FnOnce() + Send>;
    composes::<ExecuteOnAllError<fn(), Done>>();
    // The broker's.
    composes::<zerodispatch_broker::BrokerError>();
    composes::<zerodispatch_broker::SendError>();
    composes::<zerodispatch_broker::ParseConfirmModeError>();
    composes::<zerodispatch_broker::ParseFlushStrategyError>();
    // The wire codec's, the server's and the client's.
    composes::<zerodispatch_wire::DecodeError>();
    composes::<zerodispatch_wire::EncodeError>();
    composes::<zerodispatch_server::ServerError>();
    composes::<zerodispatch_server::LimitsError>();
    composes::<zerodispatch_server::StoreTooLarge>();
    composes::<zerodispatch_client::ClientError>();
    composes::<zerodispatch_client::TrySendError>();
}

/// Counts confirms, and what it was flushed with.
struct Queue {
    confirmed: Arc<AtomicU64>,
}

/// A [`Queue`] registered on `d`, counting into `confirmed`.
fn register_queue(
    d: &mut Dispatcher<Confirm>,
    confirmed: &Arc<AtomicU64>,
) -> Result<ClientHandle<Queue>, RegisterError<Queue>> {
    let confirmed = confirmed.clone();
    d.register(
        ClientType::Queue,
        Queue { confirmed },
        Placement::LeastLoaded,
    )
}

/// A broker configuration with one priority queue.
fn one_priority_queue() -> zerodispatch_broker::BrokerConfig {
    use zerodispatch_broker::{BrokerConfig, QueueConfig, QueueMode};
    let queues = vec![QueueConfig::new(QueueMode::Priority)];
    BrokerConfig {
        queues,
        ..BrokerConfig::default()
    }
}

impl Client<Confirm> for Queue {
    fn on_event(&mut self, event: ClientEvent<Confirm>, _ctx: &mut Context<Confirm>) {
        match event {
            ClientEvent::Message(confirm) => {
                assert_eq!(confirm.guid[0], confirm.queue as u8);
                self.confirmed.fetch_add(1, Ordering::Relaxed);
            }
            ClientEvent::Callback(cb) => cb.call(),
        }
    }
}

/// The confirm of message `n` on queue `n`.
fn confirm(n: u32) -> Event<Confirm> {
    Event::Message(Confirm {
        queue: n,
        guid: [n as u8; 16],
    })
}

/// Every fallible call of `Dispatcher`, `DispatcherHandle` and `Executor`, with `?` into
/// `anyhow::Error`.
fn every_call_with_anyhow(confirmed: &Arc<AtomicU64>) -> anyhow::Result<()> {
    let mut d = Dispatcher::<Confirm>::builder()
        .pool(
            ClientType::Queue,
            PoolConfig::new(2).wait("spin-then-park".parse::<WaitStrategy>()?),
        )
        .build()?;
    let queue = register_queue(&mut d, confirmed)?;
    d.try_dispatch(queue, confirm(1))?;
    d.dispatch(queue, confirm(2))?;
    d.dispatch_timeout(queue, confirm(3), Duration::from_secs(5))?;
    d.dispatch_callback(queue, || ())?;
    d.try_dispatch_batch(queue, &mut (4..6).map(confirm))?;
    d.dispatch_batch(queue, &mut (6..8).map(confirm))?;
    d.dispatch(
        queue,
        Event::to_client(|q: &mut Queue, _ctx| {
            q.confirmed.fetch_add(1, Ordering::Relaxed);
        }),
    )?;
    let processor = d.processors(ClientType::Queue)[0];
    d.execute(processor, Callback::new(|| ()))?;
    let timer = d.schedule_in(processor, Duration::from_secs(60), Callback::new(|| ()))?;
    assert!(d.cancel(timer));
    d.synchronize(queue)?;
    let on = d.call(queue, move || 40 + 2)?;
    assert_eq!(on, 42);

    let handle = d.handle();
    handle.dispatch(queue, confirm(8))?;
    handle.synchronize(processor)?;
    // A completion that is `Send` but not `Sync`.
    let not_sync = Cell::new(0_u8);
    handle.execute_on_all(ClientType::Queue, || (), move || not_sync.set(1))?;

    let executor = handle.executor(processor);
    executor.post(Callback::new(|| ()))?;
    executor.dispatch(Callback::new(|| ()))?;

    handle.unregister(queue)?;
    d.shutdown_timeout(Duration::from_secs(10))?;
    Ok(())
}

#[test]
fn every_dispatcher_call_goes_into_anyhow_with_question_mark() {
    let confirmed = Arc::new(AtomicU64::new(0));
    every_call_with_anyhow(&confirmed).unwrap();
    // 8 confirms and the client callback: the calls above did reach the client.
    assert_eq!(confirmed.load(Ordering::Relaxed), 8 + 1);
}

/// A dispatch refused after shutdown, carried up by `?` into `anyhow::Error`.
fn dispatch_after_shutdown(confirmed: &Arc<AtomicU64>) -> anyhow::Result<()> {
    let mut d = Dispatcher::<Confirm>::builder()
        .pool(ClientType::Queue, PoolConfig::new(1))
        .build()?;
    let queue = register_queue(&mut d, confirmed)?;
    let handle = d.handle();
    d.shutdown();
    handle
        .dispatch(queue, confirm(7))
        .context("confirming message 7")?;
    Ok(())
}

#[test]
fn the_event_an_error_hands_back_survives_anyhow() {
    let err = dispatch_after_shutdown(&Arc::new(AtomicU64::new(0))).unwrap_err();
    assert_eq!(err.to_string(), "confirming message 7");
    let refused = err
        .downcast::<DispatchError<Event<Confirm>>>()
        .expect("the core's error is kept, typed");
    assert!(refused.is_shut_down());
    let (queue, guid) = (7, [7; 16]);
    match refused.into_inner() {
        Event::Message(c) => assert_eq!(c, Confirm { queue, guid }),
        other => panic!("handed back {}", other.kind()),
    }
}

/// What `execute_on_all` is given below, named so that the test can take it back out.
type AllF = Box<dyn Fn() + Send + Sync>;
/// Its completion: `Send`, not `Sync`.
type AllDone = Box<dyn FnOnce() + Send>;

/// The same calls with a boxed error, and an `execute_on_all` refused: `f` and a
/// completion that is not `Sync` come back through the box.
fn boxed(ran: &Arc<AtomicU64>) -> Result<(), Box<dyn Error + Send + Sync>> {
    let mut d = Dispatcher::<NoMessage>::builder()
        .pool(ClientType::Session, PoolConfig::new(1))
        .build()?;
    let processor = d.processors(ClientType::Session)[0];
    d.call(processor, || ())?;
    let handle = d.handle();
    d.shutdown();
    let (f_ran, done_ran) = (ran.clone(), ran.clone());
    let not_sync = Cell::new(10_u64);
    let f: AllF = Box::new(move || {
        f_ran.fetch_add(1, Ordering::Relaxed);
    });
    let done: AllDone = Box::new(move || {
        done_ran.fetch_add(not_sync.get(), Ordering::Relaxed);
    });
    handle.execute_on_all(ClientType::Session, f, done)?;
    Ok(())
}

#[test]
fn a_refused_execute_on_all_comes_back_through_a_box() {
    let ran = Arc::new(AtomicU64::new(0));
    let err = boxed(&ran).unwrap_err();
    assert_eq!(ran.load(Ordering::Relaxed), 0, "refused: neither ran");
    assert!(err.to_string().contains("shutting down"), "{err}");
    let refused = err
        .downcast::<ExecuteOnAllError<AllF, AllDone>>()
        .expect("the core's error is kept, typed");
    assert_eq!(refused.not_reached.len(), 1);
    let (f, done) = refused.into_inner();
    f();
    done();
    assert_eq!(ran.load(Ordering::Relaxed), 1 + 10, "both came back, unrun");
}

/// The broker's calls, with `?` into `anyhow::Error`.
fn broker_calls() -> anyhow::Result<u64> {
    use zerodispatch_broker::*;
    let broker = Broker::start(one_priority_queue())?;
    let acks = Arc::new(AtomicU64::new(0));
    let sink = acks.clone();
    let producer = broker.open_producer(16, move |batch: &[Ack]| {
        sink.fetch_add(batch.len() as u64, Ordering::Relaxed);
    })?;
    let consumer = broker.open_consumer(
        QueueId(0),
        AppId(0),
        ConsumerOptions::default(),
        |_: &[Delivery]| {},
    )?;
    producer.publish(QueueId(0), Payload { handle: 1, len: 10 })?;
    producer.send(QueueId(0), Payload { handle: 2, len: 10 })?;
    broker.quiesce()?;
    let _state = broker.cluster_state()?;
    broker.execute(
        broker.processors(ClientType::Queue)[0],
        Callback::new(|| ()),
    )?;
    broker.close_consumer(&consumer)?;
    let _mode: ConfirmMode = "inline".parse()?;
    let _flush: FlushStrategy = "dynamic".parse()?;
    producer.close(Duration::from_secs(5));
    broker.quiesce()?;
    let acked = acks.load(Ordering::Relaxed);
    broker.shutdown();
    Ok(acked)
}

#[test]
fn every_broker_call_goes_into_anyhow_with_question_mark() {
    assert_eq!(broker_calls().unwrap(), 2);
}

/// The server's and the client's calls, with `?` into `anyhow::Error`; the error of a
/// connection refused comes back as the client's.
async fn client_calls(addr: std::net::SocketAddr) -> anyhow::Result<u64> {
    use zerodispatch_client::*;
    let client = Client::connect(addr, ClientOptions::default()).await?;
    let stored = Arc::new(AtomicU64::new(0));
    let sink = stored.clone();
    let producer = client
        .open_producer(QueueId(0), ProducerOptions::default(), move |outcomes| {
            for outcome in outcomes {
                assert_eq!(outcome.status, ConfirmStatus::Stored);
                sink.fetch_add(1, Ordering::Relaxed);
            }
        })
        .await?;
    producer.send(b"one").await?;
    producer.try_send(b"two")?;
    // Both outcomes in before the close (the proof here is of `?`, not of close's flush).
    for _ in 0..500 {
        if producer.unconfirmed() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    producer.close().await?;
    client.close().await;
    Ok(stored.load(Ordering::Relaxed))
}

#[test]
fn every_client_call_goes_into_anyhow_with_question_mark() -> anyhow::Result<()> {
    let server = zerodispatch_server::Server::builder()
        .listen("127.0.0.1:0".parse()?)
        .broker_config(one_priority_queue())
        .start()?;
    let addr = server.local_addr();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    assert_eq!(runtime.block_on(client_calls(addr))?, 2);
    drop(server);
    // Nothing listens there now: the client's error, through anyhow, typed.
    let err = runtime
        .block_on(client_calls(addr))
        .expect_err("the server is gone");
    let client_error = err
        .downcast_ref::<zerodispatch_client::ClientError>()
        .expect("the client's error is kept, typed");
    assert!(client_error.is_fatal(), "{client_error}");
    Ok(())
}
