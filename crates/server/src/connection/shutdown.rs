//! A connection's end: the drain at the server's shutdown, the linger after an error frame,
//! and the teardown of its sessions.

use super::*;

/// Reads and drops what the client still sends, until it closes or [`LINGER`] passes.
pub(super) async fn linger(stream: &mut TcpStream, buf: &mut [u8]) {
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(n) = stream.read(buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

impl Connection {
    /// At shutdown: closes the consumers (what was delivered and not confirmed goes back to
    /// its queue, and nothing more is delivered), writes the outcomes of the messages
    /// handed the broker, until none is missing or [`SHUTDOWN_DRAIN`] has passed, then
    /// `SHUTTING_DOWN`. A client that does not read cannot hold it longer: a write still
    /// blocked [`LINGER`] after that is abandoned, the connection is lost, and nothing more
    /// is written (the stream may end mid-frame).
    pub(super) async fn drain_for_shutdown(&mut self, io: &mut Io, message: &str) {
        let bound = *io
            .shutdown_bound
            .get_or_insert_with(writer::shutdown_deadline);
        for slot in 0..self.consumers.len() {
            if self.consumers[slot].state == Use::Open {
                self.close_consumer_slot(slot, false);
            }
        }
        let outbound = self.outbound.clone();
        // From when the connection first saw the shutdown (a write may have waited since).
        let until = bound - LINGER;
        let drained = tokio::time::timeout_at(bound, async {
            while !io.lost
                && self
                    .producers
                    .iter()
                    .any(|p| p.state != Use::Free && p.in_flight != 0)
            {
                tokio::select! {
                    () = outbound.ready() => {
                        if self.drain(io).await.is_err() {
                            break;
                        }
                        io.flush().await;
                    }
                    () = tokio::time::sleep_until(until) => break,
                }
            }
            io.error(ErrorCode::SHUTTING_DOWN, None, 0, message);
            io.flush().await;
        })
        .await;
        if drained.is_err() {
            io.lost = true;
        }
    }

    /// Closes every session of the connection and waits until each is gone, dropping the
    /// payload references of what they still hand over. Nothing more is written.
    pub(super) async fn teardown(&mut self, io: &mut Io) {
        io.lost = true;
        for slot in 0..self.producers.len() {
            if self.producers[slot].state == Use::Open {
                self.close_producer_slot(slot, false);
            }
        }
        for slot in 0..self.consumers.len() {
            if self.consumers[slot].state == Use::Open {
                self.close_consumer_slot(slot, false);
            }
        }
        let outbound = self.outbound.clone();
        while self.producers.iter().any(|p| p.state != Use::Free)
            || self.consumers.iter().any(|c| c.state != Use::Free)
        {
            outbound.ready().await;
            // Overflowed or not: only the references matter now.
            let _ = self.drain(io).await;
            if outbound.overflows() != 0 {
                break;
            }
        }
    }
}
