//! The hand-off of [`call`](crate::DispatcherHandle::call) (and of `synchronize`, a `call`
//! of nothing): an application thread sends a closure to a processor and waits for its
//! answer, allocating nothing per call.
//!
//! # The slot
//!
//! Each application thread has one [`CallSlot`], made on its first call (the only
//! allocation, once per thread) and reused by every call after. A call clones the slot's
//! `Arc` into a [`Request`] that travels, inline, in the call's callback; the processor
//! answers through it; the thread waits on the slot. A thread makes one call at a time, so
//! one slot is enough. The answer is an [`InlineValue`] (the closure's result, stored
//! inline and taken back out by its type), since one slot serves calls of every result
//! type.
//!
//! # Protocol
//!
//! Answering (processor): lock the slot, move it from `Waiting` to the answer (`Ran`,
//! `Panicked`, or `Dropped` when the request is dropped unanswered), unlock, unpark the
//! waiting thread.
//!
//! Waiting (the calling thread): lock the slot; if it holds an answer, take it and leave
//! `Waiting` behind for the next call; otherwise unlock and park, then look again.
//!
//! Why no wake-up is lost: the answer is set under the lock and looked for under the lock,
//! so the waiter either sees it or finds `Waiting` before it was set; in the second case
//! the unpark comes after the waiter's unlock, and if it comes before the park, the park
//! returns at once (the thread's unpark token). Why a late unpark is harmless: the unpark
//! of an answer can reach the thread after it has taken the answer, during its next call
//! or any later park of its own; `park` may always return spuriously, and the waiter looks
//! at the slot again. Why an answer never reaches the wrong call: a request answers at most
//! once (answering consumes it, and its drop answers only if it has not), and the calling
//! thread starts its next call only after taking the answer of this one.
//!
//! Model-checked with `loom` on this code (`loom_tests.rs`).

use std::sync::Arc;

use zerodispatch_callback::InlineValue;

use crate::sync::{Mutex, thread};

/// What a call's request answered.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Not answered yet: the state between calls, and while one waits.
    Waiting,
    /// The closure ran and returned this.
    Ran(InlineValue),
    /// The closure panicked (the processor caught and counted the panic).
    Panicked,
    /// The request was dropped without running: its processor's thread died, or the
    /// request was never enqueued.
    Dropped,
}

/// One application thread's reusable place for the answers to its calls.
#[derive(Debug)]
pub(crate) struct CallSlot {
    /// The thread that owns the slot and waits on it.
    waiter: thread::Thread,
    /// `Waiting` except between an answer and its waiter taking it. Set only by the
    /// call's [`Request`], at most once per call; reset only by the waiter.
    answer: Mutex<Answer>,
}

impl CallSlot {
    /// Answers the call under way and wakes its waiter.
    fn answer(&self, answer: Answer) {
        {
            let mut slot = self.answer.lock().unwrap_or_else(|e| e.into_inner());
            debug_assert!(
                matches!(*slot, Answer::Waiting),
                "a call answered twice; slot = {:?}",
                *slot
            );
            *slot = answer;
        }
        self.waiter.unpark();
    }

    /// Waits for the answer to the call under way, takes it, and leaves the slot ready for
    /// the next call. Only the slot's own thread calls this.
    pub(crate) fn wait(&self) -> Answer {
        loop {
            {
                let mut slot = self.answer.lock().unwrap_or_else(|e| e.into_inner());
                if !matches!(*slot, Answer::Waiting) {
                    return std::mem::replace(&mut *slot, Answer::Waiting);
                }
            }
            thread::park();
        }
    }
}

/// The processor's side of one call: answers exactly once, by [`Request::ran`] or
/// [`Request::panicked`], or with `Dropped` when dropped unanswered, so that the waiter
/// never waits forever.
#[derive(Debug)]
pub(crate) struct Request {
    /// `None` once answered.
    slot: Option<Arc<CallSlot>>,
}

impl Request {
    /// The closure ran and returned `value`.
    pub(crate) fn ran(mut self, value: InlineValue) {
        if let Some(slot) = self.slot.take() {
            slot.answer(Answer::Ran(value));
        }
    }

    /// The closure panicked.
    pub(crate) fn panicked(mut self) {
        if let Some(slot) = self.slot.take() {
            slot.answer(Answer::Panicked);
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.answer(Answer::Dropped);
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// The calling thread's slot, made on its first call.
    static SLOT: Arc<CallSlot> = new_slot();
}

#[cfg(loom)]
loom::thread_local! {
    static SLOT: Arc<CallSlot> = new_slot();
}

fn new_slot() -> Arc<CallSlot> {
    Arc::new(CallSlot {
        waiter: thread::current(),
        answer: Mutex::new(Answer::Waiting),
    })
}

/// A new call from the current thread: its slot, to wait on, and the request to send.
/// Allocates nothing after the thread's first call (one `Arc` clone), except while the
/// thread's locals are being destroyed, when it makes a slot for this call alone.
pub(crate) fn request() -> (Arc<CallSlot>, Request) {
    let slot = SLOT.try_with(Arc::clone).unwrap_or_else(|_| new_slot());
    let request = Request {
        slot: Some(slot.clone()),
    };
    (slot, request)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A request dropped unanswered (its processor died) wakes its waiter with `Dropped`
    /// rather than leaving it waiting forever; one that answers is not answered again by
    /// its drop; the slot serves the next call.
    #[test]
    fn a_request_answers_exactly_once() {
        let (slot, request) = super::request();
        let dropper = std::thread::spawn(move || drop(request));
        assert!(matches!(slot.wait(), Answer::Dropped));
        dropper.join().unwrap();

        let (again, request) = super::request();
        assert!(Arc::ptr_eq(&slot, &again), "the thread's slot is reused");
        std::thread::spawn(move || request.ran(InlineValue::new(7_u64)))
            .join()
            .unwrap();
        match again.wait() {
            Answer::Ran(v) => assert_eq!(v.take::<u64>().unwrap(), 7),
            other => panic!("{other:?}"),
        }
        let (_, request) = super::request();
        request.panicked();
        assert!(matches!(slot.wait(), Answer::Panicked));
    }
}
