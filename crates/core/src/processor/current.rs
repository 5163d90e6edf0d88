//! Which processor, of which dispatcher, the current thread is, and how many events its
//! outbox holds: thread-locals read on every dispatch, with no lock.

use crate::ids::ProcessorId;

#[cfg(not(loom))]
std::thread_local! {
    /// Which processor, of which dispatcher, the current thread is.
    static CURRENT: std::cell::Cell<Option<(u64, ProcessorId)>> = const { std::cell::Cell::new(None) };
    /// Events in the current processor thread's outbox: read on every dispatch a processor
    /// makes (a thread-local read, no lock) to know whether it may push directly.
    pub(super) static OUTBOX_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// Under loom the model's threads share OS threads: its own thread-locals keep them apart.
#[cfg(loom)]
loom::thread_local! {
    static CURRENT: std::cell::Cell<Option<(u64, ProcessorId)>> = std::cell::Cell::new(None);
    pub(super) static OUTBOX_LEN: std::cell::Cell<usize> = std::cell::Cell::new(0);
}

/// Makes the current thread processor `id` of dispatcher `dispatcher`: what a processor
/// thread does first (and a loom model for the threads it plays).
pub(crate) fn set_current(dispatcher: u64, id: ProcessorId) {
    CURRENT.with(|c| c.set(Some((dispatcher, id))));
}

/// Events in the current processor thread's outbox.
#[cfg(all(loom, test))]
pub(crate) fn current_outbox_len() -> usize {
    outbox_len()
}

/// The dispatcher id and processor of the current thread, if it is a processor thread.
pub(crate) fn current_processor() -> Option<(u64, ProcessorId)> {
    CURRENT.with(std::cell::Cell::get)
}

pub(super) fn outbox_len() -> usize {
    OUTBOX_LEN.with(std::cell::Cell::get)
}

/// The calling thread playing processor `id` for one step of a stepped dispatcher
/// ([`testing`](crate::testing)): what a processor thread sets once, set for the step and
/// put back as it was when dropped.
pub(crate) struct Playing {
    current: Option<(u64, ProcessorId)>,
    outbox_len: usize,
}

impl Playing {
    pub(crate) fn start(dispatcher: u64, id: ProcessorId, outbox_len: usize) -> Self {
        let playing = Self {
            current: current_processor(),
            outbox_len: self::outbox_len(),
        };
        set_current(dispatcher, id);
        OUTBOX_LEN.with(|len| len.set(outbox_len));
        playing
    }
}

impl Drop for Playing {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.current));
        OUTBOX_LEN.with(|len| len.set(self.outbox_len));
    }
}
