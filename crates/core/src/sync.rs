//! The synchronisation primitives of the dispatcher's protocols (wake, shutdown, stop, the
//! outbox and the `call` hand-off), swapped for `loom`'s under `--cfg loom` so that the
//! model checker explores every interleaving of the real code: the gate word, the stop
//! flag, the processor's thread handle, park and unpark, the thread-locals a processor
//! keeps, the mutex of a call's slot, and the bounded queue itself (under loom a
//! mutex-guarded ring of the same capacity and the same `push`/`pop` contract as
//! `crossbeam_queue::ArrayQueue`, whose own atomics loom cannot see).
//!
//! Code outside the protocols (stats, the monitor) keeps `std`'s primitives: loom need not
//! explore it.

#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::thread;

#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::thread;

#[cfg(not(loom))]
pub(crate) use crossbeam_queue::ArrayQueue as BoundedQueue;

#[cfg(loom)]
pub(crate) use self::loom_queue::BoundedQueue;

/// One turn of a spin (for room): crossbeam's backoff spin (spin-loop hints growing to
/// its limit, never a yield), or under loom a yield, which is what lets the model checker
/// run the thread being waited for.
#[inline]
pub(crate) fn spin(backoff: &crossbeam_utils::Backoff) {
    #[cfg(not(loom))]
    backoff.spin();
    #[cfg(loom)]
    {
        let _ = backoff;
        loom::thread::yield_now();
    }
}

/// Parks the current thread for at most `timeout`. loom has no timed park: under loom it
/// yields instead (a timeout that expires at once), which explores the retry it leads to.
#[inline]
pub(crate) fn park_timeout(timeout: std::time::Duration) {
    #[cfg(not(loom))]
    std::thread::park_timeout(timeout);
    #[cfg(loom)]
    {
        let _ = timeout;
        loom::thread::yield_now();
    }
}

/// Parks the current thread until it is unparked, for at most `backstop`: a park that a
/// wake protocol ends, the backstop only bounding the cost of a wake that never comes.
/// Under loom an untimed park, so that the model checker proves the wake does come (a
/// lost one deadlocks the model).
#[inline]
pub(crate) fn park_backstop(backstop: std::time::Duration) {
    #[cfg(not(loom))]
    std::thread::park_timeout(backstop);
    #[cfg(loom)]
    {
        let _ = backstop;
        loom::thread::park();
    }
}

#[cfg(loom)]
mod loom_queue {
    use std::collections::VecDeque;

    use loom::sync::Mutex;

    /// The model of a bounded MPMC queue under loom: every push and pop is one atomic step,
    /// as a successful compare-and-swap of `ArrayQueue`'s tail or head is.
    pub(crate) struct BoundedQueue<T> {
        items: Mutex<VecDeque<T>>,
        capacity: usize,
    }

    impl<T> BoundedQueue<T> {
        pub(crate) fn new(capacity: usize) -> Self {
            Self {
                items: Mutex::new(VecDeque::with_capacity(capacity)),
                capacity,
            }
        }

        pub(crate) fn push(&self, value: T) -> Result<(), T> {
            let mut items = self.items.lock().unwrap();
            if items.len() >= self.capacity {
                return Err(value);
            }
            items.push_back(value);
            Ok(())
        }

        pub(crate) fn pop(&self) -> Option<T> {
            self.items.lock().unwrap().pop_front()
        }

        pub(crate) fn len(&self) -> usize {
            self.items.lock().unwrap().len()
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.len() == 0
        }

        pub(crate) fn is_full(&self) -> bool {
            self.len() == self.capacity()
        }

        pub(crate) fn capacity(&self) -> usize {
            self.capacity
        }
    }
}
