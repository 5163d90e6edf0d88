//! A queue: its message table and the client that owns it on a queue processor.
//!
//! # The path of one message through a queue
//!
//! * PUT: the message is stored in a free slot of a table preallocated at the queue's
//!   capacity (and in a GUID index preallocated likewise), with one pending share per app
//!   (one for a priority queue, one per app for fanout), and its ACK (`Stored`) is
//!   queued for the producer's session, sent on flush. With a replication quorum the ACK
//!   waits instead for `quorum` replicas' receipts (see `replication.rs`). A full table
//!   rejects the PUT with an ACK `RejectedQueueFull`: never a lost or overwritten message.
//!   A named producer's PUT whose publish id the queue has stored already is a duplicate:
//!   ACKed again, never stored or delivered twice (see `dedup.rs`).
//! * On flush, every undelivered share is PUSHed to a consumer of its app that has room in
//!   its window (round-robin among the app's consumers); a share with no consumer waits.
//! * CONFIRM releases a share; when none remain (and the ACK has gone), the message is
//!   released: its slot is free again. The producer hears nothing of it.
//!
//! # How confirms reach the table
//!
//! The table is owned by the queue's client on its processor. A confirm functor built in
//! place by a consumer session (the inline mode, like BlazingMQ's `ConfirmFunctor`) is a
//! callback handed that client when the processor runs it (`Event::to_client`), so it
//! reaches the table directly, exactly as a typed confirm does; the boxed baseline is the
//! same closure in a `Box`.

use std::collections::{HashMap, TryReserveError};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;
use zerodispatch_core::{Client, ClientHandle, Context, DispatchError, DispatcherHandle, Event};

use crate::dedup::{StoredIds, Verdict};
use crate::ids::{AppId, ConsumerId, Guid, Payload, QueueId};
use crate::limits::{MAX_APPS, MAX_QUEUE_CAPACITY};
use crate::message::{AckStatus, BoxedConfirm, BrokerMsg, Confirm, ConfirmMode};
use crate::names::Names;
use crate::release::{OnRelease, Released};
use crate::replication::{Receipt, Replication};
use crate::stats::QueueCounters;
use crate::tables;

/// A set of apps of one message, bit `app`: its pending or undelivered shares.
type AppMask = u64;

// A message's shares fit its mask.
const _: () = assert!(AppMask::BITS == MAX_APPS as u32);

/// How a queue hands out its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueMode {
    /// Each message goes to one consumer (round-robin among those with room).
    Priority,
    /// Each message goes to every app `0..apps` (one consumer of each app).
    Fanout {
        /// Apps (sub-queues), 1 to [`MAX_APPS`].
        apps: u16,
    },
}

impl QueueMode {
    pub(crate) fn apps(self) -> u16 {
        match self {
            QueueMode::Priority => 1,
            QueueMode::Fanout { apps } => apps,
        }
    }
}

/// A hasher for GUIDs: they are unique and well spread already (a producer id and a
/// sequence number), so mixing two words is enough, and far cheaper than SipHash.
#[derive(Default)]
pub(crate) struct GuidHasher(u64);

impl Hasher for GuidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0_u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
}

/// A stored message.
#[derive(Clone, Copy)]
struct Slot {
    guid: Guid,
    payload: Payload,
    /// The producer's session, for the ACK (`None` in a free slot).
    producer: Option<ClientHandle>,
    /// Apps that have not confirmed yet (bit `app`).
    pending: AppMask,
    /// Apps whose share has not been pushed yet.
    undelivered: AppMask,
    /// Replicas whose receipt came (bit `replica`); unused without replication.
    receipts: u32,
    /// PUTs of this message by `producer` after the first, while its ACK waits for the
    /// quorum (a named producer that published it again with its id, its first outcome
    /// reported already): each PUT gets its one ACK, so the quorum's ACK goes `1 + resent`
    /// times. A `u64`, so that no number of resends can wrap it.
    resent: u64,
    /// Whether its ACK is queued or sent (at PUT, or at the quorum): the message is
    /// released only then, once every share is confirmed too.
    acked: bool,
    /// Whether the slot is in `to_push`.
    queued: bool,
    /// Whether the slot holds a message (set at PUT, cleared at release).
    live: bool,
}

