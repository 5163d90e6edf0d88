//! [`Frame`]: one decoded frame, and the frames of fixed layout (everything but the
//! batches, which are in `batch.rs`): their fields, how their bodies are read and written,
//! and which values they forbid.

use crate::batch::{ConsumerConfirmFrame, DeliverFrame, PublishConfirmFrame, PublishFrame};
use crate::error::{DecodeError, EncodeError};
use crate::kind::FrameKind;
use crate::ids::{AppId, ConsumerId, ProducerId, QueueId};
use crate::limits::{MAX_ERROR_MESSAGE_LEN, MAX_PRODUCER_NAME_LEN};
use crate::reader::Reader;
use crate::status::ErrorCode;

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

/// `Hello` (client -> broker, the first frame): the versions the client speaks, and how
/// often it will send a heartbeat when it has nothing else to send.
///
/// Body, 6 bytes: `min_version: u8`, `max_version: u8`, `heartbeat_ms: u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The lowest version the client speaks, at least 1.
    pub min_version: u8,
    /// The highest version the client speaks, at least `min_version`.
    pub max_version: u8,
    /// The client's heartbeat interval in milliseconds; 0 for none.
    pub heartbeat_ms: u32,
}

impl Hello {
    pub(crate) const LEN: usize = 6;

    pub(crate) fn check(&self) -> Result<(), Invalid> {
        nonzero(self.min_version, FrameKind::Hello, "min_version")?;
        if self.min_version > self.max_version {
            return Err(Invalid::BadVersionRange {
                min: self.min_version,
                max: self.max_version,
            });
        }
        Ok(())
    }

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        let hello = read_exact(FrameKind::Hello, body, |r| {
            Some(Self {
                min_version: r.u8()?,
                max_version: r.u8()?,
                heartbeat_ms: r.u32()?,
            })
        })?;
        hello.check()?;
        Ok(hello)
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.push(self.min_version);
        out.push(self.max_version);
        out.extend_from_slice(&self.heartbeat_ms.to_le_bytes());
    }
}

/// `Welcome` (broker -> client, the answer to `Hello`): the version both speak from now
/// on, the heartbeat interval the broker asks of the client, and the broker's limits, so
/// that a client never learns one by being refused.
///
/// Body, 53 bytes: `version: u8`, `heartbeat_ms: u32`, then [`ServerLimits`]'s fields in
/// order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// The version chosen: the highest that both speak; at least 1.
    pub version: u8,
    /// The heartbeat interval the broker asks of the client, in milliseconds: the client
    /// sends a frame whenever it has sent nothing for this long. 0 for none.
    pub heartbeat_ms: u32,
    /// What the broker allows each connection.
    pub limits: ServerLimits,
}

/// The limits a broker tells each client in its `Welcome`: what exceeding each one gets is
/// in `docs/protocol.md`, "Limits".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// The longest payload the broker stores, at most [`MAX_PAYLOAD_LEN`](crate::MAX_PAYLOAD_LEN):
    /// a longer one is confirmed `TooLarge`.
    pub max_payload: u32,
    /// The sum of the `max_unconfirmed` of one connection's open producers, at most: an
    /// `OpenProducer` past it is refused `LIMIT_OUT_OF_RANGE`.
    pub max_unconfirmed_per_connection: u32,
    /// A named producer's `max_unconfirmed`, at most (the broker's deduplication window):
    /// past it, its `OpenProducer` is refused `LIMIT_OUT_OF_RANGE`.
    pub max_unconfirmed_named: u32,
    /// Messages a consumer holds delivered and unconfirmed, at most, whatever its credit.
    pub consumer_window: u32,
    /// Payload slots each queue may hold at once: past them, a publish is confirmed
    /// `RejectedStoreFull`.
    pub queue_slots: u32,
    /// Producers open at once on one connection, at most.
    pub max_producers: u16,
    /// Consumers open at once on one connection, at most.
    pub max_consumers: u16,
    /// The idle limit, in milliseconds: a connection from which the broker received
    /// nothing for this long is closed (`HEARTBEAT_TIMEOUT`).
    pub idle_timeout_ms: u32,
    /// Connections the broker serves at once, at most: one more is refused
    /// `TOO_MANY_CONNECTIONS`.
    pub max_connections: u32,
    /// How long a frame may take to arrive once its first byte has, in milliseconds,
    /// whatever the pace of its bytes: past it the connection is closed (`FRAME_TIMEOUT`).
    pub frame_timeout_ms: u32,
    /// How long the handshake may take, in milliseconds from the connection: a connection
    /// that has not sent a whole `Hello` by then is closed (`HANDSHAKE_REQUIRED`).
    pub handshake_timeout_ms: u32,
    /// The deduplication window: how many ids, from the highest a queue has stored of a
    /// name down, it remembers one by one; an id of the name older than that is confirmed
    /// `RejectedOutOfWindow`. At least `max_unconfirmed_named`.
    pub dedup_window: u32,
    /// New producer names one connection may create (names the broker has never been
    /// given), at most: past it an `OpenProducer` of a new name is refused
    /// `LIMIT_OUT_OF_RANGE`; names the broker knows may still be opened.
    pub max_new_names: u32,
}

