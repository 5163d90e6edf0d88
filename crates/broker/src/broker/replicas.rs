//! The calls the replica nodes' threads make ([`Broker::replica_confirm`],
//! [`Broker::replica_receipt`]), routed through the cluster processor, and the cluster's
//! state ([`Broker::cluster_state`]).

use zerodispatch_core::Event;

use crate::error::BrokerError;
use crate::message::{Confirm, ConfirmMode};
use crate::protocol::BrokerMsg;
use crate::replication::Receipt;
use crate::stats::ClusterState;

use super::stepped::dispatch_waiting;
use super::{Broker, sync_refused};

// Named in the docs only.
#[cfg(doc)]
use crate::message::Delivery;
#[cfg(doc)]
use crate::replication::Replication;
#[cfg(doc)]
use crate::stats::QueueStats;

impl Broker {
    /// A confirm from a replica node, routed by the cluster processor to its queue in
    /// `mode`. Call it from the threads that model the replicas. The confirm names the
    /// delivery by its token ([`Confirm::token`], from [`Delivery::token`]): the queue
    /// applies it only if that slot holds `confirm.guid`, and counts it
    /// ([`QueueStats::unknown_guid`]) otherwise. Waits while the cluster
    /// has as many replica confirms not yet routed as its processor's event capacity
    /// (back-pressure to the replica threads, so that a flood of them cannot grow the
    /// cluster's tables). Allocates nothing.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use zerodispatch_broker::*;
    ///
    /// let broker = Broker::start(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     ..BrokerConfig::default()
    /// })?;
    /// let producer = broker.open_producer(16, |_: &[Ack]| {})?;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = seen.clone();
    /// let options = ConsumerOptions { confirms: Confirms::Explicit, ..ConsumerOptions::default() };
    /// let consumer = broker.open_consumer(QueueId(0), AppId(0), options, move |b: &[Delivery]| {
    ///     sink.lock().unwrap().extend_from_slice(b)
    /// })?;
    /// producer.publish(QueueId(0), Payload { handle: 1, len: 8 })?;
    /// broker.quiesce()?;
    /// let d: Delivery = seen.lock().unwrap()[0];
    /// // A token that does not name the message's slot is refused, never misapplied.
    /// let confirm = Confirm {
    ///     queue: d.queue,
    ///     guid: d.guid,
    ///     token: DeliveryToken(d.token.0 + 1),
    ///     consumer: consumer.id(),
    ///     app: d.app,
    /// };
    /// broker.replica_confirm(confirm, ConfirmMode::Inline)?;
    /// broker.quiesce()?;
    /// assert_eq!((broker.queue_stats()[0].unknown_guid, broker.queue_stats()[0].held), (1, 1));
    /// // The delivery's own token releases it.
    /// broker.replica_confirm(Confirm { token: d.token, ..confirm }, ConfirmMode::Inline)?;
    /// broker.quiesce()?;
    /// assert_eq!(broker.queue_stats()[0].released, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `ShutDown`; on one of the broker's processor threads, `OnProcessorThread` when it
    /// would have to wait for a credit, `OutboxFull` when the processor's outbox is full.
    pub fn replica_confirm(&self, confirm: Confirm, mode: ConfirmMode) -> Result<(), BrokerError> {
        self.take_replica_credit()?;
        dispatch_waiting(
            &self.dispatcher,
            self.stepped,
            self.cluster,
            Event::Message(BrokerMsg::Replica(confirm, mode)),
        )
        .map_err(|e| {
            self.replica_credits.give_back(1);
            self.refused(e)
        })
    }

