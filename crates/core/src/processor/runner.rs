//! The processor thread's own state and its loop (the module docs of `processor`): drain,
//! flush, retry the outbox, wait for work.

use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use super::contain::contain;
use super::current::Playing;
use super::current::{outbox_len, set_current};
use super::delivery::Entry;
use super::shared::ProcessorShared;
use crate::client::{ClientFlags, ClientHandle, ClientKey, Context};
use crate::config::WaitStrategy;
use crate::handle::DispatcherHandle;
use crate::stats::{Histograms, Pinning};
use crate::sync::{self, Ordering, thread};
use crate::timers::TimerQueue;

/// Check the queue depth (watermarks, max depth) and look at the waiters (producers and
/// futures blocked on a full queue, woken at room for a burst) every this many events
/// within a drain, starting after its first event (which may have been a long one, during
/// which the queue filled): often enough to see a queue filling up under sustained load
/// and to wake a blocked producer while a 256-event queue or larger still holds three
/// quarters of its work, rarely enough that the loads of head and tail (cache lines the
/// producers write) cost nothing measurable. (A countdown of its own for the waiters,
/// an eighth of the capacity, cost the drain 8 ns an event on the hop bench, 51.6 against
/// 42.8 ns: folded into this check it costs nothing measurable.) Below 256 events a
/// waiter is woken at a flush point or when the run ends.
const DEPTH_CHECK_INTERVAL: u64 = 64;

/// How long a processor that has just emptied its queue after a run of events waits
/// before it looks again, reading nothing a producer writes meanwhile.
///
/// A processor faster than its producers empties its queue every few events; each look
/// at an empty queue reads the queue's tail, the line every producer's push writes with a
/// compare-and-swap, and each such read makes the next push wait for that line to come
/// back from the processor's core. Waiting a moment first lets a producer in mid-stream
/// push a run of events undisturbed, which the processor then pops in one go: fewer looks
/// per event, longer flush batches. Measured on the hop bench (one producer, a typed
/// confirm): 37 ns per event without, 25 ns with a 0.7 us linger, 23.5 ns with 1.4 us, no
/// gain beyond. The price is the linger itself, paid once per drained run before the
/// flush that ends it: a microsecond against the tens of microseconds of a confirm's
/// round trip at low rates.
const LINGER: Duration = Duration::from_micros(1);

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

/// The shortest and longest timed park of a processor that has events in its outbox or
/// clients asking to be flushed again: it retries that often with nothing else to do,
/// doubling the wait after each fruitless turn. The minimum keeps a retry within a few
/// wake-ups of the target draining; the maximum bounds how long a kept event can sit
/// after room appeared while its sender is idle. Retune with the tests that bounce events
/// between processors on queues of 8 (`tests/soak.rs`, `tests/audit.rs`) under load.
const RETRY_PARK_MIN: Duration = Duration::from_micros(20);
const RETRY_PARK_MAX: Duration = Duration::from_millis(1);

/// How long a `SpinThenPark` processor polls for work at most before it parks, whatever its
/// `spins`: 50 us. The polls after the first few are `yield_now`s, which on this project's
/// 2-core VM cost about 1.3 us each, so the default 1,024 polls took about 1.3 ms of CPU
/// every time a processor ran dry (measured: `zd-server` used 1.3-1.5 CPU-seconds per 10 s
/// at 50 msg/s, all of it in these spins). 50 us still covers the hops within one
/// message's path (a PUT, its ACK, a push and its confirm follow each other within a few
/// microseconds while the next processor spins), which is what the spin is for; an event
/// that comes later than that pays a wake-up. Retune with `perftest --rate 50 --duration
/// 10s --json` (its `cpu.broker_threads_s` against `confirm_latency_us.p50`), and with
/// `benches/dispatch.rs`' `wake_latency`.
const SPIN_WINDOW: Duration = Duration::from_micros(50);

