//! The processor thread's own state and its loop (the module docs of `processor`): drain,
//! flush, retry the outbox, wait for work.

use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use super::contain::contain;
use super::current::Playing;
use super::current::{outbox_len, set_current};
use super::parked::Parked;
use super::shared::ProcessorShared;
use super::tuning::{DEPTH_CHECK_INTERVAL, LINGER, LINGER_GROWTH, RETRY_PARK_MIN};
use crate::client::Registered;
use crate::client::{ClientFlags, Context};
use crate::handle::DispatcherHandle;
use crate::ids::{ClientHandle, ClientKey};
use crate::stats::{Histograms, Pinning};
use crate::sync::{Ordering, thread};
use crate::timers::TimerQueue;

/// Spin-loop hints in a [`LINGER`] on this machine: a `pause` costs from a few to over a
/// hundred cycles depending on the processor, so the count is measured once per processor
/// thread (a few microseconds at its start).
fn linger_spins() -> u32 {
    const PROBE: u32 = 256;
    let start = Instant::now();
    for _ in 0..PROBE {
        std::hint::spin_loop();
    }
    let per_spin = start.elapsed() / PROBE;
    let spins = LINGER.as_nanos() / per_spin.as_nanos().max(1);
    u32::try_from(spins).unwrap_or(u32::MAX).clamp(8, 4096)
}

/// Waits `spins` spin-loop hints ([`LINGER`]), touching no shared memory.
#[inline]
fn linger(spins: u32) {
    for _ in 0..spins {
        std::hint::spin_loop();
    }
}

/// A registered client in its processor's table.
pub(super) struct Entry<M> {
    pub(super) client: Box<dyn Registered<M>>,
    pub(super) generation: u16,
    /// On the flush list now (the dedup flag).
    pub(super) on_flush_list: bool,
    /// The flush gate and the flush-again request ([`Context`]).
    pub(super) flags: ClientFlags,
}

/// The processor thread's own state.
pub(crate) struct Runner<M: Send + 'static> {
    /// The context lent to every call into a client, set to name the client before each;
    /// it holds the processor's handle to its dispatcher.
    pub(super) ctx: Context<M>,
    pub(super) shared: Arc<ProcessorShared<M>>,
    pub(super) clients: Vec<Option<Entry<M>>>,
    /// Slots of the clients to flush, in the order they received their first event since
    /// the last flush (or asked to be flushed again).
    pub(super) flush_list: Vec<u16>,
    /// Clients that asked, during the flush under way, to be flushed again.
    pub(super) again: Vec<u16>,
    /// Events since the last flush point.
    pub(super) since_flush: u64,
    /// Events popped in all (wrapping): what the gate's count of entries is compared with.
    pub(super) popped: usize,
    /// The next timed park while retries are pending (see [`RETRY_PARK_MIN`]).
    pub(super) retry_park: Duration,
    /// Spin-loop hints in a [`LINGER`], measured when the thread starts.
    pub(super) linger_spins: u32,
    pub(super) histograms: Histograms,
    pub(super) high_alarm: bool,
    /// The wakers of futures being woken (`waiters.rs`): empty between wakes, kept for its
    /// capacity.
    pub(super) waking: Vec<Option<Waker>>,
    /// The timers received, by deadline (`timers.rs`).
    pub(super) timers: TimerQueue,
    /// Its clients and timers dropped: the loop has reached its end of life and only hands
    /// on what those drops dispatched (`end_of_life`).
    pub(super) released: bool,
    /// When the thread's current park ends by itself (clock ns), `None` for never: a
    /// driver that leaves a timer due before it wakes the thread (`drive.rs`).
    pub(super) parked_until: Option<u64>,
}

/// Armed for the whole life of a processor thread; if the thread unwinds anyway (a
/// defect of the dispatcher's own code: user code is contained), it makes every waiter
/// fail instead of hang: the gate closes (blocking dispatches and `synchronize` get
/// `ShutDown`), the events kept in the outbox leave the gates they hold, and the events
/// still queued are dropped, so that a `synchronize` marker among them wakes its waiter
/// with an error.
pub(super) struct DeathWatch<M: Send + 'static> {
    pub(super) shared: Arc<ProcessorShared<M>>,
    pub(super) dispatcher: DispatcherHandle<M>,
}

