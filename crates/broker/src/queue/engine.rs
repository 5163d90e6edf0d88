//! A queue's table: the messages it stores, their shares per app, and what a PUT, a
//! receipt, a confirm, an attach and a detach do to them. Pushing the shares and sending
//! the ACKs, at the queue's flush, is `engine/delivery.rs`.
//!
//! # Finding a message
//!
//! A confirm finds its message by its delivery's token ([`DeliveryToken`]), the index of
//! the message's slot: no lookup by GUID, so the messages in flight cost nothing per
//! confirm. The token is checked, never trusted: in range, the slot live, and the slot's
//! GUID the confirm's; anything else is counted `unknown_guid` and changes nothing.
//!
//! What still arrives by GUID is a replica's receipt (and a named producer's duplicate
//! PUT, which matters only while the first copy's ACK waits for the quorum): with
//! replication, the queue indexes the messages awaiting their quorum (`awaiting_quorum`),
//! each from its PUT until the receipt that makes the quorum. Without replication that
//! index is never allocated.
//!
//! The other way, an ACK names the message's slot in its producer's session (`PutBody`,
//! which the PUT carried and the slot keeps), so that the session indexes its table too.

mod delivery;

use std::collections::{HashMap, TryReserveError};
use std::hash::BuildHasherDefault;
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;
use zerodispatch_core::ClientHandle;

use crate::dedup::{StoredIds, Verdict};
use crate::ids::{AppId, ConsumerId, Guid, GuidHasher, Payload, QueueId};
use crate::limits::{MAX_APPS, MAX_QUEUE_CAPACITY};
use crate::message::{AckStatus, Confirm, DeliveryToken};
use crate::names::Names;
use crate::protocol::PutBody;
use crate::release::{OnRelease, Released};
use crate::replication::{Receipt, Replication};
use crate::stats::QueueCounters;
use crate::tables;

use super::QueueMode;

/// A set of apps of one message, bit `app`: its pending or undelivered shares.
type AppMask = u64;

// A message's shares fit its mask.
const _: () = assert!(AppMask::BITS == MAX_APPS as u32);

/// A confirm functor in a `Box`, handed the queue's table: the boxed baseline of the
/// inline confirm (one allocation per confirm).
pub(crate) struct BoxedConfirm(pub(crate) Box<dyn FnOnce(&mut QueueEngine) + Send>);

impl std::fmt::Debug for BoxedConfirm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxedConfirm")
    }
}

