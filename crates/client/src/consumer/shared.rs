//! A consumer's shared part ([`ConsumerShared`]): the confirms and credit its handle
//! collects and the connection's I/O task sends, behind one lock.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use zerodispatch_wire::{ConsumerConfirmBuilder, ConsumerId, Credit, DeliveryToken, Frame, Guid};

use crate::error::ClientError;
use crate::lock::lock;
use crate::options::ConsumerOptions;

/// A consumer's state, behind its lock.
pub(super) struct ConsumerState {
    /// Deliveries confirmed (GUID and token) and not yet handed to the I/O task.
    pub(super) confirms: Vec<(Guid, DeliveryToken)>,
    /// Credit to give the broker, besides the confirms' with `auto_credit`.
    pub(super) credit: u32,
    /// Why the consumer is closed, if it is.
    pub(super) closed: Option<ClientError>,
    /// The last refusal of one of its frames (a confirm of a delivery it does not hold).
    pub(super) refusal: Option<ClientError>,
}

/// A consumer's shared part: its handle's and the I/O task's.
pub(crate) struct ConsumerShared {
    pub(crate) id: ConsumerId,
    pub(crate) options: ConsumerOptions,
    pub(super) state: Mutex<ConsumerState>,
    /// Wakes the connection's I/O task: the consumer has confirms or credit to send.
    pub(super) io_wake: Arc<Notify>,
    pub(super) panics: std::sync::atomic::AtomicU64,
}

impl ConsumerShared {
    pub(crate) fn new(id: ConsumerId, options: ConsumerOptions, io_wake: Arc<Notify>) -> Self {
        Self {
            id,
            options,
            state: Mutex::new(ConsumerState {
                confirms: Vec::with_capacity((options.credit as usize).clamp(64, 4096)),
                credit: 0,
                closed: None,
                refusal: None,
            }),
            io_wake,
            panics: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, ConsumerState> {
        lock(&self.state)
    }

    pub(crate) fn confirm(&self, guid: Guid, token: DeliveryToken) {
        self.confirm_many(std::iter::once((guid, token)));
    }

    pub(super) fn confirm_many(&self, confirms: impl Iterator<Item = (Guid, DeliveryToken)>) {
        let mut state = self.lock();
        if state.closed.is_some() {
            return;
        }
        let was_idle = state.confirms.is_empty() && state.credit == 0;
        state.confirms.extend(confirms);
        let wake = was_idle && !state.confirms.is_empty();
        drop(state);
        if wake {
            self.io_wake.notify_one();
        }
    }

    /// Appends the confirms collected to `out` (`ConsumerConfirm` frames), then the credit
    /// to give (a `Credit` frame), using `spare` (empty) to take the confirms out of the
    /// lock. Returns the confirms written.
    pub(crate) fn encode(
        &self,
        out: &mut Vec<u8>,
        spare: &mut Vec<(Guid, DeliveryToken)>,
    ) -> usize {
        debug_assert!(spare.is_empty());
        let mut state = self.lock();
        if state.confirms.is_empty() && state.credit == 0 {
            return 0;
        }
        std::mem::swap(&mut state.confirms, spare);
        let mut credit = std::mem::take(&mut state.credit);
        drop(state);
        for chunk in spare.chunks(zerodispatch_wire::MAX_MESSAGES_PER_FRAME as usize) {
            let mut frame = ConsumerConfirmBuilder::begin(out, self.id);
            for &(guid, token) in chunk {
                // A chunk fits a frame: 4096 confirms are 80 KiB.
                let _ = frame.push(guid, token);
            }
            let _ = frame.finish();
        }
        if self.options.auto_credit {
            credit = credit.saturating_add(u32::try_from(spare.len()).unwrap_or(u32::MAX));
        }
        if credit > 0 {
            let _ = Frame::Credit(Credit {
                consumer: self.id,
                credit,
            })
            .encode(out);
        }
        let written = spare.len();
        spare.clear();
        written
    }

    /// Counts a panic of the delivery handler, caught.
    pub(crate) fn handler_panicked(&self) {
        self.panics
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Closes the consumer with `error`, unless it is closed already.
    pub(crate) fn close_with(&self, error: ClientError) {
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some(error);
        }
    }

    /// Records a refusal of one of the consumer's frames.
    pub(crate) fn refused(&self, error: ClientError) {
        self.lock().refusal = Some(error);
    }
}
