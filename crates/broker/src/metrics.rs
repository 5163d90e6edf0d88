//! Export of the broker's statistics through the [`metrics`] crate's facade (cargo feature
//! `metrics`): the dispatcher's processors (see `zerodispatch_core::metrics`), the
//! sessions' totals and each queue's counters.
//!
//! The contract is the core's: [`export`] publishes what the statistics hold now, the
//! application calls it periodically, nothing is recorded on a message's path, and counters
//! are set to the totals with [`Counter::absolute`](::metrics::Counter::absolute). Session
//! metrics have no label (all sessions together); queue metrics have the label `queue`
//! (the queue id).
//!
//! ```
//! use zerodispatch_broker::{metrics, Broker, BrokerConfig};
//!
//! let broker = Broker::start(BrokerConfig::default())?;
//! metrics::export(&broker);
//! broker.shutdown();
//! # Ok::<(), zerodispatch_broker::BrokerError>(())
//! ```

use ::metrics::{counter, describe_counter, describe_gauge, gauge};

use crate::broker::Broker;
use crate::stats::{QueueStats, SessionStats};

/// A session counter: name, help, and where [`SessionStats`] holds it.
type SessionMetric = (&'static str, &'static str, fn(&SessionStats) -> u64);

/// A queue counter: name, help, and where [`QueueStats`] holds it.
type QueueMetric = (&'static str, &'static str, fn(&QueueStats) -> u64);

/// The sessions' counters [`export`] publishes.
pub const SESSION_COUNTERS: [SessionMetric; 16] = [
    (
        "zerodispatch_broker_published_total",
        "Messages the producers' applications published.",
        |s| s.published,
    ),
    (
        "zerodispatch_broker_rejected_producer_full_total",
        "Publishes rejected because the producer's unacknowledged table was full.",
        |s| s.rejected_producer_full,
    ),
    (
        "zerodispatch_broker_rejected_unknown_queue_total",
        "Publishes rejected because the queue does not exist.",
        |s| s.rejected_unknown_queue,
    ),
    (
        "zerodispatch_broker_acks_total",
        "Outcomes reported to producers' applications from queues.",
        |s| s.acks,
    ),
    (
        "zerodispatch_broker_late_acks_total",
        "ACKs from queues for messages reported already (timed out, or closed).",
        |s| s.late_acks,
    ),
    (
        "zerodispatch_broker_closed_reported_total",
        "Messages reported Closed: in flight at their producer's close, or published after it.",
        |s| s.closed_reported,
    ),
    (
        "zerodispatch_broker_not_sent_total",
        "Messages reported NotSent: unsent at their producer's close, or an id in flight.",
        |s| s.not_sent,
    ),
    (
        "zerodispatch_broker_delivered_total",
        "Messages handed to consumers' applications.",
        |s| s.delivered,
    ),
    (
        "zerodispatch_broker_pushes_to_closed_total",
        "PUSHes that reached a consumer already closed.",
        |s| s.pushes_to_closed,
    ),
    (
        "zerodispatch_broker_confirms_sent_total",
        "Confirms sent.",
        |s| s.confirms_sent,
    ),
    (
        "zerodispatch_broker_confirms_refused_total",
        "Confirms the dispatcher refused (shutdown).",
        |s| s.confirms_refused,
    ),
    (
        "zerodispatch_broker_timed_out_total",
        "Messages reported TimedOut.",
        |s| s.timed_out,
    ),
    (
        "zerodispatch_broker_put_frames_total",
        "PUT batches (frames) producers sent.",
        |s| s.put_frames,
    ),
    (
        "zerodispatch_broker_put_messages_total",
        "Messages in those frames.",
        |s| s.put_messages,
    ),
    (
        "zerodispatch_broker_handler_panics_total",
        "Panics caught in the applications' on_ack and on_delivery handlers.",
        |s| s.handler_panics,
    ),
    (
        "zerodispatch_broker_unknown_confirms_total",
        "Explicit confirms naming a message the consumer did not hold: dropped.",
        |s| s.unknown_confirms,
    ),
];

