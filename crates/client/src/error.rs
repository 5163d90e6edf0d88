//! What can go wrong: [`ClientError`] for the connection and its requests, and
//! [`TrySendError`] for a send that may not wait.

use std::fmt;
use std::io;

use zerodispatch_wire::{DecodeError, ErrorCode, FrameKind};

/// Why a request failed or a connection ended.
///
/// Cloneable: a connection that ends hands the same error to every producer, consumer and
/// waiter of it. Non-exhaustive: a later version may add a case.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// Connecting, reading or writing failed.
    Io {
        /// The I/O error's kind.
        kind: io::ErrorKind,
        /// The I/O error, for people.
        message: String,
    },
    /// The broker closed the connection without an error frame.
    ConnectionClosed,
    /// The connection was closed by this side ([`Client::close`](crate::Client::close), or
    /// the [`Client`](crate::Client) dropped), or the producer or consumer was closed.
    Closed,
    /// The broker sent a fatal error frame (a code below 100) and closed the connection.
    Broker {
        /// The error's code.
        code: ErrorCode,
        /// The broker's message, for people.
        message: String,
    },
    /// The broker refused one request (an error frame with a code from 100): the
    /// connection stays open. `subject` is the producer or consumer id the refused frame
    /// named, and the refusal concerns that producer or consumer only.
    Refused {
        /// The refusal's code.
        code: ErrorCode,
        /// The kind of the frame refused, if the broker said.
        refused: Option<FrameKind>,
        /// The producer or consumer id the refused frame named.
        subject: u32,
        /// The broker's message, for people.
        message: String,
    },
    /// The broker sent bytes that are not a valid frame, or a frame a client never
    /// receives: the client answered with an error frame of `code` and closed.
    Protocol {
        /// The code of the error frame the client sent.
        code: ErrorCode,
        /// What was wrong, for people.
        message: String,
    },
    /// Nothing came from the broker for three of the heartbeat intervals the client
    /// announced ([`ClientOptions::heartbeat`](crate::ClientOptions::heartbeat)): the client
    /// sent `HEARTBEAT_TIMEOUT` and closed.
    HeartbeatTimeout,
    /// The handshake did not end within [`ClientOptions::handshake_timeout`](crate::ClientOptions::handshake_timeout).
    HandshakeTimeout,
    /// A payload is longer than the broker takes: the `max_payload` it told in its
    /// `Welcome` ([`Client::limits`](crate::Client::limits)), itself at most the protocol's
    /// [`MAX_PAYLOAD_LEN`](zerodispatch_wire::MAX_PAYLOAD_LEN). It was not sent (the broker
    /// would confirm it `TooLarge`).
    PayloadTooLarge {
        /// The payload's length.
        len: usize,
        /// The limit: the broker's `max_payload`.
        max: u32,
    },
    /// A named producer has used every publish id: its name's messages are numbered up
    /// to `u64::MAX` already (each id means one message to the broker's deduplication, so
    /// none can be used twice). Open a producer of another name.
    IdsExhausted,
    /// An option is over a limit the broker told in its `Welcome`
    /// ([`Client::limits`](crate::Client::limits)): nothing was opened, nothing sent.
    OverLimit {
        /// The option.
        option: &'static str,
        /// Its value.
        value: u64,
        /// The broker's limit it exceeds.
        limit: &'static str,
        /// The limit's value.
        max: u64,
    },
    /// An option is out of its range: nothing was opened.
    InvalidOption {
        /// The option.
        option: &'static str,
        /// Its range.
        expected: &'static str,
    },
}

impl ClientError {
    pub(crate) fn io(error: &io::Error) -> Self {
        Self::Io {
            kind: error.kind(),
            message: error.to_string(),
        }
    }

    pub(crate) fn protocol(error: DecodeError) -> Self {
        Self::Protocol {
            code: error.code(),
            message: error.to_string(),
        }
    }

    /// Whether the connection ended with this error (every error but a refusal, a payload
    /// too large, an invalid option and exhausted ids, which concern one request or one
    /// producer).
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self,
            Self::Refused { .. }
                | Self::PayloadTooLarge { .. }
                | Self::InvalidOption { .. }
                | Self::OverLimit { .. }
                | Self::IdsExhausted
        )
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { message, .. } => write!(f, "I/O error: {message}"),
            Self::ConnectionClosed => f.write_str("the broker closed the connection"),
            Self::Closed => f.write_str("closed"),
            Self::Broker { code, message } => write!(f, "the broker's error {code}: {message}"),
            Self::Refused {
                code,
                refused,
                subject,
                message,
            } => {
                write!(f, "the broker refused ")?;
                match refused {
                    Some(kind) => write!(f, "{kind:?}")?,
                    None => f.write_str("a request")?,
                }
                write!(f, " of {subject} with {code}: {message}")
            }
            Self::Protocol { code, message } => {
                write!(f, "the broker broke the protocol ({code}): {message}")
            }
            Self::HeartbeatTimeout => {
                f.write_str("nothing from the broker for three heartbeat intervals")
            }
            Self::HandshakeTimeout => f.write_str("the broker did not answer Hello in time"),
            Self::PayloadTooLarge { len, max } => {
                write!(f, "a payload of {len} bytes is over the limit of {max}")
            }
            Self::InvalidOption { option, expected } => {
                write!(f, "option {option} out of range: expected {expected}")
            }
            Self::OverLimit {
                option,
                value,
                limit,
                max,
            } => write!(
                f,
                "option {option} is {value}, over {limit} of {max}: nothing was opened"
            ),
            Self::IdsExhausted => f.write_str(
                "the producer's name has used every publish id up to u64::MAX; open another name",
            ),
        }
    }
}

impl std::error::Error for ClientError {}

/// Why [`Producer::try_send`](crate::Producer::try_send) did not take a message.
/// Non-exhaustive: a later version may add a case.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrySendError {
    /// The producer has `max_unconfirmed` messages without an outcome: the message was not
    /// taken (the caller still has it); try again once outcomes come.
    Full,
    /// The message cannot be sent at all.
    Failed(ClientError),
}

impl fmt::Display for TrySendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full => f.write_str("the producer is at its unconfirmed cap"),
            Self::Failed(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for TrySendError {}

impl From<ClientError> for TrySendError {
    fn from(error: ClientError) -> Self {
        Self::Failed(error)
    }
}
