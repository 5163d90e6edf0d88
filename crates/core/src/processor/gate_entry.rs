//! A producer's entry in a processor's gate (`gate.rs`): made before a push, settled when
//! dropped, whatever happened in between.

use super::shared::ProcessorShared;

/// A producer's entry in a processor's gate (see `gate.rs`), for the events it pushes
/// while holding it. Dropping it settles the count on every path, a panic included: no
/// event pushed, the entry is undone; `k` events pushed, the `k - 1` others are added. Then
/// it wakes the processor if the gate said it was going to sleep (the wake protocol; a
/// driven one's turn may run here, `drive.rs`).
#[must_use = "dropping it undoes the entry at once"]
pub(crate) struct GateEntry<'a, M> {
    pub(super) target: &'a ProcessorShared<M>,
    /// Events pushed under this entry.
    pub(super) pushed: usize,
    /// The processor had announced sleep when a read-modify-write of this entry ran.
    pub(super) wake: bool,
}

impl<M> Drop for GateEntry<'_, M> {
    #[inline]
    fn drop(&mut self) {
        match self.pushed {
            0 => self.target.gate.undo(),
            1 => {}
            k => self.wake |= self.target.gate.add(k - 1),
        }
        if self.wake {
            self.target.wake();
        }
    }
}

impl<M> ProcessorShared<M> {
    /// Enters the gate; `None` once shutdown has closed it.
    #[inline]
    pub(super) fn enter(&self) -> Option<GateEntry<'_, M>> {
        let wake = self.gate.enter()?;
        Some(GateEntry {
            target: self,
            pushed: 0,
            wake,
        })
    }

    /// Enters the gate of every processor of `pool`, or of none: `None` (every entry made
    /// undone) if shutdown has closed one. An event pushed under each entry is accepted,
    /// even across a shutdown (see `gate.rs`): what makes `execute_on_all` reach every
    /// processor or none.
    pub(crate) fn enter_all<'a>(
        pool: impl IntoIterator<Item = &'a Self>,
    ) -> Option<Vec<GateEntry<'a, M>>> {
        pool.into_iter().map(Self::enter).collect()
    }
}
