//! Named producers: [`Broker::open_named_producer`], whose messages each queue
//! deduplicates, and what a queue has stored of a name ([`Broker::last_stored`],
//! [`Broker::stored_window`] and their async forms).

use zerodispatch_core::ProcessorId;

use crate::dedup::{StoredIds, StoredWindow};
use crate::error::BrokerError;
use crate::ids::{ProducerKey, QueueId};
use crate::message::Ack;
use crate::names::Names;
use crate::session::ProducerConfig;

use super::{Broker, Producer, sync_refused};

// Named in the docs only.
#[cfg(doc)]
use super::BrokerConfig;

impl Broker {
    /// Opens a producer under `name`, configured as
    /// [`open_producer_with`](Self::open_producer_with), whose messages are deduplicated:
    /// its id is the name's, the same each time the name is opened, and it publishes with
    /// [`Producer::publish_with_id`] (or its async form) only, numbering its messages
    /// itself, one id per message. Each queue remembers which ids it has stored for the
    /// name, exactly, over a window of [`BrokerConfig::dedup_window`] ids up to the highest
    /// it stored: a message published again with a stored id (after a lost connection, say)
    /// is ACKed `Stored` again but not stored or delivered twice; one with an id it did not
    /// store is stored, in any order; one older than the window is refused
    /// `RejectedOutOfWindow` (see [`Producer::publish_with_id`]). Ask
    /// [`stored_window`](Self::stored_window) which ids are stored, to resume
    /// ([`last_stored`](Self::last_stored) is its highest).
    ///
    /// A name is held by one producer at a time, and free again once that one's
    /// [`close`](Producer::close) returns. The broker keeps a closed name (so that a later
    /// producer of the name is deduplicated against the earlier ones' messages) while its
    /// table has room: it holds [`BrokerConfig::max_producer_names`]. A new name that finds
    /// it full takes the place of the name closed least recently, at the place's next
    /// generation ([`Producer::generation`]; its GUIDs are new, the old name's messages
    /// still in the queues keep theirs), and the queues forget what they stored of the old
    /// name: reopened later, it is a new name, with nothing stored (a message it publishes
    /// again is stored again: at least once, never lost). A new name is refused only while
    /// open producers hold every name. The table is taken under a mutex here,
    /// at close and in `stored_window`, and on the message path in one rare case only: a
    /// queue asks which of two producers of the name is the newer when both published a
    /// message still waiting for its replication quorum.
    ///
    /// ```
    /// use zerodispatch_broker::*;
    ///
    /// let broker = Broker::start(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     ..BrokerConfig::default()
    /// })?;
    /// let first = broker.open_named_producer("orders", ProducerConfig::default(), |_: &[Ack]| {})?;
    /// let again = broker.open_named_producer("orders", ProducerConfig::default(), |_: &[Ack]| {});
    /// assert!(matches!(again, Err(BrokerError::NameInUse(_))));
    /// let id = first.id();
    /// first.close(std::time::Duration::from_secs(1));
    /// let second = broker.open_named_producer("orders", ProducerConfig::default(), |_: &[Ack]| {})?;
    /// assert_eq!(second.id(), id);
    /// # Ok::<(), BrokerError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `NameInUse` while another producer holds `name`; `TooManyNames` for a new name
    /// once the table is full; and as [`open_producer_with`](Self::open_producer_with).
    pub fn open_named_producer(
        &self,
        name: &str,
        config: ProducerConfig,
        on_ack: impl FnMut(&[Ack]) + Send + 'static,
    ) -> Result<Producer, BrokerError> {
        Self::check_producer(config)?;
        if config.max_unconfirmed > self.dedup_window {
            return Err(BrokerError::WindowBelowUnconfirmed {
                max_unconfirmed: config.max_unconfirmed,
                dedup_window: self.dedup_window,
            });
        }
        let key = self.lock_names().open(name)?;
        self.open_session(key, config, Box::new(on_ack), Some(self.names.clone()))
            .inspect_err(|_| self.lock_names().close(key.id))
    }

    /// Whether the broker knows `name`: it was opened, and its place not given to a newer
    /// name since. A name not known takes a place of
    /// [`BrokerConfig::max_producer_names`] when it opens. (A front end bounds the new
    /// names each of its clients may create with it.)
    #[must_use]
    pub fn knows_name(&self, name: &str) -> bool {
        self.lock_names().find(name).is_some()
    }

