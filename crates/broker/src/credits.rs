//! A producer's two counts of messages without an outcome: the unconfirmed-message cap that
//! `Producer::send` waits on, and the count of everything accepted and not yet reported,
//! that `Producer::close` waits on; each wait without losing a wake-up.
//!
//! The cluster's two pools of credits are `Credits` too, of which only the cap is used: a
//! confirm for the cluster takes one, the cluster gives it back once the confirm is routed
//! (see `cluster.rs`).
//!
//! # Protocol
//!
//! `in_flight` counts messages sent with a credit (`send`, `try_send`) whose outcome has not
//! been taken out for reporting. A sender takes a credit with a compare-and-swap from `n` to
//! `n + 1` while `n` is below the cap, and waits otherwise.
//!
//! `unreported` counts every message the producer handed to its session (`send`,
//! `try_send` and `publish` alike) whose outcome has not yet been handed to `on_ack`. The
//! producer adds one before it dispatches the message (and takes it off again if the
//! dispatch fails).
//!
//! For each batch of outcomes the session, on its processor thread:
//!
//! 1. gives the batch's credits back (one `fetch_sub`), then takes the lock and notifies;
//! 2. calls `on_ack` with the batch (so that `on_ack` may `send` again even at a cap of 1:
//!    its credit is free before it runs);
//! 3. takes the batch off `unreported` (one `fetch_sub`), then takes the lock and notifies
//!    (so that `close` returns only after every outcome it waited for was reported).
//!
//! A waiter re-tries under the lock and waits on the condition variable, which releases the
//! lock atomically. Each releaser's `fetch_sub` precedes its taking of the lock, so either
//! its notify comes after the waiter has started waiting (and wakes it), or it unlocked
//! before the waiter locked, and the waiter's re-try, which then happens after the
//! `fetch_sub`, sees it. Taking the lock twice per batch of outcomes (one flush of the
//! session) is cheap; it allocates nothing.
//!
//! The cap is never exceeded: a credit is taken before the message is sent, by a
//! compare-and-swap that never moves the count past the cap, and given back only for an
//! outcome taken out for reporting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A producer's credits (at most `cap` credited messages in flight) and its count of
/// messages not yet reported.
#[derive(Debug)]
pub(crate) struct Credits {
    cap: usize,
    /// Credited messages without an outcome taken out for reporting: at most `cap`.
    in_flight: AtomicUsize,
    /// Messages handed to the session, credited or not, whose outcome `on_ack` has not
    /// yet returned from: at least `in_flight`, except while a batch is being reported.
    unreported: AtomicUsize,
    lock: Mutex<()>,
    room: Condvar,
}

impl Credits {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            in_flight: AtomicUsize::new(0),
            unreported: AtomicUsize::new(0),
            lock: Mutex::new(()),
            room: Condvar::new(),
        }
    }

    /// The cap.
    pub(crate) fn cap(&self) -> usize {
        self.cap
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

    /// Counts a message the producer is about to hand to its session; its outcome must
    /// later be [`reported`](Self::reported) (or the hand-over undone with `reported(1)`).
    pub(crate) fn accept(&self) {
        // Relaxed: a count. A `close` that must see it happens after this call (program
        // order, or the application's own synchronization), which coherence makes enough.
        self.unreported.fetch_add(1, Ordering::Relaxed);
    }

    /// Gives back `n` credits (outcomes taken out for reporting) and wakes the waiters.
    pub(crate) fn give_back(&self, n: usize) {
        // AcqRel: releases the room to `try_take`'s acquire.
        self.take_off(
            &self.in_flight,
            n,
            Ordering::AcqRel,
            "more outcomes than messages in flight",
        );
    }

    /// Takes `n` messages off the unreported count (their outcomes were handed to `on_ack`,
    /// or they were never handed to the session) and wakes the waiters.
    pub(crate) fn reported(&self, n: usize) {
        // Release: whatever `on_ack` did is visible to a `close` that acquires the zero.
        self.take_off(
            &self.unreported,
            n,
            Ordering::Release,
            "more outcomes reported than accepted",
        );
    }

    /// Takes `n` off `count` with the ordering `order`, and wakes the waiters; nothing when
    /// `n` is 0. `count` holds at least `n`: what it would mean otherwise is `excess`.
    fn take_off(&self, count: &AtomicUsize, n: usize, order: Ordering, excess: &str) {
        if n == 0 {
            return;
        }
        let before = count.fetch_sub(n, order);
        debug_assert!(before >= n, "{excess}: {before} < {n}");
        self.notify();
    }

    fn notify(&self) {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.room.notify_all();
    }

    /// Credited messages in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Messages handed to the session and not reported yet.
    pub(crate) fn unreported(&self) -> usize {
        // Acquire: pairs with `reported`'s release.
        self.unreported.load(Ordering::Acquire)
    }

    /// Waits until every message handed to the session has had its outcome reported, or
    /// `timeout`; `true` if all have.
    pub(crate) fn wait_reported(&self, timeout: Duration) -> bool {
        self.wait_until(|| self.unreported() == 0, Some(Instant::now() + timeout))
    }

    /// Waits under the lock until `ready` holds (re-checked after every `give_back` and
    /// `reported`), or `deadline` passes; returns whether `ready` held.
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
