//! One connection: a task that reads frames, binds the client's producers and consumers to
//! broker sessions, and writes what the sessions hand back.
//!
//! # The task's loop
//!
//! One `tokio::select!` over the socket's reads, the connection's [`Outbound`] queue (the
//! processors' outcomes and deliveries), the heartbeat timer and the server's shutdown.
//! Frames are decoded in place from a reused read buffer (preallocated, grown once to at
//! most `HEADER_LEN + MAX_FRAME_LEN` for the largest frame the client sends); answers are
//! built with the wire crate's batch builders into a reused write buffer and written when
//! the loop comes round: natural batching, as many confirms or deliveries to a frame as
//! arrived meanwhile.
//!
//! # Joining the processors
//!
//! Publishes go through the broker's async door (`publish_async`), consumer confirms and
//! credits too (`confirm_batch_async`, `add_credit_async`): a full session processor
//! suspends the task, never a runtime thread. Opening and closing sessions can wait for a
//! processor, so they run on blocking threads (`spawn_blocking`); the echo of a close is
//! written when the session's callback is dropped, after its last call
//! ([`SessionLink`]), so that nothing names the id after the echo.
//!
//! # Bounds
//!
//! A producer has at most its `max_unconfirmed` messages without an outcome (one more is
//! confirmed `RejectedProducerFull` here, without reaching the broker); a consumer at most
//! [`Limits::consumer_window`] messages delivered and not confirmed, since the server hands
//! the broker the consumer's credit only as far as that leaves room. Together they bound
//! the outbound queue, which is sized for them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use zerodispatch_broker::{
    Ack, AppId, Broker, BrokerError, Callback, ClientType, Confirms, Consumer, ConsumerOptions,
    Delivery, Guid, MAX_UNCONFIRMED, Payload, Producer, ProducerConfig, QueueId, QueueMode,
    SendError,
};
use zerodispatch_wire::{
    self as wire, CloseConsumer, CloseProducer, ConfirmStatus, ConsumerConfirmFrame,
    DeliverBuilder, ErrorCode, ErrorFrame, Frame, FrameKind, HEADER_LEN, Header, Hello,
    MAX_FRAME_LEN, MAX_MESSAGES_PER_FRAME, OpenConsumer, OpenProducer, PublishConfirmBuilder,
    PublishFrame, VERSION, Welcome,
};

use crate::config::Limits;
use crate::link::SessionLink;
use crate::outbound::{OutItem, Outbound};
use crate::payloads::PayloadStore;

/// What every connection shares: the broker, its queues' modes, the payload store, the
/// limits and the server's counters.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) broker: Arc<Broker>,
    pub(crate) queues: Arc<[QueueMode]>,
    pub(crate) store: Arc<PayloadStore>,
    pub(crate) limits: Limits,
    pub(crate) connections: AtomicUsize,
    pub(crate) overflow_closes: AtomicU64,
}

/// The read buffer's size at first; it grows to a frame's size, at most
/// `HEADER_LEN + MAX_FRAME_LEN`, when the client sends one that large.
const READ_BUFFER: usize = 64 << 10;
/// The write buffer is written to the socket once it holds this much, mid-batch.
const WRITE_HIGH_WATER: usize = 1 << 20;
/// A client that has not said `Hello` this long after connecting is closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a closing producer waits for the outcomes of its messages: without end, in
/// effect, so that every message gets its real outcome and every payload slot is freed.
const PRODUCER_CLOSE_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);
/// How long a connection closed on an error keeps reading (and dropping) what the client
/// still sends, so that the error frame is not lost to a reset.
const LINGER: Duration = Duration::from_millis(500);

