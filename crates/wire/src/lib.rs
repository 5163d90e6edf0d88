//! The wire protocol between a zerodispatch broker and its clients, and its codec.
//!
//! The protocol (`docs/protocol.md` at the repository's root is its full description) is
//! versioned, length-prefixed and little-endian: every frame is a ten-byte [`Header`]
//! (magic `ZD`, version, [`FrameKind`], flags, body length) and a body of the kind's
//! layout. Publishes, their confirms, deliveries and consumer confirms travel in batches,
//! many messages to a frame.
//!
//! The codec allocates nothing of its own:
//!
//! - [`Frame::encode`] and the batch builders ([`PublishBuilder`],
//!   [`PublishConfirmBuilder`], [`DeliverBuilder`], [`ConsumerConfirmBuilder`]) append to a
//!   `Vec<u8>` the caller owns and reuses;
//! - [`decode`] reads one frame from the front of a byte slice, or says it needs more
//!   bytes, or refuses the bytes with a [`DecodeError`] whose [`code`](DecodeError::code)
//!   is the error frame to answer with. Batches decode to views that borrow the slice and
//!   iterate their messages in place.
//!
//! ```
//! use zerodispatch_wire::{decode, Frame, OpenProducer, ProducerId, PublishBuilder, PublishId, QueueId};
//!
//! // The client: open a producer named "orders", publish a batch of two messages.
//! let mut out = Vec::with_capacity(64 * 1024);
//! let open = OpenProducer {
//!     producer: ProducerId(1),
//!     queue: QueueId(0),
//!     max_unconfirmed: 1000,
//!     name: "orders",
//! };
//! Frame::OpenProducer(open).encode(&mut out)?;
//! let mut publish = PublishBuilder::begin(&mut out, ProducerId(1));
//! publish.push(PublishId(0), b"first")?;
//! publish.push(PublishId(1), b"second")?;
//! publish.finish()?;
//!
//! // The broker: decode what arrived, frame by frame.
//! let mut received = &out[..];
//! while let Some((frame, consumed)) = decode(received)? {
//!     match frame {
//!         Frame::OpenProducer(open) => assert_eq!((open.queue, open.name), (QueueId(0), "orders")),
//!         Frame::Publish(batch) => {
//!             for (id, payload) in batch.messages() {
//!                 assert_eq!(payload, if id.0 == 0 { &b"first"[..] } else { b"second" });
//!             }
//!         }
//!         other => panic!("unexpected {other:?}"),
//!     }
//!     received = &received[consumed..];
//! }
//! assert!(received.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod batch;
mod builder;
mod decode;
mod encode;
mod error;
mod frame;
mod header;
mod ids;
mod kind;
mod limits;
mod reader;
mod status;

pub use batch::{
    ConfirmedDeliveries, ConsumerConfirmFrame, DeliverFrame, DeliveredMessages, Entries,
    PublishConfirmFrame, PublishConfirms, PublishFrame, PublishMessages,
};
pub use builder::{ConsumerConfirmBuilder, DeliverBuilder, PublishBuilder, PublishConfirmBuilder};
pub use decode::decode;
pub use error::{DecodeError, EncodeError};
pub use frame::{
    CloseConsumer, CloseProducer, Credit, ErrorFrame, Frame, Hello, MAX_STORED_WINDOW,
    OpenConsumer, OpenProducer, ProducerOpened, ServerLimits, StoredWindow, Welcome,
};
pub use header::Header;
pub use ids::{AppId, ConsumerId, DeliveryToken, Guid, ProducerId, PublishId, QueueId};
pub use kind::FrameKind;
pub use limits::{
    HEADER_LEN, MAGIC, MAX_ERROR_MESSAGE_LEN, MAX_FRAME_LEN, MAX_MESSAGES_PER_FRAME,
    MAX_PAYLOAD_LEN, MAX_PRODUCER_NAME_LEN, VERSION,
};
pub use status::{ConfirmStatus, ErrorCode, Stored};
