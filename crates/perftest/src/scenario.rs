//! What a run is: the command line's settings that shape it ([`Scenario`]), how the
//! clients reach the broker ([`Transport`]), and the broker configured for it.
//!
//! # Many queues
//!
//! With `--queues N`, publisher `p` publishes to queue `p % N` and consumer `c` (of each
//! app) consumes from queue `c % N` ([`Scenario::queue_of`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use zerodispatch_broker::{
    BrokerConfig, ConfirmMode, FlushStrategy, QueueConfig, QueueMode, WaitStrategy,
};

use crate::cli::{Args, Cores};

/// Unconfirmed shares each consumer may hold (the queue's window).
pub(crate) const WINDOW: u32 = 1 << 10;

/// How long to wait, after publishing, for the outcomes of what is in flight.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a run is: the command line's settings that shape it.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Publisher threads.
    pub publishers: u32,
    /// Consumers (of the priority queue, or of each app), all queues together.
    pub consumers: u32,
    /// Queues: publisher and consumer `i` on queue `i % queues`.
    pub queues: u32,
    /// Messages per second per publisher; 0: as fast as possible.
    pub rate: f64,
    /// Payload length.
    pub size: u32,
    /// The producers' flush strategy.
    pub flush: FlushStrategy,
    /// Messages per PUT frame, at most.
    pub batch_size: u32,
    /// A producer's unconfirmed cap.
    pub max_unconfirmed: u32,
    /// How consumers confirm.
    pub callbacks: ConfirmMode,
    /// `--fanout`: 0 or 1 for a priority queue, N >= 2 for N apps.
    pub fanout: u16,
    /// Session processors.
    pub session_processors: u32,
    /// Queue processors.
    pub queue_processors: u32,
    /// How the processors wait for work.
    pub wait: WaitStrategy,
    /// Processors driven by the threads that publish and confirm.
    pub driven: bool,
    /// Cores to pin the processors to, if any.
    pub pin: Option<Vec<usize>>,
    /// How long to publish.
    pub duration: Duration,
    /// In-process, or over TCP.
    pub transport: Transport,
    /// Over TCP: the tokio worker threads of the clients and of the local server.
    pub io_threads: usize,
    /// Over TCP: reliable clients (reconnect, resend, filter duplicates).
    pub reliable: bool,
    /// Over TCP: kill a client connection at random every this long.
    pub kill_every: Option<Duration>,
    /// Over TCP to the perftest's own server: shut the server down and start it again (the
    /// broker runs on) every this long.
    pub restart_every: Option<Duration>,
}

/// How the publishers and consumers reach the broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// They call it: the application's threads are in its process.
    InProcess,
    /// Over TCP, as clients of a server.
    Tcp(Target),
}

/// Where a TCP run's broker is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A server started in this process, on a loopback port, with the broker the command
    /// line describes.
    Local,
    /// A server already running at this address (its broker's configuration is its own:
    /// the perftest uses its queues 0 to `--queues` - 1).
    Connect(SocketAddr),
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InProcess => f.write_str("in-process"),
            Self::Tcp(Target::Local) => f.write_str("tcp"),
            Self::Tcp(Target::Connect(addr)) => write!(f, "tcp:{addr}"),
        }
    }
}

impl Scenario {
    /// The scenario the command line describes.
    #[must_use]
    pub fn from_args(args: &Args) -> Self {
        Self {
            publishers: args.publishers(),
            consumers: args.consumers(),
            queues: args.queues,
            rate: args.rate,
            size: args.size,
            flush: args.flush,
            batch_size: args.batch_size,
            max_unconfirmed: args.max_unconfirmed,
            callbacks: args.callbacks,
            fanout: args.fanout,
            session_processors: args.session_processors,
            queue_processors: args.queue_processors,
            wait: args.wait,
            driven: args.driven,
            pin: args.pin.as_ref().map(Cores::ids),
            duration: args.duration(),
            transport: match (args.connect, args.transport.as_str()) {
                (Some(addr), _) => Transport::Tcp(Target::Connect(addr)),
                (None, "tcp") => Transport::Tcp(Target::Local),
                (None, _) if args.reliable || args.kills() => Transport::Tcp(Target::Local),
                (None, _) => Transport::InProcess,
            },
            io_threads: args.io_threads as usize,
            reliable: args.reliable || args.kills(),
            kill_every: args.kill_connections,
            restart_every: args.kill_server,
        }
    }

    /// Apps of the queue: 1 (priority) or `fanout`.
    #[must_use]
    pub fn apps(&self) -> u16 {
        self.fanout.max(1)
    }

