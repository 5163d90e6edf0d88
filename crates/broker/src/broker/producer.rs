//! A producer: how the broker opens one ([`Broker::open_producer`],
//! [`Broker::open_producer_with`]), and the handle its application publishes with
//! ([`Producer`]: `publish`, `send`, `try_send` and their forms). Its close, and the
//! protocol that orders it after the publishes that race it, are in `producer/close.rs`;
//! the thread that ticks a timer producer's session, in `producer/ticker.rs`.

mod close;
mod ticker;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use zerodispatch_core::{
    ClientHandle, ClientType, DispatchError, DispatcherHandle, Event, Placement,
};

use crate::credits::Credits;
use crate::error::{BrokerError, SendError};
use crate::ids::{Guid, Payload, ProducerId, ProducerKey, QueueId};
use crate::limits::{FRAME_OVERHEAD, MAX_UNCONFIRMED};
use crate::message::Ack;
use crate::names::Names;
use crate::protocol::BrokerMsg;
use crate::session::{AckHandler, FlushStrategy, ProducerConfig, ProducerSession};

use self::close::{CLOSED, Inside};
use self::ticker::{Ticker, reserve, start_ticker, tick_every};
use super::Broker;

/// A producer: publishes from any thread of the application. Dropping it closes it
/// (waiting up to 1 s for the outcomes of what is in flight, or not at all on a processor
/// thread). A message that races a close from another thread is either refused, and handed
/// back, or gets its outcome: never lost.
#[derive(Debug)]
pub struct Producer {
    key: ProducerKey,
    session: ClientHandle,
    next_seq: AtomicU64,
    dispatcher: DispatcherHandle<BrokerMsg>,
    /// Its broker is stepped ([`Broker::start_stepped`]): nothing may wait for a processor.
    stepped: bool,
    config: ProducerConfig,
    credits: Arc<Credits>,
    /// `CLOSED`, `RETIRED`, and the count of calls inside `enqueue` (the bits below
    /// `RETIRED`): the protocol in `producer/close.rs`.
    state: AtomicUsize,
    /// The timer that sends `Tick`s (timer aggregation, confirm timeouts), if any.
    ticker: Mutex<Option<Ticker>>,
    /// A named producer's table of names, where `close` frees its name; `None` for an
    /// anonymous producer.
    names: Option<Arc<Mutex<Names>>>,
}

impl Producer {
    /// This producer's id: a named producer's is its name's, the same each time the name
    /// is opened while the broker keeps it (see
    /// [`Broker::open_named_producer`](crate::Broker::open_named_producer)).
    #[must_use]
    pub fn id(&self) -> ProducerId {
        self.key.id
    }

    /// The generation of this producer's id, which its GUIDs carry
    /// ([`Guid::generation`]): 0 unless the id was held by other producers before.
    #[must_use]
    pub fn generation(&self) -> u32 {
        self.key.generation
    }

    /// The GUID of this producer's message numbered `publish_id`
    /// ([`publish_with_id`](Self::publish_with_id)).
    #[must_use]
    pub fn guid(&self, publish_id: u64) -> Guid {
        self.key.guid(publish_id)
    }

    /// Publishes a message to `queue` without taking a credit: no back-pressure beyond the
    /// session's table, which rejects past `max_unconfirmed` (`RejectedProducerFull`). Its
    /// outcome comes to the producer's `on_ack`, exactly once. Waits while the session
    /// processor's queue is full. Allocates nothing.
    ///
    /// On a processor thread of the broker (in `on_ack`, say) it never waits: a full
    /// queue is waited for in the processor's outbox, and only when that is full too is the
    /// message handed back (`WouldBlock`).
    ///
    /// # Errors
    ///
    /// The message was not published, and comes back in the error:
    /// `TooLarge` for a message that cannot fit a frame; `Closed` after
    /// [`close`](Self::close); `ShutDown` once the broker is shutting down; `WouldBlock` on
    /// a processor thread whose outbox is full.
    ///
    /// # Panics
    ///
    /// On a tokio runtime's worker thread, with the core's feature `tokio`: it may wait
    /// there; use [`publish_async`](Self::publish_async).
    #[track_caller]
    pub fn publish(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        zerodispatch_core::assert_may_block("Producer::publish", "publish_async");
        self.check(payload, None)?;
        self.enqueue(queue, payload, false, None)
    }

