//! A producer's frames of fixed layout: `OpenProducer`, the `ProducerOpened` that answers
//! it with a [`StoredWindow`], and `CloseProducer`.

use super::{Field, fixed_layout, nonzero, read_exact};
use crate::error::{DecodeError, EncodeError};
use crate::ids::{ProducerId, QueueId};
use crate::kind::FrameKind;
use crate::limits::MAX_PRODUCER_NAME_LEN;
use crate::reader::Reader;

/// `OpenProducer` (client -> broker): open producer `producer` on `queue`, anonymous or
/// under a name. The broker answers with [`ProducerOpened`] once it is open, or with an
/// error frame that refuses it (`NAME_IN_USE` while the name is open on any connection).
///
/// Body, 13 bytes and the name: `producer: u32`, `queue: u32`, `max_unconfirmed: u32`,
/// `name_len: u8`, `name: bytes(name_len)` (UTF-8; empty: anonymous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenProducer<'a> {
    /// The producer's id on the connection, chosen by the client.
    pub producer: ProducerId,
    /// The queue every message of the producer goes to.
    pub queue: QueueId,
    /// Messages published and without a confirm, at most; at least 1. The broker confirms
    /// a message past it `RejectedProducerFull`, and refuses an open above its own cap.
    pub max_unconfirmed: u32,
    /// The producer's name, at most [`MAX_PRODUCER_NAME_LEN`] bytes; empty for an
    /// anonymous producer. A named producer's messages are deduplicated by the broker: it
    /// numbers them with increasing publish ids, and a message published again with its
    /// id (after a lost connection) is confirmed `Stored` again, never stored twice.
    pub name: &'a str,
}

impl<'a> OpenProducer<'a> {
    pub(crate) const FIXED_LEN: usize = 13;

    pub(crate) fn check(&self) -> Result<(), EncodeError> {
        nonzero(
            self.max_unconfirmed,
            FrameKind::OpenProducer,
            "max_unconfirmed",
        )?;
        if self.name.len() > MAX_PRODUCER_NAME_LEN {
            return Err(EncodeError::NameTooLong {
                len: self.name.len(),
                max: MAX_PRODUCER_NAME_LEN,
            });
        }
        Ok(())
    }

    pub(crate) fn read(body: &'a [u8]) -> Result<Self, DecodeError> {
        let kind = FrameKind::OpenProducer;
        let len = body.len() as u32;
        let mut r = Reader::new(body);
        let (Some(producer), Some(queue), Some(max_unconfirmed), Some(name_len)) =
            (r.u32(), r.u32(), r.u32(), r.u8())
        else {
            return Err(DecodeError::BadLength { kind, len });
        };
        let name = r.rest();
        if name.len() != usize::from(name_len) {
            return Err(DecodeError::BadLength { kind, len });
        }
        nonzero(max_unconfirmed, kind, "max_unconfirmed")?;
        Ok(Self {
            producer: ProducerId(producer),
            queue: QueueId(queue),
            max_unconfirmed,
            name: std::str::from_utf8(name).map_err(|_| DecodeError::BadUtf8)?,
        })
    }

    pub(crate) fn body_len(&self) -> usize {
        Self::FIXED_LEN + self.name.len()
    }

    /// Writes the body; `check` has passed.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.producer.0.to_le_bytes());
        out.extend_from_slice(&self.queue.0.to_le_bytes());
        out.extend_from_slice(&self.max_unconfirmed.to_le_bytes());
        // At most MAX_PRODUCER_NAME_LEN, a u8: `check` passed.
        out.push(self.name.len() as u8);
        out.extend_from_slice(self.name.as_bytes());
    }
}

/// `ProducerOpened` (broker -> client): the answer to an `OpenProducer`: producer
/// `producer` is open, and `stored` says, id by id, which of its name's recent messages
/// its queue has stored (nothing, for an anonymous producer).
///
/// Body, `17 + ceil(known / 8)` bytes: `producer: u32`, `flags: u8` (bit 0: something is
/// stored; no other bit is defined), `last_stored: u64` (0 when nothing is), `known: u32`,
/// then `bits: bytes(ceil(known / 8))`; see [`StoredWindow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerOpened<'a> {
    /// The producer, as the client named it.
    pub producer: ProducerId,
    /// What the producer's queue has stored of its name's messages.
    pub stored: StoredWindow<'a>,
}

