//! The batched frames as borrowed views: [`PublishFrame`], [`PublishConfirmFrame`],
//! [`DeliverFrame`] and [`ConsumerConfirmFrame`], each with an iterator over its messages.
//!
//! Every batch body has the same shape: the id of the producer or consumer it belongs to
//! (`u32`), the message count (`u32`, 1 to [`MAX_MESSAGES_PER_FRAME`]), then `count`
//! entries of the kind's layout, filling the body exactly.
//!
//! A view is made only by decoding, which walks every entry once and checks it, so that
//! iterating afterwards cannot fail: the iterators read the same bytes again and yield
//! exactly `count` entries. Nothing is allocated; payloads are slices of the decoded
//! buffer, valid as long as it is.

use crate::error::DecodeError;
use crate::ids::{ConsumerId, DeliveryToken, Guid, ProducerId, PublishId};
use crate::kind::FrameKind;
use crate::limits::{MAX_MESSAGES_PER_FRAME, MAX_PAYLOAD_LEN};
use crate::reader::Reader;
use crate::status::ConfirmStatus;

/// Bytes of a batch body before its entries: owner id and count.
pub(crate) const BATCH_PREFIX_LEN: usize = 8;

/// Why an entry cannot be read.
enum EntryError {
    /// The body ends inside it.
    Short,
    /// It holds a value the protocol refuses.
    Bad(DecodeError),
}

/// The shape all batches share: owner id, count, and the checked entries' bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawBatch<'a> {
    owner: u32,
    count: u32,
    /// `count` entries, each checked by the kind's entry reader, and nothing else.
    entries: &'a [u8],
}

impl<'a> RawBatch<'a> {
    /// Reads a batch body of `kind` whose entries `read_entry` reads, each at least
    /// `min_entry` bytes.
    fn read<T>(
        kind: FrameKind,
        body: &'a [u8],
        min_entry: usize,
        read_entry: impl Fn(&mut Reader<'a>) -> Result<T, EntryError>,
    ) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let (Some(owner), Some(count)) = (r.u32(), r.u32()) else {
            return Err(DecodeError::BadLength {
                kind,
                len: body.len() as u32,
            });
        };
        if count == 0 {
            return Err(DecodeError::Zero {
                kind,
                field: "count",
            });
        }
        if count > MAX_MESSAGES_PER_FRAME {
            return Err(DecodeError::TooManyMessages {
                kind,
                count,
                max: MAX_MESSAGES_PER_FRAME,
            });
        }
        let entries = r.rest();
        let mismatch = DecodeError::CountMismatch { kind, count };
        // Refuse a count the body cannot hold before walking it; count is at most 4096.
        if count as usize * min_entry > entries.len() {
            return Err(mismatch);
        }
        let mut walk = Reader::new(entries);
        for _ in 0..count {
            match read_entry(&mut walk) {
                Ok(_) => {}
                Err(EntryError::Short) => return Err(mismatch),
                Err(EntryError::Bad(error)) => return Err(error),
            }
        }
        if !walk.is_empty() {
            return Err(mismatch);
        }
        Ok(Self {
            owner,
            count,
            entries,
        })
    }

    pub(crate) fn body_len(&self) -> usize {
        BATCH_PREFIX_LEN + self.entries.len()
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.owner.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(self.entries);
    }
}

fn read_payload<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], EntryError> {
    let len = r.u32().ok_or(EntryError::Short)?;
    if len > MAX_PAYLOAD_LEN {
        return Err(EntryError::Bad(DecodeError::PayloadTooLarge {
            len,
            max: MAX_PAYLOAD_LEN,
        }));
    }
    r.bytes(len as usize).ok_or(EntryError::Short)
}

fn read_publish<'a>(r: &mut Reader<'a>) -> Result<(PublishId, &'a [u8]), EntryError> {
    let id = PublishId(r.u64().ok_or(EntryError::Short)?);
    Ok((id, read_payload(r)?))
}

fn read_publish_confirm(r: &mut Reader<'_>) -> Result<(PublishId, ConfirmStatus), EntryError> {
    let id = PublishId(r.u64().ok_or(EntryError::Short)?);
    let status = r.u8().ok_or(EntryError::Short)?;
    let status = ConfirmStatus::from_u8(status)
        .ok_or(EntryError::Bad(DecodeError::UnknownStatus { status }))?;
    Ok((id, status))
}

fn read_deliver<'a>(r: &mut Reader<'a>) -> Result<(Guid, DeliveryToken, &'a [u8]), EntryError> {
    let guid = r.guid().ok_or(EntryError::Short)?;
    let token = r.token().ok_or(EntryError::Short)?;
    Ok((guid, token, read_payload(r)?))
}

fn read_consumer_confirm(r: &mut Reader<'_>) -> Result<(Guid, DeliveryToken), EntryError> {
    let guid = r.guid().ok_or(EntryError::Short)?;
    Ok((guid, r.token().ok_or(EntryError::Short)?))
}

/// The entries of a decoded batch frame, in order, borrowed from the decoded buffer: what
/// the frames' `messages()`, `confirms()` and `deliveries()` return (under the names
/// [`PublishMessages`], [`PublishConfirms`], [`DeliveredMessages`],
/// [`ConfirmedDeliveries`]).
/// Every entry was checked when the frame was decoded, so iterating cannot fail.
#[derive(Clone, Debug)]
pub struct Entries<'a, T> {
    reader: Reader<'a>,
    left: u32,
    read_entry: fn(&mut Reader<'a>) -> Result<T, EntryError>,
}

