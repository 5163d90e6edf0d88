//! Configuration: a validated builder, one pool of processors per client type.
//!
//! Every invalid choice is a [`ConfigError`] with a message that says what to change,
//! returned by [`DispatcherBuilder::build`](crate::DispatcherBuilder::build); nothing here
//! panics or aborts. A thread the system refuses to start is reported the same way
//! ([`Problem::CannotSpawn`]).

use std::fmt;
use std::time::Duration;

use crate::client::ClientType;

/// How a processor waits when its queue is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStrategy {
    /// Never sleep: poll the queue in a loop. The lowest wake-up latency, at the price of
    /// one core per processor, busy even when idle. For latency runs on machines with cores
    /// to spare; on a machine with more busy threads than cores it collapses throughput.
    BusySpin,
    /// Poll `spins` times (with a CPU pause hint, then yields), then park the thread until a
    /// producer wakes it (see the wake protocol in `wake.rs`). The default.
    SpinThenPark {
        /// Empty polls before parking.
        spins: u32,
    },
    /// Park as soon as the queue is empty: no CPU when idle, a wake-up (a futex syscall on
    /// Linux) for the first event after idleness.
    Park,
}

impl WaitStrategy {
    /// The default spin before parking: 2^10 polls, on the order of 10-50 us. Long enough to
    /// catch the next event of a burst without a syscall, short enough that an idle
    /// processor stops burning its core quickly. Retune with `benches/dispatch.rs`
    /// (`wake_latency` against `dispatch_oversubscribed`).
    pub const DEFAULT_SPINS: u32 = 1 << 10;
}

impl Default for WaitStrategy {
    fn default() -> Self {
        WaitStrategy::SpinThenPark {
            spins: Self::DEFAULT_SPINS,
        }
    }
}

/// The settings of one client type's pool of processors.
///
/// ```
/// use zerodispatch_core::{PoolConfig, WaitStrategy};
///
/// let queues = PoolConfig::new(4)
///     .capacity(1 << 16)
///     .watermarks(1 << 12, 1 << 15)
///     .max_batch(512)
///     .wait(WaitStrategy::Park)
///     .pin_to([2, 3, 4, 5]);
/// assert_eq!(queues.processors, 4);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Processor threads in the pool (at least 1).
    pub processors: usize,
    /// Events each processor's queue holds (1 to [`MAX_CAPACITY`]). Default 4096.
    pub capacity: usize,
    /// Events each processor's outbox holds (1 to [`MAX_CAPACITY`]): what the processor's
    /// clients dispatched to full queues, waiting to be handed on (see `outbox.rs`). A
    /// blocking dispatch on a processor thread returns `Full` only when its outbox is
    /// full. Default: the capacity. Preallocated, like the queue.
    pub outbox_capacity: usize,
    /// Queue depth at which a raised high-watermark alarm clears. Default: a quarter of the
    /// capacity.
    pub low_watermark: usize,
    /// Queue depth at which the high-watermark alarm is raised (edge-triggered). Must be
    /// greater than `low_watermark` and at most `capacity`. Default: three quarters of the
    /// capacity.
    pub high_watermark: usize,
    /// Flush the processor's clients at least every `max_batch` events, even if the queue
    /// never drains. At least 1. Default 256.
    pub max_batch: usize,
    /// How a processor waits for work.
    pub wait: WaitStrategy,
    /// Core ids to pin the processors to, assigned in order and round-robin (processor `i`
    /// gets `cores[i % cores.len()]`); empty means no pinning.
    pub cores: Vec<usize>,
    watermarks_set: bool,
}

impl PoolConfig {
    /// The default queue capacity.
    pub const DEFAULT_CAPACITY: usize = 4096;
    /// The default `max_batch`: large enough that a flush (typically a write to a socket)
    /// is amortised over many events, small enough that under sustained load a client is
    /// flushed every few tens of microseconds at a few million events a second.
    pub const DEFAULT_MAX_BATCH: usize = 256;

    /// A pool of `processors` threads with default settings.
    #[must_use]
    pub fn new(processors: usize) -> Self {
        let capacity = Self::DEFAULT_CAPACITY;
        Self {
            processors,
            capacity,
            outbox_capacity: capacity,
            low_watermark: capacity / 4,
            high_watermark: capacity / 4 * 3,
            max_batch: Self::DEFAULT_MAX_BATCH,
            wait: WaitStrategy::default(),
            cores: Vec::new(),
            watermarks_set: false,
        }
    }

    /// Sets the queue capacity; unless set explicitly, the watermarks follow it (a quarter
    /// and three quarters), and so does the outbox capacity.
    #[must_use]
    pub fn capacity(mut self, capacity: usize) -> Self {
        if self.outbox_capacity == self.capacity {
            self.outbox_capacity = capacity;
        }
        self.capacity = capacity;
        if !self.watermarks_set {
            self.low_watermark = capacity / 4;
            self.high_watermark = capacity - capacity / 4;
        }
        self
    }