    /// As [`publish`](Self::publish), numbered by the caller: the message's GUID is
    /// [`self.guid(publish_id)`](Self::guid). The form a named producer
    /// ([`Broker::open_named_producer`]) publishes with, so that a message published again
    /// with its id after a lost connection is known for a duplicate by its queue: ACKed
    /// again, not stored or delivered twice (`QueueStats::deduplicated`).
    ///
    /// Each queue keeps, per name, which ids it has stored, exactly, over a window of the
    /// [`BrokerConfig::dedup_window`](crate::BrokerConfig::dedup_window) ids up to the
    /// highest it stored (`dedup.rs`), across the name's reopenings. An id it stored is a
    /// duplicate: ACKed `Stored` again, not stored or delivered twice. An id it did not
    /// store, above the highest or inside the window, is stored, in whatever order ids come:
    /// a message refused (`RejectedQueueFull`, say) may be published again with its id
    /// after later ones were stored. An id older than the window (`highest - id >=
    /// dedup_window`) is refused `RejectedOutOfWindow`: the queue can no longer tell. So ids
    /// need not increase, but each names one message: an id given to another message of
    /// the name while the first is inside the window is taken for the first. Every `u64`,
    /// `u64::MAX` included, is an id like any other. An anonymous producer may use this
    /// call too (never deduplicated): its ids should not mix with
    /// [`publish`](Self::publish)'s numbering. Whichever the numbering, a message whose GUID
    /// is in flight on the producer already is not sent (`NotSent`); mixing the two makes
    /// each caller-numbered publish scan the messages in flight to tell.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use zerodispatch_broker::*;
    ///
    /// let broker = Broker::start(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     ..BrokerConfig::default()
    /// })?;
    /// let acks = Arc::new(Mutex::new(Vec::new()));
    /// let sink = acks.clone();
    /// let on_ack = move |b: &[Ack]| sink.lock().unwrap().extend(b.iter().map(|a| a.status));
    /// let producer = broker.open_named_producer("orders", ProducerConfig::default(), on_ack)?;
    /// let payload = Payload { handle: 1, len: 8 };
    /// producer.publish_with_id(QueueId(0), payload, 7)?;
    /// broker.quiesce()?; // stored and ACKed; say the ACK was lost
    /// producer.publish_with_id(QueueId(0), payload, 7)?; // the same message again
    /// broker.quiesce()?;
    /// assert_eq!(*acks.lock().unwrap(), [AckStatus::Stored, AckStatus::Stored]);
    /// assert_eq!(broker.queue_stats()[0].stored, 1);
    /// assert_eq!(broker.queue_stats()[0].deduplicated, 1);
    /// assert_eq!(broker.last_stored("orders", QueueId(0))?, Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish).
    ///
    /// # Panics
    ///
    /// As [`publish`](Self::publish); use [`publish_with_id_async`](Self::publish_with_id_async).
    #[track_caller]
    pub fn publish_with_id(
        &self,
        queue: QueueId,
        payload: Payload,
        publish_id: u64,
    ) -> Result<Guid, SendError> {
        zerodispatch_core::assert_may_block("Producer::publish_with_id", "publish_with_id_async");
        self.check(payload, Some(publish_id))?;
        self.enqueue(queue, payload, false, Some(publish_id))
    }

