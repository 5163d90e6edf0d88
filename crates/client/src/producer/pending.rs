//! The pending buffer ([`Pending`]): messages taken and not yet encoded, which the I/O
//! task swaps out and encodes as `Publish` frames; and the unconfirmed table's hasher.

use std::collections::TryReserveError;
use std::hash::Hasher;

use zerodispatch_wire::{
    EncodeError, MAX_FRAME_LEN, MAX_MESSAGES_PER_FRAME, ProducerId, PublishBuilder, PublishId,
};

/// Bytes of a `Publish` frame before its entries: its producer and count.
const PUBLISH_PREFIX: usize = 8;
/// Bytes of a `Publish` entry besides its payload: its publish id and payload length.
const PUBLISH_ENTRY: usize = 12;

/// Messages taken and not yet encoded: their ids and lengths, and their payloads end to
/// end.
#[derive(Default)]
pub(crate) struct Pending {
    pub(super) bytes: Vec<u8>,
    pub(super) entries: Vec<(u64, u32)>,
}

impl Pending {
    /// A buffer with room for `messages` entries and 64 KiB of payloads.
    pub(crate) fn with_capacity(messages: usize) -> Result<Self, TryReserveError> {
        let mut pending = Self::default();
        pending.entries.try_reserve_exact(messages)?;
        pending.bytes.try_reserve_exact(64 * 1024)?;
        Ok(pending)
    }

    pub(super) fn push(&mut self, id: u64, payload: &[u8]) {
        self.entries.push((id, payload.len() as u32));
        self.bytes.extend_from_slice(payload);
    }

    /// Whether the messages fill a `Publish` frame: the timer sends them without waiting
    /// for its tick.
    pub(super) fn fills_frame(&self) -> bool {
        self.entries.len() >= MAX_MESSAGES_PER_FRAME as usize
            || PUBLISH_PREFIX + self.entries.len() * PUBLISH_ENTRY + self.bytes.len()
                >= MAX_FRAME_LEN as usize
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    /// Appends the messages to `out` as `Publish` frames of `producer`, `batch_size`
    /// messages at most each (and within the protocol's limits), and empties itself.
    /// Returns the frames written.
    pub(crate) fn encode(
        &mut self,
        out: &mut Vec<u8>,
        producer: ProducerId,
        batch_size: u32,
    ) -> u32 {
        let mut frames = 0;
        let mut offset = 0;
        let mut next = 0;
        while next < self.entries.len() {
            let mut frame = PublishBuilder::begin(out, producer);
            while let Some(&(id, len)) = self.entries.get(next) {
                if frame.count() == batch_size {
                    break;
                }
                let payload = &self.bytes[offset..offset + len as usize];
                match frame.push(PublishId(id), payload) {
                    Ok(()) => {
                        offset += len as usize;
                        next += 1;
                    }
                    Err(EncodeError::BatchFull | EncodeError::FrameFull { .. }) => break,
                    Err(other) => {
                        // `take` refuses a payload over the limit; nothing else fails.
                        debug_assert!(false, "a pending message the codec refuses: {other}");
                        offset += len as usize;
                        next += 1;
                    }
                }
            }
            if frame.finish().is_ok() {
                frames += 1;
            }
        }
        self.clear();
        frames
    }
}

/// Hashes a publish id for the unconfirmed table: one multiplication (Fibonacci hashing),
/// which spreads consecutive ids over the table's buckets and control bits.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
