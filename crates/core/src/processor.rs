//! A processor: one OS thread draining one bounded queue of events for the clients it
//! owns.
//!
//! # The loop
//!
//! 1. Pop events until the queue is empty, handling each (see below). Every `max_batch`
//!    events, flush the flush list (the flush contract on [`Client`]).
//! 2. The queue is drained: flush the flush list.
//! 3. If shutdown asked this processor to stop (only after its [gate](crate::gate) is
//!    closed and empty, so nothing more can arrive) and the queue is still empty, drop the
//!    clients and exit.
//! 4. Wait for work by the pool's [`WaitStrategy`], then go to 1. Parking follows the wake
//!    protocol of [`wake`](crate::wake).
//!
//! Handling an event: a callback or message for a client looks the client up by its key
//! (a stale key is counted and the event dropped), hands it the event, and puts it on the
//! flush list once; a dispatcher callback flushes the list, then runs. Every call into
//! user code is wrapped in `catch_unwind`: a panic is counted and logged, and the loop
//! goes on.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, Thread};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::{Backoff, CachePadded};
use zerodispatch_callback::Callback;

use crate::client::{Client, ClientEvent, ClientHandle, ClientKey, Context, ProcessorId};
use crate::config::{PoolConfig, WaitStrategy};
use crate::dispatcher::DispatcherHandle;
use crate::event::{DispatchError, Item};
use crate::gate::Gate;
use crate::stats::{Histograms, Pinning, ProcessorStats};

/// Check the queue depth (watermarks, max depth) every this many events within a drain,
/// starting after its first event (which may have been a long one, during which the queue
/// filled): often enough to see a queue filling up under sustained load, rarely enough
/// that the loads of head and tail (cache lines the producers write) cost nothing
/// measurable.
const DEPTH_CHECK_INTERVAL: u64 = 64;

/// A blocking dispatch that finds the queue full waits until this fraction of it (one
/// quarter) is free again before it retries; see `ProcessorShared::wait_for_room`. A
/// larger fraction makes longer bursts and a longer wait for the first producer; retune
/// with `cargo bench --bench dispatch -- dispatch_1p1c`.
const REFILL_ROOM_DIVISOR: usize = 4;

/// The state of a processor that other threads see.
pub(crate) struct ProcessorShared<M> {
    pub(crate) id: ProcessorId,
    pub(crate) config: PoolConfig,
    pub(crate) queue: ArrayQueue<Item<M>>,
    /// Passed by producers on every push; also carries the processor's sleeping flag.
    gate: CachePadded<Gate>,
    /// Set by shutdown once the gate is closed and empty.
    stop: AtomicBool,
    /// The processor's thread, for unparking; set right after it is spawned, before any
    /// handle to the dispatcher exists.
    pub(crate) thread: OnceLock<Thread>,
    pub(crate) stats: ProcessorStats,
    /// Set by the monitor when it enqueues a probe, cleared when the probe is handled: at
    /// most one probe in the queue.
    pub(crate) probe_pending: AtomicBool,
    /// Client table slots, taken at registration and released at unregistration.
    pub(crate) slots: Mutex<SlotAllocator>,
}

