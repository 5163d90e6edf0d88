//! A fake broker on the wire codec: it answers, confirms by its [`Policy`], delivers within
//! credit, does what a test asks ([`Action`]), logs frames; with `no_log`, allocates nothing.

#![allow(dead_code)]

mod fixtures;
pub mod proxy;

#[allow(unused_imports)]
pub use fixtures::*;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use zerodispatch_wire::{
    ConfirmStatus, ConsumerId, DeliverBuilder, DeliveryToken, ErrorCode, Frame, FrameKind, Guid,
    HEADER_LEN, MAX_FRAME_LEN, ProducerId, PublishConfirmBuilder, PublishId, Welcome, decode,
};

/// The queue the fake broker does not have.
pub const UNKNOWN_QUEUE: u32 = 99;

/// How the fake broker confirms publishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Each `Publish` is confirmed at once, every message with this status.
    Confirm(ConfirmStatus),
    /// Nothing is confirmed until the test says (`confirm_held`) or the producer closes.
    Hold,
}

impl Default for Policy {
    fn default() -> Self {
        Self::Confirm(ConfirmStatus::Stored)
    }
}

/// The fake broker's settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct Config {
    pub policy: Policy,
    /// The heartbeat interval announced in `Welcome`.
    pub heartbeat_ms: u32,
    /// Log no frame received (for the zero-allocation proofs).
    pub no_log: bool,
    /// On `CloseProducer`, echo only; off, confirm the held messages `Closed` before the echo.
    pub close_echo_only: bool,
    /// Deliver every published message to this consumer too, at once (it must have credit).
    pub echo_to: Option<u32>,
    /// Deduplicate a named producer's publish ids across connections; `ProducerOpened` says them.
    pub dedup: bool,
    /// Drop a connection past this many messages in or out (unconfirmed), `drops` times in all.
    pub drop_after_messages: Option<u64>,
    pub drops: u32,
    /// With `dedup` and `Hold`, on the first connection: store only this many, lose the rest.
    pub store_limit: Option<u64>,
    /// With `dedup`, on the first connection: this publish id is not stored, the others are.
    pub lose_id: Option<u64>,
    /// On `CloseProducer`, drop the connection instead of answering.
    pub drop_on_close: bool,
    /// Refuse this many `OpenProducer` after the first, with `reopen_refusal` or `NAME_IN_USE`.
    pub refuse_reopens: u32,
    pub reopen_refusal: Option<ErrorCode>,
    /// Each consumer open delivers the shared queue's unconfirmed messages (GUID: the index).
    pub shared_queue: bool,
    /// Refuse every `OpenConsumer` after the first with `UNKNOWN_QUEUE`.
    pub refuse_consumer_reopens: bool,
    /// Answer nothing on every connection after the first (not even `Hello`).
    pub silent_reconnects: bool,
    /// Break the heartbeat rule: send no heartbeat at the client's interval.
    pub silent_heartbeats: bool,
}

impl Config {
    /// The default settings, but confirming nothing until the test says ([`Policy::Hold`]).
    pub fn holding() -> Self {
        Self::default().with(|c| c.policy = Policy::Hold)
    }

    /// These settings as `tune` changes them.
    pub fn with(mut self, tune: impl FnOnce(&mut Self)) -> Self {
        tune(&mut self);
        self
    }
}

/// A frame the fake broker received, as it logs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    Hello { heartbeat_ms: u32 },
    Heartbeat,
    Error { code: ErrorCode },
    OpenProducer { producer: u32, max_unconfirmed: u32 },
    CloseProducer { producer: u32 },
    Publish { producer: u32, ids: Vec<u64> },
    OpenConsumer { consumer: u32, credit: u32 },
    CloseConsumer { consumer: u32 },
    ConsumerConfirm { consumer: u32, guids: Vec<Guid> },
    Credit { consumer: u32, credit: u32 },
}

