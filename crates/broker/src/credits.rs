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
//! 1. gives the batch's credits back (one `fetch_sub`), then, if a thread waits for
//!    credits, takes the lock and notifies;
//! 2. calls `on_ack` with the batch (so that `on_ack` may `send` again even at a cap of 1:
//!    its credit is free before it runs);
//! 3. takes the batch off `unreported` (one `fetch_sub`), then, if `close` waits, takes the
//!    lock and notifies (so that `close` returns only after every outcome it waited for
//!    was reported).
//!
//! # Waiting without a system call per batch
//!
//! Each count's word keeps, in its top bit (`WAITED_ON`), whether a thread waits for that
//! count to move. A waiter, under the lock, counts itself in (`Waiting`) and sets the bit
//! (a read-modify-write of the word) **before** it checks its condition, and between
//! checks waits on the condition variable, which releases the lock atomically; the last
//! waiter of a count to leave clears its bit, under the lock. A releaser's `fetch_sub` is a
//! read-modify-write of the same word, so the two are ordered in the word's modification
//! order:
//!
//! * the waiter's bit first: the `fetch_sub` returns it, and the releaser takes the lock
//!   and notifies; the waiter holds the lock from before it set the bit until it waits,
//!   so the notify comes after its check, and wakes it (or its next check sees the room);
//! * the `fetch_sub` first: the waiter's check, a load of the same word after its own
//!   read-modify-write, reads a value no older than that write, which follows the
//!   `fetch_sub`: it sees the room and does not wait.
//!
//! A releaser that finds the bit clear takes no lock and makes no system call (`std`'s
//! `notify_all` makes one whether or not anyone waits: before, every flush of a producer's
//! session paid two). A bit still set after its waiter was woken costs one spare notify.
//! Modelled with loom (`loom_tests` below).
//!
//! The cap is never exceeded: a credit is taken before the message is sent, by a
//! compare-and-swap that never moves the count past the cap, and given back only for an
//! outcome taken out for reporting.

use std::time::{Duration, Instant};

#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(loom)]
use loom::sync::{Condvar, Mutex};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::{Condvar, Mutex};

/// The bit of a count's word that says a thread waits for the count to move (see the
/// module's protocol); the count is the rest of the word.
const WAITED_ON: usize = 1 << (usize::BITS - 1);

/// Which of the two counts a waiter waits on.
#[derive(Clone, Copy, Debug)]
enum Count {
    InFlight,
    Unreported,
}

/// The threads waiting on each count, behind the lock.
#[derive(Debug, Default)]
struct Waiting {
    in_flight: usize,
    unreported: usize,
}

impl Waiting {
    fn of(&mut self, count: Count) -> &mut usize {
        match count {
            Count::InFlight => &mut self.in_flight,
            Count::Unreported => &mut self.unreported,
        }
    }
}

/// A producer's credits (at most `cap` credited messages in flight) and its count of
/// messages not yet reported.
#[derive(Debug)]
pub(crate) struct Credits {
    cap: usize,
    /// Credited messages without an outcome taken out for reporting: at most `cap`
    /// (and `WAITED_ON` while a thread waits for a credit).
    in_flight: AtomicUsize,
    /// Messages handed to the session, credited or not, whose outcome `on_ack` has not
    /// yet returned from: at least `in_flight`, except while a batch is being reported
    /// (and `WAITED_ON` while a thread waits for them all).
    unreported: AtomicUsize,
    lock: Mutex<Waiting>,
    room: Condvar,
}

impl Credits {
    /// Precondition: `cap` below `usize::MAX / 2` (the top bit of a count is `WAITED_ON`).
    pub(crate) fn new(cap: usize) -> Self {
        assert!(
            cap < WAITED_ON,
            "a cap of credits below usize::MAX / 2, not {cap}"
        );
        Self {
            cap,
            in_flight: AtomicUsize::new(0),
            unreported: AtomicUsize::new(0),
            lock: Mutex::new(Waiting::default()),
            room: Condvar::new(),
        }
    }

