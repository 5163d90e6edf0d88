//! Message identity and data: GUIDs, queue, app, producer and consumer ids, payload handles.

use std::fmt;
use std::hash::Hasher;

/// A 16-byte message GUID, unique per broker: the producer's id, the producer's sequence
/// number of the message, and the generation of the producer's id (how many producers
/// held the id before: a name whose place the broker gave to another name comes back
/// under a new generation, see [`Broker::open_named_producer`](crate::Broker::open_named_producer)).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// The GUID of message `seq` of `producer`, in the id's first generation (0). A
    /// producer's own GUIDs come from [`Producer::guid`](crate::Producer::guid).
    #[must_use]
    pub fn new(producer: ProducerId, seq: u64) -> Self {
        Self::with_generation(producer, 0, seq)
    }

    /// The GUID of message `seq` of `producer` in the id's generation `generation`.
    #[must_use]
    pub fn with_generation(producer: ProducerId, generation: u32, seq: u64) -> Self {
        let mut bytes = [0; 16];
        bytes[..4].copy_from_slice(&producer.0.to_le_bytes());
        bytes[4..12].copy_from_slice(&seq.to_le_bytes());
        bytes[12..].copy_from_slice(&generation.to_le_bytes());
        Self(bytes)
    }

    /// The producer that published the message.
    #[must_use]
    pub fn producer(&self) -> ProducerId {
        ProducerId(u32::from_le_bytes(self.0[..4].try_into().expect("4 bytes")))
    }

    /// The producer's sequence number of the message.
    #[must_use]
    pub fn seq(&self) -> u64 {
        u64::from_le_bytes(self.0[4..12].try_into().expect("8 bytes"))
    }

    /// The generation of the producer's id when it published the message.
    #[must_use]
    pub fn generation(&self) -> u32 {
        u32::from_le_bytes(self.0[12..].try_into().expect("4 bytes"))
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Guid({}:{}/{})",
            self.producer().0,
            self.seq(),
            self.generation()
        )
    }
}

/// A queue's id: an index into the broker's queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(pub u32);

/// A sub-queue (app) id: in a fanout queue, each app gets every message; a priority queue
/// has the single app 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId(pub u16);

/// A producer's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerId(pub u32);

/// A producer's id and its generation: what its GUIDs carry besides the sequence number.
/// A named producer's are its name's place in the broker's table and the place's
/// generation (`names.rs`); an anonymous one's, an id above the names' and the round of
/// ids it was given in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProducerKey {
    pub(crate) id: ProducerId,
    /// How many producers held the id before this one (for a name: how many names).
    pub(crate) generation: u32,
}

impl ProducerKey {
    /// The GUID of this producer's message `seq`.
    pub(crate) fn guid(self, seq: u64) -> Guid {
        Guid::with_generation(self.id, self.generation, seq)
    }
}

/// A consumer's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConsumerId(pub u32);

/// A message's payload, by reference: a handle the application gives at publish and gets
/// back at delivery, and the payload's length.
///
/// The broker never touches payload bytes: it carries 16 bytes per message and allocates
/// nothing for them. The application keeps the bytes where it likes (a preallocated arena
/// indexed by `handle`, a buffer pool, a memory-mapped file) and owns their lifetime: a
/// payload must stay readable until its queue releases it (the release hook,
/// [`OnRelease`](crate::OnRelease), says when), or until its outcome says it was not
/// stored. The ACK is not enough: it means stored, and the message is delivered after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Payload {
    /// The application's handle for the bytes (an index, an offset).
    pub handle: u64,
    /// The payload's length in bytes.
    pub len: u32,
}

/// A hasher for GUIDs: they are unique already (a producer id, a sequence number, a
/// generation), so one folded multiplication a word spreads them, far cheaper than SipHash.
///
/// Folded: the 128-bit product's high half, where every bit of the word counts, is folded
/// onto its low half, whose bits pick the table's bucket. A plain 64-bit product's low bits
/// depend only on the word's low bits, which in a GUID's first word are the producer id:
/// every GUID of one producer then went to one of 32 buckets.
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
            let product = u128::from(self.0 ^ u64::from_le_bytes(word))
                * u128::from(0x51_7c_c1_b7_27_22_0a_95_u64);
            // Truncations meant: the two halves of the product, folded.
            self.0 = (product as u64) ^ ((product >> 64) as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, BuildHasherDefault};

    use super::*;

    /// A hash table picks a GUID's bucket with the hash's low bits and its control byte with
    /// the top seven: the GUIDs of one producer spread over both as random values would.
    #[test]
    fn the_guids_of_one_producer_spread_over_the_buckets() {
        let hash = |seq| {
            BuildHasherDefault::<GuidHasher>::default().hash_one(Guid::new(ProducerId(1), seq))
        };
        let n = 1_u64 << 16;
        let buckets: HashSet<u64> = (0..n).map(|seq| hash(seq) & (n - 1)).collect();
        // Random values would fill 1 - 1/e of them, about 63 %.
        assert!(
            buckets.len() as u64 > n / 2,
            "{} buckets of {n}",
            buckets.len()
        );
        let controls: HashSet<u64> = (0..n).map(|seq| hash(seq) >> 57).collect();
        assert_eq!(controls.len(), 128);
    }
}
