//! What a publish confirm says of a message ([`ConfirmStatus`]) and what an error frame
//! says went wrong ([`ErrorCode`]).

use std::fmt;

/// The outcome of a published message, one byte in a `PublishConfirm`. Each that the
/// broker reports maps to its `AckStatus` variant of the same name.
///
/// A receiver refuses a byte that is none of these (`DecodeError::UnknownStatus`): a
/// client that cannot tell what became of a message must not guess.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ConfirmStatus {
    /// The broker has taken the message: the client may forget it. (The in-memory broker
    /// reports it when its queue stores the message, whether or not a consumer is
    /// attached, or, with a replication quorum configured, once that many replicas have
    /// received it; never at consumption: `docs/protocol.md`, "Confirm statuses".)
    Stored = 0,
    /// The queue was full: the message was not stored. Publish it again.
    RejectedQueueFull = 1,
    /// The producer already had `max_unconfirmed` messages without a confirm: the message
    /// was not stored.
    RejectedProducerFull = 2,
    /// The producer's queue does not exist (any more).
    RejectedUnknownQueue = 3,
    /// The producer was closed before the message was stored.
    Closed = 4,
    /// No outcome came within the broker's confirm timeout.
    TimedOut = 5,
    /// The producer was closed before the message was sent to its queue.
    NotSent = 6,
    /// The payload is larger than the broker's payload slots (`Welcome`'s limits): not
    /// stored, and it never will be. A per-message refusal: the producer stays open.
    TooLarge = 7,
    /// A named producer's publish id older than the queue's deduplication window: the queue
    /// cannot tell whether it stored an earlier copy, so it did not store this one and does
    /// not say it is stored. Whether the message is stored is unknown.
    RejectedOutOfWindow = 8,
    /// The broker's payload store for the producer's queue was full: not stored; publish it
    /// again later. A per-message refusal: the producer stays open.
    RejectedStoreFull = 9,
}

impl ConfirmStatus {
    /// The status a byte stands for, or `None` for a byte no status has.
    ///
    /// ```
    /// use zerodispatch_wire::ConfirmStatus;
    /// assert_eq!(ConfirmStatus::from_u8(0), Some(ConfirmStatus::Stored));
    /// assert_eq!(ConfirmStatus::from_u8(10), None);
    /// ```
    #[must_use]
    pub fn from_u8(byte: u8) -> Option<Self> {
        Self::ALL.get(usize::from(byte)).copied()
    }

    /// The byte that stands for this status.
    #[must_use]
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// What the status proves of the message: stored, not stored, or unknown (the
    /// producer or connection ended first, or the broker cannot tell). The table of
    /// `docs/protocol.md`, "What an outcome proves", in code.
    ///
    /// ```
    /// use zerodispatch_wire::{ConfirmStatus, Stored};
    /// assert_eq!(ConfirmStatus::Stored.proves(), Stored::Yes);
    /// assert_eq!(ConfirmStatus::RejectedQueueFull.proves(), Stored::No);
    /// assert_eq!(ConfirmStatus::TimedOut.proves(), Stored::Unknown);
    /// ```
    #[must_use]
    pub fn proves(self) -> Stored {
        match self {
            Self::Stored => Stored::Yes,
            Self::RejectedQueueFull
            | Self::RejectedProducerFull
            | Self::RejectedUnknownQueue
            | Self::NotSent
            | Self::TooLarge
            | Self::RejectedStoreFull => Stored::No,
            Self::Closed | Self::TimedOut | Self::RejectedOutOfWindow => Stored::Unknown,
        }
    }

    /// Whether publishing the same message again can get another outcome: `false` for
    /// `Stored` (done) and for refusals that would refuse it again (`TooLarge`,
    /// `RejectedOutOfWindow`, `RejectedUnknownQueue`).
    #[must_use]
    pub fn is_retryable(self) -> bool {
        !matches!(
            self,
            Self::Stored | Self::TooLarge | Self::RejectedOutOfWindow | Self::RejectedUnknownQueue
        )
    }
}

/// What an outcome proves about whether the broker stored a message
/// ([`ConfirmStatus::proves`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stored {
    /// The broker stored it.
    Yes,
    /// The broker did not store it (this copy).
    No,
    /// The outcome cannot say: it came from the producer's or connection's end, or the
    /// broker could not tell.
    Unknown,
}

impl ConfirmStatus {
    /// Every status, in byte order: `ALL[b]` is the status of byte `b` (what
    /// [`from_u8`](Self::from_u8) reads).
    pub const ALL: [Self; 10] = [
        Self::Stored,
        Self::RejectedQueueFull,
        Self::RejectedProducerFull,
        Self::RejectedUnknownQueue,
        Self::Closed,
        Self::TimedOut,
        Self::NotSent,
        Self::TooLarge,
        Self::RejectedOutOfWindow,
        Self::RejectedStoreFull,
    ];
}

/// The code of an error frame: a `u16`. Codes below 100 are protocol errors: the sender
/// closes the connection after the error frame. Codes from 100 are refusals of one request
/// (an open, a close, a credit, a confirm): the connection stays open.
///
/// A receiver accepts a code it does not know (a newer peer's), and tells by its range
/// whether the connection is closing.
///
/// ```
/// use zerodispatch_wire::ErrorCode;
/// assert!(ErrorCode::MALFORMED.is_fatal());
/// assert!(!ErrorCode::UNKNOWN_QUEUE.is_fatal());
/// assert!(ErrorCode(99).is_fatal() && !ErrorCode(4242).is_fatal());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub u16);