/// How the connection ends.
enum Ending {
    /// The client went away, or the socket failed.
    Lost,
    /// The client sent a fatal error frame, or a bad one: close without answering.
    PeerClosed,
    /// Answer with an error frame of this code, then close.
    Fatal(ErrorCode, Cow<'static, str>),
}

fn fatal<T>(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Result<T, Ending> {
    Err(Ending::Fatal(code, message.into()))
}

/// The socket's writing side: the write buffer and when something was last sent.
struct Io {
    stream: TcpStream,
    out: Vec<u8>,
    last_sent: Instant,
    /// The socket failed, or the connection is being torn down: nothing more is written.
    lost: bool,
}

impl Io {
    /// Writes the write buffer to the socket.
    async fn flush(&mut self) {
        if self.lost {
            self.out.clear();
            return;
        }
        if self.out.is_empty() {
            return;
        }
        if self.stream.write_all(&self.out).await.is_err() {
            self.lost = true;
        }
        self.out.clear();
        self.last_sent = Instant::now();
    }

    /// Appends an error frame.
    fn error(&mut self, code: ErrorCode, refused: Option<FrameKind>, subject: u32, message: &str) {
        // Cut to the protocol's limit at a character boundary.
        let mut end = message.len().min(usize::from(wire::MAX_ERROR_MESSAGE_LEN));
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let frame = Frame::Error(ErrorFrame {
            code,
            refused,
            subject,
            message: &message[..end],
        });
        // A message within the limit: cannot fail.
        let _ = frame.encode(&mut self.out);
    }

    /// Appends a frame of fixed layout the server built (never refused by the encoder).
    fn frame(&mut self, frame: Frame<'_>) {
        let _ = frame.encode(&mut self.out);
    }
}

/// Where a producer or consumer index of the connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    Free,
    Open,
    /// Its session is closing; `echo`: the client asked, and gets the close echoed once the
    /// session is gone.
    Closing {
        echo: bool,
    },
}

struct ProducerSlot {
    state: Use,
    wire: u32,
    generation: u32,
    queue: QueueId,
    /// References a message of it takes in the payload store.
    refs: u32,
    max_unconfirmed: u32,
    /// Messages published and without a confirm written yet.
    in_flight: u32,
    producer: Option<Arc<Producer>>,
}

/// A hasher for GUIDs, which are already well spread (producer id, sequence number).
#[derive(Default)]
struct GuidHash(u64);

impl Hasher for GuidHash {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0 ^ u64::from_le_bytes(word))
                .rotate_left(23)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

type Unconfirmed = HashMap<Guid, u64, BuildHasherDefault<GuidHash>>;

struct ConsumerSlot {
    state: Use,
    wire: u32,
    generation: u32,
    consumer: Option<Consumer>,
    fanout: bool,
    /// What the consumer was delivered and has not confirmed: GUID -> payload handle.
    /// Allocated for the window when the index is first used, reused after.
    unconfirmed: Unconfirmed,
    /// Credit handed to the broker and not used by a delivery seen yet.
    granted: u32,
    /// Credit the client gave that the server has not handed the broker yet (no room).
    wanted: u32,
}

/// The connection's state, apart from its socket and read buffer.
struct Connection {
    shared: Arc<Shared>,
    outbound: Arc<Outbound>,
    producers: Vec<ProducerSlot>,
    consumers: Vec<ConsumerSlot>,
    /// Items taken off the outbound queue, being written.
    staged: Vec<Option<OutItem>>,
    /// A payload read from the store, being written.
    scratch: Vec<u8>,
    /// The GUIDs of a consumer confirm, being handed to the broker.
    guids: Vec<Guid>,
    next_generation: u32,
    welcomed: bool,
    accepted: Instant,
    peer_heartbeat: Option<Duration>,
    last_received: Instant,
    /// The sum of the open producers' `max_unconfirmed`.
    budget_used: u32,
    shutdown: watch::Receiver<bool>,
}

/// Serves one accepted connection until it ends, then closes its sessions and waits for
/// them to be gone (so that every payload reference they hold is dropped).
pub(crate) async fn serve(stream: TcpStream, shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let limits = shared.limits;
    let outbound = Arc::new(Outbound::new(
        limits.outbound_capacity() + MAX_MESSAGES_PER_FRAME as usize,
    ));
    let now = Instant::now();
    let mut io = Io {
        stream,
        out: Vec::with_capacity(WRITE_HIGH_WATER + 2 * (HEADER_LEN + MAX_FRAME_LEN as usize)),
        last_sent: now,
        lost: false,
    };
    let mut connection = Connection {
        producers: (0..limits.max_producers)
            .map(|_| ProducerSlot {
                state: Use::Free,
                wire: 0,
                generation: 0,
                queue: QueueId(0),
                refs: 0,
                max_unconfirmed: 0,
                in_flight: 0,
                producer: None,
            })
            .collect(),
        consumers: (0..limits.max_consumers)
            .map(|_| ConsumerSlot {
                state: Use::Free,
                wire: 0,
                generation: 0,
                consumer: None,
                fanout: false,
                unconfirmed: Unconfirmed::default(),
                granted: 0,
                wanted: 0,
            })
            .collect(),
        staged: Vec::with_capacity(limits.staging_capacity()),
        scratch: Vec::with_capacity(shared.store.slot_size().next_multiple_of(8)),
        guids: Vec::with_capacity(MAX_MESSAGES_PER_FRAME as usize),
        shared,
        outbound,
        next_generation: 0,
        welcomed: false,
        accepted: now,
        peer_heartbeat: None,
        last_received: now,
        budget_used: 0,
        shutdown,
    };
    let mut input = vec![0; READ_BUFFER];
    let ending = connection.run(&mut io, &mut input).await;
    if let Ending::Fatal(code, message) = ending {
        if code == ErrorCode::INTERNAL {
            connection
                .shared
                .overflow_closes
                .fetch_add(1, Ordering::Relaxed);
        }
        io.error(code, None, 0, &message);
        io.flush().await;
        if !io.lost {
            let _ = io.stream.shutdown().await;
            linger(&mut io.stream, &mut input).await;
        }
    }
    connection.teardown(&mut io).await;
}

/// Reads and drops what the client still sends, until it closes or [`LINGER`] passes.
async fn linger(stream: &mut TcpStream, buf: &mut [u8]) {
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
    async fn run(&mut self, io: &mut Io, input: &mut Vec<u8>) -> Ending {
        if *self.shutdown.borrow_and_update() {
            return Ending::Fatal(
                ErrorCode::SHUTTING_DOWN,
                "the server is shutting down".into(),
            );
        }
        let outbound = self.outbound.clone();
        let mut shutdown = self.shutdown.clone();
        let mut filled = 0;
        let sleep = tokio::time::sleep_until(self.deadline(io).into());
        tokio::pin!(sleep);
        loop {
            io.flush().await;
            if io.lost {
                return Ending::Lost;
            }
            let deadline = self.deadline(io).into();
            if sleep.deadline() != deadline {
                sleep.as_mut().reset(deadline);
            }
            let step = tokio::select! {
                biased;
                _ = shutdown.changed() => {
                    fatal(ErrorCode::SHUTTING_DOWN, "the server is shutting down")
                }
                () = outbound.ready() => self.drain(io).await,
                read = io.stream.read(&mut input[filled..]) => match read {
                    Ok(0) | Err(_) => Err(Ending::Lost),
                    Ok(n) => {
                        filled += n;
                        self.last_received = Instant::now();
                        self.frames(io, input, &mut filled).await
                    }
                },
                () = &mut sleep => self.tick(io),
            };
            if let Err(ending) = step {
                return ending;
            }
        }
    }

    /// When the timer must fire next: a heartbeat to send, the client's heartbeats
    /// overdue, or the handshake's time up.
    fn deadline(&self, io: &Io) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        let mut at = far;
        if !self.welcomed {
            at = at.min(self.accepted + HANDSHAKE_TIMEOUT);
        } else {
            let own = self.shared.limits.heartbeat;
            if !own.is_zero() {
                at = at.min(io.last_sent + own);
            }
            if let Some(peer) = self.peer_heartbeat {
                at = at.min(self.last_received + 3 * peer);
            }
        }
        at
    }

