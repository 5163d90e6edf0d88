//! Per-processor statistics, written by the processor thread and read by anyone while it
//! runs.
//!
//! Counters have a single writer (the processor), so it updates them with a relaxed load
//! and store rather than a read-modify-write; readers see a recent value. They sit on
//! their own cache line, away from what producers write. Histograms are recorded into the
//! processor's private copies and merged into the shared ones at flush points, when the
//! shared lock is free (`try_lock`): the processor never waits for a reader.

use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;

use crate::counter::Counter;
use crate::percentiles::Percentiles;

/// Largest time in queue the histogram tracks, in nanoseconds (larger values are recorded
/// as this): 60 s.
const MAX_TIME_IN_QUEUE_NS: u64 = 60_000_000_000;
/// Largest batch size the histogram tracks (larger batches are recorded as this).
const MAX_BATCH: u64 = 1 << 20;
/// Significant decimal digits of the histograms: 1% precision.
const SIGFIG: u8 = 2;

/// The counters of one processor.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Events and control items handled that a caller enqueued: events (each event of a
    /// pack), dispatcher callbacks, unregistrations. Not the monitor's probes (counted in
    /// `probes`), which no caller enqueued. Added to with release after each is handled
    /// (a pack's events one by one, after it was popped), so that a reader that reads it
    /// with acquire before the queue's length counts none twice.
    pub(crate) processed: Counter,
    /// The monitor's probes handled: added to (with release) after the probe is popped.
    pub(crate) probes: Counter,
    pub(crate) flushes: Counter,
    pub(crate) panics: Counter,
    pub(crate) spilled: Counter,
    pub(crate) stale: Counter,
    pub(crate) wrong_client_type: Counter,
    pub(crate) max_depth: Counter,
    pub(crate) high_watermark_alarms: Counter,
    pub(crate) stuck_reports: Counter,
    pub(crate) parks: Counter,
    pub(crate) outboxed: Counter,
    pub(crate) packs: Counter,
    pub(crate) timers_fired: Counter,
}

/// Whether a processor was pinned to a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// No core was configured for it.
    NotRequested,
    /// Pinned to this core.
    Pinned(usize),
    /// The OS refused to pin it to this core (some containers do); it runs unpinned.
    Refused(usize),
}

/// The histograms of one processor.
#[derive(Clone, Debug)]
pub(crate) struct Histograms {
    /// Nanoseconds a probe spent in the queue.
    pub(crate) time_in_queue_ns: Histogram<u64>,
    /// Events between two flush points.
    pub(crate) batch: Histogram<u64>,
}

impl Histograms {
    pub(crate) fn new() -> Self {
        let make =
            |max| Histogram::new_with_bounds(1, max, SIGFIG).expect("valid histogram bounds");
        Self {
            time_in_queue_ns: make(MAX_TIME_IN_QUEUE_NS),
            batch: make(MAX_BATCH),
        }
    }

    /// Records a time in queue. Never allocates (fixed bounds; values above are clamped).
    #[inline]
    pub(crate) fn record_time_in_queue(&mut self, elapsed: Duration) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.time_in_queue_ns
            .saturating_record(ns.clamp(1, MAX_TIME_IN_QUEUE_NS));
    }

    /// Records a batch size. Never allocates.
    #[inline]
    pub(crate) fn record_batch(&mut self, events: u64) {
        self.batch.saturating_record(events.clamp(1, MAX_BATCH));
    }

    /// Moves these counts into `shared`, leaving these empty. Never allocates: both have
    /// the same bounds.
    pub(crate) fn drain_into(&mut self, shared: &mut Histograms) {
        // Same bounds on both sides: `add` cannot fail or resize.
        let _ = shared.time_in_queue_ns.add(&self.time_in_queue_ns);
        let _ = shared.batch.add(&self.batch);
        self.time_in_queue_ns.reset();
        self.batch.reset();
    }
}

