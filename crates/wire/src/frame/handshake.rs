//! The handshake's frames: `Hello`, and the `Welcome` that answers it with the
//! [`ServerLimits`] a broker tells each client.

use super::{Field, Invalid, fixed_layout, nonzero, read_exact};
use crate::error::DecodeError;
use crate::kind::FrameKind;
use crate::reader::Reader;

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

fixed_layout! {
    frame Hello(Hello) checked, 6 bytes:
    min_version: u8,
    max_version: u8,
    heartbeat_ms: u32,
}

impl Hello {
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

fixed_layout! {
    frame Welcome(Welcome) checked, 53 bytes:
    version: u8,
    heartbeat_ms: u32,
    limits: ServerLimits,
}

impl Welcome {
    pub(crate) fn check(&self) -> Result<(), Invalid> {
        nonzero(self.version, FrameKind::Welcome, "version")
    }
}

fixed_layout! {
    ServerLimits,
    48 bytes:
    max_payload: u32,
    max_unconfirmed_per_connection: u32,
    max_unconfirmed_named: u32,
    consumer_window: u32,
    queue_slots: u32,
    max_producers: u16,
    max_consumers: u16,
    idle_timeout_ms: u32,
    max_connections: u32,
    frame_timeout_ms: u32,
    handshake_timeout_ms: u32,
    dedup_window: u32,
    max_new_names: u32,
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
