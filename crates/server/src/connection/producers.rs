//! A connection's producers: opening one on a broker session, anonymous or named,
//! publishing its messages (each payload copied into the store, then handed to the session
//! through the async door), and closing it.
//!
//! A named producer (`OpenProducer` with a name) is the broker's
//! [`open_named_producer`](zerodispatch_broker::Broker::open_named_producer): its messages
//! are published with their wire publish ids, so that one published again after a lost
//! connection is deduplicated by its queue (confirmed `Stored` again, never stored or
//! delivered twice), and `ProducerOpened` carries the highest id its queue has stored for
//! the name. A name is held by one producer at a time, on any connection: a connection
//! that dies closes its producers, which frees their names once each close has its
//! messages' outcomes (promptly: an ACK means stored). A client that reconnects faster
//! than that is refused `NAME_IN_USE` for a moment, and tries again.

use super::*;
use zerodispatch_wire::{MAX_MESSAGES_PER_FRAME, StoredWindow};

/// How long a closing producer waits for the outcomes of its messages: without end, in
/// effect, so that every message gets its real outcome and every payload slot is freed.
pub(super) const PRODUCER_CLOSE_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

pub(super) struct ProducerSlot {
    pub(super) state: Use,
    pub(super) wire: u32,
    pub(super) generation: u32,
    pub(super) queue: QueueId,
    /// References a message of it takes in the payload store.
    pub(super) refs: u32,
    pub(super) max_unconfirmed: u32,
    /// Messages published and without a confirm written yet.
    pub(super) in_flight: u32,
    /// The producer's name, if it is named: its messages are published with their wire
    /// ids, and deduplicated by its queue.
    pub(super) name: Option<Arc<str>>,
    pub(super) producer: Option<Arc<Producer>>,
}

impl Connection {
    /// The index of producer `wire`, open or closing.
    pub(super) fn producer_slot(&self, wire: u32) -> Option<usize> {
        slot_index(&self.producers, wire, |p| (p.state, p.wire))
    }

    /// The index of producer `wire`, open.
    pub(super) fn open_producer_slot(&self, wire: u32) -> Option<usize> {
        open_slot_index(&self.producers, wire, |p| (p.state, p.wire))
    }

    pub(super) fn unknown_producer(
        &self,
        io: &mut Io,
        kind: FrameKind,
        wire: u32,
    ) -> Result<(), Ending> {
        io.refuse(
            ErrorCode::UNKNOWN_PRODUCER,
            kind,
            wire,
            "no such producer open on this connection",
        )
    }