    /// As [`publish`](Self::publish), for a producer on an async runtime: where `publish`
    /// would wait for room in the session processor's queue, this future waits (the core's
    /// [async door](zerodispatch_core::DispatcherHandle::dispatch_async)), so that no
    /// runtime thread blocks or spins. Allocates nothing.
    ///
    /// Cancel-safe: dropped before it resolves, the message was not published and gets no
    /// outcome; resolved, it was published (and gets exactly one) or comes back in the
    /// error.
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish).
    pub async fn publish_async(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        self.publish_numbered_async(queue, payload, None).await
    }

    /// As [`publish_with_id`](Self::publish_with_id), waiting for room as a future, as
    /// [`publish_async`](Self::publish_async) does. Cancel-safe as that.
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish).
    pub async fn publish_with_id_async(
        &self,
        queue: QueueId,
        payload: Payload,
        publish_id: u64,
    ) -> Result<Guid, SendError> {
        self.publish_numbered_async(queue, payload, Some(publish_id))
            .await
    }

    async fn publish_numbered_async(
        &self,
        queue: QueueId,
        payload: Payload,
        publish_id: Option<u64>,
    ) -> Result<Guid, SendError> {
        self.check(payload, publish_id)?;
        let Some(inside) = Inside::enter(self) else {
            return Err(SendError::Closed(payload));
        };
        let (guid, publish) = self.message(queue, payload, false, publish_id);
        // If this future is dropped before the dispatch resolves, `inside` is dropped with
        // it: it takes the acceptance back (the event is dropped unsent) and leaves.
        let sent = self.dispatcher.dispatch_async(self.session, publish).await;
        inside.finish(sent.is_ok());
        sent.map(|()| guid).map_err(|e| publish_refused(e, payload))
    }

    /// Checks a message before it is taken: `publish_id` is the caller's number, if any
    /// (a named producer's messages must have one).
    fn check(&self, payload: Payload, publish_id: Option<u64>) -> Result<(), SendError> {
        if self.names.is_some() && publish_id.is_none() {
            return Err(SendError::NeedsPublishId(payload));
        }
        // An early answer only, so that `send` does not wait for a credit when closed:
        // `enqueue` checks again as it enters. Relaxed: only the flag is read.
        if self.state.load(Ordering::Relaxed) & CLOSED != 0 {
            return Err(SendError::Closed(payload));
        }
        let needs = payload.len as usize + FRAME_OVERHEAD;
        if needs > self.config.max_frame_bytes {
            return Err(SendError::TooLarge {
                payload,
                needs,
                max_frame_bytes: self.config.max_frame_bytes,
            });
        }
        Ok(())
    }

    /// Hands a message to the session, inside the close protocol (step 1); a credited
    /// message's credit is given back if it is not handed over.
    fn enqueue(
        &self,
        queue: QueueId,
        payload: Payload,
        credited: bool,
        publish_id: Option<u64>,
    ) -> Result<Guid, SendError> {
        let Some(inside) = Inside::enter(self) else {
            if credited {
                self.credits.give_back(1);
            }
            return Err(SendError::Closed(payload));
        };
        let (guid, publish) = self.message(queue, payload, credited, publish_id);
        let sent = self.dispatcher.dispatch(self.session, publish);
        if sent.is_err() && credited {
            self.credits.give_back(1);
        }
        inside.finish(sent.is_ok());
        sent.map(|()| guid).map_err(|e| publish_refused(e, payload))
    }

    /// Numbers a message (with `publish_id`, or the producer's own next number) and counts
    /// it accepted: its outcome is now owed (or, if it is not handed over, taken back by
    /// `Inside`).
    fn message(
        &self,
        queue: QueueId,
        payload: Payload,
        credited: bool,
        publish_id: Option<u64>,
    ) -> (Guid, Event<BrokerMsg>) {
        let seq = publish_id.unwrap_or_else(|| self.next_seq.fetch_add(1, Ordering::Relaxed));
        let guid = self.key.guid(seq);
        self.credits.accept();
        let publish = BrokerMsg::Publish {
            queue,
            guid,
            payload,
            credited,
            numbered: publish_id.is_some(),
        };
        (guid, Event::Message(publish))
    }

    /// Sends a message to `queue`, waiting while `max_unconfirmed` messages are without an
    /// outcome. The outcome (confirmed, timed out, rejected, not sent or closed) comes to
    /// `on_ack`, exactly once. Allocates nothing.
    ///
    /// On a processor thread of the broker (in `on_ack`, `on_delivery`, a dispatcher
    /// callback) it never waits: the credits of the batch `on_ack` is called with are free
    /// already, so sending from `on_ack` works at any cap, but at the cap it hands the
    /// message back (`WouldBlock`) rather than wait for a processor to free a credit.
    ///
    /// # Errors
    ///
    /// The message was not sent, and comes back in the error: `TooLarge` for a message
    /// that cannot fit a frame; `Closed` after [`close`](Self::close); `ShutDown` once the
    /// broker is shutting down; `WouldBlock` on a processor thread at the cap or with its
    /// outbox full.
    ///
    /// # Panics
    ///
    /// On a tokio runtime's worker thread, with the core's feature `tokio`: it waits there
    /// at the cap; use [`try_send`](Self::try_send) or
    /// [`publish_async`](Self::publish_async).
    #[track_caller]
    pub fn send(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        zerodispatch_core::assert_may_block("Producer::send", "try_send");
        self.check(payload, None)?;
        if !self.credits.try_take() {
            // A stepped broker's processors run only when this thread turns them: waiting
            // here would never end.
            if self.on_processor_thread() || self.stepped {
                return Err(SendError::WouldBlock(payload));
            }
            self.credits.take();
        }
        self.enqueue(queue, payload, true, None)
    }

    /// Sends a message to `queue` if the cap allows, and hands it back otherwise.
    ///
    /// # Errors
    ///
    /// `Full` at the cap (on a processor thread too), and as [`send`](Self::send).
    pub fn try_send(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        self.check(payload, None)?;
        if !self.credits.try_take() {
            return Err(SendError::Full(payload));
        }
        self.enqueue(queue, payload, true, None)
    }

    /// Messages sent with `send` or `try_send` and without an outcome yet.
    #[must_use]
    pub fn unconfirmed(&self) -> usize {
        self.credits.in_flight()
    }

    /// Whether the calling thread is one of the broker's processor threads, where nothing
    /// may wait for a processor. A thread-local read.
    fn on_processor_thread(&self) -> bool {
        self.dispatcher.current_processor().is_some()
    }
}

