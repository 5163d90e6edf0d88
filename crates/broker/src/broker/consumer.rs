//! A consumer: how the broker opens one ([`Broker::open_consumer`]), and the calls its
//! application makes on it: [`Broker::close_consumer`], explicit confirms
//! ([`Broker::confirm`] and its async forms) and credit ([`Broker::add_credit`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use zerodispatch_core::{
    ClientHandle, ClientType, DispatchError, DispatcherHandle, Event, Placement,
};

use crate::error::BrokerError;
use crate::ids::{AppId, ConsumerId, Guid, QueueId};
use crate::message::{ConfirmRoute, Delivery};
use crate::protocol::BrokerMsg;
use crate::session::{ConsumerSession, Pacing};

use super::stepped::dispatch_waiting;
use super::{Broker, ConsumerOptions};

// Named in the docs only.
#[cfg(doc)]
use crate::message::Confirms;
#[cfg(doc)]
use crate::stats::SessionStats;

/// A consumer, as its application holds it. Dropping it closes it, as
/// [`Broker::close_consumer`] does (unless that closed it already): keep it while its
/// deliveries are wanted.
#[derive(Debug)]
#[must_use = "a consumer is closed when dropped"]
pub struct Consumer {
    id: ConsumerId,
    queue: QueueId,
    session: ClientHandle,
    dispatcher: DispatcherHandle<BrokerMsg>,
    /// Its broker is stepped ([`Broker::start_stepped`]).
    stepped: bool,
    /// Its session was sent `Close`.
    closed: AtomicBool,
    /// The broker's count of consumers open, which its close takes one from.
    open: Arc<AtomicUsize>,
}

impl Consumer {
    /// This consumer's id.
    #[must_use]
    pub fn id(&self) -> ConsumerId {
        self.id
    }

    /// The queue it consumes from.
    #[must_use]
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// Sends its session `Close`, once: later calls do nothing. On a processor thread whose
    /// outbox is full, the `Close` comes back and the consumer stays open.
    fn close(&self) -> Result<(), DispatchError<Event<BrokerMsg>>> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // At the flush the `Close` brings, the session sends its kept confirms, then the
        // queue's detach, then unregisters itself. A detach sent from here could overtake
        // those confirms, and the queue would take confirmed messages back for the others.
        let sent = dispatch_waiting(
            &self.dispatcher,
            self.stepped,
            self.session,
            Event::Message(BrokerMsg::Close),
        );
        if let Err(DispatchError::Full(_)) = &sent {
            self.closed.store(false, Ordering::Release);
        } else {
            // Closed (or the broker is shutting down): once, by the `closed` swap.
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
        sent
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        // Perhaps on a tokio worker (a task that held it): a drop cannot be async, and this
        // dispatch waits only for room in the session's queue.
        let closed = zerodispatch_core::allow_blocking(|| self.close());
        if let Err(e) = closed {
            // Shutting down (the dispatcher drops the session), or a full outbox on a
            // processor thread: the session stays, idle, until shutdown.
            tracing::debug!(
                consumer = self.id.0,
                ?e,
                "a dropped consumer was not closed"
            );
        }
    }
}

