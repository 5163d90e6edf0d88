//! One run: start a broker, attach the consumers, publish open loop from the publisher
//! threads while the main thread prints a line a second, then drain, close, quiesce, and
//! gather the counts, the latency histograms and the broker's statistics.
//!
//! # Latency without coordinated omission
//!
//! Every message has a scheduled send time: publisher `p` sends message `i` at
//! `go + offset(p) + i / rate` (publishers staggered evenly over one interval). The
//! publisher waits for that time (sleeping for waits above ~100 us, then spinning) and
//! sends; `send` may block at the unconfirmed cap. The scheduled time, in nanoseconds
//! since the run's epoch, travels as the message's `Payload::handle`, so the consumer's
//! `on_delivery` (publish -> consume) and the producer's `on_ack` (publish -> confirm,
//! `Stored` outcomes only) measure from when the message *should* have gone, and any stall
//! (a blocked `send`, a late publisher thread, a flush timer) shows up as latency. With
//! rate 0 the publisher sends as fast as it can and the scheduled time is the time just
//! before `send`.
//!
//! A publisher that falls behind its schedule keeps sending late messages (their latency
//! counts from their scheduled times) until the run's end; the messages still scheduled
//! before the end but not sent by then are counted as `behind`.
//!
//! # What paces the publishers
//!
//! The ACK means stored, so `send`'s unconfirmed cap paces a publisher to the queue's
//! stores, not to its consumers: at max rate the queue would fill and reject
//! (`RejectedQueueFull`). So a publisher also waits, before each message, while the
//! messages published and not yet consumed by every app reach half the queue's capacity
//! (see [`Backlog`]): the time it waits counts as latency, as a wait at the cap does.
//!
//! # Many queues
//!
//! With `--queues N`, publisher `p` publishes to queue `p % N` and consumer `c` (of each
//! app) consumes from queue `c % N`; each queue has its counters ([`QueueCounters`]: its
//! publishers' sends and outcomes, its consumers' deliveries) and its backlog, and the
//! result has each queue's figures ([`QueueResult`]) beside the totals.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use zerodispatch_broker::{
    Ack, AckStatus, AppId, Broker, BrokerConfig, BrokerError, ConfirmMode, ConsumerOptions,
    Delivery, FlushStrategy, Payload, ProducerConfig, QueueConfig, QueueId, QueueMode,
    WaitStrategy,
};
use zerodispatch_core::Percentiles;

use crate::cli::{Args, Cores};
use crate::{report, tcp};

/// Latencies above this (in microseconds: one hour) are recorded as this.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Significant figures of the latency histograms.
const SIGFIGS: u8 = 3;

/// Unconfirmed shares each consumer may hold (the queue's window).
pub(crate) const WINDOW: u32 = 1 << 10;

/// How long to wait, after publishing, for the outcomes of what is in flight.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the per-second lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Standard output.
    Stdout,
    /// Standard error (so that standard output holds only the JSON summary).
    Stderr,
    /// Nowhere.
    Off,
}

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
    Tcp(tcp::Target),
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InProcess => f.write_str("in-process"),
            Self::Tcp(tcp::Target::Local) => f.write_str("tcp"),
            Self::Tcp(tcp::Target::Connect(addr)) => write!(f, "tcp:{addr}"),
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
            pin: args.pin.as_ref().map(Cores::ids),
            duration: args.duration(),
            transport: match (args.connect, args.transport.as_str()) {
                (Some(addr), _) => Transport::Tcp(tcp::Target::Connect(addr)),
                (None, "tcp") => Transport::Tcp(tcp::Target::Local),
                (None, _) if args.reliable || args.kills() => Transport::Tcp(tcp::Target::Local),
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
            cores: self.pin.clone().unwrap_or_default(),
            ..BrokerConfig::default()
        }
    }
}

/// Outcomes of published messages, by status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcomes {
    /// ACKed: stored by the queue.
    pub acked: u64,
    /// The queue was full.
    pub rejected_queue_full: u64,
    /// The producer's table was full.
    pub rejected_producer_full: u64,
    /// No such queue.
    pub rejected_unknown_queue: u64,
    /// Reported when the producer closed.
    pub closed: u64,
    /// No outcome within the confirm timeout.
    pub timed_out: u64,
    /// Not sent before the producer closed.
    pub not_sent: u64,
    /// Refused for another reason: a payload too large for the server, its payload store
    /// full, a publish id older than the deduplication window.
    pub other_refusals: u64,
}

