//! The async door: dispatches (and calls, [`CallFuture`]) that wait for room in a full
//! queue as futures, with a [`Waker`], for producers that run on an async runtime (no
//! spinning, no blocked runtime thread). Runtime-agnostic: only `std::task`. The waiter protocol, and why no wake-up is
//! lost, are in `waiters.rs`.
//!
//! # Cancel safety
//!
//! A future owns its event until a push of it succeeds. Dropped before it resolved, it
//! enqueues nothing later and loses nothing that was enqueued: the event it still holds (if
//! any) is dropped with it, and [`DispatchFuture::cancel`] hands that event back instead.
//! A batch future enqueues its events in order; the events it did not take stay in the
//! caller's iterator, and [`DispatchBatchFuture::cancel`] says how many were enqueued and
//! hands back the one it held.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::DispatcherHandle;
use super::call::{answered, call_task};
use crate::call::{self, CallSlot};
use crate::error::SyncError;
use crate::error::{BatchError, DispatchError};
use crate::event::{Event, EventFor, Item};
use crate::ids::{ClientHandle, ProcessorId};
use crate::processor::{Door, ProcessorShared};
use crate::waiters::Registration;

/// The future of [`DispatcherHandle::dispatch_async`]: resolves once the event is
/// enqueued, or with the event handed back.
///
/// Cancel-safe: dropped before it resolved, it enqueues nothing later; the event it holds
/// is dropped with it, or handed back by [`cancel`](Self::cancel). It needs no pinning
/// (it is `Unpin`), so `&mut future` can be polled in a `select!` and cancelled after.
#[must_use = "a future does nothing unless polled"]
pub struct DispatchFuture<'a, M: Send + 'static> {
    handle: &'a DispatcherHandle<M>,
    to: ClientHandle,
    /// The event, until a push of it succeeds or it is handed back.
    item: Option<Item<M>>,
    /// Where the waker sits while the future waits for room.
    registration: Option<Registration>,
}

impl<'a, M: Send + 'static> DispatchFuture<'a, M> {
    pub(crate) fn new(handle: &'a DispatcherHandle<M>, to: ClientHandle, event: Event<M>) -> Self {
        Self {
            handle,
            to,
            item: Some(Item::new(to.key, event)),
            registration: None,
        }
    }

    /// Gives up: the event back if it was not enqueued, `None` if it was (or the future
    /// already resolved, handing it back in its error). Nothing is enqueued after this.
    pub fn cancel(mut self) -> Option<Event<M>> {
        self.item.take().map(Item::into_event)
    }
}

impl<M: Send + 'static> Future for DispatchFuture<'_, M> {
    type Output = Result<(), DispatchError<Event<M>>>;

    /// # Panics
    ///
    /// If polled again after it resolved (the contract of [`Future`]).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let item = this
            .item
            .take()
            .expect("DispatchFuture polled after it resolved");
        let done = match route(this.handle, this.to) {
            Route::Nowhere => Err(DispatchError::NoSuchProcessor(item)),
            Route::FromProcessor(own, target) => own.send_from(target, item, true),
            // A stepped dispatcher's queue is emptied by its test alone: not waited for.
            Route::Door(target) if this.handle.shared.stepped => target.try_push(item),
            Route::Door(target) => {
                match target.poll_push(item, cx.waker(), &mut this.registration, |item| {
                    target.try_push(item)
                }) {
                    Door::Done(done) => done,
                    Door::Wait(item) => {
                        this.item = Some(item);
                        return Poll::Pending;
                    }
                }
            }
        };
        Poll::Ready(done.map_err(|e| e.map(Item::into_event)))
    }
}

impl<M: Send + 'static> Drop for DispatchFuture<'_, M> {
    fn drop(&mut self) {
        withdraw(self.handle, self.to, &mut self.registration);
    }
}

impl<M: Send + 'static> fmt::Debug for DispatchFuture<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatchFuture")
            .field("to", &self.to)
            .field("holds_event", &self.item.is_some())
            .field("waiting", &self.registration.is_some())
            .finish()
    }
}

/// The future of [`DispatcherHandle::dispatch_batch_async`]: enqueues every event of its
/// iterator in order, waiting for room as needed, and resolves with how many it enqueued.
///
/// Cancel-safe: dropped before it resolved, it enqueues nothing later. The events it
/// enqueued stay enqueued, those it did not take stay in the iterator, and the one it held
/// (taken out, waiting for room) is dropped with it, or handed back by
/// [`cancel`](Self::cancel). `Unpin`, like [`DispatchFuture`].
#[must_use = "a future does nothing unless polled"]
pub struct DispatchBatchFuture<'a, M: Send + 'static, I> {
    handle: &'a DispatcherHandle<M>,
    to: ClientHandle,
    events: &'a mut I,
    /// The event taken from `events` whose push found the queue full.
    held: Option<Item<M>>,
    enqueued: usize,
    registration: Option<Registration>,
}

