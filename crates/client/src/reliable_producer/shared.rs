//! A reliable producer's shared part ([`Shared`]): the resend ring and the current session
//! behind one lock, the application's handlers behind another, and the waiters for room.
//! Taking a message is here; its outcome is in `outcomes.rs`, its resending in
//! `resend.rs`.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;
use zerodispatch_wire::{PublishId, QueueId};

use super::options::{ReliableProducerOptions, ReliableProducerStats};
use super::recovery::{Outage, Recovery};
use crate::error::{ClientError, TrySendError};
use crate::lock::lock;
use crate::producer::{ConfirmHandler, Outcome, Producer};
use crate::resend_ring::ResendRing;

/// The state behind the lock.
pub(super) struct State {
    pub(super) ring: ResendRing,
    /// The next message to hand to the session (its publish id).
    pub(super) next_to_write: u64,
    /// The current session's producer.
    pub(super) session: Option<Producer>,
    /// The number of the current (or last) session, from 1.
    pub(super) generation: u64,
    /// Why the producer takes no more messages.
    pub(super) closed: Option<ClientError>,
    /// Closing: a session's `Closed` and `NotSent` are outcomes now.
    pub(super) closing: bool,
    /// Since a session was lost, until the broker's first answer on a later one.
    pub(super) outage: Option<Outage>,
    pub(super) stats: ReliableProducerStats,
}

impl State {
    /// The broker answered on the current session at `at`: the end of an outage, if one
    /// is on and a session has opened since.
    pub(super) fn broker_answered(&mut self, at: Instant) -> Option<Recovery> {
        let recovery = self.outage?.ended(at)?;
        self.outage = None;
        Some(recovery)
    }
}

/// The application's handler and the outcomes to hand it, behind their own lock (taken
/// before the state's).
pub(super) struct Reporter {
    pub(super) handler: ConfirmHandler,
    pub(super) outcomes: Vec<Outcome>,
    /// The recovery to report, and to whom.
    pub(super) recovered: Option<Recovery>,
    pub(super) on_recovery: Option<RecoveryHandler>,
}

/// The application's handler of recoveries.
pub(super) type RecoveryHandler = Box<dyn FnMut(&Recovery) + Send>;

pub(super) struct Shared {
    pub(super) options: ReliableProducerOptions,
    pub(super) queue: QueueId,
    pub(super) state: Mutex<State>,
    pub(super) reporter: Mutex<Reporter>,
    /// Wakes `send` waiters when room frees or the producer closes.
    pub(super) room: Notify,
    /// Wakes `send_blocking` waiters, with the state's lock; `blocked` counts them.
    pub(super) room_blocking: Condvar,
    pub(super) blocked: AtomicUsize,
    /// Wakes the supervisor: a close, or a first message to time.
    pub(super) wake: Notify,
    /// The longest payload the broker takes, from the last connection's `Welcome`: a
    /// longer one is refused by `send`, not kept for a refusal to come.
    pub(super) max_payload: AtomicU32,
}

impl Shared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Takes a message into the ring and hands it on to the session if it can.
    pub(super) fn try_take(&self, payload: &[u8]) -> Result<PublishId, TrySendError> {
        let mut state = self.state();
        self.take(&mut state, payload)
    }

    /// Takes a message under the lock (see `try_take`).
    pub(super) fn take(
        &self,
        state: &mut State,
        payload: &[u8],
    ) -> Result<PublishId, TrySendError> {
        if let Some(error) = &state.closed {
            return Err(TrySendError::Failed(error.clone()));
        }
        if state.ring.next_id() == u64::MAX {
            // The ring numbers ids up to u64::MAX - 1 (its end, `next_id`, is a u64 too).
            return Err(TrySendError::Failed(ClientError::IdsExhausted));
        }
        let was_empty = state.ring.is_empty();
        let Some(id) = state.ring.push(payload, Instant::now()) else {
            return Err(TrySendError::Full);
        };
        Self::pump(state);
        if was_empty && self.options.producer.confirm_timeout.is_some() {
            self.wake.notify_one();
        }
        Ok(PublishId(id))
    }

    /// Wakes the senders waiting for room: room freed, or the producer closed.
    pub(super) fn wake_senders(&self) {
        self.room.notify_waiters();
        if self.blocked.load(Ordering::SeqCst) > 0 {
            // Under the lock, so that a sender between its check and its wait is not missed.
            let _state = self.state();
            self.room_blocking.notify_all();
        }
    }
}