impl Outcomes {
    /// Every outcome, whatever its status.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.acked
            + self.rejected_queue_full
            + self.rejected_producer_full
            + self.rejected_unknown_queue
            + self.closed
            + self.timed_out
            + self.not_sent
            + self.other_refusals
    }

    /// These outcomes and `other`'s, added.
    #[must_use]
    pub fn plus(&self, other: &Self) -> Self {
        Self {
            acked: self.acked + other.acked,
            rejected_queue_full: self.rejected_queue_full + other.rejected_queue_full,
            rejected_producer_full: self.rejected_producer_full + other.rejected_producer_full,
            rejected_unknown_queue: self.rejected_unknown_queue + other.rejected_unknown_queue,
            closed: self.closed + other.closed,
            timed_out: self.timed_out + other.timed_out,
            not_sent: self.not_sent + other.not_sent,
            other_refusals: self.other_refusals + other.other_refusals,
        }
    }
}

/// One queue's counters: what its publishers sent, their outcomes (written by the
/// producers' `on_ack`, on session processors), and its consumers' deliveries.
#[derive(Debug, Default)]
pub(crate) struct QueueCounters {
    /// Messages its publishers' `send` accepted.
    pub(crate) published: AtomicU64,
    /// Its publishers' outcomes.
    pub(crate) outcomes: OutcomeCounters,
    /// Deliveries to its consumers (every app's).
    pub(crate) consumed: AtomicU64,
}

impl QueueCounters {
    /// One set of counters per queue of `scenario`.
    pub(crate) fn for_queues(scenario: &Scenario) -> Vec<Arc<Self>> {
        (0..scenario.queues.max(1))
            .map(|_| Arc::new(Self::default()))
            .collect()
    }
}

/// Every queue's outcomes together.
pub(crate) fn total_outcomes(queues: &[Arc<QueueCounters>]) -> Outcomes {
    queues.iter().fold(Outcomes::default(), |sum, q| {
        sum.plus(&q.outcomes.snapshot())
    })
}

/// Every queue's count together: `count` reads one queue's counter.
pub(crate) fn total(queues: &[Arc<QueueCounters>], count: impl Fn(&QueueCounters) -> u64) -> u64 {
    queues.iter().map(|q| count(q)).sum()
}

/// Outcome counters, written by the producers' `on_ack` (on session processors).
#[derive(Debug, Default)]
pub(crate) struct OutcomeCounters(pub(crate) [AtomicU64; 8]);

impl OutcomeCounters {
    pub(crate) fn index(status: AckStatus) -> usize {
        match status {
            AckStatus::Stored => 0,
            AckStatus::RejectedQueueFull => 1,
            AckStatus::RejectedProducerFull => 2,
            AckStatus::RejectedUnknownQueue => 3,
            AckStatus::Closed => 4,
            AckStatus::TimedOut => 5,
            AckStatus::NotSent => 6,
            AckStatus::RejectedOutOfWindow => Self::OTHER_REFUSALS,
        }
    }

    /// Where the refusals without a counter of their own go (out of window, too large,
    /// store full).
    pub(crate) const OTHER_REFUSALS: usize = 7;

    /// Counts `n` outcomes at counter `index`.
    pub(crate) fn add_at(&self, index: usize, n: u64) {
        self.0[index].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn add(&self, status: AckStatus, n: u64) {
        if n > 0 {
            self.add_at(Self::index(status), n);
        }
    }

    pub(crate) fn snapshot(&self) -> Outcomes {
        let get = |i: usize| self.0[i].load(Ordering::Relaxed);
        Outcomes {
            acked: get(0),
            rejected_queue_full: get(1),
            rejected_producer_full: get(2),
            rejected_unknown_queue: get(3),
            closed: get(4),
            timed_out: get(5),
            not_sent: get(6),
            other_refusals: get(7),
        }
    }
}

/// A latency recorder: the last interval's histogram (taken by the reporter each second)
/// and the whole run's. One per producer or consumer, locked once per callback batch.
pub(crate) struct Recorder {
    interval: Histogram<u64>,
    total: Histogram<u64>,
}

impl Recorder {
    pub(crate) fn new() -> Self {
        Self {
            interval: new_histogram(),
            total: new_histogram(),
        }
    }

