//! A connection's writing side: the write buffer, and what the processors handed the
//! connection (outcomes, deliveries, sessions gone) written as batched frames.

use super::*;

/// The write buffer is written to the socket once it holds this much, mid-batch.
pub(super) const WRITE_HIGH_WATER: usize = 1 << 20;

/// The socket's writing side: the write buffer and when something was last sent.
pub(super) struct Io {
    pub(super) stream: TcpStream,
    pub(super) out: Vec<u8>,
    /// The server's shutdown, watched while a write waits for the client.
    pub(super) stop: watch::Receiver<bool>,
    /// Once the server shuts down: when the connection is abandoned if its writes have not
    /// ended ([`SHUTDOWN_DRAIN`] and [`LINGER`] after the connection saw the shutdown), so
    /// that a client that does not read holds the shutdown no longer.
    pub(super) shutdown_bound: Option<tokio::time::Instant>,
    pub(super) last_sent: Instant,
    /// The socket failed, or the connection is being torn down: nothing more is written.
    pub(super) lost: bool,
    /// How long one write may wait for a client that does not read (the idle limit): past
    /// it the connection is lost, so that a client that stops reading cannot hold its
    /// place, its consumers' deliveries and their payload slots for ever.
    pub(super) write_limit: Duration,
}

impl Io {
    /// Writes the write buffer to the socket, within the write limit; once the server
    /// shuts down, within the shutdown's bound ([`Io::shutdown_bound`]) instead, whichever
    /// comes first. Past it the connection is lost.
    pub(super) async fn flush(&mut self) {
        if self.lost {
            self.out.clear();
            return;
        }
        if self.out.is_empty() {
            return;
        }
        let limit = tokio::time::Instant::now() + self.write_limit;
        let Self {
            stream,
            out,
            stop,
            shutdown_bound,
            ..
        } = self;
        let write = stream.write_all(out);
        tokio::pin!(write);
        let done = tokio::select! {
            biased;
            done = tokio::time::timeout_at(shutdown_bound.map_or(limit, |b| b.min(limit)), &mut write) => done,
            () = async { drop(stop.wait_for(|&stop| stop).await) }, if shutdown_bound.is_none() => {
                let bound = *shutdown_bound.get_or_insert_with(shutdown_deadline);
                tokio::time::timeout_at(bound.min(limit), &mut write).await
            }
        };
        if !matches!(done, Ok(Ok(()))) {
            self.lost = true;
        }
        self.out.clear();
        self.last_sent = Instant::now();
    }

    /// Answers a frame of `kind` that named `subject` with an error frame that refuses it;
    /// the connection goes on.
    pub(super) fn refuse(
        &mut self,
        code: ErrorCode,
        kind: FrameKind,
        subject: u32,
        message: &str,
    ) -> Result<(), Ending> {
        self.error(code, Some(kind), subject, message);
        Ok(())
    }

    /// Appends an error frame.
    pub(super) fn error(
        &mut self,
        code: ErrorCode,
        refused: Option<FrameKind>,
        subject: u32,
        message: &str,
    ) {
        // Cut to the protocol's limit at a character boundary.
        let mut end = message.len().min(usize::from(wire::MAX_ERROR_MESSAGE_LEN));
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let frame = Frame::Error(ErrorFrame {
            code,
            refused,
            subject,
            message: &message[..end],
        });
        // A message within the limit: cannot fail.
        let _ = frame.encode(&mut self.out);
    }

    /// Appends a frame of fixed layout the server built (never refused by the encoder).
    pub(super) fn frame(&mut self, frame: Frame<'_>) {
        let _ = frame.encode(&mut self.out);
    }
}

/// The shutdown's bound for a connection that sees it now.
pub(super) fn shutdown_deadline() -> tokio::time::Instant {
    tokio::time::Instant::now() + SHUTDOWN_DRAIN + LINGER
}

impl Io {
    /// Writes the write buffer to the socket once it holds [`WRITE_HIGH_WATER`] bytes.
    pub(super) async fn flush_if_full(&mut self) {
        if self.out.len() >= WRITE_HIGH_WATER {
            self.flush().await;
        }
    }
}

impl Connection {
    /// Writes everything in the outbound queue.
    pub(super) async fn drain(&mut self, io: &mut Io) -> Result<(), Ending> {
        // Grows to a round's items, at most a frame's worth, and stays so while traffic lasts.
        let staging = self.shared.limits.staging_capacity();
        loop {
            while self.staged.len() < staging {
                match self.outbound.pop() {
                    Some(item) => self.staged.push(Some(item)),
                    None => break,
                }
            }
            if self.staged.is_empty() {
                break;
            }
            self.write_staged(io).await;
        }
        if self.outbound.overflows() != 0 {
            return fatal(
                ErrorCode::INTERNAL,
                "the connection's outbound queue overflowed",
            );
        }
        Ok(())
    }

