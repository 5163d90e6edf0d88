//! The cluster client (on the cluster processor): receives confirms from replica nodes, as
//! a primary does, and from consumers whose confirms go through the cluster, and routes
//! each to its queue's processor.
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
//! * Replica confirms take theirs in `Broker::replica_confirm`, on application threads,
//!   which wait for one while the cluster is behind: a flood of them is slowed down there.
//! * Consumers' routed confirms take theirs in the consumer's session, on a processor
//!   thread, which never waits: without a credit the confirm stays with the session for its
//!   next flush, as one refused by a full outbox does. A separate pool, so that replica
//!   threads cannot starve consumers of credits.

use std::collections::TryReserveError;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use zerodispatch_core::{Client, ClientEvent, ClientHandle, Context, DispatchError};

use crate::credits::Credits;
use crate::message::{BrokerMsg, Confirm, ConfirmMode};
use crate::queue::send_confirm;
use crate::stats::ClusterCounters;
use crate::tables;

/// A confirm the cluster has to route: its queue's client, the confirm, how it travels,
/// and whether it holds a replica credit (or else a consumer's).
type ToRoute = (ClientHandle, Confirm, ConfirmMode, bool);

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

    /// Counts a confirm's credit to give back at the end of the flush.
    fn settle(&mut self, replica: bool) {
        if replica {
            self.done.0 += 1;
        } else {
            self.done.1 += 1;
        }
    }

    /// Routes one confirm; `false` if a full outbox refused it (the caller keeps it).
    fn route(&mut self, (queue, c, mode, replica): ToRoute, ctx: &Context<BrokerMsg>) -> bool {
        match send_confirm(ctx.dispatcher(), queue, c, mode) {
            Ok(()) => self.counters.routed.add(1),
            Err(DispatchError::Full(_)) => return false,
            Err(_) => {
                tracing::debug!(
                    queue = c.queue.0,
                    "confirm refused: the queue is shutting down"
                );
            }
        }
        self.settle(replica);
        true
    }

    fn receive(&mut self, c: Confirm, mode: ConfirmMode, replica: bool, ctx: &Context<BrokerMsg>) {
        let Some(&queue) = self.queues.get(c.queue.0 as usize) else {
            self.counters.unknown_queue.add(1);
            self.settle(replica);
            tracing::debug!(queue = c.queue.0, "confirm for an unknown queue");
            return;
        };
        // Behind any kept confirm, in order. (The client is flushed after this event
        // anyway: the flush retries.)
        let confirm = (queue, c, mode, replica);
        if !self.unrouted.is_empty() || !self.route(confirm, ctx) {
            debug_assert!(
                self.unrouted.len() < self.unrouted.capacity(),
                "more confirms kept than credits"
            );
            self.unrouted.push(confirm);
        }
    }
}

impl Client<BrokerMsg> for ClusterClient {
    fn on_event(&mut self, event: ClientEvent<BrokerMsg>, ctx: &mut Context<BrokerMsg>) {
        match event {
            ClientEvent::Message(BrokerMsg::Route(c, mode)) => self.receive(c, mode, false, ctx),
            ClientEvent::Message(BrokerMsg::Replica(c, mode)) => self.receive(c, mode, true, ctx),
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
        let replicas = self.unrouted.iter().filter(|c| c.3).count();
        let consumers = self.unrouted.len() - replicas;
        let (done_replicas, done_consumers) = std::mem::take(&mut self.done);
        self.replica_credits.give_back(done_replicas + replicas);
        self.consumer_credits.give_back(done_consumers + consumers);
    }
}