impl<M: Send + 'static> ProcessorShared<M> {
    pub(crate) fn new(id: ProcessorId, config: PoolConfig) -> Self {
        Self {
            id,
            queue: ArrayQueue::new(config.capacity),
            config,
            gate: CachePadded::new(Gate::default()),
            stop: AtomicBool::new(false),
            thread: OnceLock::new(),
            stats: ProcessorStats::new(),
            probe_pending: AtomicBool::new(false),
            slots: Mutex::new(SlotAllocator::default()),
        }
    }

    /// Enqueues items from `items` until it runs out or the queue is full, passing the gate
    /// once for all of them (two read-modify-writes on the gate word per batch, not per
    /// item), and wakes the processor if it is going to sleep. The item that did not fit
    /// (or, after shutdown, the first item) comes back in the error; the rest stay in
    /// `items`. Adds the items pushed to `pushed`.
    ///
    pub(crate) fn try_push_batch(
        &self,
        items: &mut impl Iterator<Item = Item<M>>,
        pushed: &mut usize,
    ) -> Result<(), DispatchError<Item<M>>> {
        if !self.gate.enter() {
            return match items.next() {
                Some(item) => Err(DispatchError::ShutDown(item)),
                None => Ok(()),
            };
        }
        let mut result = Ok(());
        for item in items.by_ref() {
            if let Err(back) = self.queue.push(item) {
                result = Err(DispatchError::Full(back));
                break;
            }
            *pushed += 1;
        }
        // Leaving tells whether the processor announced sleep (the wake protocol).
        if self.gate.leave() {
            self.unpark();
        }
        result
    }

    /// Enqueues the items of `items` in order. With `wait`, a full queue is waited for
    /// (see [`wait_for_room`](Self::wait_for_room)), except on the processor's own thread,
    /// where waiting could never end; without, it ends the call. On an error the item that
    /// failed comes back and the rest stay in `items`.
    pub(crate) fn push_batch(
        &self,
        items: &mut impl Iterator<Item = Item<M>>,
        pushed: &mut usize,
        wait: bool,
    ) -> Result<(), DispatchError<Item<M>>> {
        let backoff = Backoff::new();
        let mut retry: Option<Item<M>> = None;
        loop {
            let mut next = retry.take().into_iter().chain(items.by_ref());
            match self.try_push_batch(&mut next, pushed) {
                // The thread-local read is on the slow path only: a full queue.
                Err(DispatchError::Full(back)) if wait && !self.on_own_thread() => {
                    retry = Some(back);
                    self.wait_for_room(&backoff);
                }
                other => return other,
            }
        }
    }

    /// Enqueues `item` unless the queue is full or shutdown closed the gate: the protocol of
    /// [`try_push_batch`](Self::try_push_batch) for one item, written out because it is the
    /// hottest path (going through the batch's iterator measured 2-3x slower per event).
    #[inline]
    pub(crate) fn try_push(&self, item: Item<M>) -> Result<(), DispatchError<Item<M>>> {
        if !self.gate.enter() {
            return Err(DispatchError::ShutDown(item));
        }
        let pushed = self.queue.push(item);
        // Leaving tells whether the processor announced sleep (the wake protocol).
        if self.gate.leave() {
            self.unpark();
        }
        pushed.map_err(DispatchError::Full)
    }

    /// Enqueues `item`, waiting while the queue is full as [`push_batch`](Self::push_batch)
    /// does.
    #[inline]
    pub(crate) fn push(&self, mut item: Item<M>) -> Result<(), DispatchError<Item<M>>> {
        let backoff = Backoff::new();
        loop {
            match self.try_push(item) {
                // The thread-local read is on the slow path only: a full queue.
                Err(DispatchError::Full(back)) if !self.on_own_thread() => {
                    item = back;
                    self.wait_for_room(&backoff);
                }
                other => return other,
            }
        }
    }

    /// Whether the current thread is this processor's.
    fn on_own_thread(&self) -> bool {
        current_processor().is_some_and(|(_, id)| id == self.id)
    }

    /// Waits, after finding the queue full, until the processor has drained
    /// a quarter of it (or shutdown closed the gate).
    ///
    /// Retrying as soon as one slot frees keeps the producer writing the slot the processor
    /// has just read, so that every event moves its cache line (and the queue's head and
    /// tail lines) between the two cores, and the full queue drains at the speed of that
    /// contention. Waiting for room lets the processor run through a stretch of slots
    /// undisturbed and the producer refill it in a burst.
    fn wait_for_room(&self, backoff: &Backoff) {
        let capacity = self.queue.capacity();
        let target = capacity - (capacity / REFILL_ROOM_DIVISOR).max(1);
        while self.queue.len() > target && !self.gate.is_closed() {
            backoff.snooze();
        }
    }

    fn unpark(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }

    /// Whether the processor has announced that it is going to sleep.
    pub(crate) fn is_sleeping(&self) -> bool {
        self.gate.is_sleeping()
    }

    /// Closes the gate: later pushes are refused.
    pub(crate) fn close(&self) {
        self.gate.close();
    }

    /// Waits until no producer is inside the closed gate, then tells the processor to stop
    /// once its queue is empty.
    pub(crate) fn stop_when_quiescent(&self) {
        debug_assert!(self.gate.is_closed());
        let backoff = Backoff::new();
        while !self.gate.is_quiescent() {
            backoff.snooze();
        }
        // The stop needs no ordering with the sleeping flag: the unconditional unpark below
        // leaves a token if the processor is not parked yet, and it re-checks `stop` after.
        self.stop.store(true, Ordering::SeqCst);
        self.unpark();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.gate.is_closed()
    }
}

