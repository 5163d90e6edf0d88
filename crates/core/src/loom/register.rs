//! The register hand-off (`slots.rs`), on the real `hand_in`, slot lock and arrivals.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use super::mock::{processor, shut_down, sleep, spawn_processor};
use crate::error::RegisterRefusal;
use crate::event::Item;

/// A client whose drops are counted.
struct Counted(Arc<AtomicUsize>);

impl crate::client::Client<u64> for Counted {}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A client is registered while a shutdown closes the processor, and a second thread,
/// given the key once `hand_in` returned, dispatches to it. The processor adopts the
/// client at that event (never finds it missing: the event is never stale) or, if no
/// event reached it, takes it from the arrivals at exit; a refused registration drops it
/// on the caller. Either way the client is dropped exactly once.
#[test]
fn loom_a_registered_client_is_found_by_its_first_event_or_dropped_at_exit() {
    loom::model(|| {
        let shared = processor(0, 2);
        let processor = spawn_processor(&shared, |me| {
            let (mut popped, mut adopted, mut stale) = (0, 0, 0);
            loop {
                while let Some(item) = me.queue.pop() {
                    popped += 1;
                    if let Item::Message { key, .. } = item {
                        let client = me.slots.lock().unwrap().adopt(key);
                        match client {
                            Some(client) => {
                                adopted += 1;
                                drop(client);
                            }
                            None => stale += 1,
                        }
                    }
                }
                if me.may_exit(popped) {
                    let left: Vec<_> = me.slots.lock().unwrap().take_arrivals().collect();
                    return (adopted, stale, left.len());
                }
                sleep(me, popped);
            }
        });
        let shutdown = {
            let shared = shared.clone();
            thread::spawn(move || shut_down(&shared))
        };
        let drops = Arc::new(AtomicUsize::new(0));
        let registered = shared
            .hand_in(Counted(drops.clone()))
            .map_err(|(reason, client)| {
                // Refused, the client comes back: dropped here, counted like any drop.
                drop(client);
                reason
            });
        let dispatched = registered.as_ref().ok().map(|&key| {
            let shared = shared.clone();
            thread::spawn(move || shared.try_push(Item::Message { key, message: 0 }).is_ok())
        });
        let accepted = dispatched.map(|d| d.join().unwrap());
        shutdown.join().unwrap();
        let (adopted, stale, taken_at_exit) = processor.join().unwrap();
        assert_eq!(stale, 0, "an event with the new key found no client");
        match (registered, accepted) {
            (Err(RegisterRefusal::ShutDown), None) => {
                assert_eq!((adopted, taken_at_exit), (0, 0));
            }
            (Ok(_), Some(true)) => assert_eq!((adopted, taken_at_exit), (1, 0)),
            (Ok(_), Some(false)) => assert_eq!((adopted, taken_at_exit), (0, 1)),
            other => panic!("impossible outcome {other:?}"),
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}
