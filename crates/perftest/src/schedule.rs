//! The publishing schedule: publisher threads sending open loop, each message at its
//! scheduled time, while this thread prints a line a second.
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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::counters::{QueueCounters, total};
use crate::latency::{Shared, take_interval};
use crate::report::progress_line;
use crate::result::{PublisherEnd, Publishing};
use crate::scenario::Scenario;

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
    senders: impl IntoIterator<Item = S>,
    counters: &[Arc<QueueCounters>],
    recorders: [&[Shared]; 2],
) -> Publishing
where
    S: FnMut(u64) -> Result<(), String> + Send,
{
    let senders: Vec<S> = senders.into_iter().collect();
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
            let line = progress_line(rates, &confirm, &consume);
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
