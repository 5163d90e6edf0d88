//! The wake protocol (`wake.rs`): a producer that pushes, or a batch that counts its
//! events late, never leaves the processor parked for ever.

use loom::thread;

use super::mock::{message, processor, start};

#[test]
fn loom_wake_protocol_loses_no_wakeup() {
    loom::model(|| {
        let shared = processor(0, 4);
        let processor = start(&shared, Some(2));
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || assert!(shared.try_push(message(1)).is_ok()))
        };
        assert!(shared.try_push(message(2)).is_ok());
        producer.join().unwrap();
        // Both events are handled: had a wake-up been lost, the processor would be parked
        // forever and loom would report a deadlock here.
        assert_eq!(processor.join().unwrap(), 2);
    });
}

/// A batch enters once and adds its other entries after its pushes: the processor may pop
/// the first event, find the count matching what it popped, and park while the second
/// event is still to come. The addition then reads `SLEEPING` and the producer wakes it.
#[test]
fn loom_a_batch_that_counts_its_events_late_loses_no_wakeup() {
    loom::model(|| {
        let shared = processor(0, 4);
        let processor = start(&shared, Some(2));
        let mut batch = [message(1), message(2)].into_iter();
        let mut pushed = 0;
        assert!(shared.try_push_batch(&mut batch, &mut pushed).is_ok());
        assert_eq!(pushed, 2);
        assert_eq!(processor.join().unwrap(), 2);
    });
}
