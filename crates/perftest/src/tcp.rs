//! `--transport tcp`: the same open-loop run over the wire protocol. The publishers and
//! consumers are `zerodispatch-client` connections (one each) on a tokio runtime of the
//! perftest's own; the broker is a `zerodispatch-server` started in this process on a
//! loopback port, or the server at `--connect`.
//!
//! What differs from the in-process run is only the path: the schedule, the publishers,
//! the latency recorders and the report are the same (`schedule.rs`, `result.rs`). Payload bytes travel for
//! real: each message carries its scheduled send time in its first 8 bytes (little-endian
//! nanoseconds since the run's epoch), padded with zeros to `--size`, so that the consumer
//! measures publish -> consume from the bytes it received. Publish -> confirm is measured
//! in the producer's confirm handler from the same scheduled time, which the publisher
//! keeps by publish id (the client numbers a producer's messages 0, 1, 2, ...) in a ring of
//! `max_unconfirmed` places: a message's place is reused only after its outcome.

use std::error::Error;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_broker::AckStatus;
use zerodispatch_client::{
    AppId, Backoff, Client, ClientError, ClientOptions, ConfirmStatus, Consumer, ConsumerOptions,
    Deliveries, Flush, Producer, ProducerOptions, QueueId, ReliableConsumer,
    ReliableConsumerOptions, ReliableProducer, ReliableProducerOptions,
};
use zerodispatch_core::Percentiles;

use crate::chaos::Chaos;
use crate::counters::{OutcomeCounters, QueueCounters, total};
use crate::latency::{Recorder, Shared, lock, merge_total};
use crate::local_server::LocalServer;
use crate::result::{BrokerFigures, Faults, RunResult};
use crate::scenario::{Scenario, Target, WINDOW};
use crate::schedule::{Clock, Progress, publish_all};
use crate::stamp::{STAMP_LEN, Stamps, read_stamp, write_stamp};

/// The outcome counter of a wire status (the protocol's table, `docs/protocol.md`).
fn outcome_index(status: ConfirmStatus) -> usize {
    let ack = match status {
        ConfirmStatus::Stored => AckStatus::Stored,
        ConfirmStatus::RejectedQueueFull => AckStatus::RejectedQueueFull,
        ConfirmStatus::RejectedProducerFull => AckStatus::RejectedProducerFull,
        ConfirmStatus::RejectedUnknownQueue => AckStatus::RejectedUnknownQueue,
        ConfirmStatus::Closed => AckStatus::Closed,
        ConfirmStatus::TimedOut => AckStatus::TimedOut,
        ConfirmStatus::NotSent => AckStatus::NotSent,
        ConfirmStatus::RejectedOutOfWindow => AckStatus::RejectedOutOfWindow,
        // The server's own refusals, which have no broker status.
        ConfirmStatus::TooLarge | ConfirmStatus::RejectedStoreFull => {
            return OutcomeCounters::OTHER_REFUSALS;
        }
    };
    OutcomeCounters::index(ack)
}

/// A publisher's producer: plain, or reliable (reconnects and resends).
enum AnyProducer {
    Plain(Client, Producer),
    Reliable(ReliableProducer),
}

impl AnyProducer {
    fn send_blocking(&self, payload: &[u8]) -> Result<u64, ClientError> {
        match self {
            Self::Plain(_, p) => p.send_blocking(payload).map(|id| id.0),
            Self::Reliable(p) => p.send_blocking(payload).map(|id| id.0),
        }
    }

    fn unconfirmed(&self) -> usize {
        match self {
            Self::Plain(_, p) => p.unconfirmed(),
            Self::Reliable(p) => p.unconfirmed(),
        }
    }

    async fn close(self) {
        match self {
            Self::Plain(client, p) => {
                let _ = p.close().await;
                client.close().await;
            }
            Self::Reliable(p) => p.close().await,
        }
    }
}

/// A consumer: plain, or reliable (reconnects and filters duplicates).
enum AnyConsumer {
    Plain(Client, Consumer),
    Reliable(ReliableConsumer),
}

/// Which messages the applications consumed, by (app, publisher): a bitmap of publish
/// ids each, to count the distinct ones and any that came twice.
struct Seen {
    maps: Vec<Vec<u64>>,
    publishers: usize,
    unique: u64,
    twice: u64,
}

