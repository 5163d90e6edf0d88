//! Deduplication: each queue's record, per named producer, of which publish ids it has
//! stored, exactly, over a window of the most recent ids.
//!
//! A named producer ([`Broker::open_named_producer`](crate::Broker::open_named_producer))
//! numbers its messages itself ([`Producer::publish_with_id`](crate::Producer::publish_with_id)),
//! and its id is its name's (see `names.rs`), the same each time the name is opened. So a
//! message published again after a lost connection has the GUID it had, and the queue
//! tells, id by id:
//!
//! * **stored already** (its bit is set): a duplicate. The queue ACKs it `Stored` again (the
//!   producer may have lost the first ACK with its connection), stores and delivers
//!   nothing, hands its payload to the release hook and counts it
//!   ([`QueueStats::deduplicated`](crate::QueueStats::deduplicated)). With replication, a
//!   duplicate of a message still waiting for its quorum is not ACKed at once: the quorum's
//!   ACK goes to the newest producer of the message instead;
//! * **not stored** (above the highest id stored, or in the window with its bit clear): a
//!   new message, stored as ever (a message the queue rejected, full, is not stored, so it
//!   may come again and be stored then, whatever was stored after it);
//! * **older than the window** (`highest - id >= window`): the queue can no longer tell,
//!   so it neither stores it nor says it was stored: `AckStatus::RejectedOutOfWindow`.
//!
//! # Why a window and not "the highest id stored"
//!
//! The highest id alone cannot say whether a lower id was refused: a queue that stored 0,
//! 1 and 3 and rejected 2 (full) would take 2, published again, for a duplicate and ACK a
//! message it never stored. A gap-free sequence (each id stored only after the one before
//! it) would make the highest exact, but it forbids the gaps that per-message refusals
//! leave (a payload too large for the server, a queue full) and ties a producer's
//! numbering to one queue. The window keeps the ids exact and the producer free: it covers
//! every message a producer can have in flight, since the broker refuses a named producer
//! whose `max_unconfirmed` exceeds it (`BrokerError::WindowBelowUnconfirmed`).
//!
//! # The record
//!
//! Per (queue, place of the table of names): one word holding the generation of the name
//! the record is of, one holding the highest id stored, and a ring of `window` bits in
//! which id `x` is bit `x % window`. Only ids in
//! `highest - window + 1 ..= highest` are read; when the highest moves up from `h` to `n`,
//! the bits of the ids between them (`h + 1 .. n`, which now stand where ids of the old
//! window stood) are cleared, so the ring always describes exactly the current window. A
//! new highest one past the last costs one bit set: the record is paid per message in a
//! load, a test and a store or two, never a shift of the whole window.
//!
//! A name that takes a place given up by another (`names.rs`) comes with the next
//! generation. Its first message finds the record of an older generation: for it nothing
//! is stored, and storing it starts the record afresh (the generation written, the ring
//! cleared). A message of an older generation than the record's (the given-up name's, still
//! in flight) is out of the window: never stored under the new name's record.
//!
//! Nothing stored at all is not a value of the highest: it is "the highest's own bit is
//! clear" (once anything is stored, the highest id's bit is set, and it stays set until a
//! higher id replaces it). So every `u64`, `u64::MAX` included, is an id like any other.
//!
//! The words are preallocated when the broker starts and written only by the queue's
//! processor: no lock. They are atomics (relaxed) so that
//! [`Broker::stored_window`](crate::Broker::stored_window) can read them from a dispatcher
//! callback on that processor, after every PUT enqueued before the question.

use std::collections::TryReserveError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::{Guid, ProducerId, ProducerKey};
use crate::limits::{MAX_DEDUP_WINDOW, MIN_DEDUP_WINDOW};
use crate::tables;

/// Bits in a word of the ring.
const BITS: u64 = u64::BITS as u64;

/// Words of a record before its ring: the generation and the highest id.
const WORDS_BEFORE_RING: usize = 2;

/// One queue's stored ids per named producer. Cloned handles share it (one thin pointer,
/// so that the dispatcher callback that reads it fits its inline space).
#[derive(Clone)]
pub(crate) struct StoredIds(Arc<Tables>);

