//! How events get into a processor's queue: from application threads (at once, or waiting
//! for room as the dispatch says), through the async door, and from other processors'
//! threads, which never wait, by their outboxes.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::task::Waker;

use super::current::{OUTBOX_LEN, outbox_len};
use super::gate_entry::GateEntry;
use super::shared::ProcessorShared;
use crate::client::Delivery;
use crate::error::DispatchError;
use crate::event::{Event, Item};
use crate::ids::{ClientKey, ProcessorId};
use crate::pack::{Lent, PACK, PackPool};
use crate::room::{RoomWait, Wait};
use crate::sync::Ordering;
use crate::waiters::Registration;

/// What one poll of the async door came to: done (pushed, or refused for good), or to
/// wait for a wake with the item kept.
#[derive(Debug)]
pub(crate) enum Door<T> {
    /// Pushed, or refused with the item handed back (`ShutDown`).
    Done(Result<(), DispatchError<T>>),
    /// Still full with the waker registered: poll again when woken.
    Wait(T),
}

impl<M> GateEntry<'_, M> {
    /// Pushes `item` under this entry from an application thread, waiting for room as long
    /// as it takes. An entry made before the close keeps its event accepted through a
    /// shutdown, whose processor drains until its gate is settled: the room comes.
    pub(crate) fn push_waiting(mut self, item: Item<M>) {
        // Its retries pass no gate (the entry is held): timed parks, no registration.
        let mut room = RoomWait::new(None, None);
        let mut item = item;
        loop {
            match self.target.queue.push(item) {
                Ok(()) => {
                    self.pushed = 1;
                    return;
                }
                Err(back) => {
                    // The target's thread is gone (it died: a normal exit waits for this
                    // entry to settle): nothing will pop again, so the event is dropped
                    // rather than waited for without end.
                    if self.target.exited.load(Ordering::Acquire) {
                        drop(back);
                        return;
                    }
                    item = back;
                    // Without a deadline the pause never gives up but at the thread's end.
                    let _ = room.pause(|| {
                        self.target.has_burst_room() || self.target.exited.load(Ordering::Acquire)
                    });
                }
            }
        }
    }

    /// Hands the entry to an event kept in an outbox: it stays counted until the outbox
    /// pushes the event ([`ProcessorShared::push_held`]).
    pub(super) fn hand_to_outbox(self) {
        if self.wake {
            self.target.unpark();
        }
        std::mem::forget(self);
    }
}