impl Welcome {
    pub(crate) const LEN: usize = 53;

    pub(crate) fn check(&self) -> Result<(), Invalid> {
        nonzero(self.version, FrameKind::Welcome, "version")
    }

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        let welcome = read_exact(FrameKind::Welcome, body, |r| {
            Some(Self {
                version: r.u8()?,
                heartbeat_ms: r.u32()?,
                limits: ServerLimits {
                    max_payload: r.u32()?,
                    max_unconfirmed_per_connection: r.u32()?,
                    max_unconfirmed_named: r.u32()?,
                    consumer_window: r.u32()?,
                    queue_slots: r.u32()?,
                    max_producers: r.u16()?,
                    max_consumers: r.u16()?,
                    idle_timeout_ms: r.u32()?,
                    max_connections: r.u32()?,
                    frame_timeout_ms: r.u32()?,
                    handshake_timeout_ms: r.u32()?,
                    dedup_window: r.u32()?,
                    max_new_names: r.u32()?,
                },
            })
        })?;
        welcome.check()?;
        Ok(welcome)
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let l = &self.limits;
        out.push(self.version);
        out.extend_from_slice(&self.heartbeat_ms.to_le_bytes());
        for word in [
            l.max_payload,
            l.max_unconfirmed_per_connection,
            l.max_unconfirmed_named,
            l.consumer_window,
            l.queue_slots,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&l.max_producers.to_le_bytes());
        out.extend_from_slice(&l.max_consumers.to_le_bytes());
        for word in [
            l.idle_timeout_ms,
            l.max_connections,
            l.frame_timeout_ms,
            l.handshake_timeout_ms,
            l.dedup_window,
            l.max_new_names,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }
}

impl ServerLimits {
    /// Limits that bound nothing but the protocol's own (for tests and for a broker that
    /// has no others): every field at its largest.
    pub const PROTOCOL: Self = Self {
        max_payload: crate::limits::MAX_PAYLOAD_LEN,
        max_unconfirmed_per_connection: u32::MAX,
        max_unconfirmed_named: u32::MAX,
        consumer_window: u32::MAX,
        queue_slots: u32::MAX,
        max_producers: u16::MAX,
        max_consumers: u16::MAX,
        idle_timeout_ms: u32::MAX,
        max_connections: u32::MAX,
        frame_timeout_ms: u32::MAX,
        handshake_timeout_ms: u32::MAX,
        dedup_window: u32::MAX,
        max_new_names: u32::MAX,
    };
}

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