/// What a test asks of the connection.
pub enum Action {
    /// Confirm every held message with this status.
    ConfirmHeld(ConfirmStatus),
    /// Queue messages for a consumer; they go within its credit.
    Deliver {
        consumer: u32,
        payloads: Vec<Vec<u8>>,
    },
    /// Write these bytes as they are.
    Raw(Vec<u8>),
    /// Close the connection without a word.
    Drop,
    /// Confirm the first `n` held messages `Stored`, then close the connection.
    ConfirmThenDrop(usize),
}

/// What is stored of `name`'s messages, as `ProducerOpened` says it: highest id, window below.
fn stored_window(log: &Log, name: &str) -> (Option<u64>, u32, Vec<u8>) {
    let Some(&last) = log.stored_ids.get(name).and_then(|ids| ids.last()) else {
        return (None, 0, Vec::new());
    };
    let known = last.saturating_add(1).min(4096);
    let mut bits = vec![0_u8; known.div_ceil(8) as usize];
    for i in (0..known).filter(|i| log.stored_ids[name].contains(&(last - i))) {
        bits[(i / 8) as usize] |= 1 << (i % 8);
    }
    (Some(last), known as u32, bits)
}

/// The log, shared with the test.
#[derive(Default)]
pub struct Log {
    pub frames: Vec<(Instant, Received)>,
    /// The connection has ended (the client closed it, or `Drop`).
    pub ended: bool,
    /// `OpenConsumer` frames received, on every connection.
    pub consumer_opens: u32,
    /// Connections accepted.
    pub connections: u32,
    /// `OpenProducer` frames received, on every connection.
    pub opens: u32,
    /// With `dedup`: the publish ids stored, in order.
    pub stored: Vec<u64>,
    /// Per name, every publish id stored.
    stored_ids: std::collections::HashMap<String, std::collections::BTreeSet<u64>>,
    drops_done: u32,
    refusals_done: u32,
    /// With `shared_queue`: the messages, and whether each is confirmed.
    pub queue: Vec<(Vec<u8>, bool)>,
    /// Confirm entries whose token is not the one delivered ([`token_of`]): counted, not applied.
    pub bad_tokens: u64,
}

/// The fake broker: its address, and the log shared with its connections.
pub struct FakeBroker {
    pub addr: std::net::SocketAddr,
    pub log: Arc<Mutex<Log>>,
    actions: Arc<Mutex<Option<mpsc::UnboundedSender<Action>>>>,
}

