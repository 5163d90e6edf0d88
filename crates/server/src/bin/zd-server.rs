//! `zd-server`: the zerodispatch broker over TCP.
//!
//! ```text
//! zd-server --listen 127.0.0.1:7878 --queues 1            # one priority queue
//! zd-server --queues 2 --fanout 3                         # two fanout queues of 3 apps
//! ```
//!
//! Serves until SIGTERM or SIGINT. On either, it stops accepting connections; on each
//! connection it closes the consumers, writes the outcomes of the messages it had read
//! (for up to 2 s), sends `SHUTTING_DOWN` and closes, abandoning a client that does not
//! read 2.5 s after the signal; then it shuts the broker down and exits 0 (within 5 s of
//! the signal whatever happens). A second signal while it drains exits at once,
//! with status 1.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use zerodispatch_broker::{BrokerConfig, QueueConfig, QueueMode};
use zerodispatch_server::{Limits, Server};

/// The zerodispatch broker over TCP (the wire protocol of docs/protocol.md). Drains and
/// exits 0 on SIGTERM or SIGINT.
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
    /// Queue processors; 0: the queues run on the session processors (fewer wake-ups
    /// per message at low rates, less parallelism under load).
    #[arg(long, default_value_t = 1)]
    queue_processors: usize,
    /// Threads of the I/O runtime.
    #[arg(long, default_value_t = 2)]
    io_threads: usize,
    /// Drive the processors from the I/O threads: a publish or a confirm that finds its
    /// processor parked runs the processor's turn on the I/O thread instead of waking it
    /// (one thread wake-up fewer on each message's path at low rates; the same under load).
    #[arg(long)]
    driven: bool,
    /// Payload slots: messages held at once, all connections together, shared out in equal
    /// parts to the queues (a queue whose part is full has its publishes refused
    /// RejectedStoreFull; the others go on).
    #[arg(long, default_value_t = 1 << 14)]
    slots: usize,
    /// The largest payload, in bytes.
    #[arg(long, default_value_t = 4096)]
    slot_size: usize,
    /// The heartbeat interval asked of clients (in Welcome): a client sends a frame at
    /// least this often. 0s for none. At most a third of --idle-timeout. A duration is a
    /// number and its unit (5s, 500ms, 1m), as on every command line of the project.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    heartbeat: Duration,
    /// The idle limit: a connection from which nothing was received for this long is
    /// closed (HEARTBEAT_TIMEOUT), whatever it announced. Above zero.
    #[arg(long, default_value = "15s", value_parser = parse_positive_duration)]
    idle_timeout: Duration,
    /// Connections open at once, at most: one more is refused TOO_MANY_CONNECTIONS (12).
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// How long a frame may take to arrive once its first byte has, however its bytes are
    /// paced (FRAME_TIMEOUT past it). Above zero.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    frame_timeout: Duration,
    /// How long a connection may take to send its whole Hello (HANDSHAKE_REQUIRED past it,
    /// or past the idle limit if shorter). Above zero.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    handshake_timeout: Duration,
    /// Producers open at once on a connection, at most.
    #[arg(long, default_value_t = 16)]
    max_producers: u16,
    /// Consumers open at once on a connection, at most.
    #[arg(long, default_value_t = 16)]
    max_consumers: u16,
    /// The sum of the max_unconfirmed of a connection's open producers, at most.
    #[arg(long, default_value_t = 1 << 14)]
    max_unconfirmed_per_connection: u32,
    /// The deduplication window of named producers, in ids (a power of two, 64 to 2^20):
    /// a named producer's max_unconfirmed at most.
    #[arg(long, default_value_t = 1 << 14)]
    dedup_window: usize,
    /// Producer names the broker keeps, at most: past it a new name takes the place of the
    /// name closed least recently.
    #[arg(long, default_value_t = 1024)]
    max_producer_names: usize,
    /// New producer names one connection may create, at most.
    #[arg(long, default_value_t = 64)]
    max_new_names: u32,
}

/// A duration as every command line of the project writes one
/// ([`zerodispatch_broker::parse_duration`]), for clap.
fn parse_duration(s: &str) -> Result<Duration, String> {
    zerodispatch_broker::parse_duration(s).map_err(|e| e.to_string())
}

/// [`parse_duration`], above zero.
fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err(format!("`{s}`: must be above zero")),
        d => Ok(d),
    }
}

fn main() {
    if let Err(error) = serve(Args::parse()) {
        eprintln!("zd-server: {error}");
        std::process::exit(2);
    }
}

