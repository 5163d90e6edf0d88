//! A producer's session: it collects its application's publishes and sends them as PUTs
//! on flush, and collects their ACKs and reports the outcomes to the application on flush.
//!
//! The messages it waits for are in its table (`producer/unacked.rs`), each at a slot that
//! its PUT carries to the queue and the queue's ACK carries back: an ACK finds its message
//! by slot, checked by GUID, not by a lookup by GUID.

mod timeout;
mod unacked;

use unacked::UnackedTable;

use std::collections::{HashMap, TryReserveError, VecDeque};
use std::hash::BuildHasherDefault;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use zerodispatch_core::{
    BatchError, Client, ClientEvent, ClientHandle, Context, DispatchError, Event,
};

use crate::credits::Credits;
use crate::ids::{Guid, GuidHasher, Payload, ProducerId, QueueId};
use crate::limits::{FRAME_OVERHEAD, MAX_UNCONFIRMED};
use crate::message::{Ack, AckStatus};
use crate::protocol::{BrokerMsg, PutBody};
use crate::stats::SessionTally;
use crate::tables;

use super::{AckHandler, FlushStrategy, ProducerConfig};

/// A message the session waits for an outcome of.
#[derive(Clone, Copy)]
pub(crate) struct Unacked {
    queue: QueueId,
    payload: Payload,
    /// Holds one of the producer's credits (sent with `send` or `try_send`).
    credited: bool,
    /// Numbered by the caller (`publish_with_id`): its GUID is in `numbered` too.
    numbered: bool,
}

/// A producer's session.
pub(crate) struct ProducerSession {
    pub(crate) id: ProducerId,
    /// The queues' clients, by queue id.
    pub(crate) queues: Arc<[ClientHandle]>,
    config: ProducerConfig,
    /// Messages sent or to be sent, and not yet acknowledged, each at its slot: at most
    /// `max_unconfirmed`.
    unacked: UnackedTable,
    /// The caller-numbered messages (`publish_with_id`) of `unacked`, GUID -> slot: a
    /// caller's numbering may repeat a GUID in flight, which is then not sent (`NotSent`).
    /// The session's own numbering never repeats one, so its messages are never looked up
    /// here. Allocated at the first caller-numbered publish (twice the cap, so that
    /// hashbrown rehashes its tombstones in place rather than grow): a producer that never
    /// publishes with ids never allocates it.
    numbered: HashMap<Guid, u32, BuildHasherDefault<GuidHasher>>,
    /// PUTs to send: the batch being built, behind any PUTs a full outbox refused (see
    /// `held_back`): the queue, the GUID, the payload and the slot. Every entry is in
    /// `unacked`, so it never holds more than the cap (its preallocated size).
    outbox: Vec<(ClientHandle, Guid, PutBody)>,
    /// The last send left PUTs at the front of `outbox`: the processor's outbox was full
    /// (`DispatchError::Full`). They go at the next flush, which the session asks for
    /// (`flush_again`), whatever the flush strategy; until then no batch is cut early.
    held_back: bool,
    /// Bytes of the batch being built.
    frame_bytes: usize,
    /// With a confirm timeout: messages in the order sent, with when. An entry leaves at
    /// expiry, or when the queue reaches [`Self::sent_at_limit`] and is swept of messages
    /// with an outcome already (see `remember_sent`): it never holds more than twice
    /// `max_unconfirmed` entries, and never grows past its preallocated capacity. The slot
    /// is checked with the GUID (`UnackedTable::holds`): once its message had its outcome,
    /// the slot may hold another.
    sent_at: VecDeque<(Guid, u32, Instant)>,
    /// Outcomes to report on flush: at most [`Self::outcomes_limit`] (its preallocated
    /// size). Each is the outcome of a message that was in `unacked` at the last flush (at
    /// most the cap) or of one published since (at most one per event since the last
    /// flush, which the processor makes at least every `max_batch` events), so a burst of
    /// publishes rejected past the cap between two flushes fits too.
    acks: Vec<Ack>,
    /// The batch being reported, taken out of `acks` (swapped: the two vectors trade their
    /// preallocated buffers) before `on_ack` runs; empty outside `report_outcomes`.
    reporting: Vec<Ack>,
    /// The processor's `max_batch`: events between two of its flushes, at most.
    max_batch: usize,
    /// PUTs sent to queues whose ACK has not come back. A queue answers each PUT with
    /// exactly one ACK (stored, refused, a duplicate ACKed again, or `Closed` for a PUT a
    /// newer producer of the name superseded), so an ACK always finds this above zero. A
    /// closed session stays registered until it is zero, so that every ACK sent to it is
    /// counted (`acks` or `late_acks`), never dropped unseen. One that never comes keeps
    /// it, its tables freed, until shutdown: a message that never reaches its replication
    /// quorum.
    awaiting: u64,
    /// Credited outcomes among `acks`, to give back once reported.
    credited_outcomes: usize,
    credits: Arc<Credits>,
    on_ack: AckHandler,
    /// Refusing publishes (`Close` or `Drain` received).
    closed: bool,
    /// `Retire` received: no publish comes any more, and the session unregisters itself
    /// once `awaiting` is zero.
    stage: ProducerStage,
    pub(crate) counters: SessionTally,
}

