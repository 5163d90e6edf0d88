//! A connection's reading side: every whole frame of the read buffer decoded in place and
//! handed to the handler of its kind, the handshake first.

use super::*;

impl Connection {
    /// Handles every whole frame in `input[..filled]`, then keeps the rest at its front.
    pub(super) async fn frames(
        &mut self,
        io: &mut Io,
        input: &mut Vec<u8>,
        filled: &mut usize,
    ) -> Result<(), Ending> {
        let mut at = 0;
        let result = loop {
            match wire::decode(&input[at..*filled]) {
                Ok(Some((frame, len))) => {
                    let handled = self.frame(io, frame).await;
                    at += len;
                    if handled.is_err() {
                        break handled;
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => {
                    // A bad error frame is closed on without an answer.
                    if let Ok(Some(header)) = Header::parse(&input[at..*filled])
                        && header.kind == FrameKind::Error
                    {
                        break Err(Ending::PeerClosed);
                    }
                    break fatal(error.code(), error.to_string());
                }
            }
        };
        input.copy_within(at..*filled, 0);
        *filled -= at;
        // The frame left at the front began in this read, unless it was there before it.
        self.frame_began = match (*filled, at) {
            (0, _) => None,
            (_, 0) => self.frame_began.or_else(|| Some(Instant::now())),
            _ => Some(Instant::now()),
        };
        if let Ok(Some(header)) = Header::parse(&input[..*filled]) {
            // At most HEADER_LEN + MAX_FRAME_LEN: the header was checked.
            if header.frame_len() > input.len() {
                input.resize(header.frame_len(), 0);
            }
        }
        result
    }

    async fn frame(&mut self, io: &mut Io, frame: Frame<'_>) -> Result<(), Ending> {
        if !self.welcomed {
            return match frame {
                Frame::Hello(hello) => self.hello(io, hello),
                other => fatal(
                    ErrorCode::HANDSHAKE_REQUIRED,
                    format!("a {:?} frame before Hello", other.kind()),
                ),
            };
        }
        match frame {
            Frame::Hello(_) => fatal(ErrorCode::HANDSHAKE_REQUIRED, "a second Hello"),
            Frame::Welcome(_)
            | Frame::PublishConfirm(_)
            | Frame::ProducerOpened(_)
            | Frame::Deliver(_) => fatal(
                ErrorCode::UNEXPECTED_KIND,
                format!("the broker never receives a {:?} frame", frame.kind()),
            ),
            Frame::Heartbeat => Ok(()),
            Frame::Error(error) if error.code.is_fatal() => Err(Ending::PeerClosed),
            Frame::Error(_) => Ok(()),
            Frame::OpenProducer(open) => {
                // Before the session exists: its callbacks may push from their first call.
                // Not for an open refused for its budget: it must not grow the queue.
                let budget = u64::from(self.budget_used) + u64::from(open.max_unconfirmed);
                if budget <= u64::from(self.shared.limits.max_unconfirmed_per_connection) {
                    self.reserve_outbound(budget as u32, 1, 0);
                }
                self.open_producer(io, open).await
            }
            Frame::CloseProducer(close) => {
                self.close_producer(io, close);
                Ok(())
            }
            Frame::Publish(batch) => {
                // The outcomes the connection may give the frame's messages itself.
                self.reserve_outbound(self.budget_used, 0, batch.count() as usize);
                self.publish(io, batch).await
            }
            Frame::OpenConsumer(open) => {
                self.reserve_outbound(self.budget_used, 1, 0);
                self.open_consumer(io, open).await
            }
            Frame::CloseConsumer(close) => {
                self.close_consumer(io, close);
                Ok(())
            }
            Frame::ConsumerConfirm(batch) => self.consumer_confirm(io, batch).await,
            Frame::Credit(credit) => {
                let kind = FrameKind::Credit;
                let Some(slot) = self.open_consumer_slot(credit.consumer.0) else {
                    return self.unknown_consumer(io, kind, credit.consumer.0);
                };
                let c = &mut self.consumers[slot];
                c.wanted = c.wanted.saturating_add(credit.credit);
                self.grant(slot).await
            }
        }
    }

    fn hello(&mut self, io: &mut Io, hello: Hello) -> Result<(), Ending> {
        if !(hello.min_version..=hello.max_version).contains(&VERSION) {
            return fatal(
                ErrorCode::UNSUPPORTED_VERSION,
                format!(
                    "the server speaks version {VERSION}; the client offers {} to {}",
                    hello.min_version, hello.max_version
                ),
            );
        }
        self.welcomed = true;
        self.peer_heartbeat = (hello.heartbeat_ms != 0)
            .then(|| Duration::from_millis(u64::from(hello.heartbeat_ms)).max(MIN_PEER_HEARTBEAT));
        io.frame(Frame::Welcome(Welcome {
            version: VERSION,
            // Checked by `Limits::check` to fit.
            heartbeat_ms: self.shared.limits.heartbeat.as_millis() as u32,
            limits: self.shared.told,
        }));
        Ok(())
    }
}
