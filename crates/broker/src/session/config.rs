//! What an application hands its sessions: the handlers they call with its batches, and
//! how its producer sends ([`ProducerConfig`]).

#[cfg(doc)]
use crate::limits::{FRAME_OVERHEAD, MAX_UNCONFIRMED};
#[cfg(doc)]
use crate::message::Confirms;
use crate::message::{Ack, Delivery};

/// What a producer's application is called with, on its session's processor, for each
/// batch of outcomes. It must not block for long: it runs on a processor thread. The
/// credits of the batch's messages are given back before it is called. A panic in it is
/// caught and counted ([`SessionStats::handler_panics`](crate::SessionStats::handler_panics));
/// the batch is not reported again.
pub type AckHandler = Box<dyn FnMut(&[Ack]) + Send>;

/// What a consumer's application is called with, on its session's processor, for each
/// batch of deliveries. With [`Confirms::OnReturn`] (the default) every message of the
/// batch is confirmed when it returns, or when it panics (the panic is caught and counted;
/// the batch is not delivered again); with [`Confirms::Explicit`] the application confirms
/// each one later.
pub type DeliveryHandler = Box<dyn FnMut(&[Delivery]) + Send>;

/// When a producer's session sends the PUTs it has collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushStrategy {
    /// Dynamic send (natural batching): when the session's processor has drained its
    /// queue (the flush contract), when the batch reaches `batch_size`, or when the next
    /// message would not fit `max_frame_bytes`. At low rates each message goes at once;
    /// under load batches grow by themselves.
    #[default]
    Dynamic,
    /// Timer aggregation, the baseline: every `interval` (a free-running ticker), or when
    /// the batch reaches `batch_size` or the frame is full.
    Timer(std::time::Duration),
}

/// How a producer sends: its flush strategy, its caps and its timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerConfig {
    /// Messages sent and without an outcome, at most: `send` waits and `try_send` hands the
    /// message back while the cap is reached. 1 to [`MAX_UNCONFIRMED`]; default 10,000.
    pub max_unconfirmed: usize,
    /// When batches are sent.
    pub flush: FlushStrategy,
    /// Messages per batch (PUT frame), at most. Default 256.
    pub batch_size: usize,
    /// Bytes per frame, at most: payload lengths plus [`FRAME_OVERHEAD`] per message. A
    /// message that cannot fit even alone is refused by `send`. Default 1 MiB.
    pub max_frame_bytes: usize,
    /// A message without an outcome after this long is reported `TimedOut`, once.
    pub confirm_timeout: Option<std::time::Duration>,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            max_unconfirmed: 10_000,
            flush: FlushStrategy::Dynamic,
            batch_size: 256,
            max_frame_bytes: 1 << 20,
            confirm_timeout: None,
        }
    }
}
