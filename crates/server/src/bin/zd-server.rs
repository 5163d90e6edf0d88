//! `zd-server`: the zerodispatch broker over TCP.
//!
//! ```text
//! zd-server --listen 127.0.0.1:7878 --queues 1            # one priority queue
//! zd-server --queues 2 --fanout 3                         # two fanout queues of 3 apps
//! ```
//!
//! Serves until SIGTERM or SIGINT. On either, it stops accepting connections; on each
//! connection it closes the consumers, writes the outcomes of the messages it had read
//! (for up to 2 s), sends `SHUTTING_DOWN` and closes; then it shuts the broker down and
//! exits 0, within about 5 s of the signal. A second signal while it drains exits at once,
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
    /// Queue processors.
    #[arg(long, default_value_t = 1)]
    queue_processors: usize,
    /// Threads of the I/O runtime.
    #[arg(long, default_value_t = 2)]
    io_threads: usize,
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
            ..BrokerConfig::default()
        })
        .limits(Limits {
            max_connections: args.max_connections,
            store_slots: args.slots,
            slot_size: args.slot_size,
            heartbeat: args.heartbeat,
            idle_timeout: args.idle_timeout,
            consumer_window: args.window,
            ..Limits::default()
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
