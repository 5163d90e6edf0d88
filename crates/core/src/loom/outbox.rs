//! The outbox (`outbox.rs`): an event kept in a processor's outbox, because its target's
//! queue was full, holds its entry in the target's gate through the target's shutdown.

use loom::thread;

use super::mock::{full_one_slot, message, one_pass, processor, shut_down};
use crate::processor::{current_outbox_len, set_current};

/// The outbox's part of shutdown: processor `X` dispatches to `T`, whose one-slot queue is
/// full, so the event waits in `X`'s outbox holding its entry in `T`'s gate; `X` retries
/// until it goes through, while `T` drains and a shutdown closes `T` and tells it to stop.
/// Whenever `T` finds it may exit, it must have popped the kept event: an accepted event
/// is never left behind. (`T` takes [`one_pass`].)
#[test]
fn loom_an_outboxed_event_holds_its_gate_through_shutdown() {
    loom::model(|| {
        let target = full_one_slot();
        // This thread plays `X`: its dispatch finds the queue full and keeps the event.
        let own = processor(1, 1);
        set_current(0, own.id);
        assert!(own.send_from(&target, message(1), true).is_ok());
        assert_eq!(current_outbox_len(), 1);
        let shutdown = {
            let target = target.clone();
            thread::spawn(move || shut_down(&target))
        };
        let one_pass = {
            let target = target.clone();
            thread::spawn(move || one_pass(&target))
        };
        while own.retry_outbox(|_| Some(&*target)) == 0 {
            thread::yield_now();
        }
        shutdown.join().unwrap();
        let (popped, may_exit) = one_pass.join().unwrap();
        if may_exit {
            assert_eq!(popped, 2, "may exit before the kept event was popped");
        }
        // What the pass left is still queued: nothing is lost either way.
        assert_eq!(popped + target.queue.len(), 2);
    });
}