/// What a queue has stored of one producer name's messages: the highest publish id stored
/// (`last_stored`) and, for each of the `known` ids at and below it, whether it is stored:
/// bit `i` (byte `i / 8`, bit `i % 8`, least significant first) stands for id
/// `last_stored - i`. Every answer is a fact: an id above `last_stored` is not stored, an
/// id of the window is as its bit says, and of an id older than the window (`last_stored -
/// id >= known`) nothing is said.
///
/// Valid when nothing is stored (`last_stored` `None`, `known` 0, no bits), or when
/// `known` is 1 to [`MAX_STORED_WINDOW`] and at most `last_stored + 1`, bit 0 (the highest
/// itself) is set, and the bits past `known` in the last byte are clear.
///
/// ```
/// use zerodispatch_wire::StoredWindow;
///
/// // 3 and 1 stored, 2 not; 0 older than the window.
/// let window = StoredWindow { last_stored: Some(3), known: 3, bits: &[0b101] };
/// assert_eq!(window.stored(4), Some(false));
/// assert_eq!(window.stored(3), Some(true));
/// assert_eq!(window.stored(2), Some(false));
/// assert_eq!(window.stored(1), Some(true));
/// assert_eq!(window.stored(0), None);
/// assert_eq!(StoredWindow::NOTHING.stored(0), Some(false));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredWindow<'a> {
    /// The highest publish id stored, or `None` if none is (or the producer is anonymous).
    pub last_stored: Option<u64>,
    /// How many ids, from `last_stored` down, `bits` describes.
    pub known: u32,
    /// One bit per id, from `last_stored` down.
    pub bits: &'a [u8],
}

impl StoredWindow<'_> {
    /// Nothing stored.
    pub const NOTHING: StoredWindow<'static> = StoredWindow {
        last_stored: None,
        known: 0,
        bits: &[],
    };

    /// Whether message `id` is stored: `Some(true)`, `Some(false)`, or `None` when the
    /// answer does not reach it (older than the window).
    #[must_use]
    pub fn stored(&self, id: u64) -> Option<bool> {
        let Some(last) = self.last_stored else {
            return Some(false);
        };
        if id > last {
            return Some(false);
        }
        let i = last - id;
        // `get`: a window built by hand may have fewer bits than `known` says (a decoded
        // one never does): those ids read as not stored rather than panic.
        (i < u64::from(self.known)).then(|| {
            self.bits
                .get((i / 8) as usize)
                .is_some_and(|byte| byte & (1 << (i % 8)) != 0)
        })
    }

    /// Whether the fields are consistent (see the type's documentation).
    fn is_valid(&self) -> bool {
        let Some(last) = self.last_stored else {
            return self.known == 0 && self.bits.is_empty();
        };
        let known = u64::from(self.known);
        let bytes = known.div_ceil(8) as usize;
        let spare = (bytes * 8) as u64 - known;
        (1..=u64::from(MAX_STORED_WINDOW)).contains(&known)
            && last.checked_add(1).is_none_or(|ids| known <= ids)
            && self.bits.len() == bytes
            && self.bits[0] & 1 == 1
            && self.bits[bytes - 1]
                .checked_shr(8 - spare as u32)
                .unwrap_or(0)
                == 0
    }
}

/// A [`StoredWindow`]'s `known`, at most: 2^20 ids, 128 KiB of bits in one frame.
pub const MAX_STORED_WINDOW: u32 = 1 << 20;

impl<'a> ProducerOpened<'a> {
    pub(crate) const FIXED_LEN: usize = 17;

    pub(crate) fn body_len(&self) -> usize {
        Self::FIXED_LEN + self.stored.bits.len()
    }

    /// Checks what `write` would write.
    pub(crate) fn check(&self) -> Result<(), EncodeError> {
        if self.stored.is_valid() {
            Ok(())
        } else {
            Err(EncodeError::BadStoredWindow)
        }
    }

    pub(crate) fn read(body: &'a [u8]) -> Result<Self, DecodeError> {
        let kind = FrameKind::ProducerOpened;
        let bad_length = DecodeError::BadLength {
            kind,
            len: body.len() as u32,
        };
        let mut r = Reader::new(body);
        let (Some(producer), Some(flags), Some(last), Some(known)) =
            (r.u32(), r.u8(), r.u64(), r.u32())
        else {
            return Err(bad_length);
        };
        if flags > 1 {
            return Err(DecodeError::BadStoredWindow);
        }
        let bits = r.rest();
        if bits.len() as u64 != u64::from(known).div_ceil(8) {
            return Err(bad_length);
        }
        let stored = StoredWindow {
            last_stored: (flags == 1).then_some(last),
            known,
            bits,
        };
        if !stored.is_valid() || (flags == 0 && last != 0) {
            return Err(DecodeError::BadStoredWindow);
        }
        Ok(Self {
            producer: ProducerId(producer),
            stored,
        })
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.producer.0.to_le_bytes());
        out.push(u8::from(self.stored.last_stored.is_some()));
        out.extend_from_slice(&self.stored.last_stored.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.stored.known.to_le_bytes());
        out.extend_from_slice(self.stored.bits);
    }
}

/// `CloseProducer` (client -> broker): close producer `producer`. The broker confirms
/// every message of it that has no confirm yet (`Closed` or `NotSent` where it has no
/// outcome), then echoes the frame; after the echo the id may be opened again.
///
/// Body, 4 bytes: `producer: u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseProducer {
    /// The producer.
    pub producer: ProducerId,
}

fixed_layout! {
    frame CloseProducer(CloseProducer), 4 bytes:
    producer: ProducerId,
}
