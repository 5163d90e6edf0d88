//! [`Limits`]: what the server allows each connection and preallocates for it, and the
//! checks that refuse a configuration it could not keep.

use std::fmt;
use std::time::Duration;

use zerodispatch_broker::MAX_UNCONFIRMED;
use zerodispatch_wire::{MAX_MESSAGES_PER_FRAME, MAX_PAYLOAD_LEN};

/// [`Limits::consumer_window`], at most: 2^20. A connection preallocates a table of the
/// window's entries (32 bytes each) for each consumer it opens (32 MiB at this limit).
pub const MAX_CONSUMER_WINDOW: u32 = 1 << 20;

/// Items a connection's outbound queue holds, at most: 2^26 (about 3 GiB of queue). The
/// queue grows, as the connection opens producers and consumers, to what they can have in
/// flight to it, up to what these limits allow; raise it only with the memory each
/// connection may take.
const MAX_OUTBOUND: usize = 1 << 26;

/// The server's limits. Everything a connection may hold is bounded by them; a connection
/// takes the memory as its traffic needs it (a silent one a few KiB), and keeps what it
/// took while that traffic lasts, so that a warm connection allocates nothing per message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, at most; one more is answered an `Error` frame
    /// `TOO_MANY_CONNECTIONS` (fatal) and closed, before its `Hello`: it may connect again
    /// once another has closed. Default 256.
    pub max_connections: usize,
    /// Payload slots in the server's [`PayloadStore`](crate::PayloadStore): messages held
    /// at once, all connections together, shared out in equal parts to the broker's queues
    /// (at least one slot each): a queue whose part is full has its publishes confirmed
    /// `RejectedStoreFull`, and no queue can take another's. Default 16,384.
    pub store_slots: usize,
    /// The size of each slot: the largest payload the server takes (told in `Welcome` as
    /// `max_payload`; a message with a larger one is confirmed `TooLarge`). 1 to
    /// `MAX_PAYLOAD_LEN`; default 4,096.
    pub slot_size: usize,
    /// The heartbeat interval the server asks of its clients, announced in `Welcome`: a
    /// client sends a frame (a heartbeat when it has nothing else to send) whenever it has
    /// sent nothing for this long, and is then never closed as idle. At most a third of
    /// [`idle_timeout`](Self::idle_timeout); zero asks for none (the idle limit still
    /// applies). Default 5 s.
    ///
    /// The heartbeat rule (`docs/protocol.md`): the interval a side announces is how long
    /// its peer may stay silent. The server follows the client's side of it: it sends a
    /// heartbeat whenever it has sent nothing for the interval the client announced in
    /// `Hello` (none to a client that announced zero; every 10 ms to one that announced
    /// less).
    pub heartbeat: Duration,
    /// The idle limit: a connection from which the server has received nothing (not a
    /// byte) for this long is closed, `HEARTBEAT_TIMEOUT`, whatever the client announced;
    /// a connection that has not said `Hello` is closed after this long or 10 s, whichever
    /// is shorter (`HANDSHAKE_REQUIRED`). At least 3 x [`heartbeat`](Self::heartbeat), so
    /// that a client following the heartbeat rule is never closed; at least 1 ms. Default
    /// 15 s.
    pub idle_timeout: Duration,
    /// How long a frame may take to arrive once its first byte has, however its bytes are
    /// paced: past it the connection is closed, `FRAME_TIMEOUT`. The idle limit alone
    /// cannot close a client that sends a byte a little more often than it; this does.
    /// Told in `Welcome` (`frame_timeout_ms`). At least 1 ms; default 10 s (a whole
    /// 1 MiB frame at 100 KiB/s).
    pub frame_timeout: Duration,
    /// How long a connection may take to send a whole `Hello`, from its accept, however
    /// its bytes are paced (or the idle limit, if shorter): past it the connection is
    /// closed, `HANDSHAKE_REQUIRED`. Told in `Welcome` (`handshake_timeout_ms`, the
    /// shorter of the two). At least 1 ms; default 10 s.
    pub handshake_timeout: Duration,
    /// New producer names one connection may create (names the broker has never been
    /// given), at most: an `OpenProducer` of one more is refused `LIMIT_OUT_OF_RANGE`, so
    /// that one connection cannot hold the broker's table of names (a new name past the
    /// table's size takes the place of the name closed least recently). Names the broker
    /// knows may still be opened. Told in `Welcome`
    /// (`max_new_names`). Default 64.
    pub max_new_names: u32,
    /// Producers open at once on a connection, at most. Default 16.
    pub max_producers: u16,
    /// Consumers open at once on a connection, at most. Default 16.
    pub max_consumers: u16,
    /// The sum of the `max_unconfirmed` of a connection's open producers, at most: an
    /// `OpenProducer` past it is refused, `LIMIT_OUT_OF_RANGE`. Default 16,384.
    pub max_unconfirmed_per_connection: u32,
    /// Messages a consumer holds delivered and unconfirmed, at most, whatever credit it
    /// gave: the server hands the broker a consumer's credit only as far as this leaves
    /// room. Default 1,024.
    pub consumer_window: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 256,
            store_slots: 1 << 14,
            slot_size: 4096,
            heartbeat: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(15),
            frame_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            max_new_names: 64,
            max_producers: 16,
            max_consumers: 16,
            max_unconfirmed_per_connection: 1 << 14,
            consumer_window: 1 << 10,
        }
    }
}

