//! Work run on a processor as a dispatcher callback: `execute`, `call` (its answer
//! protocol in `call.rs` at the crate's root), `synchronize`, `execute_on_all`.
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use zerodispatch_callback::{Callback, InlineValue, IntoCallback};

use crate::call::{self, Answer};
use crate::error::{DispatchError, ExecuteOnAllError, ExecuteOnAllRefusal, SyncError};
use crate::event::Item;
use crate::ids::{ClientType, ProcessorId};
use crate::processor::ProcessorShared;
use crate::room::Wait;

use super::DispatcherHandle;
use super::send::BlockingCall;

/// The dispatcher callback of a call: runs `f` and answers `request` with its result, or
/// with its panic (answered first, then resumed for the processor to catch and count).
pub(super) fn call_task<F, R>(f: F, request: call::Request) -> Callback
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    Callback::new(move || match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => request.ran(InlineValue::new(value)),
        Err(panic) => {
            request.panicked();
            resume_unwind(panic);
        }
    })
}

/// A call's result from its answer.
pub(crate) fn answered<R: 'static>(answer: Answer, id: ProcessorId) -> Result<R, SyncError> {
    match answer {
        Answer::Ran(value) => Ok(value
            .take::<R>()
            .unwrap_or_else(|_| unreachable!("a call's answer is of its result type"))),
        Answer::Panicked => Err(SyncError::Panicked(id)),
        Answer::Dropped | Answer::Waiting => Err(SyncError::Dropped(id)),
    }
}

