//! The reliable producer and consumer against the real server, through a proxy that drops
//! every connection again and again while they run: every message has exactly one outcome,
//! is stored once, and reaches the application exactly once (the server deduplicates the
//! producer's resends by its name and publish ids; the consumer filters redeliveries).

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::proxy::KillProxy;
use support::{collector, exactly_once};
use zerodispatch_broker::{BrokerConfig, QueueConfig, QueueMode};
use zerodispatch_client::{
    AppId, Backoff, ClientOptions, ConfirmStatus, ConsumerOptions, Guid, ProducerOptions, QueueId,
    ReliableConsumer, ReliableConsumerOptions, ReliableProducer, ReliableProducerOptions,
};
use zerodispatch_server::{Limits, Server};

/// What the application was handed: GUID and payload.
type Handed = Arc<Mutex<Vec<(Guid, Vec<u8>)>>>;

fn backoff() -> Backoff {
    Backoff {
        initial: Duration::from_millis(2),
        max: Duration::from_millis(20),
        ..Backoff::default()
    }
}

fn quiet() -> ClientOptions {
    ClientOptions {
        heartbeat: Duration::ZERO,
        ..ClientOptions::default()
    }
}

#[test]
fn connections_killed_while_producing_and_consuming_lose_nothing() {
    let limits = Limits {
        consumer_window: 64,
        ..Limits::default()
    };
    let server = Server::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .broker_config(BrokerConfig {
            queues: vec![QueueConfig {
                window: limits.consumer_window,
                ..QueueConfig::new(QueueMode::Priority)
            }],
            ..BrokerConfig::default()
        })
        .limits(limits)
        .start()
        .expect("the server starts");
    let server_addr = server.local_addr();
    let broker = std::sync::Arc::clone(server.broker());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let proxy = KillProxy::start(server_addr).await;
        let handed: Handed = Arc::default();
        let sink = Arc::clone(&handed);
        let consumer = ReliableConsumer::connect(
            proxy.addr,
            QueueId(0),
            AppId(0),
            ReliableConsumerOptions {
                consumer: ConsumerOptions {
                    credit: 64,
                    auto_credit: true,
                },
                client: quiet(),
                backoff: backoff(),
                window: 4096,
            },
            move |batch| {
                let mut sink = sink.lock().unwrap();
                for message in batch.iter() {
                    sink.push((message.guid, message.payload.to_vec()));
                }
                batch.confirm_all();
            },
        )
        .await
        .unwrap();
        let (outcomes, on_confirm) = collector();
        let producer = ReliableProducer::connect(
            proxy.addr,
            QueueId(0),
            ReliableProducerOptions {
                producer: ProducerOptions {
                    max_unconfirmed: 512,
                    ..ProducerOptions::default()
                },
                client: quiet(),
                backoff: backoff(),
                ..ReliableProducerOptions::new("kill-test")
            },
            on_confirm,
        )
        .await
        .unwrap();
        const N: u64 = 5_000;
        let killer = async {
            let mut kills = 0;
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(15)).await;
                kills += proxy.kill_all();
            }
            kills
        };
        let sending = async {
            for i in 0..N {
                producer.send(&i.to_le_bytes()).await.unwrap();
            }
        };
        let (kills, ()) = tokio::join!(killer, sending);
        assert!(kills > 0);
        let start = Instant::now();
        while outcomes.lock().unwrap().len() < N as usize
            || handed_payloads(&handed).len() < N as usize
        {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{} outcomes, {} payloads handed",
                outcomes.lock().unwrap().len(),
                handed_payloads(&handed).len()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for outcome in exactly_once(&outcomes, N) {
            assert_eq!(outcome.status, ConfirmStatus::Stored);
        }
        // Whatever would come late comes now.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let handed = handed.lock().unwrap().clone();
        assert_eq!(handed.len(), N as usize, "each message handed out once");
        let queue = &broker.queue_stats()[0];
        assert_eq!(queue.stored, N, "each message stored once: {queue:?}");
        let guids: HashSet<Guid> = handed.iter().map(|(g, _)| *g).collect();
        assert_eq!(
            guids.len(),
            handed.len(),
            "no GUID handed to the application twice"
        );
        let payloads = handed_payloads_of(&handed);
        assert_eq!(
            payloads.len(),
            N as usize,
            "every message reached the application"
        );
        let (ps, cs) = (producer.stats(), consumer.stats());
        assert!(ps.reconnects > 0 && cs.reconnects > 0, "{ps:?} {cs:?}");
        producer.close().await;
        consumer.close().await;
    });
    server.shutdown();
}

fn handed_payloads(handed: &Mutex<Vec<(Guid, Vec<u8>)>>) -> HashSet<Vec<u8>> {
    handed_payloads_of(&handed.lock().unwrap())
}

fn handed_payloads_of(handed: &[(Guid, Vec<u8>)]) -> HashSet<Vec<u8>> {
    handed.iter().map(|(_, p)| p.clone()).collect()
}

#[test]
fn default_options_open_on_a_server_with_default_limits() {
    let server = Server::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .broker_config(BrokerConfig {
            queues: vec![QueueConfig::new(QueueMode::Priority)],
            ..BrokerConfig::default()
        })
        .start()
        .expect("the server starts");
    let addr = server.local_addr();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let (outcomes, on_confirm) = collector();
        let producer = ReliableProducer::connect(
            addr,
            QueueId(0),
            ReliableProducerOptions::new("defaults"),
            on_confirm,
        )
        .await
        .expect("the default cap is within the server's default limit");
        producer.send(b"one").await.unwrap();
        // A close right after the send may find the message not at its queue yet: the
        // broker says `NotSent` then.
        support::wait_outcomes(&outcomes, 1).await;
        producer.close().await;
        assert_eq!(exactly_once(&outcomes, 1)[0].status, ConfirmStatus::Stored);
    });
    server.shutdown();
}