impl Broker {
    /// Opens a consumer of `app` on `queue` (app 0 for a priority queue); `on_delivery` is
    /// called with each batch of messages, on the consumer's session processor, and each is
    /// confirmed when it returns.
    ///
    /// # Errors
    ///
    /// `UnknownQueue`, `UnknownApp`; `ConsumerIdsExhausted` after `u32::MAX` opens;
    /// `ConsumerBatchTooLarge` if the machine cannot allocate
    /// the consumer's batch; `ShutDown`; `Register` if the dispatcher cannot take the
    /// session; `OutboxFull` on a processor thread whose outbox is full (the consumer is
    /// not opened).
    pub fn open_consumer(
        &self,
        queue: QueueId,
        app: AppId,
        options: ConsumerOptions,
        on_delivery: impl FnMut(&[Delivery]) + Send + 'static,
    ) -> Result<Consumer, BrokerError> {
        let &queue_handle = self
            .queues
            .get(queue.0 as usize)
            .ok_or(BrokerError::UnknownQueue(queue))?;
        if app.0 >= self.queue_configs[queue.0 as usize].mode.apps() {
            return Err(BrokerError::UnknownApp(queue, app));
        }
        // A `u64` count that never wraps: ids are never given twice, and `u32::MAX` (the
        // queues' "no consumer") never at all.
        let opened = self.consumers_opened.fetch_add(1, Ordering::Relaxed);
        let id = u32::try_from(opened)
            .ok()
            .filter(|&id| id != u32::MAX)
            .map(ConsumerId)
            .ok_or(BrokerError::ConsumerIdsExhausted)?;
        let config = &self.queue_configs[queue.0 as usize];
        // What the consumer can hold unconfirmed, at most, and receive between two flushes.
        let window = (config.window as usize).min(config.capacity);
        let batch = self.max_batch.min(window);
        let pacing = Pacing {
            confirms: options.confirms,
            credit: options.credit,
            batch,
            window,
        };
        let session = ConsumerSession::new(
            id,
            app,
            (queue, queue_handle),
            (options.route == ConfirmRoute::ViaCluster)
                .then(|| (self.cluster, self.consumer_credits.clone())),
            options.mode,
            pacing,
            Box::new(on_delivery),
            self.sessions.open(),
        )
        .map_err(|_| BrokerError::ConsumerBatchTooLarge { queue, window })?;
        // From an application thread the opener attaches the consumer itself: its `Attach`
        // is in the queue's FIFO before this returns, so before anything the caller does
        // next (a publish, a close and its detach). On a processor thread that dispatch
        // could wait in the thread's outbox, and a close made meanwhile from another
        // thread could detach the consumer before it is attached: the session attaches
        // itself then, at its first flush, before its own detach can go.
        let on_processor = self.dispatcher.current_processor().is_some();
        let mut session = session;
        session.attached = !on_processor;
        let session = self
            .dispatcher
            .register(ClientType::Session, session, Placement::LeastLoaded)
            .map_err(BrokerError::refused_register)?
            .erase();
        let first = if on_processor {
            (session, Event::Message(BrokerMsg::Open { consumer: id }))
        } else {
            let attach = BrokerMsg::Attach {
                consumer: id,
                app,
                session,
            };
            (queue_handle, Event::Message(attach))
        };
        if let Err(e) = dispatch_waiting(&self.dispatcher, self.stepped, first.0, first.1) {
            // Not attached: the session goes again (if that too finds the outbox full, it
            // stays registered, idle, until shutdown).
            let _ = self.dispatcher.unregister(session);
            return Err(self.refused(e));
        }
        // Counted once open (a refused open gives nothing back to count); Relaxed: a
        // count for a warning, read nowhere else.
        let open = self.consumers_open.fetch_add(1, Ordering::Relaxed) + 1;
        self.warn_if_undersized(open);
        Ok(Consumer {
            id,
            queue,
            session,
            dispatcher: self.dispatcher.clone(),
            stepped: self.stepped,
            closed: AtomicBool::new(false),
            open: self.consumers_open.clone(),
        })
    }

    /// Warns when the session processors' event capacity is below what the queues may send
    /// them (every consumer's window of PUSHes and every held message's ACK): past it,
    /// events wait in the queue processors' outboxes, and a full outbox makes the queues
    /// keep PUSHes and ACKs for a later flush. Nothing stalls, but latency grows.
    fn warn_if_undersized(&self, consumers: usize) {
        let window = self
            .queue_configs
            .iter()
            .map(|q| q.window as usize)
            .max()
            .unwrap_or(0);
        let held: usize = self.queue_configs.iter().map(|q| q.capacity).sum();
        let need = consumers * window + held;
        if need > self.event_capacity {
            tracing::warn!(
                consumers,
                window,
                held,
                event_capacity = self.event_capacity,
                "event capacity below consumers x window + queue capacity: events will wait in outboxes"
            );
        }
    }

    /// Closes a consumer, in order behind what was dispatched to it before: the confirms
    /// made before the close (by [`confirm`](Self::confirm), or on return from the
    /// handler, even one still running) release their messages; then its session detaches
    /// it from the queue, and what it was handed and did not confirm becomes deliverable to
    /// the other consumers of a priority queue (in a fanout queue its share of it is
    /// dropped). So a close waits, asynchronously, for a handler of its session's
    /// processor that is running; it never redelivers a confirmed message. The session
    /// then unregisters itself (its client slot freed; its counters stay in
    /// [`session_stats`](Self::session_stats)): PUSHes that reach it afterwards are dropped,
    /// counted `pushes_to_closed` while it is still registered and `stale` (in the
    /// processor's stats) after. Closing it again, or dropping it, does nothing more;
    /// dropping it unclosed closes it.
    ///
    /// # Errors
    ///
    /// `ShutDown`; `OutboxFull` on a processor thread whose outbox is full (nothing was
    /// done: call it again).
    pub fn close_consumer(&self, consumer: &Consumer) -> Result<(), BrokerError> {
        consumer.close().map_err(|e| self.refused(e))
    }

