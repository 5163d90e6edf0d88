//! The frame header: ten bytes in front of every frame body, whose layout is the same in
//! every version of the protocol.
//!
//! ```text
//! offset  size  field
//!      0     2  magic    b"ZD"
//!      2     1  version  VERSION (5)
//!      3     1  kind     FrameKind
//!      4     2  flags    u16 LE, 0 (no version defines a flag yet)
//!      6     4  length   u32 LE, the body's length in bytes, at most MAX_FRAME_LEN
//! ```
//!
//! [`Header::parse`] checks each field as soon as its bytes are there, so that a peer that
//! is not speaking this protocol is refused after its first byte, and a frame too large is
//! refused from its header, before a byte of its body is buffered.

use crate::error::DecodeError;
use crate::kind::FrameKind;
use crate::limits::{HEADER_LEN, MAGIC, MAX_FRAME_LEN, VERSION};

/// A frame header, parsed and checked: its kind and its body's length. (No version defines
/// a flag yet, so a checked header has none.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The frame's kind.
    pub kind: FrameKind,
    /// The body's length in bytes, at most [`MAX_FRAME_LEN`].
    pub len: u32,
}

impl Header {
    /// Parses the header at the start of `buf`: `Ok(Some(header))` once all
    /// [`HEADER_LEN`] bytes are there, `Ok(None)` while they are not and the bytes that are
    /// there are valid so far.
    ///
    /// A receiver that reads from a socket calls it on what it has, and reads until
    /// [`HEADER_LEN`] + `header.len` bytes are buffered.
    ///
    /// ```
    /// use zerodispatch_wire::{DecodeError, FrameKind, Header, MAX_FRAME_LEN};
    ///
    /// let mut frame = b"ZD\x05\x03\0\0\0\0\0\0".to_vec(); // a heartbeat
    /// assert_eq!(Header::parse(&frame[..4]), Ok(None));
    /// assert_eq!(Header::parse(&frame), Ok(Some(Header { kind: FrameKind::Heartbeat, len: 0 })));
    ///
    /// frame[6..].copy_from_slice(&(MAX_FRAME_LEN + 1).to_le_bytes());
    /// assert_eq!(
    ///     Header::parse(&frame),
    ///     Err(DecodeError::FrameTooLarge { len: MAX_FRAME_LEN + 1, max: MAX_FRAME_LEN }),
    /// );
    /// assert_eq!(Header::parse(b"GET / HTTP/1.1"), Err(DecodeError::BadMagic));
    /// ```
    ///
    /// # Errors
    ///
    /// `BadMagic`, `UnsupportedVersion`, `UnknownKind`, `UnknownFlags` or `FrameTooLarge`,
    /// as soon as the bytes of the field in question are in `buf`.
    pub fn parse(buf: &[u8]) -> Result<Option<Self>, DecodeError> {
        let magic_there = buf.len().min(MAGIC.len());
        if buf[..magic_there] != MAGIC[..magic_there] {
            return Err(DecodeError::BadMagic);
        }
        if let Some(&version) = buf.get(2)
            && version != VERSION
        {
            return Err(DecodeError::UnsupportedVersion { version });
        }
        let kind = match buf.get(3) {
            None => return Ok(None),
            Some(&byte) => {
                FrameKind::from_u8(byte).ok_or(DecodeError::UnknownKind { kind: byte })?
            }
        };
        let flags = match buf.get(4..6) {
            Some(&[low, high]) => u16::from_le_bytes([low, high]),
            _ => return Ok(None),
        };
        if flags != 0 {
            return Err(DecodeError::UnknownFlags { flags });
        }
        let len = match buf.get(6..HEADER_LEN) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
            _ => return Ok(None),
        };
        if len > MAX_FRAME_LEN {
            return Err(DecodeError::FrameTooLarge {
                len,
                max: MAX_FRAME_LEN,
            });
        }
        Ok(Some(Self { kind, len }))
    }

    /// Appends this header's ten bytes to `out`.
    pub(crate) fn write(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(self.kind.as_u8());
        out.extend_from_slice(&0_u16.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    /// The whole frame's length: header and body.
    #[must_use]
    pub fn frame_len(self) -> usize {
        HEADER_LEN + self.len as usize
    }
}