/// `OpenProducer` (client -> broker): open producer `producer` on `queue`, anonymous or
/// under a name. The broker answers with [`ProducerOpened`] once it is open, or with an
/// error frame that refuses it (`NAME_IN_USE` while the name is open on any connection).
///
/// Body, 13 bytes and the name: `producer: u32`, `queue: u32`, `max_unconfirmed: u32`,
/// `name_len: u8`, `name: bytes(name_len)` (UTF-8; empty: anonymous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenProducer<'a> {
    /// The producer's id on the connection, chosen by the client.
    pub producer: ProducerId,
    /// The queue every message of the producer goes to.
    pub queue: QueueId,
    /// Messages published and without a confirm, at most; at least 1. The broker confirms
    /// a message past it `RejectedProducerFull`, and refuses an open above its own cap.
    pub max_unconfirmed: u32,
    /// The producer's name, at most [`MAX_PRODUCER_NAME_LEN`] bytes; empty for an
    /// anonymous producer. A named producer's messages are deduplicated by the broker: it
    /// numbers them with increasing publish ids, and a message published again with its
    /// id (after a lost connection) is confirmed `Stored` again, never stored twice.
    pub name: &'a str,
}

impl<'a> OpenProducer<'a> {
    pub(crate) const FIXED_LEN: usize = 13;

    pub(crate) fn check(&self) -> Result<(), EncodeError> {
        nonzero(
            self.max_unconfirmed,
            FrameKind::OpenProducer,
            "max_unconfirmed",
        )?;
        if self.name.len() > MAX_PRODUCER_NAME_LEN {
            return Err(EncodeError::NameTooLong {
                len: self.name.len(),
                max: MAX_PRODUCER_NAME_LEN,
            });
        }
        Ok(())
    }

    pub(crate) fn read(body: &'a [u8]) -> Result<Self, DecodeError> {
        let kind = FrameKind::OpenProducer;
        let len = body.len() as u32;
        let mut r = Reader::new(body);
        let (Some(producer), Some(queue), Some(max_unconfirmed), Some(name_len)) =
            (r.u32(), r.u32(), r.u32(), r.u8())
        else {
            return Err(DecodeError::BadLength { kind, len });
        };
        let name = r.rest();
        if name.len() != usize::from(name_len) {
            return Err(DecodeError::BadLength { kind, len });
        }
        nonzero(max_unconfirmed, kind, "max_unconfirmed")?;
        Ok(Self {
            producer: ProducerId(producer),
            queue: QueueId(queue),
            max_unconfirmed,
            name: std::str::from_utf8(name).map_err(|_| DecodeError::BadUtf8)?,
        })
    }

    pub(crate) fn body_len(&self) -> usize {
        Self::FIXED_LEN + self.name.len()
    }

    /// Writes the body; `check` has passed.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.producer.0.to_le_bytes());
        out.extend_from_slice(&self.queue.0.to_le_bytes());
        out.extend_from_slice(&self.max_unconfirmed.to_le_bytes());
        // At most MAX_PRODUCER_NAME_LEN, a u8: `check` passed.
        out.push(self.name.len() as u8);
        out.extend_from_slice(self.name.as_bytes());
    }
}

/// `ProducerOpened` (broker -> client): the answer to an `OpenProducer`: producer
/// `producer` is open, and `stored` says, id by id, which of its name's recent messages
/// its queue has stored (nothing, for an anonymous producer).
///
/// Body, `17 + ceil(known / 8)` bytes: `producer: u32`, `flags: u8` (bit 0: something is
/// stored; no other bit is defined), `last_stored: u64` (0 when nothing is), `known: u32`,
/// then `bits: bytes(ceil(known / 8))`; see [`StoredWindow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerOpened<'a> {
    /// The producer, as the client named it.
    pub producer: ProducerId,
    /// What the producer's queue has stored of its name's messages.
    pub stored: StoredWindow<'a>,
}

