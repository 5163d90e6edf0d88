//! Handling one popped event on the processor thread: the client table (adoption of a
//! client handed in, unregistration), deliveries to clients, and the flush list.

use super::contain::contain;
use super::runner::Runner;
use crate::client::{ClientCallback, ClientEvent, ClientFlags, ClientKey, Registered};
use crate::event::Item;
use crate::sync::Ordering;

/// A registered client in its processor's table.
pub(super) struct Entry<M> {
    pub(super) client: Box<dyn Registered<M>>,
    pub(super) generation: u16,
    /// On the flush list now (the dedup flag).
    pub(super) on_flush_list: bool,
    /// The flush gate and the flush-again request ([`Context`]).
    pub(super) flags: ClientFlags,
}

/// What [`Runner::deliver`] hands a client: an event through [`Client::on_event`], or a
/// callback that takes the client itself.
pub(super) enum Delivery<M> {
    Event(ClientEvent<M>),
    Call(ClientCallback<M>),
}

impl<M> Delivery<M> {
    /// What the call into user code is, for the panic log.
    pub(super) fn what(&self) -> &'static str {
        match self {
            Delivery::Event(ClientEvent::Callback(_)) => "client callback",
            Delivery::Event(ClientEvent::Message(_)) => "client message",
            Delivery::Call(_) => "callback on the client",
        }
    }
}

impl<M> From<ClientEvent<M>> for Delivery<M> {
    fn from(event: ClientEvent<M>) -> Self {
        Delivery::Event(event)
    }
}

impl<M: Send + 'static> Runner<M> {
    /// Handles one popped item; returns what it adds to `processed`: 1, or 0 for the
    /// monitor's probe (counted in `probes`: no caller enqueued it).
    #[inline]
    pub(super) fn handle(&mut self, item: Item<M>) -> u64 {
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
        }
        1
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
            || match delivery {
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
        if std::mem::take(&mut ctx.wrong_type) {
            self.shared.stats.counters.wrong_client_type.add(1);
            tracing::warn!(processor = %self.shared.id, client = %ctx.me, "client callback for another client type dropped unrun");
        }
        if entry.flags.flush_enabled && !entry.on_flush_list {
            entry.on_flush_list = true;
            self.flush_list.push(key.slot);
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
        let registered = self
            .clients
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|e| e.generation == key.generation);
        // A client handed in that got no event before its unregistration is adopted for it.
        if !registered && !self.adopt(key) {
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
