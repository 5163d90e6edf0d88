//! The stamp a TCP run's payload carries in its first [`STAMP_LEN`] bytes: the message's
//! scheduled send time (8 bytes, little-endian nanoseconds since the run's epoch) and its
//! key (publisher and publish id, 8 bytes), and the publishers' record of the scheduled
//! times by publish id ([`Stamps`]), which the confirm handlers read.

use std::sync::atomic::AtomicU64;

/// Bytes of a payload that carry its scheduled send time (8) and its key (publisher and
/// publish id, 8), by which the consumers tell a message that came twice.
pub const STAMP_LEN: usize = 16;

/// Writes the stamp of a message scheduled `at`, keyed by publisher `p` and publish id
/// `id`, into the first [`STAMP_LEN`] bytes of `payload`.
pub(crate) fn write_stamp(payload: &mut [u8], at: u64, p: u64, id: u64) {
    payload[..8].copy_from_slice(&at.to_le_bytes());
    payload[8..16].copy_from_slice(&((p << 40) | id).to_le_bytes());
}

/// The scheduled send times of a producer's unconfirmed messages, by publish id.
pub(crate) struct Stamps(Box<[AtomicU64]>);

impl Stamps {
    /// Room for `places` messages without an outcome (rounded up to a power of two).
    pub(crate) fn new(places: usize) -> Self {
        Self(
            (0..places.next_power_of_two())
                .map(|_| AtomicU64::new(0))
                .collect(),
        )
    }

    /// Message `id`'s place: reused by the id `len` places later.
    pub(crate) fn place(&self, id: u64) -> &AtomicU64 {
        &self.0[(id as usize) & (self.0.len() - 1)]
    }
}

/// A payload's scheduled send time and its key (publisher and publish id).
pub(crate) fn read_stamp(payload: &[u8]) -> (u64, u64) {
    let mut bytes = [0_u8; STAMP_LEN];
    let n = payload.len().min(STAMP_LEN);
    bytes[..n].copy_from_slice(&payload[..n]);
    let (stamp, key) = bytes.split_at(8);
    (
        u64::from_le_bytes(stamp.try_into().expect("8 bytes")),
        u64::from_le_bytes(key.try_into().expect("8 bytes")),
    )
}
