//! A processor's end of life (`Runner::end_of_life`): what its clients' drops dispatch,
//! after its loop could have ended, is run by a pool that shuts down later.

use loom::thread;

use super::mock::{full_one_slot, message, processor, shut_down, start};
use crate::processor::{current_outbox_len, set_current};

/// The client's drop, after `X`'s loop could have ended, dispatches to `T`, a processor of
/// a pool that shuts down later, whose queue is full; the event waits in `X`'s outbox,
/// holding its entry in `T`'s gate, and `X` keeps handing its outbox on before it exits.
/// `T` drains, and may park, meanwhile; only once `X` has exited is `T`'s pool shut down.
/// The kept event must reach `T` (no lost wake-up: loom reports a `T` parked for ever) and
/// be popped before `T` exits.
#[test]
fn loom_an_event_dispatched_at_a_processors_end_of_life_is_run_by_a_later_pool() {
    loom::model(|| {
        let target = full_one_slot();
        let t = start(&target, None);
        // This thread plays `X` at its end of life: its client's drop dispatches.
        let own = processor(1, 1);
        set_current(0, own.id);
        assert!(own.send_from(&target, message(1), true).is_ok());
        // `X` turns until its outbox is empty (a timed park between turns: a yield here).
        // `T` may have popped its first event already, and the dispatch gone straight into
        // its queue: then the outbox is empty from the start.
        while current_outbox_len() > 0 {
            if own.retry_outbox(|_| Some(&*target)) == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(current_outbox_len(), 0);
        // `X` has exited: the shutdown goes on to `T`'s pool.
        shut_down(&target);
        assert_eq!(t.join().unwrap(), 2, "T exited without the kept event");
    });
}