impl ProducerSession {
    /// A producer's session with every table allocated for `config.max_unconfirmed`
    /// messages (at most [`MAX_UNCONFIRMED`], checked by the caller), on a processor that
    /// flushes at least every `max_batch` events; all but `numbered`, allocated at the
    /// first caller-numbered publish, if one comes.
    ///
    /// # Errors
    ///
    /// The allocation failed.
    pub(crate) fn new(
        id: ProducerId,
        queues: Arc<[ClientHandle]>,
        config: ProducerConfig,
        credits: Arc<Credits>,
        (on_ack, max_batch): (AckHandler, usize),
        counters: SessionTally,
    ) -> Result<Self, TryReserveError> {
        let cap = config.max_unconfirmed;
        debug_assert!((1..=MAX_UNCONFIRMED).contains(&cap));
        let outcomes = Self::outcomes_limit(cap, max_batch);
        Ok(Self {
            id,
            queues,
            config,
            unacked: UnackedTable::new(cap)?,
            numbered: HashMap::default(),
            // The batch, and PUTs held back, are messages of `unacked`: never more than the
            // cap.
            outbox: tables::vec(cap)?,
            held_back: false,
            frame_bytes: 0,
            sent_at: tables::deque(if config.confirm_timeout.is_some() {
                Self::sent_at_limit(cap)
            } else {
                0
            })?,
            acks: tables::vec(outcomes)?,
            reporting: tables::vec(outcomes)?,
            max_batch,
            awaiting: 0,
            credited_outcomes: 0,
            credits,
            on_ack,
            closed: false,
            stage: ProducerStage::Open,
            counters,
        })
    }

    /// Outcomes held between two reports, at most: the cap (every message without an
    /// outcome at the last flush) plus `max_batch` (one per event since: a publish brings
    /// at most one outcome of a message not counted in the cap). Ticks, a drain and a close
    /// report messages of `unacked`, already counted.
    fn outcomes_limit(max_unconfirmed: usize, max_batch: usize) -> usize {
        max_unconfirmed.saturating_add(max_batch)
    }

    fn report(&mut self, guid: Guid, u: Unacked, status: AckStatus) {
        debug_assert!(
            self.acks.len() < Self::outcomes_limit(self.config.max_unconfirmed, self.max_batch),
            "more outcomes between two flushes than the cap plus max_batch: {}",
            self.acks.len()
        );
        self.acks.push(Ack {
            guid,
            queue: u.queue,
            payload: u.payload,
            status,
        });
        self.credited_outcomes += usize::from(u.credited);
    }

    /// Takes message `guid` out of `unacked` at `slot`, if the slot holds it (and out of
    /// `numbered`, if the caller numbered it).
    fn take(&mut self, slot: u32, guid: Guid) -> Option<Unacked> {
        let u = self.unacked.take(slot, guid)?;
        if u.numbered {
            let was = self.numbered.remove(&guid);
            debug_assert_eq!(
                was,
                Some(slot),
                "a caller-numbered message not in `numbered`"
            );
        }
        Some(u)
    }

