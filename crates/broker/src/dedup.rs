//! Deduplication: each queue's record of the highest publish id it has stored for each
//! named producer.
//!
//! A named producer ([`Broker::open_named_producer`](crate::Broker::open_named_producer))
//! numbers its messages itself, in increasing order
//! ([`Producer::publish_with_id`](crate::Producer::publish_with_id)), and its id is its
//! name's (see `names.rs`), the same each time the name is opened. So a message published
//! again after a lost connection has the GUID it had, and a queue that remembers the
//! highest id it stored for each name can tell it:
//!
//! * a PUT of a named producer whose publish id is at most the highest stored is a
//!   **duplicate**: the queue ACKs it `Acked` again (the producer may have lost the first
//!   ACK with its connection), stores and delivers nothing, hands its payload to the
//!   release hook (the broker will not read it), and counts it
//!   ([`QueueStats::deduplicated`](crate::QueueStats::deduplicated)). With replication, a
//!   duplicate of a message still waiting for its quorum is not ACKed at once: the quorum's
//!   ACK goes to the newest producer of the message instead;
//! * any other PUT is stored as ever, and its id becomes the highest.
//!
//! Anonymous producers (ids from `max_producer_names` up) are never deduplicated.
//!
//! The record is one word per name and queue, preallocated when the broker starts and
//! written only by the queue's processor: no lock, and nothing on the message path but a
//! load and a store. It is atomic so that [`Broker::last_stored`](crate::Broker::last_stored)
//! can read it from a dispatcher callback on that processor, after every PUT enqueued
//! before the question.
//!
//! The contract this rests on, which a named producer's application keeps: publish ids
//! increase along the producer's stream, across its reconnects, and a message whose
//! outcome was not `Acked` (rejected, not sent, closed, timed out) is published again
//! either with its id before any later message is stored, or with a new id above every id
//! used. A message published again with its old id after a later one was stored is taken
//! for a duplicate: it is ACKed, not stored. The id `u64::MAX` is the record's "none" and
//! is never deduplicated.

use std::collections::TryReserveError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::{Guid, ProducerId};
use crate::tables;

/// The record's value for a name of which nothing is stored.
const NONE: u64 = u64::MAX;

/// One queue's highest publish id stored, per named producer. Cloned handles share it.
#[derive(Clone)]
pub(crate) struct StoredIds(Arc<[AtomicU64]>);

impl StoredIds {
    /// A record for `names` named producers, each with nothing stored.
    pub(crate) fn new(names: usize) -> Result<Self, TryReserveError> {
        let mut words = tables::vec(names)?;
        words.extend((0..names).map(|_| AtomicU64::new(NONE)));
        Ok(Self(words.into()))
    }

    /// The named producer's entry, or `None` for an anonymous producer.
    fn entry(&self, producer: ProducerId) -> Option<&AtomicU64> {
        self.0.get(producer.0 as usize)
    }

    /// Whether a PUT of `guid` is a duplicate of a message stored already. Records
    /// nothing: the queue [`record`](Self::record)s the id once it has stored the message
    /// (a message it rejects, full, is not stored). On the queue's processor only.
    pub(crate) fn check(&self, guid: Guid) -> Verdict {
        let Some(entry) = self.entry(guid.producer()) else {
            return Verdict::Anonymous;
        };
        // Relaxed: only this processor writes, and readers run on it too.
        let highest = entry.load(Ordering::Relaxed);
        let seq = guid.seq();
        if highest != NONE && seq <= highest {
            Verdict::Duplicate
        } else {
            Verdict::New
        }
    }

    /// Records `guid`'s id as the highest stored for its named producer (nothing for an
    /// anonymous one). On the queue's processor only.
    pub(crate) fn record(&self, guid: Guid) {
        if let Some(entry) = self.entry(guid.producer()) {
            entry.store(guid.seq(), Ordering::Relaxed);
        }
    }

    /// The highest publish id stored for `producer`, if any.
    pub(crate) fn get(&self, producer: ProducerId) -> Option<u64> {
        self.entry(producer)
            .map(|e| e.load(Ordering::Relaxed))
            .filter(|&highest| highest != NONE)
    }
}

/// What [`StoredIds::check`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An anonymous producer's message: never deduplicated.
    Anonymous,
    /// A named producer's message not stored before.
    New,
    /// A named producer's message stored already.
    Duplicate,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_at_or_below_the_highest_stored_are_duplicates_for_named_producers_only() {
        let ids = StoredIds::new(2).unwrap();
        let named = ProducerId(1);
        assert_eq!(ids.get(named), None);
        assert_eq!(ids.check(Guid::new(named, 0)), Verdict::New);
        ids.record(Guid::new(named, 5));
        assert_eq!(ids.get(named), Some(5));
        assert_eq!(ids.check(Guid::new(named, 5)), Verdict::Duplicate);
        assert_eq!(ids.check(Guid::new(named, 3)), Verdict::Duplicate);
        assert_eq!(ids.check(Guid::new(named, 6)), Verdict::New);
        assert_eq!(ids.check(Guid::new(ProducerId(2), 0)), Verdict::Anonymous);
        assert_eq!(ids.get(ProducerId(2)), None);
        assert_eq!(ids.get(ProducerId(0)), None);
    }
}
