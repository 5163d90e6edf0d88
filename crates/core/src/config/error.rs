//! An invalid configuration ([`ConfigError`]) and what is wrong with it ([`Problem`]),
//! each with a message that says what to change.

use std::fmt;

use super::{MAX_CAPACITY, MAX_CORE_ID, MAX_PROCESSORS};
use crate::ids::ClientType;

/// An invalid configuration, with what to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The pool the problem is in, if it is in one.
    pub client_type: Option<ClientType>,
    /// What is wrong.
    pub problem: Problem,
}

/// What is wrong with a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// No pool has any processor.
    NoPools,
    /// A pool was given 0 processors.
    NoProcessors,
    /// A pool was given more than [`MAX_PROCESSORS`] processors.
    TooManyProcessors(usize),
    /// A queue or outbox capacity of 0.
    ZeroCapacity,
    /// A queue, outbox or timer capacity above [`MAX_CAPACITY`].
    CapacityTooLarge(usize),
    /// `low >= high`.
    Watermarks {
        /// The low watermark given.
        low: usize,
        /// The high watermark given.
        high: usize,
    },
    /// The high watermark exceeds the capacity, so the alarm could never be raised.
    HighAboveCapacity {
        /// The high watermark given.
        high: usize,
        /// The capacity given.
        capacity: usize,
    },
    /// A `max_batch` of 0.
    ZeroMaxBatch,
    /// A core id of [`MAX_CORE_ID`] or more.
    CoreIdOutOfRange(usize),
    /// A core id that this process may not run on (not in its affinity mask).
    CoreNotUsable {
        /// The core id given.
        core: usize,
        /// The core ids this process may use.
        usable: Vec<usize>,
    },
    /// A duration that must be positive was zero.
    ZeroDuration(&'static str),
    /// The shutdown order does not name each client type once.
    ShutdownOrder([ClientType; 3]),
    /// The system refused to start one of the dispatcher's threads (out of memory or of
    /// threads, or a stack size it cannot provide). Not a mistake in the settings as such,
    /// but reported like one: `build` stopped and joined the threads it had started, and
    /// nothing runs.
    CannotSpawn {
        /// The thread's name (`zd-queue-0`, `zd-monitor`).
        thread: String,
        /// The kind of the system's error.
        kind: std::io::ErrorKind,
        /// The system's error, as text.
        error: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(t) = self.client_type {
            write!(f, "{t} pool: ")?;
        }
        match &self.problem {
            Problem::NoPools => write!(
                f,
                "no pool has a processor; configure at least one client type"
            ),
            Problem::NoProcessors => write!(
                f,
                "0 processors; a pool needs at least 1 (omit the pool to have none)"
            ),
            Problem::TooManyProcessors(n) => write!(f, "{n} processors; at most {MAX_PROCESSORS}"),
            Problem::ZeroCapacity => write!(
                f,
                "queue or outbox capacity 0; each must hold at least 1 event"
            ),
            Problem::CapacityTooLarge(n) => write!(
                f,
                "capacity {n} is above the limit of {MAX_CAPACITY} events (every slot is allocated when the dispatcher is built)"
            ),
            Problem::Watermarks { low, high } => {
                write!(
                    f,
                    "low watermark {low} must be below the high watermark {high}"
                )
            }
            Problem::HighAboveCapacity { high, capacity } => write!(
                f,
                "high watermark {high} is above the queue capacity {capacity}: the alarm could never be raised"
            ),
            Problem::ZeroMaxBatch => write!(
                f,
                "max_batch 0; clients must be flushed at least every 1 event"
            ),
            Problem::CoreIdOutOfRange(id) => {
                write!(
                    f,
                    "core id {id} is out of range (ids must be below {MAX_CORE_ID})"
                )
            }
            Problem::CoreNotUsable { core, usable } => {
                write!(
                    f,
                    "core id {core} is not one this process may run on; usable: {usable:?}"
                )
            }
            Problem::ZeroDuration(what) => write!(f, "{what} must be greater than zero"),
            Problem::CannotSpawn { thread, error, .. } => write!(
                f,
                "cannot start thread {thread}: {error}; the threads already started were stopped"
            ),
            Problem::ShutdownOrder(order) => {
                write!(
                    f,
                    "shutdown order {order:?} must name session, queue and cluster once each"
                )
            }
        }
    }
}

impl std::error::Error for ConfigError {}
