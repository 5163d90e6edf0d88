//! A queue's flush: it sends the ACKs queued since the last flush, then pushes the shares
//! its consumers have room for, oldest message first.

use zerodispatch_core::{DispatchError, DispatcherHandle, Event};

use crate::ids::AppId;
use crate::message::DeliveryToken;
use crate::protocol::BrokerMsg;

use super::{AppMask, QueueEngine};

impl QueueEngine {
    /// Sends the ACKs, then pushes what can be pushed. Returns `true` if a full outbox
    /// (`DispatchError::Full`) refused something: the ACKs not sent stay in `acks`, the
    /// shares not pushed stay undelivered, and the caller asks for another flush.
    ///
    /// ACKs first: a producer's confirm is the latency a broker is judged by, and it must
    /// not wait behind the deliveries of the same flush (at low rates each is a wake-up of
    /// another thread). A message is stored before its ACK is queued, so nothing a
    /// consumer can see depends on this order.
    pub(crate) fn flush(&mut self, dispatcher: &DispatcherHandle<BrokerMsg>) -> bool {
        // Once one dispatch found the outbox full, every one would until the processor has
        // handed some on: the rest waits for the next flush.
        let blocked = self.send_acks(dispatcher) || self.push_backlog(dispatcher);
        if let Some(released) = &mut self.released {
            released.report();
        }
        blocked
    }

    /// Sends the queued ACKs in order; `true` if a full outbox stopped it.
    fn send_acks(&mut self, dispatcher: &DispatcherHandle<BrokerMsg>) -> bool {
        let mut sent = 0;
        let mut blocked = false;
        while sent < self.acks.len() && !blocked {
            let (producer, guid, slot, status) = self.acks[sent];
            let ack = BrokerMsg::Ack { guid, slot, status };
            match dispatcher.dispatch(producer, Event::Message(ack)) {
                Err(DispatchError::Full(_)) => blocked = true,
                Err(_) => {
                    tracing::debug!(guid = ?guid, "ACK refused: the producer's session is gone or shutting down");
                    sent += 1;
                }
                Ok(()) => sent += 1,
            }
        }
        // Slides what is left down: no allocation.
        self.acks.drain(..sent);
        blocked
    }

    /// Pushes the backlog, oldest message first, to consumers with room; `true` if a full
    /// outbox stopped it.
    fn push_backlog(&mut self, dispatcher: &DispatcherHandle<BrokerMsg>) -> bool {
        // Walk the backlog only while some app has a consumer with room: a backlog waiting
        // for confirms (or for a consumer) costs nothing per flush.
        let mut ready = self.apps_with_room();
        let (mut keep, mut i) = (0, 0);
        let mut blocked = false;
        while i < self.to_push.len() && ready != 0 && !blocked {
            let slot = self.to_push[i];
            i += 1;
            let s = &self.slots[slot as usize];
            let done = if !s.live {
                true // released meanwhile
            } else if s.undelivered & ready == 0 {
                false
            } else {
                let (done, full) = self.push_shares(slot, dispatcher);
                blocked = full;
                ready = self.apps_with_room();
                done
            };
            if done {
                self.slots[slot as usize].queued = false;
            } else {
                self.to_push[keep] = slot;
                keep += 1;
            }
        }
        // Slide the part not walked down behind what was kept.
        let rest = self.to_push.len() - i;
        self.to_push.copy_within(i.., keep);
        self.to_push.truncate(keep + rest);
        blocked
    }

    /// Pushes the undelivered shares of `slot` that a consumer has room for; returns
    /// whether none is left undelivered, and whether a full outbox refused a PUSH (the
    /// share stays undelivered; the caller stops pushing).
    fn push_shares(&mut self, slot: u32, dispatcher: &DispatcherHandle<BrokerMsg>) -> (bool, bool) {
        let s = self.slots[slot as usize];
        let mut undelivered = s.undelivered;
        while undelivered != 0 {
            let app = undelivered.trailing_zeros() as u16;
            undelivered &= undelivered - 1;
            let Some(c) = self.pick_consumer(AppId(app)) else {
                continue;
            };
            let consumer = &mut self.consumers[c];
            let push = BrokerMsg::Push {
                consumer: consumer.id,
                slot: DeliveryToken(slot),
                guid: s.guid,
                payload: s.body.payload(),
            };
            match dispatcher.dispatch(consumer.session, Event::Message(push)) {
                Ok(()) => {
                    consumer.in_flight += 1;
                    let consumer = consumer.id;
                    let at = self.assigned_at(slot, app);
                    self.assigned[at] = consumer;
                    self.slots[slot as usize].undelivered &= !(1 << app);
                    self.counters.pushed.add(1);
                }
                Err(DispatchError::Full(_)) => return (false, true),
                Err(_) => tracing::debug!(
                    queue = self.id.0,
                    "PUSH refused: the session is shutting down"
                ),
            }
        }
        (self.slots[slot as usize].undelivered == 0, false)
    }

    /// The apps (bit `app`) that have a consumer with room in its window.
    fn apps_with_room(&self) -> AppMask {
        self.consumers
            .iter()
            .filter(|c| c.in_flight < self.window)
            .fold(0, |apps, c| apps | 1 << c.app.0)
    }

    /// A consumer of `app` with room in its window, round-robin.
    fn pick_consumer(&mut self, app: AppId) -> Option<usize> {
        let n = self.consumers.len();
        for k in 0..n {
            let i = (self.next_consumer + k) % n;
            let c = &self.consumers[i];
            if c.app == app && c.in_flight < self.window {
                self.next_consumer = (i + 1) % n;
                return Some(i);
            }
        }
        None
    }
}
