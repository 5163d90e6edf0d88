//! The command line: flags, their defaults, and the parser of durations. The broker's
//! choices (flush strategy, confirm mode, wait strategy) are parsed by the library's own
//! `FromStr`, and written back by its `Display`.

use std::thread;
use std::time::Duration;

use clap::Parser;
use zerodispatch_broker::{ConfirmMode, FlushStrategy, WaitStrategy};

/// An open-loop perftest of the broker's confirm path.
///
/// Publishers send at a fixed rate each (open loop: every message has a scheduled send
/// time, and latency is measured from it, so a stall shows up as latency instead of
/// hiding as a slower send rate), consumers confirm every delivery, and the tool reports
/// throughput, publish -> confirm latency (the ACK: the queue stored the message) and
/// publish -> consume latency (a consumer got it), each on its own, and the mean number of
/// messages per PUT frame.
///
/// Queue shape: with `--fanout 0` or `1`, one priority queue whose `--consumers` consumers
/// share the messages (each message goes to one of them). With `--fanout N` (N >= 2), one
/// fanout queue of N apps, each app getting every message, with `--consumers` consumers
/// per app sharing that app's copies. A message is confirmed (ACKed) to its publisher once
/// the queue stores it; the consumers' confirms release it from the queue.
///
/// Many queues (`--queues N`): N queues of that shape; publisher `i` publishes to queue
/// `i % N` and consumer `i` (of each app) consumes from queue `i % N`. The summary and the
/// JSON then show each queue's figures beside the totals.
#[derive(Parser, Debug, Clone, PartialEq)]
#[command(name = "perftest", version, about, long_about)]
pub struct Args {
    /// Publisher threads, each with a producer of its own [default: 1, or `--queues`: one
    /// per queue]. With `--queues N`, publisher `i` publishes to queue `i % N`: at least N.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub publishers: Option<u32>,

    /// Consumers: of the priority queue, or of each app of a fanout queue, all queues
    /// together [default: 1, or `--queues`: one per queue]. With `--queues N`, consumer
    /// `i` (of each app) consumes from queue `i % N`: at least N.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub consumers: Option<u32>,

    /// Queues, each of the shape `--fanout` says: publisher `i` and consumer `i` (of each
    /// app) on queue `i % N`, so that `--publishers 4 --queues 2` puts publishers 0 and 2
    /// on queue 0, 1 and 3 on queue 1. With N >= 2 the summary and the JSON (`per_queue`)
    /// add each queue's throughput and latencies to the totals. With `--connect`, the
    /// server's queues 0 to N - 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub queues: u32,

    /// Messages per second per publisher, open loop; 0 sends as fast as possible.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub rate: f64,

    /// Payload length in bytes (the broker carries a handle and this length, not bytes).
    #[arg(long, default_value_t = 8)]
    pub size: u32,

    /// The producers' flush strategy: `dynamic`, or `timer:<interval>` (`timer:100ms`,
    /// `timer:1.5s`; the unit is required, as in every duration of this command line).
    #[arg(long, default_value_t = FlushStrategy::Dynamic)]
    pub flush: FlushStrategy,

    /// Messages per PUT frame, at most.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,

    /// Messages a producer keeps without an outcome, at most: `send` blocks at the cap.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_unconfirmed: u32,

    /// How consumers confirm: `inline` (an inline functor, no allocation), `typed` (a
    /// typed confirm message) or `boxed` (a boxed functor, one allocation per confirm: the
    /// baseline).
    #[arg(long, default_value_t = ConfirmMode::Inline)]
    pub callbacks: ConfirmMode,

    /// 0 or 1: a priority queue; N >= 2: a fanout queue of N apps (at most `MAX_APPS`, 64).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=zerodispatch_broker::MAX_APPS as i64))]
    pub fanout: u16,

    /// Session processors.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub session_processors: u32,

    /// Queue processors; 0: the queues run on the session processors.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub queue_processors: u32,

    /// How the broker's processors wait for work when their queue is empty: `park`,
    /// `spin` (busy-spin: a core per processor, even idle), or `spin-then-park` (the
    /// broker's default; `spin-then-park:<spins>` sets the spins before parking).
    #[arg(long, default_value_t = WaitStrategy::default())]
    pub wait: WaitStrategy,