impl Broker {
    /// Opens a producer whose session (on the least-loaded session processor) keeps up to
    /// `max_unconfirmed` messages without an outcome (see
    /// [`ProducerConfig::max_unconfirmed`]; the other settings are the defaults), and
    /// reports outcomes in batches to `on_ack`. Close it with [`Producer::close`], or by
    /// dropping it.
    ///
    /// # Errors
    ///
    /// `MaxUnconfirmedOutOfRange` unless `max_unconfirmed` is 1 to [`MAX_UNCONFIRMED`], and
    /// as [`open_producer_with`](Self::open_producer_with).
    pub fn open_producer(
        &self,
        max_unconfirmed: usize,
        on_ack: impl FnMut(&[Ack]) + Send + 'static,
    ) -> Result<Producer, BrokerError> {
        let config = ProducerConfig {
            max_unconfirmed,
            ..ProducerConfig::default()
        };
        self.open_producer_with(config, on_ack)
    }

    /// Opens a producer with a full configuration: flush strategy, caps, confirm timeout.
    /// Close it with [`Producer::close`], or by dropping it.
    ///
    /// # Errors
    ///
    /// For an invalid configuration, `MaxUnconfirmedOutOfRange`, `ZeroBatchSize`,
    /// `FrameTooSmall`, `ZeroTimerInterval` or `ZeroConfirmTimeout`;
    /// `ProducerTablesTooLarge` if the machine cannot allocate the session's tables;
    /// `ShutDown`; or `Register` if the dispatcher cannot take the session.
    pub fn open_producer_with(
        &self,
        config: ProducerConfig,
        on_ack: impl FnMut(&[Ack]) + Send + 'static,
    ) -> Result<Producer, BrokerError> {
        Self::check_producer(config)?;
        let n = self.anonymous_producers.fetch_add(1, Ordering::Relaxed);
        let key = anonymous_key(self.max_producer_names, n)?;
        self.open_session(key, config, Box::new(on_ack), None)
    }

    /// Checks a producer's configuration.
    pub(super) fn check_producer(config: ProducerConfig) -> Result<(), BrokerError> {
        if config.max_unconfirmed == 0 || config.max_unconfirmed > MAX_UNCONFIRMED {
            return Err(BrokerError::MaxUnconfirmedOutOfRange {
                max_unconfirmed: config.max_unconfirmed,
            });
        }
        if config.batch_size == 0 {
            return Err(BrokerError::ZeroBatchSize);
        }
        if config.max_frame_bytes <= FRAME_OVERHEAD {
            return Err(BrokerError::FrameTooSmall {
                max_frame_bytes: config.max_frame_bytes,
            });
        }
        if matches!(config.flush, FlushStrategy::Timer(d) if d.is_zero()) {
            return Err(BrokerError::ZeroTimerInterval);
        }
        if config.confirm_timeout.is_some_and(|d| d.is_zero()) {
            return Err(BrokerError::ZeroConfirmTimeout);
        }
        Ok(())
    }