impl<'a, M: Send + 'static, I: Iterator<Item = Event<M>>> DispatchBatchFuture<'a, M, I> {
    pub(crate) fn new(
        handle: &'a DispatcherHandle<M>,
        to: ClientHandle,
        events: &'a mut I,
    ) -> Self {
        Self {
            handle,
            to,
            events,
            held: None,
            enqueued: 0,
            registration: None,
        }
    }

    /// How many events are enqueued so far.
    #[must_use]
    pub fn enqueued(&self) -> usize {
        self.enqueued
    }

    /// Gives up: how many events were enqueued, and the event it held (taken from the
    /// iterator, not enqueued), if any. The events not taken stay in the iterator. Nothing
    /// is enqueued after this.
    pub fn cancel(mut self) -> (usize, Option<Event<M>>) {
        (self.enqueued, self.held.take().map(Item::into_event))
    }
}

impl<M: Send + 'static, I: Iterator<Item = Event<M>>> Future for DispatchBatchFuture<'_, M, I> {
    type Output = Result<usize, BatchError<Event<M>>>;

    /// # Panics
    ///
    /// If polled again after it resolved (the contract of [`Future`]).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let key = this.to.key;
        let first = match this.held.take() {
            Some(item) => item,
            None => match this.events.next() {
                Some(event) => Item::new(key, event),
                None => return Poll::Ready(Ok(this.enqueued)),
            },
        };
        let enqueued = &mut this.enqueued;
        let events = &mut *this.events;
        let done = match route(this.handle, this.to) {
            Route::Nowhere => Err(DispatchError::NoSuchProcessor(first)),
            Route::FromProcessor(own, target) => {
                let mut items =
                    std::iter::once(first).chain(events.map(|event| Item::new(key, event)));
                own.send_batch_from(target, &mut items, enqueued, true)
            }
            Route::Door(target) => {
                let mut attempt = |item| {
                    let mut items =
                        std::iter::once(item).chain(events.by_ref().map(|e| Item::new(key, e)));
                    target.try_push_batch(&mut items, enqueued)
                };
                // A stepped dispatcher's queue is emptied by its test alone: not waited for.
                let door = if this.handle.shared.stepped {
                    Door::Done(attempt(first))
                } else {
                    target.poll_push(first, cx.waker(), &mut this.registration, attempt)
                };
                match door {
                    Door::Done(done) => done,
                    Door::Wait(item) => {
                        this.held = Some(item);
                        return Poll::Pending;
                    }
                }
            }
        };
        Poll::Ready(match done {
            Ok(()) => Ok(this.enqueued),
            Err(e) => Err(BatchError {
                enqueued: this.enqueued,
                error: e.map(Item::into_event),
            }),
        })
    }
}

impl<M: Send + 'static, I> Drop for DispatchBatchFuture<'_, M, I> {
    fn drop(&mut self) {
        withdraw(self.handle, self.to, &mut self.registration);
    }
}

impl<M: Send + 'static, I> fmt::Debug for DispatchBatchFuture<'_, M, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatchBatchFuture")
            .field("to", &self.to)
            .field("enqueued", &self.enqueued)
            .field("holds_event", &self.held.is_some())
            .field("waiting", &self.registration.is_some())
            .finish()
    }
}

/// The future of [`DispatcherHandle::call_async`]: sends a closure to a processor,
/// waiting for room as [`DispatchFuture`] does, then waits for the closure's result.
///
/// Cancel-safe: dropped before the closure was enqueued, the closure is dropped unrun;
/// dropped after, it runs and its result is dropped. `Unpin`.
#[must_use = "a future does nothing unless polled"]
pub struct CallFuture<'a, M: Send + 'static, R> {
    handle: &'a DispatcherHandle<M>,
    target: ProcessorId,
    /// The call's task, until a push of it succeeds.
    item: Option<Item<M>>,
    /// Where the waker sits while the future waits for room.
    registration: Option<Registration>,
    /// Where the answer comes; `None` once taken (or for a call refused at once).
    slot: Option<Arc<CallSlot>>,
    /// A refusal decided before anything was sent.
    refused: Option<SyncError>,
    result: PhantomData<fn() -> R>,
}

