//! Servers on loopback and a blocking wire client that allocates nothing once warm.

#![allow(dead_code, unused_imports)]

#[path = "../../../wire/tests/support/mod.rs"]
mod frames;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
pub use std::time::{Duration, Instant};

pub use frames::*;
use zerodispatch_broker::QueueConfig;
pub use zerodispatch_broker::{BrokerConfig, QueueMode};
pub use zerodispatch_server::{Limits, Server};
pub use zerodispatch_testkit::within;

/// How long a client waits for the server's next bytes.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection must stay silent for a test to call it quiet.
pub const QUIET: Duration = Duration::from_millis(200);

/// A server on a free loopback port, serving a broker with these queues.
pub fn server(queues: &[QueueMode], limits: Limits) -> Server {
    server_of(queues, limits, BrokerConfig::default())
}

/// As [`server`], the broker's other settings from `broker`.
pub fn server_of(queues: &[QueueMode], limits: Limits, broker: BrokerConfig) -> Server {
    let window = limits.consumer_window;
    let queue = |&mode| QueueConfig {
        window,
        ..QueueConfig::new(mode)
    };
    let queues = queues.iter().map(queue).collect();
    Server::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .broker_config(BrokerConfig { queues, ..broker })
        .limits(limits)
        .start()
        .expect("the server starts")
}

/// A server of one priority queue, under [`limits`]: what most tests need.
pub fn priority_server() -> Server {
    server(&[QueueMode::Priority], limits())
}

/// A server of one priority queue, under [`limits`] as `tune` changes them.
pub fn priority_server_with(tune: impl FnOnce(&mut Limits)) -> Server {
    let mut limits = limits();
    tune(&mut limits);
    server(&[QueueMode::Priority], limits)
}

/// Waits until every slot of the store (of [`limits`]) is free; no handle was ever stale.
pub fn all_slots_free(server: &Server) {
    free_slots_become(server, limits().store_slots, "every slot free");
    assert_eq!(server.stats().stale_handles, 0);
}

/// Waits until the server counts `n` free slots (`what` names the wait).
pub fn free_slots_become(server: &Server, n: usize, what: &str) {
    eventually(what, || server.stats().free_slots == n);
}

/// `n` milliseconds.
pub const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Waits until the server counts `n` connections.
pub fn connections_become(server: &Server, n: usize) {
    eventually("the connections", || server.stats().connections == n);
}

/// The id a payload of [`payload_of`] carries in its first eight bytes.
pub fn id_in(payload: &[u8]) -> u64 {
    u64::from_le_bytes(payload[..8].try_into().unwrap())
}

/// Asserts that `payload` is the [`payload_of`] message `id`.
pub fn assert_payload_of(id: u64, payload: &[u8]) {
    let mut expected = [0; 256];
    let len = payload_of(id, &mut expected);
    assert_eq!(payload, &expected[..len], "message {id}'s bytes");
}

/// The `Hello` of this version, announcing `heartbeat_ms`.
pub fn hello_frame(heartbeat_ms: u32) -> Frame<'static> {
    Frame::Hello(hello(VERSION, VERSION, heartbeat_ms))
}

/// A raw frame: magic, version, kind, flags, length, then `body` (whatever the length says).
pub fn raw(version: u8, kind: u8, flags: u16, len: u32, body: &[u8]) -> Vec<u8> {
    let mut frame = vec![b'Z', b'D', version, kind];
    frame.extend_from_slice(&flags.to_le_bytes());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(body);
    frame
}

/// A raw frame of this version, no flags, whose length is its body's.
pub fn body(kind: u8, body: &[u8]) -> Vec<u8> {
    raw(VERSION, kind, 0, body.len() as u32, body)
}

/// Producer 1 (`max_unconfirmed`) and consumer 7 (`credit`) of queue 0, each on its own connection.
pub fn open_pair(addr: SocketAddr, max_unconfirmed: u32, credit: u32) -> (Client, Client) {
    let producer = Client::producer(addr, 1, 0, max_unconfirmed);
    (producer, Client::consumer(addr, 7, 0, 0, credit))
}