    /// Confirms a message delivered to a consumer opened with [`Confirms::Explicit`]: its
    /// session sends the confirm to the queue, which releases the consumer's share. The
    /// session keeps, by GUID, the token of each delivery it handed out and that is not
    /// confirmed yet (at most the queue's window), and the confirm names it
    /// ([`DeliveryToken`](crate::DeliveryToken)). A GUID the consumer was not handed (or has confirmed already) is counted
    /// ([`SessionStats::unknown_confirms`]) and dropped; a confirm for a closed consumer is
    /// dropped. Waits while the session processor's queue is full (on a processor thread, in
    /// its outbox). Allocates nothing.
    ///
    /// # Errors
    ///
    /// `ShutDown`; `OutboxFull` on a processor thread whose outbox is full.
    pub fn confirm(&self, consumer: &Consumer, guid: Guid) -> Result<(), BrokerError> {
        dispatch_waiting(
            &self.dispatcher,
            self.stepped,
            consumer.session,
            app_confirm(consumer, guid),
        )
        .map_err(|e| self.refused(e))
    }

    /// As [`confirm`](Self::confirm), for an application on an async runtime: waits for
    /// room as a future (the core's async door). Cancel-safe: dropped before it resolves,
    /// the confirm was not sent.
    ///
    /// # Errors
    ///
    /// As [`confirm`](Self::confirm).
    pub async fn confirm_async(&self, consumer: &Consumer, guid: Guid) -> Result<(), BrokerError> {
        self.dispatcher
            .dispatch_async(consumer.session, app_confirm(consumer, guid))
            .await
            .map_err(|e| self.refused(e))
    }

    /// Confirms many messages of one consumer, in order, in batch dispatches (as
    /// [`confirm_async`](Self::confirm_async) each). Cancel-safe: dropped before it
    /// resolves, the GUIDs not yet taken from `guids` were not confirmed.
    ///
    /// # Errors
    ///
    /// As [`confirm`](Self::confirm); the confirms before the refused one were sent.
    pub async fn confirm_batch_async(
        &self,
        consumer: &Consumer,
        guids: impl IntoIterator<Item = Guid>,
    ) -> Result<(), BrokerError> {
        let mut events = guids.into_iter().map(|guid| app_confirm(consumer, guid));
        self.dispatcher
            .dispatch_batch_async(consumer.session, &mut events)
            .await
            .map(drop)
            .map_err(|e| self.refused(e.error))
    }

    /// Lets the session of a consumer opened with a credit
    /// ([`ConsumerOptions::credit`]) hand `credit` more deliveries to `on_delivery`
    /// (saturating). Does nothing for a consumer without credit pacing. Waits as
    /// [`confirm`](Self::confirm).
    ///
    /// # Errors
    ///
    /// As [`confirm`](Self::confirm).
    pub fn add_credit(&self, consumer: &Consumer, credit: u32) -> Result<(), BrokerError> {
        dispatch_waiting(
            &self.dispatcher,
            self.stepped,
            consumer.session,
            credit_event(consumer, credit),
        )
        .map_err(|e| self.refused(e))
    }

    /// As [`add_credit`](Self::add_credit), waiting for room as a future. Cancel-safe:
    /// dropped before it resolves, the credit was not given.
    ///
    /// # Errors
    ///
    /// As [`confirm`](Self::confirm).
    pub async fn add_credit_async(
        &self,
        consumer: &Consumer,
        credit: u32,
    ) -> Result<(), BrokerError> {
        self.dispatcher
            .dispatch_async(consumer.session, credit_event(consumer, credit))
            .await
            .map_err(|e| self.refused(e))
    }
}

/// An application's confirm of `guid`, for `consumer`'s session.
fn app_confirm(consumer: &Consumer, guid: Guid) -> Event<BrokerMsg> {
    Event::Message(BrokerMsg::AppConfirm {
        consumer: consumer.id,
        guid,
    })
}