    pub(crate) fn record(&mut self, us: u64) {
        self.interval.saturating_record(us);
        self.total.saturating_record(us);
    }
}

pub(crate) type Shared = Arc<Mutex<Recorder>>;

pub(crate) fn lock(recorder: &Shared) -> MutexGuard<'_, Recorder> {
    recorder.lock().unwrap_or_else(|e| e.into_inner())
}

/// An empty latency histogram: 1 us to one hour, three significant figures.
#[must_use]
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, SIGFIGS).expect("valid histogram bounds")
}

/// Merges every recorder's interval histogram into one and resets them.
fn take_interval(recorders: &[Shared]) -> Histogram<u64> {
    let mut merged = new_histogram();
    for r in recorders {
        let mut r = lock(r);
        merged.add(&r.interval).expect("same bounds");
        r.interval.reset();
    }
    merged
}

/// Merges every recorder's whole-run histogram into one.
pub(crate) fn merge_total(recorders: &[Shared]) -> Histogram<u64> {
    let mut merged = new_histogram();
    for r in recorders {
        merged.add(&lock(r).total).expect("same bounds");
    }
    merged
}

/// The run's clock: nanoseconds since its epoch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock(pub(crate) Instant);

impl Clock {
    pub(crate) fn now_ns(self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Waits until `target_ns`: sleeps while more than ~100 us are left, then spins
    /// (yielding while more than 20 us are left, so that a processor sharing the core runs).
    fn wait_until(self, target_ns: u64) {
        loop {
            let now = self.now_ns();
            if now >= target_ns {
                return;
            }
            let left = target_ns - now;
            if left > 100_000 {
                // The kernel's timer slack (~50 us) makes sleeps late: wake early, then spin.
                thread::sleep(Duration::from_nanos(left - 80_000));
            } else if left > 20_000 {
                thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Yields of a publisher waiting on its backlog before it sleeps.
const BACKLOG_YIELDS: u32 = 8;

/// One sleep of a publisher waiting on its backlog (about 60-100 us with the kernel's
/// timer slack).
const BACKLOG_SLEEP: Duration = Duration::from_micros(20);

/// What a publisher thread did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PublisherEnd {
    /// Messages `send` accepted.
    pub(crate) sent: u64,
    /// Messages scheduled before the end but not sent by then (the publisher was behind).
    pub(crate) behind: u64,
    /// `send` failures (the publisher stops at the first).
    pub(crate) errors: u64,
    /// When it stopped, in ns since the epoch.
    pub(crate) ended_ns: u64,
}

/// A publisher's schedule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schedule {
    clock: Clock,
    /// When publishing starts (ns since the epoch).
    go_ns: u64,
    /// When publishing stops.
    end_ns: u64,
    /// Nanoseconds between two messages of this publisher; `None`: as fast as possible.
    interval_ns: Option<f64>,
    /// This publisher's offset within one interval (publishers are staggered evenly).
    offset_ns: u64,
}

/// What the publishers of a queue have in it: published, and not yet consumed by every
/// app.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Backlog<'a> {
    /// Messages published to the queue, by every publisher of it.
    published: &'a AtomicU64,
    /// Deliveries from the queue, to every app.
    consumed: &'a AtomicU64,
    /// Apps of the queue: a message is consumed once per app.
    apps: u64,
    /// Messages a publisher lets the backlog reach before it waits.
    limit: u64,
}

impl Backlog<'_> {
    /// Waits while the backlog is at its limit, or until `end_ns`: a few yields, then
    /// sleeps of [`BACKLOG_SLEEP`]. A publisher that only yielded took a core of its own
    /// from the broker it measures: over TCP on two cores, a quarter of the CPU samples
    /// of a saturation run were its `sched_yield` (`docs/benchmarks.md`, "Over TCP: where
    /// the time goes"). A sleep is far shorter than the backlog it waits on (half a
    /// queue's capacity, thousands of messages).
    fn wait_for_room(self, clock: Clock, end_ns: u64) {
        let mut yields = 0;
        while self.published.load(Ordering::Relaxed)
            >= self.limit + self.consumed.load(Ordering::Relaxed) / self.apps
            && clock.now_ns() < end_ns
        {
            if yields < BACKLOG_YIELDS {
                yields += 1;
                thread::yield_now();
            } else {
                thread::sleep(BACKLOG_SLEEP);
            }
        }
    }
}

/// Publishes open loop until the schedule's end, waiting while `backlog` is at its limit:
/// `send` sends one message whose scheduled time is its argument, and says why it could
/// not.
pub(crate) fn publish(
    schedule: Schedule,
    backlog: Backlog<'_>,
    mut send: impl FnMut(u64) -> Result<(), String>,
) -> PublisherEnd {
    let clock = schedule.clock;
    let published = backlog.published;
    let mut end = PublisherEnd::default();
    let mut i: u64 = 0;
    loop {
        let now = clock.now_ns();
        let at = match schedule.interval_ns {
            Some(interval) => schedule.go_ns + schedule.offset_ns + (i as f64 * interval) as u64,
            None => now,
        };
        if at >= schedule.end_ns {
            break;
        }
        if now >= schedule.end_ns {
            // Behind schedule at the end: count what was due and not sent.
            let interval = schedule.interval_ns.unwrap_or(f64::INFINITY);
            let due = ((schedule.end_ns - schedule.go_ns - schedule.offset_ns) as f64 / interval)
                .ceil() as u64;
            end.behind = due.saturating_sub(i);
            break;
        }
        if schedule.interval_ns.is_some() {
            clock.wait_until(at);
        }
        backlog.wait_for_room(clock, schedule.end_ns);
        match send(at) {
            Ok(()) => {
                i += 1;
                published.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("perftest: send failed: {e}");
                end.errors += 1;
                break;
            }
        }
    }
    end.sent = i;
    end.ended_ns = clock.now_ns();
    end
}

/// What the publishing phase of a run did.
pub(crate) struct Publishing {
    /// Each publisher's end.
    pub(crate) ends: Vec<PublisherEnd>,
    /// When publishing started and was to stop (ns since the run's epoch).
    pub(crate) go_ns: u64,
    pub(crate) end_ns: u64,
    /// Messages the senders accepted.
    pub(crate) published: u64,
}

/// Publishes open loop from one thread per sender (`senders[p]` sends one message whose
/// scheduled time it is given, to queue `scenario.queue_of(p)`), each waiting while its
/// queue's backlog (published, not yet consumed by every app) is at half the queue's
/// capacity, and prints a line a second from this thread with the rates of published,
/// confirmed and consumed messages (every queue's `counters` together) and the last
/// second's latencies (the two `recorders`: confirm, consume).
pub(crate) fn publish_all<S>(
    scenario: &Scenario,
    clock: Clock,
    progress: Progress,
    senders: Vec<S>,
    counters: &[Arc<QueueCounters>],
    recorders: [&[Shared]; 2],
) -> Publishing
where
    S: FnMut(u64) -> Result<(), String> + Send,
{
    let limit = (scenario.broker_config().queues[0].capacity / 2) as u64;
    let interval_ns = (scenario.rate > 0.0).then(|| 1e9 / scenario.rate);
    let go_ns = clock.now_ns() + 1_000_000;
    let end_ns = go_ns + u64::try_from(scenario.duration.as_nanos()).unwrap_or(u64::MAX / 2);
    let publishers = senders.len();
    let ends = thread::scope(|s| {
        let handles: Vec<_> = senders
            .into_iter()
            .enumerate()
            .map(|(p, send)| {
                let schedule = Schedule {
                    clock,
                    go_ns,
                    end_ns,
                    interval_ns,
                    offset_ns: interval_ns.map_or(0, |i| (i * p as f64 / publishers as f64) as u64),
                };
                let queue = &counters[scenario.queue_of(p as u32) as usize];
                let backlog = Backlog {
                    published: &queue.published,
                    consumed: &queue.consumed,
                    apps: u64::from(scenario.apps()),
                    limit,
                };
                thread::Builder::new()
                    .name(format!("perftest-pub-{p}"))
                    .spawn_scoped(s, move || publish(schedule, backlog, send))
                    .expect("cannot spawn a publisher thread")
            })
            .collect();
        report_each_second(clock, go_ns, progress, &handles, counters, recorders);
        handles
            .into_iter()
            .map(|h| h.join().expect("a publisher thread panicked"))
            .collect()
    });
    Publishing {
        ends,
        go_ns,
        end_ns,
        published: total(counters, |q| q.published.load(Ordering::Relaxed)),
    }
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// What was run.
    pub scenario: Scenario,
    /// Seconds of publishing: the configured duration, or until the last publisher stopped
    /// if later.
    pub duration_s: f64,
    /// Seconds from the end of publishing until every outcome was in (and the producers
    /// closed).
    pub drain_s: f64,
    /// Messages `send` accepted.
    pub published: u64,
    /// Messages published according to the broker's sessions (a cross-check).
    pub broker_published: u64,
    /// Outcomes, by status.
    pub outcomes: Outcomes,
    /// Deliveries to consumers (every app's; redeliveries included).
    pub consumed: u64,
    /// Published messages without an outcome: `published - outcomes` when positive.
    pub lost: u64,
    /// Outcomes beyond the published messages (duplicates): `outcomes - published` when
    /// positive.
    pub extra_outcomes: u64,
    /// Messages scheduled but not sent by the end (the publishers were behind).
    pub behind: u64,
    /// `send` failures.
    pub send_errors: u64,
    /// Publish -> confirm latency of `Stored` outcomes: until the producer's `on_ack` sees
    /// that the queue stored the message.
    pub confirm_latency: Percentiles,
    /// Publish -> consume latency of every delivery: until a consumer's `on_delivery` sees
    /// the message. Not part of the confirm: a message is ACKed whether or not it was
    /// consumed.
    pub consume_latency: Percentiles,
    /// PUT frames the producers sent.
    pub put_frames: u64,
    /// Messages in them.
    pub put_messages: u64,
    /// Shares redelivered by the queue (a consumer closed).
    pub redelivered: u64,
    /// Whether every producer had every outcome before closing.
    pub drained: bool,
    /// Over TCP with reliable clients: what the faults did.
    pub faults: Option<Faults>,
    /// Each queue's figures, in queue-id order (one entry with one queue).
    pub queues: Vec<QueueResult>,
}

/// What one queue of a run measured: its publishers' sends and outcomes, its consumers'
/// deliveries, and the latencies of both.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueResult {
    /// The queue's id.
    pub queue: u32,
    /// Publishers on it.
    pub publishers: u32,
    /// Consumers on it (of each app).
    pub consumers: u32,
    /// Messages its publishers' `send` accepted.
    pub published: u64,
    /// Its publishers' outcomes, by status.
    pub outcomes: Outcomes,
    /// Deliveries to its consumers (every app's).
    pub consumed: u64,
    /// Publish -> confirm latency of its publishers' `Stored` outcomes.
    pub confirm_latency: Percentiles,
    /// Publish -> consume latency of its consumers' deliveries.
    pub consume_latency: Percentiles,
}