/// Each queue's counters [`export`] publishes (label `queue`).
pub const QUEUE_COUNTERS: [QueueMetric; 18] = [
    (
        "zerodispatch_broker_queue_stored_total",
        "Messages stored (PUTs accepted).",
        |q| q.stored,
    ),
    (
        "zerodispatch_broker_queue_rejected_full_total",
        "PUTs refused because the message table was full.",
        |q| q.rejected_full,
    ),
    (
        "zerodispatch_broker_queue_pushed_total",
        "PUSHes sent to consumers (one per app share).",
        |q| q.pushed,
    ),
    (
        "zerodispatch_broker_queue_redelivered_total",
        "Shares made deliverable again because their consumer closed.",
        |q| q.redelivered,
    ),
    (
        "zerodispatch_broker_queue_confirms_total",
        "Confirms that released a share.",
        |q| q.confirms,
    ),
    (
        "zerodispatch_broker_queue_duplicate_confirms_total",
        "Confirms for a share already confirmed.",
        |q| q.duplicate_confirms,
    ),
    (
        "zerodispatch_broker_queue_unknown_guid_total",
        "Confirms for a GUID the queue does not hold.",
        |q| q.unknown_guid,
    ),
    (
        "zerodispatch_broker_queue_gone_consumer_total",
        "Confirms from a consumer the share was not pushed to.",
        |q| q.gone_consumer,
    ),
    (
        "zerodispatch_broker_queue_dropped_shares_total",
        "Shares dropped because their consumer closed.",
        |q| q.dropped_shares,
    ),
    (
        "zerodispatch_broker_queue_acked_total",
        "Messages acknowledged Stored to their producer (at store, or at the quorum).",
        |q| q.acked,
    ),
    (
        "zerodispatch_broker_queue_released_total",
        "Messages released: every share confirmed and the ACK gone.",
        |q| q.released,
    ),
    (
        "zerodispatch_broker_queue_release_panics_total",
        "Panics caught in the release hook.",
        |q| q.release_panics,
    ),
    (
        "zerodispatch_broker_queue_receipts_total",
        "Replicas' receipts counted (one per replica and message).",
        |q| q.receipts,
    ),
    (
        "zerodispatch_broker_queue_duplicate_receipts_total",
        "Receipts from a replica that had sent one for the message already.",
        |q| q.duplicate_receipts,
    ),
    (
        "zerodispatch_broker_queue_unknown_receipts_total",
        "Receipts for a message the queue does not hold.",
        |q| q.unknown_receipts,
    ),
    (
        "zerodispatch_broker_queue_deduplicated_total",
        "Named producers' PUTs of messages stored already: ACKed again, not stored.",
        |q| q.deduplicated,
    ),
    (
        "zerodispatch_broker_queue_out_of_window_total",
        "Named producers' PUTs older than the deduplication window: refused, not stored.",
        |q| q.out_of_window,
    ),
    (
        "zerodispatch_broker_queue_superseded_total",
        "PUTs a newer producer of their name sent again while the quorum was awaited: answered Closed.",
        |q| q.superseded,
    ),
];

/// The gauge of the messages each queue holds now (label `queue`).
pub const QUEUE_HELD: &str = "zerodispatch_broker_queue_held";

/// Publishes the broker's statistics to the installed `metrics` recorder: its dispatcher's
/// processors, [`SESSION_COUNTERS`], and for each queue [`QUEUE_COUNTERS`] and
/// [`QUEUE_HELD`]. See the module's contract.
pub fn export(broker: &Broker) {
    zerodispatch_core::metrics::export(&broker.processor_stats());
    let sessions = broker.session_stats();
    for (name, help, read) in SESSION_COUNTERS {
        describe_counter!(name, help);
        counter!(name).absolute(read(&sessions));
    }
    for (name, help, _) in QUEUE_COUNTERS {
        describe_counter!(name, help);
    }
    describe_gauge!(QUEUE_HELD, "Messages the queue holds now.");
    for (id, queue) in broker.queue_stats().iter().enumerate() {
        let id = id.to_string();
        for (name, _, read) in QUEUE_COUNTERS {
            counter!(name, "queue" => id.clone()).absolute(read(queue));
        }
        gauge!(QUEUE_HELD, "queue" => id).set(queue.held as f64);
    }
}
