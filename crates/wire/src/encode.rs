//! Encoding a whole [`Frame`] into the caller's buffer.
//!
//! Frames of fixed layout are built as values (`Frame::Hello(Hello { .. })`) and encoded
//! here. Batches are built message by message with the builders (`builder.rs`); a decoded
//! batch can be encoded again as it is (a relay), which copies its bytes.

use crate::error::EncodeError;
use crate::frame::Frame;
use crate::header::Header;
use crate::limits::HEADER_LEN;

impl Frame<'_> {
    /// Appends this frame, header and body, to `out`, and returns its length.
    ///
    /// Allocates only if `out` has to grow. Whatever `encode` accepts,
    /// [`decode`](crate::decode) reads back as the same frame.
    ///
    /// ```
    /// use zerodispatch_wire::{decode, Frame, Hello};
    ///
    /// let hello = Frame::Hello(Hello { min_version: 1, max_version: 1, heartbeat_ms: 5_000 });
    /// let mut buf = Vec::new();
    /// let written = hello.encode(&mut buf)?;
    /// assert_eq!(decode(&buf)?, Some((hello, written)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A value the protocol refuses, and nothing is written: `Zero` for a `Hello` or
    /// `Welcome` version 0, an `OpenProducer`'s `max_unconfirmed` or a `Credit`'s credit
    /// of 0; `BadVersionRange` for a `Hello` whose lowest version is above its highest;
    /// `MessageTooLong` for an error message over
    /// [`MAX_ERROR_MESSAGE_LEN`](crate::MAX_ERROR_MESSAGE_LEN) bytes; `NameTooLong` for a
    /// producer name over [`MAX_PRODUCER_NAME_LEN`](crate::MAX_PRODUCER_NAME_LEN) bytes.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<usize, EncodeError> {
        match self {
            Self::Hello(hello) => hello.check()?,
            Self::Welcome(welcome) => welcome.check()?,
            Self::OpenProducer(open) => open.check()?,
            Self::Credit(credit) => credit.check()?,
            Self::Error(error) => error.check()?,
            Self::ProducerOpened(opened) => opened.check()?,
            Self::Heartbeat
            | Self::CloseProducer(_)
            | Self::OpenConsumer(_)
            | Self::CloseConsumer(_)
            | Self::Publish(_)
            | Self::PublishConfirm(_)
            | Self::Deliver(_)
            | Self::ConsumerConfirm(_) => {}
        }
        let len = self.body_len();
        // Every body of fixed layout is a few bytes, an error frame's at most 1033, and a
        // batch's was decoded within MAX_FRAME_LEN.
        Header {
            kind: self.kind(),
            len: len as u32,
        }
        .write(out);
        let before = out.len();
        match self {
            Self::Hello(hello) => hello.write(out),
            Self::Welcome(welcome) => welcome.write(out),
            Self::Heartbeat => {}
            Self::Error(error) => error.write(out),
            Self::OpenProducer(open) => open.write(out),
            Self::CloseProducer(close) => close.write(out),
            Self::Publish(batch) => batch.0.write(out),
            Self::PublishConfirm(batch) => batch.0.write(out),
            Self::ProducerOpened(opened) => opened.write(out),
            Self::OpenConsumer(open) => open.write(out),
            Self::CloseConsumer(close) => close.write(out),
            Self::Deliver(batch) => batch.0.write(out),
            Self::ConsumerConfirm(batch) => batch.0.write(out),
            Self::Credit(credit) => credit.write(out),
        }
        debug_assert_eq!(out.len() - before, len, "a {:?} body's length", self.kind());
        Ok(HEADER_LEN + len)
    }

    /// The body's length in bytes.
    fn body_len(&self) -> usize {
        use crate::frame::{CloseConsumer, CloseProducer, Credit, Hello, OpenConsumer, Welcome};
        match self {
            Self::Hello(_) => Hello::LEN,
            Self::Welcome(_) => Welcome::LEN,
            Self::Heartbeat => 0,
            Self::Error(error) => error.body_len(),
            Self::OpenProducer(open) => open.body_len(),
            Self::CloseProducer(_) => CloseProducer::LEN,
            Self::Publish(batch) => batch.0.body_len(),
            Self::PublishConfirm(batch) => batch.0.body_len(),
            Self::ProducerOpened(opened) => opened.body_len(),
            Self::OpenConsumer(_) => OpenConsumer::LEN,
            Self::CloseConsumer(_) => CloseConsumer::LEN,
            Self::Deliver(batch) => batch.0.body_len(),
            Self::ConsumerConfirm(batch) => batch.0.body_len(),
            Self::Credit(_) => Credit::LEN,
        }
    }
}