pub(crate) struct Tables {
    /// Per name, `2 + window / 64` words: the generation, the highest id stored, then the
    /// ring of bits.
    words: Box<[AtomicU64]>,
    /// Ids the ring covers: a power of two, `MIN_DEDUP_WINDOW..=MAX_DEDUP_WINDOW`.
    window: u64,
}

impl std::ops::Deref for StoredIds {
    type Target = Tables;
    fn deref(&self) -> &Tables {
        &self.0
    }
}

impl StoredIds {
    /// A record for `names` named producers over `window` ids each (a power of two in
    /// range: the broker's configuration checks it), each with nothing stored.
    pub(crate) fn new(names: usize, window: usize) -> Result<Self, TryReserveError> {
        debug_assert!(window.is_power_of_two());
        debug_assert!((MIN_DEDUP_WINDOW..=MAX_DEDUP_WINDOW).contains(&window));
        let per_name = WORDS_BEFORE_RING + window / BITS as usize;
        let len = names.saturating_mul(per_name);
        let mut words = tables::vec(len)?;
        words.extend((0..len).map(|_| AtomicU64::new(0)));
        Ok(Self(Arc::new(Tables {
            words: words.into(),
            window: window as u64,
        })))
    }

    /// The record of the name at `producer`'s place, or `None` for an anonymous producer.
    fn record_of(&self, producer: ProducerId) -> Option<Record<'_>> {
        let per_name = WORDS_BEFORE_RING + (self.window / BITS) as usize;
        let start = (producer.0 as usize).checked_mul(per_name)?;
        let words = self.words.get(start..start + per_name)?;
        Some(Record {
            generation: &words[0],
            highest: &words[1],
            ring: &words[WORDS_BEFORE_RING..],
            window: self.window,
        })
    }

    /// What the queue is to do with a PUT of `guid`. Records nothing: the queue
    /// [`record`](Self::record)s the id once it has stored the message (a message it
    /// rejects, full, is not stored). On the queue's processor only.
    pub(crate) fn check(&self, guid: Guid) -> Verdict {
        let Some(record) = self.record_of(guid.producer()) else {
            return Verdict::Anonymous;
        };
        let recorded = record.generation();
        if guid.generation() > recorded {
            // A name newer than the record's: nothing of it is stored yet.
            return Verdict::New;
        }
        if guid.generation() < recorded {
            // A name that gave up its place: the record no longer speaks for it.
            return Verdict::OutOfWindow;
        }
        match record.stored(guid.seq()) {
            Some(true) => Verdict::Duplicate,
            Some(false) => Verdict::New,
            None => Verdict::OutOfWindow,
        }
    }

    /// Records `guid`'s id as stored for its named producer (nothing for an anonymous
    /// one). On the queue's processor only, after a [`check`](Self::check) that said
    /// `New`.
    pub(crate) fn record(&self, guid: Guid) {
        if let Some(record) = self.record_of(guid.producer()) {
            if guid.generation() != record.generation() {
                record.restart(guid.generation());
            }
            record.insert(guid.seq());
        }
    }

    /// The answer for a name with nothing stored.
    pub(crate) fn nothing_stored(&self) -> StoredWindow {
        StoredWindow::empty(self.window)
    }

    /// A copy of what the record says for the name `producer` (its place and generation):
    /// the highest id stored and, below it, which ids of the window are stored.
    pub(crate) fn snapshot(&self, producer: ProducerKey) -> StoredWindow {
        let Some(record) = self.record_of(producer.id) else {
            return StoredWindow::empty(self.window);
        };
        if record.generation() != producer.generation {
            // The record is an older name's: nothing of this one is stored.
            return StoredWindow::empty(self.window);
        }
        let Some(highest) = record.highest() else {
            return StoredWindow::empty(self.window);
        };
        // Ids `highest - i` for `i < known`: no further than the window, nor below 0.
        let known = highest
            .checked_add(1)
            .map_or(self.window, |ids| ids.min(self.window));
        let mut bits = vec![0_u64; known.div_ceil(BITS) as usize];
        for i in 0..known {
            if record.bit(highest - i) {
                bits[(i / BITS) as usize] |= 1 << (i % BITS);
            }
        }
        StoredWindow {
            highest: Some(highest),
            known,
            bits,
            window: self.window,
        }
    }
}

