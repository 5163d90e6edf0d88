//! A connection's I/O task: the one task that reads and writes its socket.
//!
//! # A turn of the loop
//!
//! 1. Take the handles' commands (opens and closes): each appends its frame to the write
//!    buffer at once.
//! 2. If the write buffer has been written out entirely (nothing in flight), gather: the
//!    pending messages of every dynamic producer, and of every timer producer whose tick
//!    has come or whose messages fill a frame, and the confirms and credit of every
//!    consumer, encoded into the write buffer. This is dynamic send: while a write is in
//!    flight nothing is gathered, so what arrives meanwhile goes in the next write, all
//!    together.
//! 3. Settle what time decides: confirm timeouts, the broker's silence (three of the
//!    intervals the client announced in `Hello`, which is how long the heartbeat rule lets
//!    the broker stay silent: the connection ends), a heartbeat to send (the write buffer
//!    is empty and nothing was written for the interval the broker asked in `Welcome`, or
//!    the client's own if shorter).
//! 4. Wait for the first of, in this order of preference: a write that made progress,
//!    bytes to read (each whole frame is handled at once), a wake from a handle, the next
//!    deadline.
//!
//! The loop ends on an error (its own or the broker's), on the broker closing, or on
//! `Shutdown`. Then it sends an error frame if the error calls for one, records why the
//! connection ended (failing queued commands), and settles every message without an
//! outcome (`NotSent` if never written, `Closed` otherwise): every message gets its one
//! outcome, and every waiter its answer.
//!
//! The receive buffer holds one frame at most ([`HEADER_LEN`] + [`MAX_FRAME_LEN`]) and is
//! allocated once; the write buffer and every spare grow to the largest batch and are
//! then reused.

mod commands;
mod frames;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;
use zerodispatch_wire::{
    DeliveryToken, ErrorCode, ErrorFrame, Frame, FrameKind, Guid, HEADER_LEN, Header, MAX_FRAME_LEN,
};

use crate::command::{Command, Reply};
use crate::connection::Connection;
use crate::consumer::{ConsumerShared, DeliveryHandler};
use crate::error::ClientError;
use crate::producer::{ConfirmHandler, Outcome, Pending, ProducerShared};

/// How long the task tries to write its last frames (an error frame, what was pending at
/// `Shutdown`) before it closes the socket.
const LAST_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// Where a producer or consumer stands with the broker.
enum Phase {
    /// `Open...` sent; the reply waits for the answer (`ProducerOpened`, the echo of
    /// `OpenConsumer`).
    Opening(Option<Reply>),
    Open,
    /// `Close...` sent; the reply (if any) waits for the echo.
    Closing(Option<Reply>),
}

impl Phase {
    fn answer(&mut self, result: Result<(), ClientError>) {
        if let Self::Opening(reply) | Self::Closing(reply) = self
            && let Some(reply) = reply.take()
        {
            let _ = reply.send(result);
        }
    }
}

/// The task's side of a producer.
struct ProducerEntry {
    shared: Arc<ProducerShared>,
    on_confirm: ConfirmHandler,
    /// Outcomes to report; allocated for the whole cap (no more can be without an outcome).
    outcomes: Vec<Outcome>,
    /// The pending buffer's other half (see `ProducerShared::take_pending`).
    spare: Pending,
    /// The timer's next tick (timer producers only).
    next_tick: Option<Instant>,
    phase: Phase,
}

impl ProducerEntry {
    fn report(&mut self) {
        self.shared.report(&mut self.on_confirm, &mut self.outcomes);
    }

    /// Settles everything without an outcome and answers a waiter with `result`.
    fn settle_all(
        &mut self,
        error: ClientError,
        pending_not_sent: bool,
        result: Result<(), ClientError>,
    ) {
        self.shared.settle_all(
            error,
            pending_not_sent,
            std::time::Instant::now(),
            &mut self.outcomes,
        );
        self.report();
        // Senders waiting for room learn that the producer is closed, outcomes or not.
        self.shared.wake_senders();
        self.phase.answer(result);
    }
}

/// The task's side of a consumer.
struct ConsumerEntry {
    shared: Arc<ConsumerShared>,
    on_deliver: DeliveryHandler,
    /// The confirm list's other half.
    spare: Vec<(Guid, DeliveryToken)>,
    phase: Phase,
}

/// What woke the task.
enum Event {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    Woken,
    Deadline,
}

/// A connection's I/O task, handshake done.
pub(crate) struct Io {
    conn: Arc<Connection>,
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    /// Received bytes: `rbuf[..filled]`, never a whole frame (each is handled as it
    /// completes). Its length is one frame at most.
    rbuf: Vec<u8>,
    filled: usize,
    /// Bytes to write: `out[written..]`.
    out: Vec<u8>,
    written: usize,
    producers: Vec<ProducerEntry>,
    consumers: Vec<ConsumerEntry>,
    commands: VecDeque<Command>,
    /// Send a heartbeat after this long without writing.
    heartbeat: Option<Duration>,
    /// End after this long without receiving (three of the broker's intervals).
    silence_limit: Option<Duration>,
    last_written: Instant,
    last_received: Instant,
    /// Whether the task answers a protocol error with an error frame: not when what was
    /// bad is the broker's own error frame (the protocol closes without answering then).
    answer_errors: bool,
}

