//! Decoding: splitting a byte stream into frames, one at a time, without copying or
//! allocating.
//!
//! A receiver appends what it reads from its socket to a buffer and calls [`decode`] on
//! the buffer's unread bytes until it answers "need more":
//!
//! 1. `Ok(Some((frame, consumed)))`: the first `consumed` bytes are one valid frame. The
//!    frame borrows them; drop it before discarding them.
//! 2. `Ok(None)`: the bytes are the valid beginning of a frame; read more. No more than
//!    [`HEADER_LEN`] + [`MAX_FRAME_LEN`] bytes are ever needed for one frame, since a
//!    header announcing more is refused.
//! 3. `Err(error)`: not a valid frame. The stream cannot be resynchronised: answer with an
//!    error frame of [`DecodeError::code`] and close the connection.
//!
//! `decode` keeps no state between calls, so any split of the stream into reads gives the
//! same frames.

use crate::batch::{ConsumerConfirmFrame, DeliverFrame, PublishConfirmFrame, PublishFrame};
use crate::error::DecodeError;
use crate::frame::{
    CloseConsumer, CloseProducer, Credit, ErrorFrame, Frame, Hello, OpenConsumer, OpenProducer,
    ProducerOpened, Welcome,
};
use crate::header::Header;
use crate::kind::FrameKind;
use crate::limits::{HEADER_LEN, MAX_FRAME_LEN};

/// Decodes the frame at the start of `buf`, if it is all there.
///
/// Never panics and never allocates, whatever `buf` holds; `consumed` is never more than
/// `buf.len()`. Header errors are found as soon as the header's bytes are there, before
/// the body is: a frame announcing a body over [`MAX_FRAME_LEN`] is refused from its
/// header alone.
///
/// ```
/// use zerodispatch_wire::{decode, Credit, ConsumerId, DecodeError, Frame};
///
/// let mut stream = Vec::new();
/// Frame::Heartbeat.encode(&mut stream)?;
/// Frame::Credit(Credit { consumer: ConsumerId(4), credit: 100 }).encode(&mut stream)?;
///
/// let (first, n) = decode(&stream)?.expect("a whole heartbeat");
/// assert_eq!(first, Frame::Heartbeat);
/// let rest = &stream[n..];
/// assert_eq!(decode(&rest[..rest.len() - 1])?, None, "one byte short: need more");
/// let (second, m) = decode(rest)?.expect("a whole credit");
/// assert_eq!((second.kind(), n + m), (zerodispatch_wire::FrameKind::Credit, stream.len()));
///
/// assert_eq!(decode(b"ZD\x05\x7f"), Err(DecodeError::UnknownKind { kind: 0x7f }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// Any [`DecodeError`]: the bytes are not a valid frame of this protocol version.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, DecodeError> {
    let Some(header) = Header::parse(buf)? else {
        return Ok(None);
    };
    let Some(body) = buf.get(HEADER_LEN..header.frame_len()) else {
        return Ok(None);
    };
    Ok(Some((decode_body(header.kind, body)?, header.frame_len())))
}

/// Decodes a whole body of `kind`, at most [`MAX_FRAME_LEN`] bytes.
fn decode_body(kind: FrameKind, body: &[u8]) -> Result<Frame<'_>, DecodeError> {
    debug_assert!(body.len() <= MAX_FRAME_LEN as usize);
    Ok(match kind {
        FrameKind::Hello => Frame::Hello(Hello::read(body)?),
        FrameKind::Welcome => Frame::Welcome(Welcome::read(body)?),
        FrameKind::Heartbeat if body.is_empty() => Frame::Heartbeat,
        FrameKind::Heartbeat => {
            return Err(DecodeError::BadLength {
                kind,
                len: body.len() as u32,
            });
        }
        FrameKind::Error => Frame::Error(ErrorFrame::read(body)?),
        FrameKind::OpenProducer => Frame::OpenProducer(OpenProducer::read(body)?),
        FrameKind::CloseProducer => Frame::CloseProducer(CloseProducer::read(body)?),
        FrameKind::Publish => Frame::Publish(PublishFrame::read(body)?),
        FrameKind::PublishConfirm => Frame::PublishConfirm(PublishConfirmFrame::read(body)?),
        FrameKind::ProducerOpened => Frame::ProducerOpened(ProducerOpened::read(body)?),
        FrameKind::OpenConsumer => Frame::OpenConsumer(OpenConsumer::read(body)?),
        FrameKind::CloseConsumer => Frame::CloseConsumer(CloseConsumer::read(body)?),
        FrameKind::Deliver => Frame::Deliver(DeliverFrame::read(body)?),
        FrameKind::ConsumerConfirm => Frame::ConsumerConfirm(ConsumerConfirmFrame::read(body)?),
        FrameKind::Credit => Frame::Credit(Credit::read(body)?),
    })
}