/// More credit for `consumer`'s session.
fn credit_event(consumer: &Consumer, credit: u32) -> Event<BrokerMsg> {
    Event::Message(BrokerMsg::Credit {
        consumer: consumer.id,
        credit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BrokerConfig, ConsumerOptions, QueueConfig, QueueMode};

    #[test]
    fn consumer_ids_are_never_given_twice_nor_the_queues_no_consumer() {
        let broker = Broker::start(BrokerConfig {
            queues: vec![QueueConfig::new(QueueMode::Priority)],
            ..BrokerConfig::default()
        })
        .unwrap();
        let open = || {
            broker.open_consumer(
                QueueId(0),
                AppId(0),
                ConsumerOptions::default(),
                |_: &[crate::Delivery]| {},
            )
        };
        let first = open().unwrap();
        assert_eq!(first.id(), ConsumerId(0));
        broker
            .consumers_opened
            .store(u64::from(u32::MAX) - 1, Ordering::Relaxed);
        assert_eq!(open().unwrap().id(), ConsumerId(u32::MAX - 1));
        for _ in 0..2 {
            assert!(matches!(open(), Err(BrokerError::ConsumerIdsExhausted)));
        }
        drop(first);
        assert_eq!(broker.consumers_open.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_count_of_open_consumers_the_size_warning_reads_is_of_those_open_not_opened() {
        let broker = Broker::start(BrokerConfig {
            queues: vec![QueueConfig::new(QueueMode::Priority)],
            ..BrokerConfig::default()
        })
        .unwrap();
        let open = || {
            broker
                .open_consumer(
                    QueueId(0),
                    AppId(0),
                    ConsumerOptions::default(),
                    |_: &[crate::Delivery]| {},
                )
                .unwrap()
        };
        let count = || broker.consumers_open.load(Ordering::Relaxed);
        for _ in 0..100 {
            drop(open());
        }
        assert_eq!(count(), 0, "opened and closed");
        let (a, b) = (open(), open());
        assert_eq!(count(), 2);
        broker.close_consumer(&a).unwrap();
        broker.close_consumer(&a).unwrap();
        assert_eq!(count(), 1, "a second close takes nothing");
        drop(a);
        drop(b);
        assert_eq!(count(), 0);
    }

    /// An open refused at its first dispatch (a processor thread's outbox full) counted
    /// the consumer as open for ever.
    #[test]
    fn a_consumer_whose_open_is_refused_is_not_counted_open() {
        use std::sync::{Arc, Barrier, mpsc};
        use zerodispatch_core::Callback;
        let broker = Arc::new(
            Broker::start(BrokerConfig {
                queues: vec![QueueConfig::new(QueueMode::Priority)],
                session_processors: 1,
                event_capacity: 8,
                ..BrokerConfig::default()
            })
            .unwrap(),
        );
        // Hold the session processor: the consumers' `Open`s fill its queue, then the
        // cluster processor's outbox.
        let gate = Arc::new(Barrier::new(2));
        let held = gate.clone();
        let session = broker.processors(ClientType::Session)[0];
        let hold = move || {
            held.wait();
            held.wait();
        };
        broker.execute(session, Callback::new(hold)).unwrap();
        gate.wait();
        let (answer, answered) = mpsc::channel();
        let weak = Arc::downgrade(&broker);
        let open_until_refused = move || {
            let broker = weak.upgrade().unwrap();
            let mut opened = Vec::new();
            let refused = loop {
                let open = broker.open_consumer(
                    QueueId(0),
                    AppId(0),
                    ConsumerOptions::default(),
                    |_: &[crate::Delivery]| {},
                );
                match open {
                    Ok(consumer) => opened.push(consumer),
                    Err(e) => break e,
                }
                assert!(opened.len() < 1_000, "never refused");
            };
            answer.send((opened, refused)).unwrap();
        };
        let cluster = broker.processors(ClientType::Cluster)[0];
        broker
            .execute(cluster, Callback::new(open_until_refused))
            .unwrap();
        let (opened, refused) = answered.recv().unwrap();
        gate.wait();
        assert_eq!(refused, BrokerError::OutboxFull(cluster));
        let count = || broker.consumers_open.load(Ordering::Relaxed);
        assert_eq!(count(), opened.len(), "the refused one is not open");
        drop(opened);
        assert_eq!(count(), 0);
    }
}