impl<M: Send + 'static> DispatcherHandle<M> {
    /// Runs `work` on `processor` as a dispatcher callback (after flushing its clients),
    /// waiting while its queue is full, like [`dispatch`](Self::dispatch).
    ///
    /// `work` is a closure, stored inline as by [`Callback::new`] (a compile error if it
    /// does not fit the callback's space, [at `cargo build`, not at `cargo
    /// check`](zerodispatch_callback#when-the-size-check-runs)), or a [`Callback`] made
    /// already (a spilled one, one handed back by an earlier error), passed on as it is:
    /// every call that takes work takes [`IntoCallback`]. Never allocates (but once per
    /// thread, as [`dispatch`](Self::dispatch) says).
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let queue = d.processors(ClientType::Queue)[0];
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let again = tx.clone();
    /// d.execute(queue, move || tx.send("a closure").unwrap())?;
    /// d.execute(queue, Callback::new(move || again.send("a callback").unwrap()))?;
    /// assert_eq!((rx.recv()?, rx.recv()?), ("a closure", "a callback"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`dispatch`](Self::dispatch), with the work handed back as a [`Callback`] (a
    /// closure converted, a callback as it was given), to retry with the same call.
    #[track_caller]
    pub fn execute<W: IntoCallback>(
        &self,
        processor: impl Into<ProcessorId>,
        work: W,
    ) -> Result<(), DispatchError<Callback>> {
        let () = W::CHECK;
        self.execute_as(
            processor.into(),
            work.into_callback(),
            ("execute", "call_async"),
        )
    }

    /// [`execute`](Self::execute), named `call` in a refusal of `blocking.rs`.
    #[track_caller]
    pub(crate) fn execute_as(
        &self,
        processor: ProcessorId,
        callback: Callback,
        call: BlockingCall,
    ) -> Result<(), DispatchError<Callback>> {
        let Some(p) = self.processor(processor) else {
            return Err(DispatchError::NoSuchProcessor(callback));
        };
        self.send(p, Item::DispatcherCallback(callback), Wait::Forever, call)
            .map_err(|e| e.map(Item::into_dispatcher_callback))
    }

    /// Waits until the processor (of a client, or named) has handled everything enqueued to
    /// it before this call: a [`call`](Self::call) of nothing, allocating nothing after the
    /// calling thread's first call. For application threads: a processor thread never
    /// waits for a processor.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call) (`Panicked` cannot happen: there is nothing to run).
    #[track_caller]
    pub fn synchronize(&self, target: impl Into<ProcessorId>) -> Result<(), SyncError> {
        self.refuse_blocking("synchronize", "call_async");
        self.call(target, || ())
    }

    /// Runs `f` on the processor (of a client, or named) and returns its result to the
    /// calling thread, which waits for it. `f` runs as a dispatcher callback: after
    /// everything enqueued to the processor before this call, and after the processor has
    /// flushed its clients. For application threads: a processor thread never waits for a
    /// processor.
    ///
    /// `f` is a closure that returns a value, not work of the kind [`execute`](Self::execute)
    /// takes ([`IntoCallback`], which returns nothing): a [`Callback`] made already has no
    /// result to send back, so `call` takes only the closure, and wraps it itself in the
    /// callback that answers.
    ///
    /// Allocates nothing after the calling thread's first call (which makes its reusable
    /// answer slot; the protocol is in `call.rs`). `f` travels inline in a [`Callback`],
    /// beside 8 bytes of the call's own, so it may capture at most 24 bytes (an `Arc`, a
    /// handle, a few integers); its result comes back inline, so `R` may be at most 32
    /// bytes, aligned to 8 at most. Both limits are compile errors ([at `cargo build`, not
    /// at `cargo check`](zerodispatch_callback#when-the-size-check-runs)), never allocations:
    /// capture or return an `Arc` or a `Box` for more, and the allocation is yours to see.
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let queue = d.processors(ClientType::Queue)[0];
    /// let name = d.call(queue, || std::thread::current().name().map(str::len))?;
    /// assert_eq!(name, Some("zd-queue-0".len()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A result larger than the slot does not compile:
    ///
    /// ```compile_fail
    /// # use zerodispatch_core::*;
    /// # let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build().unwrap();
    /// # let queue = d.processors(ClientType::Queue)[0];
    /// let big: [u64; 8] = d.call(queue, || [0_u64; 8]).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`SyncError::OnProcessorThread`] if called on any processor thread of this
    /// dispatcher (waiting there could deadlock: for itself, or two processors for each
    /// other), `ShutDown` if shutdown has started (`f` is dropped unrun), `NoSuchProcessor`
    /// for a bad id, `Panicked` if `f` panicked (the processor caught and counted the panic,
    /// and goes on), `Dropped` if the processor's thread died before it got there.
    #[track_caller]
    pub fn call<F, R>(&self, target: impl Into<ProcessorId>, f: F) -> Result<R, SyncError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.refuse_blocking("call", "call_async");
        let id = target.into();
        let processor = self.processor(id).ok_or(SyncError::NoSuchProcessor(id))?;
        if let Some(own) = self.current() {
            return Err(SyncError::OnProcessorThread(own.id));
        }
        let (slot, request) = call::request();
        let task = Item::DispatcherCallback(call_task(f, request));
        let pushed = if self.shared.stepped {
            self.push_stepped(processor, task)
        } else {
            processor.push(task, Wait::Forever)
        };
        if let Err(refused) = pushed {
            // Shut down (a waiting push is refused only by a closed gate). The task comes
            // back in the error, and goes with it: its request answers `Dropped`, which
            // leaves the slot ready for the next call once taken.
            drop(refused);
            let _ = slot.wait();
            return Err(SyncError::ShutDown);
        }
        if self.shared.stepped {
            self.run_stepped();
        }
        answered(slot.wait(), id)
    }

    /// Runs `f` once on every processor of `client_type` (as a dispatcher callback), then
    /// `done` once, on the processor that finished last, after every `f`, even one that
    /// panicked (the panic is counted by its processor).
    ///
    /// All or nothing: it reaches every processor of the type, or none, and then says so
    /// and hands `f` and `done` back. It first enters every processor's gate (refused if
    /// shutdown closed one) and only then enqueues: an event entered before a close is run
    /// even across the shutdown (`gate.rs`), so once every gate is entered nothing can
    /// stop one `f` and not the others. From an application thread it waits for room in a
    /// full queue, as [`execute`](Self::execute) does. On a processor thread, where nothing
    /// waits, an `f` whose queue is full goes through the calling processor's outbox:
    /// it is refused unless that outbox has room for one event per processor of the type,
    /// checked before anything is sent (only the calling thread adds to its outbox).
    ///
    /// Allocates one shared record: this is a management operation. So `f` and `done` are
    /// closures of any size, not work of the kind [`execute`](Self::execute) takes
    /// ([`IntoCallback`]): `f` runs once on each processor (a shared `Fn`, not a callback,
    /// which runs once), and both live in that record, not in a queue slot, and come back in
    /// their own types in the error.
    ///
    /// # Errors
    ///
    /// [`ExecuteOnAllError`], with `f` and `done` handed back unrun and every processor of
    /// the type named as not reached: [`ExecuteOnAllRefusal::NoProcessors`] if the type
    /// has none, `ShutDown` once shutdown has closed one of them, `OutboxFull` on a
    /// processor thread whose outbox has room for fewer events than the type has
    /// processors.
    #[track_caller]
    pub fn execute_on_all<F, D>(
        &self,
        client_type: ClientType,
        f: F,
        done: D,
    ) -> Result<(), ExecuteOnAllError<F, D>>
    where
        F: Fn() + Send + Sync + 'static,
        D: FnOnce() + Send + 'static,
    {
        self.refuse_blocking("execute_on_all", "");
        struct All<F> {
            f: F,
            remaining: std::sync::atomic::AtomicUsize,
            done: Mutex<Option<Box<dyn FnOnce() + Send>>>,
        }
        /// One count of `remaining`, given back when dropped: after `f` ran (or panicked),
        /// or with a task that never ran.
        struct Share<F>(Arc<All<F>>);
        impl<F> Drop for Share<F> {
            fn drop(&mut self) {
                if self.0.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let done = self.0.done.lock().unwrap_or_else(|e| e.into_inner()).take();
                    if let Some(done) = done {
                        done();
                    }
                }
            }
        }
        let pool = &self.shared.pools[client_type.index()];
        let refused = |reason, f, done| {
            Err(ExecuteOnAllError::new(
                reason,
                pool.iter().map(|p| p.id).collect(),
                f,
                done,
            ))
        };
        if pool.is_empty() {
            return refused(ExecuteOnAllRefusal::NoProcessors(client_type), f, done);
        }
        let own = self.current();
        if let Some(own) = own {
            let room = own.outbox_room();
            if room < pool.len() {
                let reason = ExecuteOnAllRefusal::OutboxFull {
                    processor: own.id,
                    room,
                    needed: pool.len(),
                };
                return refused(reason, f, done);
            }
        }
        // A stepped dispatcher's processors run only when its test steps them: a full queue
        // would be waited for without end below.
        if self.shared.stepped
            && let Some(full) = pool.iter().find(|p| p.queue.is_full())
        {
            return refused(ExecuteOnAllRefusal::Full(full.id), f, done);
        }
        // Every gate, or none: from here on nothing is refused.
        let Some(entries) = ProcessorShared::enter_all(pool.iter().map(|p| &**p)) else {
            return refused(ExecuteOnAllRefusal::ShutDown, f, done);
        };
        // One extra count held by this call, released after every processor was sent its
        // task, so that `done` cannot run before all `f`s were enqueued.
        let all = Arc::new(All {
            f,
            remaining: std::sync::atomic::AtomicUsize::new(pool.len() + 1),
            done: Mutex::new(Some(Box::new(done))),
        });
        for (processor, entry) in pool.iter().zip(entries) {
            let share = Share(all.clone());
            let task = Callback::new(move || {
                // Run `f`, give the count back (perhaps running `done`) outside any unwind,
                // then let a panic of `f` reach the processor, which counts it.
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (share.0.f)()));
                drop(share);
                if let Err(panic) = ran {
                    std::panic::resume_unwind(panic);
                }
            });
            let item = Item::DispatcherCallback(task);
            match own {
                Some(own) => own.send_entered(processor, entry, item),
                None => entry.push_waiting(item),
            }
        }
        drop(Share(all));
        Ok(())
    }
}
