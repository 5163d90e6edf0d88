//! The release hook: when an application may free a message's payload.
//!
//! The broker carries a payload by reference ([`Payload`]: a handle and a length) and never
//! touches its bytes; the application keeps them, and must keep them readable for as long
//! as the broker may hand the payload to a consumer. With the ACK meaning "stored", that is
//! past the ACK: a message lives in its queue until every share has been confirmed (or
//! dropped with a closing fanout consumer) and its ACK has gone. The queue then
//! **releases** it, and from then on the broker never reads or hands out that payload
//! again. [`OnRelease`] is how the application hears of it.
//!
//! Each queue collects the payloads it releases in a table preallocated at its capacity
//! and calls the hook with them at its flush point (and, if the table fills within one
//! drain, at once): one call per batch, on the queue's processor thread, allocating
//! nothing. A message that was never stored (rejected, not sent) is never released: its
//! payload came back to the producer with its outcome. At shutdown, what the queues still
//! hold is dropped with them unreported; the application may free everything then.

use std::collections::TryReserveError;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::ids::{Payload, QueueId};
use crate::stats::QueueCounters;
use crate::tables;

/// The application's hook for released payloads ([`BrokerConfig::on_release`]): called
/// on a queue's processor thread with a batch of payloads its queue has released for good.
/// It must not block (it holds up the queue). A panic in it is caught and counted
/// ([`QueueStats::release_panics`](crate::QueueStats::release_panics)); the batch is not
/// reported again.
///
/// [`BrokerConfig::on_release`]: crate::BrokerConfig::on_release
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use zerodispatch_broker::{OnRelease, Payload};
///
/// let freed = Arc::new(AtomicU64::new(0));
/// let count = freed.clone();
/// let hook = OnRelease::new(move |released: &[Payload]| {
///     count.fetch_add(released.len() as u64, Ordering::Relaxed);
/// });
/// hook.call(&[Payload { handle: 1, len: 8 }]);
/// assert_eq!(freed.load(Ordering::Relaxed), 1);
/// ```
#[derive(Clone)]
pub struct OnRelease(Arc<ReleaseFn>);

/// What an [`OnRelease`] calls.
type ReleaseFn = dyn Fn(&[Payload]) + Send + Sync;

impl OnRelease {
    /// A hook that calls `f` with each batch of released payloads.
    pub fn new(f: impl Fn(&[Payload]) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Calls the hook with `released`.
    pub fn call(&self, released: &[Payload]) {
        (self.0)(released);
    }
}

impl fmt::Debug for OnRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRelease")
    }
}

/// A queue's released payloads not yet reported, and its hook.
pub(crate) struct Released {
    hook: OnRelease,
    queue: QueueId,
    /// Preallocated at the queue's capacity: reported when full, so never grown.
    payloads: Vec<Payload>,
    /// The queue's counters, for the hook's panics.
    counters: Arc<CachePadded<QueueCounters>>,
}

impl Released {
    /// A table for `capacity` payloads.
    ///
    /// # Errors
    ///
    /// The allocation failed.
    pub(crate) fn new(
        hook: OnRelease,
        queue: QueueId,
        capacity: usize,
        counters: Arc<CachePadded<QueueCounters>>,
    ) -> Result<Self, TryReserveError> {
        Ok(Self {
            hook,
            queue,
            payloads: tables::vec(capacity)?,
            counters,
        })
    }

    /// Keeps `payload` for the next report (reporting first if the table is full).
    pub(crate) fn push(&mut self, payload: Payload) {
        if self.payloads.len() == self.payloads.capacity() {
            self.report();
        }
        self.payloads.push(payload);
    }

    /// Calls the hook with what was kept, if anything, and empties the table.
    pub(crate) fn report(&mut self) {
        if self.payloads.is_empty() {
            return;
        }
        let (hook, payloads) = (&self.hook, &self.payloads);
        if catch_unwind(AssertUnwindSafe(|| hook.call(payloads))).is_err() {
            self.counters.release_panics.add(1);
            tracing::warn!(
                queue = self.queue.0,
                payloads = payloads.len(),
                "the release hook panicked; these payloads are not reported again"
            );
        }
        self.payloads.clear();
    }
}

impl Drop for Released {
    /// Reports what was released and not reported yet: the queue is going (shutdown).
    fn drop(&mut self) {
        self.report();
    }
}
