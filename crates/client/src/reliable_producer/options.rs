//! A reliable producer's options and counters.

use zerodispatch_wire::MAX_PAYLOAD_LEN;

use crate::backoff::Backoff;
use crate::error::ClientError;
use crate::options::{ClientOptions, ProducerOptions};

/// How a reliable producer behaves.
#[derive(Clone, Debug, PartialEq)]
pub struct ReliableProducerOptions {
    /// The producer's name, under which the broker deduplicates its messages by publish id
    /// across connections (UTF-8, at most 255 bytes; not empty).
    pub name: String,
    /// The session producer's options. `max_unconfirmed` bounds the messages kept for
    /// resending, from the oldest without an outcome to the newest; `confirm_timeout`
    /// counts from `send`, across reconnects.
    pub producer: ProducerOptions,
    /// The connection's options.
    pub client: ClientOptions,
    /// The delays between attempts to reconnect.
    pub backoff: Backoff,
    /// Bytes of payload kept for resending, at most (allocated when the producer opens):
    /// `send` waits while a payload does not fit. At least [`MAX_PAYLOAD_LEN`]. Default
    /// 16 MiB.
    pub buffer_bytes: usize,
}

impl ReliableProducerOptions {
    /// The default options, with `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            producer: ProducerOptions::default(),
            client: ClientOptions::default(),
            backoff: Backoff::default(),
            buffer_bytes: 16 << 20,
        }
    }

    pub(super) fn check(&self) -> Result<(), ClientError> {
        self.producer.check()?;
        self.backoff.check()?;
        if self.name.is_empty() || self.name.len() > 255 {
            return Err(ClientError::InvalidOption {
                option: "name",
                expected: "1 to 255 bytes of UTF-8",
            });
        }
        if self.buffer_bytes < MAX_PAYLOAD_LEN as usize {
            return Err(ClientError::InvalidOption {
                option: "buffer_bytes",
                expected: "at least MAX_PAYLOAD_LEN (256 KiB)",
            });
        }
        Ok(())
    }
}

/// A reliable producer's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReliableProducerStats {
    /// Connections lost and opened again.
    pub reconnects: u64,
    /// Messages handed to a new session again (written before on a lost one).
    pub resent: u64,
    /// Messages settled `Stored` at a re-open, without resending, because the broker's
    /// answer to the open proved them stored (its window of stored ids).
    pub stored_before: u64,
}
