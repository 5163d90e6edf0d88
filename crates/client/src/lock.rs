//! The crate's one way to take a lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`. A lock is never held while application code runs, so a poisoned lock
/// only means a panic in this crate between two consistent states: its data is used as
/// it is.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
