//! One connection: a task that reads frames, binds the client's producers and consumers to
//! broker sessions, and writes what the sessions hand back.
//!
//! # The task's loop
//!
//! One `tokio::select!` over the socket's reads, the connection's [`Outbound`] queue (the
//! processors' outcomes and deliveries), the timer and the server's shutdown. Frames are
//! decoded in place from a reused read buffer; answers are built with the wire crate's
//! batch builders into a reused write buffer and written when the loop comes round:
//! natural batching, as many confirms or deliveries to a frame as arrived meanwhile.
//!
//! # The timer
//!
//! One deadline, the earliest of:
//!
//! - the handshake's: a connection that has not said `Hello` within
//!   [`Limits::handshake_timeout`] (10 s), or within the idle limit if shorter, is closed
//!   (`HANDSHAKE_REQUIRED`), however its bytes are paced;
//! - the frame's: a frame whose first byte has arrived must be whole within
//!   [`Limits::frame_timeout`], however its bytes are paced (`FRAME_TIMEOUT`), so that a
//!   client trickling a byte now and then, within the idle limit, cannot hold its place;
//! - the idle limit ([`Limits::idle_timeout`]): a connection from which nothing (not a
//!   byte) was received for that long is closed (`HEARTBEAT_TIMEOUT`), whatever it
//!   announced. It is at least three of the intervals the server announces in `Welcome`,
//!   so a client that follows the heartbeat rule is never closed;
//! - the heartbeat the server owes: the interval a side announces is how long its peer
//!   may stay silent, so the server sends a heartbeat whenever it has sent nothing for the
//!   interval the client announced in `Hello`, and never to a client that announced zero;
//! - the trim: a connection quiet (nothing read, nothing written) for [`TRIM_AFTER`]
//!   gives back the buffers it grew.
//!
//! # Memory
//!
//! A connection takes memory as its traffic needs it: a silent one holds small buffers
//! and an outbound queue of [`FIRST_SEGMENT`] places (a few KiB in all). The read buffer
//! grows while reads fill it (to [`READ_BUFFER_GROWN`]) and to the size of the largest
//! frame the client sends (at most `HEADER_LEN + MAX_FRAME_LEN`); the write buffer and the
//! staging tables grow with what is written in one round; the outbound queue grows at
//! each open for what the connection's sessions can have in flight, and at each publish
//! frame for its outcomes. All of it is kept while traffic lasts (a warm connection
//! allocates nothing per message) and given back at the trim, apart from the outbound
//! queue, which is freed with the connection.
//!
//! # Shutdown
//!
//! When the server shuts down, a connection stops reading, closes its consumers (their
//! deliveries in flight go back to their queues), and writes the outcomes of the messages
//! it had already handed the broker for up to [`SHUTDOWN_DRAIN`]; then it sends
//! `SHUTTING_DOWN` and closes. Every write, from the moment the connection sees the
//! shutdown (one waiting for the client then included), ends within [`SHUTDOWN_DRAIN`] and
//! [`LINGER`], or the connection is abandoned: a client that does not read holds the
//! shutdown 2.5 s at most.
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

// The task's parts, each an `impl Connection` of its own: frames read (`reader`), the
// producers and consumers they open, what comes back written (`writer`), the timer, the end.
mod producers;
mod reader;
use self::producers::ProducerSlot;
mod consumers;
use self::consumers::ConsumerSlot;
mod unconfirmed;
use self::unconfirmed::Unconfirmed;
mod writer;
use self::writer::Io;
mod shutdown;
mod timer;
use self::shutdown::linger;

use std::borrow::Cow;
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
    DeliverBuilder, ErrorCode, ErrorFrame, Frame, FrameKind, Header, Hello, OpenConsumer,
    OpenProducer, ProducerOpened, PublishConfirmBuilder, PublishFrame, VERSION, Welcome,
};

use crate::config::Limits;
use crate::link::SessionLink;
use crate::outbound::{FIRST_SEGMENT, OutItem, Outbound};
use crate::payloads::PayloadStore;

/// What every connection shares: the broker, its queues' modes, the payload store, the
/// limits and the server's counters.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) broker: Arc<Broker>,
    pub(crate) queues: Arc<[QueueMode]>,
    pub(crate) store: Arc<PayloadStore>,
    pub(crate) limits: Limits,
    /// What `Welcome` tells every client of the limits (`advertised.rs`).
    pub(crate) told: zerodispatch_wire::ServerLimits,
    pub(crate) connections: AtomicUsize,
    /// Connections closed with `INTERNAL`, whatever the cause.
    pub(crate) internal_closes: AtomicU64,
    /// Connections closed because their outbound queue overflowed.
    pub(crate) outbound_overflows: AtomicU64,
    /// Connections refused because `max_connections` were open.
    pub(crate) refused_connections: AtomicU64,
}