thread_local! {
    /// Which processor, of which dispatcher, the current thread is.
    static CURRENT: std::cell::Cell<Option<(u64, ProcessorId)>> = const { std::cell::Cell::new(None) };
}

/// The dispatcher id and processor of the current thread, if it is a processor thread.
pub(crate) fn current_processor() -> Option<(u64, ProcessorId)> {
    CURRENT.with(std::cell::Cell::get)
}

/// Free and used slots of a processor's client table.
#[derive(Debug, Default)]
pub(crate) struct SlotAllocator {
    /// The current generation of each slot ever used.
    generations: Vec<u16>,
    /// Slots free for reuse.
    free: Vec<u16>,
    /// Clients registered now.
    pub(crate) live: usize,
}

impl SlotAllocator {
    /// Takes a slot, or `None` if the table is full (`u16::MAX` slots).
    pub(crate) fn take(&mut self) -> Option<ClientKey> {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                let slot = u16::try_from(self.generations.len()).ok()?;
                self.generations.push(0);
                slot
            }
        };
        self.live += 1;
        Some(ClientKey {
            slot,
            generation: self.generations[usize::from(slot)],
        })
    }

    /// Releases a slot; its next client gets a new generation.
    pub(crate) fn release(&mut self, key: ClientKey) {
        let generation = &mut self.generations[usize::from(key.slot)];
        debug_assert_eq!(*generation, key.generation, "releasing a slot twice");
        *generation = generation.wrapping_add(1);
        self.free.push(key.slot);
        self.live -= 1;
    }
}

/// A registered client in its processor's table.
struct Entry<M> {
    client: Box<dyn Client<M>>,
    generation: u16,
    /// On the flush list now (the dedup flag).
    on_flush_list: bool,
    /// The flush gate: while `false`, events do not put the client on the flush list.
    flush_enabled: bool,
}

/// The processor thread's own state.
pub(crate) struct Runner<M: Send + 'static> {
    dispatcher: DispatcherHandle<M>,
    shared: Arc<ProcessorShared<M>>,
    clients: Vec<Option<Entry<M>>>,
    /// Slots of the clients to flush, in the order they received their first event since
    /// the last flush.
    flush_list: Vec<u16>,
    /// Events since the last flush point.
    since_flush: u64,
    histograms: Histograms,
    high_alarm: bool,
}

