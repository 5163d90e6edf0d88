//! A producer and a consumer of one queue on a running broker, over one connection: sends
//! messages at a steady rate with dynamic send, and prints the publish -> confirm and
//! publish -> consume latencies.
//!
//! ```text
//! cargo run --release -p zerodispatch-client --example produce_consume -- 127.0.0.1:7878 50 500
//!                                                          broker address, msg/s, messages
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zerodispatch_client::{
    AppId, Client, ClientOptions, ConfirmStatus, ConsumerOptions, Flush, ProducerOptions, QueueId,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7878".into());
    let rate: u64 = args.next().map_or(Ok(50), |a| a.parse())?;
    let count: u64 = args.next().map_or(Ok(500), |a| a.parse())?;

    let client = Client::connect(addr.as_str(), ClientOptions::default()).await?;
    let start = Instant::now();

    // Publish -> consume: each payload carries its send time, in ns since `start`.
    let consumed = Arc::new(Mutex::new(Vec::with_capacity(count as usize)));
    let sink = Arc::clone(&consumed);
    let consumer = client
        .open_consumer(
            QueueId(0),
            AppId(0),
            ConsumerOptions::default(),
            move |batch| {
                let now = start.elapsed().as_nanos() as u64;
                let mut sink = sink.lock().unwrap();
                for message in batch.iter() {
                    let sent = message
                        .payload
                        .get(..8)
                        .map_or(now, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
                    sink.push(now.saturating_sub(sent));
                }
                batch.confirm_all();
            },
        )
        .await?;

    // Publish -> confirm: from when `send` took the message to its outcome.
    let confirmed = Arc::new(Mutex::new(Vec::with_capacity(count as usize)));
    let sink = Arc::clone(&confirmed);
    let options = ProducerOptions {
        flush: Flush::Dynamic { batch_size: 256 },
        confirm_timeout: Some(Duration::from_secs(10)),
        ..ProducerOptions::default()
    };
    let producer = client
        .open_producer(QueueId(0), options, move |outcomes| {
            let mut sink = sink.lock().unwrap();
            for o in outcomes {
                if o.status == ConfirmStatus::Stored {
                    sink.push((o.settled_at - o.taken_at).as_nanos() as u64);
                }
            }
        })
        .await?;

    let mut ticker = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    for _ in 0..count {
        ticker.tick().await;
        let sent = start.elapsed().as_nanos() as u64;
        producer.send(&sent.to_le_bytes()).await?;
    }
    producer.close().await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    consumer.close().await?;
    client.close().await;

    report("publish -> confirm", &mut confirmed.lock().unwrap());
    report("publish -> consume", &mut consumed.lock().unwrap());
    Ok(())
}

fn report(what: &str, samples: &mut [u64]) {
    if samples.is_empty() {
        println!("{what}: no samples");
        return;
    }
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize] as f64 / 1_000.0;
    println!(
        "{what}: {} messages, p50 {:.0} us, p99 {:.0} us",
        samples.len(),
        at(0.5),
        at(0.99)
    );
}