    fn word(&self, count: Count) -> &AtomicUsize {
        match count {
            Count::InFlight => &self.in_flight,
            Count::Unreported => &self.unreported,
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
        // The count is the word less `WAITED_ON`; the increment leaves the bit as it is.
        while now & !WAITED_ON < self.cap {
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
            self.wait_until(Count::InFlight, || self.try_take(), None);
        }
    }

    /// Counts a message the producer is about to hand to its session; its outcome must
    /// later be [`reported`](Self::reported) (or the hand-over undone with `reported(1)`).
    pub(crate) fn accept(&self) {
        // Relaxed: a count. A `close` that must see it happens after this call (program
        // order, or the application's own synchronization), which coherence makes enough.
        let before = self.unreported.fetch_add(1, Ordering::Relaxed);
        debug_assert!(
            before & !WAITED_ON < WAITED_ON - 1,
            "unreported count overflow"
        );
    }

    /// Gives back `n` credits (outcomes taken out for reporting) and wakes the waiters.
    pub(crate) fn give_back(&self, n: usize) {
        // AcqRel: releases the room to `try_take`'s acquire.
        self.take_off(
            Count::InFlight,
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
            Count::Unreported,
            n,
            Ordering::Release,
            "more outcomes reported than accepted",
        );
    }

    /// Takes `n` off `count` with the ordering `order`, and wakes its waiters if it has
    /// any; nothing when `n` is 0. `count` holds at least `n`: what it would mean
    /// otherwise is `excess`.
    fn take_off(&self, count: Count, n: usize, order: Ordering, excess: &str) {
        if n == 0 {
            return;
        }
        // A read-modify-write: ordered with a waiter's setting of `WAITED_ON` (module docs).
        let before = self.word(count).fetch_sub(n, order);
        debug_assert!(before & !WAITED_ON >= n, "{excess}: {before} < {n}");
        if before & WAITED_ON != 0 {
            let _waiting = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.room.notify_all();
        }
    }

    /// Credited messages in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire) & !WAITED_ON
    }

    /// Messages handed to the session and not reported yet.
    pub(crate) fn unreported(&self) -> usize {
        // Acquire: pairs with `reported`'s release.
        self.unreported.load(Ordering::Acquire) & !WAITED_ON
    }

    /// Waits until every message handed to the session has had its outcome reported, or
    /// `timeout`; `true` if all have.
    pub(crate) fn wait_reported(&self, timeout: Duration) -> bool {
        self.wait_until(
            Count::Unreported,
            || self.unreported() == 0,
            Some(Instant::now() + timeout),
        )
    }