impl<M: Send + 'static> Runner<M> {
    pub(crate) fn new(dispatcher: DispatcherHandle<M>, shared: Arc<ProcessorShared<M>>) -> Self {
        Self {
            dispatcher,
            shared,
            clients: Vec::new(),
            flush_list: Vec::new(),
            since_flush: 0,
            histograms: Histograms::new(),
            high_alarm: false,
        }
    }

    /// The thread's body: pins, runs the loop until stopped, drops the clients.
    pub(crate) fn run(mut self, core: Option<usize>) {
        let id = self.shared.id;
        CURRENT.with(|c| c.set(Some((self.dispatcher.id(), id))));
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
        tracing::debug!(processor = %id, ?pinning, "processor started");

        loop {
            self.drain();
            self.flush_all();
            // SeqCst: pairs with `stop_when_quiescent`.
            if self.shared.stop.load(Ordering::SeqCst) && self.shared.queue.is_empty() {
                break;
            }
            self.wait_for_work();
        }
        self.publish_histograms(true);
        let clients = self.clients.iter().filter(|c| c.is_some()).count();
        self.clients.clear();
        tracing::debug!(processor = %id, clients, "processor stopped");
    }

    /// Pops and handles events until the queue is empty.
    fn drain(&mut self) {
        let max_batch = self.shared.config.max_batch as u64;
        let mut popped = 0_u64;
        while let Some(item) = self.shared.queue.pop() {
            self.handle(item);
            popped += 1;
            self.shared.stats.counters.processed.add(1);
            self.since_flush += 1;
            if self.since_flush >= max_batch {
                self.flush_all();
            }
            if popped % DEPTH_CHECK_INTERVAL == 1 {
                self.check_depth();
            }
        }
        if self.high_alarm {
            // Drained: the alarm can clear.
            self.check_depth();
        }
    }

    fn wait_for_work(&mut self) {
        if self.spin_for_work() {
            return;
        }
        // Going to sleep: a requested histogram merge costs the event path nothing now.
        self.publish_histograms(false);
        let shared = &*self.shared;
        let has_work = || !shared.queue.is_empty() || shared.stop.load(Ordering::SeqCst);
        if shared.gate.sleep_unless(has_work, thread::park) {
            shared.stats.counters.parks.add(1);
        }
    }

    /// Polls for work by the wait strategy; `true` if work (or a stop) came, `false` if
    /// it is time to park.
    fn spin_for_work(&self) -> bool {
        let shared = &*self.shared;
        let has_work = || !shared.queue.is_empty() || shared.stop.load(Ordering::SeqCst);
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
        for _ in 0..spins {
            if has_work() {
                return true;
            }
            if backoff.is_completed() {
                thread::yield_now();
            } else {
                backoff.snooze();
            }
        }
        false
    }

    /// Samples the queue depth: max depth and the watermark alarm (edge-triggered, cleared
    /// at the low mark).
    fn check_depth(&mut self) {
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

    #[inline]
    fn handle(&mut self, item: Item<M>) {
        match item {
            Item::Callback { key, callback } => {
                if !callback.is_inline() {
                    self.shared.stats.counters.spilled.add(1);
                }
                self.deliver(key, ClientEvent::Callback(callback));
            }
            Item::Message { key, message } => self.deliver(key, ClientEvent::Message(message)),
            Item::DispatcherCallback(callback) => {
                if !callback.is_inline() {
                    self.shared.stats.counters.spilled.add(1);
                }
                self.flush_all();
                self.run_dispatcher_callback(callback);
            }
            Item::Probe(enqueued) => {
                self.histograms.record_time_in_queue(enqueued.elapsed());
                self.shared.probe_pending.store(false, Ordering::Relaxed);
            }
            Item::Register { key, client } => self.register(key, client),
            Item::Unregister { key } => self.unregister(key),
        }
    }

    fn run_dispatcher_callback(&mut self, callback: Callback) {
        if catch_unwind(AssertUnwindSafe(|| callback.call())).is_err() {
            self.shared.stats.counters.panics.add(1);
            tracing::error!(processor = %self.shared.id, event = "dispatcher callback", "panic caught; the processor goes on");
        }
    }

    #[inline]
    fn deliver(&mut self, key: ClientKey, event: ClientEvent<M>) {
        let slot = usize::from(key.slot);
        let Some(entry) = self
            .clients
            .get_mut(slot)
            .and_then(Option::as_mut)
            .filter(|e| e.generation == key.generation)
        else {
            self.shared.stats.counters.stale.add(1);
            tracing::debug!(processor = %self.shared.id, slot, generation = key.generation, "event for an unregistered client dropped");
            return;
        };
        let kind = match event {
            ClientEvent::Callback(_) => "callback",
            ClientEvent::Message(_) => "message",
        };
        let me = ClientHandle {
            processor: self.shared.id,
            key,
        };
        let mut ctx = Context {
            dispatcher: &self.dispatcher,
            me,
            flush_enabled: &mut entry.flush_enabled,
        };
        let client = &mut entry.client;
        if catch_unwind(AssertUnwindSafe(|| client.on_event(event, &mut ctx))).is_err() {
            self.shared.stats.counters.panics.add(1);
            tracing::error!(client = %me, event = kind, "panic in a client's event handler caught; the processor goes on");
        }
        if entry.flush_enabled && !entry.on_flush_list {
            entry.on_flush_list = true;
            self.flush_list.push(key.slot);
        }
    }

    /// Flushes every client on the flush list, in order, and empties it: a flush point.
    fn flush_all(&mut self) {
        if self.since_flush > 0 {
            self.histograms.record_batch(self.since_flush);
            self.since_flush = 0;
        }
        for i in 0..self.flush_list.len() {
            let slot = self.flush_list[i];
            self.flush_one(slot);
        }
        self.flush_list.clear();
        self.publish_histograms(false);
    }

    fn flush_one(&mut self, slot: u16) {
        let Some(entry) = self
            .clients
            .get_mut(usize::from(slot))
            .and_then(Option::as_mut)
        else {
            return;
        };
        entry.on_flush_list = false;
        let me = ClientHandle {
            processor: self.shared.id,
            key: ClientKey {
                slot,
                generation: entry.generation,
            },
        };
        let mut ctx = Context {
            dispatcher: &self.dispatcher,
            me,
            flush_enabled: &mut entry.flush_enabled,
        };
        let client = &mut entry.client;
        self.shared.stats.counters.flushes.add(1);
        if catch_unwind(AssertUnwindSafe(|| client.flush(&mut ctx))).is_err() {
            self.shared.stats.counters.panics.add(1);
            tracing::error!(client = %me, event = "flush", "panic in a client's flush caught; the processor goes on");
        }
    }

    /// Merges the private histograms into the shared ones: at exit (waiting for a reader
    /// that holds them), otherwise only when the monitor or a reader asked and no reader
    /// holds them. A merge walks every bucket (thousands), far too much for every flush
    /// point; on request it happens about once per `monitor_interval`.
    fn publish_histograms(&mut self, at_exit: bool) {
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

    fn register(&mut self, key: ClientKey, client: Box<dyn Client<M>>) {
        let slot = usize::from(key.slot);
        if self.clients.len() <= slot {
            self.clients.resize_with(slot + 1, || None);
            // Room for every client on the flush list, so that pushing to it never
            // allocates on the event path.
            let room = self.clients.len();
            self.flush_list
                .reserve(room.saturating_sub(self.flush_list.len()));
        }
        debug_assert!(self.clients[slot].is_none(), "slot {slot} registered twice");
        self.clients[slot] = Some(Entry {
            client,
            generation: key.generation,
            on_flush_list: false,
            flush_enabled: true,
        });
    }

    fn unregister(&mut self, key: ClientKey) {
        let slot = usize::from(key.slot);
        let registered = self
            .clients
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|e| e.generation == key.generation);
        if !registered {
            self.shared.stats.counters.stale.add(1);
            return;
        }
        // Flush it before it goes (flush contract, point 4), and take it off the list.
        if self.clients[slot].as_ref().is_some_and(|e| e.on_flush_list) {
            self.flush_one(key.slot);
            self.flush_list.retain(|&s| s != key.slot);
        }
        let entry = self.clients[slot].take();
        // The client's own drop runs here, on its thread.
        if catch_unwind(AssertUnwindSafe(|| drop(entry))).is_err() {
            self.shared.stats.counters.panics.add(1);
        }
        self.shared
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .release(key);
    }
}
