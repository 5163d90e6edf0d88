//! The broker's counters: one block per writer (each queue, each session, the cluster), on a
//! cache line of its own, so that counting never makes two processors share a line.
//!
//! Sessions come and go: a session's counters are listed in the [`SessionRegistry`] while
//! it lives, and folded into the registry's retired total when it is dropped, so that the
//! totals stay whole and the list holds only the sessions alive now.

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;
use zerodispatch_core::counter::{Counter, Gauge};

/// Written by a queue's processor.
#[derive(Debug, Default)]
pub(crate) struct QueueCounters {
    pub(crate) stored: Counter,
    pub(crate) rejected_full: Counter,
    pub(crate) pushed: Counter,
    pub(crate) redelivered: Counter,
    pub(crate) confirms: Counter,
    pub(crate) duplicate_confirms: Counter,
    pub(crate) unknown_guid: Counter,
    pub(crate) gone_consumer: Counter,
    pub(crate) dropped_shares: Counter,
    pub(crate) acked: Counter,
    pub(crate) released: Counter,
    pub(crate) release_panics: Counter,
    pub(crate) receipts: Counter,
    pub(crate) duplicate_receipts: Counter,
    pub(crate) unknown_receipts: Counter,
    pub(crate) deduplicated: Counter,
    pub(crate) out_of_window: Counter,
    pub(crate) superseded: Counter,
    /// Messages held now: up at each store, down at each release, by the queue's processor
    /// only, so that it is always between 0 and the queue's capacity.
    pub(crate) held: Gauge,
}

/// Written by a session's processor.
#[derive(Debug, Default)]
pub(crate) struct SessionCounters {
    pub(crate) published: Counter,
    pub(crate) rejected_producer_full: Counter,
    pub(crate) rejected_unknown_queue: Counter,
    pub(crate) acks: Counter,
    pub(crate) late_acks: Counter,
    pub(crate) closed_reported: Counter,
    pub(crate) not_sent: Counter,
    pub(crate) delivered: Counter,
    pub(crate) pushes_to_closed: Counter,
    pub(crate) confirms_sent: Counter,
    pub(crate) confirms_refused: Counter,
    pub(crate) timed_out: Counter,
    pub(crate) put_frames: Counter,
    pub(crate) put_messages: Counter,
    pub(crate) handler_panics: Counter,
    pub(crate) unknown_confirms: Counter,
}

/// Written by the cluster processor.
#[derive(Debug, Default)]
pub(crate) struct ClusterCounters {
    pub(crate) routed: Counter,
    pub(crate) receipts_routed: Counter,
    pub(crate) unknown_queue: Counter,
}

/// A queue's statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Messages stored (PUTs accepted).
    pub stored: u64,
    /// PUTs refused because the message table was full (reported to the producer).
    pub rejected_full: u64,
    /// PUSHes sent to consumers (one per app share; redeliveries included).
    pub pushed: u64,
    /// Shares made deliverable again because their consumer closed (priority mode).
    pub redelivered: u64,
    /// Confirms that released a share.
    pub confirms: u64,
    /// Confirms for a share already confirmed, while the message was still held.
    pub duplicate_confirms: u64,
    /// Confirms whose token does not name a slot holding their GUID: out of the table, a
    /// free slot, or a slot holding another message (a message never stored, already
    /// released, its slot reused since, or a forged token; a confirm arriving after its
    /// message was released counts here). Nothing is released.
    pub unknown_guid: u64,
    /// Confirms from a consumer that is not (or no longer) the one the share was pushed to.
    pub gone_consumer: u64,
    /// Shares dropped because their consumer closed (fanout mode).
    pub dropped_shares: u64,
    /// Messages acknowledged `Stored` to their producer: at store, or at the replication
    /// quorum, and again for each duplicate (`deduplicated`).
    pub acked: u64,
    /// Messages released: every share confirmed (or dropped), and the ACK gone. Their
    /// slots are free again; the producer is not told.
    pub released: u64,
    /// Panics caught in the release hook ([`OnRelease`](crate::OnRelease)); the batch it
    /// was called with is not reported again.
    pub release_panics: u64,
    /// Replicas' receipts counted (one per replica and message).
    pub receipts: u64,
    /// Receipts from a replica that had sent one for the message already (ignored).
    pub duplicate_receipts: u64,
    /// Receipts for a message not awaiting its quorum (never stored, already released, or
    /// past its quorum already though still held: a receipt past the quorum counts here),
    /// or with no replication configured (ignored).
    pub unknown_receipts: u64,
    /// PUTs of a named producer's message the queue had stored already (published again
    /// after a lost connection): ACKed again, not stored or delivered again. See
    /// [`Broker::open_named_producer`](crate::Broker::open_named_producer).
    pub deduplicated: u64,
    /// PUTs of a named producer's message older than the queue's deduplication window
    /// ([`BrokerConfig::dedup_window`](crate::BrokerConfig::dedup_window)): whether it was
    /// stored before cannot be told, so it was neither stored nor ACKed `Stored`, but
    /// refused `RejectedOutOfWindow`.
    pub out_of_window: u64,
    /// PUTs whose message a newer producer of the same name published again while the
    /// first copy waited for its replication quorum: the quorum's ACK goes to the newer
    /// producer, and the older PUT is answered `Closed` at once (its producer is closed: a
    /// name has one producer at a time), so that every PUT has exactly one ACK.
    pub superseded: u64,
    /// Messages held now: at most the queue's capacity (a value the queue's processor
    /// stored, read whole).
    pub held: u64,
}

