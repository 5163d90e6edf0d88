//! The settings of one client type's pool of processors ([`PoolConfig`]) and their
//! validation against the limits of `limits.rs`.

use super::{ConfigError, MAX_CAPACITY, MAX_CORE_ID, MAX_PROCESSORS, Problem, WaitStrategy};
use crate::ids::ClientType;

/// The settings of one client type's pool of processors.
///
/// Set through the builder methods, each named for its setting; read back through the
/// `get_` methods (the convention of `std::process::Command`, whose setters hold the plain
/// names too). The fields are private, so that every setting goes through its setter and
/// the settings that follow others (the watermarks and the outbox follow the capacity
/// until set themselves) stay in step; [`build`](crate::DispatcherBuilder::build)
/// validates the whole.
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
/// assert_eq!(queues.get_processors(), 4);
/// assert_eq!(queues.get_outbox_capacity(), 1 << 16); // follows the capacity
///
/// // The watermarks follow the capacity until set: a quarter and three quarters.
/// let small = PoolConfig::new(1).capacity(10);
/// assert_eq!((small.get_low_watermark(), small.get_high_watermark()), (2, 8));
/// ```
///
/// No field can be set behind the setters' back:
///
/// ```compile_fail
/// let mut config = zerodispatch_core::PoolConfig::new(1);
/// config.capacity = 16; // private: use `.capacity(16)`
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Processor threads in the pool (at least 1).
    pub(crate) processors: usize,
    /// Events each processor's queue holds (1 to [`MAX_CAPACITY`]).
    pub(crate) capacity: usize,
    /// Events each processor's outbox holds (1 to [`MAX_CAPACITY`]). Equal to `capacity`
    /// unless `outbox_set`.
    pub(crate) outbox_capacity: usize,
    /// Queue depth at which a raised high-watermark alarm clears. With `high_watermark`,
    /// [`default_watermarks`] of `capacity` unless `watermarks_set`.
    pub(crate) low_watermark: usize,
    /// Queue depth at which the high-watermark alarm is raised (edge-triggered).
    pub(crate) high_watermark: usize,
    /// Flush the processor's clients at least every `max_batch` events. At least 1.
    pub(crate) max_batch: usize,
    /// How a processor waits for work.
    pub(crate) wait: WaitStrategy,
    /// Core ids to pin the processors to, round-robin; empty means no pinning.
    pub(crate) cores: Vec<usize>,
    /// Timers each processor holds at once (0 to [`MAX_CAPACITY`]), preallocated.
    pub(crate) timers: usize,
    /// An application thread whose event finds the processor parked runs its turn
    /// (`drive.rs`).
    pub(crate) driven: bool,
    /// The watermarks were set explicitly: they no longer follow the capacity.
    watermarks_set: bool,
    /// The outbox capacity was set explicitly: it no longer follows the capacity.
    outbox_set: bool,
}

/// The watermarks that follow a queue capacity until set explicitly: a quarter of it
/// (low) and three quarters (high, rounded up, so that it stays above the low one for
/// every capacity of at least 1). The one formula for them.
const fn default_watermarks(capacity: usize) -> (usize, usize) {
    (capacity / 4, capacity - capacity / 4)
}

impl PoolConfig {
    /// The default queue capacity.
    pub const DEFAULT_CAPACITY: usize = 4096;
    /// The default `max_batch`: large enough that a flush (typically a write to a socket)
    /// is amortised over many events, small enough that under sustained load a client is
    /// flushed every few tens of microseconds at a few million events a second.
    pub const DEFAULT_MAX_BATCH: usize = 256;
    /// The default number of timers a processor holds at once.
    pub const DEFAULT_TIMERS: usize = 1024;

