//! `--transport tcp`: the same open-loop run over the wire protocol. The publishers and
//! consumers are `zerodispatch-client` connections (one each) on a tokio runtime of the
//! perftest's own; the broker is a `zerodispatch-server` started in this process on a
//! loopback port, or the server at `--connect`.
//!
//! What differs from the in-process run is only the path: the schedule, the publishers,
//! the latency recorders and the report are the same (`run.rs`). Payload bytes travel for
//! real: each message carries its scheduled send time in its first 8 bytes (little-endian
//! nanoseconds since the run's epoch), padded with zeros to `--size`, so that the consumer
//! measures publish -> consume from the bytes it received. Publish -> confirm is measured
//! in the producer's confirm handler from the same scheduled time, which the publisher
//! keeps by publish id (the client numbers a producer's messages 0, 1, 2, ...) in a ring of
//! `max_unconfirmed` places: a message's place is reused only after its outcome.

use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_broker::AckStatus;
use zerodispatch_client::{
    AppId, Client, ClientOptions, ConfirmStatus, ConsumerOptions, Flush, Producer, ProducerOptions,
    QueueId,
};
use zerodispatch_core::Percentiles;
use zerodispatch_server::{Limits, Server};

use crate::run::{
    Clock, DRAIN_TIMEOUT, OutcomeCounters, Progress, Publishing, Recorder, RunResult, Scenario,
    Shared, WINDOW, lock, merge_total, publish_all, timer_interval,
};

/// Bytes of a payload that carry its scheduled send time.
pub const STAMP_LEN: usize = 8;

/// Where a TCP run's broker is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A server started in this process, on a loopback port, with the broker the command
    /// line describes.
    Local,
    /// A server already running at this address (its broker's configuration is its own:
    /// the perftest uses queue 0).
    Connect(SocketAddr),
}

/// The broker's status of a wire status (the protocol's table, `docs/protocol.md`).
fn ack_status(status: ConfirmStatus) -> AckStatus {
    match status {
        ConfirmStatus::Stored => AckStatus::Acked,
        ConfirmStatus::RejectedQueueFull => AckStatus::RejectedQueueFull,
        ConfirmStatus::RejectedProducerFull => AckStatus::RejectedProducerFull,
        ConfirmStatus::RejectedUnknownQueue => AckStatus::RejectedUnknownQueue,
        ConfirmStatus::Closed => AckStatus::Closed,
        ConfirmStatus::TimedOut => AckStatus::TimedOut,
        ConfirmStatus::NotSent => AckStatus::NotSent,
    }
}

/// The scheduled send times of a producer's unconfirmed messages, by publish id.
struct Stamps(Box<[AtomicU64]>);

impl Stamps {
    fn new(places: usize) -> Self {
        Self(
            (0..places.next_power_of_two())
                .map(|_| AtomicU64::new(0))
                .collect(),
        )
    }

    fn place(&self, id: u64) -> &AtomicU64 {
        &self.0[(id as usize) & (self.0.len() - 1)]
    }
}

