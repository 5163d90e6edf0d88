//! Builders that encode a batched frame message by message, straight into the caller's
//! buffer: [`PublishBuilder`], [`PublishConfirmBuilder`], [`DeliverBuilder`] and
//! [`ConsumerConfirmBuilder`].
//!
//! A builder writes the header and the batch prefix when it begins, appends each message
//! as it is pushed, and patches the count and the length when it finishes. A push that
//! would break a limit is refused and writes nothing, so the frame so far stays valid:
//! finish it and begin another. A builder dropped unfinished (or finished empty) removes
//! what it wrote, leaving the buffer as it found it.
//!
//! Nothing is allocated while the buffer has room: a sender that reuses one buffer (cleared
//! after each write to its socket) allocates only until the buffer has grown to its
//! largest batch.

use crate::error::EncodeError;
use crate::header::Header;
use crate::ids::{ConsumerId, DeliveryToken, Guid, ProducerId, PublishId};
use crate::kind::FrameKind;
use crate::limits::{HEADER_LEN, MAX_FRAME_LEN, MAX_MESSAGES_PER_FRAME, MAX_PAYLOAD_LEN};
use crate::status::ConfirmStatus;

/// The frame a builder is writing at the end of its buffer.
#[derive(Debug)]
struct BatchWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Where the frame's header starts in `out`; everything before is the caller's.
    start: usize,
    kind: FrameKind,
    /// Entries written so far, at most MAX_MESSAGES_PER_FRAME.
    count: u32,
    /// Set by `finish`: the frame stays in `out` when the writer drops.
    finished: bool,
}

impl<'a> BatchWriter<'a> {
    fn begin(out: &'a mut Vec<u8>, kind: FrameKind, owner: u32) -> Self {
        let start = out.len();
        Header { kind, len: 0 }.write(out);
        out.extend_from_slice(&owner.to_le_bytes());
        out.extend_from_slice(&0_u32.to_le_bytes());
        Self {
            out,
            start,
            kind,
            count: 0,
            finished: false,
        }
    }

    /// Appends one entry of `entry_len` bytes, written by `write`, within the limits.
    fn push(
        &mut self,
        entry_len: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), EncodeError> {
        if self.count == MAX_MESSAGES_PER_FRAME {
            return Err(EncodeError::BatchFull);
        }
        let needs = self.out.len() - self.start - HEADER_LEN + entry_len;
        if needs > MAX_FRAME_LEN as usize {
            return Err(EncodeError::FrameFull {
                needs,
                max: MAX_FRAME_LEN,
            });
        }
        let before = self.out.len();
        write(self.out);
        debug_assert_eq!(
            self.out.len() - before,
            entry_len,
            "an entry's announced length"
        );
        self.count += 1;
        Ok(())
    }

    fn push_payload(&mut self, fixed: &[u8], payload: &[u8]) -> Result<(), EncodeError> {
        if payload.len() > MAX_PAYLOAD_LEN as usize {
            return Err(EncodeError::PayloadTooLarge {
                len: payload.len(),
                max: MAX_PAYLOAD_LEN,
            });
        }
        self.push(fixed.len() + 4 + payload.len(), |out| {
            out.extend_from_slice(fixed);
            // At most MAX_PAYLOAD_LEN, a u32: checked above.
            out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            out.extend_from_slice(payload);
        })
    }

    fn finish(mut self) -> Result<usize, EncodeError> {
        if self.count == 0 {
            return Err(EncodeError::EmptyBatch { kind: self.kind });
        }
        let frame_len = self.out.len() - self.start;
        // At most MAX_FRAME_LEN, a u32: each push checked it.
        let body_len = (frame_len - HEADER_LEN) as u32;
        self.out[self.start + 6..self.start + HEADER_LEN].copy_from_slice(&body_len.to_le_bytes());
        // The count follows the owner's id.
        let count_at = self.start + HEADER_LEN + 4;
        self.out[count_at..count_at + 4].copy_from_slice(&self.count.to_le_bytes());
        self.finished = true;
        Ok(frame_len)
    }
}