/// One name's record in one queue.
struct Record<'a> {
    /// The generation of the name the record is of.
    generation: &'a AtomicU64,
    highest: &'a AtomicU64,
    /// Id `x` is bit `x % window`.
    ring: &'a [AtomicU64],
    window: u64,
}

impl Record<'_> {
    /// Whether id `x`'s bit is set in the ring (meaningful for ids of the window only).
    fn bit(&self, x: u64) -> bool {
        let at = x % self.window;
        debug_assert!(((at / BITS) as usize) < self.ring.len());
        // Relaxed: only this processor writes, and readers run on it too.
        self.ring[(at / BITS) as usize].load(Ordering::Relaxed) & (1 << (at % BITS)) != 0
    }

    fn set(&self, x: u64, on: bool) {
        let at = x % self.window;
        let word = &self.ring[(at / BITS) as usize];
        let mask = 1 << (at % BITS);
        let old = word.load(Ordering::Relaxed);
        word.store(if on { old | mask } else { old & !mask }, Ordering::Relaxed);
    }

    /// Clears the bits of the `n` ids from `first` on (`n` less than the window), a word
    /// at a time: the ring positions `first % window ..` for `n` bits, wrapping once.
    fn clear(&self, first: u64, n: u64) {
        debug_assert!(n < self.window);
        let mut at = first % self.window;
        let mut left = n;
        while left > 0 {
            let (word, bit) = ((at / BITS) as usize, at % BITS);
            let take = left.min(BITS - bit).min(self.window - at);
            // `take` bits from `bit` on: 1 to 64 of them.
            let mask = (u64::MAX >> (BITS - take)) << bit;
            let old = self.ring[word].load(Ordering::Relaxed);
            self.ring[word].store(old & !mask, Ordering::Relaxed);
            left -= take;
            at = (at + take) % self.window;
        }
    }

    /// The generation of the name the record is of.
    fn generation(&self) -> u32 {
        // Relaxed: only this processor writes, and readers run on it too. Only `restart`
        // writes it, with a `u32`.
        self.generation.load(Ordering::Relaxed) as u32
    }

    /// Starts the record afresh for the name of generation `generation`: nothing stored.
    fn restart(&self, generation: u32) {
        self.ring.iter().for_each(|w| w.store(0, Ordering::Relaxed));
        self.highest.store(0, Ordering::Relaxed);
        self.generation
            .store(u64::from(generation), Ordering::Relaxed);
    }

    /// The highest id stored, or `None` when nothing is: the highest's own bit is set
    /// exactly when something is stored.
    fn highest(&self) -> Option<u64> {
        let highest = self.highest.load(Ordering::Relaxed);
        self.bit(highest).then_some(highest)
    }

    /// Whether `x` is stored: `Some` for an id the window covers (or any id while nothing
    /// is stored, and any id above the highest), `None` for one older than the window.
    fn stored(&self, x: u64) -> Option<bool> {
        let Some(highest) = self.highest() else {
            return Some(false);
        };
        if x > highest {
            return Some(false);
        }
        (highest - x < self.window).then(|| self.bit(x))
    }

    /// Marks `x` stored: a new highest clears the ids it passes over.
    fn insert(&self, x: u64) {
        match self.highest() {
            Some(highest) if x <= highest => {
                debug_assert!(highest - x < self.window, "checked: inside the window");
            }
            Some(highest) => {
                // Ids highest+1 .. x are not stored: clear their bits (all of them, once
                // the gap reaches the window), a word at a time, so that a producer whose
                // ids jump cannot make a PUT cost more than window / 64 stores.
                if x - highest >= self.window {
                    self.ring.iter().for_each(|w| w.store(0, Ordering::Relaxed));
                } else {
                    self.clear(highest + 1, x - highest - 1);
                }
                self.highest.store(x, Ordering::Relaxed);
            }
            None => {
                // Nothing stored: every bit is clear already.
                self.highest.store(x, Ordering::Relaxed);
            }
        }
        self.set(x, true);
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
    /// A named producer's message older than the window: whether it was stored cannot be
    /// told.
    OutOfWindow,
}

