//! The send path every dispatch takes: on a processor thread its outbox (never waiting),
//! elsewhere the queue, waiting for room as the call says; and the check of blocking calls.

use crate::error::{BatchError, DispatchError};
use crate::event::{Event, Item};
use crate::ids::ClientHandle;
use crate::processor::ProcessorShared;
use crate::room::Wait;

use super::DispatcherHandle;

/// A blocking call's name and its async form (empty if it has none), for the refusal of
/// `blocking.rs`.
pub(crate) type BlockingCall = (&'static str, &'static str);

/// The name of a call that never waits: never checked.
pub(crate) const NEVER_WAITS: BlockingCall = ("", "");

impl<M: Send + 'static> DispatcherHandle<M> {
    /// Sends `item` to `target` by the rules of the calling thread: on one of this
    /// dispatcher's processor threads by the outbox protocol (never waiting; see
    /// `outbox.rs`; any `wait` but `Wait::No` may use the outbox); elsewhere straight to
    /// the queue, waiting for room as `wait` says, once the call (`call`, for the message
    /// of `blocking.rs`) is checked. The check is made here, on application threads only,
    /// so that a processor's dispatches (the hot path) pay no thread-local read for it.
    #[inline]
    #[track_caller]
    pub(super) fn send(
        &self,
        target: &ProcessorShared<M>,
        item: Item<M>,
        wait: Wait,
        call: BlockingCall,
    ) -> Result<(), DispatchError<Item<M>>> {
        match self.current() {
            Some(own) => own.send_from(target, item, wait != Wait::No),
            None => {
                if wait != Wait::No {
                    self.refuse_blocking(call.0, call.1);
                }
                target.push(item, self.no_wait_if_stepped(wait))
            }
        }
    }

    /// The check of `blocking.rs` for a call that may park this thread, made on every
    /// dispatcher but a stepped one (whose calls never wait).
    #[inline]
    #[track_caller]
    pub(crate) fn refuse_blocking(&self, call: &'static str, instead: &'static str) {
        if !self.shared.stepped {
            crate::blocking::refuse_on_runtime(call, instead);
            // The thread's first call that may wait makes the waker it would wait with: a
            // warm-up of the path sees that allocation, not the first full queue.
            crate::room::prepare_thread();
        }
    }

    /// `Wait::No` on a stepped dispatcher ([`testing`](crate::testing)), whose processors
    /// run only when its test steps them: a wait for room there would never end.
    #[inline]
    pub(super) fn no_wait_if_stepped(&self, wait: Wait) -> Wait {
        if self.shared.stepped { Wait::No } else { wait }
    }

    /// Enqueues the events of `events` for the client `to`, in order, through one pass of
    /// the processor's gate per run that fits, waiting for room as `wait` says. The body of
    /// both batch calls.
    #[track_caller]
    pub(super) fn enqueue<C>(
        &self,
        to: ClientHandle<C>,
        events: &mut impl Iterator<Item = Event<M>>,
        wait: Wait,
        call: BlockingCall,
    ) -> Result<usize, BatchError<Event<M>>> {
        let Some(target) = self.target(to) else {
            return match events.next() {
                Some(event) => Err(BatchError {
                    enqueued: 0,
                    error: DispatchError::NoSuchProcessor(event),
                }),
                None => Ok(0),
            };
        };
        let mut pushed = 0;
        let key = to.key;
        let sent = match self.current() {
            Some(own) => {
                let mut items = events.map(|event| Item::new(key, event));
                own.send_batch_from(target, &mut items, &mut pushed, wait != Wait::No)
            }
            None => {
                if wait != Wait::No {
                    self.refuse_blocking(call.0, call.1);
                }
                match self.no_wait_if_stepped(wait) {
                    // Packed (`pack.rs`): one slot, one pop and one call per run of events.
                    Wait::Forever => target.push_packed(key, events, &mut pushed),
                    wait => {
                        let mut items = events.map(|event| Item::new(key, event));
                        target.push_batch(&mut items, &mut pushed, wait)
                    }
                }
            }
        };
        match sent {
            Ok(()) => Ok(pushed),
            Err(e) => Err(BatchError {
                enqueued: pushed,
                error: e.map(Item::into_event),
            }),
        }
    }
}
