//! [`PayloadStore`]: where the bytes of the messages the server's connections publish
//! live while the broker carries their handles.
//!
//! The broker never touches payload bytes: a message travels as a
//! `Payload { handle, len }`. The server keeps the bytes in a slab of fixed-size slots,
//! allocated once when the server starts, and hands the broker a handle that names a slot.
//! A slot is taken when a message is published and given back when nobody needs its
//! bytes any more, which a reference count per slot tells:
//!
//! - at publish: 1 for the producer's outcome (the ACK), plus 1 per share a consumer will
//!   confirm (one per app in a fanout queue, one in a priority queue);
//! - the ACK drops 1 if the message was stored (`Stored`), or every reference if it was not
//!   (refused, closed, not sent: nothing was delivered);
//! - each consumer confirm received from the wire drops 1, and so does each share the
//!   broker drops (a fanout consumer closed with messages it had not confirmed).
//!
//! # Concurrency, without a lock
//!
//! A slot's bytes are `AtomicU64` words written and read with `Relaxed` operations: the
//! happens-before edge from the writer (the connection that published) to the readers (the
//! connections that deliver) is the broker's own hand-off of the message through its
//! processors' queues. The slot's metadata (length, publishing id, and one word holding
//! its generation and reference count) are atomics too, and the free list is a
//! `crossbeam_queue::ArrayQueue` of slot indexes, whose push and pop order a slot's release
//! before its next use.
//!
//! # Handles, and why they carry a generation
//!
//! A handle is the slot's index in its low 32 bits and the slot's generation (bumped each
//! time the slot is taken) in its high 32 bits. The design first called for the bare
//! index; the generation is there so that a reference dropped twice by mistake (a late
//! outcome after the broker shut down, say) can never release the slot's next message:
//! a drop whose generation is not the slot's current one is refused and counted
//! ([`PayloadStore::stale_handles`]). Publishers drive the generations, so they do not
//! wrap: a slot released at its last one (`u32::MAX`, after that many messages) is retired,
//! and its part keeps one slot less.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crossbeam_queue::ArrayQueue;
use zerodispatch_broker::{OnRelease, Payload};

/// The metadata of one slot.
#[derive(Debug, Default)]
struct SlotMeta {
    /// The generation (high 32 bits) and the reference count (low 32 bits).
    state: AtomicU64,
    /// The payload's length.
    len: AtomicU32,
    /// The publishing id the client gave the message.
    publish_id: AtomicU64,
    /// The part ([`PayloadStore::try_store_in`]) whose quota the slot counts against while
    /// it is taken.
    part: AtomicU32,
}

/// One part of the store: at most `quota` slots taken at once.
#[derive(Debug)]
struct Part {
    /// Slots taken now and not yet back in the free list, plus takers between their count
    /// and their pop. Invariant: at most `quota` once every taker has checked it.
    used: AtomicUsize,
    quota: usize,
}

/// A preallocated, lock-free store of message payloads: `slots` slots of `slot_size`
/// bytes each, reference-counted (see the module's documentation).
///
/// ```
/// use zerodispatch_server::PayloadStore;
///
/// let store = PayloadStore::new(2, 16);
/// let handle = store.try_store(b"hello", 7, 2).unwrap().unwrap();
/// assert_eq!(store.free_slots(), 1);
/// let mut out = Vec::new();
/// assert_eq!(store.read(handle, &mut out), Some(7));
/// assert_eq!(out, b"hello");
/// assert!(store.release(handle, 1));
/// assert!(store.release(handle, 1));
/// assert_eq!(store.free_slots(), 2);
/// assert!(!store.release(handle, 1), "a released handle is stale");
/// ```
#[derive(Debug)]
pub struct PayloadStore {
    /// Every slot's bytes, slot after slot, `words_per_slot` words each.
    words: Box<[AtomicU64]>,
    words_per_slot: usize,
    slot_size: usize,
    meta: Box<[SlotMeta]>,
    /// The indexes of the free slots.
    free: ArrayQueue<u32>,
    /// The parts the slots are shared out to, whose quotas add up to the slots: a part
    /// that has used its quota is refused a slot although others are free, and no part can
    /// take a slot another part's quota promises (see [`try_store_in`](Self::try_store_in)).
    parts: Box<[Part]>,
    /// Uses of stale handles refused.
    stale: AtomicU64,
}

