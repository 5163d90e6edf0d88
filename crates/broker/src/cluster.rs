//! The cluster client (on the cluster processor): receives confirms from replica nodes, as
//! a primary does, and from consumers whose confirms go through the cluster, and replicas'
//! receipts (see `replication.rs`), and routes each to its queue's processor: a receipt
//! always as an inline functor, a confirm in its mode.
//!
//! # Back-pressure
//!
//! A processor never waits for another: a confirm that the cluster processor's full outbox
//! refuses (`DispatchError::Full`) is kept, in order, and routed at the next flush, which
//! the client asks for (`flush_again`). Confirms that arrive meanwhile queue up behind it.
//!
//! What may pile up there is bounded by two pools of credits, each as large as the cluster
//! processor's event capacity: a confirm holds a credit from before it is dispatched to
//! the cluster until the cluster has routed it (given back in one go per flush). So the
//! cluster's table, preallocated for both pools, never grows.
//!
//! * Replica confirms and receipts take theirs in `Broker::replica_confirm` and
//!   `Broker::replica_receipt`, on application threads, which wait for one while the
//!   cluster is behind: a flood of them is slowed down there.
//! * Consumers' routed confirms take theirs in the consumer's session, on a processor
//!   thread, which never waits: without a credit the confirm stays with the session for its
//!   next flush, as one refused by a full outbox does. A separate pool, so that replica
//!   threads cannot starve consumers of credits.

use std::collections::TryReserveError;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use zerodispatch_core::{Client, ClientEvent, ClientHandle, Context, DispatchError, Event};

use crate::credits::Credits;
use crate::ids::{ConsumerId, QueueId};
use crate::message::{Confirm, ConfirmMode};
use crate::protocol::BrokerMsg;
use crate::queue::{send_confirm, send_receipt};
use crate::replication::Receipt;
use crate::stats::ClusterCounters;
use crate::tables;

/// What the cluster routes to a queue.
#[derive(Clone, Copy)]
enum Routed {
    /// A confirm, and how it travels.
    Confirm(Confirm, ConfirmMode),
    /// A replica's receipt.
    Receipt(Receipt),
    /// A closing consumer's detach, behind its confirms.
    Detach(QueueId, ConsumerId),
}

impl Routed {
    fn queue(self) -> QueueId {
        match self {
            Routed::Confirm(c, _) => c.queue,
            Routed::Receipt(r) => r.queue,
            Routed::Detach(queue, _) => queue,
        }
    }
}

/// The credit an item holds until it is routed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Credit {
    /// One of the replicas' credits.
    Replica,
    /// One of the consumers' credits.
    Consumer,
    /// None: a detach (one per closing consumer).
    None,
}

/// An item the cluster has to route: its queue's client, the item, and the credit it
/// holds.
type ToRoute = (ClientHandle, Routed, Credit);

/// The cluster client.
pub(crate) struct ClusterClient {
    /// The queues' clients, by queue id.
    queues: Arc<[ClientHandle]>,
    counters: Arc<CachePadded<ClusterCounters>>,
    /// The replica credits, shared with `Broker::replica_confirm`.
    replica_credits: Arc<Credits>,
    /// The consumers' credits, shared with the sessions of consumers whose confirms go
    /// through the cluster.
    consumer_credits: Arc<Credits>,
    /// Credits to give back at the end of the flush (their confirms are routed), replicas'
    /// and consumers': one `give_back` per flush, not per confirm.
    done: (usize, usize),
    /// Confirms a full outbox refused, oldest first. Each holds a credit, so it never holds
    /// more than both pools together, its preallocated size (see the module's
    /// "Back-pressure").
    unrouted: Vec<ToRoute>,
}

impl ClusterClient {
    /// # Errors
    ///
    /// The allocation failed.
    pub(crate) fn new(
        queues: Arc<[ClientHandle]>,
        counters: Arc<CachePadded<ClusterCounters>>,
        (replica_credits, consumer_credits): (Arc<Credits>, Arc<Credits>),
    ) -> Result<Self, TryReserveError> {
        let room = replica_credits.cap() + consumer_credits.cap();
        Ok(Self {
            queues,
            counters,
            replica_credits,
            consumer_credits,
            done: (0, 0),
            unrouted: tables::vec(room)?,
        })
    }