impl Io {
    /// The task for a connection whose handshake is done: `rbuf[..filled]` are bytes
    /// received after `Welcome`.
    pub(crate) fn new(
        conn: Arc<Connection>,
        stream: tokio::net::TcpStream,
        rbuf: Vec<u8>,
        filled: usize,
        own_heartbeat: Duration,
        broker_heartbeat: Duration,
    ) -> Self {
        let (reader, writer) = stream.into_split();
        let heartbeat = [own_heartbeat, broker_heartbeat]
            .into_iter()
            .filter(|d| !d.is_zero())
            .min();
        // The heartbeat rule (docs/protocol.md): the interval a side announces is how long
        // its peer may stay silent. The broker sends at the client's interval, so the
        // client gives up after three of its own; announcing none, it never times out.
        let silence_limit = (!own_heartbeat.is_zero()).then(|| own_heartbeat * 3);
        let now = Instant::now();
        Self {
            conn,
            reader,
            writer,
            rbuf,
            filled,
            // As large as the largest frame, so that a write of a few full frames is
            // what it takes to grow it.
            out: Vec::with_capacity(HEADER_LEN + MAX_FRAME_LEN as usize),
            written: 0,
            producers: Vec::new(),
            consumers: Vec::new(),
            commands: VecDeque::with_capacity(16),
            heartbeat,
            silence_limit,
            last_written: now,
            last_received: now,
            answer_errors: true,
        }
    }

    /// Runs the connection until it ends.
    pub(crate) async fn run(mut self) {
        let sleep = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(sleep);
        // Bytes that came with `Welcome`.
        let mut error = if self.filled > 0 {
            self.handle_received().err()
        } else {
            None
        };
        while error.is_none() {
            match self.turn(sleep.as_mut()).await {
                Ok(()) => {}
                Err(e) => error = Some(e),
            }
        }
        let error = error.unwrap_or(ClientError::Closed);
        self.end(error).await;
    }

