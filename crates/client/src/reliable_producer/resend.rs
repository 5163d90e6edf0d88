//! Resending: a session is handed the ring from its front, every message without an
//! outcome in order before the ones taken since, after what the broker proved stored at
//! the open is settled `Stored`.

use std::time::Instant;

use zerodispatch_wire::ConfirmStatus;

use super::session::Session;
use super::shared::{Shared, State};
use crate::lock::lock;

impl Shared {
    /// Hands the session every message from `next_to_write` on, in order, until it takes
    /// no more.
    pub(super) fn pump(state: &mut State) {
        let Some(session) = &state.session else {
            return;
        };
        let shared = session.shared();
        while state.next_to_write < state.ring.next_id() {
            let id = state.next_to_write;
            let Some((slot, payload)) = state.ring.get(id) else {
                state.next_to_write = state.ring.first_id().max(id + 1);
                continue;
            };
            if !slot.settled {
                if shared.try_take_as(Some(id), payload).is_err() {
                    // At the session's cap (it still holds messages the ring timed out:
                    // their confirms or the session's own timeouts free it, and pump
                    // again), or the session is gone (the supervisor opens the next).
                    return;
                }
                if let Some(slot) = state.ring.get_mut(id) {
                    slot.written = true;
                }
            }
            state.next_to_write = id + 1;
        }
    }

    /// Starts a session on a fresh session producer: settles what the broker stored
    /// already, and hands it the ring from its front.
    /// `attempts` is how many connects the reconnect took (`None` for the first session).
    pub(super) fn begin_session(&self, session: Session, attempts: Option<u32>) {
        let Session {
            producer: session,
            generation,
        } = session;
        let last_stored = session.last_stored().map(|id| id.0);
        let mut reporter = lock(&self.reporter);
        let mut state = self.state();
        state.generation = generation;
        let now = Instant::now();
        let reconnect = attempts.is_some();
        if reconnect {
            state.stats.reconnects += 1;
        }
        if let (Some(attempts), Some(outage)) = (attempts, &mut state.outage) {
            outage.attempts = outage.attempts.saturating_add(attempts);
            outage.reconnected_at = Some(now);
        }
        if !reconnect {
            // The name's messages before this producer (an earlier run's): this one's ids
            // go on after them, or the broker would take them for duplicates. After
            // u64::MAX there is no id: the first send says so (`IdsExhausted`).
            if let Some(last) = last_stored {
                state.ring.start_at(last.saturating_add(1));
            }
        }
        let stored_before = state.stats.stored_before;
        if reconnect {
            // Settled `Stored` exactly the messages the broker proved stored, id by id
            // (its window: docs/protocol.md, "Named producers and deduplication"); every
            // other one goes again, and its confirm says what became of it (one older
            // than the window is answered `RejectedOutOfWindow`, never taken for stored).
            // Only what a session was handed: a claim that a message never sent is stored
            // proves nothing of it.
            let stored = session.stored_when_opened_all();
            for id in state.ring.ids() {
                let written = state.ring.get(id).is_some_and(|(slot, _)| slot.written);
                if !written || stored.stored(id) != Some(true) {
                    continue;
                }
                if Self::settle(
                    &mut state,
                    id,
                    ConfirmStatus::Stored,
                    now,
                    &mut reporter.outcomes,
                ) {
                    state.stats.stored_before += 1;
                }
            }
            if state.stats.stored_before > stored_before && reporter.recovered.is_none() {
                // The broker's answer at the open confirmed messages: its first answer.
                reporter.recovered = state.broker_answered(now);
            }
            state.ring.pop_settled();
        }
        let mut resent = 0;
        for id in state.ring.ids() {
            if state
                .ring
                .get(id)
                .is_some_and(|(s, _)| s.written && !s.settled)
            {
                resent += 1;
            }
        }
        state.stats.resent += resent;
        state.next_to_write = state.ring.first_id();
        state.session = Some(session);
        Self::pump(&mut state);
        drop(state);
        self.report(&mut reporter);
    }
}
