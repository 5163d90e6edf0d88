//! A producer session's confirm timeout: when each message was sent (`sent_at`), and the
//! messages past the timeout reported `TimedOut`.

use std::time::Instant;

use crate::ids::Guid;
use crate::message::AckStatus;

use super::ProducerSession;

impl ProducerSession {
    /// Entries of `sent_at` at most, for a cap of `max_unconfirmed`: twice the cap, so that
    /// a sweep (which leaves at most the cap: only messages still without an outcome) frees
    /// at least the cap's worth of entries. Retune: a larger factor sweeps less often, for
    /// more memory; 2 makes a sweep cost at most two entry visits per message.
    pub(super) fn sent_at_limit(max_unconfirmed: usize) -> usize {
        max_unconfirmed.saturating_mul(2)
    }

    /// Records when `guid` (just added to `unacked` at `slot`) was sent. When `sent_at` is
    /// full, first sweeps it of messages that had their outcome (acknowledged, rejected):
    /// at most `max_unconfirmed` entries stay, so the sweep, O(limit), comes at most once
    /// per `max_unconfirmed` messages, and the queue never reallocates.
    pub(super) fn remember_sent(&mut self, guid: Guid, slot: u32) {
        if self.sent_at.len() >= Self::sent_at_limit(self.config.max_unconfirmed) {
            let unacked = &self.unacked;
            self.sent_at.retain(|&(g, s, _)| unacked.holds(s, g));
        }
        debug_assert!(
            self.sent_at.len() < Self::sent_at_limit(self.config.max_unconfirmed),
            "more messages without an outcome than the cap"
        );
        self.sent_at.push_back((guid, slot, Instant::now()));
    }

    /// Reports messages past the confirm timeout.
    pub(super) fn expire(&mut self) {
        let Some(timeout) = self.config.confirm_timeout else {
            return;
        };
        let now = Instant::now();
        while let Some(&(guid, slot, at)) = self.sent_at.front() {
            if now.duration_since(at) < timeout {
                break;
            }
            self.sent_at.pop_front();
            if let Some(u) = self.take(slot, guid) {
                self.counters.timed_out.add(1);
                self.report(guid, u, AckStatus::TimedOut);
            }
        }
    }
}