    /// One turn of the loop (see the module's description).
    async fn turn(
        &mut self,
        mut sleep: std::pin::Pin<&mut tokio::time::Sleep>,
    ) -> Result<(), ClientError> {
        self.run_commands()?;
        let now = Instant::now();
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
            self.gather(now);
        }
        let deadline = self.on_time(now)?;
        sleep.as_mut().reset(deadline);
        let writing = self.written < self.out.len();
        // Writing first: a broker that keeps sending cannot hold back what the client has
        // to write (its confirms and credit among it), and the write buffer empties, which
        // turns this branch off and lets the read come next.
        let event = tokio::select! {
            biased;
            wrote = self.writer.write(&self.out[self.written..]), if writing => Event::Wrote(wrote),
            read = self.reader.read(&mut self.rbuf[self.filled..]) => Event::Read(read),
            () = self.conn.wake.notified() => Event::Woken,
            () = &mut sleep => Event::Deadline,
        };
        match event {
            Event::Read(Ok(0)) => Err(ClientError::ConnectionClosed),
            Event::Read(Ok(n)) => {
                self.filled += n;
                self.last_received = Instant::now();
                self.handle_received()
            }
            Event::Wrote(Ok(0)) => Err(ClientError::ConnectionClosed),
            Event::Wrote(Ok(n)) => {
                self.written += n;
                self.last_written = Instant::now();
                Ok(())
            }
            Event::Read(Err(e)) | Event::Wrote(Err(e)) => Err(ClientError::io(&e)),
            Event::Woken | Event::Deadline => Ok(()),
        }
    }

    /// Encodes what the producers and consumers have to send (dynamic send: called when
    /// nothing is in flight).
    fn gather(&mut self, now: Instant) {
        for entry in &mut self.producers {
            if !matches!(entry.phase, Phase::Open) {
                continue;
            }
            let shared = &entry.shared;
            match entry.next_tick.as_mut() {
                None => shared.take_pending(&mut entry.spare, |_| true),
                Some(tick) => {
                    let due = now >= *tick;
                    if due {
                        let crate::Flush::Timer(interval) = shared.options.flush else {
                            unreachable!("only timer producers have a tick");
                        };
                        // A free-running ticker: the next tick after now, on the grid.
                        while *tick <= now {
                            *tick += interval;
                        }
                    }
                    shared.take_pending(&mut entry.spare, |pending| {
                        due || ProducerShared::fills_frame(pending)
                    });
                }
            }
            if !entry.spare.is_empty() {
                shared.encode(&mut entry.spare, &mut self.out);
            }
        }
        for entry in &mut self.consumers {
            if matches!(entry.phase, Phase::Open) {
                entry.shared.encode(&mut self.out, &mut entry.spare);
            }
        }
    }

    /// Encodes everything pending, ticks or not.
    fn gather_all(&mut self) {
        for entry in &mut self.producers {
            if matches!(entry.phase, Phase::Open) {
                let shared = &entry.shared;
                shared.take_pending(&mut entry.spare, |_| true);
                shared.encode(&mut entry.spare, &mut self.out);
            }
        }
        for entry in &mut self.consumers {
            if matches!(entry.phase, Phase::Open) {
                entry.shared.encode(&mut self.out, &mut entry.spare);
            }
        }
    }

    /// Settles what time decides at `now`; returns the next deadline.
    fn on_time(&mut self, now: Instant) -> Result<Instant, ClientError> {
        let mut deadline = now + Duration::from_secs(3600);
        if let Some(limit) = self.silence_limit {
            if now.duration_since(self.last_received) >= limit {
                return Err(ClientError::HeartbeatTimeout);
            }
            deadline = deadline.min(self.last_received + limit);
        }
        // While a write is in flight, its progress wakes the task: the heartbeat and the
        // ticks (which `gather` takes only when nothing is in flight) wait for it, and a
        // deadline of theirs already past must not make the task spin.
        let idle = self.written == self.out.len();
        if let (Some(interval), true) = (self.heartbeat, idle) {
            if now.duration_since(self.last_written) >= interval {
                encode(Frame::Heartbeat, &mut self.out);
            } else {
                deadline = deadline.min(self.last_written + interval);
            }
        }
        let std_now = std::time::Instant::now();
        for entry in &mut self.producers {
            entry.shared.expire(std_now, &mut entry.outcomes);
            entry.report();
            if let Some(expiry) = entry.shared.next_expiry() {
                let left = expiry.saturating_duration_since(std_now);
                deadline = deadline.min(now + left);
            }
            if let (Some(tick), Phase::Open, true) = (entry.next_tick, &entry.phase, idle) {
                deadline = deadline.min(tick);
            }
        }
        Ok(deadline)
    }

    /// Ends the connection with `error`: the last frames, then every outcome and answer.
    async fn end(mut self, error: ClientError) {
        let code = match &error {
            ClientError::Protocol { code, .. } => Some(*code),
            ClientError::HeartbeatTimeout => Some(ErrorCode::HEARTBEAT_TIMEOUT),
            _ => None,
        };
        if let (Some(code), true) = (code, self.answer_errors) {
            let message = match &error {
                ClientError::Protocol { message, .. } => message.as_str(),
                _ => "nothing received for three heartbeat intervals",
            };
            let frame = ErrorFrame {
                code,
                refused: None,
                subject: 0,
                message: truncate(message),
            };
            encode(Frame::Error(frame), &mut self.out);
        }
        if matches!(error, ClientError::Closed) || code.is_some() {
            let last = &self.out[self.written..];
            let _ = tokio::time::timeout(LAST_WRITE_TIMEOUT, self.writer.write_all(last)).await;
            let _ = tokio::time::timeout(LAST_WRITE_TIMEOUT, self.writer.shutdown()).await;
        }
        for mut entry in self.producers.drain(..) {
            entry.settle_all(error.clone(), true, Err(error.clone()));
        }
        for mut entry in self.consumers.drain(..) {
            entry.shared.close_with(error.clone());
            entry.phase.answer(Err(error.clone()));
        }
        for command in self.commands.drain(..) {
            command.fail(&error);
        }
        // Last, so that whoever waits for the end finds every outcome reported; commands
        // queued meanwhile are failed here.
        self.conn.end(&error);
    }
}

/// Whether `bytes` start with a valid header of an `Error` frame: a decode error in them is
/// in an error frame's body, which the protocol does not answer.
pub(crate) fn is_error_frame(bytes: &[u8]) -> bool {
    matches!(
        Header::parse(bytes),
        Ok(Some(Header {
            kind: FrameKind::Error,
            ..
        }))
    )
}

/// Appends a frame the client builds from valid values.
fn encode(frame: Frame<'_>, out: &mut Vec<u8>) {
    let encoded = frame.encode(out);
    debug_assert!(
        encoded.is_ok(),
        "the client built an invalid frame: {encoded:?}"
    );
}

/// The longest prefix of `message` an error frame carries, on a character boundary.
fn truncate(message: &str) -> &str {
    let max = zerodispatch_wire::MAX_ERROR_MESSAGE_LEN as usize;
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// A receive buffer for one frame.
pub(crate) fn receive_buffer() -> Vec<u8> {
    vec![0; HEADER_LEN + MAX_FRAME_LEN as usize]
}