impl FakeBroker {
    /// Starts a fake broker on a free loopback port, on the current runtime.
    pub async fn start(config: Config) -> Self {
        let (listener, addr) = listen().await;
        let log = Arc::new(Mutex::new(Log::default()));
        let actions = Arc::new(Mutex::new(None));
        let (log2, actions2) = (Arc::clone(&log), Arc::clone(&actions));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (tx, rx) = mpsc::unbounded_channel();
                let connections = {
                    let mut log = log2.lock().unwrap();
                    log.connections += 1;
                    log.connections
                };
                if config.silent_reconnects && connections > 1 {
                    let (mut stream, mut sink) = (stream, tokio::io::sink());
                    tokio::spawn(async move { tokio::io::copy(&mut stream, &mut sink).await });
                    continue;
                }
                *actions2.lock().unwrap() = Some(tx);
                tokio::spawn(serve(stream, connections, config, Arc::clone(&log2), rx));
            }
        });
        Self { addr, log, actions }
    }

    /// Adds messages to the shared queue (`Config::shared_queue`).
    pub fn enqueue(&self, payloads: impl IntoIterator<Item = Vec<u8>>) {
        let mut log = self.log.lock().unwrap();
        log.queue.extend(payloads.into_iter().map(|p| (p, false)));
    }

    /// Queues `payloads` for `consumer` on the current connection ([`Action::Deliver`]).
    pub fn deliver(&self, consumer: u32, payloads: Vec<Vec<u8>>) {
        self.act(Action::Deliver { consumer, payloads });
    }

    /// Asks the current connection to do something.
    pub fn act(&self, action: Action) {
        let actions = self.actions.lock().unwrap();
        let _ = actions.as_ref().expect("a connection").send(action);
    }

    /// The log, locked.
    pub fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap()
    }

    /// The frames received so far.
    pub fn frames(&self) -> Vec<Received> {
        self.log().frames.iter().map(|(_, f)| f.clone()).collect()
    }

    /// When each frame `pick` accepts came, in order.
    pub fn times_of(&self, pick: impl Fn(&Received) -> bool) -> Vec<Instant> {
        let frames = self.log().frames.clone().into_iter();
        frames.filter(|(_, f)| pick(f)).map(|(at, _)| at).collect()
    }

    /// The frames received so far that `pick` maps to something, mapped.
    pub fn picked<T>(&self, pick: impl Fn(Received) -> Option<T>) -> Vec<T> {
        self.frames().into_iter().filter_map(pick).collect()
    }

    /// The credit of each `Credit` frame received, in order.
    pub fn credits(&self) -> Vec<u32> {
        self.picked(|f| match f {
            Received::Credit { credit, .. } => Some(credit),
            _ => None,
        })
    }

    /// The GUID counts of the `ConsumerConfirm` frames received, in order.
    pub fn confirm_counts(&self) -> Vec<usize> {
        self.picked(|f| match f {
            Received::ConsumerConfirm { guids, .. } => Some(guids.len()),
            _ => None,
        })
    }

    /// GUIDs received in `ConsumerConfirm` frames, on every connection.
    pub fn confirmed(&self) -> usize {
        self.confirm_counts().iter().sum()
    }

    /// The publish ids stored (with `dedup`), in order.
    pub fn stored(&self) -> Vec<u64> {
        self.log().stored.clone()
    }

    /// Waits (up to 5 s) until `frame` has come.
    pub async fn wait_received(&self, frame: Received) {
        let came = || self.frames().contains(&frame);
        wait_until(&format!("{frame:?}"), came).await;
    }

    /// Waits (up to 5 s) until a `Publish` frame with message `id` has come.
    pub async fn wait_published(&self, id: u64) {
        let published = || self.publish_ids().iter().any(|ids| ids.contains(&id));
        wait_until(&format!("message {id}"), published).await;
    }

    /// The publish ids of each `Publish` frame received, in order.
    pub fn publish_ids(&self) -> Vec<Vec<u64>> {
        self.picked(|f| match f {
            Received::Publish { ids, .. } => Some(ids),
            _ => None,
        })
    }

    /// The message counts of the `Publish` frames received, in order.
    pub fn publish_counts(&self) -> Vec<usize> {
        self.publish_ids().iter().map(Vec::len).collect()
    }

    /// Messages received in `Publish` frames, on every connection.
    pub fn published(&self) -> usize {
        self.publish_counts().iter().sum()
    }

    /// Whether every message of the shared queue (`Config::shared_queue`) is confirmed.
    pub fn all_confirmed(&self) -> bool {
        self.log().queue.iter().all(|(_, c)| *c)
    }

    /// Waits (up to 5 s) until `cond` holds of the log.
    pub async fn wait_for(&self, what: &str, cond: impl Fn(&Log) -> bool) {
        wait_until(what, || cond(&self.log())).await;
    }
}

/// Messages queued for a consumer, and its credit.
struct ConsumerQueue {
    /// The connection it is open on, counted from 1.
    connection: u32,
    id: u32,
    credit: u32,
    queued: VecDeque<(Option<u64>, Vec<u8>)>,
    next_guid: u64,
}

/// Whether `seen` messages pass `drop_after_messages` with drops left (counted if so).
fn may_drop(config: &Config, log: &Mutex<Log>, seen: u64) -> bool {
    if config.drop_after_messages.is_none_or(|limit| seen <= limit) {
        return false;
    }
    let mut log = log.lock().unwrap();
    let dropping = log.drops_done < config.drops;
    log.drops_done += u32::from(dropping);
    dropping
}

