//! A connection to a broker: the handshake, then producers and consumers opened on it.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::oneshot;
use zerodispatch_wire::{
    AppId, ErrorCode, ErrorFrame, Frame, Hello, QueueId, ServerLimits, VERSION, Welcome, decode,
};

use crate::command::Command;
use crate::connection::Connection;
use crate::consumer::{Consumer, ConsumerShared, Deliveries};
use crate::error::ClientError;
use crate::io::{Io, is_error_frame, receive_buffer};
use crate::options::{ClientOptions, ConsumerOptions, ProducerOptions};
use crate::producer::{Outcome, Producer, ProducerShared};

/// A connection to a broker, with its I/O task (one tokio task that reads and writes the
/// socket, sends heartbeats and watches the broker's). Through the facade it is
/// `zerodispatch::client::Client`; the root's `zerodispatch::Client` is the dispatcher's
/// client trait, another thing.
///
/// Dropping the client closes the connection (as [`close`](Self::close) does, without
/// waiting): what was taken and has no outcome is reported `Closed` (or `NotSent`), and the
/// producers and consumers left open fail with [`ClientError::Closed`].
#[derive(Debug)]
pub struct Client {
    conn: Arc<Connection>,
    broker_heartbeat: Duration,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("ended", &self.ended())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the broker at `addr`, says `Hello` and waits for its `Welcome`, then
    /// starts the connection's I/O task on the current tokio runtime (which needs its I/O
    /// and time drivers).
    ///
    /// `addr` is a [`tokio::net::ToSocketAddrs`], a third-party trait in this signature on
    /// purpose: it is what `tokio::net::TcpStream::connect` takes, so that a name is
    /// resolved on the runtime without blocking a runtime thread (std's `ToSocketAddrs`
    /// resolves synchronously); `"host:port"`, a `SocketAddr` and `(ip, port)` all qualify.
    ///
    /// # Errors
    ///
    /// Connecting failed ([`ClientError::Io`]), the broker refused the handshake
    /// ([`ClientError::Broker`]), answered something else than `Welcome`
    /// ([`ClientError::Protocol`]), or did not answer within
    /// [`ClientOptions::handshake_timeout`].
    pub async fn connect(
        addr: impl ToSocketAddrs,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let heartbeat_ms = options.heartbeat_ms()?;
        let (stream, rbuf, filled, welcome) =
            tokio::time::timeout(options.handshake_timeout, handshake(addr, heartbeat_ms))
                .await
                .map_err(|_| ClientError::HandshakeTimeout)??;
        let conn = Arc::new(Connection::new(welcome.limits));
        let broker_heartbeat = Duration::from_millis(u64::from(welcome.heartbeat_ms));
        // What the client must send at least that often: the broker's asked interval, and
        // a third of its idle limit (a broker asking for no heartbeat still closes a
        // connection silent for its idle limit).
        let idle_third = Duration::from_millis(u64::from(welcome.limits.idle_timeout_ms) / 3);
        let send_every = [broker_heartbeat, idle_third]
            .into_iter()
            .filter(|d| !d.is_zero())
            .min()
            .unwrap_or(Duration::ZERO);
        let io = Io::new(
            Arc::clone(&conn),
            stream,
            rbuf,
            filled,
            options.heartbeat,
            send_every,
        );
        tokio::spawn(io.run());
        Ok(Self {
            conn,
            broker_heartbeat,
        })
    }

    /// The broker's heartbeat interval, from its `Welcome` (zero for none).
    pub fn broker_heartbeat(&self) -> Duration {
        self.broker_heartbeat
    }

    /// The broker's limits, from its `Welcome`: what it allows this connection. The client
    /// keeps to them where it can tell before sending: a payload longer than
    /// `max_payload` is refused by `send` with [`ClientError::PayloadTooLarge`], never
    /// sent.
    pub fn limits(&self) -> ServerLimits {
        self.conn.limits
    }

    /// Opens an anonymous producer on `queue`, and returns it once the broker has opened
    /// it (`ProducerOpened`). Its messages are not deduplicated.
    ///
    /// `on_confirm` is called with each batch of [`Outcome`]s, exactly one per message
    /// taken, on the connection's I/O task. It must not block, since it holds up the
    /// connection: it may call [`Producer::try_send`] (the batch's messages have left the
    /// cap before it is called), never `send_blocking`. A panic in it is caught and
    /// counted ([`Producer::handler_panics`]); the batch is not reported again.
    ///
    /// # Errors
    ///
    /// An option out of range, the producer's tables too large to allocate, the broker's
    /// refusal ([`ClientError::Refused`]), or why the connection ended.
    pub async fn open_producer(
        &self,
        queue: QueueId,
        options: ProducerOptions,
        on_confirm: impl FnMut(&[Outcome]) + Send + 'static,
    ) -> Result<Producer, ClientError> {
        self.open(queue, String::new(), options, Box::new(on_confirm))
            .await
    }

