//! The end of a processor's life (`docs/architecture.md`, "End of life"): once it may
//! exit, it drops its timers and clients on its thread, once; the turns that follow hand
//! on what those drops dispatched; then it exits.

use super::contain::contain;
use super::runner::Runner;
use crate::sync::Ordering;

impl<M: Send + 'static> Runner<M> {
    /// The end of the processor's life, checked after each turn: once it may exit
    /// (stopped, settled, nothing kept or to flush again), it drops its timers and its
    /// clients, on this thread, once; those drops may dispatch, and what they keep in the
    /// outbox is handed on by the turns that follow, as any kept event is (its target, in a
    /// pool that shuts down later, is still draining). Returns `true` once it has dropped
    /// everything and may exit again: the loop ends.
    pub(crate) fn end_of_life(&mut self) -> bool {
        if !self.may_exit() {
            return false;
        }
        if self.released {
            return true;
        }
        self.release();
        self.may_exit()
    }

    /// Drops the timers not yet due, the clients, and the clients handed in that never got
    /// an event: each drop is user code, contained.
    fn release(&mut self) {
        let id = self.shared.id;
        self.released = true;
        // Timers not yet due are dropped unrun, on this thread, their slots freed; so are
        // any still among the arrivals (none once the gate is settled and a turn took them).
        let mut dropped = 0_u64;
        while let Some((slot, callback)) = self.shared.timers.arrivals.pop() {
            dropped += 1;
            contain(&self.shared.stats, id, "drop of a timer", || drop(callback));
            self.shared.timers.release(slot);
        }
        for (slot, callback) in self.timers.take_all() {
            dropped += 1;
            contain(&self.shared.stats, id, "drop of a timer", || drop(callback));
            self.shared.timers.release(slot);
        }
        if dropped > 0 {
            tracing::debug!(processor = %id, timers = dropped, "timers not due at shutdown dropped");
        }
        let mut clients = 0;
        for entry in self.clients.drain(..).flatten() {
            clients += 1;
            // The client's own drop runs here, on its thread, contained like every call
            // into user code.
            contain(&self.shared.stats, id, "drop of a client", || drop(entry));
        }
        self.flush_list.clear();
        // Clients handed in that never got an event: the gate is settled, so no
        // registration is between its hand-in and its exit from the gate (`slots.rs`).
        // Taken out under the lock, dropped outside it.
        let arrivals: Vec<_> = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_arrivals()
            .collect();
        for client in arrivals {
            clients += 1;
            contain(&self.shared.stats, id, "drop of a client", || drop(client));
        }
        tracing::debug!(processor = %id, clients, "processor's clients dropped");
    }

    /// Its last act, once the loop has ended: publishes its histograms and marks itself
    /// exited.
    pub(crate) fn exit(mut self) {
        self.publish_histograms(true);
        tracing::debug!(processor = %self.shared.id, "processor stopped");
        // Release: whoever sees the flag sees the clients dropped.
        self.shared.exited.store(true, Ordering::Release);
    }
}