impl Drop for BatchWriter<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.out.truncate(self.start);
        }
    }
}

/// Defines a batch frame's builder over a [`BatchWriter`]: the struct, `begin`, `count` and
/// `finish`, which the four kinds write alike but for names and documents. Each kind's
/// `push`, which writes its own entry, follows its definition.
macro_rules! batch_builder {
    (
        $(#[$doc:meta])*
        $name:ident($kind:ident);
        $(#[$begin_doc:meta])*
        fn begin($owner:ident: $owner_ty:ident);
        counts $counted:literal, one $one:literal;
    ) => {
        $(#[$doc])*
        #[derive(Debug)]
        #[must_use = "a frame builder writes its frame at `finish()`; dropped, it writes nothing"]
        pub struct $name<'a>(BatchWriter<'a>);

        impl<'a> $name<'a> {
            $(#[$begin_doc])*
            pub fn begin(out: &'a mut Vec<u8>, $owner: $owner_ty) -> Self {
                Self(BatchWriter::begin(out, FrameKind::$kind, $owner.0))
            }

            #[doc = concat!("The ", $counted, " appended so far.")]
            #[must_use]
            pub fn count(&self) -> u32 {
                self.0.count
            }

            /// Completes the frame and returns its length, header included.
            ///
            /// # Errors
            ///
            #[doc = concat!(
                "`EmptyBatch` if no ", $one, " was appended: nothing stays in the buffer."
            )]
            pub fn finish(self) -> Result<usize, EncodeError> {
                self.0.finish()
            }
        }
    };
}

batch_builder! {
    /// Encodes a `Publish` frame: a batch of one producer's messages.
    ///
    /// ```
    /// use zerodispatch_wire::{decode, Frame, ProducerId, PublishBuilder, PublishId};
    ///
    /// let mut buf = Vec::with_capacity(4096);
    /// let mut publish = PublishBuilder::begin(&mut buf, ProducerId(1));
    /// publish.push(PublishId(7), b"hello")?;
    /// publish.push(PublishId(8), b"")?;
    /// let written = publish.finish()?;
    ///
    /// let Some((Frame::Publish(frame), consumed)) = decode(&buf)? else { panic!() };
    /// assert_eq!((frame.producer(), frame.count(), consumed), (ProducerId(1), 2, written));
    /// let ids: Vec<_> = frame.messages().map(|(id, payload)| (id.0, payload.len())).collect();
    /// assert_eq!(ids, [(7, 5), (8, 0)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    PublishBuilder(Publish);
    /// Begins a `Publish` of `producer` at the end of `out`.
    fn begin(producer: ProducerId);
    counts "messages", one "message";
}

impl PublishBuilder<'_> {
    /// Appends a message.
    ///
    /// # Errors
    ///
    /// `PayloadTooLarge`, `BatchFull` or `FrameFull`: the message was not appended.
    pub fn push(&mut self, id: PublishId, payload: &[u8]) -> Result<(), EncodeError> {
        self.0.push_payload(&id.0.to_le_bytes(), payload)
    }
}

batch_builder! {
    /// Encodes a `PublishConfirm` frame: the outcomes of a batch of one producer's messages.
    ///
    /// ```
    /// use zerodispatch_wire::{decode, ConfirmStatus, Frame, ProducerId, PublishConfirmBuilder, PublishId};
    ///
    /// let mut buf = Vec::new();
    /// let mut confirm = PublishConfirmBuilder::begin(&mut buf, ProducerId(1));
    /// confirm.push(PublishId(7), ConfirmStatus::Stored)?;
    /// confirm.finish()?;
    ///
    /// let Some((Frame::PublishConfirm(frame), _)) = decode(&buf)? else { panic!() };
    /// assert!(frame.confirms().eq([(PublishId(7), ConfirmStatus::Stored)]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    PublishConfirmBuilder(PublishConfirm);
    /// Begins a `PublishConfirm` for `producer` at the end of `out`.
    fn begin(producer: ProducerId);
    counts "confirms", one "confirm";
}