/// Everything a processor publishes about itself.
///
/// Counters are current. Histograms are merged into the shared copy when asked (every
/// monitor tick, and by each read) at the processor's next flush point or before it
/// sleeps: a busy processor's lag by about one `monitor_interval`, and an idle one's show
/// everything up to its last sleep once it next wakes.
#[derive(Debug)]
pub(crate) struct ProcessorStats {
    pub(crate) counters: CachePadded<Counters>,
    pub(crate) histograms: Mutex<Histograms>,
    /// Set by the monitor (every tick) and by readers; the processor merges its private
    /// histograms into `histograms` at its next flush point or before it sleeps.
    pub(crate) publish_requested: AtomicBool,
    pub(crate) pinning: OnceLock<Pinning>,
    /// The monitor's probes accepted into the queue, written by the monitor thread only:
    /// raised before it pushes a probe, lowered again if the push is refused (see
    /// [`ProbeCount`]). With `counters.probes` it bounds the probes in the queue, which
    /// the snapshot takes out of the depth.
    pub(crate) probes_sent: AtomicU64,
}

/// The monitor's side of [`ProcessorStats::probes_sent`]: one probe counted before its
/// push, so that a reader that sees the probe in the queue sees it counted.
pub(crate) struct ProbeCount<'a>(&'a AtomicU64);

impl<'a> ProbeCount<'a> {
    /// Counts a probe about to be pushed.
    pub(crate) fn before_push(stats: &'a ProcessorStats) -> Self {
        // Relaxed: the push that follows is a release (a compare-and-swap of the queue's
        // tail) that the reader's length acquires; this count, sequenced before it, is
        // visible to the reader's load after the length.
        stats.probes_sent.fetch_add(1, Ordering::Relaxed);
        Self(&stats.probes_sent)
    }