/// A payload longer than the store's slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge {
    /// The payload's length.
    pub len: usize,
    /// The slots' size.
    pub slot_size: usize,
}

/// A store the machine cannot provide, or of no slot at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreTooLarge {
    /// The slots asked for.
    pub slots: usize,
    /// The bytes of payload they need.
    pub bytes: usize,
}

impl std::fmt::Display for StoreTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a payload store of {} slots ({} bytes) cannot be had: give 1 to u32::MAX slots, at least one per queue, that fit the machine's memory",
            self.slots, self.bytes
        )
    }
}

impl std::error::Error for StoreTooLarge {}

const GENERATION_SHIFT: u32 = 32;
const REFS: u64 = u32::MAX as u64;
/// A slot's last generation: released at it, the slot is retired (publishers drive the
/// count, so it must not wrap and make an old handle current again).
const LAST_GENERATION: u64 = u32::MAX as u64;

impl PayloadStore {
    /// A store of `slots` slots of `slot_size` bytes, all allocated now.
    ///
    /// # Panics
    ///
    /// If `slots` is 0 or above `u32::MAX`, or the memory cannot be had: see
    /// [`try_new`](Self::try_new), which says so instead.
    #[must_use]
    pub fn new(slots: usize, slot_size: usize) -> Self {
        match Self::try_new(slots, slot_size) {
            Ok(store) => store,
            Err(e) => panic!("{e}"),
        }
    }

    /// A store of `slots` slots of `slot_size` bytes, all allocated now, or an error if
    /// `slots` is 0 or above `u32::MAX` or the machine cannot provide the memory.
    ///
    /// ```
    /// use zerodispatch_server::PayloadStore;
    /// assert!(PayloadStore::try_new(4, 64).is_ok());
    /// assert!(PayloadStore::try_new(0, 64).is_err());
    /// assert!(PayloadStore::try_new(u32::MAX as usize, 1 << 30).is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreTooLarge`], with the bytes asked for.
    pub fn try_new(slots: usize, slot_size: usize) -> Result<Self, StoreTooLarge> {
        Self::try_with_quotas(&[slots], slot_size)
    }

    /// A store of `slots` slots shared out to `parts` parts of (nearly) equal quotas, the
    /// first `slots % parts` taking one more; `parts` 0 is taken for 1. The server gives
    /// each of its broker's queues a part, so that no queue can take the slots another
    /// needs.
    ///
    /// ```
    /// use zerodispatch_server::PayloadStore;
    /// let store = PayloadStore::try_split(5, 2, 8)?;
    /// assert_eq!(store.quota(0), 3);
    /// assert_eq!(store.quota(1), 2);
    /// # Ok::<(), zerodispatch_server::StoreTooLarge>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_new`](Self::try_new); also when `slots` is less than `parts` (a part of no
    /// slot could store nothing).
    pub fn try_split(slots: usize, parts: usize, slot_size: usize) -> Result<Self, StoreTooLarge> {
        let parts = parts.max(1);
        if slots < parts {
            return Err(StoreTooLarge {
                slots,
                bytes: slots.saturating_mul(slot_size),
            });
        }
        let quotas: Vec<usize> = (0..parts)
            .map(|i| slots / parts + usize::from(i < slots % parts))
            .collect();
        Self::try_with_quotas(&quotas, slot_size)
    }

    /// A store of one part per quota, `quotas.iter().sum()` slots in all.
    ///
    /// # Errors
    ///
    /// As [`try_new`](Self::try_new), for the sum; also for no part or a quota of 0.
    pub fn try_with_quotas(quotas: &[usize], slot_size: usize) -> Result<Self, StoreTooLarge> {
        let slots = quotas
            .iter()
            .try_fold(0_usize, |sum, &q| sum.checked_add(q));
        let slots = slots.unwrap_or(usize::MAX);
        let words_per_slot = slot_size.div_ceil(8);
        let too_large = StoreTooLarge {
            slots,
            bytes: slots.saturating_mul(words_per_slot.saturating_mul(8)),
        };
        if slots == 0 || slots > u32::MAX as usize || quotas.contains(&0) {
            return Err(too_large);
        }
        let mut words = Vec::new();
        let mut meta = Vec::new();
        words
            .try_reserve_exact(slots.checked_mul(words_per_slot).ok_or(too_large)?)
            .map_err(|_| too_large)?;
        meta.try_reserve_exact(slots).map_err(|_| too_large)?;
        words.extend((0..words.capacity()).map(|_| AtomicU64::new(0)));
        meta.extend((0..slots).map(|_| SlotMeta::default()));
        let free = ArrayQueue::new(slots);
        for i in 0..slots {
            // `slots` places: cannot fail.
            let _ = free.push(i as u32);
        }
        Ok(Self {
            words: words.into_boxed_slice(),
            words_per_slot,
            slot_size,
            meta: meta.into_boxed_slice(),
            free,
            parts: quotas
                .iter()
                .map(|&quota| Part {
                    used: AtomicUsize::new(0),
                    quota,
                })
                .collect(),
            stale: AtomicU64::new(0),
        })
    }

