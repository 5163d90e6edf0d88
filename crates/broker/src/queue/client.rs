//! The client that owns a queue on its processor, and the ways a confirm or a receipt
//! reaches it: an inline functor, a typed message, or a boxed functor.

use zerodispatch_core::{Client, ClientHandle, Context, DispatchError, DispatcherHandle, Event};

use crate::message::{Confirm, ConfirmMode};
use crate::protocol::BrokerMsg;
use crate::replication::Receipt;

use super::{BoxedConfirm, QueueEngine};

/// Sends a confirm to `queue` (the queue's client) the way `mode` says.
pub(crate) fn send_confirm(
    dispatcher: &DispatcherHandle<BrokerMsg>,
    queue: ClientHandle,
    c: Confirm,
    mode: ConfirmMode,
) -> Result<(), DispatchError<Event<BrokerMsg>>> {
    let event = match mode {
        // 28 bytes of captures: inline in the default 32-byte space, handed the queue's
        // client when its processor runs it.
        ConfirmMode::Inline => {
            // The queues' table holds erased handles: the client type is checked on the
            // processor (it is always a queue's).
            Event::from(Event::to_client(move |queue: &mut QueueClient, _ctx| {
                queue.engine.confirm(c)
            }))
        }
        ConfirmMode::Typed => Event::Message(BrokerMsg::Confirm(c)),
        ConfirmMode::Boxed => Event::Message(BrokerMsg::BoxedConfirm(BoxedConfirm(Box::new(
            move |engine: &mut QueueEngine| engine.confirm(c),
        )))),
    };
    dispatcher.dispatch(queue, event)
}

/// Sends a replica's receipt to `queue` (the queue's client): an inline functor handed
/// the queue's table, as an inline confirm is.
pub(crate) fn send_receipt(
    dispatcher: &DispatcherHandle<BrokerMsg>,
    queue: ClientHandle,
    r: Receipt,
) -> Result<(), DispatchError<Event<BrokerMsg>>> {
    // 24 bytes of captures: inline.
    let event = Event::from(Event::to_client(move |queue: &mut QueueClient, _ctx| {
        queue.engine.receipt(r)
    }));
    dispatcher.dispatch(queue, event)
}

/// The client that owns a queue on its processor: its table, and the events that reach it.
pub(crate) struct QueueClient {
    engine: QueueEngine,
}

impl QueueClient {
    pub(crate) fn new(engine: QueueEngine) -> Self {
        Self { engine }
    }
}

impl Client<BrokerMsg> for QueueClient {
    fn on_message(&mut self, message: BrokerMsg, _ctx: &mut Context<BrokerMsg>) {
        let engine = &mut self.engine;
        match message {
            BrokerMsg::Confirm(c) => engine.confirm(c),
            BrokerMsg::BoxedConfirm(BoxedConfirm(confirm)) => confirm(engine),
            BrokerMsg::Put {
                producer,
                guid,
                body,
            } => engine.put(producer, guid, body),
            BrokerMsg::Attach {
                consumer,
                app,
                session,
            } => engine.attach(consumer, app, session),
            BrokerMsg::Detach { consumer } => engine.detach(consumer),
            other => {
                tracing::warn!(
                    queue = engine.id.0,
                    ?other,
                    "unexpected message for a queue"
                )
            }
        }
    }

    fn flush(&mut self, ctx: &mut Context<BrokerMsg>) {
        if self.engine.flush(ctx.dispatcher()) {
            ctx.flush_again();
        }
    }
}