/// Each queue's figures: `counters` by queue, `confirm` recorders by publisher, `consume`
/// recorders by app then consumer (the order the runs open them in).
pub(crate) fn per_queue(
    scenario: &Scenario,
    counters: &[Arc<QueueCounters>],
    [confirm, consume]: [&[Shared]; 2],
) -> Vec<QueueResult> {
    let consumers = scenario.consumers.max(1) as usize;
    counters
        .iter()
        .enumerate()
        .map(|(q, c)| {
            let q = q as u32;
            let on_q = |i: usize| scenario.queue_of(i as u32) == q;
            let confirm: Vec<Shared> = (confirm.iter().enumerate())
                .filter(|&(p, _)| on_q(p))
                .map(|(_, r)| r.clone())
                .collect();
            let consume: Vec<Shared> = (consume.iter().enumerate())
                .filter(|&(i, _)| on_q(i % consumers))
                .map(|(_, r)| r.clone())
                .collect();
            QueueResult {
                queue: q,
                publishers: scenario.on_queue(q, scenario.publishers),
                consumers: scenario.on_queue(q, scenario.consumers),
                published: c.published.load(Ordering::Relaxed),
                outcomes: c.outcomes.snapshot(),
                consumed: c.consumed.load(Ordering::Relaxed),
                confirm_latency: Percentiles::of(&merge_total(&confirm)),
                consume_latency: Percentiles::of(&merge_total(&consume)),
            }
        })
        .collect()
}