impl PublishConfirmBuilder<'_> {
    /// Appends the outcome of message `id`.
    ///
    /// # Errors
    ///
    /// `BatchFull` or `FrameFull`: the confirm was not appended.
    pub fn push(&mut self, id: PublishId, status: ConfirmStatus) -> Result<(), EncodeError> {
        self.0.push(9, |out| {
            out.extend_from_slice(&id.0.to_le_bytes());
            out.push(status.as_u8());
        })
    }
}

batch_builder! {
    /// Encodes a `Deliver` frame: a batch of messages for one consumer.
    ///
    /// ```
    /// use zerodispatch_wire::{decode, ConsumerId, DeliverBuilder, DeliveryToken, Frame, Guid};
    ///
    /// let mut buf = Vec::new();
    /// let mut deliver = DeliverBuilder::begin(&mut buf, ConsumerId(3));
    /// deliver.push(Guid([9; 16]), DeliveryToken(0), b"payload")?;
    /// deliver.finish()?;
    ///
    /// let Some((Frame::Deliver(frame), _)) = decode(&buf)? else { panic!() };
    /// assert!(frame.messages().eq([(Guid([9; 16]), DeliveryToken(0), &b"payload"[..])]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    DeliverBuilder(Deliver);
    /// Begins a `Deliver` to `consumer` at the end of `out`.
    fn begin(consumer: ConsumerId);
    counts "messages", one "message";
}

impl DeliverBuilder<'_> {
    /// Appends a message: its GUID, the token of this delivery of it, and its payload.
    ///
    /// # Errors
    ///
    /// `PayloadTooLarge`, `BatchFull` or `FrameFull`: the message was not appended.
    pub fn push(
        &mut self,
        guid: Guid,
        token: DeliveryToken,
        payload: &[u8],
    ) -> Result<(), EncodeError> {
        let mut fixed = [0; 20];
        fixed[..16].copy_from_slice(&guid.0);
        fixed[16..].copy_from_slice(&token.0.to_le_bytes());
        self.0.push_payload(&fixed, payload)
    }
}

batch_builder! {
    /// Encodes a `ConsumerConfirm` frame: the deliveries a consumer has processed, each by
    /// its message's GUID and the token it was delivered with.
    ///
    /// ```
    /// use zerodispatch_wire::{decode, ConsumerConfirmBuilder, ConsumerId, DeliveryToken, Frame, Guid};
    ///
    /// let mut buf = Vec::new();
    /// let mut confirm = ConsumerConfirmBuilder::begin(&mut buf, ConsumerId(3));
    /// confirm.push(Guid([1; 16]), DeliveryToken(0))?;
    /// confirm.push(Guid([2; 16]), DeliveryToken(7))?;
    /// confirm.finish()?;
    ///
    /// let Some((Frame::ConsumerConfirm(frame), _)) = decode(&buf)? else { panic!() };
    /// assert!(frame.deliveries().eq([
    ///     (Guid([1; 16]), DeliveryToken(0)),
    ///     (Guid([2; 16]), DeliveryToken(7)),
    /// ]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ConsumerConfirmBuilder(ConsumerConfirm);
    /// Begins a `ConsumerConfirm` of `consumer` at the end of `out`.
    fn begin(consumer: ConsumerId);
    counts "confirms", one "confirm";
}

impl ConsumerConfirmBuilder<'_> {
    /// Appends the confirm of a processed message: its GUID and the token of the delivery
    /// being confirmed, as the `Deliver` carried them.
    ///
    /// # Errors
    ///
    /// `BatchFull` or `FrameFull`: the confirm was not appended.
    pub fn push(&mut self, guid: Guid, token: DeliveryToken) -> Result<(), EncodeError> {
        self.0.push(20, |out| {
            out.extend_from_slice(&guid.0);
            out.extend_from_slice(&token.0.to_le_bytes());
        })
    }
}