impl<M: Send + 'static> Drop for DeathWatch<M> {
    fn drop(&mut self) {
        if !thread::panicking() {
            return;
        }
        let shared = &*self.shared;
        tracing::error!(processor = %shared.id, "processor thread died; its queue is refused and dropped");
        shared.close();
        shared.stop.store(true, Ordering::SeqCst);
        let mut outbox = shared.outbox.lock().unwrap_or_else(|e| e.into_inner());
        for (target, item) in outbox.take_all() {
            if let Some(target) = self.dispatcher.processor(target) {
                target.gate.undo();
            }
            contain(&shared.stats, shared.id, "drop of a kept event", || {
                drop(item)
            });
        }
        while let Some(item) = shared.queue.pop() {
            contain(&shared.stats, shared.id, "drop of a queued event", || {
                drop(item)
            });
        }
        while let Some((_, callback)) = shared.timers.arrivals.pop() {
            contain(&shared.stats, shared.id, "drop of a timer", || {
                drop(callback)
            });
        }
        // Release: a push that waits under a held entry (`push_waiting`) sees the thread
        // gone and drops its event instead of waiting for a pop that never comes.
        shared.exited.store(true, Ordering::Release);
    }
}

impl<M: Send + 'static> Runner<M> {
    pub(crate) fn new(dispatcher: DispatcherHandle<M>, shared: Arc<ProcessorShared<M>>) -> Self {
        let ctx = Context {
            me: ClientHandle::new(
                dispatcher.id(),
                shared.id,
                ClientKey {
                    slot: 0,
                    generation: 0,
                },
            ),
            flags: ClientFlags::default(),
            wrong_type: 0,
            kinds: Vec::new(),
            dispatcher,
        };
        Self {
            ctx,
            timers: TimerQueue::new(shared.config.timers),
            shared,
            clients: Vec::new(),
            flush_list: Vec::new(),
            again: Vec::new(),
            since_flush: 0,
            popped: 0,
            retry_park: RETRY_PARK_MIN,
            linger_spins: 8,
            histograms: Histograms::new(),
            high_alarm: false,
            waking: Vec::with_capacity(crate::waiters::PLACES),
            released: false,
            parked_until: None,
        }
    }

    /// The thread's body: pins, runs the loop until it has ended its life.
    pub(crate) fn run(mut self, core: Option<usize>) {
        let id = self.shared.id;
        // Every log line of this thread, its clients' included, names its processor.
        let _span = tracing::info_span!("processor", processor = %id).entered();
        set_current(self.ctx.dispatcher.id(), id);
        let pinning = match core {
            None => Pinning::NotRequested,
            Some(core) => {
                if core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                    Pinning::Pinned(core)
                } else {
                    tracing::warn!(processor = %id, core, "the OS refused to pin the processor; it runs unpinned");
                    Pinning::Refused(core)
                }
            }
        };
        let _ = self.shared.stats.pinning.set(pinning);
        // Measured pinned, on the core it will run on.
        self.linger_spins = linger_spins();
        tracing::debug!(processor = %id, ?pinning, "processor started");

        let runner = *Box::new(self).run_loop();
        runner.exit();
    }

    /// The loop of the module docs, until its life has ended (`end_of_life`). Boxed: while
    /// the thread is parked, its state lies where a driver finds it (`drive.rs`).
    fn run_loop(mut self: Box<Self>) -> Box<Self> {
        let _watch = DeathWatch {
            shared: self.shared.clone(),
            dispatcher: self.ctx.dispatcher.clone(),
        };
        loop {
            self.turn(u64::MAX);
            if self.end_of_life() {
                return self;
            }
            if let Some(rest) = self.wait_for_work() {
                self = self.rest(rest);
            }
        }
    }

    /// One turn of the loop, between two waits: retry the outbox, drain at most `budget`
    /// events, run the timers due, flush, retry the outbox. The thread's loop and the
    /// stepped dispatcher ([`testing`](crate::testing)) both turn by this function; only
    /// who turns, and when the clock moves, differ. Returns the work done: items popped,
    /// timers run, outboxed events handed on, and one if a client asked to be flushed
    /// again; zero means idle.
    pub(crate) fn turn(&mut self, budget: u64) -> u64 {
        let fired = self.shared.stats.counters.timers_fired.get();
        let (popped, kept) = (self.popped, outbox_len());
        self.retry_outbox();
        self.drain(budget);
        self.fire_due_timers();
        self.flush_all();
        self.retry_outbox();
        let fired = self.shared.stats.counters.timers_fired.get() - fired;
        let popped = self.popped.wrapping_sub(popped) as u64;
        let sent = kept.saturating_sub(outbox_len()) as u64;
        fired + popped + sent + u64::from(!self.flush_list.is_empty())
    }

    /// The calling thread playing this processor until the guard drops (a stepped
    /// dispatcher's thread, `current.rs`).
    fn play(&self) -> Playing {
        Playing::start(
            self.ctx.dispatcher.id(),
            self.shared.id,
            self.shared.outbox_len_locked(),
        )
    }

    /// The processor's shared state.
    pub(crate) fn shared(&self) -> &ProcessorShared<M> {
        &self.shared
    }

    /// Whether the loop may end: stopped, settled, nothing kept or to flush again. On the
    /// processor's thread (or while a step plays it).
    pub(crate) fn may_exit(&self) -> bool {
        self.shared.may_exit(self.popped) && outbox_len() == 0 && self.flush_list.is_empty()
    }

    /// A step of a stepped dispatcher, on the calling thread playing this processor: a
    /// [`turn`](Self::turn) of at most `budget` events, then, if shutdown asked it to stop,
    /// the [end of life](Self::end_of_life) check. Returns the turn's work, and whether
    /// the processor has ended its life (then it is to [`exit`](Self::exit)).
    pub(crate) fn step(&mut self, budget: u64) -> (u64, bool) {
        let _playing = self.play();
        let work = self.turn(budget);
        let ended = self.shared.stop_requested() && self.end_of_life();
        (work, ended)
    }

    /// What keeps this processor busy, for a stepped dispatcher's report of one that never
    /// idles or never ends: the clients that ask to be flushed again, events kept in its
    /// outbox, entries not yet popped.
    pub(crate) fn busy_with(&self) -> String {
        let _playing = self.play();
        let mut why = Vec::new();
        for &slot in &self.flush_list {
            if let Some(Some(entry)) = self.clients.get(usize::from(slot)) {
                why.push(format!(
                    "client `{}` (slot {slot}) asks to be flushed again",
                    entry.client.type_name()
                ));
            }
        }
        if outbox_len() > 0 {
            why.push(format!("{} events kept in its outbox", outbox_len()));
        }
        if !self.shared.queue.is_empty() {
            why.push(format!("{} items queued", self.shared.queue.len()));
        }
        let unpopped = self.shared.gate.unpopped(self.popped);
        if unpopped > 0 {
            why.push(format!(
                "{unpopped} entries in its gate not yet popped (events kept in another \
                 processor's outbox, or a producer between its entry and its push)"
            ));
        }
        if why.is_empty() {
            why.push("nothing visible".into());
        }
        format!("{}: {}", self.shared.id, why.join("; "))
    }

    /// Hands on what the outbox holds, as far as the targets have room (the
    /// [outbox protocol](crate::outbox)).
    pub(super) fn retry_outbox(&mut self) {
        if outbox_len() == 0 {
            return;
        }
        let dispatcher = &self.ctx.dispatcher;
        let sent = self
            .shared
            .retry_outbox(|id| dispatcher.processor(id).map(|p| &**p));
        if sent > 0 {
            self.retry_park = RETRY_PARK_MIN;
        }
    }

    /// Pops and handles events until the queue is empty, or `budget` were popped. After
    /// each run of events it [lingers](LINGER), each time twice as long up to
    /// [`LINGER_GROWTH`] times, and looks once more: it stops at the first look that finds
    /// the queue empty.
    pub(super) fn drain(&mut self, budget: u64) {
        let max_batch = self.shared.config.max_batch as u64;
        let mut popped = 0_u64;
        // Each linger of a drain twice the one before, up to `LINGER_GROWTH` times the
        // first: a producer that keeps refilling the queue gets ahead instead of running
        // neck and neck with this thread.
        let mut spins = self.linger_spins;
        loop {
            let start = popped;
            while popped < budget
                && let Some(item) = self.shared.queue.pop()
            {
                self.popped = self.popped.wrapping_add(1);
                popped += 1;
                self.handle(item, max_batch);
                if popped % DEPTH_CHECK_INTERVAL == 1 {
                    self.check_depth();
                    // Producers blocked on the full queue resume as soon as there is room
                    // for a burst, while the rest of the queue keeps this thread busy.
                    self.shared.wake_waiters(self.popped, &mut self.waking);
                }
            }
            // The end of a run: room for the futures waiting, if they are (`waiters.rs`).
            self.shared.wake_waiters(self.popped, &mut self.waking);
            if popped == start || popped >= budget {
                break;
            }
            linger(spins);
            spins = spins
                .saturating_mul(2)
                .min(self.linger_spins.saturating_mul(LINGER_GROWTH));
        }
        if self.high_alarm {
            // Drained: the alarm can clear.
            self.check_depth();
        }
    }

    /// A flush point within a drain, once `max_batch` events were handled since the last
    /// one: flush, run the timers due (a queue that never drains still runs them), retry
    /// the outbox and wake the producers waiting for room.
    pub(super) fn flush_point(&mut self) {
        self.flush_all();
        self.fire_due_timers();
        self.retry_outbox();
        self.shared.wake_waiters(self.popped, &mut self.waking);
    }

    /// Samples the queue depth: max depth and the watermark alarm (edge-triggered, cleared
    /// at the low mark).
    pub(super) fn check_depth(&mut self) {
        let depth = self.shared.queue.len();
        let config = &self.shared.config;
        self.shared.stats.counters.max_depth.max(depth as u64);
        if !self.high_alarm && depth >= config.high_watermark {
            self.high_alarm = true;
            self.shared.stats.counters.high_watermark_alarms.add(1);
            tracing::warn!(
                processor = %self.shared.id, depth, high_watermark = config.high_watermark,
                capacity = config.capacity, "queue above its high watermark"
            );
        } else if self.high_alarm && depth <= config.low_watermark {
            self.high_alarm = false;
            tracing::info!(
                processor = %self.shared.id, depth, low_watermark = config.low_watermark,
                "queue back at its low watermark; alarm cleared"
            );
        }
    }

    /// Merges the private histograms into the shared ones: at exit (waiting for a reader
    /// that holds them), otherwise only when the monitor or a reader asked and no reader
    /// holds them. A merge walks every bucket (thousands), far too much for every flush
    /// point; on request it happens about once per `monitor_interval`.
    pub(super) fn publish_histograms(&mut self, at_exit: bool) {
        let requested = &self.shared.stats.publish_requested;
        if !at_exit && !requested.load(Ordering::Relaxed) {
            return;
        }
        let shared = &self.shared.stats.histograms;
        let guard = if at_exit {
            Some(shared.lock().unwrap_or_else(|p| p.into_inner()))
        } else {
            shared.try_lock().ok()
        };
        if let Some(mut shared) = guard {
            requested.store(false, Ordering::Relaxed);
            self.histograms.drain_into(&mut shared);
        }
    }
}

impl<M: Send + 'static> Parked for Runner<M> {
    fn drive(&mut self) -> bool {
        let _playing = self.play();
        let budget = self.shared.config.max_batch as u64;
        let start = self.popped;
        // No lingers: the driver is the producer a linger would wait for (its dispatch
        // brought it here), and nothing it pushes can come while it spins; each linger
        // only held back the flush, and with it the driver's own thread (an I/O thread).
        let linger_spins = std::mem::replace(&mut self.linger_spins, 0);
        // Turns while events are queued: a turn's flushes may dispatch to this processor.
        loop {
            let spent = self.popped.wrapping_sub(start) as u64;
            if spent >= budget {
                break;
            }
            self.turn(budget - spent);
            if self.shared.queue.is_empty() {
                break;
            }
        }
        self.linger_spins = linger_spins;
        let timer_first = self
            .next_deadline()
            .is_some_and(|next| self.parked_until.is_none_or(|until| next < until));
        outbox_len() > 0
            || !self.flush_list.is_empty()
            || self.shared.has_work(self.popped)
            || timer_first
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
