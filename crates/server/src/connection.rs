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

mod consumers;
mod producers;
mod writer;

use self::consumers::{ConsumerSlot, Unconfirmed};
use self::producers::ProducerSlot;
use self::writer::{Io, WRITE_HIGH_WATER};

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
    Ack, AppId, Broker, BrokerError, Confirms, Consumer, ConsumerOptions, Delivery, Guid,
    MAX_UNCONFIRMED, Payload, Producer, ProducerConfig, QueueId, QueueMode, SendError,
};
use zerodispatch_wire::{
    self as wire, CloseConsumer, CloseProducer, ConfirmStatus, ConsumerConfirmFrame,
    DeliverBuilder, ErrorCode, ErrorFrame, Frame, FrameKind, HEADER_LEN, Header, Hello,
    MAX_FRAME_LEN, MAX_MESSAGES_PER_FRAME, OpenConsumer, OpenProducer, ProducerOpened,
    PublishConfirmBuilder, PublishFrame, VERSION, Welcome,
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
/// A client that has not said `Hello` this long after connecting is closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
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
    let outbound = Arc::new(Outbound::new(limits.outbound_capacity()));
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
                named: false,
                producer: None,
            })
            .collect(),
        consumers: (0..limits.max_consumers)
            .map(|_| ConsumerSlot {
                state: Use::Free,
                wire: 0,
                generation: 0,
                consumer: None,
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
            Frame::Welcome(_)
            | Frame::PublishConfirm(_)
            | Frame::ProducerOpened(_)
            | Frame::Deliver(_) => fatal(
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