/// Runs `scenario` over TCP and returns what it measured.
///
/// # Errors
///
/// The server did not start, a connection or an open failed.
pub fn run(
    scenario: &Scenario,
    target: &Target,
    progress: Progress,
) -> Result<RunResult, Box<dyn Error>> {
    let clock = Clock(Instant::now());
    let server = match target {
        Target::Local => Some(start_server(scenario)?),
        Target::Connect(_) => None,
    };
    let addr = match (&server, target) {
        (Some(server), _) => server.local_addr(),
        (None, Target::Connect(addr)) => *addr,
        (None, Target::Local) => unreachable!("a local target starts its server"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(scenario.io_threads)
        .thread_name("perftest-io")
        .enable_all()
        .build()?;

    // Consumers: per app, `consumers` of them, each on a connection of its own.
    let consumed = Arc::new(AtomicU64::new(0));
    let mut consume_recorders = Vec::new();
    let mut consumers = Vec::new();
    for app in 0..scenario.apps() {
        for _ in 0..scenario.consumers {
            let recorder: Shared = Arc::new(std::sync::Mutex::new(Recorder::new()));
            consume_recorders.push(recorder.clone());
            let consumed = consumed.clone();
            let options = ConsumerOptions {
                credit: WINDOW,
                auto_credit: true,
            };
            let (client, consumer) = runtime.block_on(async {
                let client = Client::connect(addr, ClientOptions::default()).await?;
                let consumer = client
                    .open_consumer(QueueId(0), AppId(app), options, move |batch| {
                        let now = clock.now_ns();
                        let mut r = lock(&recorder);
                        for m in batch.iter() {
                            let mut stamp = [0_u8; STAMP_LEN];
                            let n = m.payload.len().min(STAMP_LEN);
                            stamp[..n].copy_from_slice(&m.payload[..n]);
                            r.record(now.saturating_sub(u64::from_le_bytes(stamp)) / 1_000);
                        }
                        drop(r);
                        batch.confirm_all();
                        consumed.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    })
                    .await?;
                Ok::<_, zerodispatch_client::ClientError>((client, consumer))
            })?;
            consumers.push((client, consumer));
        }
    }

    // Producers, one per publisher, each on a connection of its own.
    let outcomes = Arc::new(OutcomeCounters::default());
    let mut confirm_recorders = Vec::new();
    let mut producers = Vec::new();
    let options = ProducerOptions {
        max_unconfirmed: scenario.max_unconfirmed,
        flush: match scenario.flush {
            zerodispatch_broker::FlushStrategy::Dynamic => Flush::Dynamic {
                batch_size: scenario.batch_size,
            },
            zerodispatch_broker::FlushStrategy::Timer(every) => Flush::Timer(every),
        },
        confirm_timeout: None,
    };
    for _ in 0..scenario.publishers {
        let recorder: Shared = Arc::new(std::sync::Mutex::new(Recorder::new()));
        confirm_recorders.push(recorder.clone());
        let outcomes = outcomes.clone();
        let stamps = Arc::new(Stamps::new(2 * scenario.max_unconfirmed as usize));
        let read = stamps.clone();
        let (client, producer) = runtime.block_on(async {
            let client = Client::connect(addr, ClientOptions::default()).await?;
            let producer = client
                .open_producer(QueueId(0), options, move |batch| {
                    let now = clock.now_ns();
                    let mut stored = 0;
                    let mut r = lock(&recorder);
                    for o in batch {
                        if o.status == ConfirmStatus::Stored {
                            stored += 1;
                            let at = read.place(o.publish_id.0).load(Ordering::Relaxed);
                            r.record(now.saturating_sub(at) / 1_000);
                        } else {
                            outcomes.add(ack_status(o.status), 1);
                        }
                    }
                    drop(r);
                    outcomes.add(AckStatus::Acked, stored);
                })
                .await?;
            Ok::<_, zerodispatch_client::ClientError>((client, producer))
        })?;
        producers.push((client, producer, stamps));
    }

    let size = (scenario.size as usize).max(STAMP_LEN);
    let senders = producers.iter().map(|(_, producer, stamps)| {
        let mut payload = vec![0_u8; size];
        let mut next: u64 = 0;
        move |at: u64| send(producer, stamps, &mut payload, &mut next, at)
    });
    let Publishing {
        ends,
        go_ns,
        end_ns,
        published,
    } = publish_all(
        scenario,
        clock,
        progress,
        senders.collect(),
        [&outcomes.0[0], consumed.as_ref()],
        [&confirm_recorders, &consume_recorders],
    );
    let ended_ns = ends.iter().map(|e| e.ended_ns).max().unwrap_or(end_ns);

    // Drain: every outcome in, then close the producers (each message has had its one
    // outcome when `close` returns) and let the consumers catch up.
    let deadline = Instant::now() + DRAIN_TIMEOUT + timer_interval(scenario.flush) * 2;
    while producers.iter().any(|(_, p, _)| p.unconfirmed() > 0) && Instant::now() < deadline {
        thread::sleep(Duration::from_micros(200));
    }
    let drained = producers.iter().all(|(_, p, _)| p.unconfirmed() == 0);
    let (frames, messages) = producers.iter().fold((0, 0), |(f, m), (_, p, _)| {
        let (pf, pm) = p.sent();
        (f + pf, m + pm)
    });
    let apps = u64::from(scenario.apps());
    let acked = outcomes.0[0].load(Ordering::Relaxed);
    while consumed.load(Ordering::Relaxed) < acked * apps && Instant::now() < deadline {
        thread::sleep(Duration::from_micros(200));
    }
    runtime.block_on(async {
        for (client, producer, _) in producers {
            let _ = producer.close().await;
            client.close().await;
        }
        for (client, consumer) in consumers {
            let _ = consumer.close().await;
            client.close().await;
        }
    });
    let drain_s = (clock.now_ns().saturating_sub(ended_ns)) as f64 / 1e9;

    let outcomes = outcomes.snapshot();
    let total = outcomes.total();
    let (broker_published, redelivered) = match &server {
        Some(server) => (
            server.broker().session_stats().published,
            server
                .broker()
                .queue_stats()
                .iter()
                .map(|q| q.redelivered)
                .sum(),
        ),
        // A remote broker's counters are its own (and count other clients too).
        None => (published, 0),
    };
    let result = RunResult {
        scenario: scenario.clone(),
        duration_s: ended_ns.max(end_ns).saturating_sub(go_ns) as f64 / 1e9,
        drain_s,
        published,
        broker_published,
        outcomes,
        consumed: consumed.load(Ordering::Relaxed),
        lost: published.saturating_sub(total),
        extra_outcomes: total.saturating_sub(published),
        behind: ends.iter().map(|e| e.behind).sum(),
        send_errors: ends.iter().map(|e| e.errors).sum(),
        confirm_latency: Percentiles::of(&merge_total(&confirm_recorders)),
        consume_latency: Percentiles::of(&merge_total(&consume_recorders)),
        put_frames: frames,
        put_messages: messages,
        redelivered,
        drained,
    };
    drop(runtime);
    if let Some(server) = server {
        server.shutdown();
    }
    Ok(result)
}

/// Sends one message stamped `at` (its scheduled time), keeping the stamp by the publish id
/// the message will get (`next`, the producer's next id).
fn send(
    producer: &Producer,
    stamps: &Stamps,
    payload: &mut [u8],
    next: &mut u64,
    at: u64,
) -> Result<(), String> {
    payload[..STAMP_LEN].copy_from_slice(&at.to_le_bytes());
    // Before the send: the confirm may come back before `send_blocking` returns.
    stamps.place(*next).store(at, Ordering::Relaxed);
    match producer.send_blocking(payload) {
        Ok(id) => {
            debug_assert_eq!(id.0, *next, "the client numbers messages 0, 1, 2, ...");
            *next = id.0 + 1;
            Ok(())
        }
        Err(e) => Err(format!("producer {}: {e}", producer.id().0)),
    }
}

/// Starts a server on a loopback port with the broker of `scenario`, its payload store and
/// limits sized for every producer's cap and every consumer's window.
fn start_server(scenario: &Scenario) -> Result<Server, Box<dyn Error>> {
    let config = scenario.broker_config();
    let queue_capacity: usize = config.queues.iter().map(|q| q.capacity).sum();
    let consumers = scenario.consumers as usize * scenario.apps() as usize;
    let in_flight = scenario.publishers as usize * scenario.max_unconfirmed as usize;
    let limits = Limits {
        store_slots: (queue_capacity.max(in_flight) + consumers * WINDOW as usize)
            .next_power_of_two(),
        slot_size: (scenario.size as usize).max(STAMP_LEN),
        max_unconfirmed_per_connection: scenario.max_unconfirmed,
        consumer_window: WINDOW,
        ..Limits::default()
    };
    let server = Server::builder()
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .broker_config(config)
        .limits(limits)
        .worker_threads(scenario.io_threads)
        .start()?;
    Ok(server)
}