    /// Sets the outbox capacity (see [`PoolConfig::outbox_capacity`]).
    #[must_use]
    pub fn outbox_capacity(mut self, outbox_capacity: usize) -> Self {
        self.outbox_capacity = outbox_capacity;
        self
    }

    /// Sets the low and high watermarks.
    #[must_use]
    pub fn watermarks(mut self, low: usize, high: usize) -> Self {
        self.low_watermark = low;
        self.high_watermark = high;
        self.watermarks_set = true;
        self
    }

    /// Sets `max_batch`.
    #[must_use]
    pub fn max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }

    /// Sets the wait strategy.
    #[must_use]
    pub fn wait(mut self, wait: WaitStrategy) -> Self {
        self.wait = wait;
        self
    }

    /// Pins the processors to these core ids (see [`PoolConfig::cores`]).
    #[must_use]
    pub fn pin_to(mut self, cores: impl IntoIterator<Item = usize>) -> Self {
        self.cores = cores.into_iter().collect();
        self
    }

    pub(crate) fn validate(
        &self,
        client_type: ClientType,
        usable: &[usize],
    ) -> Result<(), ConfigError> {
        let err = |problem| {
            Err(ConfigError {
                client_type: Some(client_type),
                problem,
            })
        };
        if self.processors == 0 {
            return err(Problem::NoProcessors);
        }
        if self.processors > MAX_PROCESSORS {
            return err(Problem::TooManyProcessors(self.processors));
        }
        if self.capacity == 0 || self.outbox_capacity == 0 {
            return err(Problem::ZeroCapacity);
        }
        for capacity in [self.capacity, self.outbox_capacity] {
            if capacity > MAX_CAPACITY {
                return err(Problem::CapacityTooLarge(capacity));
            }
        }
        if self.low_watermark >= self.high_watermark {
            return err(Problem::Watermarks {
                low: self.low_watermark,
                high: self.high_watermark,
            });
        }
        if self.high_watermark > self.capacity {
            return err(Problem::HighAboveCapacity {
                high: self.high_watermark,
                capacity: self.capacity,
            });
        }
        if self.max_batch == 0 {
            return err(Problem::ZeroMaxBatch);
        }
        for &core in &self.cores {
            if core >= MAX_CORE_ID {
                return err(Problem::CoreIdOutOfRange(core));
            }
            if !usable.contains(&core) {
                return err(Problem::CoreNotUsable {
                    core,
                    usable: usable.to_vec(),
                });
            }
        }
        Ok(())
    }
}

/// Queue and outbox capacities, at most: 2^24 events, 1 GiB of 64-byte slots per
/// processor. Both are allocated when the dispatcher is built (an `ArrayQueue` cannot
/// report an allocation failure, so a larger request would abort the process); beyond this
/// a bounded queue stops being a latency bound anyway.
pub const MAX_CAPACITY: usize = 1 << 24;

/// Processors per client type, at most: a processor's index travels in a `u16`.
pub const MAX_PROCESSORS: usize = 1 << 12;

/// Core ids at or above this are refused: `core_affinity` builds a fixed-size `cpu_set_t`
/// (1024 bits) and glibc aborts the process on a larger id.
pub const MAX_CORE_ID: usize = 1024;

/// The settings of the dispatcher as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GlobalConfig {
    pub(crate) stuck_warning: Duration,
    pub(crate) monitor_interval: Duration,
    pub(crate) shutdown_order: [ClientType; 3],
    /// The stack size of every thread the dispatcher starts; `None`: the standard
    /// library's default.
    pub(crate) stack_size: Option<usize>,
}

impl Default for GlobalConfig {
    fn default() -> Self {
        Self {
            stuck_warning: Duration::from_secs(1),
            monitor_interval: Duration::from_millis(10),
            shutdown_order: [ClientType::Queue, ClientType::Session, ClientType::Cluster],
            stack_size: None,
        }
    }
}

impl GlobalConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let err = |problem| {
            Err(ConfigError {
                client_type: None,
                problem,
            })
        };
        if self.stuck_warning.is_zero() {
            return err(Problem::ZeroDuration("stuck_warning"));
        }
        if self.monitor_interval.is_zero() {
            return err(Problem::ZeroDuration("monitor_interval"));
        }
        let order = self.shutdown_order;
        if ClientType::ALL.iter().any(|t| !order.contains(t)) {
            return err(Problem::ShutdownOrder(order));
        }
        Ok(())
    }
}

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
    /// A queue or outbox capacity above [`MAX_CAPACITY`].
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