    /// The push was refused: the probe never entered the queue. A reader that saw the
    /// count meanwhile took one probe too many out of the depth: it under-counts, within
    /// the snapshot's "at least".
    pub(crate) fn refused(self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ProcessorStats {
    pub(crate) fn new() -> Self {
        Self {
            counters: CachePadded::new(Counters::default()),
            histograms: Mutex::new(Histograms::new()),
            publish_requested: AtomicBool::new(false),
            pinning: OnceLock::new(),
            probes_sent: AtomicU64::new(0),
        }
    }
}

/// A snapshot of one processor's statistics, read while it runs.
///
/// Counters are current. The histograms are what the processor last published: it merges
/// them when asked (every monitor tick, and by each read) at its next flush point or before
/// it sleeps, so a busy processor's lag by about one `monitor_interval`, and an idle one
/// publishes when it next wakes.
#[derive(Clone, Debug)]
pub struct ProcessorSnapshot {
    /// Which processor.
    pub processor: crate::ProcessorId,
    /// Events and control items accepted into its queue, at least: `processed` read
    /// first, plus `depth` read after it. Never more than callers ever enqueued (a
    /// dispatch that lands between the two reads may or may not be counted); it may lag
    /// by the one item being handled, by up to two monitor probes being counted, and by
    /// up to 15 events for each pack queued or being handled (`depth` counts a pack as
    /// one item). A timer, which waits beside the queue, counts once it has run.
    pub enqueued: u64,
    /// Events and control items it has handled (dispatcher callbacks, `synchronize` and
    /// `call` markers, unregistrations), and timers it ran. The monitor's probes, which no
    /// caller enqueues, and cancelled timers, which never run, are not counted.
    pub processed: u64,
    /// Items in its queue now, at most: events, control items, and packs of up to 16
    /// events of a blocking batch (each one item, as the queue's capacity counts them);
    /// the monitor's probe, if one is queued, is not counted.
    pub depth: usize,
    /// Clients registered on it now: those handed in and not yet taken in by the
    /// processor (no event reached them yet) included, and those whose unregistration is
    /// still queued.
    pub clients: usize,
    /// The deepest its queue has been, sampled after the first event of each drain and
    /// every 64 events after it.
    pub max_depth: u64,
    /// Client flushes it has made.
    pub flushes: u64,
    /// Panics caught in client handlers, flushes and dispatcher callbacks.
    pub panics: u64,
    /// Callbacks it ran that had been spilled to the heap (`Callback::spill`): events,
    /// dispatcher callbacks and timers, counted as they run (a cancelled timer is not).
    pub spilled: u64,
    /// Events dropped because their client had been unregistered.
    pub stale: u64,
    /// Client callbacks ([`Event::to_client`](crate::Event::to_client)) dropped unrun
    /// because the client they were sent to is not of their type.
    pub wrong_client_type: u64,
    /// Times the high-watermark alarm was raised.
    pub high_watermark_alarms: u64,
    /// Times the monitor reported it stuck in one event.
    pub stuck_reports: u64,
    /// Times it parked its thread.
    pub parks: u64,
    /// Events its clients dispatched that waited in its outbox because their target's
    /// queue was full (see the outbox protocol).
    pub outboxed: u64,
    /// Packs it handled: runs of up to 16 events of one blocking `dispatch_batch` from an
    /// application thread that came in one slot of its queue (`processed` counts their
    /// events one by one; `depth` counts a pack as one item).
    pub packs: u64,
    /// Timers it ran at their deadline (not those cancelled first).
    pub timers_fired: u64,
    /// Timers waiting for their deadline now (scheduled, not yet run or dropped).
    pub timers_pending: u64,
    /// Whether it is pinned to a core.
    pub pinning: Pinning,
    /// Time in queue in nanoseconds, sampled by the monitor's probes (one every
    /// `monitor_interval` while the processor is awake).
    pub time_in_queue_ns: Percentiles,
    /// Events per batch (between two flush points).
    pub batch_size: Percentiles,
}

impl ProcessorStats {
    pub(crate) fn snapshot(
        &self,
        processor: crate::ProcessorId,
        depth: impl FnOnce() -> usize,
        clients: usize,
        timers_pending: usize,
    ) -> ProcessorSnapshot {
        let c = &self.counters;
        // The order of the reads is what bounds `enqueued` (`processed + depth`) by what
        // callers ever enqueued:
        //
        // 1. `processed` with acquire (the processor adds to it with release after each
        //    item it handled): every item counted was popped before the length is read,
        //    so none is counted twice.
        // 2. The probes handled, with acquire, for the same reason: each was popped
        //    before the length is read.
        // 3. The length of the queue, probes included.
        // 4. The probes sent, after the length: a probe the length counted was counted
        //    as sent before its push (`ProbeCount`), and the length's read of the tail
        //    acquires that push.
        //
        // Probes in the queue at 3 are at most `sent(4) - handled(2)`: taking that out of
        // the length can only under-count (by the probes handled or sent in between, at
        // most two: one is queued at a time).
        let processed = c.processed.get_acquire();
        let probes_handled = c.probes.get_acquire();
        let length = depth();
        // Relaxed: ordered after the length by the push it acquires (point 4).
        let probes_sent = self.probes_sent.load(Ordering::Relaxed);
        let probes_queued =
            usize::try_from(probes_sent.saturating_sub(probes_handled)).unwrap_or(usize::MAX);
        let depth = length.saturating_sub(probes_queued);
        let (time_in_queue_ns, batch_size) = {
            let h = self
                .histograms
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            (
                Percentiles::of(&h.time_in_queue_ns),
                Percentiles::of(&h.batch),
            )
        };
        ProcessorSnapshot {
            processor,
            enqueued: processed + depth as u64,
            processed,
            depth,
            clients,
            max_depth: c.max_depth.get(),
            flushes: c.flushes.get(),
            panics: c.panics.get(),
            spilled: c.spilled.get(),
            stale: c.stale.get(),
            wrong_client_type: c.wrong_client_type.get(),
            high_watermark_alarms: c.high_watermark_alarms.get(),
            stuck_reports: c.stuck_reports.get(),
            parks: c.parks.get(),
            outboxed: c.outboxed.get(),
            packs: c.packs.get(),
            timers_fired: c.timers_fired.get(),
            timers_pending: timers_pending as u64,
            pinning: self.pinning.get().copied().unwrap_or(Pinning::NotRequested),
            time_in_queue_ns,
            batch_size,
        }
    }
}
