//! The broker's and its dispatcher's statistics in Prometheus: install
//! `metrics-exporter-prometheus` as the `metrics` recorder, run a small broker load, export
//! the figures with `zerodispatch::broker::metrics::export` (which exports every processor's
//! with `zerodispatch::core::metrics::export`), and print what a scrape would return.
//!
//! ```text
//! cargo run --example prometheus --features metrics
//! ```
//!
//! A real application calls `export` on a timer (or from its scrape handler) and serves
//! `render()`'s text on its `/metrics` endpoint, or enables the exporter's own HTTP
//! listener (its `http-listener` feature) instead.

use std::error::Error;

use metrics_exporter_prometheus::PrometheusBuilder;
use zerodispatch::broker::metrics;
use zerodispatch::broker::{
    Ack, AppId, Broker, BrokerConfig, ConsumerOptions, Delivery, Payload, QueueConfig, QueueId,
    QueueMode,
};

const MESSAGES: u64 = 10_000;

fn main() -> Result<(), Box<dyn Error>> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;

    let broker = Broker::start(BrokerConfig {
        queues: vec![QueueConfig::new(QueueMode::Priority)],
        ..BrokerConfig::default()
    })?;
    let _consumer = broker.open_consumer(
        QueueId(0),
        AppId(0),
        ConsumerOptions::default(),
        |_: &[Delivery]| {},
    )?;
    let producer = broker.open_producer(MESSAGES as usize, |_: &[Ack]| {})?;
    for handle in 0..MESSAGES {
        producer.publish(QueueId(0), Payload { handle, len: 64 })?;
    }
    broker.quiesce()?;

    // What an application does on every scrape: export the current figures, render. (An
    // application without the broker calls `zerodispatch::core::metrics::export` with its
    // dispatcher's `stats()`.)
    metrics::export(&broker);
    let scrape = prometheus.render();
    let ours: Vec<&str> = scrape
        .lines()
        .filter(|line| line.contains("zerodispatch_"))
        .collect();
    println!("{}", ours.join("\n"));

    let processed: f64 = ours
        .iter()
        .filter(|line| line.starts_with("zerodispatch_processed_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    // Every message was handled by a session processor (publish, deliver, ack) and a queue
    // processor (store, confirm), so the processors handled several events per message.
    if processed < MESSAGES as f64 {
        return Err(format!(
            "the scrape shows {processed} events processed, fewer than {MESSAGES}"
        )
        .into());
    }
    eprintln!("\n{processed} events processed in all, as scraped");
    drop(producer);
    broker.shutdown();
    Ok(())
}