    /// Drive the broker's processors from the threads that publish and confirm: one that
    /// finds its processor parked runs the processor's turn itself instead of waking it
    /// (`BrokerConfig::driven`).
    #[arg(long)]
    pub driven: bool,

    /// Pin the broker's processors: `--pin` to cores 0..N (N: the cores available), or
    /// `--pin=2,3` to those. Each pool (sessions, queues, cluster) pins its processor `i`
    /// to the `i`-th core of the list, round-robin: the pools' first processors share the
    /// first core. Publisher threads are not pinned.
    #[arg(long, value_name = "CORES", num_args = 0..=1, require_equals = true,
          default_missing_value = "all", value_parser = parse_cores)]
    pub pin: Option<Cores>,

    /// How long to publish: `10s`, `500ms`, `2m`, `1.5s` [default: 10s; 3s per run with
    /// --compare].
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Print one JSON object at the end instead of the human summary (the per-second lines
    /// go to stderr).
    #[arg(long)]
    pub json: bool,

    /// No per-second lines.
    #[arg(long, short)]
    pub quiet: bool,

    /// Run the seed's scenario: rate 50, one publisher, one consumer, `--flush dynamic`
    /// then `--flush timer:100ms`, and print them side by side.
    #[arg(long)]
    pub compare: bool,

    /// `in-process`: the application's threads call the broker (the default). `tcp`: over
    /// the wire protocol, through a server started in this process on a loopback port,
    /// each publisher and consumer on a client connection of its own.
    #[arg(long, default_value = "in-process", value_parser = ["in-process", "tcp"])]
    pub transport: String,

    /// Over TCP to the server already running at this address (`zd-server`), instead of
    /// one started here: implies `--transport tcp`, and the broker's flags (processors,
    /// pinning, wait, callbacks, queue shape) are the server's own (the perftest uses its
    /// queue 0, with `--fanout` apps if it is a fanout queue).
    #[arg(long, value_name = "ADDR")]
    pub connect: Option<std::net::SocketAddr>,

    /// Over TCP with reliable clients (implies `--transport tcp`): producers that
    /// reconnect, re-open under their name and resend what has no outcome, consumers that
    /// reconnect and filter what they already handed over (`zerodispatch-client`'s
    /// `ReliableProducer` and `ReliableConsumer`).
    #[arg(long)]
    pub reliable: bool,

    /// Kill a client connection, chosen at random, every interval (`500ms`, `1s`): the
    /// clients connect through a proxy that drops one of the connections through it, on
    /// both sides (implies `--reliable`). The summary counts the kills, reconnects,
    /// resent and deduplicated messages, redeliveries, and what reached the application
    /// twice (must be 0).
    #[arg(long, value_name = "INTERVAL", value_parser = parse_duration)]
    pub kill_connections: Option<Duration>,

    /// Shut the perftest's own server down and start it again on the same port every
    /// interval (`1s`), the broker and its queues running on: every client at once is told
    /// `SHUTTING_DOWN`, loses its connection and reconnects, refused until the new listener
    /// is up (implies `--reliable`; not with `--connect`). Counted in the summary's faults.
    #[arg(long, value_name = "INTERVAL", value_parser = parse_duration, conflicts_with = "connect")]
    pub kill_server: Option<Duration>,

    /// Over TCP: the tokio worker threads of the perftest's clients, and of the server it
    /// starts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub io_threads: u32,
}

impl Args {
    /// Publisher threads: `--publishers`, or one per queue.
    #[must_use]
    pub fn publishers(&self) -> u32 {
        self.publishers.unwrap_or(self.queues)
    }

    /// Consumers (of each app): `--consumers`, or one per queue.
    #[must_use]
    pub fn consumers(&self) -> u32 {
        self.consumers.unwrap_or(self.queues)
    }