    fn tick(&mut self, io: &mut Io) -> Result<(), Ending> {
        let now = Instant::now();
        if !self.welcomed {
            if now >= self.accepted + HANDSHAKE_TIMEOUT {
                return fatal(ErrorCode::HANDSHAKE_REQUIRED, "no Hello within 10 s");
            }
            return Ok(());
        }
        if let Some(peer) = self.peer_heartbeat {
            if now >= self.last_received + 3 * peer {
                return fatal(
                    ErrorCode::HEARTBEAT_TIMEOUT,
                    "nothing received for three of the client's heartbeat intervals",
                );
            }
        }
        let own = self.shared.limits.heartbeat;
        if !own.is_zero() && now >= io.last_sent + own {
            io.frame(Frame::Heartbeat);
        }
        Ok(())
    }

    /// Handles every whole frame in `input[..filled]`, then keeps the rest at its front.
    async fn frames(
        &mut self,
        io: &mut Io,
        input: &mut Vec<u8>,
        filled: &mut usize,
    ) -> Result<(), Ending> {
        let mut at = 0;
        let result = loop {
            match wire::decode(&input[at..*filled]) {
                Ok(Some((frame, len))) => {
                    let handled = self.frame(io, frame).await;
                    at += len;
                    if handled.is_err() {
                        break handled;
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => {
                    // A bad error frame is closed on without an answer.
                    if let Ok(Some(header)) = Header::parse(&input[at..*filled]) {
                        if header.kind == FrameKind::Error {
                            break Err(Ending::PeerClosed);
                        }
                    }
                    break fatal(error.code(), error.to_string());
                }
            }
        };
        input.copy_within(at..*filled, 0);
        *filled -= at;
        if let Ok(Some(header)) = Header::parse(&input[..*filled]) {
            // At most HEADER_LEN + MAX_FRAME_LEN: the header was checked.
            if header.frame_len() > input.len() {
                input.resize(header.frame_len(), 0);
            }
        }
        result
    }

    async fn frame(&mut self, io: &mut Io, frame: Frame<'_>) -> Result<(), Ending> {
        if !self.welcomed {
            return match frame {
                Frame::Hello(hello) => self.hello(io, hello),
                other => fatal(
                    ErrorCode::HANDSHAKE_REQUIRED,
                    format!("a {:?} frame before Hello", other.kind()),
                ),
            };
        }
        match frame {
            Frame::Hello(_) => fatal(ErrorCode::HANDSHAKE_REQUIRED, "a second Hello"),
            Frame::Welcome(_) | Frame::PublishConfirm(_) | Frame::Deliver(_) => fatal(
                ErrorCode::UNEXPECTED_KIND,
                format!("the broker never receives a {:?} frame", frame.kind()),
            ),
            Frame::Heartbeat => Ok(()),
            Frame::Error(error) if error.code.is_fatal() => Err(Ending::PeerClosed),
            Frame::Error(_) => Ok(()),
            Frame::OpenProducer(open) => self.open_producer(io, open).await,
            Frame::CloseProducer(close) => {
                self.close_producer(io, close);
                Ok(())
            }
            Frame::Publish(batch) => self.publish(io, batch).await,
            Frame::OpenConsumer(open) => self.open_consumer(io, open).await,
            Frame::CloseConsumer(close) => {
                self.close_consumer(io, close);
                Ok(())
            }
            Frame::ConsumerConfirm(batch) => self.consumer_confirm(io, batch).await,
            Frame::Credit(credit) => {
                let kind = FrameKind::Credit;
                let Some(slot) = self.open_consumer_slot(credit.consumer.0) else {
                    return self.unknown_consumer(io, kind, credit.consumer.0);
                };
                let c = &mut self.consumers[slot];
                c.wanted = c.wanted.saturating_add(credit.credit);
                self.grant(slot).await
            }
        }
    }

    fn hello(&mut self, io: &mut Io, hello: Hello) -> Result<(), Ending> {
        if !(hello.min_version..=hello.max_version).contains(&VERSION) {
            return fatal(
                ErrorCode::UNSUPPORTED_VERSION,
                format!(
                    "the server speaks version {VERSION}; the client offers {} to {}",
                    hello.min_version, hello.max_version
                ),
            );
        }
        self.welcomed = true;
        self.peer_heartbeat =
            (hello.heartbeat_ms != 0).then(|| Duration::from_millis(u64::from(hello.heartbeat_ms)));
        io.frame(Frame::Welcome(Welcome {
            version: VERSION,
            // Checked by `Limits::check` to fit.
            heartbeat_ms: self.shared.limits.heartbeat.as_millis() as u32,
        }));
        Ok(())
    }

    fn generation(&mut self) -> u32 {
        self.next_generation = self.next_generation.wrapping_add(1);
        self.next_generation
    }

    /// The index of producer `wire`, open or closing.
    fn producer_slot(&self, wire: u32) -> Option<usize> {
        self.producers
            .iter()
            .position(|p| p.state != Use::Free && p.wire == wire)
    }

    fn consumer_slot(&self, wire: u32) -> Option<usize> {
        self.consumers
            .iter()
            .position(|c| c.state != Use::Free && c.wire == wire)
    }

    fn open_consumer_slot(&self, wire: u32) -> Option<usize> {
        self.consumer_slot(wire)
            .filter(|&i| self.consumers[i].state == Use::Open)
    }

    fn unknown_consumer(&self, io: &mut Io, kind: FrameKind, wire: u32) -> Result<(), Ending> {
        io.error(
            ErrorCode::UNKNOWN_CONSUMER,
            Some(kind),
            wire,
            "no such consumer open on this connection",
        );
        Ok(())
    }

    fn unknown_producer(&self, io: &mut Io, kind: FrameKind, wire: u32) -> Result<(), Ending> {
        io.error(
            ErrorCode::UNKNOWN_PRODUCER,
            Some(kind),
            wire,
            "no such producer open on this connection",
        );
        Ok(())
    }

    async fn open_producer(&mut self, io: &mut Io, open: OpenProducer) -> Result<(), Ending> {
        let (kind, wire) = (FrameKind::OpenProducer, open.producer.0);
        let refuse = |io: &mut Io, code, message: &str| {
            io.error(code, Some(kind), wire, message);
            Ok(())
        };
        if self.producer_slot(wire).is_some() {
            return refuse(
                io,
                ErrorCode::ID_IN_USE,
                "the producer id is open on this connection",
            );
        }
        if open.max_unconfirmed as usize > MAX_UNCONFIRMED {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "max_unconfirmed is above the broker's cap (2^24)",
            );
        }
        let limits = self.shared.limits;
        if u64::from(self.budget_used) + u64::from(open.max_unconfirmed)
            > u64::from(limits.max_unconfirmed_per_connection)
        {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "the connection's producers would have more unconfirmed messages than the server allows a connection",
            );
        }
        let Some(&mode) = self.shared.queues.get(open.queue.0 as usize) else {
            return refuse(io, ErrorCode::UNKNOWN_QUEUE, "no such queue");
        };
        let Some(slot) = self.producers.iter().position(|p| p.state == Use::Free) else {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "the connection has as many producers open as the server allows",
            );
        };
        let generation = self.generation();
        let link = SessionLink {
            outbound: self.outbound.clone(),
            store: self.shared.store.clone(),
            slot: slot as u16,
            generation,
            producer: true,
            fanout: false,
        };
        let config = ProducerConfig {
            max_unconfirmed: open.max_unconfirmed as usize,
            ..ProducerConfig::default()
        };
        let broker = self.shared.broker.clone();
        let opened = tokio::task::spawn_blocking(move || {
            broker.open_producer_with(config, move |acks: &[Ack]| link.on_ack(acks))
        })
        .await;
        let producer = match opened {
            Ok(Ok(producer)) => producer,
            Ok(Err(BrokerError::ShutDown)) => {
                return fatal(ErrorCode::SHUTTING_DOWN, "the broker is shutting down");
            }
            Ok(Err(error)) => return refuse(io, ErrorCode::LIMIT_OUT_OF_RANGE, &error.to_string()),
            Err(_) => return fatal(ErrorCode::INTERNAL, "opening the producer failed"),
        };
        self.producers[slot] = ProducerSlot {
            state: Use::Open,
            wire,
            generation,
            queue: QueueId(open.queue.0),
            refs: 1 + match mode {
                QueueMode::Priority => 1,
                QueueMode::Fanout { apps } => u32::from(apps),
            },
            max_unconfirmed: open.max_unconfirmed,
            in_flight: 0,
            producer: Some(Arc::new(producer)),
        };
        self.budget_used += open.max_unconfirmed;
        io.frame(Frame::OpenProducer(open));
        Ok(())
    }

    fn close_producer(&mut self, io: &mut Io, close: CloseProducer) {
        let wire = close.producer.0;
        let Some(slot) = self
            .producer_slot(wire)
            .filter(|&i| self.producers[i].state == Use::Open)
        else {
            let _ = self.unknown_producer(io, FrameKind::CloseProducer, wire);
            return;
        };
        self.close_producer_slot(slot, true);
    }

    /// Closes the producer's session on a blocking thread; the echo (if `echo`) is written
    /// once the session is gone.
    fn close_producer_slot(&mut self, slot: usize, echo: bool) {
        let p = &mut self.producers[slot];
        p.state = Use::Closing { echo };
        if let Some(producer) = p.producer.take() {
            tokio::task::spawn_blocking(move || {
                producer.close(PRODUCER_CLOSE_WAIT);
            });
        }
    }

    async fn publish(&mut self, io: &mut Io, batch: PublishFrame<'_>) -> Result<(), Ending> {
        let (kind, wire) = (FrameKind::Publish, batch.producer().0);
        let Some(slot) = self
            .producer_slot(wire)
            .filter(|&i| self.producers[i].state == Use::Open)
        else {
            return self.unknown_producer(io, kind, wire);
        };
        let store = self.shared.store.clone();
        if batch
            .messages()
            .any(|(_, payload)| payload.len() > store.slot_size())
        {
            io.error(
                ErrorCode::LIMIT_OUT_OF_RANGE,
                Some(kind),
                wire,
                "a payload is larger than the server's largest; none of the frame's messages was stored",
            );
            return Ok(());
        }
        let p = &self.producers[slot];
        let (producer, queue, refs, generation) = (
            p.producer
                .clone()
                .expect("an open producer has its session"),
            p.queue,
            p.refs,
            p.generation,
        );
        let mut local = false;
        for (id, payload) in batch.messages() {
            let p = &mut self.producers[slot];
            let refused = if p.in_flight >= p.max_unconfirmed {
                Some(ConfirmStatus::RejectedProducerFull)
            } else {
                let handle = loop {
                    // Checked above: no payload is too large.
                    if let Ok(Some(handle)) = store.try_store(payload, id.0, refs) {
                        break handle;
                    }
                    tokio::select! {
                        () = store.slot_freed() => {}
                        _ = self.shutdown.changed() => {
                            return fatal(ErrorCode::SHUTTING_DOWN, "the server is shutting down");
                        }
                    }
                };
                let message = Payload {
                    handle,
                    len: payload.len() as u32,
                };
                match producer.publish_async(queue, message).await {
                    Ok(_) => None,
                    Err(error) => {
                        store.release_all(handle);
                        Some(match error {
                            SendError::Closed(_) => ConfirmStatus::Closed,
                            _ => ConfirmStatus::NotSent,
                        })
                    }
                }
            };
            // Counted until its confirm is written, as the broker's outcomes are.
            self.producers[slot].in_flight += 1;
            if let Some(status) = refused {
                local = true;
                let confirm = OutItem::Confirm {
                    slot: slot as u16,
                    generation,
                    publish_id: id.0,
                    status,
                };
                if self.outbound.push(confirm).is_err() {
                    return fatal(
                        ErrorCode::INTERNAL,
                        "the connection's outbound queue overflowed",
                    );
                }
            }
        }
        if local {
            self.drain(io).await?;
        }
        Ok(())
    }

    async fn open_consumer(&mut self, io: &mut Io, open: OpenConsumer) -> Result<(), Ending> {
        let (kind, wire) = (FrameKind::OpenConsumer, open.consumer.0);
        let refuse = |io: &mut Io, code, message: &str| {
            io.error(code, Some(kind), wire, message);
            Ok(())
        };
        if self.consumer_slot(wire).is_some() {
            return refuse(
                io,
                ErrorCode::ID_IN_USE,
                "the consumer id is open on this connection",
            );
        }
        let Some(&mode) = self.shared.queues.get(open.queue.0 as usize) else {
            return refuse(io, ErrorCode::UNKNOWN_QUEUE, "no such queue");
        };
        let (apps, fanout) = match mode {
            QueueMode::Priority => (1, false),
            QueueMode::Fanout { apps } => (apps, true),
        };
        if open.app.0 >= apps {
            return refuse(io, ErrorCode::UNKNOWN_APP, "the queue has no such app");
        }
        let Some(slot) = self.consumers.iter().position(|c| c.state == Use::Free) else {
            return refuse(
                io,
                ErrorCode::LIMIT_OUT_OF_RANGE,
                "the connection has as many consumers open as the server allows",
            );
        };
        let generation = self.generation();
        let link = SessionLink {
            outbound: self.outbound.clone(),
            store: self.shared.store.clone(),
            slot: slot as u16,
            generation,
            producer: false,
            fanout,
        };
        let window = self.shared.limits.consumer_window;
        let first = open.credit.min(window);
        let options = ConsumerOptions {
            confirms: Confirms::Explicit,
            credit: Some(first),
            ..ConsumerOptions::default()
        };
        let broker = self.shared.broker.clone();
        let (queue, app) = (QueueId(open.queue.0), AppId(open.app.0));
        let opened = tokio::task::spawn_blocking(move || {
            broker.open_consumer(queue, app, options, move |batch: &[Delivery]| {
                link.on_delivery(batch);
            })
        })
        .await;
        let consumer = match opened {
            Ok(Ok(consumer)) => consumer,
            Ok(Err(BrokerError::UnknownQueue(_))) => {
                return refuse(io, ErrorCode::UNKNOWN_QUEUE, "no such queue");
            }
            Ok(Err(BrokerError::UnknownApp(..))) => {
                return refuse(io, ErrorCode::UNKNOWN_APP, "the queue has no such app");
            }
            Ok(Err(BrokerError::ShutDown)) => {
                return fatal(ErrorCode::SHUTTING_DOWN, "the broker is shutting down");
            }
            Ok(Err(error)) => return refuse(io, ErrorCode::LIMIT_OUT_OF_RANGE, &error.to_string()),
            Err(_) => return fatal(ErrorCode::INTERNAL, "opening the consumer failed"),
        };
        let c = &mut self.consumers[slot];
        if c.unconfirmed.capacity() == 0 {
            // Twice the window: the table never grows, nor rehashes out of place.
            c.unconfirmed.reserve(2 * window as usize);
        }
        c.state = Use::Open;
        c.wire = wire;
        c.generation = generation;
        c.consumer = Some(consumer);
        c.fanout = fanout;
        c.granted = first;
        c.wanted = open.credit - first;
        io.frame(Frame::OpenConsumer(open));
        Ok(())
    }

    fn close_consumer(&mut self, io: &mut Io, close: CloseConsumer) {
        let wire = close.consumer.0;
        let Some(slot) = self.open_consumer_slot(wire) else {
            let _ = self.unknown_consumer(io, FrameKind::CloseConsumer, wire);
            return;
        };
        self.close_consumer_slot(slot, true);
    }

    /// Closes the consumer's session on a blocking thread; the echo (if `echo`) is written
    /// once the session is gone.
    ///
    /// The session is first given all the credit it can take, and the session processors
    /// a turn to flush, so that it hands on what the queue pushed to it and it held back
    /// for want of credit: those come through `on_delivery` like every delivery, and a
    /// fanout consumer's drop their payload references as the broker drops their shares.
    /// (A push that reaches the session after that is dropped there unseen; see the
    /// crate's documentation.)
    fn close_consumer_slot(&mut self, slot: usize, echo: bool) {
        let c = &mut self.consumers[slot];
        c.state = Use::Closing { echo };
        if let Some(consumer) = c.consumer.take() {
            let broker = self.shared.broker.clone();
            tokio::task::spawn_blocking(move || {
                // Both refused only when the broker is shutting down, which drops the
                // session.
                let _ = broker.add_credit(&consumer, u32::MAX);
                flushed(&broker);
                let _ = broker.close_consumer(&consumer);
            });
        }
    }

    async fn consumer_confirm(
        &mut self,
        io: &mut Io,
        batch: ConsumerConfirmFrame<'_>,
    ) -> Result<(), Ending> {
        let (kind, wire) = (FrameKind::ConsumerConfirm, batch.consumer().0);
        let Some(slot) = self.open_consumer_slot(wire) else {
            return self.unknown_consumer(io, kind, wire);
        };
        let c = &mut self.consumers[slot];
        self.guids.clear();
        let mut unknown = 0_u32;
        for guid in batch.guids() {
            let guid = Guid(guid.0);
            match c.unconfirmed.remove(&guid) {
                Some(handle) => {
                    self.shared.store.release(handle, 1);
                    self.guids.push(guid);
                }
                None => unknown += 1,
            }
        }
        if !self.guids.is_empty() {
            let consumer = c.consumer.expect("an open consumer has its session");
            let confirmed = self
                .shared
                .broker
                .confirm_batch_async(&consumer, self.guids.iter().copied())
                .await;
            if let Err(BrokerError::ShutDown) = confirmed {
                return fatal(ErrorCode::SHUTTING_DOWN, "the broker is shutting down");
            }
        }
        if unknown != 0 {
            io.error(
                ErrorCode::UNKNOWN_CONSUMER,
                Some(kind),
                wire,
                "the frame confirms a GUID the consumer does not hold; the others are confirmed",
            );
        }
        self.grant(slot).await
    }

    /// Hands the broker as much of the consumer's credit as its window has room for.
    async fn grant(&mut self, slot: usize) -> Result<(), Ending> {
        let window = self.shared.limits.consumer_window as usize;
        let c = &mut self.consumers[slot];
        let held = c.granted as usize + c.unconfirmed.len();
        let room = window.saturating_sub(held).min(u32::MAX as usize) as u32;
        let more = room.min(c.wanted);
        let Some(consumer) = c.consumer.filter(|_| more != 0) else {
            return Ok(());
        };
        match self.shared.broker.add_credit_async(&consumer, more).await {
            Ok(()) => {
                c.granted += more;
                c.wanted -= more;
                Ok(())
            }
            Err(BrokerError::ShutDown) => {
                fatal(ErrorCode::SHUTTING_DOWN, "the broker is shutting down")
            }
            // The consumer is closing: its credit no longer matters.
            Err(_) => Ok(()),
        }
    }

    /// Writes everything in the outbound queue.
    async fn drain(&mut self, io: &mut Io) -> Result<(), Ending> {
        loop {
            while self.staged.len() < self.staged.capacity() {
                match self.outbound.pop() {
                    Some(item) => self.staged.push(Some(item)),
                    None => break,
                }
            }
            if self.staged.is_empty() {
                break;
            }
            self.write_staged(io).await;
        }
        if self.outbound.overflows() != 0 {
            return fatal(
                ErrorCode::INTERNAL,
                "the connection's outbound queue overflowed",
            );
        }
        Ok(())
    }

    /// Writes the staged items, grouped: one producer's confirms in as few
    /// `PublishConfirm` frames as fit, one consumer's deliveries in as few `Deliver`
    /// frames, each group where its first item was and in its items' order.
    async fn write_staged(&mut self, io: &mut Io) {
        for at in 0..self.staged.len() {
            let Some(first) = self.staged[at] else {
                continue;
            };
            match first {
                OutItem::Confirm {
                    slot, generation, ..
                } => {
                    let p = &mut self.producers[usize::from(slot)];
                    let live = p.state != Use::Free && p.generation == generation;
                    let owner = wire::ProducerId(p.wire);
                    let items = &mut self.staged[at..];
                    while confirm_frame(&mut io.out, owner, items, slot, generation, p, live) {
                        io.flush_if_full().await;
                    }
                }
                OutItem::Deliver {
                    slot, generation, ..
                } => {
                    let c = &mut self.consumers[usize::from(slot)];
                    let owner = wire::ConsumerId(c.wire);
                    let store = &self.shared.store;
                    let items = &mut self.staged[at..];
                    if c.state == Use::Open && c.generation == generation {
                        while deliver_frame(
                            &mut io.out,
                            owner,
                            items,
                            (slot, generation),
                            store,
                            &mut self.scratch,
                            c,
                        ) {
                            io.flush_if_full().await;
                        }
                    } else {
                        // Closing: the broker redelivers these (priority) or drops their
                        // shares (fanout).
                        let fanout = c.fanout && c.generation == generation;
                        for entry in items.iter_mut() {
                            if let Some(OutItem::Deliver {
                                slot: s,
                                generation: g,
                                handle,
                                ..
                            }) = *entry
                            {
                                if (s, g) == (slot, generation) {
                                    *entry = None;
                                    if fanout {
                                        store.release(handle, 1);
                                    }
                                }
                            }
                        }
                    }
                }
                OutItem::ProducerGone { slot, generation } => {
                    self.staged[at] = None;
                    let p = &mut self.producers[usize::from(slot)];
                    if p.state != Use::Free && p.generation == generation {
                        if p.state == (Use::Closing { echo: true }) {
                            io.frame(Frame::CloseProducer(CloseProducer {
                                producer: wire::ProducerId(p.wire),
                            }));
                        }
                        self.budget_used -= p.max_unconfirmed;
                        p.state = Use::Free;
                        p.producer = None;
                    }
                }
                OutItem::ConsumerGone { slot, generation } => {
                    self.staged[at] = None;
                    let c = &mut self.consumers[usize::from(slot)];
                    if c.state != Use::Free && c.generation == generation {
                        if c.state == (Use::Closing { echo: true }) {
                            io.frame(Frame::CloseConsumer(CloseConsumer {
                                consumer: wire::ConsumerId(c.wire),
                            }));
                        }
                        // Fanout: the broker dropped the shares it had delivered and saw
                        // no confirm for. Priority: it delivers them again, elsewhere.
                        for (_, handle) in c.unconfirmed.drain() {
                            if c.fanout {
                                self.shared.store.release(handle, 1);
                            }
                        }
                        c.state = Use::Free;
                        c.consumer = None;
                        c.granted = 0;
                        c.wanted = 0;
                    }
                }
            }
            io.flush_if_full().await;
        }
        self.staged.clear();
    }

    /// Closes every session of the connection and waits until each is gone, dropping the
    /// payload references of what they still hand over. Nothing more is written.
    async fn teardown(&mut self, io: &mut Io) {
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

/// Waits until every session processor has handled what was dispatched to it before, and
/// flushed its sessions: a callback on each runs after both. On a blocking thread.
fn flushed(broker: &Broker) {
    let (done, turns) = std::sync::mpsc::channel();
    let processors = broker.processors(ClientType::Session);
    let asked = processors
        .iter()
        .filter(|&&p| {
            let done = done.clone();
            broker
                .execute(
                    p,
                    Callback::new(move || {
                        let _ = done.send(());
                    }),
                )
                .is_ok()
        })
        .count();
    drop(done);
    for _ in 0..asked {
        if turns.recv().is_err() {
            return;
        }
    }
}

impl Io {
    /// Writes the write buffer to the socket once it holds [`WRITE_HIGH_WATER`] bytes.
    async fn flush_if_full(&mut self) {
        if self.out.len() >= WRITE_HIGH_WATER {
            self.flush().await;
        }
    }
}

/// Appends one `PublishConfirm` frame of the staged confirms of `(slot, generation)` (or
/// drops them, if that producer is gone: `live` false), and takes them off `items`.
/// Returns whether some are left (the frame is full).
fn confirm_frame(
    out: &mut Vec<u8>,
    owner: wire::ProducerId,
    items: &mut [Option<OutItem>],
    slot: u16,
    generation: u32,
    producer: &mut ProducerSlot,
    live: bool,
) -> bool {
    let mut frame = PublishConfirmBuilder::begin(out, owner);
    for entry in items.iter_mut() {
        let Some(OutItem::Confirm {
            slot: s,
            generation: g,
            publish_id,
            status,
        }) = *entry
        else {
            continue;
        };
        if (s, g) != (slot, generation) {
            continue;
        }
        if live {
            if frame.push(wire::PublishId(publish_id), status).is_err() {
                let _ = frame.finish();
                return true;
            }
            producer.in_flight = producer.in_flight.saturating_sub(1);
        }
        *entry = None;
    }
    // Nothing is left in the buffer if the frame is empty.
    let _ = frame.finish();
    false
}

/// Appends one `Deliver` frame of the staged deliveries of `owner` (whose index and
/// generation are `key`), reading each payload from the store, and takes them off `items`
/// into the consumer's unconfirmed table. Returns whether some are left (the frame is
/// full).
fn deliver_frame(
    out: &mut Vec<u8>,
    owner: wire::ConsumerId,
    items: &mut [Option<OutItem>],
    key: (u16, u32),
    store: &PayloadStore,
    scratch: &mut Vec<u8>,
    consumer: &mut ConsumerSlot,
) -> bool {
    let mut frame = DeliverBuilder::begin(out, owner);
    for entry in items.iter_mut() {
        let Some(OutItem::Deliver {
            slot,
            generation,
            guid,
            handle,
        }) = *entry
        else {
            continue;
        };
        if (slot, generation) != key {
            continue;
        }
        if store.read(handle, scratch).is_some() {
            if frame.push(wire::Guid(guid.0), scratch).is_err() {
                let _ = frame.finish();
                return true;
            }
            consumer.unconfirmed.insert(guid, handle);
            consumer.granted = consumer.granted.saturating_sub(1);
        } else {
            debug_assert!(false, "a delivery of a payload no longer held");
        }
        *entry = None;
    }
    let _ = frame.finish();
    false
}