    /// [`BrokerConfig::dedup_window`]: a named producer's `max_unconfirmed` at most.
    #[must_use]
    pub fn dedup_window(&self) -> usize {
        self.dedup_window
    }

    /// The highest publish id `queue` has stored for the producers named `name`
    /// ([`open_named_producer`](Self::open_named_producer)), counting every message sent to
    /// it before this call; `None` if it has stored none of theirs (or the name was never
    /// opened, or its place given to a newer name since). A producer of the name that starts
    /// afresh numbers its messages after it.
    /// It says nothing of lower ids: ask [`stored_window`](Self::stored_window) which of
    /// those are stored. For application threads only.
    ///
    /// # Errors
    ///
    /// As [`stored_window`](Self::stored_window).
    pub fn last_stored(&self, name: &str, queue: QueueId) -> Result<Option<u64>, BrokerError> {
        Ok(self.stored_window(name, queue)?.highest())
    }

    /// As [`last_stored`](Self::last_stored), for a task on an async runtime. Cancel-safe.
    ///
    /// # Errors
    ///
    /// As [`stored_window`](Self::stored_window).
    pub async fn last_stored_async(
        &self,
        name: &str,
        queue: QueueId,
    ) -> Result<Option<u64>, BrokerError> {
        Ok(self.stored_window_async(name, queue).await?.highest())
    }

    /// What `queue` has stored of the producers named `name`, id by id: the highest publish
    /// id stored and, for each id of the window below it
    /// ([`BrokerConfig::dedup_window`]), whether it is stored, counting every message sent
    /// to the queue before this call. A reconnecting producer settles as stored exactly the
    /// ids it says are, and publishes the others again. Answered by a dispatcher callback
    /// on the queue's processor (the answer is allocated there: a re-open's cost, never a
    /// message's); for application threads only.
    ///
    /// # Errors
    ///
    /// `UnknownQueue`; `ShutDown`; `OnProcessorThread` on one of the broker's processor
    /// threads; `ProcessorDied` if the queue's processor is gone.
    pub fn stored_window(&self, name: &str, queue: QueueId) -> Result<StoredWindow, BrokerError> {
        let (processor, ids, id) = match self.stored_ids_of(name, queue)? {
            Known::Name(processor, ids, id) => (processor, ids, id),
            Known::Never(window) => return Ok(window),
        };
        self.dispatcher
            .call(processor, move || Box::new(ids.snapshot(id)))
            .map(|window| *window)
            .map_err(sync_refused)
    }

    /// As [`stored_window`](Self::stored_window), for a task on an async runtime: waits
    /// for the queue's processor as a future. Cancel-safe.
    ///
    /// # Errors
    ///
    /// As [`stored_window`](Self::stored_window).
    pub async fn stored_window_async(
        &self,
        name: &str,
        queue: QueueId,
    ) -> Result<StoredWindow, BrokerError> {
        let (processor, ids, id) = match self.stored_ids_of(name, queue)? {
            Known::Name(processor, ids, id) => (processor, ids, id),
            Known::Never(window) => return Ok(window),
        };
        self.dispatcher
            .call_async(processor, move || Box::new(ids.snapshot(id)))
            .await
            .map(|window| *window)
            .map_err(sync_refused)
    }

    /// Where `stored_window` asks: the queue's processor, its record, and the name's id;
    /// for a name the broker does not know, the empty answer at once.
    fn stored_ids_of(&self, name: &str, queue: QueueId) -> Result<Known, BrokerError> {
        let ids = self
            .stored_ids
            .get(queue.0 as usize)
            .ok_or(BrokerError::UnknownQueue(queue))?;
        let Some(key) = self.lock_names().find(name) else {
            return Ok(Known::Never(ids.nothing_stored()));
        };
        Ok(Known::Name(
            self.queues[queue.0 as usize].processor(),
            ids.clone(),
            key,
        ))
    }

    fn lock_names(&self) -> std::sync::MutexGuard<'_, Names> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What [`Broker::stored_window`] finds before it asks a queue.
enum Known {
    /// A name the broker knows: the queue's processor answers for it.
    Name(ProcessorId, StoredIds, ProducerKey),
    /// A name the broker does not know: nothing of it is stored.
    Never(StoredWindow),
}