    /// The queue that publisher or consumer `i` uses: `i % queues`.
    #[must_use]
    pub fn queue_of(&self, i: u32) -> u32 {
        i % self.queues.max(1)
    }

    /// Of `count` publishers or consumers, those on queue `q`.
    #[must_use]
    pub fn on_queue(&self, q: u32, count: u32) -> u32 {
        (0..count).filter(|&i| self.queue_of(i) == q).count() as u32
    }

    /// The broker's configuration: `queues` queues, each large enough for the caps of
    /// the producers on it, and processor queues large enough for every queue and every
    /// consumer's window.
    pub(crate) fn broker_config(&self) -> BrokerConfig {
        let mode = if self.fanout >= 2 {
            QueueMode::Fanout { apps: self.fanout }
        } else {
            QueueMode::Priority
        };
        // Queue 0 has the most publishers (`i % N` fills the low queues first).
        let publishers = self.on_queue(0, self.publishers) as usize;
        let capacity =
            (publishers * self.max_unconfirmed as usize).max(QueueConfig::new(mode).capacity);
        let queues = self.queues.max(1) as usize;
        let consumers = self.consumers as usize * self.apps() as usize;
        let event_capacity = (queues * capacity + consumers * WINDOW as usize)
            .next_power_of_two()
            .max(BrokerConfig::default().event_capacity);
        let queue = QueueConfig {
            mode,
            capacity,
            window: WINDOW,
        };
        BrokerConfig {
            queues: vec![queue; queues],
            session_processors: self.session_processors as usize,
            queue_processors: self.queue_processors as usize,
            event_capacity,
            wait: self.wait,
            driven: self.driven,
            cores: self.pin.clone().unwrap_or_default(),
            ..BrokerConfig::default()
        }
    }

    /// When the drain after publishing gives up waiting for outcomes: [`DRAIN_TIMEOUT`]
    /// from now, plus two flush timer intervals.
    pub(crate) fn drain_deadline(&self) -> Instant {
        Instant::now() + DRAIN_TIMEOUT + timer_interval(self.flush) * 2
    }
}

/// How long a producer may hold a message before its flush: the timer's interval, zero
/// for dynamic flush.
pub(crate) fn timer_interval(flush: FlushStrategy) -> Duration {
    match flush {
        FlushStrategy::Dynamic => Duration::ZERO,
        FlushStrategy::Timer(d) => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_is_sized_for_every_producer_and_consumer() {
        let args = <Args as clap::Parser>::try_parse_from([
            "perftest",
            "--publishers",
            "4",
            "--consumers",
            "2",
            "--fanout",
            "3",
        ])
        .unwrap();
        let scenario = Scenario::from_args(&args);
        let config = scenario.broker_config();
        assert_eq!(config.queues[0].mode, QueueMode::Fanout { apps: 3 });
        assert!(config.queues[0].capacity >= 4 * 10_000);
        assert!(config.event_capacity >= config.queues[0].capacity + 6 * WINDOW as usize);
        let priority = Scenario {
            fanout: 1,
            ..scenario
        };
        assert_eq!(priority.broker_config().queues[0].mode, QueueMode::Priority);
    }

    #[test]
    fn many_queues_share_the_publishers_and_consumers_by_index() {
        let args = <Args as clap::Parser>::try_parse_from([
            "perftest",
            "--queues",
            "3",
            "--publishers",
            "7",
            "--consumers",
            "4",
        ])
        .unwrap();
        let scenario = Scenario::from_args(&args);
        assert_eq!(scenario.queues, 3);
        assert_eq!(
            (0..7).map(|p| scenario.queue_of(p)).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2, 0]
        );
        assert_eq!([0, 1, 2].map(|q| scenario.on_queue(q, 7)), [3, 2, 2]);
        assert_eq!([0, 1, 2].map(|q| scenario.on_queue(q, 4)), [2, 1, 1]);
        let config = scenario.broker_config();
        assert_eq!(config.queues.len(), 3);
        // Each queue holds its busiest share of publishers' caps: 3 on queue 0.
        assert!(config.queues.iter().all(|q| q.capacity >= 3 * 10_000));
        assert!(config.event_capacity >= 3 * config.queues[0].capacity + 4 * WINDOW as usize);
        let one =
            Scenario::from_args(&<Args as clap::Parser>::try_parse_from(["perftest"]).unwrap());
        assert_eq!(one.broker_config().queues.len(), 1);
    }
}