    /// Whether a message of `guid` is in flight on this producer already; `None` if the
    /// table of caller-numbered GUIDs, allocated at the first caller-numbered publish,
    /// could not be. The session's own numbering never repeats a GUID; a caller's
    /// (`publish_with_id`) may repeat one of its own (found in `numbered`) or, mixed with
    /// the session's against the docs, one of the session's (found by a scan of the
    /// table, paid only by a caller-numbered publish while own-numbered messages are in
    /// flight).
    fn in_flight(&mut self, guid: Guid, numbered: bool) -> Option<bool> {
        if !numbered {
            return Some(!self.numbered.is_empty() && self.numbered.contains_key(&guid));
        }
        if self.numbered.capacity() == 0 {
            self.numbered = tables::map(2 * self.config.max_unconfirmed).ok()?;
        }
        let own_in_flight = self.unacked.len() > self.numbered.len();
        Some(self.numbered.contains_key(&guid) || own_in_flight && self.unacked.scan_for(guid))
    }

    fn publish(
        &mut self,
        queue: QueueId,
        guid: Guid,
        payload: Payload,
        (credited, numbered): (bool, bool),
        ctx: &mut Context<BrokerMsg>,
    ) {
        self.counters.published.add(1);
        let u = Unacked {
            queue,
            payload,
            credited,
            numbered,
        };
        if self.closed {
            self.counters.closed_reported.add(1);
            self.report(guid, u, AckStatus::Closed);
            return;
        }
        debug_assert_eq!(self.stage, ProducerStage::Open, "a publish after `Retire`");
        let Some(&target) = self.queues.get(queue.0 as usize) else {
            self.counters.rejected_unknown_queue.add(1);
            self.report(guid, u, AckStatus::RejectedUnknownQueue);
            return;
        };
        if self.unacked.len() >= self.config.max_unconfirmed {
            self.counters.rejected_producer_full.add(1);
            self.report(guid, u, AckStatus::RejectedProducerFull);
            return;
        }
        // A GUID in flight already: the message is not sent, so that each of the two gets
        // exactly one outcome.
        match self.in_flight(guid, numbered) {
            Some(false) => {}
            in_flight => {
                if in_flight.is_none() {
                    tracing::warn!(
                        producer = self.id.0,
                        ?guid,
                        "no memory for the table of publish ids in flight: not sent"
                    );
                } else {
                    tracing::debug!(
                        producer = self.id.0,
                        ?guid,
                        "a publish id already in flight on this producer: not sent"
                    );
                }
                self.counters.not_sent.add(1);
                self.report(guid, u, AckStatus::NotSent);
                return;
            }
        }
        let bytes = payload.len as usize + FRAME_OVERHEAD;
        if !self.outbox.is_empty()
            && self.frame_bytes + bytes > self.config.max_frame_bytes
            && !self.held_back
        {
            self.send_batch(ctx); // the next message would not fit the frame
        }
        let slot = self.unacked.insert(guid, u);
        if numbered {
            self.numbered.insert(guid, slot);
        }
        if self.config.confirm_timeout.is_some() {
            self.remember_sent(guid, slot);
        }
        self.outbox
            .push((target, guid, PutBody::new(payload, slot)));
        self.frame_bytes += bytes;
        if self.outbox.len() >= self.config.batch_size && !self.held_back {
            self.send_batch(ctx); // the batch is full
        }
    }