    pub(super) async fn open_producer(
        &mut self,
        io: &mut Io,
        open: OpenProducer<'_>,
    ) -> Result<(), Ending> {
        let (kind, wire) = (FrameKind::OpenProducer, open.producer.0);
        let refuse = |io: &mut Io, code, message: &str| io.refuse(code, kind, wire, message);
        if self.producer_slot(wire).is_some() {
            return refuse(
                io,
                ErrorCode::ID_IN_USE,
                "the producer id is open on this connection",
            );
        }
        if open.max_unconfirmed as usize > MAX_UNCONFIRMED {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "max_unconfirmed is above the broker's cap (2^24)",
            );
        }
        let limits = self.shared.limits;
        if u64::from(self.budget_used) + u64::from(open.max_unconfirmed)
            > u64::from(limits.max_unconfirmed_per_connection)
        {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "the connection's producers would have more unconfirmed messages than the server allows a connection",
            );
        }
        if self.shared.queues.get(open.queue.0 as usize).is_none() {
            return refuse(io, ErrorCode::UNKNOWN_QUEUE, "no such queue");
        }
        let Some(slot) = self.producers.iter().position(|p| p.state == Use::Free) else {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "the connection has as many producers open as the server allows",
            );
        };
        // A name the broker never had takes a place in its table for good: a connection
        // creates at most `max_new_names`, so that none can fill the table alone.
        let new_name = !open.name.is_empty() && !self.shared.broker.knows_name(open.name);
        if new_name && self.new_names >= limits.max_new_names {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "the connection has created as many new producer names as the server allows (max_new_names)",
            );
        }
        let Some(generation) = self.generation() else {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "the connection has opened as many producers and consumers as one connection may (4,294,967,295): reconnect",
            );
        };
        let link = SessionLink {
            outbound: self.outbound.clone(),
            store: self.shared.store.clone(),
            slot: slot as u16,
            generation,
            producer: true,
        };
        let config = ProducerConfig {
            max_unconfirmed: open.max_unconfirmed as usize,
            ..ProducerConfig::default()
        };
        let broker = self.shared.broker.clone();
        let name: Option<Arc<str>> = (!open.name.is_empty()).then(|| open.name.into());
        let named = name.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let on_ack = move |acks: &[Ack]| link.on_ack(acks);
            match &named {
                Some(name) => broker.open_named_producer(name, config, on_ack),
                None => broker.open_producer_with(config, on_ack),
            }
        })
        .await;
        let producer = match opened {
            Ok(Ok(producer)) => producer,
            Ok(Err(BrokerError::ShutDown)) => {
                return broker_shut_down();
            }
            Ok(Err(error @ BrokerError::NameInUse(_))) => {
                return refuse(io, ErrorCode::NAME_IN_USE, &error.to_string());
            }
            Ok(Err(error)) => return refuse(io, ErrorCode::LIMIT_OUT_OF_RANGE, &error.to_string()),
            Err(_) => return fatal(ErrorCode::INTERNAL, "opening the producer failed"),
        };
        // Asked after the open, so that the answer counts every message the name's earlier
        // producers sent (each closed before its name was free).
        let stored = match &name {
            None => None,
            Some(name) => match self
                .shared
                .broker
                .stored_window_async(name, QueueId(open.queue.0))
                .await
            {
                Ok(window) => Some(window),
                Err(BrokerError::ShutDown) => {
                    return broker_shut_down();
                }
                Err(_) => return fatal(ErrorCode::INTERNAL, "the broker's queue did not answer"),
            },
        };
        self.producers[slot] = ProducerSlot {
            state: Use::Open,
            wire,
            generation,
            queue: QueueId(open.queue.0),
            // One reference for the ACK (which reads the publishing id), one for the
            // queue's release of the message (the broker's release hook).
            refs: 2,
            max_unconfirmed: open.max_unconfirmed,
            in_flight: 0,
            name: name.clone(),
            producer: Some(Arc::new(producer)),
        };
        self.budget_used += open.max_unconfirmed;
        // At most `max_new_names`: refused above once there.
        self.new_names += u32::from(new_name);
        // The window's bits in the wire's order (bit i: id last_stored - i); allocated at
        // the open, never per message.
        let window = stored.as_ref().filter(|w| w.highest().is_some());
        let known = window.map_or(0, |w| w.known());
        let mut bits = vec![0_u8; known.div_ceil(8) as usize];
        for i in 0..known {
            if window.is_some_and(|w| w.bit(i)) {
                bits[(i / 8) as usize] |= 1 << (i % 8);
            }
        }
        io.frame(Frame::ProducerOpened(ProducerOpened {
            producer: open.producer,
            stored: StoredWindow {
                last_stored: window.and_then(|w| w.highest()),
                // The broker's window is at most MAX_DEDUP_WINDOW, 2^20: a u32.
                known: known as u32,
                bits: &bits,
            },
        }));
        Ok(())
    }

    pub(super) fn close_producer(&mut self, io: &mut Io, close: CloseProducer) {
        let wire = close.producer.0;
        let Some(slot) = self.open_producer_slot(wire) else {
            let _ = self.unknown_producer(io, FrameKind::CloseProducer, wire);
            return;
        };
        self.close_producer_slot(slot, true);
    }

    /// Closes the producer's session on a blocking thread; the echo (if `echo`) is written
    /// once the session is gone.
    pub(super) fn close_producer_slot(&mut self, slot: usize, echo: bool) {
        let p = &mut self.producers[slot];
        p.state = Use::Closing { echo };
        if let Some(producer) = p.producer.take() {
            tokio::task::spawn_blocking(move || {
                producer.close(PRODUCER_CLOSE_WAIT);
            });
        }
    }

    pub(super) async fn publish(
        &mut self,
        io: &mut Io,
        batch: PublishFrame<'_>,
    ) -> Result<(), Ending> {
        let (kind, wire) = (FrameKind::Publish, batch.producer().0);
        let Some(slot) = self.open_producer_slot(wire) else {
            return self.unknown_producer(io, kind, wire);
        };
        if repeats_an_id(&batch) {
            io.error(
                ErrorCode::DUPLICATE_ID,
                Some(kind),
                wire,
                "the frame names a publish id twice; none of its messages was taken",
            );
            return Ok(());
        }
        let store = self.shared.store.clone();
        let p = &self.producers[slot];
        let (producer, queue, refs, generation, name) = (
            p.producer
                .clone()
                .expect("an open producer has its session"),
            p.queue,
            p.refs,
            p.generation,
            p.name.clone(),
        );
        let mut local = false;
        // What the queue has stored of a named producer's messages, asked once a frame,
        // when its part of the store is full: the record comes before the quota.
        let mut record: Option<zerodispatch_broker::StoredWindow> = None;
        for (id, payload) in batch.messages() {
            let p = &mut self.producers[slot];
            // Every problem with one message is that message's confirm: the producer stays
            // open (docs/protocol.md, "Refusals and their scope").
            let refused = if p.in_flight >= p.max_unconfirmed {
                Some(ConfirmStatus::RejectedProducerFull)
            } else if payload.len() > store.slot_size() {
                Some(ConfirmStatus::TooLarge)
            } else if let Ok(Some(handle)) =
                store.try_store_in(queue.0 as usize, payload, id.0, refs)
            {
                let message = Payload {
                    handle,
                    len: payload.len() as u32,
                };
                let published = if name.is_some() {
                    producer.publish_with_id_async(queue, message, id.0).await
                } else {
                    producer.publish_async(queue, message).await
                };
                match published {
                    Ok(_) => None,
                    Err(error) => {
                        store.release_all(handle);
                        Some(match error {
                            SendError::Closed(_) => ConfirmStatus::Closed,
                            _ => ConfirmStatus::NotSent,
                        })
                    }
                }
            } else if let Some(name) = &name {
                // The queue's part of the store is full. A named producer's message that its
                // queue stored already, or cannot tell (older than the window), is answered
                // from the record, as the queue itself would: "publishing a stored one again
                // is harmless", full store or not.
                if record.is_none() {
                    match self.shared.broker.stored_window_async(name, queue).await {
                        Ok(window) => record = Some(window),
                        Err(BrokerError::ShutDown) => {
                            return broker_shut_down();
                        }
                        Err(_) => {
                            return fatal(ErrorCode::INTERNAL, "the broker's queue did not answer");
                        }
                    }
                }
                Some(match record.as_ref().map(|r| r.stored(id.0)) {
                    Some(Some(true)) => ConfirmStatus::Stored,
                    Some(None) => ConfirmStatus::RejectedOutOfWindow,
                    _ => ConfirmStatus::RejectedStoreFull,
                })
            } else {
                // The queue's part of the store is full: refused, never waited for, so
                // that this connection goes on reading confirms and writing deliveries
                // (which free slots), and no queue's load stops another's traffic.
                Some(ConfirmStatus::RejectedStoreFull)
            };
            // Counted until its confirm is written, as the broker's outcomes are.
            self.producers[slot].in_flight += 1;
            if let Some(status) = refused {
                local = true;
                let confirm = OutItem::Confirm {
                    slot: slot as u16,
                    generation,
                    publish_id: id.0,
                    status,
                };
                if self.outbound.push(confirm).is_err() {
                    return fatal(
                        ErrorCode::INTERNAL,
                        "the connection's outbound queue overflowed",
                    );
                }
            }
        }
        if local {
            self.drain(io).await?;
        }
        Ok(())
    }
}

/// Whether a `Publish` names one publish id twice. A frame whose ids increase (a client
/// numbering 0, 1, 2, ...) is told so in one pass; any other is sorted in a buffer on the
/// stack (`MAX_MESSAGES_PER_FRAME` ids, 32 KiB: nothing allocated, and n log n however a
/// hostile client orders them).
fn repeats_an_id(batch: &PublishFrame<'_>) -> bool {
    let mut ids = batch.messages().map(|(id, _)| id.0);
    let Some(mut last) = ids.next() else {
        return false;
    };
    let increasing = ids.all(|id| {
        let up = id > last;
        last = id;
        up
    });
    if increasing {
        return false;
    }
    let mut sorted = [0_u64; MAX_MESSAGES_PER_FRAME as usize];
    let mut n = 0;
    for (id, _) in batch.messages() {
        // The decoder refused any frame of more than MAX_MESSAGES_PER_FRAME.
        debug_assert!(n < sorted.len());
        sorted[n] = id.0;
        n += 1;
    }
    let sorted = &mut sorted[..n];
    sorted.sort_unstable();
    sorted.windows(2).any(|pair| pair[0] == pair[1])
}
