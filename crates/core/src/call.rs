//! The one-shot hand-off of [`DispatcherHandle::synchronize`](crate::DispatcherHandle::synchronize):
//! the application thread waits on a signal that the marker it sent sets when the processor
//! runs it, or when the processor drops it unrun.

use std::sync::{Arc, Condvar, Mutex};

/// The one-shot a [`DispatcherHandle::synchronize`] call waits on.
#[derive(Debug, Default)]
pub(crate) struct SyncSignal {
    state: Mutex<u8>,
    changed: Condvar,
}

impl SyncSignal {
    pub(crate) const WAITING: u8 = 0;
    pub(crate) const RAN: u8 = 1;
    pub(crate) const DROPPED: u8 = 2;

    /// Moves from `WAITING` to `state` (the first setter wins) and wakes the waiter.
    pub(crate) fn set(&self, state: u8) {
        let mut now = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if *now == Self::WAITING {
            *now = state;
            self.changed.notify_all();
        }
    }

    /// Waits until set; returns the state.
    pub(crate) fn wait(&self) -> u8 {
        let mut now = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while *now == Self::WAITING {
            now = self.changed.wait(now).unwrap_or_else(|e| e.into_inner());
        }
        *now
    }
}

/// Travels in a `synchronize` marker: sets its signal `RAN` when run, and `DROPPED` if the
/// marker is dropped unrun (its processor died), so that the waiter never hangs.
pub(crate) struct SyncMarker {
    pub(crate) signal: Arc<SyncSignal>,
}

impl SyncMarker {
    pub(crate) fn ran(self) {
        self.signal.set(SyncSignal::RAN);
    }
}

impl Drop for SyncMarker {
    fn drop(&mut self) {
        self.signal.set(SyncSignal::DROPPED);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::thread;
    use zerodispatch_callback::Callback;

    /// A `synchronize` marker that a dying processor drops unrun wakes its waiter with
    /// `Dropped` rather than leaving it waiting forever; one that runs answers `RAN`, and
    /// its drop after running changes nothing.
    #[test]
    fn a_sync_marker_answers_whether_it_ran() {
        let dropped = Arc::new(SyncSignal::default());
        let marker = SyncMarker {
            signal: dropped.clone(),
        };
        let waiter = {
            let signal = dropped.clone();
            thread::spawn(move || signal.wait())
        };
        drop(Callback::new(move || marker.ran())); // dropped unrun
        assert_eq!(waiter.join().unwrap(), SyncSignal::DROPPED);

        let ran = Arc::new(SyncSignal::default());
        let marker = SyncMarker {
            signal: ran.clone(),
        };
        Callback::new(move || marker.ran()).call();
        assert_eq!(ran.wait(), SyncSignal::RAN);
    }
}
