//! Shutdown (`gate.rs`): an event racing it is either handed back or handled, and
//! `execute_on_all`'s events reach every processor of a pool or none.

use loom::thread;

use super::mock::{message, one_pass, processor, shut_down, start};
use crate::processor::ProcessorShared;

#[test]
fn loom_shutdown_racing_two_dispatches_loses_no_event() {
    loom::model(|| {
        let shared = processor(0, 4);
        let processor = start(&shared, None);
        let producers: Vec<_> = (0..2)
            .map(|n| {
                let shared = shared.clone();
                thread::spawn(move || shared.try_push(message(n)).is_ok())
            })
            .collect();
        shut_down(&shared);
        let accepted = producers
            .into_iter()
            .map(|p| usize::from(p.join().unwrap()))
            .sum::<usize>();
        // Every event is either handed back (not accepted) or handled: never both, never
        // neither.
        assert_eq!(processor.join().unwrap(), accepted);
        assert!(shared.queue.is_empty());
    });
}

/// `execute_on_all`'s all or nothing, on the real `enter_all` and a push under each entry:
/// racing a shutdown that closes and stops both processors of a pool, its events are
/// accepted by both or by neither (never one), and a processor that finds it may exit has
/// popped its event first. (Each processor takes [`one_pass`].)
#[test]
fn loom_execute_on_all_reaches_every_processor_or_none_through_shutdown() {
    loom::model(|| {
        let pool = [processor(0, 1), processor(1, 1)];
        let shutdown = {
            let pool = pool.clone();
            thread::spawn(move || {
                pool.iter().for_each(|p| p.close());
                pool.iter().for_each(|p| p.request_stop());
            })
        };
        let passes: Vec<_> = pool
            .iter()
            .map(|p| {
                let p = p.clone();
                thread::spawn(move || one_pass(&p))
            })
            .collect();
        let entered = ProcessorShared::enter_all(pool.iter().map(|p| &**p))
            .map(|entries| entries.into_iter().for_each(|e| e.push_waiting(message(1))))
            .is_some();
        shutdown.join().unwrap();
        let expected = usize::from(entered);
        for (p, pass) in pool.iter().zip(passes) {
            let (popped, may_exit) = pass.join().unwrap();
            assert!(
                !may_exit || popped == expected,
                "may exit before its event was popped"
            );
            // What the pass left is still queued: accepted by both or by neither.
            assert_eq!(popped + p.queue.len(), expected, "entered: {entered}");
        }
    });
}
