//! The broker's limits: the largest (and smallest) values its configuration may take, each
//! with what it bounds and how to retune it. A leaf: the errors that name a limit, the
//! checks that apply it and the tables sized by it all take it from here.

/// Messages a queue may be configured to hold, at most: 2^24 (16,777,216).
///
/// A queue allocates its tables for its whole capacity when the broker starts, about 130
/// bytes per message plus 4 per fanout app beyond the first (the message table's 80-byte
/// slots, the consumer of each app's share, and the free, push and ACK lists), so about
/// 2 GiB at this limit for a priority queue. With replication, the index of the messages
/// awaiting their quorum (by GUID, at twice the capacity) adds about 85 bytes per message,
/// about 3.5 GiB in all; without, confirms find their message by its delivery token and
/// there is no GUID index. Past it a
/// capacity is refused by [`Broker::start`](crate::Broker::start); below it, an allocation
/// the machine cannot provide is an error too, not an abort. Retune by measuring a queue's
/// footprint (`Broker::start` with one queue, resident memory before and after) against
/// the memory a deployment gives the broker; slot indexes are `u32`, so it can go no
/// higher than `u32::MAX`.
pub const MAX_QUEUE_CAPACITY: usize = 1 << 24;

/// Fanout apps per queue, at most: a message's pending shares are a bit mask
/// (a `u64`, the queue's `AppMask`). 64 covers BlazingMQ's 30-app fanout with room to spare.
pub const MAX_APPS: u16 = u64::BITS as u16;

/// Replicas a broker may be configured with, at most: a message's receipts are a bit
/// mask kept in the padding of its slot in the queue's table (a `u32`).
pub const MAX_REPLICAS: u8 = 32;

/// A producer's `max_unconfirmed`, at most: 2^24 (16,777,216).
///
/// A producer's session allocates its tables for the whole cap when it opens, about 180
/// bytes per message (the table of messages without an outcome, the batch, and the
/// outcome lists), so about 3 GiB at this limit; a producer that numbers its messages
/// (`publish_with_id`) adds, at its first such publish, a map of the ids in flight at
/// twice the cap. Past it the cap is refused by `open_producer`; below
/// it, an allocation the machine cannot provide is an error too, not an abort. Retune by
/// measuring a session's footprint against the memory a deployment gives its producers.
pub const MAX_UNCONFIRMED: usize = 1 << 24;

/// Bytes a message adds to a frame besides its payload: its GUID, queue and length
/// fields, as a wire protocol would carry them.
pub const FRAME_OVERHEAD: usize = 32;

/// Producer names a broker may be configured to remember, at most: 2^20.
///
/// Each queue keeps `8 + dedup_window / 8` bytes per name (the highest publish id it has
/// stored for it, and which of the window's ids below it are stored: `dedup.rs`), all
/// allocated when the broker starts: at this limit, 16 MiB per queue with the smallest
/// window ([`MIN_DEDUP_WINDOW`](crate::MIN_DEDUP_WINDOW)) and about 2 GiB with the default
/// (16,384 ids). Retune against the queues and the window a deployment has; ids of
/// anonymous producers start above the table, so the limit also bounds how many of the
/// `u32` producer ids names take.
pub const MAX_PRODUCER_NAMES: usize = 1 << 20;

/// The smallest deduplication window (`dedup.rs`): one word of bits.
pub const MIN_DEDUP_WINDOW: usize = 64;

/// The largest deduplication window, 2^20 ids (128 KiB per name and queue). A named producer's
/// `max_unconfirmed` is at most the window, and the answer to a re-open carries the
/// window in one frame.
pub const MAX_DEDUP_WINDOW: usize = 1 << 20;