/// An attached consumer.
struct Attached {
    id: ConsumerId,
    app: AppId,
    session: ClientHandle,
    /// Shares pushed to it and not confirmed yet.
    in_flight: u32,
}

/// A queue's table and delivery state. Owned by its queue processor's thread.
pub(crate) struct QueueEngine {
    id: QueueId,
    mode: QueueMode,
    /// Unconfirmed shares a consumer may hold: PUSHes beyond it wait for confirms. Bounds
    /// what a queue sends to a session processor, so that its queue does not fill.
    window: u32,
    slots: Vec<Slot>,
    /// The consumer each app's share of each slot was pushed to: `apps` entries per slot,
    /// apart from the slots so that a queue pays for the apps it has, not for
    /// [`MAX_APPS`].
    assigned: Vec<ConsumerId>,
    /// Apps per message: the fanout's apps, or 1.
    apps: usize,
    /// Replication, if any: its ACK waits for `quorum` receipts.
    replication: Option<Replication>,
    free: Vec<u32>,
    index: HashMap<Guid, u32, BuildHasherDefault<GuidHasher>>,
    /// Slots with undelivered shares, oldest first.
    to_push: Vec<u32>,
    /// ACKs to send on flush: the producer's session, the GUID, the outcome. Those a full
    /// outbox refused stay, oldest first, for the next flush. Preallocated at the capacity,
    /// a flush's worth of stores; it grows past that only while the session processors
    /// are so far behind that this processor's outbox stays full, by at most one ACK per
    /// message the producers have in flight.
    acks: Vec<(ClientHandle, Guid, AckStatus)>,
    consumers: Vec<Attached>,
    next_consumer: usize,
    counters: Arc<CachePadded<QueueCounters>>,
    /// The payloads released since the last flush, for the application's release hook.
    released: Option<Released>,
    /// The publish ids stored per named producer, over a window: deduplication.
    stored_ids: StoredIds,
    /// The broker's producer names: which of two sessions of a name is the newer
    /// (`duplicate`).
    names: Arc<Mutex<Names>>,
}

impl QueueEngine {
    /// A queue with every table allocated for `capacity` messages.
    ///
    /// # Errors
    ///
    /// The allocation failed (the caller has checked `capacity` against
    /// [`MAX_QUEUE_CAPACITY`]; what the machine can provide may be less).
    pub(crate) fn new(
        id: QueueId,
        mode: QueueMode,
        (capacity, window): (usize, u32),
        replication: Option<Replication>,
        (on_release, stored_ids, names): (Option<OnRelease>, StoredIds, Arc<Mutex<Names>>),
        counters: Arc<CachePadded<QueueCounters>>,
    ) -> Result<Self, TryReserveError> {
        debug_assert!((1..=MAX_QUEUE_CAPACITY).contains(&capacity));
        let empty = Slot {
            guid: Guid([0; 16]),
            payload: Payload::default(),
            producer: None,
            pending: 0,
            undelivered: 0,
            receipts: 0,
            resent: 0,
            acked: false,
            queued: false,
            live: false,
        };
        let apps = usize::from(mode.apps().max(1));
        let capacity_u32 = u32::try_from(capacity).expect("MAX_QUEUE_CAPACITY fits u32");
        let mut free = tables::vec(capacity)?;
        free.extend((0..capacity_u32).rev());
        Ok(Self {
            id,
            mode,
            window,
            slots: tables::filled(capacity, empty)?,
            assigned: tables::filled(capacity * apps, ConsumerId(u32::MAX))?,
            apps,
            replication,
            free,
            // Twice the capacity: hashbrown then always rehashes its tombstones in place
            // rather than growing (it grows when more than half full and out of room).
            index: tables::map(2 * capacity)?,
            to_push: tables::vec(capacity)?,
            acks: tables::vec(capacity)?,
            consumers: Vec::new(),
            next_consumer: 0,
            released: on_release
                .map(|hook| Released::new(hook, id, capacity, counters.clone()))
                .transpose()?,
            counters,
            stored_ids,
            names,
        })
    }

    fn all_apps(&self) -> AppMask {
        AppMask::MAX >> (AppMask::BITS - u32::from(self.mode.apps()))
    }

    /// Where `assigned` keeps the consumer of `app`'s share of `slot`.
    fn assigned_at(&self, slot: u32, app: u16) -> usize {
        slot as usize * self.apps + usize::from(app)
    }

