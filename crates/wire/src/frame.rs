//! [`Frame`]: one decoded frame, and the frames of fixed layout (everything but the
//! batches, which are in `batch.rs`): their fields, how their bodies are read and written,
//! and which values they forbid. One module for each party the frames concern, and the
//! checks they share here.

mod handshake;
pub use handshake::{Hello, ServerLimits, Welcome};
mod error_frame;
pub use error_frame::ErrorFrame;
mod producer;
pub use producer::{CloseProducer, MAX_STORED_WINDOW, OpenProducer, ProducerOpened, StoredWindow};
mod consumer;
pub use consumer::{CloseConsumer, Credit, OpenConsumer};

use crate::batch::{ConsumerConfirmFrame, DeliverFrame, PublishConfirmFrame, PublishFrame};
use crate::error::{DecodeError, EncodeError};
use crate::ids::{AppId, ConsumerId, ProducerId, QueueId};
use crate::kind::FrameKind;
use crate::reader::Reader;

/// One frame, as [`decode`](crate::decode) returns it and [`encode`](Frame::encode)
/// writes it. Batches and error messages are views that borrow the decoded buffer: they
/// live as long as it, and copying the frame copies no message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// The client's first frame.
    Hello(Hello),
    /// The broker's answer to `Hello`.
    Welcome(Welcome),
    /// "Still here".
    Heartbeat,
    /// An error.
    Error(ErrorFrame<'a>),
    /// Open a producer.
    OpenProducer(OpenProducer<'a>),
    /// Close a producer.
    CloseProducer(CloseProducer),
    /// A batch of messages to publish.
    Publish(PublishFrame<'a>),
    /// The outcomes of a batch of published messages.
    PublishConfirm(PublishConfirmFrame<'a>),
    /// A producer is open.
    ProducerOpened(ProducerOpened<'a>),
    /// Open a consumer.
    OpenConsumer(OpenConsumer),
    /// Close a consumer.
    CloseConsumer(CloseConsumer),
    /// A batch of messages delivered to a consumer.
    Deliver(DeliverFrame<'a>),
    /// A batch of confirms of delivered messages.
    ConsumerConfirm(ConsumerConfirmFrame<'a>),
    /// More credit for a consumer.
    Credit(Credit),
}

impl Frame<'_> {
    /// The frame's kind.
    #[must_use]
    pub fn kind(&self) -> FrameKind {
        match self {
            Self::Hello(_) => FrameKind::Hello,
            Self::Welcome(_) => FrameKind::Welcome,
            Self::Heartbeat => FrameKind::Heartbeat,
            Self::Error(_) => FrameKind::Error,
            Self::OpenProducer(_) => FrameKind::OpenProducer,
            Self::CloseProducer(_) => FrameKind::CloseProducer,
            Self::Publish(_) => FrameKind::Publish,
            Self::PublishConfirm(_) => FrameKind::PublishConfirm,
            Self::ProducerOpened(_) => FrameKind::ProducerOpened,
            Self::OpenConsumer(_) => FrameKind::OpenConsumer,
            Self::CloseConsumer(_) => FrameKind::CloseConsumer,
            Self::Deliver(_) => FrameKind::Deliver,
            Self::ConsumerConfirm(_) => FrameKind::ConsumerConfirm,
            Self::Credit(_) => FrameKind::Credit,
        }
    }
}

/// A value a frame may not carry, found by the encoder (an [`EncodeError`]) or the decoder
/// (a [`DecodeError`]) by the same check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invalid {
    Zero(FrameKind, &'static str),
    BadVersionRange { min: u8, max: u8 },
}

impl From<Invalid> for DecodeError {
    fn from(invalid: Invalid) -> Self {
        match invalid {
            Invalid::Zero(kind, field) => Self::Zero { kind, field },
            Invalid::BadVersionRange { min, max } => Self::BadVersionRange { min, max },
        }
    }
}

impl From<Invalid> for EncodeError {
    fn from(invalid: Invalid) -> Self {
        match invalid {
            Invalid::Zero(kind, field) => Self::Zero { kind, field },
            Invalid::BadVersionRange { min, max } => Self::BadVersionRange { min, max },
        }
    }
}

fn nonzero<T: Default + PartialEq>(
    value: T,
    kind: FrameKind,
    field: &'static str,
) -> Result<(), Invalid> {
    if value == T::default() {
        Err(Invalid::Zero(kind, field))
    } else {
        Ok(())
    }
}

/// A field of a body of fixed layout: its size, and how it is read and written
/// (little-endian, as every integer of the protocol).
trait Field: Sized {
    /// Its bytes on the wire.
    const SIZE: usize;

    /// Reads it, or `None` if the bytes are not there.
    fn get(r: &mut Reader<'_>) -> Option<Self>;

    /// Appends its bytes.
    fn put(&self, out: &mut Vec<u8>);
}

/// The integers, as `to_le_bytes` writes them and the reader's method of their name reads
/// them.
macro_rules! int_fields {
    ($($int:ident),+) => {
        $(impl Field for $int {
            const SIZE: usize = size_of::<$int>();

            fn get(r: &mut Reader<'_>) -> Option<Self> {
                r.$int()
            }

            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        })+
    };
}

int_fields!(u8, u16, u32);

/// The ids, each as the integer it wraps.
macro_rules! id_fields {
    ($($id:ident($int:ident)),+) => {
        $(impl Field for $id {
            const SIZE: usize = $int::SIZE;

            fn get(r: &mut Reader<'_>) -> Option<Self> {
                $int::get(r).map(Self)
            }

            fn put(&self, out: &mut Vec<u8>) {
                self.0.put(out);
            }
        })+
    };
}

id_fields!(ProducerId(u32), ConsumerId(u32), QueueId(u32), AppId(u16));

/// Defines a layout of fixed length: its fields in order, each read and written as its
/// [`Field`], and the length the protocol documents for it, which the fields' sizes must
/// add up to (checked when the length is first used, at compile time).
///
/// `frame NAME(KIND)` also gives a frame's body its `LEN`, its `read` (which refuses a body
/// of another length, then, with `checked`, the values its `check` forbids) and its
/// `write`.
macro_rules! fixed_layout {
    ($name:ident, $len:literal bytes: $($field:ident: $ty:ty),+ $(,)?) => {
        impl Field for $name {
            const SIZE: usize = {
                assert!(
                    0 $(+ <$ty as Field>::SIZE)+ == $len,
                    concat!("the fields of ", stringify!($name), " do not add up to its length")
                );
                $len
            };

            fn get(r: &mut Reader<'_>) -> Option<Self> {
                Some(Self { $($field: <$ty as Field>::get(r)?),+ })
            }

            fn put(&self, out: &mut Vec<u8>) {
                $(self.$field.put(out);)+
            }
        }
    };
    (frame $name:ident($kind:ident) $($checked:ident)?, $len:literal bytes: $($fields:tt)+) => {
        fixed_layout!($name, $len bytes: $($fields)+);

        impl $name {
            pub(crate) const LEN: usize = <Self as Field>::SIZE;

            pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
                let frame = read_exact(FrameKind::$kind, body, <Self as Field>::get)?;
                $(fixed_layout!(@$checked frame);)?
                Ok(frame)
            }

            pub(crate) fn write(&self, out: &mut Vec<u8>) {
                self.put(out);
            }
        }
    };
    (@checked $frame:ident) => {
        $frame.check()?
    };
}
use fixed_layout;

/// Reads a body of fixed layout with `read`, which must consume it exactly.
fn read_exact<'a, T>(
    kind: FrameKind,
    body: &'a [u8],
    read: impl FnOnce(&mut Reader<'a>) -> Option<T>,
) -> Result<T, DecodeError> {
    let mut reader = Reader::new(body);
    match read(&mut reader) {
        Some(value) if reader.is_empty() => Ok(value),
        // The length came from a header checked against MAX_FRAME_LEN, a u32.
        _ => Err(DecodeError::BadLength {
            kind,
            len: body.len() as u32,
        }),
    }
}
