//! The executor: BlazingMQ's post / dispatch pair for running closures on one processor.

use zerodispatch_callback::{Callback, IntoCallback};

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
    /// Always enqueues `work`, to run as a dispatcher callback (after the processor's
    /// flush). `work` is a closure or a [`Callback`], as
    /// [`DispatcherHandle::execute`] takes it ([`IntoCallback`]).
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let executor = d.executor(d.processors(ClientType::Queue)[0]);
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// executor.post(move || tx.send(std::thread::current().name().map(String::from)).unwrap())?;
    /// assert_eq!(rx.recv()?.as_deref(), Some("zd-queue-0"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::execute`]: the work comes back as a [`Callback`].
    #[track_caller]
    pub fn post<W: IntoCallback>(&self, work: W) -> Result<(), DispatchError<Callback>> {
        let () = W::CHECK;
        self.dispatcher.execute_as(
            self.processor,
            work.into_callback(),
            ("Executor::post", "call_async"),
        )
    }

    /// Runs `work` at once if called on the processor's own thread; enqueues it otherwise,
    /// as [`post`](Self::post) does.
    ///
    /// # Errors
    ///
    /// As [`post`](Self::post).
    #[track_caller]
    pub fn dispatch<W: IntoCallback>(&self, work: W) -> Result<(), DispatchError<Callback>> {
        let () = W::CHECK;
        let callback = work.into_callback();
        if current_processor() == Some((self.dispatcher.id(), self.processor)) {
            callback.call();
            Ok(())
        } else {
            self.dispatcher.execute_as(
                self.processor,
                callback,
                ("Executor::dispatch", "call_async"),
            )
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