impl<M: Send + 'static> ProcessorShared<M> {
    /// Enqueues items from `items` until it runs out or the queue is full, passing the gate
    /// once for all of them (one read-modify-write on the gate word for the first item, one
    /// for the others together), and wakes the processor if it is going to sleep. The item that did not fit
    /// (or, after shutdown, the first item) comes back in the error; the rest stay in
    /// `items`. Adds the items pushed to `pushed`.
    ///
    /// The iterator runs inside the gate (between two pushes): a slow one delays
    /// shutdown by as long as it takes; a panicking one leaves the gate on the way out.
    pub(crate) fn try_push_batch(
        &self,
        items: &mut impl Iterator<Item = Item<M>>,
        pushed: &mut usize,
    ) -> Result<(), DispatchError<Item<M>>> {
        let Some(mut inside) = self.enter() else {
            return match items.next() {
                Some(item) => Err(DispatchError::ShutDown(item)),
                None => Ok(()),
            };
        };
        for item in items.by_ref() {
            if let Err(back) = self.queue.push(item) {
                return Err(DispatchError::Full(back));
            }
            inside.pushed += 1;
            *pushed += 1;
        }
        Ok(())
    }

    /// Enqueues the items of `items` in order from an application thread, waiting for room
    /// in a full queue as `wait` says (see `room.rs`). On an error the item that failed
    /// comes back (`Full` with `Wait::No`, `Timeout` at the deadline, `ShutDown`) and the
    /// rest stay in `items`. Never called on a processor thread of this dispatcher (those go
    /// through [`send_batch_from`](Self::send_batch_from)).
    pub(crate) fn push_batch(
        &self,
        items: &mut impl Iterator<Item = Item<M>>,
        pushed: &mut usize,
        wait: Wait,
    ) -> Result<(), DispatchError<Item<M>>> {
        let deadline = match wait {
            Wait::No => return self.try_push_batch(items, pushed),
            Wait::Until(deadline) => Some(deadline),
            Wait::Forever => None,
        };
        // Every retry passes the gate (`try_push_batch`): the waiter protocol holds.
        let mut room = RoomWait::new(deadline, Some(&self.waiters));
        let mut retry: Option<Item<M>> = None;
        loop {
            let mut next = retry.take().into_iter().chain(items.by_ref());
            match self.try_push_batch(&mut next, pushed) {
                Err(DispatchError::Full(back)) if room.pause(|| self.has_room_for_burst()) => {
                    retry = Some(back);
                }
                Err(DispatchError::Full(back)) => return Err(DispatchError::Timeout(back)),
                other => return other,
            }
        }
    }

    /// [`push_batch`](Self::push_batch) waiting as long as it takes, from an application
    /// thread, for events to the client `key`: packed, up to [`PACK`] to a slot
    /// (`pack.rs`), as many as the iterator promises (the lower bound of its
    /// `size_hint`): an iterator that cannot say it has two more events gets the rest one
    /// to a slot, each pushed as soon as it is yielded (announced to the processor when
    /// the run leaves the gate), as without packs. Each pack takes
    /// its first event, then an entry in the gate and a free pack (waiting for one if all
    /// are in use, holding no entry), then the rest of its events, and is pushed under the
    /// entry, waiting for room ([`GateEntry::push_waiting`]), so that it is never refused. An
    /// iterator that panics while a pack fills has the events it yielded pushed, then its
    /// panic goes on. A queue too small for packs takes every event one to a slot. Adds
    /// the events enqueued to `pushed`.
    pub(crate) fn push_packed<I: Iterator<Item = Event<M>>>(
        &self,
        key: ClientKey,
        events: &mut I,
        pushed: &mut usize,
    ) -> Result<(), DispatchError<Item<M>>> {
        let capacity = self.queue.capacity();
        let one_to_a_slot = |events: &mut I, pushed: &mut usize| {
            self.push_batch(
                &mut events.map(|e| Item::new(key, e)),
                pushed,
                Wait::Forever,
            )
        };
        if !PackPool::<M>::enabled(capacity) {
            return one_to_a_slot(events, pushed);
        }
        let packs = self.packs.get_or_init(|| PackPool::new(capacity));
        loop {
            let promised = events.size_hint().0.min(PACK);
            if promised < 2 {
                return one_to_a_slot(events, pushed);
            }
            let Some(first) = events.next() else {
                return Ok(());
            };
            let Some((inside, mut pack)) = self.enter_with_pack(packs) else {
                return Err(DispatchError::ShutDown(Item::new(key, first)));
            };
            pack.events().push(Delivery::from(first));
            // The batch's iterator runs here, inside the gate, as in `try_push_batch`.
            let filled = catch_unwind(AssertUnwindSafe(|| {
                let rest = events.by_ref().take(promised - 1).map(Delivery::from);
                pack.events().extend(rest);
            }));
            let n = pack.events().len();
            let item = if n == 1 {
                let event = pack.events().pop().expect("one event");
                Item::new(key, event.into_event())
            } else {
                Item::Pack {
                    key,
                    events: pack.send(),
                }
            };
            inside.push_waiting(item);
            *pushed += n;
            if let Err(panic) = filled {
                resume_unwind(panic);
            }
        }
    }

    /// An entry in the gate and a free pack to fill under it; `None` once shutdown has
    /// closed the gate. With every pack in use it waits for a quarter of them to be free
    /// by the waiter protocol of a full queue (`room.rs`, `waiters.rs`): each retry enters
    /// the gate, tries to take a pack, and undoes the entry if there is none, as a
    /// refused push does, so that the processor's look at its waiters, which it makes
    /// after handing packs back and before it parks, sees the registration or the retry
    /// sees the packs.
    fn enter_with_pack<'p>(
        &self,
        packs: &'p PackPool<M>,
    ) -> Option<(GateEntry<'_, M>, Lent<'p, M>)> {
        let mut wait: Option<RoomWait<'_>> = None;
        loop {
            let inside = self.enter()?;
            if let Some(pack) = packs.take() {
                return Some((inside, pack));
            }
            drop(inside);
            let _ = wait
                .get_or_insert_with(|| RoomWait::new(None, Some(&self.waiters)))
                .pause(|| packs.has_free() || self.gate.is_closed());
        }
    }

    /// Producer side, waiting for room: whether a quarter of the queue is free (room for a
    /// burst, see `room.rs`), or the gate closed (a push now hands its event back).
    pub(super) fn has_room_for_burst(&self) -> bool {
        self.has_burst_room() || self.gate.is_closed()
    }

    /// [`send_from`](Self::send_from) of `item` under an entry already made in `target`'s
    /// gate, with room in this processor's outbox checked by the caller
    /// ([`outbox_room`](Self::outbox_room)): it cannot fail.
    pub(crate) fn send_entered(
        &self,
        target: &ProcessorShared<M>,
        mut inside: GateEntry<'_, M>,
        item: Item<M>,
    ) {
        debug_assert!(self.on_own_thread(), "send_entered called off {}", self.id);
        if let Some(item) = push_behind_outbox(target, &mut inside, item) {
            self.keep(target, item, inside)
                .expect("the caller checked the outbox's room");
        }
    }

    /// Enqueues `item` unless the queue is full or shutdown closed the gate: the protocol of
    /// [`try_push_batch`](Self::try_push_batch) for one item, written out because it is the
    /// hottest path (going through the batch's iterator measured 2-3x slower per event).
    #[inline]
    pub(crate) fn try_push(&self, item: Item<M>) -> Result<(), DispatchError<Item<M>>> {
        let Some(mut inside) = self.enter() else {
            return Err(DispatchError::ShutDown(item));
        };
        let pushed = self.queue.push(item);
        inside.pushed = usize::from(pushed.is_ok());
        pushed.map_err(DispatchError::Full)
    }

    /// Enqueues `item` from an application thread, waiting for room in a full queue as
    /// `wait` says (see `room.rs`): `Full` with `Wait::No`, `Timeout` at the deadline.
    #[inline]
    pub(crate) fn push(&self, item: Item<M>, wait: Wait) -> Result<(), DispatchError<Item<M>>> {
        let deadline = match wait {
            Wait::No => return self.try_push(item),
            Wait::Until(deadline) => Some(deadline),
            Wait::Forever => None,
        };
        // Every retry passes the gate (`try_push`): the waiter protocol holds.
        let mut room = RoomWait::new(deadline, Some(&self.waiters));
        let mut item = item;
        loop {
            match self.try_push(item) {
                Err(DispatchError::Full(back)) if room.pause(|| self.has_room_for_burst()) => {
                    item = back;
                }
                Err(DispatchError::Full(back)) => return Err(DispatchError::Timeout(back)),
                other => return other,
            }
        }
    }

    /// The async door's producer side (the protocol of `waiters.rs`): `attempt` pushes
    /// `item` (one event, or the first of a batch); on a full queue, registers `waker`
    /// (refreshing `registration`) and attempts once more, which closes the race with a
    /// processor that drained in between. `Wait` with the item if the queue is still
    /// full; otherwise done, with a registration of this round withdrawn.
    ///
    /// `attempt` must pass the gate (`try_push`, `try_push_batch`): its entry is what
    /// orders the registration before the processor's look at its waiters.
    pub(crate) fn poll_push<T>(
        &self,
        item: T,
        waker: &Waker,
        registration: &mut Option<Registration>,
        mut attempt: impl FnMut(T) -> Result<(), DispatchError<T>>,
    ) -> Door<T> {
        let done = match attempt(item) {
            Err(DispatchError::Full(back)) => {
                self.waiters.register(waker, registration);
                match attempt(back) {
                    Err(DispatchError::Full(back)) => return Door::Wait(back),
                    other => other,
                }
            }
            other => other,
        };
        self.waiters.withdraw(registration);
        Door::Done(done)
    }

    /// Withdraws a future's registration (a future dropped while it waited).
    pub(crate) fn withdraw(&self, registration: &mut Option<Registration>) {
        self.waiters.withdraw(registration);
    }

    /// Sends `item` to `target` from this processor's own thread, by the
    /// [outbox protocol](crate::outbox): never waits. With `wait` (a blocking dispatch), a
    /// full target queue puts the event in the outbox, and `Full` comes back only when
    /// the outbox is full too; without (`try_dispatch`), a full queue, or events waiting in
    /// the outbox that it must not overtake, hand it back at once.
    pub(crate) fn send_from(
        &self,
        target: &ProcessorShared<M>,
        item: Item<M>,
        wait: bool,
    ) -> Result<(), DispatchError<Item<M>>> {
        debug_assert!(self.on_own_thread(), "send_from called off {}", self.id);
        let Some(mut inside) = target.enter() else {
            return Err(DispatchError::ShutDown(item));
        };
        let Some(item) = push_behind_outbox(target, &mut inside, item) else {
            return Ok(());
        };
        if !wait {
            return Err(DispatchError::Full(item));
        }
        self.keep(target, item, inside)
    }

    /// [`send_from`](Self::send_from) for a run of items to one target: one pass through
    /// the target's gate while the queue has room, then one gate entry per item kept in
    /// the outbox.
    pub(crate) fn send_batch_from(
        &self,
        target: &ProcessorShared<M>,
        items: &mut impl Iterator<Item = Item<M>>,
        pushed: &mut usize,
        wait: bool,
    ) -> Result<(), DispatchError<Item<M>>> {
        debug_assert!(
            self.on_own_thread(),
            "send_batch_from called off {}",
            self.id
        );
        let mut first = None;
        if outbox_len() == 0 {
            match target.try_push_batch(items, pushed) {
                Err(DispatchError::Full(item)) => first = Some(item),
                other => return other,
            }
        }
        for item in first.into_iter().chain(items.by_ref()) {
            let Some(inside) = target.enter() else {
                return Err(DispatchError::ShutDown(item));
            };
            if !wait {
                return Err(DispatchError::Full(item));
            }
            self.keep(target, item, inside)?;
            *pushed += 1;
        }
        Ok(())
    }

    /// Keeps `item` for `target` in this processor's outbox, holding `inside`; hands it
    /// back (leaving the gate) if the outbox is full.
    pub(super) fn keep(
        &self,
        target: &ProcessorShared<M>,
        item: Item<M>,
        inside: GateEntry<'_, M>,
    ) -> Result<(), DispatchError<Item<M>>> {
        let mut outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        match outbox.keep(target.id, item) {
            Ok(()) => {
                inside.hand_to_outbox();
                OUTBOX_LEN.with(|len| len.set(outbox.len()));
                self.stats.counters.outboxed.add(1);
                Ok(())
            }
            Err(item) => Err(DispatchError::Full(item)),
        }
    }

    /// Pushes an event whose gate entry is already held (an outboxed one): the entry
    /// becomes the event. Hands it back if the queue is still full. An outboxed push has
    /// no read-modify-write of its own to read the sleeping flag from: it reads the flag,
    /// and a processor it misses is one that parks only briefly (the entry was counted).
    pub(crate) fn push_held(&self, item: Item<M>) -> Result<(), Item<M>> {
        let pushed = self.queue.push(item);
        if pushed.is_ok() && self.gate.is_sleeping() {
            self.unpark();
        }
        pushed
    }

    /// Processor side: hands on what this processor's outbox holds, as far as the targets
    /// (found by `target`) have room; returns how many went. Runs on this processor's
    /// thread only.
    pub(crate) fn retry_outbox<'t>(
        &self,
        target: impl Fn(ProcessorId) -> Option<&'t ProcessorShared<M>>,
    ) -> usize
    where
        M: 't,
    {
        let mut outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        let sent = outbox.retry(|id, item| {
            // The gate was entered when the event was kept, and is still held: shutdown
            // waits for this push.
            target(id)
                .expect("an outboxed event names a processor of this dispatcher")
                .push_held(item)
        });
        OUTBOX_LEN.with(|len| len.set(outbox.len()));
        sent
    }
}

/// Pushes `item` into `target`'s queue under `inside` (an entry in its gate), unless the
/// calling processor's outbox holds events, which it must not overtake (the
/// [outbox protocol](crate::outbox)), or the queue is full: then hands it back, for the
/// caller to keep or refuse.
#[inline]
fn push_behind_outbox<M: Send + 'static>(
    target: &ProcessorShared<M>,
    inside: &mut GateEntry<'_, M>,
    item: Item<M>,
) -> Option<Item<M>> {
    if outbox_len() != 0 {
        return Some(item);
    }
    match target.queue.push(item) {
        Ok(()) => {
            inside.pushed = 1;
            None
        }
        Err(item) => Some(item),
    }
}