/// Serves one connection.
async fn serve(
    mut stream: TcpStream,
    connection: u32,
    config: Config,
    log: Arc<Mutex<Log>>,
    mut actions: mpsc::UnboundedReceiver<Action>,
) {
    stream.set_nodelay(true).unwrap();
    let mut rbuf = vec![0; HEADER_LEN + MAX_FRAME_LEN as usize];
    let mut filled = 0;
    let mut out = Vec::with_capacity(1 << 20);
    let mut held: Vec<(u32, u64)> = Vec::with_capacity(1 << 16);
    let mut consumers: Vec<ConsumerQueue> = Vec::new();
    let mut producer_names: Vec<(u32, String)> = Vec::new();
    let mut seen: u64 = 0;
    let mut client_heartbeat: Option<Duration> = None;
    let reopen_refusal = config.reopen_refusal.unwrap_or(ErrorCode::NAME_IN_USE);
    let record = |frame: Received| {
        if !config.no_log {
            log.lock().unwrap().frames.push((Instant::now(), frame));
        }
    };
    'conn: loop {
        tokio::select! {
            read = stream.read(&mut rbuf[filled..]) => {
                let Ok(n @ 1..) = read else { break 'conn };
                filled += n;
                let mut at = 0;
                let bad = |error| panic!("the client sent a bad frame: {error}");
                while let Some((frame, consumed)) = decode(&rbuf[at..filled]).unwrap_or_else(bad) {
                    at += consumed;
                    match frame {
                        Frame::Hello(hello) => {
                            record(Received::Hello { heartbeat_ms: hello.heartbeat_ms });
                            client_heartbeat = (hello.heartbeat_ms != 0)
                                .then(|| Duration::from_millis(u64::from(hello.heartbeat_ms)));
                            welcome(config.heartbeat_ms).encode(&mut out).unwrap();
                        }
                        Frame::Heartbeat => record(Received::Heartbeat),
                        Frame::Error(error) => {
                            record(Received::Error { code: error.code });
                            if error.code.is_fatal() {
                                break 'conn;
                            }
                        }
                        Frame::OpenProducer(open) => {
                            record(Received::OpenProducer {
                                producer: open.producer.0,
                                max_unconfirmed: open.max_unconfirmed,
                            });
                            let refuse_name = {
                                let mut log = log.lock().unwrap();
                                log.opens += 1;
                                let refuse = log.opens > 1 && log.refusals_done < config.refuse_reopens;
                                log.refusals_done += u32::from(refuse);
                                refuse
                            };
                            if refuse_name {
                                refuse(&mut out, reopen_refusal, FrameKind::OpenProducer, open.producer.0);
                            } else if open.queue.0 == UNKNOWN_QUEUE {
                                refuse(&mut out, ErrorCode::UNKNOWN_QUEUE, FrameKind::OpenProducer, open.producer.0);
                            } else {
                                let (last_stored, known, bits) = stored_window(&log.lock().unwrap(), open.name);
                                producer_names.push((open.producer.0, open.name.to_owned()));
                                let stored = zerodispatch_wire::StoredWindow { last_stored, known, bits: &bits };
                                let opened = zerodispatch_wire::ProducerOpened { producer: open.producer, stored };
                                Frame::ProducerOpened(opened).encode(&mut out).unwrap();
                            }
                        }
                        Frame::CloseProducer(close) => {
                            record(Received::CloseProducer { producer: close.producer.0 });
                            if config.drop_on_close {
                                break 'conn;
                            }
                            if !config.close_echo_only {
                                let mine: Vec<u64> = held.iter().filter(|h| h.0 == close.producer.0).map(|h| h.1).collect();
                                held.retain(|h| h.0 != close.producer.0);
                                confirm(&mut out, close.producer, mine.into_iter(), ConfirmStatus::Closed);
                            }
                            Frame::CloseProducer(close).encode(&mut out).unwrap();
                        }
                        Frame::Publish(publish) => {
                            if !config.no_log {
                                record(Received::Publish {
                                    producer: publish.producer().0,
                                    ids: publish.messages().map(|(id, _)| id.0).collect(),
                                });
                            }
                            let mut vanished = 0;
                            if config.dedup || config.drop_after_messages.is_some() {
                                let name = producer_names.iter().find(|p| p.0 == publish.producer().0).map_or("", |p| p.1.as_str());
                                for (id, _) in publish.messages() {
                                    seen += 1;
                                    if may_drop(&config, &log, seen) {
                                        break 'conn;
                                    }
                                    if config.dedup && !name.is_empty() {
                                        let mut log = log.lock().unwrap();
                                        let first = log.connections == 1;
                                        let past_limit = config.store_limit.is_some_and(|limit| seen > limit);
                                        if first && (past_limit || config.lose_id == Some(id.0)) {
                                            vanished += 1;
                                            continue;
                                        }
                                        if log.stored_ids.entry(name.to_owned()).or_default().insert(id.0) {
                                            log.stored.push(id.0);
                                        }
                                    }
                                }
                            }
                            match config.policy {
                                Policy::Confirm(status) => {
                                    let ids = publish.messages().map(|(id, _)| id.0);
                                    confirm(&mut out, publish.producer(), ids, status);
                                }
                                Policy::Hold => {
                                    let kept = publish.count() as usize - vanished;
                                    held.extend(publish.messages().take(kept).map(|(id, _)| (publish.producer().0, id.0)));
                                }
                            }
                            if let Some(c) = consumers.iter_mut().find(|c| Some(c.id) == config.echo_to) {
                                assert!(c.credit >= publish.count(), "echo needs the credit");
                                let mut frame = DeliverBuilder::begin(&mut out, ConsumerId(c.id));
                                for (_, payload) in publish.messages() {
                                    let token = token_of(connection, c.id, c.next_guid);
                                    frame.push(guid(c.next_guid), token, payload).unwrap();
                                    c.next_guid += 1;
                                }
                                frame.finish().unwrap();
                                c.credit -= publish.count();
                            }
                        }
                        Frame::OpenConsumer(open) => {
                            record(Received::OpenConsumer { consumer: open.consumer.0, credit: open.credit });
                            let reopen = {
                                let mut log = log.lock().unwrap();
                                log.consumer_opens += 1;
                                log.consumer_opens > 1
                            };
                            if open.queue.0 == UNKNOWN_QUEUE || (reopen && config.refuse_consumer_reopens) {
                                refuse(&mut out, ErrorCode::UNKNOWN_QUEUE, FrameKind::OpenConsumer, open.consumer.0);
                            } else {
                                Frame::OpenConsumer(open).encode(&mut out).unwrap();
                                let queued = match config.shared_queue {
                                    true => log.lock().unwrap().queue.iter().enumerate()
                                        .filter(|(_, (_, confirmed))| !confirmed)
                                        .map(|(n, (payload, _))| (Some(n as u64), payload.clone()))
                                        .collect(),
                                    false => VecDeque::new(),
                                };
                                consumers.push(ConsumerQueue { connection, id: open.consumer.0, credit: open.credit, queued, next_guid: 0 });
                            }
                        }
                        Frame::CloseConsumer(close) => {
                            record(Received::CloseConsumer { consumer: close.consumer.0 });
                            consumers.retain(|c| c.id != close.consumer.0);
                            Frame::CloseConsumer(close).encode(&mut out).unwrap();
                        }
                        Frame::ConsumerConfirm(confirms) => {
                            if !config.no_log {
                                record(Received::ConsumerConfirm {
                                    consumer: confirms.consumer().0,
                                    guids: confirms.deliveries().map(|(guid, _)| guid).collect(),
                                });
                            }
                            let consumer = confirms.consumer().0;
                            let mut log = log.lock().unwrap();
                            for (guid, token) in confirms.deliveries() {
                                let n = u64::from_le_bytes(guid.0[..8].try_into().unwrap());
                                if token != token_of(connection, consumer, n) {
                                    log.bad_tokens += 1;
                                    continue;
                                }
                                if config.shared_queue && let Some(entry) = log.queue.get_mut(n as usize) {
                                    entry.1 = true;
                                }
                            }
                        }
                        Frame::Credit(credit) => {
                            record(Received::Credit { consumer: credit.consumer.0, credit: credit.credit });
                            if let Some(c) = consumers.iter_mut().find(|c| c.id == credit.consumer.0) {
                                c.credit = c.credit.saturating_add(credit.credit);
                            }
                        }
                        other => panic!("the client sent {:?}", other.kind()),
                    }
                }
                rbuf.copy_within(at..filled, 0);
                filled -= at;
            }
            action = actions.recv() => match action {
                None | Some(Action::Drop) => break 'conn,
                Some(Action::ConfirmHeld(status)) => {
                    for (producer, id) in std::mem::take(&mut held) {
                        confirm(&mut out, ProducerId(producer), std::iter::once(id), status);
                    }
                }
                Some(Action::Deliver { consumer, payloads }) => {
                    if let Some(c) = consumers.iter_mut().find(|c| c.id == consumer) {
                        c.queued.extend(payloads.into_iter().map(|p| (None, p)));
                    }
                }
                Some(Action::ConfirmThenDrop(n)) => {
                    for (producer, id) in held.drain(..n.min(held.len())) {
                        confirm(&mut out, ProducerId(producer), std::iter::once(id), ConfirmStatus::Stored);
                    }
                    let _ = stream.write_all(&out).await;
                    break 'conn;
                }
                Some(Action::Raw(bytes)) => out.extend_from_slice(&bytes),
            },
            // The heartbeat rule: send something at least once per the client's interval.
            () = tokio::time::sleep(client_heartbeat.unwrap_or(Duration::MAX)), if client_heartbeat.is_some() && !config.silent_heartbeats => {
                Frame::Heartbeat.encode(&mut out).unwrap();
            }
        }
        let delivered: u64 = consumers.iter_mut().map(|c| deliver(&mut out, c)).sum();
        if !out.is_empty() && stream.write_all(&out).await.is_err() {
            break;
        }
        out.clear();
        seen += delivered;
        if delivered > 0 && may_drop(&config, &log, seen) {
            break;
        }
    }
    log.lock().unwrap().ended = true;
}

