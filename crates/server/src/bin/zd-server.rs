//! `zd-server`: the zerodispatch broker over TCP.
//!
//! ```text
//! zd-server --listen 127.0.0.1:7878 --queues 1            # one priority queue
//! zd-server --queues 2 --fanout 3                         # two fanout queues of 3 apps
//! ```
//!
//! Serves until the process is stopped.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use zerodispatch_broker::{BrokerConfig, QueueConfig, QueueMode};
use zerodispatch_server::{Limits, Server};

/// The zerodispatch broker over TCP (wire protocol version 1, docs/protocol.md).
#[derive(Debug, Parser)]
#[command(name = "zd-server", version)]
struct Args {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// Queues, numbered from 0.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    queues: u32,
    /// Fanout queues of this many apps (default: priority queues).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    fanout: Option<u16>,
    /// Messages each queue holds at most.
    #[arg(long, default_value_t = 1 << 14)]
    capacity: usize,
    /// Messages a consumer holds delivered and unconfirmed, at most (the queues' window
    /// and the server's per-consumer limit).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    window: u32,
    /// Session processors.
    #[arg(long, default_value_t = 1)]
    session_processors: usize,
    /// Queue processors.
    #[arg(long, default_value_t = 1)]
    queue_processors: usize,
    /// Threads of the I/O runtime.
    #[arg(long, default_value_t = 2)]
    io_threads: usize,
    /// Payload slots: messages held at once, all connections together.
    #[arg(long, default_value_t = 1 << 14)]
    slots: usize,
    /// The largest payload, in bytes.
    #[arg(long, default_value_t = 4096)]
    slot_size: usize,
    /// The server's heartbeat interval in ms; 0 for none.
    #[arg(long, default_value_t = 5000)]
    heartbeat_ms: u64,
    /// Connections open at once, at most.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mode = args
        .fanout
        .map_or(QueueMode::Priority, |apps| QueueMode::Fanout { apps });
    let queue = QueueConfig {
        mode,
        capacity: args.capacity,
        window: args.window,
    };
    let server = Server::builder()
        .listen(args.listen)
        .broker_config(BrokerConfig {
            queues: vec![queue; args.queues as usize],
            session_processors: args.session_processors,
            queue_processors: args.queue_processors,
            ..BrokerConfig::default()
        })
        .limits(Limits {
            max_connections: args.max_connections,
            store_slots: args.slots,
            slot_size: args.slot_size,
            heartbeat: Duration::from_millis(args.heartbeat_ms),
            consumer_window: args.window,
            ..Limits::default()
        })
        .worker_threads(args.io_threads)
        .start()?;
    println!(
        "zd-server listening on {} ({} {:?} queue(s))",
        server.local_addr(),
        args.queues,
        mode
    );
    server.run();
    Ok(())
}