    /// The slots' size: the largest payload the store takes.
    #[must_use]
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// The number of slots.
    #[must_use]
    pub fn slots(&self) -> usize {
        self.meta.len()
    }

    /// Slots free now.
    #[must_use]
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Uses of a handle refused so far (reads and releases) because it named a slot's
    /// earlier message: never expected, a sign of a reference dropped twice.
    #[must_use]
    pub fn stale_handles(&self) -> u64 {
        self.stale.load(Ordering::Relaxed)
    }

    /// The parts the slots are shared out to.
    #[must_use]
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// Part `part`'s quota: slots it may hold at once (0 for no such part).
    #[must_use]
    pub fn quota(&self, part: usize) -> usize {
        self.parts.get(part).map_or(0, |p| p.quota)
    }

    /// Slots part `part` holds now (0 for no such part).
    #[must_use]
    pub fn used(&self, part: usize) -> usize {
        self.parts
            .get(part)
            .map_or(0, |p| p.used.load(Ordering::Relaxed).min(p.quota))
    }

    /// As [`try_store_in`](Self::try_store_in), in part 0.
    ///
    /// # Errors
    ///
    /// As [`try_store_in`](Self::try_store_in).
    pub fn try_store(
        &self,
        bytes: &[u8],
        publish_id: u64,
        refs: u32,
    ) -> Result<Option<u64>, TooLarge> {
        self.try_store_in(0, bytes, publish_id, refs)
    }

    /// Copies `bytes` into a free slot counted against part `part % parts()`'s quota,
    /// with `refs` references and the publishing id `publish_id`, and returns its handle;
    /// `Ok(None)` when the part has used its quota. Never waits, allocates nothing.
    ///
    /// The quotas add up to the slots, so a part under its quota always finds a free slot:
    /// every slot out of the free list is counted in some part's `used` from before it is
    /// popped until after it is pushed back, so while the `used` of all parts, this
    /// taker's count included, is at most the slots, fewer than all slots are out.
    ///
    /// # Errors
    ///
    /// `TooLarge` when `bytes` is longer than a slot: nothing is stored.
    pub fn try_store_in(
        &self,
        part: usize,
        bytes: &[u8],
        publish_id: u64,
        refs: u32,
    ) -> Result<Option<u64>, TooLarge> {
        if bytes.len() > self.slot_size {
            return Err(TooLarge {
                len: bytes.len(),
                slot_size: self.slot_size,
            });
        }
        let part = part % self.parts.len();
        let quota = &self.parts[part];
        // Relaxed: the count is a budget, not a hand-off; the free list's push and pop
        // order the slot itself.
        if quota.used.fetch_add(1, Ordering::Relaxed) >= quota.quota {
            quota.used.fetch_sub(1, Ordering::Relaxed);
            return Ok(None);
        }
        let Some(index) = self.free.pop() else {
            // Cannot happen by the quotas' sum (see above); refused rather than assumed.
            debug_assert!(false, "a part under its quota found no free slot");
            quota.used.fetch_sub(1, Ordering::Relaxed);
            return Ok(None);
        };
        let first = index as usize * self.words_per_slot;
        let words = &self.words[first..first + self.words_per_slot];
        let mut chunks = bytes.chunks(8);
        for (word, chunk) in words.iter().zip(&mut chunks) {
            let mut le = [0; 8];
            le[..chunk.len()].copy_from_slice(chunk);
            word.store(u64::from_le_bytes(le), Ordering::Relaxed);
        }
        let meta = &self.meta[index as usize];
        meta.len.store(bytes.len() as u32, Ordering::Relaxed);
        meta.publish_id.store(publish_id, Ordering::Relaxed);
        // At most the parts' count, a few thousand: a u32.
        meta.part.store(part as u32, Ordering::Relaxed);
        // The slot is ours alone (popped from the free list): no other writer. Below
        // `u32::MAX`: a slot is retired at its last generation (`release`), never wrapped.
        let generation = (meta.state.load(Ordering::Relaxed) >> GENERATION_SHIFT) + 1;
        meta.state.store(
            generation << GENERATION_SHIFT | u64::from(refs),
            Ordering::Release,
        );
        Ok(Some(generation << GENERATION_SHIFT | u64::from(index)))
    }

