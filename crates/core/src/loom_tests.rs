//! `loom` models of the wake, shutdown and outbox protocols, run with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p zerodispatch-core --lib --release loom
//! ```
//!
//! They drive the real code: a [`ProcessorShared`] whose gate, stop flag, thread handle,
//! thread-locals and queue are loom's under `--cfg loom` (see `sync.rs`; the queue is a
//! model with `ArrayQueue`'s contract), and its own methods: `try_push` on the producer's
//! side, `sleep` / `may_exit` in the processor's loop, `close` and `stop_when_quiescent`
//! for shutdown, `send_from` and `retry_outbox` for the outbox. Only the loop around them
//! is the model's: pop until empty, exit when allowed, else sleep. Loom reports a
//! processor parked forever as a deadlock, so a lost wake-up fails a model.

use loom::sync::Arc;
use loom::thread;

use crate::client::{ClientKey, ClientType, ProcessorId};
use crate::config::PoolConfig;
use crate::event::Item;
use crate::processor::{ProcessorShared, current_outbox_len, set_current};

fn processor(index: u16, capacity: usize) -> Arc<ProcessorShared<u64>> {
    let id = ProcessorId {
        client_type: ClientType::Queue,
        index,
    };
    Arc::new(ProcessorShared::new(
        id,
        PoolConfig::new(1).capacity(capacity),
    ))
}

fn message(n: u64) -> Item<u64> {
    Item::Message {
        key: ClientKey {
            slot: 0,
            generation: 0,
        },
        message: n,
    }
}

/// The processor's loop around the real protocol steps: pop until empty; return once
/// `until` events were handled, or when allowed to exit; otherwise sleep by the wake
/// protocol. Returns the events handled.
fn run_processor(shared: &ProcessorShared<u64>, until: Option<usize>) -> usize {
    let mut handled = 0;
    loop {
        while shared.queue.pop().is_some() {
            handled += 1;
        }
        if until == Some(handled) || shared.may_exit() {
            return handled;
        }
        shared.sleep(thread::park, true);
    }
}

/// Starts the processor thread of `shared` and publishes its handle, as `build` does
/// before any producer can reach it.
fn start(shared: &Arc<ProcessorShared<u64>>, until: Option<usize>) -> thread::JoinHandle<usize> {
    let me = shared.clone();
    let handle = thread::spawn(move || run_processor(&me, until));
    assert!(shared.thread.set(handle.thread().clone()).is_ok());
    handle
}

/// Shutdown of one processor, as `Dispatcher::shutdown` does it.
fn shut_down(shared: &ProcessorShared<u64>) {
    shared.close();
    shared.stop_when_quiescent();
}

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

/// The outbox's part of shutdown (`outbox.rs`): processor `X` dispatches to `T`, whose
/// one-slot queue is full, so the event waits in `X`'s outbox holding its entry in `T`'s
/// gate; `X` retries until it goes through, while `T` pops its one event and a shutdown
/// closes `T` and checks for quiescence. Whenever shutdown finds `T`'s gate empty, the
/// kept event must already be in `T`'s queue, where `T` will drain it before it exits: an
/// accepted event is never left behind.
///
/// (Shutdown's real wait is a loop around that check, and `T`'s drain a loop of pops: the
/// model takes one turn of each, since loops that wait by yielding multiply loom's paths
/// beyond what CI can explore, and one turn is where the order is decided.)
#[test]
fn loom_an_outboxed_event_holds_its_gate_through_shutdown() {
    loom::model(|| {
        let target = processor(0, 1);
        assert!(target.try_push(message(0)).is_ok()); // the one slot is taken
        // This thread plays `X`: its dispatch finds the queue full and keeps the event.
        let own = processor(1, 1);
        set_current(0, own.id);
        assert!(own.send_from(&target, message(1), true).is_ok());
        assert_eq!(current_outbox_len(), 1);
        let drain = {
            let target = target.clone();
            thread::spawn(move || assert!(target.queue.pop().is_some()))
        };
        let shutdown = {
            let target = target.clone();
            thread::spawn(move || {
                target.close();
                if target.gate_is_quiescent() {
                    assert_eq!(target.queue.len(), 1, "quiescent before the kept push");
                }
            })
        };
        while own.retry_outbox(|_| Some(&*target)) == 0 {
            thread::yield_now();
        }
        drain.join().unwrap();
        shutdown.join().unwrap();
        assert_eq!(current_outbox_len(), 0);
        assert!(target.gate_is_quiescent());
    });
}