    /// Sends the batch being built: one PUT per message, one frame. If the processor's
    /// outbox is full (`Full`), the PUTs from the refused one on stay at the front of the
    /// batch, in order, and the session asks to be flushed again to send them (they are
    /// not lost, and not reported: they have no outcome yet).
    fn send_batch(&mut self, ctx: &mut Context<BrokerMsg>) {
        if self.outbox.is_empty() {
            return;
        }
        let me = ctx.handle();
        // One `dispatch_batch` per run of PUTs to the same queue (usually the whole frame):
        // one pass through the queue processor's gate per frame, not per message.
        let mut start = 0;
        let mut kept_from = None;
        while start < self.outbox.len() {
            let queue = self.outbox[start].0;
            let end = start
                + self.outbox[start..]
                    .iter()
                    .take_while(|(q, _, _)| *q == queue)
                    .count();
            let mut puts = self.outbox[start..end].iter().map(|&(_, guid, body)| {
                Event::Message(BrokerMsg::Put {
                    producer: me,
                    guid,
                    body,
                })
            });
            match ctx.dispatcher().dispatch_batch(queue, &mut puts) {
                Ok(_) => self.awaiting += (end - start) as u64,
                Err(BatchError {
                    enqueued: sent,
                    error: DispatchError::Full(_),
                }) => {
                    self.awaiting += sent as u64;
                    kept_from = Some(start + sent);
                    break;
                }
                Err(BatchError { enqueued: sent, .. }) => {
                    self.awaiting += sent as u64;
                    // Shutting down: the messages from the one refused on were never
                    // stored.
                    for i in start + sent..end {
                        let (_, guid, body) = self.outbox[i];
                        if let Some(u) = self.take(body.slot, guid) {
                            self.counters.not_sent.add(1);
                            self.report(guid, u, AckStatus::NotSent);
                        }
                    }
                }
            }
            start = end;
        }
        let sent = kept_from.unwrap_or(self.outbox.len());
        if sent > 0 {
            self.counters.put_frames.add(1);
            self.counters.put_messages.add(sent as u64);
        }
        match kept_from {
            None => {
                self.outbox.clear();
                self.frame_bytes = 0;
                self.held_back = false;
            }
            Some(kept) => {
                // Slides the rest down: no allocation.
                self.outbox.drain(..kept);
                self.frame_bytes = self
                    .outbox
                    .iter()
                    .map(|(_, _, b)| b.payload().len as usize + FRAME_OVERHEAD)
                    .sum();
                self.held_back = true;
                ctx.flush_again();
            }
        }
    }

    /// An ACK from a queue, for the message at `slot`: counted once, in `acks` if it is
    /// reported (the slot holds the message, waiting for it), else in `late_acks` (the
    /// message was reported already: timed out, or closed; its slot is free, or holds
    /// another message, which keeps waiting for its own ACK).
    fn ack(&mut self, guid: Guid, slot: u32, status: AckStatus) {
        debug_assert!(self.awaiting > 0, "an ACK for no PUT of this session");
        self.awaiting = self.awaiting.saturating_sub(1);
        let Some(u) = self.take(slot, guid) else {
            // Timed out or closed: reported already.
            self.counters.late_acks.add(1);
            tracing::debug!(
                producer = self.id.0,
                ?guid,
                "ACK for a message the producer no longer waits for"
            );
            return;
        };
        self.counters.acks.add(1);
        self.report(guid, u, status);
    }

    /// The first step of a close with a wait: refuses later publishes and sends the batch
    /// now (a timer producer's too, without its tick), so that every message the
    /// application published before the close goes to its queue and gets its real outcome
    /// within the wait. What a full outbox refuses is kept and tried again at the next
    /// flush, as ever; what is still unsent at the `Close` is reported `NotSent` then.
    fn drain(&mut self, ctx: &mut Context<BrokerMsg>) {
        self.closed = true;
        self.send_batch(ctx);
    }

    /// Reports every message not sent yet `NotSent`, and empties the batch; what is in
    /// flight keeps waiting for its outcome.
    fn discard_unsent(&mut self) {
        self.closed = true;
        for i in 0..self.outbox.len() {
            let (_, guid, body) = self.outbox[i];
            if let Some(u) = self.take(body.slot, guid) {
                self.counters.not_sent.add(1);
                self.report(guid, u, AckStatus::NotSent);
            }
        }
        self.outbox.clear();
        self.frame_bytes = 0;
        self.held_back = false;
    }

    /// Reports what is still unsent `NotSent`, then everything in flight `Closed` (their
    /// ACKs, when they come, are counted `late_acks`).
    fn close(&mut self) {
        self.discard_unsent();
        // Taken out (an empty table in its place allocates nothing), drained, and put back
        // with its allocation.
        let mut pending = std::mem::take(&mut self.unacked);
        pending.drain(|_, guid, u| {
            self.counters.closed_reported.add(1);
            self.report(guid, u, AckStatus::Closed);
        });
        self.unacked = pending;
        self.numbered.clear();
    }

    /// `Retire` (the producer's close protocol, step 3 in `broker/producer/close.rs`): no
    /// publish comes any more. Closes first if the `Close` was lost to a full outbox.
    fn retire(&mut self) {
        if !self.closed || !self.unacked.is_empty() {
            self.close();
        }
        if self.stage == ProducerStage::Open {
            self.stage = ProducerStage::Retiring;
        }
    }