/// What a queue has stored of one producer name's messages, as
/// [`Broker::stored_window`](crate::Broker::stored_window) answers: the highest publish id
/// stored and, for each of the `known` ids at and below it, whether it is stored. Every
/// answer it gives is a fact; what it cannot tell (ids older than the window), it says so.
///
/// ```
/// use zerodispatch_broker::*;
///
/// let broker = Broker::start(BrokerConfig {
///     queues: vec![QueueConfig::new(QueueMode::Priority)],
///     ..BrokerConfig::default()
/// })?;
/// let producer = broker.open_named_producer("orders", ProducerConfig::default(), |_: &[Ack]| {})?;
/// for id in [0, 1, 3] {
///     producer.publish_with_id(QueueId(0), Payload { handle: id, len: 8 }, id)?;
/// }
/// broker.quiesce()?;
/// let window = broker.stored_window("orders", QueueId(0))?;
/// assert_eq!(window.highest(), Some(3));
/// assert_eq!(window.stored(1), Some(true));
/// assert_eq!(window.stored(2), Some(false), "never published: not stored");
/// assert_eq!(window.stored(4), Some(false));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredWindow {
    highest: Option<u64>,
    /// Ids `highest - i`, `i < known`, are described by bit `i` of `bits`.
    known: u64,
    bits: Vec<u64>,
    window: u64,
}

impl StoredWindow {
    fn empty(window: u64) -> Self {
        Self {
            highest: None,
            known: 0,
            bits: Vec::new(),
            window,
        }
    }

    /// The highest publish id stored, or `None` if none is.
    #[must_use]
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Whether message `id` is stored: `Some(true)` or `Some(false)` as a fact, `None`
    /// when the queue cannot tell (the id is older than its window: `highest - id >=
    /// window`).
    #[must_use]
    pub fn stored(&self, id: u64) -> Option<bool> {
        let Some(highest) = self.highest else {
            return Some(false);
        };
        if id > highest {
            return Some(false);
        }
        let i = highest - id;
        (i < self.known).then(|| self.bits[(i / BITS) as usize] & (1 << (i % BITS)) != 0)
    }

    /// How many ids at and below the highest the answer describes: the window, or fewer
    /// when the highest is lower than it (ids below 0 do not exist); 0 when nothing is
    /// stored.
    #[must_use]
    pub fn known(&self) -> u64 {
        self.known
    }