/// Appends an `Error` frame refusing a frame of kind `refused` about `subject`.
fn refuse(out: &mut Vec<u8>, code: ErrorCode, refused: FrameKind, subject: u32) {
    let why = "refused by the fake broker";
    out.extend(error_bytes(code, Some(refused), subject, why));
}

/// Appends `PublishConfirm` frames confirming `ids` with `status`.
fn confirm(
    out: &mut Vec<u8>,
    producer: ProducerId,
    ids: impl Iterator<Item = u64>,
    status: ConfirmStatus,
) {
    let mut ids = ids.peekable();
    while ids.peek().is_some() {
        let mut frame = PublishConfirmBuilder::begin(out, producer);
        while frame.count() < zerodispatch_wire::MAX_MESSAGES_PER_FRAME {
            let Some(id) = ids.next() else { break };
            frame.push(PublishId(id), status).unwrap();
        }
        frame.finish().unwrap();
    }
}

/// Delivers what the consumer has queued, within its credit, in one frame; returns how many.
fn deliver(out: &mut Vec<u8>, c: &mut ConsumerQueue) -> u64 {
    if c.credit == 0 || c.queued.is_empty() {
        return 0;
    }
    let mut count = 0;
    let mut frame = DeliverBuilder::begin(out, ConsumerId(c.id));
    while c.credit > 0 && frame.count() < zerodispatch_wire::MAX_MESSAGES_PER_FRAME {
        let Some((n, payload)) = c.queued.pop_front() else {
            break;
        };
        let n = n.unwrap_or_else(|| {
            c.next_guid += 1;
            c.next_guid - 1
        });
        let token = token_of(c.connection, c.id, n);
        frame.push(guid(n), token, &payload).unwrap();
        c.credit -= 1;
        count += 1;
    }
    frame.finish().unwrap();
    count
}

