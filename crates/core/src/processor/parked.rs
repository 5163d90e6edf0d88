//! What a parked processor lends a driver (`drive.rs`): its state behind one trait, so
//! that the processor's shared half can hold it without knowing the message type's runner.

use std::any::Any;

/// A processor's state while its thread is parked, as a driver turns it.
pub(crate) trait Parked: Send {
    /// Runs turns on the calling thread, playing the processor, while events are queued
    /// and at most `max_batch` of them. Returns whether the processor's thread must wake:
    /// the turns left work, retries, an earlier timer or a stop.
    fn drive(&mut self) -> bool;

    /// The state, for its thread to take back.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}
