//! The requests a connection's handles queue for its I/O task ([`Command`]), and how a
//! request is failed when the task is gone.

use std::sync::Arc;

use tokio::sync::oneshot;
use zerodispatch_wire::{AppId, ConsumerId, ProducerId, QueueId};

use crate::consumer::deliveries::DeliveryHandler;
use crate::consumer::shared::ConsumerShared;
use crate::error::ClientError;
use crate::producer::outcome::{ConfirmHandler, Outcome};
use crate::producer::pending::Pending;
use crate::producer::shared::ProducerShared;

/// The answer to an open or a close, from the I/O task.
pub(crate) type Reply = oneshot::Sender<Result<(), ClientError>>;

/// A request for the I/O task.
pub(crate) enum Command {
    /// Send `OpenProducer`, and answer when the broker opens it (`ProducerOpened`) or
    /// refuses it.
    OpenProducer {
        shared: Arc<ProducerShared>,
        queue: QueueId,
        /// The producer's name; empty for an anonymous producer.
        name: String,
        on_confirm: ConfirmHandler,
        /// The task's spare pending buffer and outcome list, allocated by the opener.
        buffers: (Pending, Vec<Outcome>),
        reply: Reply,
    },
    /// Send what the producer has pending, then `CloseProducer`; once the broker echoes
    /// it, report what still has no outcome `Closed`, and answer (if anyone waits).
    CloseProducer {
        producer: ProducerId,
        reply: Option<Reply>,
    },
    /// Send `OpenConsumer`, and answer when the broker echoes or refuses it.
    OpenConsumer {
        shared: Arc<ConsumerShared>,
        queue: QueueId,
        app: AppId,
        on_deliver: DeliveryHandler,
        reply: Reply,
    },
    /// Send the consumer's confirms, then `CloseConsumer`, and answer at the echo.
    CloseConsumer {
        consumer: ConsumerId,
        reply: Option<Reply>,
    },
    /// Send what is pending and close the connection.
    Shutdown,
}

impl Command {
    /// Answers the command's waiter, if it has one, with `error`.
    pub(crate) fn fail(self, error: &ClientError) {
        let reply = match self {
            Self::OpenProducer { reply, .. } | Self::OpenConsumer { reply, .. } => Some(reply),
            Self::CloseProducer { reply, .. } | Self::CloseConsumer { reply, .. } => reply,
            Self::Shutdown => None,
        };
        if let Some(reply) = reply {
            let _ = reply.send(Err(error.clone()));
        }
    }
}