/// The token of message `n` to `consumer` on `connection`: a function of the three, so a
/// confirm is checked without a table (nor allocation) and another's token does not match.
pub fn token_of(connection: u32, consumer: u32, n: u64) -> DeliveryToken {
    DeliveryToken(
        (n as u32).wrapping_mul(0x9E37_79B1) ^ connection.wrapping_mul(0x85EB_CA6B) ^ consumer,
    )
}

/// A `Welcome` of this version asking for `heartbeat_ms`, with the protocol's limits.
pub fn welcome(heartbeat_ms: u32) -> Frame<'static> {
    Frame::Welcome(Welcome {
        version: zerodispatch_wire::VERSION,
        heartbeat_ms,
        limits: zerodispatch_wire::ServerLimits::PROTOCOL,
    })
}

/// The GUID the fake broker gives the `n`th message delivered to a consumer.
pub fn guid(n: u64) -> Guid {
    Guid(u128::from(n).to_le_bytes())
}

/// Outcomes as a test collects them.
pub type Outcomes = Arc<Mutex<Vec<zerodispatch_client::Outcome>>>;

/// A confirm handler that collects outcomes, and what it collects into.
pub fn collector() -> (
    Outcomes,
    impl FnMut(&[zerodispatch_client::Outcome]) + Send + 'static,
) {
    let outcomes: Outcomes = Arc::default();
    let sink = Arc::clone(&outcomes);
    (outcomes, move |batch: &[zerodispatch_client::Outcome]| {
        sink.lock().unwrap().extend_from_slice(batch)
    })
}

