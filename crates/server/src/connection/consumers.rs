//! A connection's consumers: opening one on a broker session with explicit confirms and
//! credit, its confirms (checked against its table of what it was delivered and has not
//! confirmed, [`Unconfirmed`]) and credits handed to the broker, and closing it.

use super::*;

pub(super) struct ConsumerSlot {
    pub(super) state: Use,
    pub(super) wire: u32,
    pub(super) generation: u32,
    pub(super) consumer: Option<Consumer>,
    /// What the consumer was delivered and has not confirmed: delivery token -> (GUID,
    /// payload handle). Allocated for the window when the index is first used, reused
    /// after; its held entries count in `held` (`grant`).
    pub(super) unconfirmed: Unconfirmed,
    /// Credit handed to the broker and not used by a delivery seen yet.
    pub(super) granted: u32,
    /// Credit the client gave that the server has not handed the broker yet (no room).
    pub(super) wanted: u32,
}

impl Connection {
    pub(super) fn consumer_slot(&self, wire: u32) -> Option<usize> {
        slot_index(&self.consumers, wire, |c| (c.state, c.wire))
    }

    pub(super) fn open_consumer_slot(&self, wire: u32) -> Option<usize> {
        open_slot_index(&self.consumers, wire, |c| (c.state, c.wire))
    }

    pub(super) fn unknown_consumer(
        &self,
        io: &mut Io,
        kind: FrameKind,
        wire: u32,
    ) -> Result<(), Ending> {
        io.refuse(
            ErrorCode::UNKNOWN_CONSUMER,
            kind,
            wire,
            "no such consumer open on this connection",
        )
    }

