//! Packs (`pack.rs`): a blocking batch waiting for a free pack is woken or finds one.

use loom::thread;

use super::mock::{KEY, processor, spawn_processor};
use crate::event::{Event, Item};
use crate::pack::PACK;

/// A blocking batch of three packs into a queue whose pool has two: the third waits for a
/// free pack by the waiter protocol (register, retry through the gate, park, untimed under
/// loom) while the processor hands packs back and looks at its waiters within its run.
/// Either the retry finds a pack or the processor wakes the producer; a lost wake-up
/// leaves it parked forever, which loom reports as a deadlock.
#[test]
fn loom_a_batch_waiting_for_a_free_pack_is_woken_or_its_retry_finds_one() {
    loom::model(|| {
        let shared = processor(0, 2 * PACK);
        let processor = spawn_processor(&shared, |me| {
            let mut handled = 0;
            let mut events = 0;
            let mut waking = Vec::new();
            while handled < 3 {
                while let Some(item) = me.queue.pop() {
                    handled += 1;
                    if let Item::Pack { events: pack, .. } = item {
                        events += pack.len();
                        me.give_back_pack(pack);
                    }
                    me.wake_waiters(handled, &mut waking);
                }
                me.wake_waiters(handled, &mut waking);
                if handled < 3 {
                    me.sleep(handled, thread::park, true);
                }
            }
            events
        });
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || {
                let mut events = (0..3 * PACK as u64).map(Event::Message);
                let mut pushed = 0;
                assert!(shared.push_packed(KEY, &mut events, &mut pushed).is_ok());
                pushed
            })
        };
        assert_eq!(producer.join().unwrap(), 3 * PACK);
        assert_eq!(processor.join().unwrap(), 3 * PACK);
    });
}
