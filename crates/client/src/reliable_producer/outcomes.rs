//! Each message's one outcome: the broker's confirm from any session, the confirm timeout
//! (counted from `send`, across reconnects), or the close; and handing the outcomes to the
//! application.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use zerodispatch_wire::{ConfirmStatus, PublishId};

use super::shared::{Reporter, Shared, State};
use crate::error::ClientError;
use crate::lock::lock;
use crate::producer::Outcome;

impl Shared {
    /// Settles message `id` with `status` into `outcomes`, if it has no outcome yet; says
    /// whether it did.
    pub(super) fn settle(
        state: &mut State,
        id: u64,
        status: ConfirmStatus,
        now: Instant,
        outcomes: &mut Vec<Outcome>,
    ) -> bool {
        let Some(slot) = state.ring.get_mut(id).filter(|slot| !slot.settled) else {
            return false;
        };
        slot.settled = true;
        outcomes.push(Outcome {
            publish_id: PublishId(id),
            status,
            taken_at: slot.taken_at,
            settled_at: now,
        });
        true
    }

    /// Hands the reporter's outcomes to the application, frees their room, and wakes the
    /// waiting senders.
    pub(super) fn report(&self, reporter: &mut Reporter) {
        if let (Some(recovery), Some(on_recovery)) =
            (reporter.recovered.take(), &mut reporter.on_recovery)
        {
            // A panic in the handler is the application's, as the confirm handler's is.
            let _ = catch_unwind(AssertUnwindSafe(|| on_recovery(&recovery)));
        }
        if reporter.outcomes.is_empty() {
            return;
        }
        let Reporter {
            handler, outcomes, ..
        } = reporter;
        let batch = &*outcomes;
        // A panic in the handler is the application's; the outcomes were reported.
        let _ = catch_unwind(AssertUnwindSafe(|| handler(batch)));
        outcomes.clear();
        self.wake_senders();
    }

    /// Session `generation`'s outcomes: the broker's are the messages' own; a session's
    /// `Closed` and `NotSent` are outcomes only while closing, and of the current session
    /// (otherwise the messages go again).
    pub(super) fn on_session_outcomes(&self, generation: u64, batch: &[Outcome]) {
        let mut reporter = lock(&self.reporter);
        let mut state = self.state();
        let outcomes = &mut reporter.outcomes;
        let current = state.generation == generation;
        let final_loss = state.closing && current;
        let mut answered = None;
        for outcome in batch {
            let lost = matches!(
                outcome.status,
                ConfirmStatus::Closed | ConfirmStatus::NotSent
            );
            if !lost || final_loss {
                let id = outcome.publish_id.0;
                Self::settle(&mut state, id, outcome.status, outcome.settled_at, outcomes);
            }
            // The session's own timeouts are no answer of the broker's.
            if !lost && outcome.status != ConfirmStatus::TimedOut && answered.is_none() {
                answered = Some(outcome.settled_at);
            }
        }
        if let (Some(at), true, None) = (answered, current, reporter.recovered) {
            reporter.recovered = state.broker_answered(at);
        }
        state.ring.pop_settled();
        // Room freed in the session too: what it refused at its cap goes now.
        Self::pump(&mut state);
        drop(state);
        self.report(&mut reporter);
    }

    /// Settles `TimedOut` the messages taken `confirm_timeout` or more before `now`;
    /// returns when the next one times out.
    pub(super) fn expire(&self, now: Instant) -> Option<Instant> {
        let timeout = self.options.producer.confirm_timeout?;
        let mut reporter = lock(&self.reporter);
        let mut state = self.state();
        let mut next = None;
        for id in state.ring.ids() {
            let Some((slot, _)) = state.ring.get(id) else {
                break;
            };
            if slot.settled {
                continue;
            }
            if now.duration_since(slot.taken_at) < timeout {
                next = Some(slot.taken_at + timeout);
                break;
            }
            Self::settle(
                &mut state,
                id,
                ConfirmStatus::TimedOut,
                now,
                &mut reporter.outcomes,
            );
        }
        state.ring.pop_settled();
        drop(state);
        self.report(&mut reporter);
        next
    }

    /// Settles every message without an outcome (`Closed` if a session had it, `NotSent`
    /// otherwise) and closes the producer with `error`.
    pub(super) fn settle_all(&self, error: ClientError) {
        let mut reporter = lock(&self.reporter);
        let mut state = self.state();
        if state.closed.is_none() {
            state.closed = Some(error);
        }
        state.closing = true;
        let now = Instant::now();
        for id in state.ring.ids() {
            let status = match state.ring.get(id) {
                Some((slot, _)) if slot.written => ConfirmStatus::Closed,
                _ => ConfirmStatus::NotSent,
            };
            Self::settle(&mut state, id, status, now, &mut reporter.outcomes);
        }
        state.ring.pop_settled();
        drop(state);
        self.report(&mut reporter);
        self.wake_senders();
    }
}
