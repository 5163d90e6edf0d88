//! What the allocation proofs (`zero_alloc.rs`, `zero_alloc_explicit.rs`) share. Each is
//! its own binary (`harness = false`): libtest's main thread allocates its "running for
//! over 60 seconds" warning, which under load fell inside a measured window.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use zerodispatch_broker::*;

/// A producer's outcomes of one status and the others, counted without allocating.
pub struct AckCounts {
    status: AckStatus,
    /// Outcomes of `status`, added after the others (so an acquire read sees them).
    matching: AtomicU64,
    others: AtomicU64,
}

impl AckCounts {
    /// Counts outcomes of `status` apart from the others.
    pub fn of(status: AckStatus) -> Arc<Self> {
        Arc::new(Self {
            status,
            matching: AtomicU64::new(0),
            others: AtomicU64::new(0),
        })
    }

    /// An `on_ack` that counts what it is handed here.
    pub fn on_ack(self: &Arc<Self>) -> impl FnMut(&[Ack]) + Send + 'static {
        let counts = self.clone();
        move |batch: &[Ack]| {
            let matching = batch.iter().filter(|a| a.status == counts.status).count() as u64;
            let others = batch.len() as u64 - matching;
            counts.others.fetch_add(others, Ordering::Relaxed);
            counts.matching.fetch_add(matching, Ordering::Release);
        }
    }

    /// Outcomes of the status counted.
    pub fn matching(&self) -> u64 {
        self.matching.load(Ordering::Acquire)
    }

    /// Outcomes of any other status.
    pub fn others(&self) -> u64 {
        self.others.load(Ordering::Relaxed)
    }

    /// Every outcome.
    pub fn all(&self) -> u64 {
        let matching = self.matching();
        matching + self.others()
    }
}

/// Yields the thread until `counter` reaches `n`.
pub fn wait_until(counter: &AtomicU64, n: u64) {
    while counter.load(Ordering::Acquire) < n {
        thread::yield_now();
    }
}

/// One queue of `mode` with a table of `capacity` messages, on two session processors.
pub fn one_queue_of(mode: QueueMode, capacity: usize) -> BrokerConfig {
    let mut queue = QueueConfig::new(mode);
    queue.capacity = capacity;
    let mut config = BrokerConfig::default();
    (config.queues, config.session_processors) = (vec![queue], 2);
    config
}
