//! Handling one popped event on the processor thread: the client table (adoption of a
//! client handed in, unregistration), deliveries to clients, and the flush list.

use std::vec::Drain;

use super::contain::contain;
use super::runner::{Entry, Runner};
use crate::client::{ClientEvent, ClientFlags, Delivery, Registered, Run};
use crate::event::Item;
use crate::ids::ClientKey;
use crate::sync::Ordering;

impl<M: Send + 'static> Runner<M> {
    /// Handles one popped item, counts it (in `processed`, unless it is the monitor's
    /// probe, counted in `probes`: no caller enqueued it) and makes the flush point that
    /// `max_batch` events since the last one call for. A pack counts its events.
    #[inline]
    pub(super) fn handle(&mut self, item: Item<M>, max_batch: u64) {
        if let Item::Pack { key, events } = item {
            // Counted, and its flush points made, run by run.
            self.deliver_pack(key, events, max_batch);
            return;
        }
        let counted = self.handle_one(item);
        self.shared.stats.counters.processed.add_release(counted);
        self.since_flush += 1;
        if self.since_flush >= max_batch {
            self.flush_point();
        }
    }

    /// [`handle`](Self::handle) of an item that is not a pack, but its count: returns
    /// what it adds to `processed`.
    #[inline]
    fn handle_one(&mut self, item: Item<M>) -> u64 {
        match item {
            Item::Callback { key, callback } => {
                if !callback.is_inline() {
                    self.shared.stats.counters.spilled.add(1);
                }
                self.deliver(key, ClientEvent::Callback(callback).into());
            }
            Item::Message { key, message } => {
                self.deliver(key, ClientEvent::Message(message).into())
            }
            Item::ClientCallback { key, callback } => {
                self.deliver(key, Delivery::Call(callback));
            }
            Item::DispatcherCallback(callback) => {
                if !callback.is_inline() {
                    self.shared.stats.counters.spilled.add(1);
                }
                self.flush_all();
                contain(
                    &self.shared.stats,
                    self.shared.id,
                    "dispatcher callback",
                    || callback.call(),
                );
            }
            Item::Probe(enqueued) => {
                self.histograms.record_time_in_queue(enqueued.elapsed());
                // Release: a snapshot that reads it with acquire sees the probe popped.
                self.shared.stats.counters.probes.add_release(1);
                self.shared.probe_pending.store(false, Ordering::Relaxed);
                return 0;
            }
            Item::Unregister { key } => self.unregister(key),
            Item::Pack { .. } => unreachable!("a pack is handled by `handle` itself"),
        }
        1
    }

    /// Hands a pack's events (`pack.rs`) to their client in runs that end at the flush
    /// points `max_batch` calls for, counting each run once handled, and gives the pack
    /// back to its pool. Not inlined: in the drain loop it slowed the one-event path.
    #[inline(never)]
    fn deliver_pack(&mut self, key: ClientKey, mut events: Vec<Delivery<M>>, max_batch: u64) {
        self.shared.stats.counters.packs.add(1);
        let mut drain = events.drain(..);
        while drain.len() > 0 {
            let room = max_batch.saturating_sub(self.since_flush).max(1);
            let run = drain.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            self.deliver_run(key, &mut drain, run);
            self.since_flush += run as u64;
            if self.since_flush >= max_batch {
                self.flush_point();
            }
        }
        drop(drain);
        self.shared.give_back_pack(events);
    }

    /// Hands the next `run` events of `drain` to the client `key` in one call
    /// ([`Registered::on_run`]); a panic is contained and the events after it are still
    /// handed over, one call more for each panic.
    fn deliver_run(&mut self, key: ClientKey, drain: &mut Drain<'_, Delivery<M>>, run: usize) {
        let slot = usize::from(key.slot);
        if !self.holds(key) && !self.adopt(key) {
            self.drop_stale_run(key, drain, run);
            return;
        }
        let entry = self.clients[slot]
            .as_mut()
            .expect("a client found or adopted just now is in the table");
        let ctx = &mut self.ctx;
        ctx.me.key = key;
        ctx.flags = entry.flags;
        let client = &mut *entry.client;
        let stats = &self.shared.stats;
        let mut flush = false;
        let end = drain.len() - run;
        while drain.len() > end {
            let run = Run {
                limit: drain.len() - end,
                processed: &stats.counters.processed,
                spilled: &stats.counters.spilled,
                flush: &mut flush,
            };
            let panicked = contain(stats, self.shared.id, "event of a batch", || {
                client.on_run(drain, run, ctx);
            });
            if panicked {
                // The event that panicked (taken from the pack, not counted by `on_run`) is
                // counted, as one event at a time counts it, and may have opened the
                // flush gate.
                stats.counters.processed.add_release(1);
                flush |= ctx.flags.flush_enabled;
            }
        }
        entry.flags = ClientFlags {
            flush_again: false,
            ..ctx.flags
        };
        if flush && !entry.on_flush_list {
            entry.on_flush_list = true;
            self.flush_list.push(key.slot);
        }
        self.count_wrong_types();
    }

    /// Counts and drops the next `run` events of a pack whose key names no client, each
    /// counted as one event at a time counts it (`stale`, `processed`, and `spilled` for
    /// a spilled callback).
    #[cold]
    fn drop_stale_run(&self, key: ClientKey, drain: &mut Drain<'_, Delivery<M>>, run: usize) {
        let counters = &self.shared.stats.counters;
        counters.stale.add(run as u64);
        tracing::debug!(processor = %self.shared.id, slot = key.slot, generation = key.generation, events = run, "events for an unregistered client dropped");
        for delivery in drain.by_ref().take(run) {
            if let Delivery::Event(ClientEvent::Callback(callback)) = &delivery
                && !callback.is_inline()
            {
                counters.spilled.add(1);
            }
            contain(
                &self.shared.stats,
                self.shared.id,
                "drop of a stale event",
                || drop(delivery),
            );
            counters.processed.add_release(1);
        }
    }

    /// Adds the client callbacks of the last delivery that found a client of another type
    /// to the stats, and logs them.
    fn count_wrong_types(&mut self) {
        let wrong = std::mem::take(&mut self.ctx.wrong_type);
        if wrong > 0 {
            self.shared
                .stats
                .counters
                .wrong_client_type
                .add(u64::from(wrong));
            tracing::warn!(processor = %self.shared.id, client = %self.ctx.me, callbacks = wrong, "client callback for another client type dropped unrun");
        }
    }

    #[inline]
    pub(super) fn deliver(&mut self, key: ClientKey, delivery: Delivery<M>) {
        let slot = usize::from(key.slot);
        let found = self
            .clients
            .get_mut(slot)
            .and_then(Option::as_mut)
            .filter(|e| e.generation == key.generation);
        let entry = match found {
            Some(entry) => entry,
            // Not in the table: the first event of a client handed in (adopted now), or a
            // stale key.
            None => {
                if !self.adopt(key) {
                    self.drop_stale(key, delivery);
                    return;
                }
                self.clients[slot]
                    .as_mut()
                    .expect("a client adopted just now is in the table")
            }
        };
        let what = delivery.what();
        let ctx = &mut self.ctx;
        ctx.me.key = key;
        ctx.flags = entry.flags;
        let client = &mut *entry.client;
        contain(
            &self.shared.stats,
            self.shared.id,
            what,
            // The callback's arm on its own: merged with the message's, the move of a
            // message was made for a callback too, through a store-forwarding stall
            // (`Registered::on_run` has the same arms).
            || match delivery {
                Delivery::Event(ClientEvent::Callback(callback)) => {
                    client.on_event(ClientEvent::Callback(callback), ctx);
                }
                Delivery::Event(event) => client.on_event(event, ctx),
                Delivery::Call(callback) => callback.call(client, ctx),
            },
        );
        // A request to be flushed again made while handling an event is met by the flush
        // the event itself brings.
        entry.flags = ClientFlags {
            flush_again: false,
            ..ctx.flags
        };
        if entry.flags.flush_enabled && !entry.on_flush_list {
            entry.on_flush_list = true;
            self.flush_list.push(key.slot);
        }
        if ctx.wrong_type > 0 {
            self.count_wrong_types();
        }
    }

    /// Flushes every client on the flush list, in order, and empties it: a flush point.
    /// Clients that ask to be flushed again go back on the list for the next one.
    pub(super) fn flush_all(&mut self) {
        if self.since_flush > 0 {
            self.histograms.record_batch(self.since_flush);
            self.since_flush = 0;
        }
        for i in 0..self.flush_list.len() {
            let slot = self.flush_list[i];
            self.flush_one(slot);
        }
        self.flush_list.clear();
        for &slot in &self.again {
            if let Some(entry) = self.clients[usize::from(slot)].as_mut() {
                entry.on_flush_list = true;
                self.flush_list.push(slot);
            }
        }
        self.again.clear();
        self.publish_histograms(false);
    }

    pub(super) fn flush_one(&mut self, slot: u16) {
        let Some(entry) = self
            .clients
            .get_mut(usize::from(slot))
            .and_then(Option::as_mut)
        else {
            return;
        };
        entry.on_flush_list = false;
        let ctx = &mut self.ctx;
        ctx.me.key = ClientKey {
            slot,
            generation: entry.generation,
        };
        ctx.flags = entry.flags;
        let client = &mut entry.client;
        self.shared.stats.counters.flushes.add(1);
        contain(&self.shared.stats, self.shared.id, "flush", || {
            client.flush(ctx);
        });
        entry.flags = ClientFlags {
            flush_again: false,
            ..ctx.flags
        };
        if ctx.flags.flush_again {
            self.again.push(slot);
        }
    }

    /// Counts and drops an event whose key names no client (unregistered).
    #[cold]
    pub(super) fn drop_stale(&self, key: ClientKey, delivery: Delivery<M>) {
        self.shared.stats.counters.stale.add(1);
        tracing::debug!(processor = %self.shared.id, slot = key.slot, generation = key.generation, "event for an unregistered client dropped");
        // The event's drop (its captures, or the message) is user code.
        contain(
            &self.shared.stats,
            self.shared.id,
            "drop of a stale event",
            || drop(delivery),
        );
    }

    /// Whether the table holds the client `key` names: its slot, at its generation.
    #[inline]
    fn holds(&self, key: ClientKey) -> bool {
        self.clients
            .get(usize::from(key.slot))
            .and_then(Option::as_ref)
            .is_some_and(|e| e.generation == key.generation)
    }

    /// Takes in the client handed in under `key`, if it is among the arrivals (the
    /// processor's side of the protocol of `slots.rs`): on a miss of the table only, never
    /// on the event path of a client already in it.
    #[cold]
    pub(super) fn adopt(&mut self, key: ClientKey) -> bool {
        let adopted = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .adopt(key);
        match adopted {
            Some(client) => {
                self.install(key, client);
                true
            }
            None => false,
        }
    }

    /// Puts an adopted client in the table.
    pub(super) fn install(&mut self, key: ClientKey, client: Box<dyn Registered<M>>) {
        let slot = usize::from(key.slot);
        if self.clients.len() <= slot {
            self.clients.resize_with(slot + 1, || None);
            // Room for every client on the flush list and the flush-again list, so that
            // pushing to them never allocates on the event path.
            let room = self.clients.len();
            self.flush_list
                .reserve(room.saturating_sub(self.flush_list.len()));
            self.again.reserve(room.saturating_sub(self.again.len()));
        }
        let kinds = &mut self.ctx.kinds;
        if kinds.len() <= slot {
            kinds.resize(slot + 1, None);
        }
        kinds[slot] = Some(client.kind());
        debug_assert!(self.clients[slot].is_none(), "slot {slot} adopted twice");
        self.clients[slot] = Some(Entry {
            client,
            generation: key.generation,
            on_flush_list: false,
            flags: ClientFlags::default(),
        });
    }

    pub(super) fn unregister(&mut self, key: ClientKey) {
        let slot = usize::from(key.slot);
        // A client handed in that got no event before its unregistration is adopted for it.
        if !self.holds(key) && !self.adopt(key) {
            self.shared.stats.counters.stale.add(1);
            return;
        }
        // Flush it before it goes (flush contract, point 4), and take it off the lists.
        if self.clients[slot].as_ref().is_some_and(|e| e.on_flush_list) {
            self.flush_one(key.slot);
            self.flush_list.retain(|&s| s != key.slot);
            self.again.retain(|&s| s != key.slot);
        }
        let entry = self.clients[slot].take();
        // The client's own drop runs here, on its thread.
        contain(
            &self.shared.stats,
            self.shared.id,
            "drop of a client",
            || drop(entry),
        );
        self.shared
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys
            .release(key);
    }
}