    /// Stores a message, or queues its rejection, or (a named producer's message stored
    /// already) its ACK again.
    pub(crate) fn put(&mut self, producer: ClientHandle, guid: Guid, payload: Payload) {
        match self.stored_ids.check(guid) {
            Verdict::Duplicate => return self.duplicate(producer, guid, payload),
            Verdict::OutOfWindow => return self.out_of_window(producer, guid),
            Verdict::New | Verdict::Anonymous => {}
        }
        let Some(slot) = self.free.pop() else {
            self.counters.rejected_full.add(1);
            self.acks
                .push((producer, guid, AckStatus::RejectedQueueFull));
            return;
        };
        let all = self.all_apps();
        // Stored: the ACK goes now, unless it waits for the replicas' receipts.
        let acked = self.replication.is_none();
        self.slots[slot as usize] = Slot {
            guid,
            payload,
            producer: Some(producer),
            pending: all,
            undelivered: all,
            receipts: 0,
            resent: 0,
            acked,
            queued: true,
            live: true,
        };
        self.index.insert(guid, slot);
        self.stored_ids.record(guid);
        self.to_push.push(slot);
        self.counters.stored.add(1);
        self.counters.held.up();
        if acked {
            self.ack(producer, guid);
        }
    }

    /// A named producer's message stored already (`dedup.rs`): ACKed again, unless its
    /// ACK is still to come (waiting for the replication quorum), which then goes to the
    /// newer of the two producers' sessions. Its payload is released: the queue holds the
    /// first copy's, and never reads this one.
    fn duplicate(&mut self, producer: ClientHandle, guid: Guid, payload: Payload) {
        self.counters.deduplicated.add(1);
        if let Some(released) = &mut self.released {
            released.push(payload);
        }
        if let Some(&slot) = self.index.get(&guid) {
            let s = self.slots[slot as usize];
            if !s.acked {
                // Every PUT gets its one ACK (a retired session waits for them:
                // `outcome_counts.rs`). The same session again: the quorum's ACK goes once
                // more. Another session of the name: the quorum's ACK goes to the newer,
                // and the older one, closed (a name has one producer at a time), has its
                // PUTs answered now, `Closed`. Which is the newer is not which came last: a
                // closed producer's PUT may come after its successor's, held up behind a
                // busy session processor.
                match s.producer {
                    Some(holder) if holder == producer => {
                        self.slots[slot as usize].resent = s.resent.saturating_add(1);
                    }
                    Some(_) if !self.is_newest(guid, producer) => {
                        // The arriving PUT is the older's (or both are older than the
                        // name's newest producer, both closed): the holder keeps the ACK.
                        self.counters.superseded.add(1);
                        self.acks.push((producer, guid, AckStatus::Closed));
                    }
                    older => {
                        let s = &mut self.slots[slot as usize];
                        let puts = 1 + std::mem::take(&mut s.resent);
                        s.producer = Some(producer);
                        if let Some(older) = older {
                            for _ in 0..puts {
                                self.counters.superseded.add(1);
                                self.acks.push((older, guid, AckStatus::Closed));
                            }
                        }
                    }
                }
                return;
            }
        }
        self.ack(producer, guid);
    }

    /// Whether `session` is the newest producer's of `guid`'s name (`names.rs`). On the
    /// rare path of a duplicate from another session of the name while the quorum is
    /// awaited: the names' lock is held only briefly, by opens and closes.
    fn is_newest(&self, guid: Guid, session: ClientHandle) -> bool {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_newest(guid.producer(), session)
    }

    /// A named producer's message older than the deduplication window (`dedup.rs`): the
    /// queue cannot tell whether it stored it before, so it neither stores it nor says it
    /// did. Like a message rejected full, it never reaches the release hook: its
    /// producer's application owns the payload again at this outcome.
    fn out_of_window(&mut self, producer: ClientHandle, guid: Guid) {
        self.counters.out_of_window.add(1);
        self.acks
            .push((producer, guid, AckStatus::RejectedOutOfWindow));
    }

    /// Queues a stored message's ACK for its producer's session.
    fn ack(&mut self, producer: ClientHandle, guid: Guid) {
        self.acks.push((producer, guid, AckStatus::Stored));
        self.counters.acked.add(1);
    }