    /// A retired session's last step, at its flush: once every PUT it sent has had its
    /// ACK, it unregisters itself (retried at the next flush while a full outbox refuses
    /// it; refused at shutdown, which drops it anyway). While it waits, it frees its tables
    /// and its handler: only the count is needed to count the ACKs still to come.
    fn finish_retiring(&mut self, ctx: &mut Context<BrokerMsg>) {
        if self.stage != ProducerStage::Retiring || !self.acks.is_empty() {
            return;
        }
        if self.awaiting > 0 {
            if self.unacked.is_allocated() {
                self.unacked.free_memory();
                self.numbered = HashMap::default();
                self.outbox = Vec::new();
                self.sent_at = VecDeque::new();
                self.acks = Vec::new();
                self.reporting = Vec::new();
                self.on_ack = Box::new(|_: &[Ack]| {});
            }
            return;
        }
        let me = ctx.handle();
        if matches!(ctx.dispatcher().unregister(me), Err(DispatchError::Full(_))) {
            ctx.flush_again();
        } else {
            self.stage = ProducerStage::Unregistered;
        }
    }

    /// Takes the outcomes out, gives their credits back, hands them to the application
    /// (see `session.rs`, "Calling the application"), then counts them reported (the
    /// protocol in `credits.rs`).
    fn report_outcomes(&mut self) {
        if self.acks.is_empty() {
            return;
        }
        debug_assert!(
            self.reporting.is_empty(),
            "a batch left from the last report"
        );
        std::mem::swap(&mut self.acks, &mut self.reporting);
        self.credits
            .give_back(std::mem::take(&mut self.credited_outcomes));
        let (on_ack, batch) = (&mut self.on_ack, &self.reporting);
        if catch_unwind(AssertUnwindSafe(|| on_ack(batch))).is_err() {
            self.counters.handler_panics.add(1);
            tracing::warn!(
                producer = self.id.0,
                outcomes = batch.len(),
                "on_ack panicked; its outcomes count as reported"
            );
        }
        let reported = self.reporting.len();
        self.reporting.clear();
        self.credits.reported(reported);
    }
}

impl Client<BrokerMsg> for ProducerSession {
    fn on_event(&mut self, event: ClientEvent<BrokerMsg>, ctx: &mut Context<BrokerMsg>) {
        match event {
            ClientEvent::Message(BrokerMsg::Publish {
                queue,
                guid,
                payload,
                credited,
                numbered,
            }) => {
                self.publish(queue, guid, payload, (credited, numbered), ctx);
            }
            ClientEvent::Message(BrokerMsg::Ack { guid, slot, status }) => {
                self.ack(guid, slot, status);
            }
            ClientEvent::Message(BrokerMsg::Tick) => {
                if matches!(self.config.flush, FlushStrategy::Timer(_)) {
                    self.send_batch(ctx);
                }
                self.expire();
            }
            ClientEvent::Message(BrokerMsg::Drain) => self.drain(ctx),
            ClientEvent::Message(BrokerMsg::Close) => self.close(),
            ClientEvent::Message(BrokerMsg::Retire) => self.retire(),
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(other) => {
                tracing::warn!(
                    producer = self.id.0,
                    ?other,
                    "unexpected message for a producer"
                );
            }
        }
    }

    fn flush(&mut self, ctx: &mut Context<BrokerMsg>) {
        if self.config.flush == FlushStrategy::Dynamic || self.held_back {
            self.send_batch(ctx);
        }
        self.report_outcomes();
        self.finish_retiring(ctx);
    }
}

/// Where a producer session is in its life after its application's `close`, which first
/// sets `closed` (publishes are then reported `Closed`, and what is in flight too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProducerStage {
    /// Publishes may still come (until the `Retire` that the close protocol sends behind
    /// the last of them).
    Open,
    /// `Retire` received: waiting for the ACKs of the PUTs it sent, counted `late_acks`.
    Retiring,
    /// Unregistered: dropped once its processor handles that.
    Unregistered,
}

impl Drop for ProducerSession {
    fn drop(&mut self) {
        // At shutdown: whatever has no outcome yet is reported closed.
        if !self.unacked.is_empty() || !self.acks.is_empty() {
            self.close();
            self.report_outcomes();
        }
    }
}
