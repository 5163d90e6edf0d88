//! What can go wrong: [`DecodeError`] for bytes a peer sent, [`EncodeError`] for a frame
//! the application asked to send.

use std::fmt;

use crate::kind::FrameKind;
use crate::status::ErrorCode;

/// Bytes that are not a valid frame. Every variant is a protocol error: the receiver
/// answers with an error frame of [`code`](Self::code) and closes the connection, since
/// it can no longer tell where the next frame starts.
///
/// Detected as soon as the bytes that show it are there: a bad header before its body is
/// buffered, a bad body once it is whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The first two bytes are not `ZD`.
    BadMagic,
    /// The header's version is not [`VERSION`](crate::VERSION).
    UnsupportedVersion {
        /// The version the header carries.
        version: u8,
    },
    /// The header's kind byte is no [`FrameKind`].
    UnknownKind {
        /// The byte.
        kind: u8,
    },
    /// The header sets flags this version does not define (it defines none).
    UnknownFlags {
        /// The flags.
        flags: u16,
    },
    /// The header announces a body longer than the limit.
    FrameTooLarge {
        /// The announced length.
        len: u32,
        /// The limit, [`MAX_FRAME_LEN`](crate::MAX_FRAME_LEN).
        max: u32,
    },
    /// The body ends before a field of its kind, or goes on after the last one.
    BadLength {
        /// The frame's kind.
        kind: FrameKind,
        /// The body's length.
        len: u32,
    },
    /// A batch's messages do not fill its body exactly: the count announces more than the
    /// body holds, or the body holds more than the count announces.
    CountMismatch {
        /// The frame's kind.
        kind: FrameKind,
        /// The announced count.
        count: u32,
    },
    /// A batch announces more messages than the limit.
    TooManyMessages {
        /// The frame's kind.
        kind: FrameKind,
        /// The announced count.
        count: u32,
        /// The limit, [`MAX_MESSAGES_PER_FRAME`](crate::MAX_MESSAGES_PER_FRAME).
        max: u32,
    },
    /// A field that must not be zero is: a batch's count, an `OpenProducer`'s
    /// `max_unconfirmed`, a `Credit`'s credit, a `Hello`'s versions.
    Zero {
        /// The frame's kind.
        kind: FrameKind,
        /// The field's name.
        field: &'static str,
    },
    /// A message's payload is longer than the limit.
    PayloadTooLarge {
        /// The payload's announced length.
        len: u32,
        /// The limit, [`MAX_PAYLOAD_LEN`](crate::MAX_PAYLOAD_LEN).
        max: u32,
    },
    /// A publish confirm carries a status byte that is no
    /// [`ConfirmStatus`](crate::ConfirmStatus).
    UnknownStatus {
        /// The byte.
        status: u8,
    },
    /// A `Hello` offers a lowest version above its highest.
    BadVersionRange {
        /// The lowest version offered.
        min: u8,
        /// The highest version offered.
        max: u8,
    },
    /// An error frame's message is longer than the limit.
    MessageTooLong {
        /// The message's announced length.
        len: u16,
        /// The limit, [`MAX_ERROR_MESSAGE_LEN`](crate::MAX_ERROR_MESSAGE_LEN).
        max: u16,
    },
    /// An error frame's message, or an `OpenProducer`'s name, is not UTF-8.
    BadUtf8,
    /// An error frame names a refused kind byte that is no [`FrameKind`] (nor 0, "none").
    UnknownRefusedKind {
        /// The byte.
        kind: u8,
    },
    /// A `ProducerOpened`'s stored window is inconsistent: an undefined flag, a
    /// `last_stored` or `known` where nothing is stored, `known` 0 or above
    /// [`MAX_STORED_WINDOW`](crate::MAX_STORED_WINDOW) or above `last_stored + 1`, the
    /// highest id's own bit clear, or bits set past `known`.
    BadStoredWindow,
}

