//! `loom` models of the wake protocol and of shutdown racing a dispatch, run with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p zerodispatch-core --lib --release loom
//! ```
//!
//! They drive the real [`Gate`] (whose atomics become loom's under `--cfg loom`) with
//! loom's threads and park/unpark. The queue is modelled by its length in one atomic:
//! push is a read-modify-write (crossbeam's `ArrayQueue` claims a slot with a
//! compare-and-swap on its tail), the emptiness check a load. Loom reports a processor
//! parked forever as a deadlock, so a lost wake-up fails the model.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

use crate::gate::Gate;

/// A processor's shared state in the model.
#[derive(Default)]
struct Model {
    queue_len: AtomicUsize,
    gate: Gate,
    stop: AtomicBool,
}

impl Model {
    fn try_pop(&self) -> bool {
        let mut len = self.queue_len.load(Ordering::Acquire);
        while len > 0 {
            match self
                .queue_len
                .compare_exchange(len, len - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => len = now,
            }
        }
        false
    }

    fn has_work(&self) -> bool {
        self.queue_len.load(Ordering::Acquire) != 0 || self.stop.load(Ordering::Acquire)
    }

    /// The producer's side of `ProcessorShared::try_push`: gate, push, gate exit, notify.
    fn dispatch(&self, processor: &thread::Thread) -> bool {
        if !self.gate.enter() {
            return false;
        }
        self.queue_len.fetch_add(1, Ordering::AcqRel);
        if self.gate.leave() {
            processor.unpark();
        }
        true
    }

    /// The processor's loop: drain, stop if told to and empty, else sleep unless work.
    /// Returns the events it processed.
    fn processor_loop(&self, until: Option<usize>) -> usize {
        let mut processed = 0;
        loop {
            while self.try_pop() {
                processed += 1;
            }
            if until == Some(processed) {
                return processed;
            }
            if self.stop.load(Ordering::Acquire) && self.queue_len.load(Ordering::Acquire) == 0 {
                return processed;
            }
            self.gate.sleep_unless(|| self.has_work(), thread::park);
        }
    }
}

#[test]
fn loom_wake_protocol_loses_no_wakeup() {
    loom::model(|| {
        let model = Arc::new(Model::default());
        let processor = {
            let model = model.clone();
            thread::spawn(move || model.processor_loop(Some(2)))
        };
        let target = processor.thread().clone();
        let producer = {
            let (model, target) = (model.clone(), target.clone());
            thread::spawn(move || assert!(model.dispatch(&target)))
        };
        assert!(model.dispatch(&target));
        producer.join().unwrap();
        // Both events are processed: had a wake-up been lost, the processor would be
        // parked forever and loom would report a deadlock here.
        assert_eq!(processor.join().unwrap(), 2);
    });
}

#[test]
fn loom_shutdown_racing_a_dispatch_loses_no_event() {
    loom::model(|| {
        let model = Arc::new(Model::default());
        let processor = {
            let model = model.clone();
            thread::spawn(move || model.processor_loop(None))
        };
        let target = processor.thread().clone();
        let producer = {
            let (model, target) = (model.clone(), target.clone());
            thread::spawn(move || model.dispatch(&target))
        };
        // Shutdown, as `Dispatcher::shutdown` does it for one processor.
        assert!(model.gate.close());
        while !model.gate.is_quiescent() {
            thread::yield_now();
        }
        model.stop.store(true, Ordering::Release);
        target.unpark();

        let accepted = producer.join().unwrap();
        let processed = processor.join().unwrap();
        // Every event is either handed back (not accepted) or processed: never both, never
        // neither.
        assert_eq!(processed, usize::from(accepted));
        assert_eq!(model.queue_len.load(Ordering::SeqCst), 0);
    });
}

/// The outbox's part of shutdown (`outbox.rs`): a processor that found its target's queue
/// full keeps the event with its gate entry still held, and pushes it later; shutdown,
/// closing the target's gate meanwhile, must wait for that push, so the target runs the
/// event before it exits. A second, plain producer races the same shutdown.
#[test]
fn loom_an_outboxed_event_holds_its_gate_through_shutdown() {
    loom::model(|| {
        let model = Arc::new(Model::default());
        let target = {
            let model = model.clone();
            thread::spawn(move || model.processor_loop(None))
        };
        let target_thread = target.thread().clone();
        // The sending processor: enters, finds the queue "full" (keeps the entry), and
        // retries on its next loop turn: push, then leave on the event's behalf.
        let sender = {
            let (model, target_thread) = (model.clone(), target_thread.clone());
            thread::spawn(move || {
                if !model.gate.enter() {
                    return false;
                }
                thread::yield_now(); // the retry comes at a later loop turn
                model.queue_len.fetch_add(1, Ordering::AcqRel);
                if model.gate.leave() {
                    target_thread.unpark();
                }
                true
            })
        };
        let producer = {
            let (model, target_thread) = (model.clone(), target_thread.clone());
            thread::spawn(move || model.dispatch(&target_thread))
        };
        assert!(model.gate.close());
        while !model.gate.is_quiescent() {
            thread::yield_now();
        }
        model.stop.store(true, Ordering::Release);
        target_thread.unpark();

        let accepted = usize::from(sender.join().unwrap()) + usize::from(producer.join().unwrap());
        assert_eq!(target.join().unwrap(), accepted);
        assert_eq!(model.queue_len.load(Ordering::SeqCst), 0);
    });
}