    /// Opens the session of producer `key` (its configuration checked).
    pub(super) fn open_session(
        &self,
        key: ProducerKey,
        config: ProducerConfig,
        on_ack: AckHandler,
        names: Option<Arc<Mutex<Names>>>,
    ) -> Result<Producer, BrokerError> {
        let credits = Arc::new(Credits::new(config.max_unconfirmed));
        let session = ProducerSession::new(
            key.id,
            self.queues.clone(),
            config,
            credits.clone(),
            (on_ack, self.max_batch),
            self.sessions.open(),
        )
        .map_err(|_| BrokerError::ProducerTablesTooLarge {
            max_unconfirmed: config.max_unconfirmed,
        })?;
        // A producer with a ticker goes where the fewest tickers run (each session
        // processor runs at most `timed_producers`), its place reserved before it is placed;
        // one without, to the least loaded.
        let every = tick_every(config);
        let slot = every
            .map(|_| reserve(&self.timed_producers, self.timed_producers_limit))
            .transpose()?;
        let placement = slot.as_ref().map_or(Placement::LeastLoaded, |slot| {
            Placement::Processor(slot.index())
        });
        let session = self
            .dispatcher
            .register(ClientType::Session, session, placement)
            .map_err(BrokerError::refused_register)?
            .erase();
        let ticker = match every.zip(slot) {
            None => None,
            Some((every, slot)) => {
                match start_ticker(
                    self.dispatcher.clone(),
                    session,
                    every,
                    (slot, self.timed_producers_limit),
                ) {
                    Ok(ticker) => Some(ticker),
                    Err(e) => {
                        // Nothing was sent to the session: it goes unused.
                        let _ = self.dispatcher.unregister(session);
                        return Err(e);
                    }
                }
            }
        };
        if let Some(names) = &names {
            // Before any message of it can reach a queue: a queue tells the newer of two
            // sessions of the name by this.
            names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .opened(key.id, session);
        }
        Ok(Producer {
            key,
            session,
            next_seq: AtomicU64::new(0),
            dispatcher: self.dispatcher.clone(),
            stepped: self.stepped,
            config,
            credits,
            state: AtomicUsize::new(0),
            ticker: Mutex::new(ticker),
            names,
        })
    }
}

/// The id and generation of the `n`th anonymous producer of a broker whose names take the
/// ids below `names`: the ids above them in turn, each once per generation, so that no
/// two producers' GUIDs are alike however many open and close.
fn anonymous_key(names: u32, n: u64) -> Result<ProducerKey, BrokerError> {
    let ids = (1 << 32) - u64::from(names);
    let generation = u32::try_from(n / ids).map_err(|_| BrokerError::ProducerIdsExhausted)?;
    // Below 2^32: `names + n % ids < names + ids`.
    let id = ProducerId((u64::from(names) + n % ids) as u32);
    Ok(ProducerKey { id, generation })
}

/// The error for a publish the dispatcher handed back.
fn publish_refused(e: DispatchError<Event<BrokerMsg>>, payload: Payload) -> SendError {
    match e {
        // Only on a processor thread whose outbox is full: nothing is closed.
        DispatchError::Full(_) => SendError::WouldBlock(payload),
        // Shut down. `NoSuchProcessor` never comes back (the session's handle is the
        // dispatcher's own, and it is unregistered only once no call is inside), nor does
        // `Timeout` (only the `dispatch_timeout` family gives it).
        _ => SendError::ShutDown(payload),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_ids_go_round_above_the_names_one_generation_a_round_and_never_wrap() {
        let key = |n| anonymous_key(1024, n).unwrap();
        assert_eq!(
            key(0),
            ProducerKey {
                id: ProducerId(1024),
                generation: 0
            }
        );
        let round = (1 << 32) - 1024;
        assert_eq!(
            key(round - 1),
            ProducerKey {
                id: ProducerId(u32::MAX),
                generation: 0
            }
        );
        assert_eq!(
            key(round),
            ProducerKey {
                id: ProducerId(1024),
                generation: 1
            }
        );
        let last = round * (u64::from(u32::MAX) + 1) - 1;
        assert_eq!(
            key(last),
            ProducerKey {
                id: ProducerId(u32::MAX),
                generation: u32::MAX
            }
        );
        assert!(matches!(
            anonymous_key(1024, last + 1),
            Err(BrokerError::ProducerIdsExhausted)
        ));
        // With no names, the `u64` count of opens is exactly 2^32 rounds of 2^32 ids.
        assert_eq!(
            anonymous_key(0, u64::MAX).unwrap(),
            ProducerKey {
                id: ProducerId(u32::MAX),
                generation: u32::MAX
            }
        );
    }
}