/// What a queue has stored of one producer name's messages: the highest publish id stored
/// (`last_stored`) and, for each of the `known` ids at and below it, whether it is stored:
/// bit `i` (byte `i / 8`, bit `i % 8`, least significant first) stands for id
/// `last_stored - i`. Every answer is a fact: an id above `last_stored` is not stored, an
/// id of the window is as its bit says, and of an id older than the window (`last_stored -
/// id >= known`) nothing is said.
///
/// Valid when nothing is stored (`last_stored` `None`, `known` 0, no bits), or when
/// `known` is 1 to [`MAX_STORED_WINDOW`] and at most `last_stored + 1`, bit 0 (the highest
/// itself) is set, and the bits past `known` in the last byte are clear.
///
/// ```
/// use zerodispatch_wire::StoredWindow;
///
/// // 3 and 1 stored, 2 not; 0 older than the window.
/// let window = StoredWindow { last_stored: Some(3), known: 3, bits: &[0b101] };
/// assert_eq!(window.stored(4), Some(false));
/// assert_eq!(window.stored(3), Some(true));
/// assert_eq!(window.stored(2), Some(false));
/// assert_eq!(window.stored(1), Some(true));
/// assert_eq!(window.stored(0), None);
/// assert_eq!(StoredWindow::NOTHING.stored(0), Some(false));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredWindow<'a> {
    /// The highest publish id stored, or `None` if none is (or the producer is anonymous).
    pub last_stored: Option<u64>,
    /// How many ids, from `last_stored` down, `bits` describes.
    pub known: u32,
    /// One bit per id, from `last_stored` down.
    pub bits: &'a [u8],
}

impl StoredWindow<'_> {
    /// Nothing stored.
    pub const NOTHING: StoredWindow<'static> = StoredWindow {
        last_stored: None,
        known: 0,
        bits: &[],
    };

    /// Whether message `id` is stored: `Some(true)`, `Some(false)`, or `None` when the
    /// answer does not reach it (older than the window).
    #[must_use]
    pub fn stored(&self, id: u64) -> Option<bool> {
        let Some(last) = self.last_stored else {
            return Some(false);
        };
        if id > last {
            return Some(false);
        }
        let i = last - id;
        // `get`: a window built by hand may have fewer bits than `known` says (a decoded
        // one never does): those ids read as not stored rather than panic.
        (i < u64::from(self.known)).then(|| {
            self.bits
                .get((i / 8) as usize)
                .is_some_and(|byte| byte & (1 << (i % 8)) != 0)
        })
    }

    /// Whether the fields are consistent (see the type's documentation).
    fn is_valid(&self) -> bool {
        let Some(last) = self.last_stored else {
            return self.known == 0 && self.bits.is_empty();
        };
        let known = u64::from(self.known);
        let bytes = known.div_ceil(8) as usize;
        let spare = (bytes * 8) as u64 - known;
        (1..=u64::from(MAX_STORED_WINDOW)).contains(&known)
            && last.checked_add(1).is_none_or(|ids| known <= ids)
            && self.bits.len() == bytes
            && self.bits[0] & 1 == 1
            && self.bits[bytes - 1]
                .checked_shr(8 - spare as u32)
                .unwrap_or(0)
                == 0
    }
}

/// A [`StoredWindow`]'s `known`, at most: 2^20 ids, 128 KiB of bits in one frame.
pub const MAX_STORED_WINDOW: u32 = 1 << 20;

impl<'a> ProducerOpened<'a> {
    pub(crate) const FIXED_LEN: usize = 17;

    pub(crate) fn body_len(&self) -> usize {
        Self::FIXED_LEN + self.stored.bits.len()
    }

    /// Checks what `write` would write.
    pub(crate) fn check(&self) -> Result<(), EncodeError> {
        if self.stored.is_valid() {
            Ok(())
        } else {
            Err(EncodeError::BadStoredWindow)
        }
    }

    pub(crate) fn read(body: &'a [u8]) -> Result<Self, DecodeError> {
        let kind = FrameKind::ProducerOpened;
        let bad_length = DecodeError::BadLength {
            kind,
            len: body.len() as u32,
        };
        let mut r = Reader::new(body);
        let (Some(producer), Some(flags), Some(last), Some(known)) =
            (r.u32(), r.u8(), r.u64(), r.u32())
        else {
            return Err(bad_length);
        };
        if flags > 1 {
            return Err(DecodeError::BadStoredWindow);
        }
        let bits = r.rest();
        if bits.len() as u64 != u64::from(known).div_ceil(8) {
            return Err(bad_length);
        }
        let stored = StoredWindow {
            last_stored: (flags == 1).then_some(last),
            known,
            bits,
        };
        if !stored.is_valid() || (flags == 0 && last != 0) {
            return Err(DecodeError::BadStoredWindow);
        }
        Ok(Self {
            producer: ProducerId(producer),
            stored,
        })
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.producer.0.to_le_bytes());
        out.push(u8::from(self.stored.last_stored.is_some()));
        out.extend_from_slice(&self.stored.last_stored.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.stored.known.to_le_bytes());
        out.extend_from_slice(self.stored.bits);
    }
}