/// Serves until a signal, then drains; an error if the server cannot start.
fn serve(args: Args) -> Result<(), Box<dyn std::error::Error>> {
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
            driven: args.driven,
            dedup_window: args.dedup_window,
            max_producer_names: args.max_producer_names,
            ..BrokerConfig::default()
        })
        .limits(Limits {
            max_connections: args.max_connections,
            store_slots: args.slots,
            slot_size: args.slot_size,
            heartbeat: args.heartbeat,
            idle_timeout: args.idle_timeout,
            consumer_window: args.window,
            frame_timeout: args.frame_timeout,
            handshake_timeout: args.handshake_timeout,
            max_producers: args.max_producers,
            max_consumers: args.max_consumers,
            max_unconfirmed_per_connection: args.max_unconfirmed_per_connection,
            max_new_names: args.max_new_names,
        })
        .worker_threads(args.io_threads)
        .start()?;
    // The signals' own small runtime: the server's must not be blocked on from inside.
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    // Before the line that says the server listens, so that a signal sent on seeing it is
    // handled, not the default action.
    let (mut term, mut int) = {
        let _guard = signals.enter();
        (
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        )
    };
    println!(
        "zd-server listening on {} ({} {:?} queue(s))",
        server.local_addr(),
        args.queues,
        mode
    );
    let which = signals.block_on(async {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    });
    eprintln!("zd-server: {which}: draining the connections");
    let (done, drained) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        server.shutdown();
        let _ = done.send(());
    });
    let forced = signals.block_on(async {
        tokio::select! {
            _ = drained => false,
            _ = term.recv() => true,
            _ = int.recv() => true,
        }
    });
    if forced {
        eprintln!("zd-server: a second signal: exiting without draining");
        std::process::exit(1);
    }
    eprintln!("zd-server: drained, exiting");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations_need_their_unit() {
        Args::command().debug_assert();
        let args =
            Args::try_parse_from(["zd-server", "--heartbeat", "1s", "--idle-timeout", "1m 30s"])
                .unwrap();
        assert_eq!(
            (args.heartbeat, args.idle_timeout),
            (Duration::from_secs(1), Duration::from_secs(90))
        );
        let defaults = Args::try_parse_from(["zd-server"]).unwrap();
        assert_eq!(
            (defaults.heartbeat, defaults.idle_timeout),
            (Duration::from_secs(5), Duration::from_secs(15))
        );
        assert!(Args::try_parse_from(["zd-server", "--heartbeat", "0s"]).is_ok());
        // Every limit the protocol document says the flags set has one, at the defaults
        // of `Limits` and `BrokerConfig`.
        let limits = Limits::default();
        let broker = BrokerConfig::default();
        assert_eq!(
            (
                defaults.frame_timeout,
                defaults.handshake_timeout,
                defaults.max_producers,
                defaults.max_consumers,
                defaults.max_unconfirmed_per_connection,
                defaults.max_new_names,
                defaults.max_connections,
                defaults.slots,
                defaults.slot_size,
                defaults.window,
            ),
            (
                limits.frame_timeout,
                limits.handshake_timeout,
                limits.max_producers,
                limits.max_consumers,
                limits.max_unconfirmed_per_connection,
                limits.max_new_names,
                limits.max_connections,
                limits.store_slots,
                limits.slot_size,
                limits.consumer_window,
            )
        );
        assert_eq!(
            (defaults.dedup_window, defaults.max_producer_names),
            (broker.dedup_window, broker.max_producer_names)
        );
        let args = Args::try_parse_from([
            "zd-server",
            "--frame-timeout",
            "2s",
            "--max-new-names",
            "3",
            "--max-producers",
            "2",
        ])
        .unwrap();
        assert_eq!(
            (args.frame_timeout, args.max_new_names, args.max_producers),
            (Duration::from_secs(2), 3, 2)
        );
        for (flag, value, says) in [
            ("--heartbeat", "5000", "`5000` needs a unit: 5000s, 5000ms"),
            ("--idle-timeout", "15", "`15` needs a unit: 15s, 15ms"),
            ("--idle-timeout", "0s", "must be above zero"),
            ("--heartbeat", "soon", "is not a duration"),
        ] {
            let err = Args::try_parse_from(["zd-server", flag, value]).unwrap_err();
            assert!(err.to_string().contains(says), "{flag} {value}: {err}");
        }
    }
}