impl QueueResult {
    /// Messages published to this queue per second of the run's publishing.
    #[must_use]
    pub fn publish_rate(&self, duration_s: f64) -> f64 {
        per_second(self.published, duration_s)
    }

    /// Messages confirmed (`Stored`) by this queue per second of publishing.
    #[must_use]
    pub fn confirm_rate(&self, duration_s: f64) -> f64 {
        per_second(self.outcomes.acked, duration_s)
    }

    /// Deliveries from this queue per second of publishing.
    #[must_use]
    pub fn consume_rate(&self, duration_s: f64) -> f64 {
        per_second(self.consumed, duration_s)
    }
}

/// What connection kills did to a run with reliable clients, and what they must not do.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Faults {
    /// Client connections the proxy killed.
    pub killed: u64,
    /// Times the server was shut down and started again.
    pub server_restarts: u64,
    /// Producers' and consumers' reconnections.
    pub reconnects: u64,
    /// Messages the producers resent on a new connection.
    pub resent: u64,
    /// Messages a re-opened producer learnt were stored already (not resent).
    pub stored_before: u64,
    /// Resent messages the broker had stored already: confirmed again, not stored twice.
    pub deduplicated: u64,
    /// Redelivered messages the consumers filtered (handed to the application before).
    pub filtered: u64,
    /// Distinct messages the application consumed.
    pub consumed_unique: u64,
    /// Messages handed to the application twice (must be 0).
    pub duplicated_to_app: u64,
    /// The producers' recoveries, in microseconds: from a lost connection to the broker's
    /// first confirm after it (`zerodispatch_client::Recovery::time_to_confirm`; at a low
    /// rate, it includes the wait for the next message).
    #[serde(serialize_with = "crate::report::latency_json")]
    pub recovery_us: Percentiles,
    /// The same recoveries, from the lost connection to the new session
    /// (`Recovery::reconnect_time`).
    #[serde(serialize_with = "crate::report::latency_json")]
    pub reconnect_us: Percentiles,
}