    /// The queue's window ([`BrokerConfig::dedup_window`](crate::BrokerConfig::dedup_window)).
    #[must_use]
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Bit `i` of the answer: whether id `highest - i` is stored, for `i < known()`.
    #[must_use]
    pub fn bit(&self, i: u64) -> bool {
        i < self.known && self.bits[(i / BITS) as usize] & (1 << (i % BITS)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMED: ProducerId = ProducerId(1);
    const KEY: ProducerKey = ProducerKey {
        id: NAMED,
        generation: 0,
    };

    fn guid(seq: u64) -> Guid {
        Guid::new(NAMED, seq)
    }

    /// Stores `id` as the queue does: checked, then recorded if new.
    fn store(ids: &StoredIds, id: u64) -> Verdict {
        let verdict = ids.check(guid(id));
        if verdict == Verdict::New {
            ids.record(guid(id));
        }
        verdict
    }

    #[test]
    fn a_refused_id_below_the_highest_is_new_not_a_duplicate() {
        let ids = StoredIds::new(2, 64).unwrap();
        for id in [0, 1, 3] {
            assert_eq!(store(&ids, id), Verdict::New);
        }
        assert_eq!(ids.check(guid(2)), Verdict::New, "2 was never stored");
        assert_eq!(ids.check(guid(3)), Verdict::Duplicate);
        assert_eq!(ids.check(guid(1)), Verdict::Duplicate);
        assert_eq!(store(&ids, 2), Verdict::New);
        assert_eq!(ids.check(guid(2)), Verdict::Duplicate);
        let window = ids.snapshot(KEY);
        assert_eq!(window.highest(), Some(3));
        assert_eq!(window.known(), 4);
        assert!((0..=3).all(|id| window.stored(id) == Some(true)));
    }

    #[test]
    fn a_name_of_the_next_generation_starts_the_record_afresh_and_the_older_one_is_refused() {
        let ids = StoredIds::new(2, 64).unwrap();
        for id in [0, 1, 3] {
            assert_eq!(store(&ids, id), Verdict::New);
        }
        let next = ProducerKey {
            id: NAMED,
            generation: 1,
        };
        assert_eq!(
            ids.snapshot(next).highest(),
            None,
            "nothing of the new name"
        );
        assert_eq!(
            ids.check(next.guid(1)),
            Verdict::New,
            "stored for the old name only"
        );
        ids.record(next.guid(1));
        let window = ids.snapshot(next);
        assert_eq!(window.highest(), Some(1));
        assert_eq!(
            window.stored(0),
            Some(false),
            "the old name's 0 is not the new one's"
        );
        assert_eq!(ids.check(next.guid(1)), Verdict::Duplicate);
        // The old name's messages still in flight are never taken for the new name's.
        assert_eq!(ids.check(guid(3)), Verdict::OutOfWindow);
        assert_eq!(ids.check(guid(7)), Verdict::OutOfWindow);
        assert_eq!(ids.snapshot(KEY).highest(), None);
    }

    #[test]
    fn ids_older_than_the_window_are_neither_new_nor_duplicates() {
        let ids = StoredIds::new(2, 64).unwrap();
        store(&ids, 5);
        store(&ids, 100);
        assert_eq!(ids.check(guid(36)), Verdict::OutOfWindow, "100 - 36 = 64");
        assert_eq!(
            ids.check(guid(37)),
            Verdict::New,
            "in the window, not stored"
        );
        assert_eq!(ids.check(guid(5)), Verdict::OutOfWindow);
        let window = ids.snapshot(KEY);
        assert_eq!(window.stored(5), None);
        assert_eq!(window.stored(37), Some(false));
        assert_eq!(window.stored(100), Some(true));
    }

    #[test]
    fn a_new_highest_clears_the_bits_it_passes_over() {
        let ids = StoredIds::new(1, 64).unwrap();
        // NAMED is 1: out of a table of one name, so anonymous.
        assert_eq!(ids.check(guid(0)), Verdict::Anonymous);
        let ids = StoredIds::new(2, 64).unwrap();
        for id in 0..64 {
            store(&ids, id);
        }
        // 64..127 take the bits of 0..63: each must read as not stored until stored.
        store(&ids, 70);
        for id in 64..70 {
            assert_eq!(ids.check(guid(id)), Verdict::New, "id {id}");
        }
        for id in 7..64 {
            assert_eq!(ids.check(guid(id)), Verdict::Duplicate, "id {id}");
        }
        assert_eq!(ids.check(guid(6)), Verdict::OutOfWindow);
        // A jump past the whole window clears it.
        store(&ids, 1_000);
        assert!((937..1_000).all(|id| ids.check(guid(id)) == Verdict::New));
    }

    #[test]
    fn the_word_wise_clear_is_the_bit_by_bit_clear() {
        // Every start and length over two windows' worth of positions: the same bits as a
        // clear of one bit at a time.
        let ids = StoredIds::new(2, 128).unwrap();
        let record = ids.record_of(NAMED).unwrap();
        for first in 0..256_u64 {
            for n in 0..128_u64 {
                record
                    .ring
                    .iter()
                    .for_each(|w| w.store(u64::MAX, Ordering::Relaxed));
                record.clear(first, n);
                for x in first..first + 128 {
                    let cleared = x < first + n;
                    assert_eq!(record.bit(x), !cleared, "first {first}, n {n}, id {x}");
                }
            }
        }
    }

    #[test]
    fn every_u64_is_an_id_and_nothing_stored_is_no_id() {
        let ids = StoredIds::new(2, 64).unwrap();
        assert_eq!(ids.snapshot(KEY).highest(), None);
        assert_eq!(store(&ids, u64::MAX), Verdict::New);
        assert_eq!(ids.check(guid(u64::MAX)), Verdict::Duplicate);
        assert_eq!(ids.snapshot(KEY).highest(), Some(u64::MAX));
        assert_eq!(ids.check(guid(u64::MAX - 1)), Verdict::New);
        assert_eq!(ids.check(guid(0)), Verdict::OutOfWindow);
        // Id 0 stored first: its bit is bit 0, which must not read as "nothing stored".
        let ids = StoredIds::new(2, 64).unwrap();
        assert_eq!(ids.check(guid(0)), Verdict::New);
        store(&ids, 0);
        assert_eq!(ids.check(guid(0)), Verdict::Duplicate);
        assert_eq!(ids.snapshot(KEY).highest(), Some(0));
        assert_eq!(ids.snapshot(KEY).known(), 1);
    }
}
