//! The protocol's constants: its magic and version, the header's size, and the limits every
//! receiver enforces.
//!
//! The limits bound what a peer can make a receiver hold: a receiver reads a frame's
//! length from its header and refuses one above [`MAX_FRAME_LEN`] before it buffers a
//! single byte of its body, so a connection never needs more than
//! [`HEADER_LEN`] + [`MAX_FRAME_LEN`] bytes of receive buffer.

/// The first two bytes of every frame: `ZD`.
pub const MAGIC: [u8; 2] = *b"ZD";

/// The protocol version this crate speaks, carried in every header and negotiated by
/// `Hello` and `Welcome`. Version 2 added producer names (`OpenProducer`'s `name`) and
/// `ProducerOpened`. Version 3 made every problem with one message that message's confirm
/// (`TooLarge`, `RejectedStoreFull`, `RejectedOutOfWindow`), and `ProducerOpened` says id by
/// id what is stored (a window of bits, with "nothing stored" carried explicitly, not as
/// `u64::MAX`). Version 4 told more of the broker's limits in `Welcome`: how long a frame
/// that has begun, and the handshake, may take to arrive, the deduplication window, and the
/// producer names a connection may create. Version 5 added delivery tokens: each
/// `Deliver` entry carries a [`DeliveryToken`](crate::DeliveryToken), and a
/// `ConsumerConfirm` entry names the GUID and the token it was delivered with. A peer that
/// speaks only an older version is refused `UNSUPPORTED_VERSION`.
pub const VERSION: u8 = 5;

/// Bytes in a frame header: magic (2), version (1), kind (1), flags (2), body length (4).
pub const HEADER_LEN: usize = 10;

/// A frame body's length, at most: 1 MiB.
///
/// The broker's producers batch up to 1 MiB per frame by default
/// (`zerodispatch::broker::ProducerConfig::max_frame_bytes`), so a full batch fits one
/// frame. Raising it raises the receive buffer every connection may need; lowering it below
/// [`MAX_PAYLOAD_LEN`] plus a batch's overhead would make some payloads unsendable.
pub const MAX_FRAME_LEN: u32 = 1 << 20;

/// Messages in one batched frame (publish, publish confirm, deliver, consumer confirm), at
/// most: 4096.
///
/// A batch of confirms for 4096 messages is 36 KiB (publish confirms) or 80 KiB (consumer
/// confirms), well within a frame; the broker's producers batch 256 messages by default.
/// The cap bounds the work one frame can ask of a receiver independently of its bytes.
pub const MAX_MESSAGES_PER_FRAME: u32 = 4096;

/// A message payload's length, at most: 256 KiB.
///
/// Payloads travel inside frames, so one large payload holds up every frame behind it on
/// the connection; 256 KiB keeps that wait short while leaving room for four of them in a
/// frame. A larger object belongs in a store that the message names.
pub const MAX_PAYLOAD_LEN: u32 = 256 << 10;

/// An error frame's message, at most: 1024 bytes of UTF-8.
pub const MAX_ERROR_MESSAGE_LEN: u16 = 1024;

/// A producer's name in `OpenProducer`, at most: 255 bytes of UTF-8 (its length is a
/// `u8`). The broker keeps the names it is given in a bounded table, so names are short
/// labels, not data.
pub const MAX_PRODUCER_NAME_LEN: usize = u8::MAX as usize;