impl ErrorCode {
    /// The first two bytes of a frame were not [`MAGIC`](crate::MAGIC).
    pub const BAD_MAGIC: Self = Self(1);
    /// A header carried a version the receiver does not speak, or `Hello` offered no
    /// version the broker speaks.
    pub const UNSUPPORTED_VERSION: Self = Self(2);
    /// A header carried a kind the protocol does not define.
    pub const UNKNOWN_KIND: Self = Self(3);
    /// A header set a flag the protocol does not define.
    pub const UNKNOWN_FLAGS: Self = Self(4);
    /// A header announced a body longer than [`MAX_FRAME_LEN`](crate::MAX_FRAME_LEN).
    pub const FRAME_TOO_LARGE: Self = Self(5);
    /// A body did not match its kind's layout: too short or too long, counts that do not
    /// fit its length, a zero where one is forbidden, a payload or batch over its limit, an
    /// unknown status, a message that is not UTF-8.
    pub const MALFORMED: Self = Self(6);
    /// A frame other than `Hello` before the handshake, or a second `Hello`.
    pub const HANDSHAKE_REQUIRED: Self = Self(7);
    /// A frame of a kind this side never receives (a `Deliver` sent to the broker).
    pub const UNEXPECTED_KIND: Self = Self(8);
    /// Nothing was received for three of the heartbeat intervals the sender announced, or,
    /// from the broker, for its idle limit (`Welcome`'s `idle_timeout_ms`).
    pub const HEARTBEAT_TIMEOUT: Self = Self(9);
    /// The broker is shutting down.
    pub const SHUTTING_DOWN: Self = Self(10);
    /// The sender failed in a way the receiver cannot help.
    pub const INTERNAL: Self = Self(11);
    /// The broker has as many connections open as it allows: it refuses this one, before
    /// its `Hello`, and closes it. Nothing is wrong with the client; it may connect again
    /// later, once another connection has closed.
    pub const TOO_MANY_CONNECTIONS: Self = Self(12);
    /// A frame that had begun did not arrive whole within the broker's frame timeout
    /// (`Welcome`'s `frame_timeout_ms`), however its bytes were paced.
    pub const FRAME_TIMEOUT: Self = Self(13);

    /// The queue of an open does not exist.
    pub const UNKNOWN_QUEUE: Self = Self(100);
    /// The app of an `OpenConsumer` does not exist in its queue.
    pub const UNKNOWN_APP: Self = Self(101);
    /// A frame named a producer that is not open on the connection.
    pub const UNKNOWN_PRODUCER: Self = Self(102);
    /// A frame named a consumer that is not open on the connection, or confirmed a GUID
    /// the consumer does not hold.
    pub const UNKNOWN_CONSUMER: Self = Self(103);
    /// An open named a producer or consumer id already open on the connection.
    pub const ID_IN_USE: Self = Self(104);
    /// An open asked for more than the broker allows (`max_unconfirmed` above its cap).
    pub const LIMIT_OUT_OF_RANGE: Self = Self(105);
    /// An `OpenProducer` named a producer name that is open now, on this connection or
    /// another. A producer reconnecting under its name may see it while the broker is still
    /// closing the lost connection's producer: it tries again shortly.
    pub const NAME_IN_USE: Self = Self(106);
    /// A `Publish` named one publish id twice: its confirms could not be told apart, so
    /// none of the frame's messages was taken (none is stored, none gets a confirm). The
    /// producer stays open.
    pub const DUPLICATE_ID: Self = Self(107);

    /// The first code that refuses a request without closing the connection.
    pub const FIRST_REFUSAL: u16 = 100;

    /// Whether the sender closes the connection after an error frame with this code.
    #[must_use]
    pub fn is_fatal(self) -> bool {
        self.0 < Self::FIRST_REFUSAL
    }

    /// The code's name, or `None` for a code this crate does not define.
    #[must_use]
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::BAD_MAGIC => "bad magic",
            Self::UNSUPPORTED_VERSION => "unsupported version",
            Self::UNKNOWN_KIND => "unknown kind",
            Self::UNKNOWN_FLAGS => "unknown flags",
            Self::FRAME_TOO_LARGE => "frame too large",
            Self::MALFORMED => "malformed frame",
            Self::HANDSHAKE_REQUIRED => "handshake required",
            Self::UNEXPECTED_KIND => "unexpected kind",
            Self::HEARTBEAT_TIMEOUT => "heartbeat timeout",
            Self::SHUTTING_DOWN => "shutting down",
            Self::INTERNAL => "internal error",
            Self::TOO_MANY_CONNECTIONS => "too many connections",
            Self::FRAME_TIMEOUT => "frame timeout",
            Self::UNKNOWN_QUEUE => "unknown queue",
            Self::UNKNOWN_APP => "unknown app",
            Self::UNKNOWN_PRODUCER => "unknown producer",
            Self::UNKNOWN_CONSUMER => "unknown consumer",
            Self::ID_IN_USE => "id in use",
            Self::LIMIT_OUT_OF_RANGE => "limit out of range",
            Self::NAME_IN_USE => "name in use",
            Self::DUPLICATE_ID => "duplicate publish id",
            _ => return None,
        })
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "ErrorCode({} {name})", self.0),
            None => write!(f, "ErrorCode({})", self.0),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "error {}", self.0),
        }
    }
}