/// A stored message.
#[derive(Clone, Copy)]
struct Slot {
    guid: Guid,
    /// The payload, and the message's slot in its producer's session (`producer`'s table)
    /// as the latest PUT of `producer` named it: its ACKs carry it back.
    body: PutBody,
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
    /// The queue's id, which its client names in its logs.
    pub(super) id: QueueId,
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
    /// With replication, the slot of each message whose ACK waits for the quorum of
    /// receipts: inserted at its PUT, removed by the receipt that makes the quorum (so a
    /// message is in it exactly while its slot is live and not `acked`). Receipts, which
    /// come by GUID, find their message here; confirms never look here (they come with
    /// their delivery's token). Without replication it stays empty and unallocated.
    awaiting_quorum: HashMap<Guid, u32, BuildHasherDefault<GuidHasher>>,
    /// Slots with undelivered shares, oldest first.
    to_push: Vec<u32>,
    /// ACKs to send on flush: the producer's session, the GUID, the message's slot in the
    /// session's table (as the PUT it answers named it), the outcome. Those a full
    /// outbox refused stay, oldest first, for the next flush. Preallocated at the capacity,
    /// a flush's worth of stores; it grows past that only while the session processors
    /// are so far behind that this processor's outbox stays full, by at most one ACK per
    /// message the producers have in flight.
    acks: Vec<(ClientHandle, Guid, u32, AckStatus)>,
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
    /// A priority queue of `capacity` messages, with `replication`, alone: no names, no
    /// deduplication, no release hook.
    #[cfg(test)]
    pub(crate) fn for_test(capacity: usize, replication: Option<Replication>) -> Self {
        Self::new(
            QueueId(0),
            QueueMode::Priority,
            (capacity, 16),
            replication,
            (
                None,
                StoredIds::new(0, crate::limits::MIN_DEDUP_WINDOW).unwrap(),
                Arc::new(Mutex::new(Names::new(0).unwrap())),
            ),
            Arc::default(),
        )
        .unwrap()
    }

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
            body: PutBody::new(Payload::default(), 0),
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
            // Every message may await its quorum at once, so with replication it is sized
            // for the whole table; without, nothing is ever put in it.
            awaiting_quorum: if replication.is_some() {
                tables::map(2 * capacity)?
            } else {
                HashMap::default()
            },
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
    pub(crate) fn put(&mut self, producer: ClientHandle, guid: Guid, body: PutBody) {
        match self.stored_ids.check(guid) {
            Verdict::Duplicate => return self.duplicate(producer, guid, body),
            Verdict::OutOfWindow => return self.out_of_window(producer, guid, body.slot),
            Verdict::New | Verdict::Anonymous => {}
        }
        let Some(slot) = self.free.pop() else {
            self.counters.rejected_full.add(1);
            self.acks
                .push((producer, guid, body.slot, AckStatus::RejectedQueueFull));
            return;
        };
        let all = self.all_apps();
        // Stored: the ACK goes now, unless it waits for the replicas' receipts.
        let acked = self.replication.is_none();
        self.slots[slot as usize] = Slot {
            guid,
            body,
            producer: Some(producer),
            pending: all,
            undelivered: all,
            receipts: 0,
            resent: 0,
            acked,
            queued: true,
            live: true,
        };
        if !acked {
            self.awaiting_quorum.insert(guid, slot);
        }
        self.stored_ids.record(guid);
        self.to_push.push(slot);
        self.counters.stored.add(1);
        self.counters.held.up();
        if acked {
            self.ack(producer, guid, body.slot);
        }
    }