/// Frees the slot of a cancelled timer and drops its callback (user code: contained).
fn drop_cancelled<M>(
    shared: &ProcessorShared<M>,
    slot: u32,
    callback: zerodispatch_callback::Callback,
) {
    shared.timers.release(slot);
    contain(
        &shared.stats,
        shared.id,
        "drop of a cancelled timer",
        || drop(callback),
    );
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

        self.run_loop();
        self.exit();
    }

    /// The loop of the module docs, until its life has ended (`end_of_life`).
    pub(super) fn run_loop(&mut self) {
        let _watch = DeathWatch {
            shared: self.shared.clone(),
            dispatcher: self.ctx.dispatcher.clone(),
        };
        loop {
            self.turn(u64::MAX);
            if self.end_of_life() {
                return;
            }
            self.wait_for_work();
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

    /// The end of the processor's life, checked after each turn: once it may exit
    /// (stopped, settled, nothing kept or to flush again), it drops its timers and its
    /// clients, on this thread, once; those drops may dispatch, and what they keep in the
    /// outbox is handed on by the turns that follow, as any kept event is (its target, in a
    /// pool that shuts down later, is still draining). Returns `true` once it has dropped
    /// everything and may exit again: the loop ends.
    pub(crate) fn end_of_life(&mut self) -> bool {
        if !self.may_exit() {
            return false;
        }
        if self.released {
            return true;
        }
        self.release();
        self.may_exit()
    }

    /// Drops the timers not yet due, the clients, and the clients handed in that never got
    /// an event: each drop is user code, contained.
    fn release(&mut self) {
        let id = self.shared.id;
        self.released = true;
        // Timers not yet due are dropped unrun, on this thread, their slots freed; so are
        // any still among the arrivals (none once the gate is settled and a turn took them).
        let mut dropped = 0_u64;
        while let Some((slot, callback)) = self.shared.timers.arrivals.pop() {
            dropped += 1;
            contain(&self.shared.stats, id, "drop of a timer", || drop(callback));
            self.shared.timers.release(slot);
        }
        for (slot, callback) in self.timers.take_all() {
            dropped += 1;
            contain(&self.shared.stats, id, "drop of a timer", || drop(callback));
            self.shared.timers.release(slot);
        }
        if dropped > 0 {
            tracing::debug!(processor = %id, timers = dropped, "timers not due at shutdown dropped");
        }
        let mut clients = 0;
        for entry in self.clients.drain(..).flatten() {
            clients += 1;
            // The client's own drop runs here, on its thread, contained like every call
            // into user code.
            contain(&self.shared.stats, id, "drop of a client", || drop(entry));
        }
        self.flush_list.clear();
        // Clients handed in that never got an event: the gate is settled, so no
        // registration is between its hand-in and its exit from the gate (`slots.rs`).
        // Taken out under the lock, dropped outside it.
        let arrivals: Vec<_> = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_arrivals()
            .collect();
        for client in arrivals {
            clients += 1;
            contain(&self.shared.stats, id, "drop of a client", || drop(client));
        }
        tracing::debug!(processor = %id, clients, "processor's clients dropped");
    }

    /// Its last act, once the loop has ended: publishes its histograms and marks itself
    /// exited.
    pub(crate) fn exit(mut self) {
        self.publish_histograms(true);
        tracing::debug!(processor = %self.shared.id, "processor stopped");
        // Release: whoever sees the flag sees the clients dropped.
        self.shared.exited.store(true, Ordering::Release);
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

    /// Runs every timer whose deadline has come, in deadline order, as dispatcher callbacks:
    /// the flush list is flushed first (the flush contract, point 2). A cancelled one is
    /// dropped unrun. Its slot is freed before the callback runs.
    pub(super) fn fire_due_timers(&mut self) {
        self.take_timers();
        let Some(next) = self.timers.next_deadline() else {
            return;
        };
        let clock = &self.ctx.dispatcher.shared.clock;
        let now = clock.now_ns();
        if next > now {
            return;
        }
        self.flush_all();
        while let Some((slot, callback)) = self.timers.pop_due(now) {
            let shared = &*self.shared;
            let run = shared.timers.fire(slot);
            // Freed before the callback: a timer that schedules its next turn (a ticker)
            // finds the slot it leaves.
            shared.timers.release(slot);
            if run {
                // Counted as run, as a dispatcher callback is: a cancelled timer is not.
                shared.stats.counters.timers_fired.add(1);
                if !callback.is_inline() {
                    shared.stats.counters.spilled.add(1);
                }
                contain(&shared.stats, shared.id, "timer callback", || {
                    callback.call()
                });
                shared.stats.counters.processed.add_release(1);
            } else {
                contain(
                    &shared.stats,
                    shared.id,
                    "drop of a cancelled timer",
                    || drop(callback),
                );
            }
        }
    }

    /// Takes in the timers scheduled since the last look and reclaims those cancelled
    /// (steps 1 and 2 of `timers.rs`, the processor's side). Each arrival counts as a pop:
    /// its scheduler's gate entry made it an event of the wake and shutdown protocols. Not
    /// yet in the statistics: a timer counts in `processed` (and `spilled`) when it runs.
    fn take_timers(&mut self) {
        let shared = &*self.shared;
        while let Some((slot, callback)) = shared.timers.arrivals.pop() {
            self.popped = self.popped.wrapping_add(1);
            let (generation, cancelled) = shared.timers.current(slot);
            if cancelled {
                drop_cancelled(shared, slot, callback);
            } else {
                let deadline = shared.timers.deadline(slot);
                self.timers.arrive(slot, generation, deadline, callback);
            }
        }
        while let Some((slot, generation)) = shared.timers.next_cancelled() {
            // Pushed under the gate, as an arrival: it counts as a pop.
            self.popped = self.popped.wrapping_add(1);
            if let Some(callback) = self.timers.take(slot, generation) {
                drop_cancelled(shared, slot, callback);
            }
        }
    }

    /// The deadline of the next timer taken in, if one waits (early, at worst, for a timer
    /// reclaimed since).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.timers.peek_deadline()
    }

    /// How long until the next timer is due, if one waits (early, at worst, for a timer
    /// reclaimed since: the turn it wakes for skips it).
    fn until_next_timer(&self) -> Option<Duration> {
        let next = self.timers.peek_deadline()?;
        Some(self.ctx.dispatcher.shared.clock.until(next))
    }

    /// Whether a timer is due now (one clock read, only while timers wait).
    fn timer_due(&self) -> bool {
        self.timers
            .peek_deadline()
            .is_some_and(|next| next <= self.ctx.dispatcher.shared.clock.now_ns())
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
    /// each run of events it [lingers](LINGER) and looks once more: it stops at the first
    /// look that finds the queue empty.
    pub(super) fn drain(&mut self, budget: u64) {
        let max_batch = self.shared.config.max_batch as u64;
        let mut popped = 0_u64;
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
            linger(self.linger_spins);
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

    pub(super) fn wait_for_work(&mut self) {
        // Stopping but not settled (an accepted event still on its way in): wait briefly,
        // like a retry, rather than spin on the stop.
        if outbox_len() > 0 || !self.flush_list.is_empty() || self.shared.stop_requested() {
            self.wait_to_retry();
            return;
        }
        self.retry_park = RETRY_PARK_MIN;
        if self.spin_for_work() {
            return;
        }
        // Going to sleep: a requested histogram merge costs the event path nothing now.
        self.publish_histograms(false);
        // With timers waiting, no longer than until the next is due.
        let until_timer = self.until_next_timer();
        let park = || match until_timer {
            Some(timeout) => sync::park_timeout(timeout),
            None => thread::park(),
        };
        if self.shared.sleep(self.popped, park, true) {
            self.shared.stats.counters.parks.add(1);
        }
    }

    /// Waits a short, growing while (or until an event comes) before retrying the outbox
    /// and the clients that asked to be flushed again.
    pub(super) fn wait_to_retry(&mut self) {
        let park = self.retry_park;
        let park = self
            .until_next_timer()
            .map_or(park, |until| park.min(until));
        // Not woken by a stop: at a stop the retries still have to be made.
        if self
            .shared
            .sleep(self.popped, || sync::park_timeout(park), false)
        {
            self.shared.stats.counters.parks.add(1);
        }
        self.retry_park = (park * 2).min(RETRY_PARK_MAX);
    }

    /// Polls for work by the wait strategy; `true` if work (or a stop) came, `false` if
    /// it is time to park.
    pub(super) fn spin_for_work(&self) -> bool {
        let shared = &*self.shared;
        let popped = self.popped;
        let has_work = || shared.has_work(popped) || self.timer_due();
        let backoff = Backoff::new();
        let spins = match shared.config.wait {
            WaitStrategy::BusySpin => {
                while !has_work() {
                    backoff.spin();
                }
                return true;
            }
            WaitStrategy::SpinThenPark { spins } => spins,
            WaitStrategy::Park => 0,
        };
        // The clock is read once the backoff's short spins are done, before each yield: a
        // vDSO read (tens of ns) beside a syscall. Not under loom, whose models must not
        // depend on time.
        let mut started: Option<Instant> = None;
        for _ in 0..spins {
            if has_work() {
                return true;
            }
            if backoff.is_completed() {
                if !cfg!(loom) {
                    let now = Instant::now();
                    if now.duration_since(*started.get_or_insert(now)) >= SPIN_WINDOW {
                        return false;
                    }
                }
                thread::yield_now();
            } else {
                backoff.snooze();
            }
        }
        false
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
