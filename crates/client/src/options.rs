//! The options of a connection, a producer and a consumer, each checked when it is used.

use std::time::Duration;

use zerodispatch_wire::MAX_MESSAGES_PER_FRAME;

use crate::error::ClientError;

/// How a connection behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// The client's heartbeat interval, announced in `Hello`: by the heartbeat rule
    /// (`docs/protocol.md`), how long the broker may stay silent. The broker sends a
    /// heartbeat whenever it has sent nothing for this long, and the client ends the
    /// connection ([`ClientError::HeartbeatTimeout`](crate::ClientError::HeartbeatTimeout))
    /// after three of them without a byte. The client itself sends a heartbeat when it has
    /// sent nothing for the interval the broker asked in `Welcome`, or for this one if
    /// shorter. `Duration::ZERO` for none: no heartbeats from the broker, and no timeout
    /// (the broker's idle limit still applies to the client). At most `u32::MAX` ms.
    /// Default 5 s.
    pub heartbeat: Duration,
    /// How long `connect` waits for the connection and the broker's `Welcome`. Default 10 s.
    pub handshake_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

impl ClientOptions {
    /// The heartbeat interval in ms, as `Hello` carries it.
    pub(crate) fn heartbeat_ms(&self) -> Result<u32, ClientError> {
        u32::try_from(self.heartbeat.as_millis()).map_err(|_| ClientError::InvalidOption {
            option: "heartbeat",
            expected: "at most u32::MAX ms",
        })
    }
}

/// When a producer sends the messages it has taken (the broker's `FlushStrategy`, over the
/// wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Dynamic send (natural batching): a message goes as soon as the connection is not
    /// writing; while a write is in flight, messages accumulate, and when it completes
    /// everything pending goes in one write. Frames are cut at `batch_size` messages and at
    /// the protocol's limits. At low rates each message goes alone, at once; under load
    /// batches grow by themselves.
    Dynamic {
        /// Messages per `Publish` frame, at most: 1 to
        /// [`MAX_MESSAGES_PER_FRAME`](zerodispatch_wire::MAX_MESSAGES_PER_FRAME).
        batch_size: u32,
    },
    /// Timer aggregation, the baseline: what is pending goes every interval (a
    /// free-running ticker), or as soon as it fills a frame.
    Timer(Duration),
}

impl Default for Flush {
    fn default() -> Self {
        Self::Dynamic { batch_size: 256 }
    }
}

/// How a producer sends: its cap, its flush and its confirm timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerOptions {
    /// Messages taken and without an outcome, at most (the unconfirmed cap, also sent to
    /// the broker in `OpenProducer`): `send` waits and `try_send` hands back while it is
    /// reached. 1 to [`MAX_UNCONFIRMED`]; default 10,000. The producer's tables are
    /// allocated for it when it opens.
    pub max_unconfirmed: u32,
    /// When messages are sent.
    pub flush: Flush,
    /// A message without an outcome this long after it was taken is reported
    /// [`TimedOut`](zerodispatch_wire::ConfirmStatus::TimedOut), once; the broker's late
    /// confirm is ignored. `None` (the default) waits for ever.
    pub confirm_timeout: Option<Duration>,
}

/// A producer's `max_unconfirmed`, at most: 2^24, the in-memory broker's own cap.
pub const MAX_UNCONFIRMED: u32 = 1 << 24;

impl Default for ProducerOptions {
    fn default() -> Self {
        Self {
            max_unconfirmed: 10_000,
            flush: Flush::default(),
            confirm_timeout: None,
        }
    }
}

impl ProducerOptions {
    pub(crate) fn check(&self) -> Result<(), ClientError> {
        if !(1..=MAX_UNCONFIRMED).contains(&self.max_unconfirmed) {
            return Err(ClientError::InvalidOption {
                option: "max_unconfirmed",
                expected: "1 to 2^24",
            });
        }
        match self.flush {
            Flush::Dynamic { batch_size }
                if !(1..=MAX_MESSAGES_PER_FRAME).contains(&batch_size) =>
            {
                Err(ClientError::InvalidOption {
                    option: "batch_size",
                    expected: "1 to MAX_MESSAGES_PER_FRAME (4096)",
                })
            }
            Flush::Timer(interval) if interval.is_zero() => Err(ClientError::InvalidOption {
                option: "timer interval",
                expected: "more than zero",
            }),
            _ if self.confirm_timeout.is_some_and(|t| t.is_zero()) => {
                Err(ClientError::InvalidOption {
                    option: "confirm_timeout",
                    expected: "more than zero, or None",
                })
            }
            _ => Ok(()),
        }
    }

    /// Messages per frame, at most.
    pub(crate) fn batch_size(&self) -> u32 {
        match self.flush {
            Flush::Dynamic { batch_size } => batch_size,
            Flush::Timer(_) => MAX_MESSAGES_PER_FRAME,
        }
    }
}

/// How a consumer is paced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerOptions {
    /// Messages the broker may deliver before the consumer gives more credit (sent in
    /// `OpenConsumer`); 0 starts paused. Default 1024.
    pub credit: u32,
    /// Give one credit back per message confirmed, with the confirms: a constant number of
    /// messages in flight. Default `true`.
    pub auto_credit: bool,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        Self {
            credit: 1024,
            auto_credit: true,
        }
    }
}