    /// Applies a replica's receipt: the one that reaches the quorum queues the ACK (and
    /// releases the message if every share is confirmed already). A receipt for a message
    /// the queue does not hold, or a second one from the same replica, is counted and
    /// ignored.
    pub(crate) fn receipt(&mut self, r: Receipt) {
        let Some(quorum) = self.replication.map(|q| u32::from(q.quorum)) else {
            self.counters.unknown_receipts.add(1);
            tracing::debug!(queue = self.id.0, "receipt without replication configured");
            return;
        };
        let Some(&slot) = self.index.get(&r.guid) else {
            self.counters.unknown_receipts.add(1);
            tracing::debug!(queue = self.id.0, guid = ?r.guid, "receipt for a message the queue does not hold");
            return;
        };
        let bit = 1_u32.checked_shl(u32::from(r.replica.0)).unwrap_or(0);
        let s = &mut self.slots[slot as usize];
        if bit == 0 || s.receipts & bit != 0 {
            self.counters.duplicate_receipts.add(1);
            tracing::debug!(queue = self.id.0, guid = ?r.guid, replica = r.replica.0, "duplicate receipt");
            return;
        }
        s.receipts |= bit;
        self.counters.receipts.add(1);
        if s.acked || s.receipts.count_ones() < quorum {
            return;
        }
        s.acked = true;
        let (producer, guid, release) = (s.producer, s.guid, s.pending == 0);
        let puts = 1 + std::mem::take(&mut s.resent);
        if let Some(producer) = producer {
            for _ in 0..puts {
                self.ack(producer, guid);
            }
        }
        if release {
            self.release(slot);
        }
    }

    /// Applies a confirm.
    pub(crate) fn confirm(&mut self, c: Confirm) {
        let Some(&slot) = self.index.get(&c.guid) else {
            self.counters.unknown_guid.add(1);
            tracing::debug!(queue = self.id.0, guid = ?c.guid, "confirm for a message the queue does not hold");
            return;
        };
        let bit = AppMask::from(1_u8)
            .checked_shl(u32::from(c.app.0))
            .unwrap_or(0);
        let at = self.assigned_at(slot, c.app.0);
        let s = &mut self.slots[slot as usize];
        if bit == 0 || s.pending & bit == 0 {
            self.counters.duplicate_confirms.add(1);
            tracing::debug!(queue = self.id.0, guid = ?c.guid, app = c.app.0, "duplicate confirm");
            return;
        }
        if s.undelivered & bit != 0 || self.assigned[at] != c.consumer {
            self.counters.gone_consumer.add(1);
            tracing::debug!(queue = self.id.0, guid = ?c.guid, consumer = c.consumer.0, "confirm from a consumer the share is not pushed to");
            return;
        }
        s.pending &= !bit;
        let release = s.pending == 0;
        if let Some(consumer) = self.consumers.iter_mut().find(|a| a.id == c.consumer) {
            consumer.in_flight = consumer.in_flight.saturating_sub(1);
        }
        self.counters.confirms.add(1);
        if release {
            self.release(slot);
        }
    }

    /// Frees the slot of a message whose shares are all confirmed (or dropped), if its ACK
    /// has gone; otherwise the quorum's receipt releases it.
    fn release(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if !s.acked {
            return;
        }
        s.live = false;
        let (guid, payload) = (s.guid, s.payload);
        if let Some(released) = &mut self.released {
            released.push(payload);
        }
        self.index.remove(&guid);
        self.free.push(slot);
        self.counters.held.down();
        self.counters.released.add(1);
    }

    pub(crate) fn attach(&mut self, id: ConsumerId, app: AppId, session: ClientHandle) {
        if app.0 >= self.mode.apps() {
            tracing::warn!(
                queue = self.id.0,
                app = app.0,
                "attach for an app the queue does not have: ignored"
            );
            return;
        }
        self.consumers.push(Attached {
            id,
            app,
            session,
            in_flight: 0,
        });
    }