impl Seen {
    fn mark(&mut self, app: u16, key: u64) {
        let (publisher, id) = ((key >> 40) as usize, key & ((1 << 40) - 1));
        if publisher >= self.publishers {
            return;
        }
        let map = &mut self.maps[usize::from(app) * self.publishers + publisher];
        let (word, bit) = ((id / 64) as usize, 1_u64 << (id % 64));
        if map.len() <= word {
            map.resize(word + 1, 0);
        }
        if map[word] & bit == 0 {
            map[word] |= bit;
            self.unique += 1;
        } else {
            self.twice += 1;
        }
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
    let mut server = match target {
        Target::Local => Some(LocalServer::start(scenario)?),
        Target::Connect(_) => None,
    };
    let upstream = match (&server, target) {
        (Some(server), _) => server.addr(),
        (None, Target::Connect(addr)) => *addr,
        (None, Target::Local) => unreachable!("a local target starts its server"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(scenario.io_threads)
        .thread_name("perftest-io")
        .enable_all()
        .build()?;
    // With kills, every client goes through the proxy that kills its connections.
    let mut chaos = scenario
        .kill_every
        .map(|every| Chaos::start(&runtime, upstream, every))
        .transpose()?;
    let addr = chaos.as_ref().map_or(upstream, Chaos::addr);
    let backoff = Backoff {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(100),
        ..Backoff::default()
    };

    // Consumers: per app, `consumers` of them, each on a connection of its own, consumer
    // `c` on queue `c % queues`.
    let counters = QueueCounters::for_queues(scenario);
    let seen = Arc::new(Mutex::new(Seen {
        maps: vec![Vec::new(); scenario.publishers as usize * usize::from(scenario.apps())],
        publishers: scenario.publishers as usize,
        unique: 0,
        twice: 0,
    }));
    let mut consume_recorders = Vec::new();
    let mut consumers = Vec::new();
    for app in 0..scenario.apps() {
        for c in 0..scenario.consumers {
            let recorder: Shared = Arc::new(Mutex::new(Recorder::new()));
            consume_recorders.push(recorder.clone());
            let queue = QueueId(scenario.queue_of(c));
            let (counters, seen) = (counters[queue.0 as usize].clone(), seen.clone());
            let options = ConsumerOptions {
                credit: WINDOW,
                auto_credit: true,
            };
            let on_deliver = move |batch: &Deliveries<'_>| {
                let now = clock.now_ns();
                let mut r = lock(&recorder);
                let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                for m in batch.iter() {
                    let (stamp, key) = read_stamp(m.payload);
                    r.record(now.saturating_sub(stamp) / 1_000);
                    seen.mark(app, key);
                }
                drop((r, seen));
                batch.confirm_all();
                counters
                    .consumed
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
            };
            let consumer = runtime.block_on(async {
                if scenario.reliable {
                    let options = ReliableConsumerOptions {
                        consumer: options,
                        backoff,
                        ..ReliableConsumerOptions::default()
                    };
                    let c = ReliableConsumer::connect(addr, queue, AppId(app), options, on_deliver)
                        .await?;
                    Ok::<_, ClientError>(AnyConsumer::Reliable(c))
                } else {
                    let client = Client::connect(addr, ClientOptions::default()).await?;
                    let c = client
                        .open_consumer(queue, AppId(app), options, on_deliver)
                        .await?;
                    Ok(AnyConsumer::Plain(client, c))
                }
            })?;
            consumers.push(consumer);
        }
    }

    // Producers, one per publisher, each on a connection of its own, publisher `p` on queue
    // `p % queues`.
    // The producers' recoveries: to the first confirm, and to the new session.
    let recoveries: [Shared; 2] = std::array::from_fn(|_| Arc::new(Mutex::new(Recorder::new())));
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
    for p in 0..scenario.publishers {
        let recorder: Shared = Arc::new(Mutex::new(Recorder::new()));
        confirm_recorders.push(recorder.clone());
        let queue = QueueId(scenario.queue_of(p));
        let counters = counters[queue.0 as usize].clone();
        let stamps = Arc::new(Stamps::new(2 * scenario.max_unconfirmed as usize));
        let read = stamps.clone();
        let on_confirm = move |batch: &[zerodispatch_client::Outcome]| {
            let sent_at = |o: &zerodispatch_client::Outcome| match o.status {
                ConfirmStatus::Stored => Ok(read.place(o.publish_id.0).load(Ordering::Relaxed)),
                status => Err(outcome_index(status)),
            };
            counters
                .outcomes
                .record_batch(batch, clock.now_ns(), &recorder, sent_at);
        };
        let producer = runtime.block_on(async {
            if scenario.reliable {
                let options = ReliableProducerOptions {
                    producer: options,
                    backoff,
                    ..ReliableProducerOptions::new(format!("perftest-{}-{p}", std::process::id()))
                };
                let producer = ReliableProducer::connect(addr, queue, options, on_confirm).await?;
                let recoveries = recoveries.clone();
                producer.on_recovery(move |r| {
                    let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
                    lock(&recoveries[0]).record(us(r.time_to_confirm()));
                    lock(&recoveries[1]).record(us(r.reconnect_time()));
                });
                Ok::<_, ClientError>(AnyProducer::Reliable(producer))
            } else {
                let client = Client::connect(addr, ClientOptions::default()).await?;
                let producer = client.open_producer(queue, options, on_confirm).await?;
                Ok(AnyProducer::Plain(client, producer))
            }
        })?;
        producers.push((producer, stamps));
    }

    let size = (scenario.size as usize).max(STAMP_LEN);
    let senders = producers.iter().enumerate().map(|(p, (producer, stamps))| {
        let mut payload = vec![0_u8; size];
        let mut next: u64 = 0;
        move |at: u64| send(producer, p as u64, stamps, &mut payload, &mut next, at)
    });
    let recorders: [&[Shared]; 2] = [&confirm_recorders, &consume_recorders];
    let publishing = publish_all(scenario, clock, progress, senders, &counters, recorders);
    // The kills stop with the publishing: the drain then settles what is in flight.
    if let Some(chaos) = &mut chaos {
        chaos.stop_killing();
    }
    if let Some(server) = &mut server {
        server.stop_restarting();
    }

    // Drain: every outcome in, then close the producers (each message has had its one
    // outcome when `close` returns) and let the consumers catch up.
    let deadline = scenario.drain_deadline();
    while producers.iter().any(|(p, _)| p.unconfirmed() > 0) && Instant::now() < deadline {
        thread::sleep(Duration::from_micros(200));
    }
    let drained = producers.iter().all(|(p, _)| p.unconfirmed() == 0);
    let (mut frames, mut messages) = (0, 0);
    let mut faults = Faults {
        killed: chaos.as_ref().map_or(0, Chaos::killed),
        server_restarts: server.as_ref().map_or(0, LocalServer::restarts),
        ..Faults::default()
    };
    for (p, _) in &producers {
        match p {
            AnyProducer::Plain(_, p) => {
                let (f, m) = p.sent();
                frames += f;
                messages += m;
            }
            AnyProducer::Reliable(p) => {
                let s = p.stats();
                faults.reconnects += s.reconnects;
                faults.resent += s.resent;
                faults.stored_before += s.stored_before;
            }
        }
    }
    // Every stored message consumed by every app before the consumers close (a consumer
    // closing with deliveries in flight hands them back to the queue, to nobody).
    let apps = u64::from(scenario.apps());
    let unique = || seen.lock().unwrap_or_else(|e| e.into_inner()).unique;
    let acked = || total(&counters, |q| q.outcomes.0[0].load(Ordering::Relaxed));
    while unique() < acked() * apps && Instant::now() < deadline {
        thread::sleep(Duration::from_micros(200));
    }
    for c in &consumers {
        if let AnyConsumer::Reliable(c) = c {
            let s = c.stats();
            faults.reconnects += s.reconnects;
            faults.filtered += s.duplicates_filtered;
        }
    }
    runtime.block_on(async {
        for (producer, _) in producers {
            producer.close().await;
        }
        for consumer in consumers {
            match consumer {
                AnyConsumer::Plain(client, c) => {
                    let _ = c.close().await;
                    client.close().await;
                }
                AnyConsumer::Reliable(c) => c.close().await,
            }
        }
    });
    drop(chaos);
    let drain_s = (clock.now_ns().saturating_sub(publishing.ended_ns())) as f64 / 1e9;
    {
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        faults.consumed_unique = seen.unique;
        faults.duplicated_to_app = seen.twice;
    }
    let [to_confirm, to_session] = recoveries;
    faults.recovery_us = Percentiles::of(&merge_total(&[to_confirm]));
    faults.reconnect_us = Percentiles::of(&merge_total(&[to_session]));

    let (broker_published, redelivered, deduplicated) = match &server {
        Some(server) => {
            let queues = server.broker().queue_stats();
            (
                server.broker().session_stats().published,
                queues.iter().map(|q| q.redelivered).sum(),
                queues.iter().map(|q| q.deduplicated).sum(),
            )
        }
        // A remote broker's counters are its own (and count other clients too).
        None => (publishing.published, 0, 0),
    };
    faults.deduplicated = deduplicated;
    let figures = BrokerFigures {
        published: broker_published,
        put_frames: frames,
        put_messages: messages,
        redelivered,
        drained,
        faults: scenario.reliable.then_some(faults),
    };
    let result = publishing.gather(scenario, drain_s, &counters, recorders, figures);
    drop(runtime);
    crate::cpu::note_broker_threads();
    if let Some(server) = server {
        server.shutdown();
    }
    Ok(result)
}

/// Sends one message stamped `at` (its scheduled time) and keyed by publisher `p` and
/// its publish id, keeping the stamp by the publish id the message will get (`next`, the
/// producer's next id).
fn send(
    producer: &AnyProducer,
    p: u64,
    stamps: &Stamps,
    payload: &mut [u8],
    next: &mut u64,
    at: u64,
) -> Result<(), String> {
    write_stamp(payload, at, p, *next);
    // Before the send: the confirm may come back before `send_blocking` returns.
    stamps.place(*next).store(at, Ordering::Relaxed);
    match producer.send_blocking(payload) {
        Ok(id) => {
            debug_assert_eq!(id, *next, "the client numbers messages 0, 1, 2, ...");
            *next = id + 1;
            Ok(())
        }
        Err(e) => Err(format!("publisher {p}: {e}")),
    }
}
