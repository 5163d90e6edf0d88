//! One run: start a broker, attach the consumers, publish open loop from the publisher
//! threads (`schedule.rs`) while the main thread prints a line a second, then drain, close,
//! quiesce, and gather the counts, the latency histograms and the broker's statistics.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_broker::{
    Ack, AckStatus, AppId, Broker, BrokerError, ConsumerOptions, Delivery, Payload, ProducerConfig,
    QueueId,
};

use crate::counters::{OutcomeCounters, QueueCounters};
use crate::latency::{Recorder, Shared, lock};
use crate::result::{BrokerFigures, RunResult};
use crate::scenario::{Scenario, Transport};
use crate::schedule::{Clock, Progress, publish_all};
use crate::tcp;

/// Runs `scenario` over its transport and returns what it measured, printing a line a
/// second to `progress`.
///
/// # Errors
///
/// The broker (or the server) refused to start, or to open a producer or consumer.
pub fn run(
    scenario: &Scenario,
    progress: Progress,
) -> Result<RunResult, Box<dyn std::error::Error>> {
    match &scenario.transport {
        Transport::InProcess => Ok(run_in_process(scenario, progress)?),
        Transport::Tcp(target) => tcp::run(scenario, target, progress),
    }
}

/// Runs `scenario` in-process.
fn run_in_process(scenario: &Scenario, progress: Progress) -> Result<RunResult, BrokerError> {
    let clock = Clock(Instant::now());
    let broker = Broker::start(scenario.broker_config())?;

    // Consumers: per app, `consumers` of them, consumer `c` on queue `c % queues`.
    let counters = QueueCounters::for_queues(scenario);
    let mut consume_recorders = Vec::new();
    // Kept for the run: a consumer is closed when dropped.
    let mut consumers = Vec::new();
    let options = ConsumerOptions {
        mode: scenario.callbacks,
        ..ConsumerOptions::default()
    };
    for app in 0..scenario.apps() {
        for c in 0..scenario.consumers {
            let recorder: Shared = Arc::new(Mutex::new(Recorder::new()));
            consume_recorders.push(recorder.clone());
            let queue = scenario.queue_of(c);
            let counters = counters[queue as usize].clone();
            consumers.push(broker.open_consumer(
                QueueId(queue),
                AppId(app),
                options,
                move |batch: &[Delivery]| {
                    let now = clock.now_ns();
                    let mut r = lock(&recorder);
                    for d in batch {
                        r.record(now.saturating_sub(d.payload.handle) / 1_000);
                    }
                    drop(r);
                    counters
                        .consumed
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                },
            )?);
        }
    }

    // Producers, one per publisher, publisher `p` on queue `p % queues`.
    let mut confirm_recorders = Vec::new();
    let mut producers = Vec::new();
    let config = ProducerConfig {
        max_unconfirmed: scenario.max_unconfirmed as usize,
        flush: scenario.flush,
        batch_size: scenario.batch_size as usize,
        ..ProducerConfig::default()
    };
    for p in 0..scenario.publishers {
        let recorder: Shared = Arc::new(Mutex::new(Recorder::new()));
        confirm_recorders.push(recorder.clone());
        let counters = counters[scenario.queue_of(p) as usize].clone();
        producers.push(broker.open_producer_with(config, move |batch: &[Ack]| {
            let sent_at = |a: &Ack| match a.status {
                AckStatus::Stored => Ok(a.payload.handle),
                status => Err(OutcomeCounters::index(status)),
            };
            counters
                .outcomes
                .record_batch(batch, clock.now_ns(), &recorder, sent_at);
        })?);
    }
    // Let the consumers attach before the clock starts.
    broker.quiesce()?;

    let size = scenario.size;
    let senders = producers.iter().enumerate().map(|(p, producer)| {
        let queue = QueueId(scenario.queue_of(p as u32));
        move |at: u64| {
            let payload = Payload {
                handle: at,
                len: size,
            };
            producer
                .send(queue, payload)
                .map(drop)
                .map_err(|e| format!("producer {}: {e}", producer.id().0))
        }
    });
    let recorders: [&[Shared]; 2] = [&confirm_recorders, &consume_recorders];
    let publishing = publish_all(scenario, clock, progress, senders, &counters, recorders);

    // Drain: wait for every outcome (so that a timer's last batch goes out instead of being
    // reported `NotSent` by `close`), then close the producers and settle the broker.
    let deadline = scenario.drain_deadline();
    while producers.iter().any(|p| p.unconfirmed() > 0) && Instant::now() < deadline {
        thread::sleep(Duration::from_micros(200));
    }
    let mut drained = true;
    for p in &producers {
        drained &= p.close(Duration::from_secs(5));
    }
    broker.quiesce()?;
    let drain_s = (clock.now_ns().saturating_sub(publishing.ended_ns())) as f64 / 1e9;

    let stats = broker.session_stats();
    let figures = BrokerFigures {
        published: stats.published,
        put_frames: stats.put_frames,
        put_messages: stats.put_messages,
        redelivered: broker.queue_stats().iter().map(|q| q.redelivered).sum(),
        drained,
        faults: None,
    };
    let result = publishing.gather(scenario, drain_s, &counters, recorders, figures);
    drop(producers);
    crate::cpu::note_broker_threads();
    broker.shutdown();
    Ok(result)
}