    /// Counts an item's credit to give back at the end of the flush.
    fn settle(&mut self, credit: Credit) {
        match credit {
            Credit::Replica => self.done.0 += 1,
            Credit::Consumer => self.done.1 += 1,
            Credit::None => {}
        }
    }

    /// Routes one item; `false` if a full outbox refused it (the caller keeps it).
    fn route(&mut self, (queue, item, credit): ToRoute, ctx: &Context<BrokerMsg>) -> bool {
        let sent = match item {
            Routed::Confirm(c, mode) => send_confirm(ctx.dispatcher(), queue, c, mode),
            Routed::Receipt(r) => send_receipt(ctx.dispatcher(), queue, r),
            Routed::Detach(_, consumer) => ctx
                .dispatcher()
                .dispatch(queue, Event::Message(BrokerMsg::Detach { consumer })),
        };
        match (sent, item) {
            (Ok(()), Routed::Confirm(..)) => self.counters.routed.add(1),
            (Ok(()), Routed::Receipt(_)) => self.counters.receipts_routed.add(1),
            (Ok(()), Routed::Detach(..)) => {}
            (Err(DispatchError::Full(_)), _) => return false,
            (Err(_), _) => {
                tracing::debug!(
                    queue = item.queue().0,
                    "confirm or receipt refused: the queue is shutting down"
                );
            }
        }
        self.settle(credit);
        true
    }

    fn receive(&mut self, item: Routed, credit: Credit, ctx: &Context<BrokerMsg>) {
        let Some(&queue) = self.queues.get(item.queue().0 as usize) else {
            self.counters.unknown_queue.add(1);
            self.settle(credit);
            tracing::debug!(
                queue = item.queue().0,
                "confirm or receipt for an unknown queue"
            );
            return;
        };
        // Behind any kept item, in order. (The client is flushed after this event anyway:
        // the flush retries.)
        let confirm = (queue, item, credit);
        if !self.unrouted.is_empty() || !self.route(confirm, ctx) {
            // Credited items never exceed the preallocated room; a closing consumer's
            // detach beyond it grows the list (a close, not the event path).
            debug_assert!(
                credit == Credit::None || self.unrouted.len() < self.unrouted.capacity(),
                "more confirms kept than credits"
            );
            self.unrouted.push(confirm);
        }
    }
}

impl Client<BrokerMsg> for ClusterClient {
    fn on_event(&mut self, event: ClientEvent<BrokerMsg>, ctx: &mut Context<BrokerMsg>) {
        match event {
            ClientEvent::Message(BrokerMsg::Route(c, mode)) => {
                self.receive(Routed::Confirm(c, mode), Credit::Consumer, ctx)
            }
            ClientEvent::Message(BrokerMsg::Replica(c, mode)) => {
                self.receive(Routed::Confirm(c, mode), Credit::Replica, ctx)
            }
            ClientEvent::Message(BrokerMsg::Receipt(r)) => {
                self.receive(Routed::Receipt(r), Credit::Replica, ctx)
            }
            ClientEvent::Message(BrokerMsg::RouteDetach { queue, consumer }) => {
                self.receive(Routed::Detach(queue, consumer), Credit::None, ctx)
            }
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(other) => {
                tracing::warn!(?other, "unexpected message for the cluster")
            }
        }
    }

    fn flush(&mut self, ctx: &mut Context<BrokerMsg>) {
        // Confirms are routed as they come (the queue's processor batches them); here only
        // those a full outbox refused, oldest first, until one is refused again.
        let mut sent = 0;
        while sent < self.unrouted.len() && self.route(self.unrouted[sent], ctx) {
            sent += 1;
        }
        // Slides the rest down: no allocation.
        self.unrouted.drain(..sent);
        if !self.unrouted.is_empty() {
            ctx.flush_again();
        }
        let (replicas, consumers) = std::mem::take(&mut self.done);
        self.replica_credits.give_back(replicas);
        self.consumer_credits.give_back(consumers);
    }
}

impl Drop for ClusterClient {
    fn drop(&mut self) {
        // At shutdown: whatever was not routed is gone with the queues; its credits go back
        // so that no replica thread waits for them.
        let held = |credit| self.unrouted.iter().filter(|c| c.2 == credit).count();
        let (replicas, consumers) = (held(Credit::Replica), held(Credit::Consumer));
        let (done_replicas, done_consumers) = std::mem::take(&mut self.done);
        self.replica_credits.give_back(done_replicas + replicas);
        self.consumer_credits.give_back(done_consumers + consumers);
    }
}