/// A connection's place among the server's [`Limits::max_connections`]: given back when
/// dropped, which the connection does as soon as its socket is closed (before it lingers
/// or closes its sessions), so that the next client is served at once.
pub(crate) struct Place(Arc<Shared>);

impl Place {
    /// Takes a place (the caller checked that one is free).
    pub(crate) fn take(shared: &Arc<Shared>) -> Self {
        shared.connections.fetch_add(1, Ordering::Relaxed);
        Self(shared.clone())
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The read buffer's size at first and after a trim: 2 KiB, a `Hello` and the frames of a
/// light client. Raising it costs every silent connection.
const READ_BUFFER_FIRST: usize = 2 << 10;
/// The read buffer doubles while reads fill it, up to 64 KiB: past that, larger reads save
/// little. It also grows to the size of a frame the client sends, at most `HEADER_LEN +
/// MAX_FRAME_LEN`, whatever this says.
pub(crate) const READ_BUFFER_GROWN: usize = 64 << 10;
/// A connection quiet this long gives back the buffers its traffic grew: 1 s, long enough
/// that a steady flow, however slow, keeps them (and allocates nothing), short enough
/// that a burst's memory does not stay with a connection that went quiet.
pub(crate) const TRIM_AFTER: Duration = Duration::from_secs(1);
/// The write buffer's capacity kept at a trim: 4 KiB, a few small frames.
const WRITE_BUFFER_KEPT: usize = 4 << 10;
/// How long a connection, at shutdown, waits for the outcomes of the messages it handed
/// the broker before it says `SHUTTING_DOWN`: 2 s, well within the server's own wait for
/// its connections (5 s), since an outcome means stored, not consumed. A client that does
/// not read is abandoned [`LINGER`] after it: 2.5 s after the connection saw the shutdown.
pub(crate) const SHUTDOWN_DRAIN: Duration = Duration::from_secs(2);
/// The shortest interval at which the server sends heartbeats, whatever shorter one a
/// client announced: 10 ms, so that no client can make the server spend itself on
/// heartbeats (a connection costs at most 100 a second).
pub(crate) const MIN_PEER_HEARTBEAT: Duration = Duration::from_millis(10);
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

/// The connection's end when the broker refuses a call because it is shutting down.
fn broker_shut_down<T>() -> Result<T, Ending> {
    fatal(ErrorCode::SHUTTING_DOWN, "the broker is shutting down")
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

/// The index of the slot of wire id `wire` among `slots`, open or closing; `of` reads a
/// slot's state and wire id.
fn slot_index<S>(slots: &[S], wire: u32, of: impl Fn(&S) -> (Use, u32)) -> Option<usize> {
    slots.iter().position(|slot| {
        let (state, id) = of(slot);
        state != Use::Free && id == wire
    })
}

/// The index of the open slot of wire id `wire` among `slots`, as [`slot_index`] reads them.
fn open_slot_index<S>(slots: &[S], wire: u32, of: impl Fn(&S) -> (Use, u32)) -> Option<usize> {
    slot_index(slots, wire, &of).filter(|&i| of(&slots[i]).0 == Use::Open)
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
    generations: Generations,
    welcomed: bool,
    accepted: Instant,
    /// The interval the client announced in `Hello`: the server sends a heartbeat when it
    /// has sent nothing for this long. `None`: the client asked for none.
    peer_heartbeat: Option<Duration>,
    /// When the last bytes came from the client: the idle limit counts from here.
    last_received: Instant,
    /// When the first byte of the frame the read buffer holds the start of arrived: the
    /// frame timeout counts from here. `None` when the buffer holds no part of a frame.
    frame_began: Option<Instant>,
    /// The sum of the open producers' `max_unconfirmed`.
    budget_used: u32,
    /// Producer names this connection opened that the broker did not know before: at most
    /// [`Limits::max_new_names`].
    new_names: u32,
    shutdown: watch::Receiver<bool>,
}

/// Serves one accepted connection until it ends, then closes its sessions and waits for
/// them to be gone (so that every payload reference they hold is dropped).
pub(crate) async fn serve(stream: TcpStream, place: Place, shutdown: watch::Receiver<bool>) {
    let shared = place.0.clone();
    let _ = stream.set_nodelay(true);
    let limits = shared.limits;
    let outbound = Arc::new(Outbound::new(limits.outbound_capacity()));
    let now = Instant::now();
    let mut io = Io {
        stream,
        // Grows with what one round writes (at most about WRITE_HIGH_WATER and two frames).
        out: Vec::new(),
        stop: shutdown.clone(),
        shutdown_bound: None,
        last_sent: now,
        lost: false,
        write_limit: limits.idle_timeout,
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
                name: None,
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
        // These three grow with the traffic: to a round's items, the largest payload
        // delivered, a frame's confirms.
        staged: Vec::new(),
        scratch: Vec::new(),
        guids: Vec::new(),
        shared,
        outbound,
        generations: Generations::default(),
        welcomed: false,
        accepted: now,
        peer_heartbeat: None,
        last_received: now,
        frame_began: None,
        budget_used: 0,
        new_names: 0,
        shutdown,
    };
    let mut input = vec![0; READ_BUFFER_FIRST];
    let ending = connection.run(&mut io, &mut input).await;
    if let Ending::Fatal(code, message) = ending {
        if code == ErrorCode::INTERNAL {
            let shared = &connection.shared;
            shared.internal_closes.fetch_add(1, Ordering::Relaxed);
            if connection.outbound.overflows() != 0 {
                shared.outbound_overflows.fetch_add(1, Ordering::Relaxed);
            }
        }
        if code == ErrorCode::SHUTTING_DOWN && *connection.shutdown.borrow() {
            connection.drain_for_shutdown(&mut io, &message).await;
        } else {
            io.error(code, None, 0, &message);
            io.flush().await;
        }
        // The client has all it will get: its place is free from here.
        drop(place);
        if !io.lost {
            let _ = io.stream.shutdown().await;
            linger(&mut io.stream, &mut input).await;
        }
    } else {
        drop(place);
    }
    connection.teardown(&mut io).await;
}

impl Connection {
    /// The task's loop: until the connection ends, flushes what was written, then waits for
    /// the shutdown, the outbound queue, the socket or the timer, whichever comes first.
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
        let sleep = tokio::time::sleep_until(self.deadline(io, input).into());
        tokio::pin!(sleep);
        loop {
            io.flush().await;
            if io.lost {
                return Ending::Lost;
            }
            let deadline = self.deadline(io, input).into();
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
                        let full = filled + n == input.len();
                        filled += n;
                        self.last_received = Instant::now();
                        let handled = self.frames(io, input, &mut filled).await;
                        if full && input.len() < READ_BUFFER_GROWN {
                            // The client sends faster than one read takes: read more at once.
                            input.resize(input.len() * 2, 0);
                        }
                        handled
                    }
                },
                () = &mut sleep => self.tick(io, input, filled),
            };
            if let Err(ending) = step {
                return ending;
            }
        }
    }

    /// A new generation for a producer or consumer slot being opened; `None` once the
    /// connection has used them all (the open is refused: a generation never repeats).
    fn generation(&mut self) -> Option<u32> {
        self.generations.next()
    }

    /// Grows the outbound queue, if need be, for everything that can then be in flight to
    /// the connection: the outcomes of producers whose `max_unconfirmed` sum to `budget`,
    /// deliveries to its consumers (a window each) and the word of each session that it is
    /// gone, with `sessions` more of each about to open, and `local` outcomes the
    /// connection gives itself.
    fn reserve_outbound(&self, budget: u32, sessions: usize, local: usize) {
        let window = self.shared.limits.consumer_window as usize;
        let consumers = self
            .consumers
            .iter()
            .filter(|c| c.state != Use::Free)
            .count();
        let producers = self
            .producers
            .iter()
            .filter(|p| p.state != Use::Free)
            .count();
        let places = (budget as usize)
            .saturating_add((consumers + sessions).saturating_mul(window))
            .saturating_add(consumers + producers + sessions)
            .saturating_add(local);
        self.outbound.reserve(places);
    }
}

/// The generations a connection gives its producer and consumer sessions, one per open:
/// each new one higher than any before, so that an item of a session that held a slot
/// before can never be taken for the present one's. A peer drives the count (one per
/// open), so it does not wrap: after `u32::MAX` opens, the connection opens no more.
#[derive(Debug, Default)]
struct Generations {
    /// The last generation given (0: none yet).
    last: u32,
}

impl Generations {
    /// The next generation, or `None` once `u32::MAX` have been given.
    fn next(&mut self) -> Option<u32> {
        self.last = self.last.checked_add(1)?;
        Some(self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::Generations;

    #[test]
    fn generations_rise_and_end_instead_of_wrapping() {
        let mut generations = Generations::default();
        assert_eq!(generations.next(), Some(1));
        assert_eq!(generations.next(), Some(2));
        generations.last = u32::MAX - 1;
        assert_eq!(generations.next(), Some(u32::MAX));
        // Past the last one nothing is given, again and again: never 0 or 1 again.
        assert_eq!(generations.next(), None);
        assert_eq!(generations.next(), None);
    }
}
