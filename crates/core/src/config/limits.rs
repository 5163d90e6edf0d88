//! The limits that `build` holds every pool's settings to, each with the reason for it.

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