    /// Detaches a consumer: in priority mode its unconfirmed shares become deliverable
    /// again; in fanout mode they are dropped (and a message whose last share that was is
    /// released, as by a confirm).
    pub(crate) fn detach(&mut self, id: ConsumerId) {
        let Some(at) = self.consumers.iter().position(|a| a.id == id) else {
            return;
        };
        let gone = self.consumers.remove(at);
        let bit: AppMask = 1 << gone.app.0;
        for slot in 0..self.slots.len() as u32 {
            let at = self.assigned_at(slot, gone.app.0);
            let s = &mut self.slots[slot as usize];
            let holds = s.pending & bit != 0 && s.undelivered & bit == 0 && self.assigned[at] == id;
            if !holds || !s.live {
                continue;
            }
            match self.mode {
                QueueMode::Priority => {
                    s.undelivered |= bit;
                    let requeue = !s.queued;
                    s.queued = true;
                    self.counters.redelivered.add(1);
                    if requeue {
                        self.to_push.push(slot);
                    }
                }
                QueueMode::Fanout { .. } => {
                    s.pending &= !bit;
                    let last = s.pending == 0;
                    self.counters.dropped_shares.add(1);
                    if last {
                        self.release(slot);
                    }
                }
            }
        }
    }

    /// Pushes what can be pushed and sends the ACKs. Returns `true` if a full outbox
    /// (`DispatchError::Full`) refused something: the shares not pushed stay undelivered
    /// and the ACKs not sent stay in `acks`, and the caller asks for another flush.
    pub(crate) fn flush(&mut self, dispatcher: &DispatcherHandle<BrokerMsg>) -> bool {
        // Walk the backlog oldest first, but only while some app has a consumer with room:
        // a backlog waiting for confirms (or for a consumer) costs nothing per flush.
        let mut ready = self.apps_with_room();
        let (mut keep, mut i) = (0, 0);
        let mut blocked = false;
        while i < self.to_push.len() && ready != 0 && !blocked {
            let slot = self.to_push[i];
            i += 1;
            let s = &self.slots[slot as usize];
            let done = if !s.live {
                true // released meanwhile
            } else if s.undelivered & ready == 0 {
                false
            } else {
                let (done, full) = self.push_shares(slot, dispatcher);
                blocked = full;
                ready = self.apps_with_room();
                done
            };
            if done {
                self.slots[slot as usize].queued = false;
            } else {
                self.to_push[keep] = slot;
                keep += 1;
            }
        }
        // Slide the part not walked down behind what was kept.
        let rest = self.to_push.len() - i;
        self.to_push.copy_within(i.., keep);
        self.to_push.truncate(keep + rest);
        // Once one dispatch found the outbox full, every one would until the processor has
        // handed some on: the ACKs wait for the next flush.
        let mut sent = 0;
        while sent < self.acks.len() && !blocked {
            let (producer, guid, status) = self.acks[sent];
            match dispatcher.dispatch(producer, Event::Message(BrokerMsg::Ack { guid, status })) {
                Err(DispatchError::Full(_)) => blocked = true,
                Err(_) => {
                    tracing::debug!(guid = ?guid, "ACK refused: the producer's session is gone or shutting down");
                    sent += 1;
                }
                Ok(()) => sent += 1,
            }
        }
        // Slides what is left down: no allocation.
        self.acks.drain(..sent);
        if let Some(released) = &mut self.released {
            released.report();
        }
        blocked
    }

    /// Pushes the undelivered shares of `slot` that a consumer has room for; returns
    /// whether none is left undelivered, and whether a full outbox refused a PUSH (the
    /// share stays undelivered; the caller stops pushing).
    fn push_shares(&mut self, slot: u32, dispatcher: &DispatcherHandle<BrokerMsg>) -> (bool, bool) {
        let s = self.slots[slot as usize];
        let mut undelivered = s.undelivered;
        while undelivered != 0 {
            let app = undelivered.trailing_zeros() as u16;
            undelivered &= undelivered - 1;
            let Some(c) = self.pick_consumer(AppId(app)) else {
                continue;
            };
            let consumer = &mut self.consumers[c];
            let push = BrokerMsg::Push {
                consumer: consumer.id,
                queue: self.id,
                guid: s.guid,
                payload: s.payload,
            };
            match dispatcher.dispatch(consumer.session, Event::Message(push)) {
                Ok(()) => {
                    consumer.in_flight += 1;
                    let consumer = consumer.id;
                    let at = self.assigned_at(slot, app);
                    self.assigned[at] = consumer;
                    self.slots[slot as usize].undelivered &= !(1 << app);
                    self.counters.pushed.add(1);
                }
                Err(DispatchError::Full(_)) => return (false, true),
                Err(_) => tracing::debug!(
                    queue = self.id.0,
                    "PUSH refused: the session is shutting down"
                ),
            }
        }
        (self.slots[slot as usize].undelivered == 0, false)
    }

