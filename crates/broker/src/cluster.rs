//! The cluster client (on the cluster processor): receives confirms from replica nodes, as
//! a primary does, and routes each to its queue's processor.

use std::sync::Arc;

use crossbeam_utils::CachePadded;
use zerodispatch_core::{Client, ClientEvent, ClientHandle, Context};

use crate::message::BrokerMsg;
use crate::queue::send_confirm;
use crate::stats::ClusterCounters;

/// The cluster client.
pub(crate) struct ClusterClient {
    /// The queues' clients, by queue id.
    pub(crate) queues: Arc<[ClientHandle]>,
    pub(crate) counters: Arc<CachePadded<ClusterCounters>>,
}

impl Client<BrokerMsg> for ClusterClient {
    fn on_event(&mut self, event: ClientEvent<BrokerMsg>, ctx: &mut Context<'_, BrokerMsg>) {
        match event {
            ClientEvent::Message(BrokerMsg::Route(c, mode)) => {
                let Some(&queue) = self.queues.get(c.queue.0 as usize) else {
                    self.counters.unknown_queue.add(1);
                    tracing::debug!(queue = c.queue.0, "confirm for an unknown queue");
                    return;
                };
                if send_confirm(ctx.dispatcher(), queue, c, mode).is_ok() {
                    self.counters.routed.add(1);
                }
            }
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(other) => {
                tracing::warn!(?other, "unexpected message for the cluster")
            }
        }
    }

    fn flush(&mut self, _ctx: &mut Context<'_, BrokerMsg>) {
        // Confirms are routed as they come: the queue's processor batches them.
    }
}