    /// A pool of `processors` threads (at least 1, at most [`MAX_PROCESSORS`]; checked by
    /// `build`) with default settings.
    #[must_use]
    pub fn new(processors: usize) -> Self {
        let capacity = Self::DEFAULT_CAPACITY;
        let (low_watermark, high_watermark) = default_watermarks(capacity);
        Self {
            processors,
            capacity,
            outbox_capacity: capacity,
            low_watermark,
            high_watermark,
            max_batch: Self::DEFAULT_MAX_BATCH,
            wait: WaitStrategy::default(),
            cores: Vec::new(),
            timers: Self::DEFAULT_TIMERS,
            driven: false,
            watermarks_set: false,
            outbox_set: false,
        }
    }

    /// Sets the queue capacity: the items each processor's queue holds, 1 to
    /// [`MAX_CAPACITY`], allocated when the dispatcher is built. An item is one event, or
    /// a pack of up to 16 events of one blocking
    /// [`dispatch_batch`](crate::DispatcherHandle::dispatch_batch) from an application
    /// thread (a queue of `N` holds at most `N / 16` packs, so under `2N` events). Default
    /// [`DEFAULT_CAPACITY`](Self::DEFAULT_CAPACITY). Unless set explicitly, the watermarks
    /// follow it (a quarter and three quarters), and so does the outbox capacity.
    #[must_use]
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        if !self.outbox_set {
            self.outbox_capacity = capacity;
        }
        if !self.watermarks_set {
            (self.low_watermark, self.high_watermark) = default_watermarks(capacity);
        }
        self
    }

    /// Sets the outbox capacity: events each processor's outbox holds, 1 to
    /// [`MAX_CAPACITY`]: what the processor's clients dispatched to full queues, waiting to
    /// be handed on (see `outbox.rs`). A blocking dispatch on a processor thread returns
    /// `Full` only when its outbox is full. Default: the queue capacity. Preallocated,
    /// like the queue.
    #[must_use]
    pub fn outbox_capacity(mut self, outbox_capacity: usize) -> Self {
        self.outbox_capacity = outbox_capacity;
        self.outbox_set = true;
        self
    }

    /// Sets the low and high watermarks: the high-watermark alarm is raised
    /// (edge-triggered) when the queue depth reaches `high`, and clears when it is back at
    /// `low`. `low < high <= capacity`, checked by `build`. Default: a quarter and three
    /// quarters of the capacity.
    #[must_use]
    pub fn watermarks(mut self, low: usize, high: usize) -> Self {
        self.low_watermark = low;
        self.high_watermark = high;
        self.watermarks_set = true;
        self
    }

    /// Sets `max_batch`: the processor flushes its clients at least every `max_batch`
    /// events, even if its queue never drains. At least 1. Default
    /// [`DEFAULT_MAX_BATCH`](Self::DEFAULT_MAX_BATCH).
    #[must_use]
    pub fn max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }

    /// Sets how many timers ([`schedule`](crate::DispatcherHandle::schedule)) each processor
    /// holds at once, 0 to [`MAX_CAPACITY`]: preallocated when the dispatcher is built
    /// (about 90 bytes each), so that scheduling never allocates; a schedule beyond them
    /// is refused with its callback handed back (`TimersFull`). Default
    /// [`DEFAULT_TIMERS`](Self::DEFAULT_TIMERS).
    ///
    /// A cancelled timer's slot is free again at its processor's next turn, not at the
    /// `cancel`: a client that cancels and re-arms between two turns (a timeout reset on
    /// every event it handles) holds two slots for a moment. Size the set for one spare per
    /// timer that may be re-armed within one turn of its processor: for `n` such timers,
    /// `2 * n`.
    #[must_use]
    pub fn timers(mut self, timers: usize) -> Self {
        self.timers = timers;
        self
    }

    /// Sets how a processor waits for work. Default [`WaitStrategy::default`].
    #[must_use]
    pub fn wait(mut self, wait: WaitStrategy) -> Self {
        self.wait = wait;
        self
    }

    /// Sets whether the processors are driven by their producers: an application thread
    /// whose dispatch finds the processor parked runs the processor's turn itself (its
    /// events, timers due and flushes, at most `max_batch` events) before the dispatch
    /// returns, instead of waking the processor's thread. At low rates that saves the
    /// wake-up of a parked thread on every event's path (tens of microseconds on a VM); under
    /// load the processor never parks, and nothing changes. Default `false`.
    ///
    /// Precondition: the application threads that dispatch to this pool hold no lock its
    /// clients take, since their code may then run inside the dispatch; a client may run on
    /// a thread other than its processor's, one at a time, in the order of its events, as
    /// on the processor (see `docs/architecture.md`, "Driven processors").
    #[must_use]
    pub fn driven(mut self, driven: bool) -> Self {
        self.driven = driven;
        self
    }

    /// Pins the processors to these core ids, assigned in order and round-robin
    /// (processor `i` gets `cores[i % cores.len()]`); empty (the default) means no
    /// pinning. Each must be one this process may run on, checked by `build`.
    #[must_use]
    pub fn pin_to(mut self, cores: impl IntoIterator<Item = usize>) -> Self {
        self.cores = cores.into_iter().collect();
        self
    }

    /// Whether the processors are driven by their producers ([`driven`](Self::driven)).
    #[must_use]
    pub fn get_driven(&self) -> bool {
        self.driven
    }

    /// Processor threads in the pool.
    #[must_use]
    pub fn get_processors(&self) -> usize {
        self.processors
    }

    /// Events each processor's queue holds.
    #[must_use]
    pub fn get_capacity(&self) -> usize {
        self.capacity
    }

    /// Events each processor's outbox holds.
    #[must_use]
    pub fn get_outbox_capacity(&self) -> usize {
        self.outbox_capacity
    }

    /// The queue depth at which a raised high-watermark alarm clears.
    #[must_use]
    pub fn get_low_watermark(&self) -> usize {
        self.low_watermark
    }

    /// The queue depth at which the high-watermark alarm is raised.
    #[must_use]
    pub fn get_high_watermark(&self) -> usize {
        self.high_watermark
    }

    /// The most events between two flushes of the processor's clients.
    #[must_use]
    pub fn get_max_batch(&self) -> usize {
        self.max_batch
    }

    /// How a processor waits for work.
    #[must_use]
    pub fn get_wait(&self) -> WaitStrategy {
        self.wait
    }

    /// Timers each processor holds at once.
    #[must_use]
    pub fn get_timers(&self) -> usize {
        self.timers
    }

    /// The core ids the processors are pinned to (empty: not pinned).
    #[must_use]
    pub fn get_cores(&self) -> &[usize] {
        &self.cores
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
        for capacity in [self.capacity, self.outbox_capacity, self.timers] {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The watermarks and the outbox follow the capacity until set, by one formula, and
    /// stop following once set, in either order. On the code before, `new` and `capacity`
    /// had two formulas for the high watermark, and an outbox capacity set to the queue's
    /// went on following it.
    #[test]
    fn watermarks_and_outbox_follow_the_capacity_until_set() {
        for capacity in [1, 2, 3, 10, 4095, 4096, 4097] {
            let c = PoolConfig::new(1).capacity(capacity);
            let (low, high) = (c.get_low_watermark(), c.get_high_watermark());
            assert_eq!((low, high), default_watermarks(capacity));
            assert!(low < high && high <= capacity, "{capacity}: {low} {high}");
            assert_eq!(c.get_outbox_capacity(), capacity);
            assert!(c.validate(ClientType::Queue, &[]).is_ok(), "{capacity}");
        }
        let default = PoolConfig::new(1);
        assert_eq!(
            default,
            PoolConfig::new(1).capacity(PoolConfig::DEFAULT_CAPACITY)
        );

        let set = PoolConfig::new(1).watermarks(5, 50).capacity(100);
        assert_eq!((set.get_low_watermark(), set.get_high_watermark()), (5, 50));
        let outbox = PoolConfig::new(1)
            .capacity(64)
            .outbox_capacity(64)
            .capacity(128);
        assert_eq!(outbox.get_outbox_capacity(), 64, "set explicitly: stays");
        assert_eq!(outbox.get_capacity(), 128);
    }
}