impl RunResult {
    /// Mean messages per PUT frame.
    #[must_use]
    pub fn mean_batch(&self) -> f64 {
        if self.put_frames == 0 {
            0.0
        } else {
            self.put_messages as f64 / self.put_frames as f64
        }
    }

    /// Messages published per second.
    #[must_use]
    pub fn publish_rate(&self) -> f64 {
        per_second(self.published, self.duration_s)
    }

    /// Messages confirmed (`Stored`) per second of publishing.
    #[must_use]
    pub fn confirm_rate(&self) -> f64 {
        per_second(self.outcomes.acked, self.duration_s)
    }

    /// Deliveries per second of publishing.
    #[must_use]
    pub fn consume_rate(&self) -> f64 {
        per_second(self.consumed, self.duration_s)
    }

    /// No message lost or duplicated, none failed, and every acked message delivered to
    /// every app.
    #[must_use]
    pub fn ok(&self) -> bool {
        let apps = u64::from(self.scenario.apps());
        let delivery = match self.faults {
            // Every message published once, and each stored one consumed by every app.
            None => {
                self.broker_published == self.published
                    && self.consumed >= self.outcomes.acked * apps
            }
            // Resent messages reach the broker again: published there at least once; none
            // reaches an application twice, and every stored one reaches every app.
            Some(f) => {
                self.broker_published >= self.published
                    && f.duplicated_to_app == 0
                    && f.consumed_unique >= self.outcomes.acked * apps
            }
        };
        delivery && self.lost == 0 && self.extra_outcomes == 0 && self.send_errors == 0
    }
}

