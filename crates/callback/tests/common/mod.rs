//! Test set-up shared by the callback crate's tests: counters of a closure's runs and of
//! its captures' drops.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A capture that counts how many times it is dropped.
pub struct DropCount(pub Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs of the closures made by [`Counts::closure`], drops of their [`Counts::guard`]s: none yet.
#[derive(Default)]
pub struct Counts {
    /// Added to by each run.
    pub runs: Arc<AtomicUsize>,
    /// Added to by each guard's drop.
    pub drops: Arc<AtomicUsize>,
}

impl Counts {
    /// A capture whose drop is counted.
    pub fn guard(&self) -> DropCount {
        DropCount(self.drops.clone())
    }

    /// A closure that captures a [`guard`](Self::guard) and counts its run.
    pub fn closure(&self) -> impl FnOnce() + Send + 'static {
        self.closure_then(|| ())
    }

    /// A closure that captures a [`guard`](Self::guard), counts its run, then runs `then`.
    pub fn closure_then(
        &self,
        then: impl FnOnce() + Send + 'static,
    ) -> impl FnOnce() + Send + 'static {
        let (guard, runs) = (self.guard(), self.runs.clone());
        move || {
            let _keep = &guard;
            runs.fetch_add(1, Ordering::SeqCst);
            then();
        }
    }

    /// Checks the runs and the drops so far.
    #[track_caller]
    pub fn assert(&self, runs: usize, drops: usize) {
        let counted = (
            self.runs.load(Ordering::SeqCst),
            self.drops.load(Ordering::SeqCst),
        );
        assert_eq!(counted, (runs, drops), "(runs, drops)");
    }
}