/// Small limits for tests: few slots, so that leaks show.
pub fn limits() -> Limits {
    Limits {
        store_slots: 256,
        slot_size: 1024,
        consumer_window: 64,
        max_unconfirmed_per_connection: 4096,
        ..Limits::default()
    }
}

/// Runs `f` under a 30 s watchdog: a hang fails the test instead of holding it.
pub fn watched(what: &str, f: impl FnOnce() + Send + 'static) {
    zerodispatch_testkit::within(Duration::from_secs(30), what, f);
}

/// Waits until `ready` holds, up to 10 s.
pub fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + READ_TIMEOUT;
    while !ready() {
        assert!(Instant::now() < until, "{what}: not after 10 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A blocking client of one connection, with buffers it reuses.
pub struct Client {
    stream: TcpStream,
    out: Vec<u8>,
    input: Vec<u8>,
    start: usize,
    end: usize,
}

impl Client {
    /// Connects, without a handshake.
    pub fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).expect("connects");
        stream.set_nodelay(true).unwrap();
        Self::from_stream(stream)
    }

    /// A client of a connected stream (a clone of another client's, say).
    pub fn from_stream(stream: TcpStream) -> Self {
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        Self {
            stream,
            out: Vec::with_capacity(1 << 20),
            input: vec![0; HEADER_LEN + MAX_FRAME_LEN as usize],
            start: 0,
            end: 0,
        }
    }

    /// Connects and shakes hands (no heartbeats from the client).
    pub fn hello(addr: SocketAddr) -> Self {
        let mut client = Self::connect(addr);
        assert_eq!(client.shake_hands(0).version, VERSION);
        client
    }

    /// A connection with producer `producer` of `queue` open.
    pub fn producer(addr: SocketAddr, producer: u32, queue: u32, max_unconfirmed: u32) -> Self {
        let mut client = Self::hello(addr);
        client.open_producer(producer, queue, max_unconfirmed);
        client
    }

    /// A connection with consumer `consumer` of `queue`'s `app` open with `credit`.
    pub fn consumer(addr: SocketAddr, consumer: u32, queue: u32, app: u16, credit: u32) -> Self {
        let mut client = Self::hello(addr);
        client.open_consumer(consumer, queue, app, credit);
        client
    }

    /// Says `Hello`, announcing `heartbeat_ms`, and returns the `Welcome` that answers.
    pub fn shake_hands(&mut self, heartbeat_ms: u32) -> Welcome {
        self.send(hello_frame(heartbeat_ms));
        self.next(|frame| match frame {
            Frame::Welcome(welcome) => welcome,
            other => panic!("expected Welcome, got {other:?}"),
        })
    }

    /// Gives consumer `consumer` `credit` more messages.
    pub fn credit(&mut self, consumer: u32, credit: u32) {
        self.send(Frame::Credit(frames::credit(consumer, credit)));
    }

    /// Closes consumer `consumer` and reads the echo.
    pub fn close_consumer(&mut self, consumer: u32) {
        let close = Frame::CloseConsumer(close_consumer(consumer));
        self.send(close);
        self.next(|frame| assert_eq!(frame, close));
    }

    /// Asks to close producer `producer` (the echo comes after its outcomes).
    pub fn close_producer(&mut self, producer: u32) {
        self.send(Frame::CloseProducer(close_producer(producer)));
    }

    /// Closes producer `producer`, whose messages all have their outcomes; reads the echo.
    pub fn close_producer_echoed(&mut self, producer: u32) {
        self.close_producer(producer);
        self.next(|frame| assert_eq!(frame, Frame::CloseProducer(close_producer(producer))));
    }

    /// Reads `n` publish confirms of `producer`, each `Stored`.
    pub fn all_stored(&mut self, producer: u32, n: usize) {
        self.confirms(producer, n, |_, s| assert_eq!(s, ConfirmStatus::Stored));
    }

    pub fn send(&mut self, frame: Frame<'_>) {
        self.out.clear();
        frame.encode(&mut self.out).unwrap();
        self.flush();
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    fn flush(&mut self) {
        self.stream.write_all(&self.out).unwrap();
        self.out.clear();
    }

    pub fn open_producer(&mut self, producer: u32, queue: u32, max_unconfirmed: u32) {
        let opened = self.open_named_producer(producer, queue, max_unconfirmed, "");
        assert_eq!(opened, Ok(None), "anonymous: nothing stored");
    }

    /// Opens a producer under `name` (anonymous if empty): its last stored id, or the refusal.
    pub fn open_named_producer(
        &mut self,
        producer: u32,
        queue: u32,
        max_unconfirmed: u32,
        name: &str,
    ) -> Result<Option<u64>, ErrorCode> {
        self.open_producer_window(producer, queue, max_unconfirmed, name, |w| w.last_stored)
    }

    /// As [`Self::open_named_producer`]: what `window` makes of the stored window.
    pub fn open_producer_window<R>(
        &mut self,
        producer: u32,
        queue: u32,
        max: u32,
        name: &str,
        window: impl FnOnce(StoredWindow<'_>) -> R,
    ) -> Result<R, ErrorCode> {
        let open = open_producer(producer, queue, max, name);
        self.send(Frame::OpenProducer(open));
        self.next(|frame| match frame {
            Frame::ProducerOpened(opened) => {
                assert_eq!(opened.producer, ProducerId(producer));
                Ok(window(opened.stored))
            }
            Frame::Error(error) => {
                assert_eq!(error.refused, Some(FrameKind::OpenProducer));
                assert_eq!(error.subject, producer);
                Err(error.code)
            }
            other => panic!("expected ProducerOpened, got {other:?}"),
        })
    }

    /// Opens consumer `consumer` of `queue`'s `app` with `credit`, and reads the echo.
    pub fn open_consumer(&mut self, consumer: u32, queue: u32, app: u16, credit: u32) {
        let open = Frame::OpenConsumer(open_consumer(consumer, queue, app, credit));
        self.send(open);
        self.next(|frame| assert_eq!(frame, open));
    }

    /// Publishes messages `ids` with `payload(id)` (up to 2 KiB) in one frame.
    pub fn publish(
        &mut self,
        producer: u32,
        ids: impl IntoIterator<Item = u64>,
        mut payload: impl FnMut(u64, &mut [u8]) -> usize,
    ) {
        let mut bytes = [0_u8; 2048];
        let mut batch = PublishBuilder::begin(&mut self.out, ProducerId(producer));
        for id in ids {
            let len = payload(id, &mut bytes);
            batch.push(PublishId(id), &bytes[..len]).unwrap();
        }
        batch.finish().unwrap();
        self.flush();
    }

    /// Confirms `deliveries` (each a GUID and its delivery token) and gives as much credit.
    pub fn confirm(&mut self, consumer: u32, deliveries: &[Delivered], credit: bool) {
        let mut batch = ConsumerConfirmBuilder::begin(&mut self.out, ConsumerId(consumer));
        for &(guid, token) in deliveries {
            batch.push(guid, token).unwrap();
        }
        batch.finish().unwrap();
        if credit {
            let more = frames::credit(consumer, deliveries.len() as u32);
            Frame::Credit(more).encode(&mut self.out).unwrap();
        }
        self.flush();
    }

    /// Hands the next frame (heartbeats skipped) to `f`.
    pub fn next<R>(&mut self, f: impl FnOnce(Frame<'_>) -> R) -> R {
        self.next_frame(true, f)
    }

    /// The next frame is a heartbeat.
    pub fn expect_heartbeat(&mut self) {
        self.next_frame(false, |frame| assert_eq!(frame, Frame::Heartbeat));
    }

    /// Hands the next frame to `f`, heartbeats skipped if `skip`.
    fn next_frame<R>(&mut self, skip: bool, f: impl FnOnce(Frame<'_>) -> R) -> R {
        let until = Instant::now() + READ_TIMEOUT;
        loop {
            assert!(Instant::now() < until, "no frame for 10 s");
            match decode(&self.input[self.start..self.end]).expect("the server's frames decode") {
                Some((Frame::Heartbeat, len)) if skip => self.start += len,
                Some((_, len)) => {
                    let at = self.start;
                    self.start += len;
                    let (frame, _) = decode(&self.input[at..at + len]).unwrap().unwrap();
                    return f(frame);
                }
                None => assert!(self.fill(), "the server closed the connection"),
            }
        }
    }

    /// Reads more; false at the end of the stream.
    fn fill(&mut self) -> bool {
        match self.read_more() {
            Ok(n) => n > 0,
            Err(e) => panic!("reading: {e}"),
        }
    }

    /// Makes room in the buffer and reads into it once; the bytes read.
    fn read_more(&mut self) -> std::io::Result<usize> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.input.len() {
            self.input.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        let n = self.stream.read(&mut self.input[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// Whether no frame (other than a heartbeat) arrives within `wait`.
    pub fn quiet_for(&mut self, wait: Duration) -> bool {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let quiet = loop {
            match decode(&self.input[self.start..self.end]).unwrap() {
                Some((Frame::Heartbeat, len)) => self.start += len,
                Some(_) => break false,
                None => match self.read_more() {
                    Ok(0) => break true,
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        break true;
                    }
                    Err(e) => panic!("reading: {e}"),
                },
            }
        };
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        quiet
    }

    /// The next frame is an error of `code`; returns its refused kind and subject.
    pub fn expect_error(&mut self, code: ErrorCode) -> (Option<FrameKind>, u32) {
        self.next(|frame| match frame {
            Frame::Error(error) => {
                assert_eq!(error.code, code, "{}", error.message);
                (error.refused, error.subject)
            }
            other => panic!("expected an error {code:?}, got {other:?}"),
        })
    }

    /// The next frame is an error of `code` refusing the frame of `kind` about `subject`.
    pub fn expect_refusal(&mut self, code: ErrorCode, kind: FrameKind, subject: u32) {
        assert_eq!(self.expect_error(code), (Some(kind), subject));
    }

    /// The next frame is a fatal error of `code` (refused and subject 0), then the end.
    pub fn expect_fatal(&mut self, code: ErrorCode) {
        let carried = self.expect_error(code);
        assert_eq!(carried, (None, 0), "a fatal error refuses no frame");
        self.expect_closed();
    }

    /// The server closes the connection, with no frame before.
    pub fn expect_closed(&mut self) {
        loop {
            if self.start != self.end {
                self.next(|frame| panic!("expected the end, got {frame:?}"));
            }
            if !self.fill() {
                return;
            }
        }
    }

    /// Reads deliveries to `consumer` until `n` messages came, handing each to `f`.
    pub fn deliveries(&mut self, consumer: u32, n: usize, f: impl FnMut(Delivered, &[u8])) {
        self.deliveries_among(consumer, n, false, f);
    }

    /// As `deliveries`, skipping publish confirms if `skip_confirms`.
    pub fn deliveries_among(
        &mut self,
        consumer: u32,
        n: usize,
        skip_confirms: bool,
        mut f: impl FnMut(Delivered, &[u8]),
    ) {
        self.counted(n, "delivered", |frame| match frame {
            Frame::PublishConfirm(_) if skip_confirms => 0,
            Frame::Deliver(batch) => {
                assert_eq!(batch.consumer(), ConsumerId(consumer));
                for (guid, token, payload) in batch.messages() {
                    f((guid, token), payload);
                }
                batch.count() as usize
            }
            other => panic!("expected a delivery, got {other:?}"),
        });
    }

    /// Reads publish confirms of `producer` until `n` came, handing each to `f`.
    pub fn confirms(
        &mut self,
        producer: u32,
        n: usize,
        mut f: impl FnMut(PublishId, ConfirmStatus),
    ) {
        self.counted(n, "confirms", |frame| match frame {
            Frame::PublishConfirm(batch) => {
                assert_eq!(batch.producer(), ProducerId(producer));
                batch.confirms().for_each(|(id, status)| f(id, status));
                batch.count() as usize
            }
            other => panic!("expected publish confirms, got {other:?}"),
        });
    }

    /// Reads deliveries to `consumer` until `n` messages came; returns their GUIDs and tokens.
    pub fn delivered(&mut self, consumer: u32, n: usize) -> Vec<Delivered> {
        let mut delivered = Vec::new();
        self.deliveries(consumer, n, |d, _| delivered.push(d));
        delivered
    }

    /// Reads `n` publish confirms of `producer`; returns each id with its status, by id.
    pub fn statuses(&mut self, producer: u32, n: usize) -> Vec<(u64, ConfirmStatus)> {
        let mut statuses = Vec::new();
        self.confirms(producer, n, |id, status| statuses.push((id.0, status)));
        statuses.sort_unstable_by_key(|&(id, _)| id);
        statuses
    }

    /// Reads `n` publish confirms of `producer`, each `Stored`; returns their ids, sorted.
    pub fn stored_ids(&mut self, producer: u32, n: usize) -> Vec<u64> {
        let mut ids = self.ids_all(producer, n, ConfirmStatus::Stored);
        ids.sort_unstable();
        ids
    }

    /// Reads `n` publish confirms of `producer`, each of `status`; returns their ids in order.
    pub fn ids_all(&mut self, producer: u32, n: usize, status: ConfirmStatus) -> Vec<u64> {
        let mut ids = Vec::new();
        self.confirms(producer, n, |id, s| {
            assert_eq!(s, status, "message {}", id.0);
            ids.push(id.0);
        });
        ids
    }

    /// Reads confirms and deliveries, in any order, until `done` holds (checked before each frame).
    pub fn read_until(&mut self, done: impl Fn(&Traffic) -> bool) -> Traffic {
        let mut read = Traffic::default();
        while !done(&read) {
            self.next(|frame| match frame {
                Frame::PublishConfirm(batch) => {
                    read.confirms
                        .extend(batch.confirms().map(|(id, s)| (id.0, s)));
                }
                Frame::Deliver(batch) => {
                    let consumer = batch.consumer().0;
                    read.delivered
                        .extend(batch.messages().map(|(g, t, _)| (consumer, (g, t))));
                }
                other => panic!("expected confirms or deliveries, got {other:?}"),
            });
        }
        read
    }

    /// Reads frames into `count` (how many of the `n` each holds) until `n` came, and no more.
    fn counted(&mut self, n: usize, what: &str, mut count: impl FnMut(Frame<'_>) -> usize) {
        let mut got = 0;
        while got < n {
            got += self.next(&mut count);
        }
        assert_eq!(got, n, "more {what} than expected");
    }

    /// The socket, for a test that reads it itself (panics if a frame is still buffered).
    pub fn into_stream(self) -> TcpStream {
        assert_eq!(self.start, self.end, "frames left unread");
        self.stream
    }

    pub fn close_write(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }
}

/// The payload of message `id`: its id's bytes, repeated to a length that varies with it.
pub fn payload_of(id: u64, buf: &mut [u8]) -> usize {
    let len = (id % 40) as usize + 8;
    for (i, b) in buf[..len].iter_mut().enumerate() {
        *b = (id >> (8 * (i % 8))) as u8;
    }
    len
}

/// A delivery as `Deliver` names it and `ConsumerConfirm` echoes it: GUID and token.
pub type Delivered = (Guid, DeliveryToken);

/// What [`Client::read_until`] read: publish confirms and deliveries.
#[derive(Debug, Default)]
pub struct Traffic {
    /// Each publish confirm's id and status, in order.
    pub confirms: Vec<(u64, ConfirmStatus)>,
    /// Each delivery's consumer, GUID and token, in order.
    pub delivered: Vec<(u32, Delivered)>,
}

impl Traffic {
    /// The ids confirmed with `status`, in order.
    pub fn ids(&self, status: ConfirmStatus) -> Vec<u64> {
        let confirmed = self.confirms.iter().filter(|c| c.1 == status);
        confirmed.map(|c| c.0).collect()
    }

    /// The deliveries to `consumer` (GUID and token), in order.
    pub fn deliveries(&self, consumer: u32) -> Vec<Delivered> {
        let delivered = self.delivered.iter().filter(|d| d.0 == consumer);
        delivered.map(|d| d.1).collect()
    }
}
