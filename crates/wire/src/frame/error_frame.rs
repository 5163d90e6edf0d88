//! `Error`: what went wrong, either way.

use crate::error::{DecodeError, EncodeError};
use crate::kind::FrameKind;
use crate::limits::MAX_ERROR_MESSAGE_LEN;
use crate::reader::Reader;
use crate::status::ErrorCode;

/// `Error` (either way): what went wrong, the request it refuses, and a message for
/// people. With a fatal code ([`ErrorCode::is_fatal`]) it is the sender's last frame.
///
/// Body, 9 bytes and the message: `code: u16`, `refused: u8` (the kind of the frame it
/// answers, 0 for none), `subject: u32` (the producer or consumer id that frame named, 0
/// for none), `message_len: u16` (at most [`MAX_ERROR_MESSAGE_LEN`]), then `message_len`
/// bytes of UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorFrame<'a> {
    /// What went wrong.
    pub code: ErrorCode,
    /// The kind of the frame refused, if the error answers one.
    pub refused: Option<FrameKind>,
    /// The producer or consumer id the refused frame named (by its kind), or 0.
    pub subject: u32,
    /// A message for people, possibly empty; never something to parse.
    pub message: &'a str,
}

impl<'a> ErrorFrame<'a> {
    pub(crate) const FIXED_LEN: usize = 9;

    pub(crate) fn read(body: &'a [u8]) -> Result<Self, DecodeError> {
        let kind = FrameKind::Error;
        let len = body.len() as u32;
        let mut r = Reader::new(body);
        let (Some(code), Some(refused), Some(subject), Some(message_len)) =
            (r.u16(), r.u8(), r.u32(), r.u16())
        else {
            return Err(DecodeError::BadLength { kind, len });
        };
        if message_len > MAX_ERROR_MESSAGE_LEN {
            return Err(DecodeError::MessageTooLong {
                len: message_len,
                max: MAX_ERROR_MESSAGE_LEN,
            });
        }
        let message = r.rest();
        if message.len() != usize::from(message_len) {
            return Err(DecodeError::BadLength { kind, len });
        }
        let refused = match refused {
            0 => None,
            byte => Some(
                FrameKind::from_u8(byte).ok_or(DecodeError::UnknownRefusedKind { kind: byte })?,
            ),
        };
        let message = std::str::from_utf8(message).map_err(|_| DecodeError::BadUtf8)?;
        Ok(Self {
            code: ErrorCode(code),
            refused,
            subject,
            message,
        })
    }

    pub(crate) fn check(&self) -> Result<(), EncodeError> {
        if self.message.len() > usize::from(MAX_ERROR_MESSAGE_LEN) {
            return Err(EncodeError::MessageTooLong {
                len: self.message.len(),
                max: MAX_ERROR_MESSAGE_LEN,
            });
        }
        Ok(())
    }

    pub(crate) fn body_len(&self) -> usize {
        Self::FIXED_LEN + self.message.len()
    }

    /// Writes the body; `check` has passed.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.code.0.to_le_bytes());
        out.push(self.refused.map_or(0, FrameKind::as_u8));
        out.extend_from_slice(&self.subject.to_le_bytes());
        // At most MAX_ERROR_MESSAGE_LEN, a u16: `check` passed.
        out.extend_from_slice(&(self.message.len() as u16).to_le_bytes());
        out.extend_from_slice(self.message.as_bytes());
    }
}
