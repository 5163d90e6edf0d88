//! `loom` models of the core's protocols, one file per protocol, run with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p zerodispatch-core --lib --release loom
//! ```
//!
//! They drive the real code: a [`ProcessorShared`](crate::processor::ProcessorShared) whose
//! gate, stop flag, thread handle, thread-locals and queue are loom's under `--cfg loom`
//! (see `sync.rs`; the queue is a model with `ArrayQueue`'s contract), and its own methods:
//! `try_push` on the producer's side, `sleep` / `may_exit` in the processor's loop, `close`
//! and `request_stop` for shutdown, `send_from` and `retry_outbox` for the outbox, `hand_in`
//! and the arrivals for registration. Only the loop around them is the model's: pop until
//! empty, exit when allowed, else sleep. Loom reports a processor parked forever as a
//! deadlock, so a lost wake-up fails a model.
//!
//! Every model's name starts with `loom_`, which is what the command above selects.

// The small mocks every model shares: a processor, a message, the processor's loop, its
// start and its shutdown, a waker that unparks a model thread.
mod mock;

// The wake protocol (`wake.rs`): a push, or a batch counted late, never meets a processor
// parked for ever.
mod wake;

// Driven processors (`processor/drive.rs`): a producer that runs the parked processor's
// turn and the processor's thread never turn at once, and lose no event.
mod drive;

// Shutdown (`gate.rs`): an event racing it is handed back or handled; `execute_on_all`
// reaches every processor or none.
mod shutdown;

// The outbox (`outbox.rs`): an event kept in it holds its entry in the target's gate.
mod outbox;

// A processor's end of life (`Runner::end_of_life`): what its clients' drops dispatch is
// run by a pool that shuts down later.
mod end_of_life;

// The register hand-off (`slots.rs`): a client is found by its first event or dropped at
// exit, once.
mod register;

// The `call` hand-off (`call.rs`), blocking and async: an answer is never lost.
mod call;

// Waiting for room (`room.rs`, `waiters.rs`): a producer or a future on a full queue is
// woken or its retry succeeds, and shutdown wakes it.
mod room;

// Packs (`pack.rs`): a batch waiting for a free pack is woken or finds one.
mod packs;

// Timers (`timers.rs`): cancel against fire, a timer scheduled to a sleeping processor,
// and the reclaim of a cancelled one.
mod timers;