impl DecodeError {
    /// The code of the error frame a receiver sends before it closes the connection.
    ///
    /// ```
    /// use zerodispatch_wire::{DecodeError, ErrorCode};
    /// assert_eq!(DecodeError::BadMagic.code(), ErrorCode::BAD_MAGIC);
    /// assert_eq!(DecodeError::BadUtf8.code(), ErrorCode::MALFORMED);
    /// ```
    #[must_use]
    pub fn code(self) -> ErrorCode {
        match self {
            Self::BadMagic => ErrorCode::BAD_MAGIC,
            Self::UnsupportedVersion { .. } => ErrorCode::UNSUPPORTED_VERSION,
            Self::UnknownKind { .. } => ErrorCode::UNKNOWN_KIND,
            Self::UnknownFlags { .. } => ErrorCode::UNKNOWN_FLAGS,
            Self::FrameTooLarge { .. } => ErrorCode::FRAME_TOO_LARGE,
            Self::BadLength { .. }
            | Self::CountMismatch { .. }
            | Self::TooManyMessages { .. }
            | Self::Zero { .. }
            | Self::PayloadTooLarge { .. }
            | Self::UnknownStatus { .. }
            | Self::BadVersionRange { .. }
            | Self::MessageTooLong { .. }
            | Self::BadUtf8
            | Self::UnknownRefusedKind { .. }
            | Self::BadStoredWindow => ErrorCode::MALFORMED,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BadMagic => f.write_str("the frame does not start with the magic bytes \"ZD\""),
            Self::UnsupportedVersion { version } => {
                write!(f, "protocol version {version} is not supported")
            }
            Self::UnknownKind { kind } => write!(f, "unknown frame kind {kind:#04x}"),
            Self::UnknownFlags { flags } => write!(f, "unknown header flags {flags:#06x}"),
            Self::FrameTooLarge { len, max } => {
                write!(f, "a frame body of {len} bytes is over the limit of {max}")
            }
            Self::BadLength { kind, len } => {
                write!(f, "a {kind:?} body of {len} bytes does not match its layout")
            }
            Self::CountMismatch { kind, count } => {
                write!(f, "a {kind:?} body does not hold exactly its {count} messages")
            }
            Self::TooManyMessages { kind, count, max } => {
                write!(f, "a {kind:?} of {count} messages is over the limit of {max}")
            }
            Self::Zero { kind, field } => write!(f, "a {kind:?}'s {field} must not be zero"),
            Self::PayloadTooLarge { len, max } => {
                write!(f, "a payload of {len} bytes is over the limit of {max}")
            }
            Self::UnknownStatus { status } => write!(f, "unknown confirm status {status}"),
            Self::BadVersionRange { min, max } => {
                write!(f, "a Hello offers versions {min} to {max}: the lowest is above the highest")
            }
            Self::MessageTooLong { len, max } => {
                write!(f, "an error message of {len} bytes is over the limit of {max}")
            }
            Self::BadUtf8 => f.write_str("an error message or a producer name is not UTF-8"),
            Self::UnknownRefusedKind { kind } => {
                write!(f, "an error frame names the unknown frame kind {kind:#04x}")
            }
            Self::BadStoredWindow => f.write_str(
                "a ProducerOpened's stored window is inconsistent: a bad flag, a last_stored or known without anything stored, known out of range, the highest's bit clear, or bits past known",
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A frame that cannot be encoded as asked: nothing of it was written, and the buffer is
/// as it was before the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The payload is longer than [`MAX_PAYLOAD_LEN`](crate::MAX_PAYLOAD_LEN).
    PayloadTooLarge {
        /// The payload's length.
        len: usize,
        /// The limit.
        max: u32,
    },
    /// The batch already holds [`MAX_MESSAGES_PER_FRAME`](crate::MAX_MESSAGES_PER_FRAME)
    /// messages: finish it and start another.
    BatchFull,
    /// The message would take the body past [`MAX_FRAME_LEN`](crate::MAX_FRAME_LEN):
    /// finish the batch and start another.
    FrameFull {
        /// The body's length with the message.
        needs: usize,
        /// The limit.
        max: u32,
    },
    /// A batch was finished without a message: batches are never empty.
    EmptyBatch {
        /// The batch's kind.
        kind: FrameKind,
    },
    /// A field that must not be zero is (as [`DecodeError::Zero`]).
    Zero {
        /// The frame's kind.
        kind: FrameKind,
        /// The field's name.
        field: &'static str,
    },
    /// A `Hello`'s lowest version is above its highest.
    BadVersionRange {
        /// The lowest version.
        min: u8,
        /// The highest version.
        max: u8,
    },
    /// An error frame's message is longer than
    /// [`MAX_ERROR_MESSAGE_LEN`](crate::MAX_ERROR_MESSAGE_LEN) bytes.
    MessageTooLong {
        /// The message's length.
        len: usize,
        /// The limit.
        max: u16,
    },
    /// An `OpenProducer`'s name is longer than
    /// [`MAX_PRODUCER_NAME_LEN`](crate::MAX_PRODUCER_NAME_LEN) bytes.
    NameTooLong {
        /// The name's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A `ProducerOpened`'s stored window is inconsistent (as
    /// [`DecodeError::BadStoredWindow`]).
    BadStoredWindow,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::PayloadTooLarge { len, max } => {
                write!(f, "a payload of {len} bytes is over the limit of {max}")
            }
            Self::BatchFull => f.write_str("the batch holds the most messages a frame may"),
            Self::FrameFull { needs, max } => write!(
                f,
                "the message would make the frame body {needs} bytes, over the limit of {max}"
            ),
            Self::EmptyBatch { kind } => write!(f, "a {kind:?} batch needs at least one message"),
            Self::Zero { kind, field } => write!(f, "a {kind:?}'s {field} must not be zero"),
            Self::BadVersionRange { min, max } => {
                write!(
                    f,
                    "a Hello cannot offer versions {min} to {max}: the lowest is above the highest"
                )
            }
            Self::MessageTooLong { len, max } => {
                write!(f, "an error message of {len} bytes is over the limit of {max}")
            }
            Self::NameTooLong { len, max } => {
                write!(f, "a producer name of {len} bytes is over the limit of {max}")
            }
            Self::BadStoredWindow => f.write_str(
                "a ProducerOpened's stored window is inconsistent (see StoredWindow's validity rules)",
            ),
        }
    }
}

impl std::error::Error for EncodeError {}