    /// The slot of `handle`, if it is the slot's current message; a stale handle is
    /// counted.
    fn slot(&self, handle: u64) -> Option<&SlotMeta> {
        let current = self.meta.get((handle & REFS) as usize).filter(|meta| {
            let state = meta.state.load(Ordering::Acquire);
            state >> GENERATION_SHIFT == handle >> GENERATION_SHIFT && state & REFS != 0
        });
        if current.is_none() {
            self.stale.fetch_add(1, Ordering::Relaxed);
        }
        current
    }

    /// The publishing id of the message at `handle`, or `None` (counted) for a stale
    /// handle.
    #[must_use]
    pub fn publish_id(&self, handle: u64) -> Option<u64> {
        self.slot(handle)
            .map(|meta| meta.publish_id.load(Ordering::Relaxed))
    }

    /// Replaces the contents of `out` with the payload at `handle` and returns its
    /// publishing id; `None` (counted) for a stale handle. Allocates only if `out` has less capacity
    /// than the payload.
    pub fn read(&self, handle: u64, out: &mut Vec<u8>) -> Option<u64> {
        let meta = self.slot(handle)?;
        let len = meta.len.load(Ordering::Relaxed) as usize;
        let first = (handle & REFS) as usize * self.words_per_slot;
        out.clear();
        for word in &self.words[first..first + len.div_ceil(8)] {
            out.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        out.truncate(len);
        Some(meta.publish_id.load(Ordering::Relaxed))
    }

    /// The hook to give the broker as its `on_release`
    /// ([`BrokerConfig::on_release`](zerodispatch_broker::BrokerConfig::on_release)): each
    /// payload its queues release drops the one reference the message holds for its stay
    /// in the queue.
    pub fn on_release(self: &Arc<Self>) -> OnRelease {
        let store = Arc::clone(self);
        OnRelease::new(move |released: &[Payload]| {
            for payload in released {
                store.release(payload.handle, 1);
            }
        })
    }

    /// Drops `n` references of the message at `handle` (all that are left if fewer), and
    /// frees its slot when none is left. Returns `false`, and counts it, for a stale handle.
    pub fn release(&self, handle: u64, n: u32) -> bool {
        let index = (handle & REFS) as usize;
        let Some(meta) = self.meta.get(index) else {
            self.stale.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let generation = handle >> GENERATION_SHIFT;
        let mut state = meta.state.load(Ordering::Acquire);
        loop {
            let refs = state & REFS;
            if state >> GENERATION_SHIFT != generation || refs == 0 {
                self.stale.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            let left = refs.saturating_sub(u64::from(n));
            match meta.state.compare_exchange_weak(
                state,
                generation << GENERATION_SHIFT | left,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) if left == 0 => break,
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
        if generation == LAST_GENERATION {
            // Retired: a generation never repeats, so the slot is not taken again. It stays
            // counted in its part, whose quota is one slot less from now on.
            return true;
        }
        // Read before the push: once in the free list, the slot may be taken again.
        let part = meta.part.load(Ordering::Relaxed) as usize;
        // As many places as slots, and this one is not in the list: cannot fail.
        let _ = self.free.push(index as u32);
        // After the push: the slot counts against its part until it is back in the list.
        self.parts[part].used.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// Drops every reference of the message at `handle`: it was not stored.
    pub fn release_all(&self, handle: u64) -> bool {
        self.release(handle, u32::MAX)
    }
}

#[cfg(test)]
mod tests;