impl<'a, T> Entries<'a, T> {
    fn new(batch: &RawBatch<'a>, read_entry: fn(&mut Reader<'a>) -> Result<T, EntryError>) -> Self {
        Self {
            reader: Reader::new(batch.entries),
            left: batch.count,
            read_entry,
        }
    }
}

impl<T> Iterator for Entries<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Checked when decoded: an error here is impossible, and would end the iteration.
        let entry = (self.read_entry)(&mut self.reader).ok();
        if entry.is_none() {
            self.left = 0;
        }
        entry
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl<T> ExactSizeIterator for Entries<'_, T> {}

/// Defines a batch frame's view over a [`RawBatch`]: the struct, its decoding, its three
/// accessors (the owner, the count, the entries) and the type of its entries, which the
/// four kinds write alike but for names, documents and the entry reader.
macro_rules! batch_frame {
    (
        $(#[$doc:meta])*
        $name:ident($kind:ident, $read_entry:ident, min entry $min:literal),
        of $owner:ident: $owner_ty:ident;
        $(#[$entries_doc:meta])*
        fn $entries:ident() -> $entries_ty:ident = $entry:ty, counting $counted:literal;
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name<'a>(pub(crate) RawBatch<'a>);

        impl<'a> $name<'a> {
            pub(crate) const MIN_ENTRY: usize = $min;

            pub(crate) fn read(body: &'a [u8]) -> Result<Self, DecodeError> {
                RawBatch::read(FrameKind::$kind, body, Self::MIN_ENTRY, $read_entry).map(Self)
            }

            #[doc = concat!("The ", stringify!($owner), ".")]
            #[must_use]
            pub fn $owner(&self) -> $owner_ty {
                $owner_ty(self.0.owner)
            }

            #[doc = concat!("The number of ", $counted, ", 1 to [`MAX_MESSAGES_PER_FRAME`].")]
            #[must_use]
            pub fn count(&self) -> u32 {
                self.0.count
            }

            $(#[$entries_doc])*
            #[must_use]
            pub fn $entries(&self) -> $entries_ty<'a> {
                Entries::new(&self.0, $read_entry)
            }
        }

        #[doc = concat!("The ", $counted, " of a [`", stringify!($name), "`], as [`",
            stringify!($name), "::", stringify!($entries), "`] yields them.")]
        pub type $entries_ty<'a> = Entries<'a, $entry>;
    };
}

batch_frame! {
    /// `Publish` (client -> broker): a batch of messages of one producer, for its queue.
    ///
    /// Entry, 12 bytes and the payload: `publish_id: u64`, `payload_len: u32` (at most
    /// [`MAX_PAYLOAD_LEN`]), then the payload's bytes. Build one with
    /// [`PublishBuilder`](crate::PublishBuilder).
    PublishFrame(Publish, read_publish, min entry 12), of producer: ProducerId;
    /// The messages in order: each one's publishing id and payload, borrowed from the
    /// decoded buffer.
    fn messages() -> PublishMessages = (PublishId, &'a [u8]), counting "messages";
}

batch_frame! {
    /// `PublishConfirm` (broker -> client): the outcomes of a batch of one producer's
    /// messages, each exactly once.
    ///
    /// Entry, 9 bytes: `publish_id: u64`, `status: u8` (a [`ConfirmStatus`]). Build one with
    /// [`PublishConfirmBuilder`](crate::PublishConfirmBuilder).
    PublishConfirmFrame(PublishConfirm, read_publish_confirm, min entry 9), of producer: ProducerId;
    /// The confirms in order: each message's publishing id and outcome.
    fn confirms() -> PublishConfirms = (PublishId, ConfirmStatus), counting "confirms";
}

batch_frame! {
    /// `Deliver` (broker -> client): a batch of messages for one consumer, each taking one of
    /// its credits.
    ///
    /// Entry, 24 bytes and the payload: `guid: [u8; 16]`, `token: u32` (the delivery's
    /// [`DeliveryToken`]), `payload_len: u32` (at most [`MAX_PAYLOAD_LEN`]), then the
    /// payload's bytes. Build one with [`DeliverBuilder`](crate::DeliverBuilder).
    DeliverFrame(Deliver, read_deliver, min entry 24), of consumer: ConsumerId;
    /// The messages in order: each one's GUID, delivery token (to confirm it with) and
    /// payload, borrowed from the decoded buffer.
    fn messages() -> DeliveredMessages = (Guid, DeliveryToken, &'a [u8]), counting "messages";
}

batch_frame! {
    /// `ConsumerConfirm` (client -> broker): consumer `consumer` has processed these
    /// delivered messages.
    ///
    /// Entry, 20 bytes: `guid: [u8; 16]`, `token: u32`: a delivered message's GUID and
    /// the [`DeliveryToken`] its delivery carried. Build one with
    /// [`ConsumerConfirmBuilder`](crate::ConsumerConfirmBuilder).
    ConsumerConfirmFrame(ConsumerConfirm, read_consumer_confirm, min entry 20),
    of consumer: ConsumerId;
    /// The confirmed deliveries, in order: each one's GUID and delivery token.
    fn deliveries() -> ConfirmedDeliveries = (Guid, DeliveryToken), counting "confirms";
}
