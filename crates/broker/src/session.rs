//! Session clients (on session processors): a producer's and a consumer's connection.
//!
//! Both follow the flush contract: they batch on the event path and send on flush. A
//! producer session collects its application's publishes and sends the PUTs on flush, and
//! collects ACKs and reports them to the application on flush; a consumer session collects
//! PUSHes, hands the batch to the application on flush, then confirms each message.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use zerodispatch_core::{Client, ClientEvent, ClientHandle, Context, Event};

use crate::ids::{AppId, ConsumerId, Guid, Payload, ProducerId, QueueId};
use crate::message::{Ack, AckStatus, BrokerMsg, Confirm, ConfirmMode, ConfirmRoute, Delivery};
use crate::queue::{GuidHasher, send_confirm};
use crate::stats::SessionCounters;

/// What a producer's application is called with, on its session's processor, for each
/// batch of outcomes. It must not block for long: it runs on a processor thread.
pub type AckHandler = Box<dyn FnMut(&[Ack]) + Send>;

/// What a consumer's application is called with, on its session's processor, for each
/// batch of deliveries; every message of the batch is confirmed when it returns.
pub type DeliveryHandler = Box<dyn FnMut(&[Delivery]) + Send>;

/// A producer's session.
pub(crate) struct ProducerSession {
    pub(crate) id: ProducerId,
    /// The queues' clients, by queue id.
    pub(crate) queues: Arc<[ClientHandle]>,
    /// Messages sent and not yet acknowledged, with where they went.
    pub(crate) unacked: HashMap<Guid, (QueueId, Payload), BuildHasherDefault<GuidHasher>>,
    pub(crate) max_unacked: usize,
    /// PUTs to send on flush.
    pub(crate) outbox: Vec<(ClientHandle, Guid, Payload)>,
    /// Outcomes to report on flush.
    pub(crate) acks: Vec<Ack>,
    pub(crate) on_ack: AckHandler,
    pub(crate) closed: bool,
    pub(crate) counters: Arc<CachePadded<SessionCounters>>,
}

impl ProducerSession {
    pub(crate) fn new(
        id: ProducerId,
        queues: Arc<[ClientHandle]>,
        max_unacked: usize,
        batch: usize,
        on_ack: AckHandler,
        counters: Arc<CachePadded<SessionCounters>>,
    ) -> Self {
        Self {
            id,
            queues,
            // Twice the cap: removals leave tombstones, which hashbrown then rehashes in
            // place instead of growing the table (no allocation in steady state).
            unacked: HashMap::with_capacity_and_hasher(
                2 * max_unacked,
                BuildHasherDefault::default(),
            ),
            max_unacked,
            outbox: Vec::with_capacity(batch),
            acks: Vec::with_capacity(batch.max(max_unacked)),
            on_ack,
            closed: false,
            counters,
        }
    }

    fn publish(&mut self, queue: QueueId, guid: Guid, payload: Payload) {
        self.counters.published.add(1);
        let reject = |status| Ack {
            guid,
            queue,
            payload,
            status,
        };
        if self.closed {
            self.acks.push(reject(AckStatus::Closed));
            self.counters.closed_reported.add(1);
            return;
        }
        let Some(&target) = self.queues.get(queue.0 as usize) else {
            self.counters.rejected_unknown_queue.add(1);
            self.acks.push(reject(AckStatus::RejectedUnknownQueue));
            return;
        };
        if self.unacked.len() >= self.max_unacked {
            self.counters.rejected_producer_full.add(1);
            self.acks.push(reject(AckStatus::RejectedProducerFull));
            return;
        }
        self.unacked.insert(guid, (queue, payload));
        self.outbox.push((target, guid, payload));
    }

    fn ack(&mut self, guid: Guid, status: AckStatus) {
        let Some((queue, payload)) = self.unacked.remove(&guid) else {
            // Closed (reported already), or not ours.
            self.counters.late_acks.add(1);
            tracing::debug!(
                producer = self.id.0,
                ?guid,
                "ACK for a message the producer no longer waits for"
            );
            return;
        };
        self.counters.acks.add(1);
        self.acks.push(Ack {
            guid,
            queue,
            payload,
            status,
        });
    }