    pub(super) async fn open_consumer(
        &mut self,
        io: &mut Io,
        open: OpenConsumer,
    ) -> Result<(), Ending> {
        let (kind, wire) = (FrameKind::OpenConsumer, open.consumer.0);
        let refuse = |io: &mut Io, code, message: &str| io.refuse(code, kind, wire, message);
        if self.consumer_slot(wire).is_some() {
            return refuse(
                io,
                ErrorCode::ID_IN_USE,
                "the consumer id is open on this connection",
            );
        }
        let Some(&mode) = self.shared.queues.get(open.queue.0 as usize) else {
            return refuse(io, ErrorCode::UNKNOWN_QUEUE, "no such queue");
        };
        let apps = match mode {
            QueueMode::Priority => 1,
            QueueMode::Fanout { apps } => apps,
        };
        if open.app.0 >= apps {
            return refuse(io, ErrorCode::UNKNOWN_APP, "the queue has no such app");
        }
        let Some(slot) = self.consumers.iter().position(|c| c.state == Use::Free) else {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "the connection has as many consumers open as the server allows",
            );
        };
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
            producer: false,
        };
        let window = self.shared.limits.consumer_window;
        let first = open.credit.min(window);
        let options = ConsumerOptions {
            confirms: Confirms::Explicit,
            credit: Some(first),
            ..ConsumerOptions::default()
        };
        let broker = self.shared.broker.clone();
        let (queue, app) = (QueueId(open.queue.0), AppId(open.app.0));
        let opened = tokio::task::spawn_blocking(move || {
            broker.open_consumer(queue, app, options, move |batch: &[Delivery]| {
                link.on_delivery(batch);
            })
        })
        .await;
        let consumer = match opened {
            Ok(Ok(consumer)) => consumer,
            Ok(Err(BrokerError::UnknownQueue(_))) => {
                return refuse(io, ErrorCode::UNKNOWN_QUEUE, "no such queue");
            }
            Ok(Err(BrokerError::UnknownApp(..))) => {
                return refuse(io, ErrorCode::UNKNOWN_APP, "the queue has no such app");
            }
            Ok(Err(BrokerError::ShutDown)) => {
                return broker_shut_down();
            }
            Ok(Err(error)) => return refuse(io, ErrorCode::LIMIT_OUT_OF_RANGE, &error.to_string()),
            Err(_) => return fatal(ErrorCode::INTERNAL, "opening the consumer failed"),
        };
        let c = &mut self.consumers[slot];
        if c.unconfirmed.capacity() == 0 {
            // The window: the consumer never holds more, so the table never grows.
            c.unconfirmed.reserve(window as usize);
        }
        c.state = Use::Open;
        c.wire = wire;
        c.generation = generation;
        c.consumer = Some(consumer);
        c.granted = first;
        c.wanted = open.credit - first;
        io.frame(Frame::OpenConsumer(open));
        Ok(())
    }

    pub(super) fn close_consumer(&mut self, io: &mut Io, close: CloseConsumer) {
        let wire = close.consumer.0;
        let Some(slot) = self.open_consumer_slot(wire) else {
            let _ = self.unknown_consumer(io, FrameKind::CloseConsumer, wire);
            return;
        };
        self.close_consumer_slot(slot, true);
    }

    /// Closes the consumer's session on a blocking thread; the echo (if `echo`) is written
    /// once the session is gone. What it was delivered and did not confirm goes back to the
    /// queue (priority) or is dropped with its share (fanout); either way the queue
    /// releases the message in time, and the broker's release hook frees its payload.
    ///
    /// The confirms this connection handed the consumer's session before the close reach
    /// the queue before the detach: the session itself sends the detach, behind them.
    pub(super) fn close_consumer_slot(&mut self, slot: usize, echo: bool) {
        let c = &mut self.consumers[slot];
        c.state = Use::Closing { echo };
        if let Some(consumer) = c.consumer.take() {
            let broker = self.shared.broker.clone();
            tokio::task::spawn_blocking(move || {
                // Refused only when the broker is shutting down, which drops the session.
                let _ = broker.close_consumer(&consumer);
            });
        }
    }

    pub(super) async fn consumer_confirm(
        &mut self,
        io: &mut Io,
        batch: ConsumerConfirmFrame<'_>,
    ) -> Result<(), Ending> {
        let (kind, wire) = (FrameKind::ConsumerConfirm, batch.consumer().0);
        let Some(slot) = self.open_consumer_slot(wire) else {
            return self.unknown_consumer(io, kind, wire);
        };
        let c = &mut self.consumers[slot];
        self.guids.clear();
        let mut unknown = 0_u32;
        for (guid, token) in batch.deliveries() {
            let guid = Guid(guid.0);
            // Applied only if the token names a delivery the consumer holds under this
            // GUID: an unknown, stale or foreign token confirms nothing (`Unconfirmed`).
            match c.unconfirmed.remove(guid, token.0) {
                // The payload stays until the queue releases the message (every app's
                // share confirmed): the broker's release hook frees it.
                Some(_) => self.guids.push(guid),
                None => unknown += 1,
            }
        }
        if !self.guids.is_empty() {
            let consumer = c
                .consumer
                .as_ref()
                .expect("an open consumer has its session");
            let confirmed = self
                .shared
                .broker
                .confirm_batch_async(consumer, self.guids.iter().copied())
                .await;
            if let Err(BrokerError::ShutDown) = confirmed {
                return broker_shut_down();
            }
        }
        if unknown != 0 {
            io.error(
                ErrorCode::UNKNOWN_CONSUMER,
                Some(kind),
                wire,
                "the frame confirms a delivery (GUID and token) the consumer does not hold; the others are confirmed",
            );
        }
        self.grant(slot).await
    }

    /// Hands the broker as much of the consumer's credit as its window has room for.
    pub(super) async fn grant(&mut self, slot: usize) -> Result<(), Ending> {
        let window = self.shared.limits.consumer_window as usize;
        let c = &mut self.consumers[slot];
        let held = c.granted as usize + c.unconfirmed.len();
        let room = window.saturating_sub(held).min(u32::MAX as usize) as u32;
        let more = room.min(c.wanted);
        let Some(consumer) = c.consumer.as_ref().filter(|_| more != 0) else {
            return Ok(());
        };
        match self.shared.broker.add_credit_async(consumer, more).await {
            Ok(()) => {
                c.granted += more;
                c.wanted -= more;
                Ok(())
            }
            Err(BrokerError::ShutDown) => broker_shut_down(),
            // The consumer is closing: its credit no longer matters.
            Err(_) => Ok(()),
        }
    }
}