impl QueueCounters {
    pub(crate) fn snapshot(&self) -> QueueStats {
        QueueStats {
            stored: self.stored.get(),
            rejected_full: self.rejected_full.get(),
            pushed: self.pushed.get(),
            redelivered: self.redelivered.get(),
            confirms: self.confirms.get(),
            duplicate_confirms: self.duplicate_confirms.get(),
            unknown_guid: self.unknown_guid.get(),
            gone_consumer: self.gone_consumer.get(),
            dropped_shares: self.dropped_shares.get(),
            acked: self.acked.get(),
            released: self.released.get(),
            release_panics: self.release_panics.get(),
            receipts: self.receipts.get(),
            duplicate_receipts: self.duplicate_receipts.get(),
            unknown_receipts: self.unknown_receipts.get(),
            deduplicated: self.deduplicated.get(),
            out_of_window: self.out_of_window.get(),
            superseded: self.superseded.get(),
            held: self.held.get(),
        }
    }
}

/// Statistics of all sessions together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Messages the producers' applications published (accepted by their sessions or
    /// rejected there).
    pub published: u64,
    /// Publishes rejected because the producer had `max_unconfirmed` messages without an
    /// outcome.
    pub rejected_producer_full: u64,
    /// Publishes rejected because the queue does not exist.
    pub rejected_unknown_queue: u64,
    /// ACKs from queues (every outcome a queue sends: `Stored` and its refusals) reported
    /// to producers' applications.
    ///
    /// Every ACK a queue sends is counted once, here or in [`late_acks`](Self::late_acks):
    /// a closed producer's session stays until the ACKs of all it sent have come. So, once
    /// every message stored has had its ACK, the queues' `acked + rejected_full +
    /// out_of_window + superseded` equals `acks + late_acks`.
    pub acks: u64,
    /// ACKs from queues for a message whose outcome was reported already (`TimedOut`, or
    /// `Closed`: the ACKs that come after the producer's close count here): counted, not
    /// reported.
    pub late_acks: u64,
    /// Messages reported `Closed`: sent and without an outcome when their producer closed,
    /// or published after its close (a publish that raced it). Not `NotSent` ones, which
    /// [`not_sent`](Self::not_sent) counts.
    ///
    /// Every message a producer took has one outcome, counted once: `published == acks +
    /// rejected_producer_full + rejected_unknown_queue + timed_out + closed_reported +
    /// not_sent` once all are reported.
    pub closed_reported: u64,
    /// Messages reported `NotSent`: still in the session's batch at the producer's close
    /// (or refused at shutdown), or published with an id in flight already
    /// ([`Producer::publish_with_id`](crate::Producer::publish_with_id)).
    pub not_sent: u64,
    /// Messages handed to consumers' applications.
    pub delivered: u64,
    /// PUSHes that reached a consumer already closed (dropped; the queue redelivers or
    /// drops the share when it handles the detach).
    pub pushes_to_closed: u64,
    /// Confirms sent.
    pub confirms_sent: u64,
    /// Confirms the dispatcher refused (shutdown).
    pub confirms_refused: u64,
    /// Messages reported `TimedOut`.
    pub timed_out: u64,
    /// PUT batches (frames) producers sent.
    pub put_frames: u64,
    /// Messages in those frames: `put_messages / put_frames` is the mean batch.
    pub put_messages: u64,
    /// Panics caught in the applications' `on_ack` and `on_delivery` handlers. The batch a
    /// panicking handler was called with counts as reported (outcomes) or delivered (and
    /// its messages are confirmed all the same): it is never handed over again.
    pub handler_panics: u64,
    /// Confirms from consumers' applications ([`Confirms::Explicit`](crate::Confirms))
    /// naming a message the consumer was not handed, or has confirmed already: dropped.
    pub unknown_confirms: u64,
}

