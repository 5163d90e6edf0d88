//! The monitor thread: probes each awake processor's queue to sample time in queue, and
//! reports a processor stuck in one event.
//!
//! Every `monitor_interval`, for each processor that is not asleep and has no probe in its
//! queue yet, the monitor enqueues a probe stamped with the time; the processor records
//! the probe's time in queue when it reaches it. A processor that is not asleep, has a
//! non-empty queue, and has handled nothing for `stuck_warning` is stuck in one event: the
//! monitor logs a warning and counts it, once per episode, and logs again when the
//! processor moves on. Probes keep the queue non-empty while a processor is stuck, so a
//! long event is seen even when nothing else is queued.
//!
//! While every processor sleeps the monitor rests: its interval doubles at each tick that
//! finds them all asleep, up to [`IDLE_INTERVAL`], and the first tick that finds one awake
//! brings it back to `monitor_interval`. No processor wakes it: an idle dispatcher wakes no
//! thread of its own more than once a second, and one woken for one event at a time (a
//! broker at 50 msg/s) no more often, at the price of a load after idleness being probed
//! and watched up to [`IDLE_INTERVAL`] late.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::event::Item;
use crate::handle::Shared;
use crate::stats::ProbeCount;

/// The running monitor thread.
pub(crate) struct Monitor {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// What the monitor remembers of a processor between ticks.
#[derive(Clone, Copy)]
struct Watch {
    processed: u64,
    since: Instant,
    reported: bool,
}

/// The longest interval of the monitor while every processor sleeps: an idle dispatcher's
/// only wake-up, once a second (`voluntary_ctxt_switches` of an idle `zd-server`: 75 a
/// second at the 10 ms interval before). Longer would delay the first probe, and the stuck
/// watch, of a processor that wakes after idleness.
const IDLE_INTERVAL: Duration = Duration::from_secs(1);

/// The monitor thread's name.
pub(crate) const THREAD_NAME: &str = "zd-monitor";

impl Monitor {
    /// Starts the monitor thread, with `stack_size` bytes of stack if given.
    ///
    /// # Errors
    ///
    /// The system's error if it refused the thread.
    pub(crate) fn start<M: Send + 'static>(
        shared: Arc<Shared<M>>,
        stack_size: Option<usize>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let mut builder = thread::Builder::new().name(THREAD_NAME.into());
        if let Some(bytes) = stack_size {
            builder = builder.stack_size(bytes);
        }
        let for_thread = shared.clone();
        let thread = builder.spawn(move || run(&for_thread, &flag))?;
        Ok(Self { stop, thread })
    }

    /// Stops the monitor and joins it.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

fn run<M: Send + 'static>(shared: &Shared<M>, stop: &AtomicBool) {
    // Its probes wake a driven processor's thread, never run its turn here.
    crate::processor::never_drive();
    let start = Instant::now();
    let mut watches: Vec<Watch> = shared
        .processors()
        .map(|_| Watch {
            processed: 0,
            since: start,
            reported: false,
        })
        .collect();
    // `park_timeout` returns early on `stop`'s unpark; the park token makes an unpark that
    // comes before the park count too, so the stop is never missed.
    let base = shared.global.monitor_interval;
    let mut interval = base;
    while !stop.load(Ordering::Acquire) {
        thread::park_timeout(interval);
        if stop.load(Ordering::Acquire) || shared.is_shutting_down() {
            break;
        }
        // Every processor asleep: the next tick comes later.
        interval = if shared.processors().all(|p| p.is_sleeping()) {
            (interval * 2).min(IDLE_INTERVAL.max(base))
        } else {
            base
        };
        let now = Instant::now();
        for (processor, watch) in shared.processors().zip(watches.iter_mut()) {
            processor
                .stats
                .publish_requested
                .store(true, Ordering::Relaxed);
            // Probes too: a processor that handles only probes is not stuck.
            let counters = &processor.stats.counters;
            let processed = counters.processed.get() + counters.probes.get();
            let asleep = processor.is_sleeping();
            if processed != watch.processed || asleep || processor.queue.is_empty() {
                if watch.reported {
                    tracing::info!(processor = %processor.id, "processor is making progress again");
                }
                *watch = Watch {
                    processed,
                    since: now,
                    reported: false,
                };
            } else if !watch.reported
                && now.duration_since(watch.since) >= shared.global.stuck_warning
            {
                watch.reported = true;
                processor.stats.counters.stuck_reports.add_shared(1);
                tracing::warn!(
                    processor = %processor.id,
                    stuck_for = ?now.duration_since(watch.since),
                    depth = processor.queue.len(),
                    "processor stuck: one event has been running longer than the warning time"
                );
            }
            let probe = !asleep && !processor.probe_pending.swap(true, Ordering::Relaxed);
            if probe {
                // Counted before the push: a snapshot that sees the probe in the queue
                // sees it counted, and leaves it out of the depth (`stats.rs`).
                let count = ProbeCount::before_push(&processor.stats);
                if processor.try_push(Item::Probe(Instant::now())).is_err() {
                    count.refused();
                    processor.probe_pending.store(false, Ordering::Relaxed);
                }
            }
        }
    }
}