/// `CloseProducer` (client -> broker): close producer `producer`. The broker confirms
/// every message of it that has no confirm yet (`Closed` or `NotSent` where it has no
/// outcome), then echoes the frame; after the echo the id may be opened again.
///
/// Body, 4 bytes: `producer: u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseProducer {
    /// The producer.
    pub producer: ProducerId,
}

impl CloseProducer {
    pub(crate) const LEN: usize = 4;

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        read_exact(FrameKind::CloseProducer, body, |r| {
            Some(Self {
                producer: ProducerId(r.u32()?),
            })
        })
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.producer.0.to_le_bytes());
    }
}

/// `OpenConsumer` (client -> broker): open consumer `consumer` of `app` on `queue`, with
/// `credit` messages it may be delivered before it gives more. The broker answers with the
/// same frame once it is open, or with an error frame that refuses it.
///
/// Body, 14 bytes: `consumer: u32`, `queue: u32`, `app: u16`, `credit: u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenConsumer {
    /// The consumer's id on the connection, chosen by the client.
    pub consumer: ConsumerId,
    /// The queue.
    pub queue: QueueId,
    /// The app (sub-queue); 0 in a priority queue.
    pub app: AppId,
    /// Messages the broker may deliver before the consumer sends a `Credit`; 0 to start
    /// paused.
    pub credit: u32,
}

impl OpenConsumer {
    pub(crate) const LEN: usize = 14;

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        read_exact(FrameKind::OpenConsumer, body, |r| {
            Some(Self {
                consumer: ConsumerId(r.u32()?),
                queue: QueueId(r.u32()?),
                app: AppId(r.u16()?),
                credit: r.u32()?,
            })
        })
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.consumer.0.to_le_bytes());
        out.extend_from_slice(&self.queue.0.to_le_bytes());
        out.extend_from_slice(&self.app.0.to_le_bytes());
        out.extend_from_slice(&self.credit.to_le_bytes());
    }
}

/// `CloseConsumer` (client -> broker): close consumer `consumer`. The broker delivers it
/// nothing more and echoes the frame; what it delivered and was not confirmed goes to the
/// queue's other consumers. After the echo the id may be opened again.
///
/// Body, 4 bytes: `consumer: u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseConsumer {
    /// The consumer.
    pub consumer: ConsumerId,
}

impl CloseConsumer {
    pub(crate) const LEN: usize = 4;

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        read_exact(FrameKind::CloseConsumer, body, |r| {
            Some(Self {
                consumer: ConsumerId(r.u32()?),
            })
        })
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.consumer.0.to_le_bytes());
    }
}

/// `Credit` (client -> broker): consumer `consumer` may be delivered `credit` more
/// messages. Each delivered message takes one; the broker adds credits up to `u32::MAX`
/// (saturating).
///
/// Body, 8 bytes: `consumer: u32`, `credit: u32` (at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credit {
    /// The consumer.
    pub consumer: ConsumerId,
    /// The messages added; at least 1.
    pub credit: u32,
}

impl Credit {
    pub(crate) const LEN: usize = 8;

    pub(crate) fn check(&self) -> Result<(), Invalid> {
        nonzero(self.credit, FrameKind::Credit, "credit")
    }

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        let credit = read_exact(FrameKind::Credit, body, |r| {
            Some(Self {
                consumer: ConsumerId(r.u32()?),
                credit: r.u32()?,
            })
        })?;
        credit.check()?;
        Ok(credit)
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.consumer.0.to_le_bytes());
        out.extend_from_slice(&self.credit.to_le_bytes());
    }
}
