//! The hand-off of [`call`](crate::DispatcherHandle::call) (and of `synchronize`, a `call`
//! of nothing) and of [`call_async`](crate::DispatcherHandle::call_async): an application
//! thread or task sends a closure to a processor and waits for its answer, allocating
//! nothing per call.
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
//! A task may have many calls under way on one thread and move between threads, so an
//! async call takes a slot of its own from its thread's pool of task slots, and puts it
//! back once it has taken the answer: the pool grows to the most calls a thread has had
//! under way at once, and then nothing is allocated. A call dropped before its answer
//! leaves its slot to the request (which still answers into it) and the slot is freed with
//! the last `Arc`, never reused.
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
//! A task waits the same way with its waker instead of a park: under the lock it takes the
//! answer or leaves its waker in the slot, and the processor takes the waker out under the
//! lock as it answers and wakes it after unlocking. The lock orders the two, as it orders
//! the park above.
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
//! Model-checked with `loom` on this code (`loom/call.rs`).

use std::sync::Arc;
use std::task::{Poll, Waker};

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

/// Who waits on a slot.
#[derive(Debug)]
enum Waiter {
    /// An application thread, parked (`call`).
    Thread(thread::Thread),
    /// A task, by the waker it leaves in the slot (`call_async`).
    Task,
}

/// What a slot holds under its lock.
#[derive(Debug)]
struct SlotState {
    /// `Waiting` except between an answer and its waiter taking it. Set only by the call's
    /// [`Request`], at most once per call; reset only by the waiter.
    answer: Answer,
    /// A task's waker, left by its last poll; taken by the answer.
    waker: Option<Waker>,
}

/// A reusable place for the answers to calls: one per application thread for `call`, one
/// per call under way for `call_async`.
#[derive(Debug)]
pub(crate) struct CallSlot {
    waiter: Waiter,
    state: Mutex<SlotState>,
}

impl CallSlot {
    fn new(waiter: Waiter) -> Arc<Self> {
        Arc::new(Self {
            waiter,
            state: Mutex::new(SlotState {
                answer: Answer::Waiting,
                waker: None,
            }),
        })
    }

    /// Answers the call under way and wakes its waiter.
    fn answer(&self, answer: Answer) {
        let waker = {
            let mut slot = self.state.lock().unwrap_or_else(|e| e.into_inner());
            debug_assert!(
                matches!(slot.answer, Answer::Waiting),
                "a call answered twice; slot = {:?}",
                slot.answer
            );
            slot.answer = answer;
            slot.waker.take()
        };
        match &self.waiter {
            Waiter::Thread(thread) => thread.unpark(),
            Waiter::Task => waker.into_iter().for_each(Waker::wake),
        }
    }

    /// Waits for the answer to the call under way, takes it, and leaves the slot ready for
    /// the next call. Only the slot's own thread calls this.
    pub(crate) fn wait(&self) -> Answer {
        loop {
            {
                let mut slot = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if !matches!(slot.answer, Answer::Waiting) {
                    return std::mem::replace(&mut slot.answer, Answer::Waiting);
                }
            }
            thread::park();
        }
    }

    /// A task's look at its call: the answer, taken (the slot is ready for another call),
    /// or `Pending` with `waker` left to be woken by the answer.
    pub(crate) fn poll(&self, waker: &Waker) -> Poll<Answer> {
        let mut slot = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(slot.answer, Answer::Waiting) {
            slot.waker = None;
            return Poll::Ready(std::mem::replace(&mut slot.answer, Answer::Waiting));
        }
        match &mut slot.waker {
            Some(left) if left.will_wake(waker) => {}
            left => *left = Some(waker.clone()),
        }
        Poll::Pending
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
    CallSlot::new(Waiter::Thread(thread::current()))
}

/// Task slots a thread keeps for reuse, at most: more than any sane number of calls under
/// way at once on one thread.
#[cfg(not(loom))]
const POOLED: usize = 1024;

#[cfg(not(loom))]
std::thread_local! {
    /// The current thread's task slots that are free for another `call_async`.
    static TASK_SLOTS: std::cell::RefCell<Vec<Arc<CallSlot>>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// A new async call: a free task slot of the current thread's pool (or a new one), and the
/// request to send.
pub(crate) fn task_request() -> (Arc<CallSlot>, Request) {
    #[cfg(not(loom))]
    let pooled = TASK_SLOTS
        .try_with(|pool| pool.borrow_mut().pop())
        .ok()
        .flatten();
    #[cfg(loom)]
    let pooled = None;
    let slot = pooled.unwrap_or_else(|| CallSlot::new(Waiter::Task));
    let request = Request {
        slot: Some(slot.clone()),
    };
    (slot, request)
}

/// Puts back a task slot whose answer was taken, for the current thread's next async call.
pub(crate) fn recycle(slot: Arc<CallSlot>) {
    debug_assert!(matches!(slot.waiter, Waiter::Task));
    #[cfg(not(loom))]
    let _ = TASK_SLOTS.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < POOLED {
            pool.push(slot);
        }
    });
    #[cfg(loom)]
    drop(slot);
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
