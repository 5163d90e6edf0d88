//! The small mocks the models share: a processor of the real `ProcessorShared`, a message,
//! the processor's loop around the real protocol steps, its start and shutdown, and a
//! waker that unparks a model thread.

use std::task::Wake;

use loom::sync::Arc;
use loom::thread;

use crate::config::PoolConfig;
use crate::event::Item;
use crate::ids::{ClientKey, ClientType, ProcessorId};
use crate::processor::ProcessorShared;

/// Processor `index` of the queue pool, with a queue of `capacity` and no timers: each
/// would be loom state to explore.
pub(super) fn processor(index: u16, capacity: usize) -> Arc<ProcessorShared<u64>> {
    processor_of(index, PoolConfig::new(1).capacity(capacity).timers(0))
}

/// Processor 0 of a driven pool (`drive.rs`), with a queue of `capacity` and no timers.
pub(super) fn driven(capacity: usize) -> Arc<ProcessorShared<u64>> {
    processor_of(
        0,
        PoolConfig::new(1).capacity(capacity).timers(0).driven(true),
    )
}

/// A processor of queue capacity 2 with one timer.
pub(super) fn with_one_timer() -> Arc<ProcessorShared<u64>> {
    processor_of(0, PoolConfig::new(1).capacity(2).timers(1))
}

/// A processor of queue capacity 1 whose one slot is taken (by `message(0)`): its
/// processor stalled, or not yet started.
pub(super) fn full_one_slot() -> Arc<ProcessorShared<u64>> {
    let shared = processor(0, 1);
    assert!(shared.try_push(message(0)).is_ok()); // the one slot is taken
    shared
}

fn processor_of(index: u16, config: PoolConfig) -> Arc<ProcessorShared<u64>> {
    let id = ProcessorId {
        client_type: ClientType::Queue,
        index,
    };
    Arc::new(ProcessorShared::new(id, config))
}

/// The key of the client every model's messages name.
pub(super) const KEY: ClientKey = ClientKey {
    slot: 0,
    generation: 0,
};

/// Message `n` to the client at [`KEY`].
pub(super) fn message(n: u64) -> Item<u64> {
    Item::Message {
        key: KEY,
        message: n,
    }
}

/// Where the model's processor looks at the futures and producers waiting for room.
#[derive(Clone, Copy)]
pub(super) enum Looks {
    /// Once a run has emptied the queue.
    AfterRuns,
    /// After every pop as well, as the processor's drain does every
    /// `DEPTH_CHECK_INTERVAL` (64) pops within a run: here every pop, which explores every
    /// point of a run at which the look may fall.
    WithinRuns,
}

/// The processor's loop around the real protocol steps: pop until empty, wake the futures
/// waiting for room (where `looks` says); return once `until` events were handled, or when
/// allowed to exit; otherwise sleep by the wake protocol. Returns the events handled.
pub(super) fn run_processor(
    shared: &ProcessorShared<u64>,
    until: Option<usize>,
    looks: Looks,
) -> usize {
    let mut handled = 0;
    let mut waking = Vec::new();
    loop {
        while shared.queue.pop().is_some() {
            handled += 1;
            if let Looks::WithinRuns = looks {
                shared.wake_waiters(handled, &mut waking);
            }
        }
        shared.wake_waiters(handled, &mut waking);
        if until == Some(handled) || shared.may_exit(handled) {
            return handled;
        }
        sleep(shared, handled);
    }
}

/// The processor's sleep once it may not exit, having popped `popped`: told to stop but
/// not settled, it looks again after a timed park (a yield under loom), as the processor's
/// loop does; else it parks by the wake protocol.
pub(super) fn sleep(shared: &ProcessorShared<u64>, popped: usize) {
    if shared.stop_requested() {
        shared.sleep(popped, thread::yield_now, false);
    } else {
        shared.sleep(popped, thread::park, true);
    }
}

/// Starts the processor thread of `shared` running `body` and publishes its handle, as
/// `build` does before any producer can reach it.
pub(super) fn spawn_processor<T: 'static>(
    shared: &Arc<ProcessorShared<u64>>,
    body: impl FnOnce(&ProcessorShared<u64>) -> T + 'static,
) -> thread::JoinHandle<T> {
    let me = shared.clone();
    let handle = thread::spawn(move || body(&me));
    assert!(shared.thread.set(handle.thread().clone()).is_ok());
    handle
}

/// Starts the processor thread of `shared` on [`run_processor`], looking at its waiters
/// after its runs.
pub(super) fn start(
    shared: &Arc<ProcessorShared<u64>>,
    until: Option<usize>,
) -> thread::JoinHandle<usize> {
    spawn_processor(shared, move |me| run_processor(me, until, Looks::AfterRuns))
}

/// Shutdown of one processor, as `Dispatcher::shutdown` does it.
pub(super) fn shut_down(shared: &ProcessorShared<u64>) {
    shared.close();
    shared.request_stop();
}

/// One pass of a processor that is told to stop: pop until empty, then ask whether it may
/// exit. Returns what it popped and the answer. (The real loop repeats the look until it
/// may exit; a model takes one pass, since loops that wait by yielding multiply loom's
/// paths beyond what CI can explore, and one pass is where the order is decided.)
pub(super) fn one_pass(shared: &ProcessorShared<u64>) -> (usize, bool) {
    let mut popped = 0;
    while shared.queue.pop().is_some() {
        popped += 1;
    }
    (popped, shared.may_exit(popped))
}

/// A waker that unparks a model thread (the task's thread, in a real runtime).
pub(super) struct Unpark(pub(super) thread::Thread);

impl Unpark {
    /// A waker that unparks the current model thread.
    pub(super) fn current() -> std::task::Waker {
        std::task::Waker::from(std::sync::Arc::new(Unpark(thread::current())))
    }
}

impl Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}