    /// A named producer's message stored already (`dedup.rs`): ACKed again, unless its
    /// ACK is still to come (waiting for the replication quorum), which then goes to the
    /// newer of the two producers' sessions. Its payload is released: the queue holds the
    /// first copy's, and never reads this one.
    ///
    /// Each ACK carries the session's slot that the session's PUT named: the arriving
    /// PUT's, or for the quorum's ACKs, the latest PUT's of the session that holds them
    /// (the session matches at most one of them to the message it waits for, by slot and
    /// GUID; the others it counts `late_acks`, as it would any ACK for a message it no
    /// longer waits for).
    fn duplicate(&mut self, producer: ClientHandle, guid: Guid, body: PutBody) {
        self.counters.deduplicated.add(1);
        if let Some(released) = &mut self.released {
            released.push(body.payload());
        }
        // Only a message whose ACK still waits for the quorum needs more than an ACK now.
        if let Some(&slot) = self.awaiting_quorum.get(&guid) {
            let s = self.slots[slot as usize];
            debug_assert!(
                s.live && !s.acked,
                "a message past its quorum is not awaiting it"
            );
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
                        let s = &mut self.slots[slot as usize];
                        s.resent = s.resent.saturating_add(1);
                        s.body.slot = body.slot;
                    }
                    Some(_) if !self.is_newest(guid, producer) => {
                        // The arriving PUT is the older's (or both are older than the
                        // name's newest producer, both closed): the holder keeps the ACK.
                        self.counters.superseded.add(1);
                        self.acks
                            .push((producer, guid, body.slot, AckStatus::Closed));
                    }
                    older => {
                        // The older session's ACKs carry the slot its latest PUT named,
                        // taken before the newer's takes its place.
                        let s = &mut self.slots[slot as usize];
                        let puts = 1 + std::mem::take(&mut s.resent);
                        let older_slot = std::mem::replace(&mut s.body.slot, body.slot);
                        s.producer = Some(producer);
                        if let Some(older) = older {
                            for _ in 0..puts {
                                self.counters.superseded.add(1);
                                self.acks.push((older, guid, older_slot, AckStatus::Closed));
                            }
                        }
                    }
                }
                return;
            }
        }
        self.ack(producer, guid, body.slot);
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
    fn out_of_window(&mut self, producer: ClientHandle, guid: Guid, slot: u32) {
        self.counters.out_of_window.add(1);
        self.acks
            .push((producer, guid, slot, AckStatus::RejectedOutOfWindow));
    }

    /// Queues a stored message's ACK for its producer's session, which holds it at `slot`
    /// of its table.
    fn ack(&mut self, producer: ClientHandle, guid: Guid, slot: u32) {
        self.acks.push((producer, guid, slot, AckStatus::Stored));
        self.counters.acked.add(1);
    }

    /// Applies a replica's receipt: the one that reaches the quorum queues the ACK (and
    /// releases the message if every share is confirmed already). A receipt for a message
    /// not awaiting its quorum (never stored, released, or past its quorum already though
    /// still held) is counted `unknown_receipts`, a second one from the same replica
    /// `duplicate_receipts`; both are ignored.
    pub(crate) fn receipt(&mut self, r: Receipt) {
        let Some(quorum) = self.replication.map(|q| u32::from(q.quorum)) else {
            self.counters.unknown_receipts.add(1);
            tracing::debug!(queue = self.id.0, "receipt without replication configured");
            return;
        };
        let Some(&slot) = self.awaiting_quorum.get(&r.guid) else {
            self.counters.unknown_receipts.add(1);
            tracing::debug!(queue = self.id.0, guid = ?r.guid, "receipt for a message not awaiting its quorum");
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
        let producer_slot = s.body.slot;
        self.awaiting_quorum.remove(&guid);
        let puts = 1 + std::mem::take(&mut s.resent);
        if let Some(producer) = producer {
            for _ in 0..puts {
                self.ack(producer, guid, producer_slot);
            }
        }
        if release {
            self.release(slot);
        }
    }

    /// Applies a confirm, found by its token. A token out of the table, of a free slot, or
    /// of a slot that holds another message (stale: its message released and the slot
    /// reused; or forged) is counted `unknown_guid` and changes nothing.
    pub(crate) fn confirm(&mut self, c: Confirm) {
        let Some(slot) = self.slot_of(c.token, c.guid) else {
            self.counters.unknown_guid.add(1);
            tracing::debug!(queue = self.id.0, guid = ?c.guid, token = c.token.0, "confirm for a message the queue does not hold at its token");
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

    /// The slot `token` names, if it is in the table, live, and holds message `guid`.
    fn slot_of(&self, token: DeliveryToken, guid: Guid) -> Option<u32> {
        let s = self.slots.get(token.0 as usize)?;
        (s.live && s.guid == guid).then_some(token.0)
    }

    /// Frees the slot of a message whose shares are all confirmed (or dropped), if its ACK
    /// has gone; otherwise the quorum's receipt releases it.
    fn release(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if !s.acked {
            return;
        }
        s.live = false;
        let (guid, payload) = (s.guid, s.body.payload());
        if let Some(released) = &mut self.released {
            released.push(payload);
        }
        // Acked: past its quorum, if any, so no longer awaiting it.
        debug_assert!(
            !self.awaiting_quorum.contains_key(&guid),
            "released while awaiting the quorum"
        );
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_the_size_max_queue_capacity_is_computed_with() {
        // 72 bytes, and 8 more since a slot counts a producer's resends of its message
        // while the quorum is awaited (`resent`, a u64 so that no resends can wrap it).
        // The producer session's slot of the message (for the ACK) takes no room: it fills
        // the payload's padding (`PutBody`).
        assert_eq!(std::mem::size_of::<Slot>(), 80);
    }

    #[test]
    fn only_a_queue_with_replication_allocates_the_index_of_messages_awaiting_the_quorum() {
        let capacity = 1024;
        let plain = QueueEngine::for_test(capacity, None);
        assert_eq!(
            plain.awaiting_quorum.capacity(),
            0,
            "confirms come by token: no GUID index without replication"
        );
        let replicated = QueueEngine::for_test(
            capacity,
            Some(Replication {
                replicas: 2,
                quorum: 1,
            }),
        );
        assert!(
            replicated.awaiting_quorum.capacity() >= 2 * capacity,
            "every message may await its quorum at once"
        );
    }
}