    /// Waits under the lock until `ready` holds (re-checked after every `take_off` of
    /// `count` that finds it waited on), or `deadline` passes; returns whether `ready` held.
    fn wait_until(
        &self,
        count: Count,
        mut ready: impl FnMut() -> bool,
        deadline: Option<Instant>,
    ) -> bool {
        let mut waiting = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Counted in and the bit set before the first check (module docs).
        *waiting.of(count) += 1;
        self.word(count).fetch_or(WAITED_ON, Ordering::AcqRel);
        let held = loop {
            if ready() {
                break true;
            }
            waiting = match deadline {
                None => self.room.wait(waiting).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break false;
                    }
                    self.room
                        .wait_timeout(waiting, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        };
        // The last waiter of the count out clears the bit (a later one sets it again).
        *waiting.of(count) -= 1;
        if *waiting.of(count) == 0 {
            self.word(count).fetch_and(!WAITED_ON, Ordering::Relaxed);
        }
        held
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::{Arc, mpsc};
    use std::thread;
    use std::time::Duration;

    use super::Credits;

    /// A release that finds no waiter takes no lock (and so makes no system call): it
    /// finishes while another thread holds the lock. Failed before: every `give_back` and
    /// `reported` took the lock and notified (a `futex` wake per flush of a session).
    #[test]
    fn a_release_with_no_waiter_takes_no_lock() {
        let credits = Arc::new(Credits::new(4));
        assert!(credits.try_take());
        credits.accept();
        let held = credits.lock.lock().unwrap();
        let (done, finished) = mpsc::channel();
        let releaser = {
            let credits = Arc::clone(&credits);
            thread::spawn(move || {
                credits.give_back(1);
                credits.reported(1);
                done.send(()).unwrap();
            })
        };
        let finished = finished.recv_timeout(Duration::from_secs(10));
        drop(held);
        releaser.join().unwrap();
        assert!(
            finished.is_ok(),
            "the release waited for the lock no waiter held"
        );
        assert_eq!((credits.in_flight(), credits.unreported()), (0, 0));
    }

    /// A sender at the cap and a `close` waiting for the outcomes are both woken, and the
    /// counts read without the waiters' bits.
    #[test]
    fn waiters_on_both_counts_are_woken_and_the_counts_stay_exact() {
        let credits = Arc::new(Credits::new(1));
        assert!(credits.try_take());
        credits.accept();
        let sender = {
            let credits = Arc::clone(&credits);
            thread::spawn(move || credits.take())
        };
        let closer = {
            let credits = Arc::clone(&credits);
            thread::spawn(move || credits.wait_reported(Duration::from_secs(30)))
        };
        // Until both wait (the bits set), the counts read as they are.
        while credits.in_flight.load(std::sync::atomic::Ordering::Relaxed) < super::WAITED_ON
            || credits
                .unreported
                .load(std::sync::atomic::Ordering::Relaxed)
                < super::WAITED_ON
        {
            thread::yield_now();
        }
        assert_eq!((credits.in_flight(), credits.unreported()), (1, 1));
        credits.give_back(1);
        sender.join().unwrap();
        assert_eq!(
            credits.in_flight(),
            1,
            "the sender took the credit given back"
        );
        credits.reported(1);
        assert!(closer.join().unwrap(), "close saw every outcome reported");
        // The last waiter of each count cleared its bit.
        assert_eq!(
            credits.in_flight.load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        assert_eq!(
            credits
                .unreported
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }

    /// A `close` whose outcomes never come returns `false` at its deadline, its bit cleared.
    #[test]
    fn a_timed_wait_ends_at_its_deadline_and_leaves_no_bit() {
        let credits = Credits::new(1);
        credits.accept();
        assert!(!credits.wait_reported(Duration::from_millis(20)));
        assert_eq!(
            credits
                .unreported
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }
}

/// The wait protocol under loom: no interleaving of a waiter's registration and check with
/// a release loses the wake-up (a lost one deadlocks the model).
#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc;
    use loom::thread;

    use super::{Count, Credits};

    /// A sender at the cap waits for the credit a flush gives back.
    #[test]
    fn loom_a_sender_at_the_cap_gets_the_credit_given_back() {
        loom::model(|| {
            let credits = Arc::new(Credits::new(1));
            assert!(credits.try_take());
            let releaser = {
                let credits = Arc::clone(&credits);
                thread::spawn(move || credits.give_back(1))
            };
            credits.take();
            releaser.join().unwrap();
            assert_eq!(credits.in_flight(), 1);
        });
    }

    /// `close` waiting for the outcomes and a sender waiting for a credit, released by one
    /// flush (credits, then the unreported count), both end.
    #[test]
    fn loom_close_and_a_sender_both_end_after_one_flush() {
        loom::model(|| {
            let credits = Arc::new(Credits::new(1));
            assert!(credits.try_take());
            credits.accept();
            let sender = {
                let credits = Arc::clone(&credits);
                thread::spawn(move || credits.take())
            };
            let flush = {
                let credits = Arc::clone(&credits);
                thread::spawn(move || {
                    credits.give_back(1);
                    credits.reported(1);
                })
            };
            assert!(credits.wait_until(Count::Unreported, || credits.unreported() == 0, None));
            sender.join().unwrap();
            flush.join().unwrap();
            assert_eq!((credits.in_flight(), credits.unreported()), (1, 0));
        });
    }
}