    /// A replica's receipt: `receipt.replica` has stored message `receipt.guid`. Routed by
    /// the cluster processor to its queue as an inline functor; the receipt that makes the
    /// [`Replication`] quorum sends the message's ACK. A receipt for a message the queue
    /// does not hold (never stored, or released already), or a second one from the same
    /// replica, is counted in [`QueueStats`] and ignored. Waits, as
    /// [`replica_confirm`](Self::replica_confirm) does and from the same pool of credits,
    /// while the cluster is behind. Allocates nothing.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use zerodispatch_broker::*;
    ///
    /// let broker = Broker::start(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     replication: Some(Replication { replicas: 2, quorum: 1 }),
    ///     ..BrokerConfig::default()
    /// })?;
    /// let acks = Arc::new(Mutex::new(Vec::new()));
    /// let sink = acks.clone();
    /// let producer = broker.open_producer(16, move |b: &[Ack]| sink.lock().unwrap().extend_from_slice(b))?;
    /// let guid = producer.publish(QueueId(0), Payload { handle: 1, len: 8 })?;
    /// broker.quiesce()?;
    /// assert!(acks.lock().unwrap().is_empty()); // stored, but no replica has it yet
    /// broker.replica_receipt(Receipt { queue: QueueId(0), guid, replica: ReplicaId(1) })?;
    /// broker.quiesce()?;
    /// assert_eq!(acks.lock().unwrap()[0].status, AckStatus::Stored);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `UnknownQueue`; `UnknownReplica` for a replica the broker's [`Replication`] does not
    /// have (any, without replication); `ShutDown`; on one of the broker's processor
    /// threads, `OnProcessorThread` when it would have to wait for a credit, `OutboxFull`
    /// when the processor's outbox is full.
    pub fn replica_receipt(&self, receipt: Receipt) -> Result<(), BrokerError> {
        if receipt.queue.0 as usize >= self.queues.len() {
            return Err(BrokerError::UnknownQueue(receipt.queue));
        }
        let replicas = self.replication.map_or(0, |r| r.replicas);
        if receipt.replica.0 >= replicas {
            return Err(BrokerError::UnknownReplica {
                replica: receipt.replica,
                replicas,
            });
        }
        self.take_replica_credit()?;
        dispatch_waiting(
            &self.dispatcher,
            self.stepped,
            self.cluster,
            Event::Message(BrokerMsg::Receipt(receipt)),
        )
        .map_err(|e| {
            self.replica_credits.give_back(1);
            self.refused(e)
        })
    }

    /// Takes one of the replica credits, waiting for one off the processor threads; on a
    /// stepped broker, running the processors until idle instead, which routes every
    /// confirm and receipt and gives their credits back.
    fn take_replica_credit(&self) -> Result<(), BrokerError> {
        if self.replica_credits.try_take() {
            return Ok(());
        }
        self.off_processor_threads()?;
        if !self.stepped {
            self.replica_credits.take();
            return Ok(());
        }
        self.run_stepped()?;
        // Where threads would wait forever, the stepped broker fails, naming why.
        assert!(
            self.replica_credits.try_take(),
            "zerodispatch_broker: no replica credit free once the processors are idle: a credit was not given back"
        );
        Ok(())
    }

    /// The cluster's state, answered by a dispatcher callback on the cluster processor (so
    /// after every confirm enqueued to it before this call was routed). Waits for the
    /// cluster processor: for application threads only.
    ///
    /// # Errors
    ///
    /// `ShutDown`; `OnProcessorThread` when called on one of the broker's processor threads
    /// (the cluster processor's own would wait for itself forever, and no processor may
    /// wait for another); `ProcessorDied` if the cluster processor's thread died before it
    /// answered (the query is the core's `call`, whose request answers even when dropped
    /// unrun, so this never waits forever).
    pub fn cluster_state(&self) -> Result<ClusterState, BrokerError> {
        let (counters, queues) = (self.cluster_counters.clone(), self.queues.len());
        self.dispatcher
            .call(self.cluster.processor(), move || ClusterState {
                routed: counters.routed.get(),
                receipts_routed: counters.receipts_routed.get(),
                unknown_queue: counters.unknown_queue.get(),
                queues,
            })
            .map_err(sync_refused)
    }
}
