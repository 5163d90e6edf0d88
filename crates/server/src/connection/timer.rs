//! A connection's timer: the one deadline (handshake, frame, idle limit, heartbeat owed,
//! trim) the task's loop sleeps until, what is done when it passes, and the trim of a
//! quiet connection's grown buffers.

use super::*;

impl Connection {
    /// When the timer must fire next: the handshake's time up, the idle limit, a heartbeat
    /// the client asked for, or the trim of a quiet connection's grown buffers.
    pub(super) fn deadline(&self, io: &Io, input: &[u8]) -> Instant {
        let idle = self.shared.limits.idle_timeout;
        let mut at = if self.welcomed {
            self.last_received + idle
        } else {
            self.accepted + self.handshake_limit()
        };
        if let (Some(began), true) = (self.frame_began, self.welcomed) {
            at = at.min(began + self.shared.limits.frame_timeout);
        }
        if let (Some(peer), true) = (self.peer_heartbeat, self.welcomed) {
            at = at.min(io.last_sent + peer);
        }
        if self.grown(io, input) {
            at = at.min(self.last_received.max(io.last_sent) + TRIM_AFTER);
        }
        at
    }

    pub(super) fn tick(
        &mut self,
        io: &mut Io,
        input: &mut Vec<u8>,
        filled: usize,
    ) -> Result<(), Ending> {
        let now = Instant::now();
        let idle = self.shared.limits.idle_timeout;
        if !self.welcomed {
            let limit = self.handshake_limit();
            if now >= self.accepted + limit {
                return fatal(
                    ErrorCode::HANDSHAKE_REQUIRED,
                    format!("no Hello within {} ms", limit.as_millis()),
                );
            }
        } else if let Some(began) = self.frame_began
            && now >= began + self.shared.limits.frame_timeout
        {
            return fatal(
                ErrorCode::FRAME_TIMEOUT,
                format!(
                    "a frame begun was not whole within the server's frame timeout, {} ms",
                    self.shared.limits.frame_timeout.as_millis()
                ),
            );
        } else if now >= self.last_received + idle {
            return fatal(
                ErrorCode::HEARTBEAT_TIMEOUT,
                format!(
                    "nothing received for the server's idle limit, {} ms",
                    idle.as_millis()
                ),
            );
        }
        if let (Some(peer), true) = (self.peer_heartbeat, self.welcomed)
            && now >= io.last_sent + peer
        {
            io.frame(Frame::Heartbeat);
        }
        if self.grown(io, input) && now >= self.last_received.max(io.last_sent) + TRIM_AFTER {
            self.trim(io, input, filled);
        }
        Ok(())
    }

    /// How long the handshake may take: [`Limits::handshake_timeout`], or the idle limit if
    /// shorter.
    fn handshake_limit(&self) -> Duration {
        let limits = &self.shared.limits;
        limits.handshake_timeout.min(limits.idle_timeout)
    }

    /// Whether a buffer grew past what a quiet connection keeps.
    fn grown(&self, io: &Io, input: &[u8]) -> bool {
        input.len() > READ_BUFFER_FIRST
            || io.out.capacity() > WRITE_BUFFER_KEPT
            || self.staged.capacity() > FIRST_SEGMENT
            || self.scratch.capacity() > self.shared.store.slot_size().min(WRITE_BUFFER_KEPT)
            || self.guids.capacity() > FIRST_SEGMENT
    }

    /// Gives back the buffers a burst grew. The read buffer keeps room for the whole of a
    /// frame it holds the start of (a read must never be offered an empty buffer: it would
    /// read as the end of the stream).
    fn trim(&mut self, io: &mut Io, input: &mut Vec<u8>, filled: usize) {
        let frame = match Header::parse(&input[..filled]) {
            Ok(Some(header)) => header.frame_len(),
            _ => 0,
        };
        input.truncate(frame.max(filled + 1).max(READ_BUFFER_FIRST));
        input.shrink_to_fit();
        io.out.shrink_to(WRITE_BUFFER_KEPT);
        self.staged.shrink_to(FIRST_SEGMENT);
        self.scratch
            .shrink_to(self.shared.store.slot_size().min(WRITE_BUFFER_KEPT));
        self.guids.shrink_to(FIRST_SEGMENT);
    }
}
