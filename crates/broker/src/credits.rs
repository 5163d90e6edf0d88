//! The unconfirmed-message cap: how `Producer::send` waits, without losing a wake-up, until
//! outcomes free room.
//!
//! # Protocol
//!
//! `in_flight` counts messages sent and without an outcome. A sender takes a credit with a
//! compare-and-swap from `n` to `n + 1` while `n` is below the cap, and waits otherwise. The session
//! gives credits back in one `fetch_sub(n)` per batch of outcomes, then takes the lock and
//! notifies every waiter.
//!
//! A waiter re-tries under the lock and waits on the condition variable, which releases the
//! lock atomically. The releaser's `fetch_sub` precedes its taking of the lock, so either
//! the releaser's notify comes after the waiter has started waiting (and wakes it), or the
//! releaser unlocked before the waiter locked, and the waiter's re-try, which then happens
//! after the `fetch_sub`, sees the room. Taking the lock once per batch of outcomes (one
//! flush of the session) is cheap; it allocates nothing.
//!
//! The cap is never exceeded: a credit is taken before the message is sent, by a
//! compare-and-swap that never moves the count past the cap, and given back only for a
//! reported outcome.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A producer's credits: at most `cap` messages in flight.
#[derive(Debug)]
pub(crate) struct Credits {
    cap: usize,
    in_flight: AtomicUsize,
    lock: Mutex<()>,
    room: Condvar,
}

impl Credits {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            in_flight: AtomicUsize::new(0),
            lock: Mutex::new(()),
            room: Condvar::new(),
        }
    }

    /// Takes a credit if one is free. A compare-and-swap, not an increment undone on
    /// failure, so that the count itself never goes past the cap.
    pub(crate) fn try_take(&self) -> bool {
        // Acquire/AcqRel: pairs with `give_back`'s release, so that room seen is room freed.
        let mut now = self.in_flight.load(Ordering::Acquire);
        while now < self.cap {
            match self.in_flight.compare_exchange_weak(
                now,
                now + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(seen) => now = seen,
            }
        }
        false
    }

    /// Takes a credit, waiting for one.
    pub(crate) fn take(&self) {
        if !self.try_take() {
            self.wait_until(|| self.try_take(), None);
        }
    }

    /// Gives back `n` credits (outcomes reported) and wakes the waiters.
    pub(crate) fn give_back(&self, n: usize) {
        if n == 0 {
            return;
        }
        let before = self.in_flight.fetch_sub(n, Ordering::AcqRel);
        debug_assert!(
            before >= n,
            "more outcomes than messages in flight: {before} < {n}"
        );
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.room.notify_all();
    }

    /// Messages in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Waits until nothing is in flight, or `timeout`; `true` if nothing is.
    pub(crate) fn wait_empty(&self, timeout: Duration) -> bool {
        self.wait_until(|| self.in_flight() == 0, Some(Instant::now() + timeout))
    }

    /// Waits under the lock until `ready` holds (re-checked after every `give_back`), or
    /// `deadline` passes; returns whether `ready` held.
    fn wait_until(&self, mut ready: impl FnMut() -> bool, deadline: Option<Instant>) -> bool {
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if ready() {
                return true;
            }
            guard = match deadline {
                None => self.room.wait(guard).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    self.room
                        .wait_timeout(guard, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }
}