impl<'a, M: Send + 'static, R: 'static> CallFuture<'a, M, R> {
    pub(crate) fn new(
        handle: &'a DispatcherHandle<M>,
        target: ProcessorId,
        item: Item<M>,
        slot: Arc<CallSlot>,
    ) -> Self {
        Self {
            handle,
            target,
            item: Some(item),
            registration: None,
            slot: Some(slot),
            refused: None,
            result: PhantomData,
        }
    }

    pub(crate) fn refused(
        handle: &'a DispatcherHandle<M>,
        target: ProcessorId,
        error: SyncError,
    ) -> Self {
        Self {
            handle,
            target,
            item: None,
            registration: None,
            slot: None,
            refused: Some(error),
            result: PhantomData,
        }
    }
}

impl<M: Send + 'static, R: 'static> Future for CallFuture<'_, M, R> {
    type Output = Result<R, SyncError>;

    /// # Panics
    ///
    /// If polled again after it resolved (the contract of [`Future`]).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(error) = this.refused.take() {
            return Poll::Ready(Err(error));
        }
        let stepped = this.handle.shared.stepped;
        if let Some(item) = this.item.take() {
            let processor = this
                .handle
                .processor(this.target)
                .expect("checked when the future was made");
            // A stepped dispatcher runs its processors here: room for the call first, then
            // the call itself, so that the answer is there below. Nothing waits.
            let door = if stepped {
                Door::Done(this.handle.push_stepped(processor, item))
            } else {
                processor.poll_push(item, cx.waker(), &mut this.registration, |item| {
                    processor.try_push(item)
                })
            };
            if stepped {
                this.handle.run_stepped();
            }
            match door {
                Door::Wait(item) => {
                    this.item = Some(item);
                    return Poll::Pending;
                }
                Door::Done(Ok(())) => {}
                Door::Done(Err(refused)) => {
                    // Shut down. The task goes with the error, and its request answers
                    // `Dropped` as it goes: the slot is ready for another call once that is
                    // taken.
                    drop(refused);
                    if let Some(slot) = this.slot.take() {
                        let _ = slot.poll(cx.waker());
                        call::recycle(slot);
                    }
                    return Poll::Ready(Err(SyncError::ShutDown));
                }
            }
        }
        let slot = this
            .slot
            .as_ref()
            .expect("CallFuture polled after it resolved");
        match slot.poll(cx.waker()) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(answer) => {
                if let Some(slot) = this.slot.take() {
                    call::recycle(slot);
                }
                Poll::Ready(answered(answer, this.target))
            }
        }
    }
}

impl<M: Send + 'static, R> Drop for CallFuture<'_, M, R> {
    fn drop(&mut self) {
        if self.registration.is_some()
            && let Some(processor) = self.handle.processor(self.target)
        {
            processor.withdraw(&mut self.registration);
        }
        // A slot still held belongs to a call not answered yet: its request answers into it
        // later, so it is not recycled, only released.
    }
}

impl<M: Send + 'static, R> fmt::Debug for CallFuture<'_, M, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallFuture")
            .field("target", &self.target)
            .field("sent", &self.item.is_none())
            .field("waiting", &self.registration.is_some())
            .finish_non_exhaustive()
    }
}

/// How a poll reaches its target.
enum Route<'a, M> {
    /// The handle names no processor of this dispatcher.
    Nowhere,
    /// On one of the dispatcher's processor threads: by the outbox protocol, never waiting,
    /// as the blocking dispatch does there.
    FromProcessor(&'a ProcessorShared<M>, &'a ProcessorShared<M>),
    /// Through the door: push, or wait for room with the waker.
    Door(&'a ProcessorShared<M>),
}

fn route<M: Send + 'static>(handle: &DispatcherHandle<M>, to: ClientHandle) -> Route<'_, M> {
    match (handle.target(to), handle.current()) {
        (None, _) => Route::Nowhere,
        (Some(target), Some(own)) => Route::FromProcessor(own, target),
        (Some(target), None) => Route::Door(target),
    }
}

/// Withdraws a dropped future's registration, if it has one.
fn withdraw<M: Send + 'static>(
    handle: &DispatcherHandle<M>,
    to: ClientHandle,
    registration: &mut Option<Registration>,
) {
    if registration.is_none() {
        return;
    }
    if let Some(target) = handle.target(to) {
        target.withdraw(registration);
    }
}