    /// The apps (bit `app`) that have a consumer with room in its window.
    fn apps_with_room(&self) -> AppMask {
        self.consumers
            .iter()
            .filter(|c| c.in_flight < self.window)
            .fold(0, |apps, c| apps | 1 << c.app.0)
    }

    /// A consumer of `app` with room in its window, round-robin.
    fn pick_consumer(&mut self, app: AppId) -> Option<usize> {
        let n = self.consumers.len();
        for k in 0..n {
            let i = (self.next_consumer + k) % n;
            let c = &self.consumers[i];
            if c.app == app && c.in_flight < self.window {
                self.next_consumer = (i + 1) % n;
                return Some(i);
            }
        }
        None
    }
}

/// Sends a confirm to `queue` (the queue's client) the way `mode` says.
pub(crate) fn send_confirm(
    dispatcher: &DispatcherHandle<BrokerMsg>,
    queue: ClientHandle,
    c: Confirm,
    mode: ConfirmMode,
) -> Result<(), DispatchError<Event<BrokerMsg>>> {
    let event = match mode {
        // 28 bytes of captures: inline in the default 32-byte space, handed the queue's
        // client when its processor runs it.
        ConfirmMode::Inline => {
            // The queues' table holds erased handles: the client type is checked on the
            // processor (it is always a queue's).
            Event::from(Event::to_client(move |queue: &mut QueueClient, _ctx| {
                queue.engine.confirm(c)
            }))
        }
        ConfirmMode::Typed => Event::Message(BrokerMsg::Confirm(c)),
        ConfirmMode::Boxed => Event::Message(BrokerMsg::BoxedConfirm(BoxedConfirm(Box::new(
            move |engine: &mut QueueEngine| engine.confirm(c),
        )))),
    };
    dispatcher.dispatch(queue, event)
}

/// Sends a replica's receipt to `queue` (the queue's client): an inline functor handed
/// the queue's table, as an inline confirm is.
pub(crate) fn send_receipt(
    dispatcher: &DispatcherHandle<BrokerMsg>,
    queue: ClientHandle,
    r: Receipt,
) -> Result<(), DispatchError<Event<BrokerMsg>>> {
    // 24 bytes of captures: inline.
    let event = Event::from(Event::to_client(move |queue: &mut QueueClient, _ctx| {
        queue.engine.receipt(r)
    }));
    dispatcher.dispatch(queue, event)
}

/// The client that owns a queue on its processor: its table, and the events that reach it.
pub(crate) struct QueueClient {
    engine: QueueEngine,
}

impl QueueClient {
    pub(crate) fn new(engine: QueueEngine) -> Self {
        Self { engine }
    }
}

impl Client<BrokerMsg> for QueueClient {
    fn on_message(&mut self, message: BrokerMsg, _ctx: &mut Context<BrokerMsg>) {
        let engine = &mut self.engine;
        match message {
            BrokerMsg::Confirm(c) => engine.confirm(c),
            BrokerMsg::BoxedConfirm(BoxedConfirm(confirm)) => confirm(engine),
            BrokerMsg::Put {
                producer,
                guid,
                payload,
            } => engine.put(producer, guid, payload),
            BrokerMsg::Attach {
                consumer,
                app,
                session,
            } => engine.attach(consumer, app, session),
            BrokerMsg::Detach { consumer } => engine.detach(consumer),
            other => {
                tracing::warn!(
                    queue = engine.id.0,
                    ?other,
                    "unexpected message for a queue"
                )
            }
        }
    }