    /// Opens a producer named `name` on `queue`, as [`open_producer`](Self::open_producer)
    /// does. The broker deduplicates a named producer's messages by publish id: one
    /// published again with its id (after a lost connection) is confirmed `Stored` again,
    /// never stored twice. A name is open on one connection at a time. The producer's
    /// publish ids go on after the highest the broker had stored for the name
    /// ([`Producer::last_stored`]).
    ///
    /// # Errors
    ///
    /// As `open_producer`; a name empty or over 255 bytes is
    /// [`ClientError::InvalidOption`]; a name open already is refused `NAME_IN_USE` (the
    /// broker may still be closing a lost connection's producer: try again).
    pub async fn open_named_producer(
        &self,
        queue: QueueId,
        name: &str,
        options: ProducerOptions,
        on_confirm: impl FnMut(&[Outcome]) + Send + 'static,
    ) -> Result<Producer, ClientError> {
        if name.is_empty() || name.len() > zerodispatch_wire::MAX_PRODUCER_NAME_LEN {
            return Err(ClientError::InvalidOption {
                option: "name",
                expected: "1 to 255 bytes of UTF-8",
            });
        }
        self.open(queue, name.to_owned(), options, Box::new(on_confirm))
            .await
    }

    async fn open(
        &self,
        queue: QueueId,
        name: String,
        options: ProducerOptions,
        on_confirm: crate::producer::ConfirmHandler,
    ) -> Result<Producer, ClientError> {
        options.check()?;
        // The broker told its limits at the handshake: a cap it would refuse is refused
        // here, with the limit's name, before anything is sent.
        let limits = self.conn.limits;
        let (max, limit) = if name.is_empty() {
            (
                limits.max_unconfirmed_per_connection,
                "the broker's max_unconfirmed_per_connection",
            )
        } else {
            (
                limits
                    .max_unconfirmed_named
                    .min(limits.max_unconfirmed_per_connection),
                "the broker's max_unconfirmed_named (its deduplication window)",
            )
        };
        if options.max_unconfirmed > max {
            return Err(ClientError::OverLimit {
                option: "max_unconfirmed",
                value: u64::from(options.max_unconfirmed),
                limit,
                max: u64::from(max),
            });
        }
        let id = self.conn.producer_id();
        let too_large = |_| ClientError::InvalidOption {
            option: "max_unconfirmed",
            expected: "a cap whose tables fit in memory",
        };
        let shared =
            ProducerShared::new(id, options, Arc::clone(&self.conn.wake)).map_err(too_large)?;
        let buffers = shared.io_buffers().map_err(too_large)?;
        let shared = Arc::new(shared);
        let (reply, answer) = oneshot::channel();
        self.conn.command(Command::OpenProducer {
            shared: Arc::clone(&shared),
            queue,
            name,
            on_confirm,
            buffers,
            reply,
        })?;
        let producer = Producer::new(Arc::clone(&shared), Arc::clone(&self.conn));
        self.opened(answer, producer, |error| shared.close_with(error))
            .await
    }