impl SessionStats {
    pub(crate) fn add(&mut self, c: &SessionCounters) {
        self.published += c.published.get();
        self.rejected_producer_full += c.rejected_producer_full.get();
        self.rejected_unknown_queue += c.rejected_unknown_queue.get();
        self.acks += c.acks.get();
        self.late_acks += c.late_acks.get();
        self.closed_reported += c.closed_reported.get();
        self.not_sent += c.not_sent.get();
        self.delivered += c.delivered.get();
        self.pushes_to_closed += c.pushes_to_closed.get();
        self.confirms_sent += c.confirms_sent.get();
        self.confirms_refused += c.confirms_refused.get();
        self.timed_out += c.timed_out.get();
        self.put_frames += c.put_frames.get();
        self.put_messages += c.put_messages.get();
        self.handler_panics += c.handler_panics.get();
        self.unknown_confirms += c.unknown_confirms.get();
    }
}

/// The cluster processor's state, as its state query answers it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterState {
    /// Confirms routed to their queue's processor.
    pub routed: u64,
    /// Replicas' receipts routed to their queue's processor.
    pub receipts_routed: u64,
    /// Confirms naming a queue the broker does not have (counted, not routed).
    pub unknown_queue: u64,
    /// Queues the cluster routes to.
    pub queues: usize,
}

/// The counters of every session: those alive, in a slab whose free places are reused, and
/// the total of those retired.
#[derive(Debug, Default)]
pub(crate) struct SessionRegistry {
    sessions: Mutex<Sessions>,
}

#[derive(Debug, Default)]
struct Sessions {
    /// The live sessions' counters; `None` in a free place. Never longer than the most
    /// sessions alive at once.
    live: Vec<Option<Arc<CachePadded<SessionCounters>>>>,
    /// Free places of `live`.
    free: Vec<usize>,
    /// The counts of the sessions dropped so far, folded in at their drop.
    retired: SessionStats,
}

impl SessionRegistry {
    /// Lists a new session's counters; they are retired when the returned tally is dropped
    /// (with the session that owns it).
    pub(crate) fn open(self: &Arc<Self>) -> SessionTally {
        let counters = Arc::new(CachePadded::new(SessionCounters::default()));
        let mut s = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let place = match s.free.pop() {
            Some(place) => {
                s.live[place] = Some(counters.clone());
                place
            }
            None => {
                s.live.push(Some(counters.clone()));
                s.live.len() - 1
            }
        };
        SessionTally {
            counters,
            registry: self.clone(),
            place,
        }
    }

    /// The sum of every session's counters, retired ones included.
    pub(crate) fn total(&self) -> SessionStats {
        let s = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let mut total = s.retired;
        for c in s.live.iter().flatten() {
            total.add(c);
        }
        total
    }
}

/// A session's counters, as the session holds them: listed in the registry until this is
/// dropped, then folded into its retired total (under the registry's lock, so that a reader
/// counts them once, live or retired). A session is dropped on its processor thread after
/// its last event and flush, so nothing counts after the fold.
#[derive(Debug)]
pub(crate) struct SessionTally {
    counters: Arc<CachePadded<SessionCounters>>,
    registry: Arc<SessionRegistry>,
    /// The place of `counters` in the registry's list.
    place: usize,
}

impl Deref for SessionTally {
    type Target = SessionCounters;

    fn deref(&self) -> &SessionCounters {
        &self.counters
    }
}

impl Drop for SessionTally {
    fn drop(&mut self) {
        let mut s = self
            .registry
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let s = &mut *s;
        debug_assert!(
            s.live[self.place]
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &self.counters)),
            "a session's place in the registry holds another's counters"
        );
        s.retired.add(&self.counters);
        s.live[self.place] = None;
        s.free.push(self.place);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retired_sessions_keep_their_counts_and_free_their_place() {
        let registry = Arc::new(SessionRegistry::default());
        let keep = registry.open();
        keep.published.add(1);
        for _ in 0..1000 {
            let gone = registry.open();
            gone.published.add(2);
            gone.handler_panics.add(1);
        }
        let total = registry.total();
        assert_eq!((total.published, total.handler_panics), (2001, 1000));
        assert_eq!(registry.sessions.lock().unwrap().live.len(), 2);
        drop(keep);
        assert_eq!(registry.total().published, 2001);
    }
}
