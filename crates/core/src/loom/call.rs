//! The `call` hand-off (`call.rs`), on the real slot and request: blocking and async.

use std::task::Poll;

use loom::thread;

use zerodispatch_callback::InlineValue;

use super::mock::Unpark;
use crate::call::{self, Answer};

/// Two calls in a row from one thread, each answered by a processor thread, the first
/// with a value and the second by a request dropped unrun. The waiter never parks forever
/// (loom would report the deadlock), takes each answer once, and the late unpark of the
/// first answer, which can reach it during the second call, does not make the second call
/// return early.
#[test]
fn loom_a_call_answer_is_never_lost_nor_taken_by_the_next_call() {
    loom::model(|| {
        let (slot, request) = call::request();
        let answering = thread::spawn(move || request.ran(InlineValue::new(7_u64)));
        match slot.wait() {
            Answer::Ran(value) => assert_eq!(value.take::<u64>().unwrap(), 7),
            other => panic!("first call: {other:?}"),
        }
        let (again, request) = call::request();
        let dropping = thread::spawn(move || drop(request));
        assert!(matches!(again.wait(), Answer::Dropped), "second call");
        answering.join().unwrap();
        dropping.join().unwrap();
    });
}

/// The `call_async` hand-off, on the real task slot: a task polls for its answer with a
/// waker while a processor thread answers. The answer set under the lock either is seen by
/// the poll or finds the waker the poll left, so the task is always woken (loom reports a
/// park that nothing ends as a deadlock) and takes the answer once.
#[test]
fn loom_a_task_call_answer_always_wakes_its_task() {
    loom::model(|| {
        let (slot, request) = call::task_request();
        let answering = thread::spawn(move || request.ran(InlineValue::new(7_u64)));
        let waker = Unpark::current();
        let answer = loop {
            match slot.poll(&waker) {
                Poll::Ready(answer) => break answer,
                Poll::Pending => thread::park(),
            }
        };
        match answer {
            Answer::Ran(value) => assert_eq!(value.take::<u64>().unwrap(), 7),
            other => panic!("{other:?}"),
        }
        assert!(slot.poll(&waker).is_pending(), "the answer is taken once");
        answering.join().unwrap();
    });
}
