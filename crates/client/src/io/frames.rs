//! The I/O task's handling of what the broker sends: each whole frame received, as it
//! comes, and the broker's error frames.

use zerodispatch_wire::{CloseProducer, ErrorCode, ErrorFrame, Frame, FrameKind, decode};

use super::{Io, Phase, encode, is_error_frame};
use crate::consumer::Deliveries;
use crate::error::ClientError;

impl Io {
    /// Handles every whole frame received.
    pub(super) fn handle_received(&mut self) -> Result<(), ClientError> {
        let rbuf = std::mem::take(&mut self.rbuf);
        let mut at = 0;
        let result = loop {
            match decode(&rbuf[at..self.filled]) {
                Ok(Some((frame, consumed))) => {
                    at += consumed;
                    if let Err(error) = self.on_frame(frame) {
                        break Err(error);
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => {
                    self.answer_errors = !is_error_frame(&rbuf[at..self.filled]);
                    break Err(ClientError::protocol(error));
                }
            }
        };
        let mut rbuf = rbuf;
        rbuf.copy_within(at..self.filled, 0);
        self.filled -= at;
        self.rbuf = rbuf;
        result
    }

    /// Handles one frame from the broker.
    pub(super) fn on_frame(&mut self, frame: Frame<'_>) -> Result<(), ClientError> {
        match frame {
            Frame::Heartbeat => {}
            Frame::PublishConfirm(confirms) => {
                let now = std::time::Instant::now();
                if let Some(entry) = self
                    .producers
                    .iter_mut()
                    .find(|p| p.shared.id == confirms.producer())
                {
                    entry
                        .shared
                        .confirm(confirms.confirms(), now, &mut entry.outcomes);
                    entry.report();
                }
            }
            Frame::Deliver(deliver) => {
                if let Some(entry) = self
                    .consumers
                    .iter_mut()
                    .find(|c| c.shared.id == deliver.consumer())
                {
                    Deliveries::hand_over(deliver, &entry.shared, &mut entry.on_deliver);
                }
            }
            Frame::ProducerOpened(open) => {
                if let Some(entry) = self
                    .producers
                    .iter_mut()
                    .find(|p| p.shared.id == open.producer)
                    && matches!(entry.phase, Phase::Opening(_))
                {
                    entry.shared.opened(open.stored);
                    entry.phase.answer(Ok(()));
                    entry.phase = Phase::Open;
                }
            }
            Frame::CloseProducer(close) => {
                if let Some(i) = self
                    .producers
                    .iter()
                    .position(|p| p.shared.id == close.producer)
                {
                    let mut entry = self.producers.swap_remove(i);
                    entry.settle_all(ClientError::Closed, false, Ok(()));
                }
            }
            Frame::OpenConsumer(open) => {
                if let Some(entry) = self
                    .consumers
                    .iter_mut()
                    .find(|c| c.shared.id == open.consumer)
                    && matches!(entry.phase, Phase::Opening(_))
                {
                    entry.phase.answer(Ok(()));
                    entry.phase = Phase::Open;
                }
            }
            Frame::CloseConsumer(close) => {
                if let Some(i) = self
                    .consumers
                    .iter()
                    .position(|c| c.shared.id == close.consumer)
                {
                    let mut entry = self.consumers.swap_remove(i);
                    entry.shared.close_with(ClientError::Closed);
                    entry.phase.answer(Ok(()));
                }
            }
            Frame::Error(error) => return self.on_error(error),
            Frame::Welcome(_) => {
                return Err(ClientError::Protocol {
                    code: ErrorCode::HANDSHAKE_REQUIRED,
                    message: "a second Welcome".into(),
                });
            }
            Frame::Hello(_)
            | Frame::OpenProducer(_)
            | Frame::Publish(_)
            | Frame::ConsumerConfirm(_)
            | Frame::Credit(_) => {
                return Err(ClientError::Protocol {
                    code: ErrorCode::UNEXPECTED_KIND,
                    message: format!("a {:?} frame sent to a client", frame.kind()),
                });
            }
        }
        Ok(())
    }

    /// Handles an error frame: a fatal one ends the connection; a refusal concerns the
    /// producer or consumer its frame named.
    pub(super) fn on_error(&mut self, error: ErrorFrame<'_>) -> Result<(), ClientError> {
        if error.code.is_fatal() {
            return Err(ClientError::Broker {
                code: error.code,
                message: error.message.to_owned(),
            });
        }
        let refusal = ClientError::Refused {
            code: error.code,
            refused: error.refused,
            subject: error.subject,
            message: error.message.to_owned(),
        };
        match error.refused {
            Some(
                kind @ (FrameKind::OpenProducer | FrameKind::Publish | FrameKind::CloseProducer),
            ) => {
                // The producer is not open on the broker (any more), or, for a whole
                // `Publish` refused with the producer left open (`DUPLICATE_ID`, which this
                // client never provokes), it cannot tell which of its messages the frame
                // held: then it ends the producer on the broker too (its `CloseProducer`,
                // whose answers find no producer here). Either way every message it has
                // without an outcome is settled.
                if let Some(i) = self
                    .producers
                    .iter()
                    .position(|p| p.shared.id.0 == error.subject)
                {
                    if kind == FrameKind::Publish && error.code != ErrorCode::UNKNOWN_PRODUCER {
                        let producer = self.producers[i].shared.id;
                        encode(
                            Frame::CloseProducer(CloseProducer { producer }),
                            &mut self.out,
                        );
                    }
                    let mut entry = self.producers.swap_remove(i);
                    entry.settle_all(refusal.clone(), false, Err(refusal));
                }
            }
            Some(FrameKind::OpenConsumer) => {
                if let Some(i) = self
                    .consumers
                    .iter()
                    .position(|c| c.shared.id.0 == error.subject)
                {
                    let mut entry = self.consumers.swap_remove(i);
                    entry.shared.close_with(refusal.clone());
                    entry.phase.answer(Err(refusal));
                }
            }
            Some(FrameKind::CloseConsumer) => {
                if let Some(i) = self
                    .consumers
                    .iter()
                    .position(|c| c.shared.id.0 == error.subject)
                {
                    let mut entry = self.consumers.swap_remove(i);
                    entry.shared.close_with(ClientError::Closed);
                    entry.phase.answer(Err(refusal));
                }
            }
            Some(_) | None => {
                // A confirm or a credit refused: the consumer stays open.
                if let Some(entry) = self
                    .consumers
                    .iter()
                    .find(|c| c.shared.id.0 == error.subject)
                {
                    entry.shared.refused(refusal);
                }
            }
        }
        Ok(())
    }
}