    /// Checks what clap cannot: every queue has a publisher and a consumer (of each app),
    /// and `--compare` (one publisher, one consumer) runs on one queue.
    ///
    /// # Errors
    ///
    /// A message saying which flags disagree.
    pub fn check(&self) -> Result<(), String> {
        let n = self.queues;
        if self.compare && n > 1 {
            return Err(format!(
                "--compare runs the seed's scenario on one queue, not --queues {n}"
            ));
        }
        for (flag, count) in [
            ("--publishers", self.publishers()),
            ("--consumers", self.consumers()),
        ] {
            if count < n {
                return Err(format!(
                    "{flag} {count} leaves a queue without one: --queues {n} needs {flag} {n} or more (item i goes to queue i % {n})"
                ));
            }
        }
        Ok(())
    }

    /// Whether connections are killed (`--kill-connections`, `--kill-server`).
    #[must_use]
    pub fn kills(&self) -> bool {
        self.kill_connections.is_some() || self.kill_server.is_some()
    }

    /// How long each run publishes: `--duration`, or 10 s (3 s per run with `--compare`).
    #[must_use]
    pub fn duration(&self) -> Duration {
        self.duration.unwrap_or(if self.compare {
            Duration::from_secs(3)
        } else {
            Duration::from_secs(10)
        })
    }
}

/// The cores to pin the broker's processors to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cores {
    /// Cores 0..N, N the cores this process may use.
    All,
    /// These core ids.
    List(Vec<usize>),
}

impl Cores {
    /// The core ids.
    #[must_use]
    pub fn ids(&self) -> Vec<usize> {
        match self {
            Cores::All => (0..thread::available_parallelism().map_or(1, |n| n.get())).collect(),
            Cores::List(ids) => ids.clone(),
        }
    }
}

