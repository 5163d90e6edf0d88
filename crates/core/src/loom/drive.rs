//! Driven processors (`processor/drive.rs`): a producer that finds the processor parked
//! runs its turn; it and the processor's thread never turn at once, and every event is
//! handled once.

use std::any::Any;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use super::mock::{driven, message, shut_down, sleep, spawn_processor};
use crate::processor::{Parked, ProcessorShared};

/// The processor's state in the model: the events it handled, and a flag that catches two
/// turns at once.
struct Counted {
    shared: Arc<ProcessorShared<u64>>,
    in_turn: Arc<AtomicBool>,
    handled: usize,
}

impl Counted {
    /// One turn: pop until empty.
    fn turn(&mut self) {
        assert!(
            !self.in_turn.swap(true, Ordering::SeqCst),
            "two turns at once"
        );
        while self.shared.queue.pop().is_some() {
            self.handled += 1;
        }
        self.in_turn.store(false, Ordering::SeqCst);
    }
}

impl Parked for Counted {
    fn drive(&mut self) -> bool {
        self.turn();
        self.shared.has_work(self.handled)
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The processor thread's loop with its state lent while it sleeps, as `Runner::rest`
/// does; returns the events handled, by it and by drivers, once allowed to exit.
fn run_lending(shared: Arc<ProcessorShared<u64>>) -> usize {
    let mut state = Box::new(Counted {
        shared: shared.clone(),
        in_turn: Arc::new(AtomicBool::new(false)),
        handled: 0,
    });
    loop {
        state.turn();
        if shared.may_exit(state.handled) {
            return state.handled;
        }
        let popped = state.handled;
        shared.lend(state);
        sleep(&shared, popped);
        state = shared.take_back().downcast().expect("the model's state");
    }
}

#[test]
fn loom_a_driver_and_the_thread_turn_one_at_a_time_and_lose_no_event() {
    loom::model(|| {
        let shared = driven(4);
        let me = shared.clone();
        let processor = spawn_processor(&shared, move |_| run_lending(me));
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || assert!(shared.try_push(message(1)).is_ok()))
        };
        assert!(shared.try_push(message(2)).is_ok());
        producer.join().unwrap();
        shut_down(&shared);
        // Both handled once: by the thread or by a driver, whichever held the state.
        assert_eq!(processor.join().unwrap(), 2);
    });
}