/// Never pinned in place: no field refers to another.
impl<M: Send + 'static> Unpin for DispatchFuture<'_, M> {}
impl<M: Send + 'static, I> Unpin for DispatchBatchFuture<'_, M, I> {}
impl<M: Send + 'static, R> Unpin for CallFuture<'_, M, R> {}

impl<M: Send + 'static> DispatcherHandle<M> {
    /// Enqueues `event` for the client `to` from async code: the future resolves at once
    /// when the queue has room, and otherwise waits for room with its task's waker (no
    /// spinning, no blocked runtime thread), woken by the processor once a quarter of the
    /// queue is free. Works on any runtime (only `std::task`); allocates nothing per event
    /// (a waker clone, once a registry has grown to the number of futures waiting at once).
    ///
    /// On a processor thread of this dispatcher it never waits, as
    /// [`dispatch`](Self::dispatch) does there: a full queue sends the event through the
    /// processor's outbox, and the future resolves at its first poll.
    ///
    /// Cancel-safe: a future dropped before it resolved enqueues nothing later, and what it
    /// enqueued stays enqueued; the event it still holds is dropped with it, or handed back
    /// by [`DispatchFuture::cancel`]. The protocol is in `waiters.rs`.
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// # struct Sink;
    /// # impl Client<u64> for Sink {
    /// #     fn on_event(&mut self, _: ClientEvent<u64>, _: &mut Context<u64>) {}
    /// # }
    /// let d = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let sink = d.register(ClientType::Queue, Sink, Placement::LeastLoaded)?;
    /// let handle = d.handle();
    /// let future = handle.dispatch_async(sink, Event::Message(7));
    /// // Poll it on any runtime: `future.await?` in an async fn.
    /// # drop(future);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The future's output hands the event back in [`DispatchError::ShutDown`] (shutdown
    /// wakes every waiting future), [`DispatchError::NoSuchProcessor`] for a handle of
    /// another dispatcher, or, on a processor thread whose outbox is full,
    /// [`DispatchError::Full`].
    pub fn dispatch_async<C>(
        &self,
        to: ClientHandle<C>,
        event: impl EventFor<M, C>,
    ) -> DispatchFuture<'_, M> {
        DispatchFuture::new(self, to.erase(), event.into_event())
    }

    /// Enqueues every event of `events` for the client `to`, in order, from async code,
    /// waiting for room like [`dispatch_async`](Self::dispatch_async), with one pass
    /// through the gate per run of events that fits. The future resolves with how many were
    /// enqueued. Allocates nothing per event. The iterator runs inside the gate: it must
    /// not wait for the processor (see [`dispatch_batch`](Self::dispatch_batch)).
    ///
    /// Cancel-safe: dropped before it resolved, it enqueues nothing later; the events it
    /// did not take stay in `events`, and the one it held is dropped with it or handed back
    /// by [`DispatchBatchFuture::cancel`].
    ///
    /// # Errors
    ///
    /// As [`dispatch_async`](Self::dispatch_async), in a [`BatchError`] that counts the
    /// events enqueued before it; the events after the one handed back stay in `events`.
    pub fn dispatch_batch_async<'a, C, I: Iterator<Item = Event<M>>>(
        &'a self,
        to: ClientHandle<C>,
        events: &'a mut I,
    ) -> DispatchBatchFuture<'a, M, I> {
        DispatchBatchFuture::new(self, to.erase(), events)
    }

    /// As [`call`](Self::call), for a task on an async runtime: the future sends `f` to
    /// the processor (waiting for room, if its queue is full, as
    /// [`dispatch_async`](Self::dispatch_async) does) and resolves with `f`'s result, never
    /// blocking its thread. Same limits on `f` and `R`; allocates nothing once the thread
    /// polling it has a free answer slot in its pool (one per call it has had under way at
    /// once: the protocol is in `call.rs`).
    ///
    /// Cancel-safe: dropped before `f` was enqueued, `f` is dropped unrun; dropped after,
    /// `f` runs and its result is dropped.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    pub fn call_async<F, R>(&self, target: impl Into<ProcessorId>, f: F) -> CallFuture<'_, M, R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let id = target.into();
        if self.processor(id).is_none() {
            return CallFuture::refused(self, id, SyncError::NoSuchProcessor(id));
        }
        if let Some(own) = self.current() {
            return CallFuture::refused(self, id, SyncError::OnProcessorThread(own.id));
        }
        let (slot, request) = call::task_request();
        CallFuture::new(
            self,
            id,
            Item::DispatcherCallback(call_task(f, request)),
            slot,
        )
    }
}