/// A [`Limits`] the server cannot keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitsError {
    /// The field.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl fmt::Display for LimitsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server limit `{}`: {}", self.field, self.problem)
    }
}

impl std::error::Error for LimitsError {}

impl Limits {
    /// Checks every field.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zerodispatch_server::Limits;
    /// assert!(Limits::default().check().is_ok());
    /// assert!(Limits { slot_size: 0, ..Limits::default() }.check().is_err());
    /// assert!(Limits { consumer_window: u32::MAX, ..Limits::default() }.check().is_err());
    /// let huge = Limits { max_consumers: u16::MAX, consumer_window: 1 << 20, ..Limits::default() };
    /// assert_eq!(huge.check().unwrap_err().field, "max_consumers");
    /// let impatient = Limits { idle_timeout: Duration::from_secs(10), ..Limits::default() };
    /// assert_eq!(impatient.check().unwrap_err().field, "idle_timeout");
    /// ```
    ///
    /// # Errors
    ///
    /// The first field out of range.
    pub fn check(&self) -> Result<(), LimitsError> {
        let bad = |field, problem| Err(LimitsError { field, problem });
        if self.max_connections == 0 {
            return bad("max_connections", "must be at least 1");
        }
        if self.store_slots == 0 || self.store_slots > u32::MAX as usize {
            return bad("store_slots", "must be 1 to u32::MAX");
        }
        if self.slot_size == 0 || self.slot_size > MAX_PAYLOAD_LEN as usize {
            return bad("slot_size", "must be 1 to the protocol's MAX_PAYLOAD_LEN");
        }
        if self.max_producers == 0 && self.max_consumers == 0 {
            return bad(
                "max_producers",
                "a connection must be allowed a producer or a consumer",
            );
        }
        if self.consumer_window == 0 {
            return bad("consumer_window", "must be at least 1");
        }
        if self.max_unconfirmed_per_connection as usize > MAX_UNCONFIRMED {
            return bad(
                "max_unconfirmed_per_connection",
                "must be at most the broker's MAX_UNCONFIRMED (2^24)",
            );
        }
        if self.consumer_window > MAX_CONSUMER_WINDOW {
            return bad("consumer_window", "must be at most 2^20");
        }
        if self.outbound_capacity() > MAX_OUTBOUND {
            return bad(
                "max_consumers",
                "max_unconfirmed_per_connection + max_consumers x consumer_window must be at most 2^26 (what a connection preallocates for)",
            );
        }
        if self.heartbeat.as_millis() > u128::from(u32::MAX) {
            return bad("heartbeat", "must fit the protocol's u32 milliseconds");
        }
        if self.idle_timeout < Duration::from_millis(1) {
            return bad("idle_timeout", "must be at least 1 ms");
        }
        for (field, limit) in [
            ("frame_timeout", self.frame_timeout),
            ("handshake_timeout", self.handshake_timeout),
        ] {
            if limit < Duration::from_millis(1) {
                return bad(field, "must be at least 1 ms");
            }
            if limit.as_millis() > u128::from(u32::MAX) {
                return bad(field, "must fit the protocol's u32 milliseconds");
            }
        }
        if self.heartbeat.saturating_mul(3) > self.idle_timeout {
            return bad(
                "idle_timeout",
                "must be at least 3 x heartbeat, so that a client sending at the announced interval is never closed as idle",
            );
        }
        Ok(())
    }

    /// Places in a connection's outbound queue, at most: everything that can be in flight to it
    /// (outcomes, deliveries, one word per session that it is gone), and one frame's worth
    /// of outcomes the connection gives itself (messages refused before the broker).
    pub(crate) fn outbound_capacity(&self) -> usize {
        (self.max_unconfirmed_per_connection as usize)
            .saturating_add(
                usize::from(self.max_consumers).saturating_mul(self.consumer_window as usize),
            )
            .saturating_add(usize::from(self.max_producers) + usize::from(self.max_consumers))
            .saturating_add(MAX_MESSAGES_PER_FRAME as usize)
    }

    /// Items a connection moves from its outbound queue to its socket in one round.
    pub(crate) fn staging_capacity(&self) -> usize {
        (MAX_MESSAGES_PER_FRAME as usize).min(self.outbound_capacity())
    }
}