    /// Writes the staged items, grouped: one producer's confirms in as few
    /// `PublishConfirm` frames as fit, one consumer's deliveries in as few `Deliver`
    /// frames, each group where its first item was and in its items' order.
    pub(super) async fn write_staged(&mut self, io: &mut Io) {
        for at in 0..self.staged.len() {
            let Some(first) = self.staged[at] else {
                continue;
            };
            match first {
                OutItem::Confirm {
                    slot, generation, ..
                } => {
                    let p = &mut self.producers[usize::from(slot)];
                    let live = p.state != Use::Free && p.generation == generation;
                    let owner = wire::ProducerId(p.wire);
                    let items = &mut self.staged[at..];
                    while confirm_frame(&mut io.out, owner, items, slot, generation, p, live) {
                        io.flush_if_full().await;
                    }
                }
                OutItem::Deliver {
                    slot, generation, ..
                } => {
                    let c = &mut self.consumers[usize::from(slot)];
                    let owner = wire::ConsumerId(c.wire);
                    let store = &self.shared.store;
                    let items = &mut self.staged[at..];
                    if c.state == Use::Open && c.generation == generation {
                        while deliver_frame(
                            &mut io.out,
                            owner,
                            items,
                            (slot, generation),
                            store,
                            &mut self.scratch,
                            c,
                        ) {
                            io.flush_if_full().await;
                        }
                    } else {
                        // Closing: the broker redelivers these (priority) or drops their
                        // shares (fanout), and its release hook frees their payloads.
                        for entry in items.iter_mut() {
                            if let Some(OutItem::Deliver {
                                slot: s,
                                generation: g,
                                ..
                            }) = *entry
                                && (s, g) == (slot, generation)
                            {
                                *entry = None;
                            }
                        }
                    }
                }
                OutItem::ProducerGone { slot, generation } => {
                    self.staged[at] = None;
                    let p = &mut self.producers[usize::from(slot)];
                    if p.state != Use::Free && p.generation == generation {
                        if p.state == (Use::Closing { echo: true }) {
                            io.frame(Frame::CloseProducer(CloseProducer {
                                producer: wire::ProducerId(p.wire),
                            }));
                        }
                        self.budget_used -= p.max_unconfirmed;
                        p.state = Use::Free;
                        p.producer = None;
                    }
                }
                OutItem::ConsumerGone { slot, generation } => {
                    self.staged[at] = None;
                    let c = &mut self.consumers[usize::from(slot)];
                    if c.state != Use::Free && c.generation == generation {
                        if c.state == (Use::Closing { echo: true }) {
                            io.frame(Frame::CloseConsumer(CloseConsumer {
                                consumer: wire::ConsumerId(c.wire),
                            }));
                        }
                        // Fanout: the broker dropped the shares it had delivered and saw
                        // no confirm for. Priority: it delivers them again, elsewhere.
                        // Either way its release hook frees the payloads in time.
                        c.unconfirmed.clear();
                        c.state = Use::Free;
                        c.consumer = None;
                        c.granted = 0;
                        c.wanted = 0;
                    }
                }
            }
            io.flush_if_full().await;
        }
        self.staged.clear();
    }
}

/// Appends one `PublishConfirm` frame of the staged confirms of `(slot, generation)` (or
/// drops them, if that producer is gone: `live` false), and takes them off `items`.
/// Returns whether some are left (the frame is full).
pub(super) fn confirm_frame(
    out: &mut Vec<u8>,
    owner: wire::ProducerId,
    items: &mut [Option<OutItem>],
    slot: u16,
    generation: u32,
    producer: &mut ProducerSlot,
    live: bool,
) -> bool {
    let mut frame = PublishConfirmBuilder::begin(out, owner);
    for entry in items.iter_mut() {
        let Some(OutItem::Confirm {
            slot: s,
            generation: g,
            publish_id,
            status,
        }) = *entry
        else {
            continue;
        };
        if (s, g) != (slot, generation) {
            continue;
        }
        if live {
            if frame.push(wire::PublishId(publish_id), status).is_err() {
                let _ = frame.finish();
                return true;
            }
            producer.in_flight = producer.in_flight.saturating_sub(1);
        }
        *entry = None;
    }
    // Nothing is left in the buffer if the frame is empty.
    let _ = frame.finish();
    false
}

/// Appends one `Deliver` frame of the staged deliveries of `owner` (whose index and
/// generation are `key`), reading each payload from the store, and takes them off `items`
/// into the consumer's unconfirmed table, each entry's index the token its delivery
/// carries. Returns whether some are left (the frame is full).
pub(super) fn deliver_frame(
    out: &mut Vec<u8>,
    owner: wire::ConsumerId,
    items: &mut [Option<OutItem>],
    key: (u16, u32),
    store: &PayloadStore,
    scratch: &mut Vec<u8>,
    consumer: &mut ConsumerSlot,
) -> bool {
    let mut frame = DeliverBuilder::begin(out, owner);
    for entry in items.iter_mut() {
        let Some(OutItem::Deliver {
            slot,
            generation,
            guid,
            handle,
        }) = *entry
        else {
            continue;
        };
        if (slot, generation) != key {
            continue;
        }
        if store.read(handle, scratch).is_some() {
            // Held first, for its token; freed again if the frame has no room for it.
            let token = consumer.unconfirmed.insert(guid, handle);
            if frame
                .push(wire::Guid(guid.0), wire::DeliveryToken(token), scratch)
                .is_err()
            {
                consumer.unconfirmed.remove(guid, token);
                let _ = frame.finish();
                return true;
            }
            consumer.granted = consumer.granted.saturating_sub(1);
        }
        // Else a stale handle, counted by the store: nothing to deliver.
        *entry = None;
    }
    let _ = frame.finish();
    false
}
