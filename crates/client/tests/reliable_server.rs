//! Reliable clients against the real server, killed or restarted: each message once, end to end.

mod support;

use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use support::proxy::KillProxy;
use support::*;
use zerodispatch_broker::{Broker, BrokerConfig, QueueMode};
use zerodispatch_client::{ConfirmStatus, Guid, ReliableConsumerOptions, ReliableProducerOptions};
use zerodispatch_server::{Limits, PayloadStore, Server};

/// A queue with a window the test's consumer can take whole.
fn limits() -> Limits {
    Limits {
        consumer_window: 64,
        ..Limits::default()
    }
}

/// A broker of one priority queue with the window of `limits`.
fn broker_config(limits: &Limits) -> BrokerConfig {
    let mut config = one_queue();
    config.queues[0].window = limits.consumer_window;
    config
}

/// Runs reliable clients of `N` messages beside `disrupt`: each `Stored`, stored and handed once.
fn exactly_once_through<D>(addr: SocketAddr, broker: &Broker, disrupt: impl FnOnce() -> D)
where
    D: Future<Output = ()>,
{
    runtime(2).block_on(async move {
        let options = ReliableConsumerOptions {
            consumer: credit(64, true),
            client: quiet(),
            backoff: backoff(2, 20),
            window: 4096,
        };
        let (consumer, handed) = consuming_reliably(addr, options, |b| b.confirm_all()).await;
        let options = reliable("kill-test", 512, backoff(2, 20));
        let (producer, outcomes) = reliable_producer(addr, options).await;
        const N: u64 = 5_000;
        let sending = async {
            for i in 0..N {
                producer.send(&i.to_le_bytes()).await.unwrap();
            }
        };
        tokio::join!(disrupt(), sending);
        let settled = || outcomes.lock().unwrap().len();
        let reached = || handed_payloads(&handed.lock().unwrap()).len();
        let (start, n) = (Instant::now(), N as usize);
        while settled() < n || reached() < n {
            let ok = start.elapsed() < Duration::from_secs(20);
            assert!(ok, "{} outcomes, {} payloads handed", settled(), reached());
            tokio::time::sleep(ms(5)).await;
        }
        all_settled(&outcomes, N, ConfirmStatus::Stored);
        // Whatever would come late comes now.
        tokio::time::sleep(ms(50)).await;
        let handed = handed.lock().unwrap().clone();
        assert_eq!(handed.len(), n, "each message handed out once");
        let queue = &broker.queue_stats()[0];
        assert_eq!(queue.stored, N, "each message stored once: {queue:?}");
        let guids: HashSet<Guid> = handed.iter().map(|(g, _, _)| *g).collect();
        assert_eq!(guids.len(), handed.len(), "no GUID handed out twice");
        let distinct = handed_payloads(&handed).len();
        assert_eq!(distinct, n, "every message reached the application");
        let (ps, cs) = (producer.stats(), consumer.stats());
        assert!(ps.reconnects > 0 && cs.reconnects > 0, "{ps:?} {cs:?}");
        producer.close().await;
        consumer.close().await;
    });
}

#[test]
fn connections_killed_while_producing_and_consuming_lose_nothing() {
    let limits = limits();
    let server = real_server(broker_config(&limits), limits);
    let broker = Arc::clone(server.broker());
    // The proxy runs on a runtime of its own, beside the clients'.
    let proxy_runtime = tokio::runtime::Runtime::new().unwrap();
    let proxy = proxy_runtime.block_on(KillProxy::start(server.local_addr()));
    let (proxy, kills) = (proxy.expect("the proxy starts"), AtomicU64::new(0));
    let killer = async {
        for _ in 0..20 {
            tokio::time::sleep(ms(15)).await;
            kills.fetch_add(proxy.kill_all() as u64, Ordering::Relaxed);
        }
    };
    exactly_once_through(proxy.addr(), &broker, || killer);
    assert!(kills.load(Ordering::Relaxed) > 0);
    server.shutdown();
}

/// The server restarted thrice before a running broker: told `SHUTTING_DOWN`, the clients recover.
#[test]
fn a_server_restarted_in_front_of_a_running_broker_loses_nothing() {
    let limits = limits();
    let store = Arc::new(PayloadStore::try_new(limits.store_slots, limits.slot_size).unwrap());
    let mut config = broker_config(&limits);
    config.on_release = Some(store.on_release());
    let broker = Arc::new(Broker::start(config).unwrap());
    let start = move |addr: SocketAddr| {
        let (broker, store) = (Arc::clone(&broker), Arc::clone(&store));
        let (server, queues) = (Server::builder().listen(addr), vec![QueueMode::Priority]);
        server.limits(limits).broker(broker, queues, store).start()
    };
    let server = start("127.0.0.1:0".parse().unwrap()).expect("the server starts");
    let addr = server.local_addr();
    let broker = Arc::clone(server.broker());
    // Shut down from a thread of its own (outside any runtime), once the clients are open.
    let (go, begin) = std::sync::mpsc::channel::<()>();
    let restarts = Arc::new(AtomicU64::new(0));
    let restarted = Arc::clone(&restarts);
    let restarter = std::thread::spawn(move || {
        let mut server = server;
        let _ = begin.recv();
        for _ in 0..3 {
            std::thread::sleep(ms(20));
            server.shutdown();
            server = start(addr).expect("the port is free again");
            restarted.fetch_add(1, Ordering::Relaxed);
        }
        server
    });
    // The checks wait for the last restart: the sending runs beside them.
    let all_restarted = || {
        go.send(()).unwrap();
        async {
            while restarts.load(Ordering::Relaxed) < 3 {
                tokio::time::sleep(ms(2)).await;
            }
        }
    };
    exactly_once_through(addr, &broker, all_restarted);
    restarter.join().unwrap().shutdown();
}

#[test]
fn default_options_open_on_a_server_with_default_limits() {
    let server = real_server(one_queue(), Limits::default());
    let addr = server.local_addr();
    current_thread().block_on(async move {
        let options = ReliableProducerOptions::new("defaults");
        let (producer, outcomes) = reliable_producer(addr, options).await;
        producer.send(b"one").await.unwrap();
        // Waited for: a close right after the send may find it not at its queue (`NotSent`).
        support::wait_outcomes(&outcomes, 1).await;
        producer.close().await;
        assert_eq!(exactly_once(&outcomes, 1)[0].status, ConfirmStatus::Stored);
    });
    server.shutdown();
}