    fn flush(&mut self, ctx: &mut Context<BrokerMsg>) {
        if self.engine.flush(ctx.dispatcher()) {
            ctx.flush_again();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use zerodispatch_core::testing::TestDispatcher;
    use zerodispatch_core::{ClientType, Dispatcher, Placement, PoolConfig};

    use crate::ids::ProducerId;

    type Seen = Arc<Mutex<Vec<BrokerMsg>>>;

    /// A session that keeps what the queue sends it (ACKs, pushes).
    struct Session(Seen);
    impl Client<BrokerMsg> for Session {
        fn on_message(&mut self, message: BrokerMsg, _ctx: &mut Context<BrokerMsg>) {
            self.0.lock().unwrap().push(message);
        }
    }

    /// The queue's client alone on the stepped dispatcher, with a session to ACK to.
    fn stepped_queue(
        capacity: usize,
    ) -> (TestDispatcher<BrokerMsg>, ClientHandle, ClientHandle, Seen) {
        let test = Dispatcher::<BrokerMsg>::builder()
            .pool(ClientType::Session, PoolConfig::new(1))
            .pool(ClientType::Queue, PoolConfig::new(1))
            .build_stepped()
            .unwrap();
        let engine = QueueEngine::new(
            QueueId(0),
            QueueMode::Priority,
            (capacity, 16),
            None,
            (
                None,
                StoredIds::new(0, crate::limits::MIN_DEDUP_WINDOW).unwrap(),
                Arc::new(Mutex::new(Names::new(0).unwrap())),
            ),
            Arc::default(),
        )
        .unwrap();
        let queue = test
            .register(
                ClientType::Queue,
                QueueClient::new(engine),
                Placement::LeastLoaded,
            )
            .unwrap()
            .erase();
        let seen = Seen::default();
        let session = test
            .register(
                ClientType::Session,
                Session(seen.clone()),
                Placement::LeastLoaded,
            )
            .unwrap()
            .erase();
        (test, queue, session, seen)
    }

    fn put(
        test: &TestDispatcher<BrokerMsg>,
        queue: ClientHandle,
        producer: ClientHandle,
        seq: u64,
    ) -> Guid {
        let guid = Guid::new(ProducerId(7), seq);
        let payload = Payload {
            handle: seq,
            len: 8,
        };
        test.dispatch(
            queue,
            Event::Message(BrokerMsg::Put {
                producer,
                guid,
                payload,
            }),
        )
        .unwrap();
        guid
    }

    fn acks(seen: &Seen) -> Vec<(Guid, AckStatus)> {
        let mut seen = seen.lock().unwrap();
        let acks = seen
            .iter()
            .filter_map(|m| match m {
                BrokerMsg::Ack { guid, status } => Some((*guid, *status)),
                _ => None,
            })
            .collect();
        seen.clear();
        acks
    }

    #[test]
    fn on_the_stepped_dispatcher_a_queue_acks_at_its_flush_refuses_when_full_and_frees_at_confirm()
    {
        let (test, queue, session, seen) = stepped_queue(2);
        let first = put(&test, queue, session, 0);
        let second = put(&test, queue, session, 1);
        let third = put(&test, queue, session, 2);
        assert!(acks(&seen).is_empty(), "nothing runs before the test steps");
        test.run_until_idle();
        assert_eq!(
            acks(&seen),
            [
                (first, AckStatus::Stored),
                (second, AckStatus::Stored),
                (third, AckStatus::RejectedQueueFull)
            ],
            "stored means stored: the third found the table full"
        );
        // A consumer attached: the queue pushes both at its flush; a confirm frees a slot.
        let consumer = ConsumerId(1);
        let attach = BrokerMsg::Attach {
            consumer,
            app: AppId(0),
            session,
        };
        test.dispatch(queue, Event::Message(attach)).unwrap();
        test.run_until_idle();
        let pushed = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|m| matches!(m, BrokerMsg::Push { .. }))
            .count();
        assert_eq!(pushed, 2);
        let confirm = Confirm {
            queue: QueueId(0),
            guid: first,
            consumer,
            app: AppId(0),
        };
        test.dispatch(queue, Event::Message(BrokerMsg::Confirm(confirm)))
            .unwrap();
        let fourth = put(&test, queue, session, 3);
        test.run_until_idle();
        assert_eq!(
            acks(&seen),
            [(fourth, AckStatus::Stored)],
            "the confirm freed its slot"
        );
    }

    #[test]
    fn a_slot_is_the_size_max_queue_capacity_is_computed_with() {
        // 72 bytes, and 8 more since a slot counts a producer's resends of its message
        // while the quorum is awaited (`resent`, a u64 so that no resends can wrap it).
        assert_eq!(std::mem::size_of::<Slot>(), 80);
    }
}