    /// Reports every unacknowledged message as `Closed` and refuses later publishes.
    fn close(&mut self) {
        self.closed = true;
        for (guid, (queue, payload)) in self.unacked.drain() {
            self.counters.closed_reported.add(1);
            self.acks.push(Ack {
                guid,
                queue,
                payload,
                status: AckStatus::Closed,
            });
        }
        // PUTs not sent yet are reported above; do not send them.
        self.outbox.clear();
    }
}

impl Client<BrokerMsg> for ProducerSession {
    fn on_event(&mut self, event: ClientEvent<BrokerMsg>, _ctx: &mut Context<'_, BrokerMsg>) {
        match event {
            ClientEvent::Message(BrokerMsg::Publish {
                queue,
                guid,
                payload,
            }) => self.publish(queue, guid, payload),
            ClientEvent::Message(BrokerMsg::Ack { guid, status }) => self.ack(guid, status),
            ClientEvent::Message(BrokerMsg::Close) => self.close(),
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(other) => tracing::warn!(
                producer = self.id.0,
                ?other,
                "unexpected message for a producer"
            ),
        }
    }

    fn flush(&mut self, ctx: &mut Context<'_, BrokerMsg>) {
        let me = ctx.handle();
        for (queue, guid, payload) in self.outbox.drain(..) {
            let put = BrokerMsg::Put {
                producer: me,
                guid,
                payload,
            };
            if ctx
                .dispatcher()
                .dispatch(queue, Event::Message(put))
                .is_err()
            {
                // Shutting down: the message was never stored; report it closed.
                if let Some((q, p)) = self.unacked.remove(&guid) {
                    self.counters.closed_reported.add(1);
                    self.acks.push(Ack {
                        guid,
                        queue: q,
                        payload: p,
                        status: AckStatus::Closed,
                    });
                }
            }
        }
        if !self.acks.is_empty() {
            (self.on_ack)(&self.acks);
            self.acks.clear();
        }
    }
}

impl Drop for ProducerSession {
    fn drop(&mut self) {
        // At shutdown: whatever is still unacknowledged is reported closed.
        if !self.unacked.is_empty() {
            self.close();
            (self.on_ack)(&self.acks);
            self.acks.clear();
        }
    }
}

/// A consumer's session.
pub(crate) struct ConsumerSession {
    pub(crate) id: ConsumerId,
    pub(crate) app: AppId,
    pub(crate) queue: ClientHandle,
    pub(crate) cluster: Option<ClientHandle>,
    pub(crate) mode: ConfirmMode,
    pub(crate) route: ConfirmRoute,
    pub(crate) deliveries: Vec<Delivery>,
    pub(crate) on_delivery: DeliveryHandler,
    pub(crate) closed: bool,
    pub(crate) counters: Arc<CachePadded<SessionCounters>>,
}

impl Client<BrokerMsg> for ConsumerSession {
    fn on_event(&mut self, event: ClientEvent<BrokerMsg>, _ctx: &mut Context<'_, BrokerMsg>) {
        match event {
            ClientEvent::Message(BrokerMsg::Push {
                consumer,
                queue,
                guid,
                payload,
            }) => {
                if self.closed || consumer != self.id {
                    self.counters.pushes_to_closed.add(1);
                    return;
                }
                self.deliveries.push(Delivery {
                    guid,
                    queue,
                    app: self.app,
                    payload,
                });
            }
            ClientEvent::Message(BrokerMsg::Close) => {
                self.closed = true;
                self.deliveries.clear();
            }
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(other) => tracing::warn!(
                consumer = self.id.0,
                ?other,
                "unexpected message for a consumer"
            ),
        }
    }

    fn flush(&mut self, ctx: &mut Context<'_, BrokerMsg>) {
        if self.deliveries.is_empty() {
            return;
        }
        self.counters.delivered.add(self.deliveries.len() as u64);
        (self.on_delivery)(&self.deliveries);
        for d in self.deliveries.drain(..) {
            let c = Confirm {
                queue: d.queue,
                guid: d.guid,
                consumer: self.id,
                app: d.app,
            };
            let sent = match (self.route, self.cluster) {
                (ConfirmRoute::ViaCluster, Some(cluster)) => ctx
                    .dispatcher()
                    .dispatch(cluster, Event::Message(BrokerMsg::Route(c, self.mode)))
                    .is_ok(),
                _ => send_confirm(ctx.dispatcher(), self.queue, c, self.mode).is_ok(),
            };
            if sent {
                self.counters.confirms_sent.add(1);
            } else {
                self.counters.confirms_refused.add(1);
            }
        }
    }
}
