//! The executor: BlazingMQ's post / dispatch pair for running closures on one processor.

use zerodispatch_callback::Callback;

use crate::error::DispatchError;
use crate::handle::DispatcherHandle;
use crate::ids::ProcessorId;
use crate::processor::current_processor;

/// Runs closures on one processor: BlazingMQ's executor.
#[derive(Clone, Debug)]
pub struct Executor<M> {
    pub(crate) dispatcher: DispatcherHandle<M>,
    pub(crate) processor: ProcessorId,
}

impl<M: Send + 'static> Executor<M> {
    /// Always enqueues `f`, to run as a dispatcher callback (after the processor's flush).
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::execute`].
    #[track_caller]
    pub fn post(&self, f: Callback) -> Result<(), DispatchError<Callback>> {
        self.dispatcher
            .execute_as(self.processor, f, ("Executor::post", "call_async"))
    }

    /// Runs `f` at once if called on the processor's own thread; enqueues it otherwise.
    ///
    /// # Errors
    ///
    /// As [`post`](Self::post).
    #[track_caller]
    pub fn dispatch(&self, f: Callback) -> Result<(), DispatchError<Callback>> {
        if current_processor() == Some((self.dispatcher.id(), self.processor)) {
            f.call();
            Ok(())
        } else {
            self.dispatcher
                .execute_as(self.processor, f, ("Executor::dispatch", "call_async"))
        }
    }

    /// The processor this executor runs on.
    #[must_use]
    pub fn processor(&self) -> ProcessorId {
        self.processor
    }
}

impl<M: Send + 'static> DispatcherHandle<M> {
    /// An executor running closures on `processor`.
    #[must_use]
    pub fn executor(&self, processor: impl Into<ProcessorId>) -> Executor<M> {
        Executor {
            dispatcher: self.clone(),
            processor: processor.into(),
        }
    }
}