/// Parses `--pin`'s value: `all`, or core ids separated by commas (`2,3`).
fn parse_cores(s: &str) -> Result<Cores, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("all") {
        return Ok(Cores::All);
    }
    let ids = t
        .split(',')
        .map(|id| {
            id.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{id}` is not a core id (use --pin or --pin=0,1)"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Cores::List(ids))
}

/// Parses a rate: a non-negative, finite number of messages per second.
fn parse_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of messages per second"))?;
    if !rate.is_finite() || rate < 0.0 {
        return Err(format!("the rate must be 0 or more, not {s}"));
    }
    Ok(rate)
}

/// Parses a duration as every command line of the project writes one: the broker's
/// [`parse_duration`](zerodispatch_broker::parse_duration) (a number and its unit; a bare
/// number refused, asking for the unit), its error as clap prints it.
///
/// # Errors
///
/// A message saying what is wrong, for clap to print.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    zerodispatch_broker::parse_duration(s).map_err(|e| e.to_string())
}

/// A duration as the command line writes it: whole `s`, `ms` or `us` where exact,
/// otherwise microseconds with decimals.
#[must_use]
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0ms".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{}ns", ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn the_broker_choices_parse_with_the_spellings_ci_uses() {
        let args = Args::try_parse_from([
            "perftest",
            "--rate",
            "0",
            "--flush",
            "timer:10ms",
            "--callbacks",
            "typed",
            "--fanout",
            "3",
            "--duration",
            "2s",
            "--json",
        ])
        .unwrap();
        assert_eq!(args.flush, FlushStrategy::Timer(Duration::from_millis(10)));
        assert_eq!(args.callbacks, ConfirmMode::Typed);
        let args = Args::try_parse_from(["perftest", "--flush", "timer:100ms"]).unwrap();
        assert_eq!(args.flush, FlushStrategy::Timer(Duration::from_millis(100)));
        let args = Args::try_parse_from(["perftest", "--callbacks", "boxed"]).unwrap();
        assert_eq!(args.callbacks, ConfirmMode::Boxed);
        let defaults = Args::try_parse_from(["perftest"]).unwrap();
        assert_eq!(defaults.flush, FlushStrategy::Dynamic);
        assert_eq!(defaults.callbacks, ConfirmMode::Inline);
    }

    #[test]
    fn bad_choices_are_refused_with_the_library_messages() {
        let message = |flag: &str, value: &str| {
            Args::try_parse_from(["perftest", flag, value])
                .unwrap_err()
                .to_string()
        };
        assert!(message("--flush", "sometimes").contains("is not a flush strategy"));
        assert!(message("--flush", "timer:0ms").contains("must be above zero"));
        assert!(message("--callbacks", "pigeon").contains("is not a confirm mode"));
        assert!(message("--wait", "nap").contains("is not a wait strategy"));
    }

    #[test]
    fn durations_parse_humantime_style() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        // A bare number is ambiguous: refused, with the units to pick from.
        assert_eq!(
            parse_duration("3"),
            Err(
                "`3` needs a unit: 3s, 3ms or 3us (every duration here is a number and its unit)"
                    .into()
            )
        );
        for flag in ["--duration", "--kill-connections", "--kill-server"] {
            let err = Args::try_parse_from(["perftest", flag, "500"]).unwrap_err();
            assert!(
                err.to_string().contains("`500` needs a unit: 500s, 500ms"),
                "{flag}: {err}"
            );
        }
        let err = Args::try_parse_from(["perftest", "--flush", "timer:100"]).unwrap_err();
        assert!(
            err.to_string().contains("needs a unit: timer:100ms"),
            "{err}"
        );
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("s").is_err());

        let args = Args::try_parse_from(["perftest", "--duration", "500ms"]).unwrap();
        assert_eq!(args.duration(), Duration::from_millis(500));
        let defaults = Args::try_parse_from(["perftest"]).unwrap();
        assert_eq!(defaults.duration(), Duration::from_secs(10));
        let compare = Args::try_parse_from(["perftest", "--compare"]).unwrap();
        assert_eq!(compare.duration(), Duration::from_secs(3));
        assert!(Args::try_parse_from(["perftest", "--duration", "fast"]).is_err());
    }

    #[test]
    fn queues_default_to_one_and_need_a_publisher_and_a_consumer_each() {
        let defaults = Args::try_parse_from(["perftest"]).unwrap();
        assert_eq!(defaults.queues, 1);
        assert_eq!((defaults.publishers(), defaults.consumers()), (1, 1));
        assert_eq!(defaults.check(), Ok(()));
        let args = Args::try_parse_from(["perftest", "--queues", "4"]).unwrap();
        assert_eq!((args.publishers(), args.consumers()), (4, 4));
        assert_eq!(args.check(), Ok(()));
        let args =
            Args::try_parse_from(["perftest", "--queues", "2", "--publishers", "6"]).unwrap();
        assert_eq!((args.publishers(), args.consumers()), (6, 2));
        assert_eq!(args.check(), Ok(()));
        let args = Args::try_parse_from(["perftest", "--queues", "3", "--consumers", "2"]).unwrap();
        let err = args.check().unwrap_err();
        assert!(
            err.contains("--consumers 2 leaves a queue without one"),
            "{err}"
        );
        let args = Args::try_parse_from(["perftest", "--queues", "2", "--compare"]).unwrap();
        assert!(args.check().unwrap_err().contains("--compare"));
        assert!(Args::try_parse_from(["perftest", "--queues", "0"]).is_err());
        assert!(Args::try_parse_from(["perftest", "--queues", "65"]).is_err());
    }

    #[test]
    fn wait_and_pin_parse() {
        let defaults = Args::try_parse_from(["perftest"]).unwrap();
        assert_eq!(defaults.wait, WaitStrategy::default());
        assert_eq!(defaults.pin, None);
        let args = Args::try_parse_from(["perftest", "--wait", "spin", "--pin", "--json"]).unwrap();
        assert_eq!(args.wait, WaitStrategy::BusySpin);
        assert_eq!(args.pin, Some(Cores::All));
        assert!(args.json);
        let args = Args::try_parse_from(["perftest", "--pin=0,1", "--wait", "park"]).unwrap();
        assert_eq!(args.pin, Some(Cores::List(vec![0, 1])));
        assert_eq!(args.wait, WaitStrategy::Park);
        let args = Args::try_parse_from(["perftest", "--wait", "spin-then-park"]).unwrap();
        assert_eq!(args.wait, WaitStrategy::default());
        assert!(Args::try_parse_from(["perftest", "--pin=x"]).is_err());
    }
}