    /// Opens a consumer of `app` on `queue`, and returns it once the broker has echoed the
    /// open.
    ///
    /// `on_deliver` is called with each `Deliver` frame's messages, on the connection's I/O
    /// task, as [`Deliveries`] that borrow the receive buffer. It must not block. It
    /// confirms messages there ([`Deliveries::confirm_all`]) or later
    /// ([`Consumer::confirm`]); a message never confirmed keeps its credit. A panic in it is
    /// caught and counted ([`Consumer::handler_panics`]).
    ///
    /// # Errors
    ///
    /// The broker's refusal ([`ClientError::Refused`]), or why the connection ended.
    pub async fn open_consumer(
        &self,
        queue: QueueId,
        app: AppId,
        options: ConsumerOptions,
        on_deliver: impl FnMut(&Deliveries<'_>) + Send + 'static,
    ) -> Result<Consumer, ClientError> {
        let id = self.conn.consumer_id();
        let shared = Arc::new(ConsumerShared::new(
            id,
            options,
            Arc::clone(&self.conn.wake),
        ));
        let (reply, answer) = oneshot::channel();
        self.conn.command(Command::OpenConsumer {
            shared: Arc::clone(&shared),
            queue,
            app,
            on_deliver: Box::new(on_deliver),
            reply,
        })?;
        let consumer = Consumer::new(Arc::clone(&shared), Arc::clone(&self.conn));
        self.opened(answer, consumer, |error| shared.close_with(error))
            .await
    }

    /// Waits for the broker's answer to an open, and returns `session` once it is open;
    /// refused, or with the connection gone, the session is closed with the reason
    /// (`close_with`), which is returned.
    async fn opened<T>(
        &self,
        answer: oneshot::Receiver<Result<(), ClientError>>,
        session: T,
        close_with: impl Fn(ClientError),
    ) -> Result<T, ClientError> {
        match answer.await {
            Ok(Ok(())) => Ok(session),
            Ok(Err(error)) => {
                close_with(error.clone());
                Err(error)
            }
            Err(_) => {
                close_with(ClientError::Closed);
                Err(self.conn.ended().unwrap_or(ClientError::Closed))
            }
        }
    }

    /// Why the connection ended, or `None` while it is open.
    pub fn error(&self) -> Option<ClientError> {
        self.conn.ended()
    }

    /// Waits until the connection ends, and says why.
    pub async fn closed(&self) -> ClientError {
        self.conn.wait_ended().await
    }

    /// Sends what is pending and closes the connection; returns when its I/O task has
    /// reported every outcome.
    pub async fn close(self) {
        let _ = self.conn.command(Command::Shutdown);
        self.conn.wait_ended().await;
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.conn.command(Command::Shutdown);
    }
}

/// Connects and says `Hello`; returns the stream, the receive buffer and the bytes in it
/// after `Welcome`, and the `Welcome` (the broker's heartbeat interval and limits).
async fn handshake(
    addr: impl ToSocketAddrs,
    heartbeat_ms: u32,
) -> Result<(TcpStream, Vec<u8>, usize, Welcome), ClientError> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| ClientError::io(&e))?;
    stream.set_nodelay(true).map_err(|e| ClientError::io(&e))?;
    let mut out = Vec::with_capacity(64);
    let hello = Frame::Hello(Hello {
        min_version: VERSION,
        max_version: VERSION,
        heartbeat_ms,
    });
    hello.encode(&mut out).map_err(|e| ClientError::Protocol {
        code: ErrorCode::INTERNAL,
        message: e.to_string(),
    })?;
    stream
        .write_all(&out)
        .await
        .map_err(|e| ClientError::io(&e))?;
    let mut rbuf = receive_buffer();
    let mut filled = 0;
    loop {
        let failure = match decode(&rbuf[..filled]) {
            Ok(None) => {
                let n = stream
                    .read(&mut rbuf[filled..])
                    .await
                    .map_err(|e| ClientError::io(&e))?;
                if n == 0 {
                    return Err(ClientError::ConnectionClosed);
                }
                filled += n;
                continue;
            }
            Ok(Some((Frame::Welcome(welcome), consumed))) if welcome.version == VERSION => {
                rbuf.copy_within(consumed..filled, 0);
                return Ok((stream, rbuf, filled - consumed, welcome));
            }
            Ok(Some((Frame::Welcome(welcome), _))) => ClientError::Protocol {
                code: ErrorCode::UNSUPPORTED_VERSION,
                message: format!("Welcome chose version {}, not offered", welcome.version),
            },
            Ok(Some((Frame::Error(error), _))) => {
                return Err(ClientError::Broker {
                    code: error.code,
                    message: error.message.to_owned(),
                });
            }
            Ok(Some((frame, _))) => ClientError::Protocol {
                code: ErrorCode::HANDSHAKE_REQUIRED,
                message: format!("{:?} before Welcome", frame.kind()),
            },
            Err(error) if is_error_frame(&rbuf[..filled]) => {
                // A bad error frame is not answered.
                return Err(ClientError::protocol(error));
            }
            Err(error) => ClientError::protocol(error),
        };
        if let ClientError::Protocol { code, message } = &failure {
            out.clear();
            let frame = Frame::Error(ErrorFrame {
                code: *code,
                refused: None,
                subject: 0,
                message,
            });
            if frame.encode(&mut out).is_ok() {
                let _ = stream.write_all(&out).await;
            }
        }
        return Err(failure);
    }
}