fn per_second(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

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
            let outcomes = &counters.outcomes;
            let now = clock.now_ns();
            let mut acked = 0;
            let mut r = lock(&recorder);
            for a in batch {
                if a.status == AckStatus::Stored {
                    acked += 1;
                    r.record(now.saturating_sub(a.payload.handle) / 1_000);
                } else {
                    outcomes.add(a.status, 1);
                }
            }
            drop(r);
            outcomes.add(AckStatus::Stored, acked);
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
        &counters,
        [&confirm_recorders, &consume_recorders],
    );
    let ended_ns = ends.iter().map(|e| e.ended_ns).max().unwrap_or(end_ns);

    // Drain: wait for every outcome (so that a timer's last batch goes out instead of being
    // reported `NotSent` by `close`), then close the producers and settle the broker.
    let deadline = Instant::now() + DRAIN_TIMEOUT + timer_interval(scenario.flush) * 2;
    while producers.iter().any(|p| p.unconfirmed() > 0) && Instant::now() < deadline {
        thread::sleep(Duration::from_micros(200));
    }
    let mut drained = true;
    for p in &producers {
        drained &= p.close(Duration::from_secs(5));
    }
    broker.quiesce()?;
    let drain_s = (clock.now_ns().saturating_sub(ended_ns)) as f64 / 1e9;

    let stats = broker.session_stats();
    let queue_stats = broker.queue_stats();
    let outcomes = total_outcomes(&counters);
    let total = outcomes.total();
    let result = RunResult {
        scenario: scenario.clone(),
        // The publishing window: the configured one, or longer if a publisher overran it.
        duration_s: ended_ns.max(end_ns).saturating_sub(go_ns) as f64 / 1e9,
        drain_s,
        published,
        broker_published: stats.published,
        outcomes,
        consumed: self::total(&counters, |q| q.consumed.load(Ordering::Relaxed)),
        lost: published.saturating_sub(total),
        extra_outcomes: total.saturating_sub(published),
        behind: ends.iter().map(|e| e.behind).sum(),
        send_errors: ends.iter().map(|e| e.errors).sum(),
        confirm_latency: Percentiles::of(&merge_total(&confirm_recorders)),
        consume_latency: Percentiles::of(&merge_total(&consume_recorders)),
        put_frames: stats.put_frames,
        put_messages: stats.put_messages,
        redelivered: queue_stats.iter().map(|q| q.redelivered).sum(),
        drained,
        faults: None,
        queues: per_queue(
            scenario,
            &counters,
            [&confirm_recorders, &consume_recorders],
        ),
    };
    drop(producers);
    crate::cpu::note_broker_threads();
    broker.shutdown();
    Ok(result)
}

pub(crate) fn timer_interval(flush: FlushStrategy) -> Duration {
    match flush {
        FlushStrategy::Dynamic => Duration::ZERO,
        FlushStrategy::Timer(d) => d,
    }
}

/// Prints a line a second while the publishers run: the last second's rates of published,
/// confirmed and consumed messages, and the last second's confirm and consume latencies.
fn report_each_second<T>(
    clock: Clock,
    go_ns: u64,
    progress: Progress,
    publishers: &[thread::ScopedJoinHandle<'_, T>],
    counters: &[Arc<QueueCounters>],
    [confirm_recorders, consume_recorders]: [&[Shared]; 2],
) {
    let read = || {
        [
            total(counters, |q| q.published.load(Ordering::Relaxed)),
            total(counters, |q| q.outcomes.0[0].load(Ordering::Relaxed)),
            total(counters, |q| q.consumed.load(Ordering::Relaxed)),
        ]
    };
    clock.wait_until(go_ns);
    let mut last = read();
    let mut last_ns = go_ns;
    let mut next_ns = go_ns + 1_000_000_000;
    loop {
        // Wake every 50 ms to notice the publishers' end.
        while clock.now_ns() < next_ns && !publishers.iter().all(|h| h.is_finished()) {
            let left = next_ns.saturating_sub(clock.now_ns());
            thread::sleep(Duration::from_nanos(left.min(50_000_000)));
        }
        let done = publishers.iter().all(|h| h.is_finished());
        let now_ns = clock.now_ns();
        let now = read();
        let seconds = (now_ns - last_ns) as f64 / 1e9;
        let confirm = take_interval(confirm_recorders);
        let consume = take_interval(consume_recorders);
        // A last fraction of a second shorter than a tenth is not worth a line.
        if progress != Progress::Off && (!done || seconds >= 0.1) {
            let rates = [0, 1, 2].map(|i| (now[i] - last[i]) as f64 / seconds);
            let line = report::progress_line(rates, &confirm, &consume);
            match progress {
                Progress::Stdout => println!("{line}"),
                Progress::Stderr => eprintln!("{line}"),
                Progress::Off => {}
            }
        }
        if done {
            return;
        }
        last = now;
        last_ns = now_ns;
        next_ns += 1_000_000_000;
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
