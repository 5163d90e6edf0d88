//! The limits the server tells every client in its `Welcome` ([`ServerLimits`]), read from
//! what it enforces: its [`Limits`], its payload store's parts and its broker's
//! deduplication window. One function, so that what is told and what is enforced cannot
//! drift apart.

use zerodispatch_broker::{Broker, MAX_UNCONFIRMED};
use zerodispatch_wire::ServerLimits;

use crate::config::Limits;
use crate::payloads::PayloadStore;

/// Saturates a count the protocol carries in a `u32`.
fn u32_of(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Saturates a duration the protocol carries in `u32` milliseconds.
fn millis(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// What the server enforces, as `Welcome` tells it.
pub(crate) fn server_limits(
    limits: &Limits,
    store: &PayloadStore,
    broker: &Broker,
) -> ServerLimits {
    let queue_slots = (0..store.parts())
        .map(|p| store.quota(p))
        .min()
        .unwrap_or(0);
    ServerLimits {
        // Checked by `Limits::check`: at most MAX_PAYLOAD_LEN.
        max_payload: u32_of(store.slot_size()),
        max_unconfirmed_per_connection: limits
            .max_unconfirmed_per_connection
            .min(u32_of(MAX_UNCONFIRMED)),
        max_unconfirmed_named: u32_of(broker.dedup_window().min(MAX_UNCONFIRMED))
            .min(limits.max_unconfirmed_per_connection),
        consumer_window: limits.consumer_window,
        queue_slots: u32_of(queue_slots),
        max_producers: limits.max_producers,
        max_consumers: limits.max_consumers,
        idle_timeout_ms: millis(limits.idle_timeout),
        max_connections: u32_of(limits.max_connections),
        frame_timeout_ms: millis(limits.frame_timeout),
        handshake_timeout_ms: millis(limits.handshake_timeout.min(limits.idle_timeout)),
        dedup_window: u32_of(broker.dedup_window()),
        max_new_names: limits.max_new_names,
    }
}