/// Waits (up to 5 s) until `outcomes` holds `n` outcomes.
pub async fn wait_outcomes(outcomes: &Outcomes, n: usize) {
    wait_count("outcomes", n, || outcomes.lock().unwrap().len()).await;
}

/// Waits (up to 5 s) until `count` reaches `n`; the failure says how far it got.
pub async fn wait_count(what: &str, n: usize, count: impl Fn() -> usize) {
    let (start, limit) = (Instant::now(), Duration::from_secs(5));
    while count() < n {
        let have = count();
        assert!(start.elapsed() < limit, "5 s for {n} {what}; have {have}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Asserts one outcome for each of `0..n` in `outcomes`; returns them sorted by publish id.
pub fn exactly_once(outcomes: &Outcomes, n: u64) -> Vec<zerodispatch_client::Outcome> {
    let mut all = outcomes.lock().unwrap().clone();
    all.sort_by_key(|o| o.publish_id.0);
    let ids: Vec<u64> = all.iter().map(|o| o.publish_id.0).collect();
    assert_eq!(ids, (0..n).collect::<Vec<_>>(), "one outcome per message");
    all
}

/// Asserts [`exactly_once`] for `0..n`, each outcome with `status`.
pub fn all_settled(outcomes: &Outcomes, n: u64, status: ConfirmStatus) {
    let all = statuses(&exactly_once(outcomes, n));
    assert_eq!(all, vec![status; n as usize]);
}

/// The statuses of `outcomes`, in order.
pub fn statuses(outcomes: &[zerodispatch_client::Outcome]) -> Vec<ConfirmStatus> {
    outcomes.iter().map(|o| o.status).collect()
}

/// Waits for `n` outcomes, then asserts [`all_settled`].
pub async fn wait_settled(outcomes: &Outcomes, n: u64, status: ConfirmStatus) {
    wait_outcomes(outcomes, n as usize).await;
    all_settled(outcomes, n, status);
}

/// Waits for `n` outcomes, then returns [`exactly_once`]'s (asserted).
pub async fn wait_exactly_once(outcomes: &Outcomes, n: u64) -> Vec<zerodispatch_client::Outcome> {
    wait_outcomes(outcomes, n as usize).await;
    exactly_once(outcomes, n)
}

/// The ids `0..n`, as a test expects them.
pub fn ids(n: u64) -> Vec<u64> {
    (0..n).collect()
}
