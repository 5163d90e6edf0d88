//! One scenario of the broker's confirm path under the seeded simulator
//! ([`Broker::start_stepped`], [`BrokerSimulator`]), shared by `tests/simulate.rs` and
//! `examples/simulate_broker.rs` (whose doc lists what it drives).
//!
//! Invariants (a handler records a breach; the test's thread fails on it after the step):
//! * each message published (`Ok`) has exactly one outcome; none for one not published;
//! * `Closed` only to a producer whose close began, or at shutdown;
//! * `Stored` only with the quorum's receipts, and then delivered to each app of its queue
//!   by the end (unless a consumer of that fanout app closed, dropping its shares);
//! * a delivery is of a message published to that queue with its payload; a share is held
//!   by one consumer at a time and never delivered again once confirmed; each queue stores
//!   a GUID at most once (so a resend under the same place and generation is not stored
//!   twice); across a forgotten name, a `Stored` message is delivered as that name's;
//! * the table of names follows its rule (mirrored in `Table`): place and generation on
//!   open, `TooManyNames` only while open producers hold every place, the names the broker
//!   knows, and nothing stored said of a forgotten one;
//! * `TooManyTimedProducers` only when the timed producers fill every session processor (a
//!   close gives its ticker's place back before it returns);
//! * ACK conservation at the end of a run without a shutdown: `acked + rejected_full +
//!   out_of_window + superseded == acks + late_acks`, and every outcome seen is counted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::zdb::{
    Ack, AckStatus, AppId, Broker, BrokerConfig, BrokerError, BrokerSimulator, ConfirmMode,
    ConfirmRoute, Confirms, Consumer, ConsumerOptions, Delivery, FlushStrategy, Guid,
    MIN_DEDUP_WINDOW, OnRelease, Payload, Producer, ProducerConfig, ProducerId, QueueConfig,
    QueueId, QueueMode, QueueStats, Receipt, ReplicaId, Replication, SendError,
};
use crate::zdt::SimRng;

/// Producer names the scenario uses: more than the broker's table of names holds.
const NAMES: usize = 5;

/// Places in the broker's table of names (`BrokerConfig::max_producer_names`).
const PLACES: usize = 3;

/// A message: a named producer's publish id under its name, or an anonymous payload handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Msg {
    Named(usize, u64),
    Anonymous(u64),
}

#[derive(Debug)]
struct Attempt {
    instance: usize,
    guid: Guid,
    queue: u32,
    msg: Msg,
    outcomes: Vec<AckStatus>,
}

#[derive(Debug, Default)]
struct Instance {
    name: Option<usize>,
    /// A named one's place in the table of names and the place's generation.
    key: Option<(u32, u32)>,
    timed: bool,
    /// Its close has begun (or it was dropped).
    closing: bool,
    /// Its messages without an outcome, oldest first, by GUID (attempt indexes).
    in_flight: HashMap<Guid, Vec<usize>>,
}

#[derive(Debug, Default)]
struct Name {
    /// The instance holding it now.
    open: Option<usize>,
    /// Its place in the broker's table of names, while the broker knows it.
    place: Option<u32>,
    next_id: u64,
    /// Every (queue, id) published under it.
    published: Vec<(u32, u64)>,
    /// The (queue, id) reported `Stored` to some producer of it.
    stored: HashSet<(u32, u64)>,
}

#[derive(Debug)]
struct ConsumerState {
    queue: u32,
    app: u16,
    explicit: bool,
    /// Paced by credit.
    paced: bool,
    closed: bool,
    /// Explicit: delivered and not confirmed yet.
    held: Vec<Guid>,
}

#[derive(Debug, Default)]
struct Share {
    holder: Option<usize>,
    confirmed: bool,
    deliveries: u32,
}

/// The scenario's copy of the broker's table of names (`names.rs`), by its rule (`place_for`).
#[derive(Debug, Default)]
struct Table {
    /// Per place: the name holding it and the place's generation.
    places: Vec<(usize, u32)>,
    /// The places of the closed names, least recently closed first.
    closed: Vec<u32>,
}

#[derive(Default)]
struct World {
    attempts: Vec<Attempt>,
    instances: Vec<Instance>,
    names: Vec<Name>,
    table: Table,
    consumers: Vec<ConsumerState>,
    shares: HashMap<(u32, Guid, u16), Share>,
    /// Every (queue, GUID) published with an `Ok`.
    published: HashSet<(u32, Guid)>,
    /// Every (queue, GUID, message) reported `Stored`.
    stored: HashSet<(u32, Guid, Msg)>,
    /// Every (queue, message, app) delivered.
    delivered: HashSet<(u32, Msg, u16)>,
    /// Receipts sent, by (queue, GUID): a mask of replicas.
    receipts: HashMap<(u32, Guid), u64>,
    quorum: Option<u8>,
    /// Fanout (queue, app)s that had a consumer closed: their shares may be dropped.
    lossy: HashSet<(u32, u16)>,
    shutting_down: bool,
    /// Outcomes the applications were given, by status (`AckStatus as usize`).
    outcomes: [u64; 8],
    /// Payload handles of the messages published (`Ok`), with their attempts.
    handles: HashMap<u64, usize>,
    /// Payload handles the queues released.
    released: HashSet<u64>,
    /// The first invariant a handler found broken.
    breach: Option<String>,
}

type Shared = Arc<Mutex<World>>;

fn world(shared: &Shared) -> MutexGuard<'_, World> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl World {
    fn breach(&mut self, what: String) {
        self.breach.get_or_insert(what);
    }

    /// The place and generation name `n` gets if it opens now; `None`: `TooManyNames`.
    fn place_for(&self, n: usize) -> Option<(u32, u32)> {
        let table = &self.table;
        if let Some(place) = self.names[n].place {
            return Some((place, table.places[place as usize].1));
        }
        if table.places.len() < PLACES {
            return Some((table.places.len() as u32, 0));
        }
        let &place = table.closed.first()?;
        Some((place, table.places[place as usize].1 + 1))
    }

    /// Name `n` opens at `(place, generation)` (`place_for`): the name that held the
    /// place before, if another, is forgotten.
    fn take_place(&mut self, n: usize, (place, generation): (u32, u32)) {
        self.table.closed.retain(|&p| p != place);
        match self.table.places.get_mut(place as usize) {
            Some(held) => {
                let old = std::mem::replace(held, (n, generation)).0;
                if old != n {
                    self.names[old].place = None;
                }
            }
            None => self.table.places.push((n, generation)),
        }
        self.names[n].place = Some(place);
    }

    /// Name `n`'s producer closed: its place is the last to be given up.
    fn name_closed(&mut self, n: usize) {
        self.names[n].open = None;
        let place = self.names[n].place.expect("an opened name is known");
        self.table.closed.retain(|&p| p != place);
        self.table.closed.push(place);
    }

    /// A producer instance's batch of outcomes.
    fn on_ack(&mut self, instance: usize, batch: &[Ack]) {
        for ack in batch {
            self.outcomes[ack.status as usize] += 1;
            let waiting = self.instances[instance].in_flight.get_mut(&ack.guid);
            let Some(index) = waiting.and_then(|v| (!v.is_empty()).then(|| v.remove(0))) else {
                self.breach(format!(
                    "producer {instance} was given an outcome {:?} for {:?}, which it has no message of without one",
                    ack.status, ack.guid
                ));
                continue;
            };
            let queue = self.attempts[index].queue;
            self.attempts[index].outcomes.push(ack.status);
            match ack.status {
                AckStatus::Closed if !self.instances[instance].closing && !self.shutting_down => {
                    self.breach(format!(
                        "producer {instance}, open, was told Closed for {:?} (message {index})",
                        ack.guid
                    ));
                }
                AckStatus::Stored => {
                    if let Some(quorum) = self.quorum {
                        let mask = self.receipts.get(&(queue, ack.guid));
                        let got = mask.map_or(0, |m| m.count_ones());
                        if got < u32::from(quorum) {
                            self.breach(format!(
                                "{:?} reported Stored with {got} receipts sent, quorum {quorum}",
                                ack.guid
                            ));
                        }
                    }
                    let msg = self.attempts[index].msg;
                    self.stored.insert((queue, ack.guid, msg));
                    if let Some(name) = self.instances[instance].name {
                        self.names[name].stored.insert((queue, ack.guid.seq()));
                    }
                }
                _ => {}
            }
        }
    }

    /// A consumer's batch of deliveries.
    fn on_delivery(&mut self, consumer: usize, batch: &[Delivery]) {
        for d in batch {
            let (queue, app) = (d.queue.0, d.app.0);
            let c = &self.consumers[consumer];
            let (want_queue, want_app, explicit) = (c.queue, c.app, c.explicit);
            if (queue, app) != (want_queue, want_app) {
                self.breach(format!(
                    "consumer {consumer} of queue {want_queue} app {want_app} got {d:?}"
                ));
            }
            if !self.published.contains(&(queue, d.guid)) {
                self.breach(format!("{d:?} delivered, never published to its queue"));
            }
            // Its payload is that of a message published under its GUID to its queue.
            let handle = d.payload.handle;
            match self.handles.get(&handle).map(|&a| &self.attempts[a]) {
                Some(a) if (a.guid, a.queue) == (d.guid, queue) => {
                    self.delivered.insert((queue, a.msg, app));
                }
                a => self.breach(format!("{d:?} delivered with the payload of {a:?}")),
            }
            let key = (queue, d.guid, app);
            let holder = self.shares.entry(key).or_default().holder;
            let holder_open = holder.filter(|&h| !self.consumers[h].closed);
            let share = &self.shares[&key];
            if share.confirmed {
                let n = share.deliveries;
                self.breach(format!(
                    "{d:?} delivered to consumer {consumer} after it was confirmed ({n} deliveries before)"
                ));
            } else if let Some(h) = holder_open {
                self.breach(format!(
                    "{d:?} delivered to consumer {consumer} while consumer {h}, open, holds it"
                ));
            }
            let share = self.shares.get_mut(&key).expect("made");
            share.deliveries += 1;
            if explicit {
                share.holder = Some(consumer);
                self.consumers[consumer].held.push(d.guid);
            } else {
                // Confirmed as the handler returns.
                share.holder = None;
                share.confirmed = true;
            }
        }
    }
}

/// The broker's objects, outside the world's lock (their calls may run handlers that take it).
struct Run {
    broker: Broker,
    sim: BrokerSimulator,
    shared: Shared,
    producers: Vec<Option<Producer>>,
    consumers: Vec<Option<Consumer>>,
    /// The broker's configuration, as started.
    config: BrokerConfig,
    next_handle: u64,
}

impl Run {
    fn w(&self) -> MutexGuard<'_, World> {
        world(&self.shared)
    }

    /// Fails the run on a breach a handler recorded.
    fn check(&self) {
        if let Some(breach) = self.w().breach.take() {
            panic!("{breach}");
        }
    }

    fn shutting_down(&self) -> bool {
        self.w().shutting_down
    }

    /// Checks that a `ShutDown` refusal of `what` came during the shutdown.
    fn refused_shut_down(&self, what: &str) {
        assert!(self.shutting_down(), "{what}: ShutDown while running");
    }

    fn open_instances(&self) -> Vec<usize> {
        open(&self.producers)
    }

    fn live_timed(&self) -> usize {
        let w = self.w();
        let open = self.open_instances();
        open.into_iter().filter(|&i| w.instances[i].timed).count()
    }

    fn producer_config(&mut self) -> (ProducerConfig, bool) {
        let rng = self.sim.rng();
        let mut config = ProducerConfig {
            max_unconfirmed: 1 + rng.below(16) as usize,
            batch_size: 1 + rng.below(4) as usize,
            ..ProducerConfig::default()
        };
        if rng.one_in(3) {
            config.flush = FlushStrategy::Timer(Duration::from_micros(20 + rng.below(300)));
        }
        if rng.one_in(3) {
            config.confirm_timeout = Some(Duration::from_micros(200 + rng.below(3_000)));
        }
        let timed =
            config.confirm_timeout.is_some() || matches!(config.flush, FlushStrategy::Timer(_));
        (config, timed)
    }

    /// Opens a producer (of `name`, if any); returns its instance.
    fn open_producer(&mut self, name: Option<usize>) -> Option<usize> {
        let (config, timed) = self.producer_config();
        let instance = self.producers.len();
        let live_timed = self.live_timed();
        let shared = self.shared.clone();
        let on_ack = move |batch: &[Ack]| world(&shared).on_ack(instance, batch);
        let expected = name.map(|n| self.w().place_for(n));
        let opened = match name {
            Some(n) => self.broker.open_named_producer(&name_of(n), config, on_ack),
            None => self.broker.open_producer_with(config, on_ack),
        };
        self.sim.note(format_args!(
            "open producer {instance} (name {name:?}, timed {timed}): {:?}",
            opened.as_ref().map(|p| (p.id(), p.generation()))
        ));
        let opened = match opened {
            Ok(p) => {
                let key = name.map(|_| (p.id().0, p.generation()));
                assert_eq!(
                    key.map(Some),
                    expected,
                    "name {name:?} opened at (place, generation) {key:?}, not where the table's rule puts it: {:?}",
                    self.w().table
                );
                self.producers.push(Some(p));
                let mut w = self.w();
                w.instances.push(Instance {
                    name,
                    key,
                    timed,
                    ..Instance::default()
                });
                if let Some((n, key)) = name.zip(key) {
                    w.take_place(n, key);
                    w.names[n].open = Some(instance);
                }
                Some(instance)
            }
            Err(BrokerError::TooManyNames { .. }) => {
                let w = self.w();
                let places = &w.table.places;
                let held = places.len() == PLACES
                    && places.iter().all(|&(n, _)| w.names[n].open.is_some());
                assert!(
                    held && expected == Some(None),
                    "name {name:?} refused TooManyNames while a place is not held by an open producer: {:?}",
                    w.table
                );
                None
            }
            Err(e) => {
                match e {
                    BrokerError::TooManyTimedProducers { .. } => {
                        let room = self.config.timed_producers * self.config.session_processors;
                        assert!(
                            self.shutting_down() || live_timed >= room,
                            "a timed producer was refused TooManyTimedProducers with {live_timed} timed producers open, room for {room}"
                        );
                    }
                    BrokerError::ShutDown => self.refused_shut_down("open"),
                    e => panic!("open producer refused: {e}"),
                }
                // The broker opens a name before its session: refused, the name closes.
                if let Some(n) = name {
                    let Some(Some(key)) = expected else {
                        panic!("name {n} refused {e} where the table gives it no place");
                    };
                    let mut w = self.w();
                    w.take_place(n, key);
                    w.name_closed(n);
                }
                None
            }
        };
        if name.is_some() {
            self.check_names();
        }
        opened
    }

    /// The broker knows the names the table does (an open name is never given up), and
    /// of a name it forgot, says nothing is stored, as of a name never opened.
    fn check_names(&self) {
        for n in 0..NAMES {
            let name = name_of(n);
            let known = self.w().names[n].place.is_some();
            assert_eq!(
                self.broker.knows_name(&name),
                known,
                "whether the broker knows {name}: {:?}",
                self.w().table
            );
            if known {
                continue;
            }
            for q in 0..self.config.queues.len() as u32 {
                let window = self.broker.stored_window(&name, QueueId(q));
                let never = self.broker.stored_window("never opened", QueueId(q));
                let forgotten = format!("the window of {name}, forgotten, in queue {q}");
                assert_eq!(window, never, "{forgotten}");
                let last = self.broker.last_stored(&name, QueueId(q));
                assert!(
                    matches!(last, Ok(None)),
                    "the last id stored of {name}, forgotten, in queue {q}: {last:?}"
                );
            }
        }
    }

    /// Publishes through `instance`: a named one a new id or one without `Stored` again.
    fn publish(&mut self, instance: usize, resend: Option<(u32, u64)>) {
        let Instance { name, key, .. } = self.w().instances[instance];
        let handle = self.next_handle;
        self.next_handle += 1;
        let payload = Payload { handle, len: 8 };
        let queues = self.config.queues.len() as u64;
        let how = self.sim.rng().below(3);
        let (queue, id) = match (name, resend) {
            (_, Some(again)) => (again.0, Some(again.1)),
            (Some(n), None) => {
                let queue = self.sim.rng().below(queues) as u32;
                let mut w = self.w();
                let id = w.names[n].next_id;
                w.names[n].next_id += 1;
                w.names[n].published.push((queue, id));
                (queue, Some(id))
            }
            (None, None) => (self.sim.rng().below(queues) as u32, None),
        };
        let producer = self.producers[instance].as_ref().expect("open");
        let sent = match (id, how) {
            (Some(id), _) => producer.publish_with_id(QueueId(queue), payload, id),
            (None, 0) => producer.publish(QueueId(queue), payload),
            (None, 1) => producer.send(QueueId(queue), payload),
            (None, _) => producer.try_send(QueueId(queue), payload),
        };
        self.sim.note(format_args!(
            "producer {instance} publishes {id:?} to queue {queue}: {sent:?}"
        ));
        match sent {
            Ok(guid) => {
                let msg = match (name, id) {
                    (Some(n), Some(id)) => {
                        let (place, generation) = key.expect("a named producer's");
                        let want = Guid::with_generation(ProducerId(place), generation, id);
                        assert_eq!(guid, want, "name {n} published {id}");
                        Msg::Named(n, id)
                    }
                    _ => Msg::Anonymous(handle),
                };
                let mut w = self.w();
                let index = w.attempts.len();
                w.attempts.push(Attempt {
                    instance,
                    guid,
                    queue,
                    msg,
                    outcomes: Vec::new(),
                });
                let in_flight = &mut w.instances[instance].in_flight;
                in_flight.entry(guid).or_default().push(index);
                w.published.insert((queue, guid));
                w.handles.insert(handle, index);
            }
            Err(SendError::WouldBlock(_) | SendError::Full(_)) => {}
            Err(SendError::ShutDown(_)) => self.refused_shut_down("publish"),
            Err(e) => panic!("publish refused: {e}"),
        }
    }

    /// Closes producer `instance` (with a wait, without, or by drop).
    fn close_producer(&mut self, instance: usize) {
        let Some(producer) = self.producers[instance].take() else {
            return;
        };
        self.w().instances[instance].closing = true;
        let how = self.sim.rng().below(3);
        self.sim
            .note(format_args!("close producer {instance} ({how})"));
        if how == 0 {
            drop(producer);
        } else {
            producer.close([Duration::ZERO, Duration::from_secs(1)][how as usize - 1]);
        }
        let name = self.w().instances[instance].name;
        if let Some(n) = name {
            self.w().name_closed(n);
            self.check_names();
        }
    }

    /// The apps of `queue`: 1 for a priority queue.
    fn apps(&self, queue: u32) -> u16 {
        match self.config.queues[queue as usize].mode {
            QueueMode::Priority => 1,
            QueueMode::Fanout { apps } => apps,
        }
    }

    fn open_consumers(&self) -> Vec<usize> {
        open(&self.consumers)
    }

    fn open_consumer(&mut self) {
        let queue = self.sim.rng().below(self.config.queues.len() as u64) as u32;
        let apps = self.apps(queue);
        let app = self.sim.rng().below(u64::from(apps)) as u16;
        let modes = [ConfirmMode::Inline, ConfirmMode::Typed, ConfirmMode::Boxed];
        let routes = [ConfirmRoute::Direct, ConfirmRoute::ViaCluster];
        let rng = self.sim.rng();
        let options = ConsumerOptions {
            mode: *rng.pick(&modes).unwrap(),
            route: *rng.pick(&routes).unwrap(),
            confirms: *rng.pick(&[Confirms::OnReturn, Confirms::Explicit]).unwrap(),
            credit: rng.one_in(3).then(|| rng.below(4) as u32),
        };
        self.open_consumer_with(queue, app, options);
    }

    fn open_consumer_with(&mut self, queue: u32, app: u16, options: ConsumerOptions) {
        let index = self.consumers.len();
        self.w().consumers.push(ConsumerState {
            queue,
            app,
            explicit: options.confirms == Confirms::Explicit,
            paced: options.credit.is_some(),
            closed: false,
            held: Vec::new(),
        });
        let shared = self.shared.clone();
        let opened = self.broker.open_consumer(
            QueueId(queue),
            AppId(app),
            options,
            move |batch: &[Delivery]| world(&shared).on_delivery(index, batch),
        );
        self.sim.note(format_args!(
            "open consumer {index} of queue {queue} app {app} ({options:?}): {:?}",
            opened.as_ref().map(Consumer::id)
        ));
        match opened {
            Ok(c) => self.consumers.push(Some(c)),
            Err(BrokerError::ShutDown) => {
                self.refused_shut_down("open consumer");
                self.w().consumers[index].closed = true;
                self.consumers.push(None);
            }
            Err(e) => panic!("open consumer refused: {e}"),
        }
    }

    fn close_consumer(&mut self, index: usize) {
        let Some(consumer) = self.consumers[index].take() else {
            return;
        };
        {
            let mut w = self.w();
            let (queue, app) = (w.consumers[index].queue, w.consumers[index].app);
            w.consumers[index].closed = true;
            let mode = self.config.queues[queue as usize].mode;
            if matches!(mode, QueueMode::Fanout { .. }) {
                w.lossy.insert((queue, app));
            }
        }
        let by_drop = self.sim.rng().one_in(2);
        self.sim
            .note(format_args!("close consumer {index} (drop {by_drop})"));
        if by_drop {
            drop(consumer);
        } else {
            let closed = self.broker.close_consumer(&consumer);
            let closed_or_down = closed.is_ok() || self.shutting_down();
            assert!(closed_or_down, "close_consumer: {closed:?}");
        }
    }

    fn confirm(&mut self, index: usize) {
        let (guid, app) = {
            let mut w = self.w();
            let c = &mut w.consumers[index];
            if c.held.is_empty() {
                return;
            }
            (c.held.remove(0), c.app)
        };
        let consumer = self.consumers[index].as_ref().expect("open");
        let queue = consumer.queue().0;
        // Confirmed from the call on: the queue never hands it out again.
        let mut w = self.w();
        let share = w.shares.entry((queue, guid, app)).or_default();
        (share.confirmed, share.holder) = (true, None);
        drop(w);
        let done = self.broker.confirm(consumer, guid);
        self.sim
            .note(format_args!("consumer {index} confirms {guid:?}: {done:?}"));
        assert!(done.is_ok() || self.shutting_down(), "confirm: {done:?}");
    }

    fn receipt(&mut self, queue: u32, guid: Guid, replica: u8) {
        *self.w().receipts.entry((queue, guid)).or_default() |= 1 << replica;
        let sent = self.broker.replica_receipt(Receipt {
            queue: QueueId(queue),
            guid,
            replica: ReplicaId(replica),
        });
        self.sim.note(format_args!(
            "receipt of replica {replica} for {guid:?}: {sent:?}"
        ));
        assert!(sent.is_ok() || self.shutting_down(), "receipt: {sent:?}");
    }

    /// A named producer's reconnection: closed without a wait, its name opened again at
    /// once, and every message of the name without `Stored` published again, same ids.
    fn reconnect(&mut self, instance: usize) {
        let Some(name) = self.w().instances[instance].name else {
            return;
        };
        self.sim.note(format_args!("reconnect producer {instance}"));
        if let Some(p) = self.producers[instance].take() {
            self.w().instances[instance].closing = true;
            p.close(Duration::ZERO);
            self.w().name_closed(name);
        }
        if let Some(again) = self.open_producer(Some(name)) {
            self.resend(again);
        }
    }

    /// Named producer `instance` publishes again, same ids, every message of its name
    /// without `Stored` (under a name the broker forgot, a new name's messages: stored
    /// again, at least once).
    fn resend(&mut self, instance: usize) {
        let name = self.w().instances[instance].name.expect("named");
        let unresolved: Vec<(u32, u64)> = {
            let w = self.w();
            let n = &w.names[name];
            let unstored = |p: &&(u32, u64)| !n.stored.contains(p);
            n.published.iter().filter(unstored).copied().collect()
        };
        for (queue, id) in unresolved {
            if self.sim.rng().one_in(3) {
                self.sim.step();
            }
            self.publish(instance, Some((queue, id)));
        }
    }
}

/// The indexes of the clients of `all` still open.
fn open<T>(all: &[Option<T>]) -> Vec<usize> {
    (0..all.len()).filter(|&i| all[i].is_some()).collect()
}

/// The broker's name for name `n`.
fn name_of(n: usize) -> String {
    format!("name-{n}")
}

/// A seed's broker configuration.
fn config(rng: &mut SimRng, shared: &Shared) -> BrokerConfig {
    let queues = (0..1 + rng.below(2))
        .map(|_| QueueConfig {
            mode: if rng.one_in(2) {
                QueueMode::Priority
            } else {
                QueueMode::Fanout {
                    apps: 2 + rng.below(2) as u16,
                }
            },
            capacity: *rng.pick(&[2, 8, 32]).unwrap(),
            window: *rng.pick(&[1, 2, 8]).unwrap(),
        })
        .collect();
    let replication = rng.one_in(2).then(|| {
        let replicas = 1 + rng.below(3) as u8;
        Replication {
            replicas,
            quorum: 1 + rng.below(u64::from(replicas)) as u8,
        }
    });
    let released = shared.clone();
    BrokerConfig {
        queues,
        session_processors: 1 + rng.below(3) as usize,
        // 0: the queues on the session processors.
        queue_processors: rng.below(3) as usize,
        event_capacity: *rng.pick(&[2, 4, 8, 64]).unwrap(),
        max_batch: *rng.pick(&[1, 2, 8, 64]).unwrap(),
        replication,
        on_release: Some(OnRelease::new(move |batch: &[Payload]| {
            let mut w = world(&released);
            for p in batch {
                if !w.released.insert(p.handle) {
                    w.breach(format!("payload {} released twice", p.handle));
                }
            }
        })),
        max_producer_names: PLACES,
        dedup_window: MIN_DEDUP_WINDOW,
        timed_producers: 1 + rng.below(2) as usize,
        ..BrokerConfig::default()
    }
}

/// The scenario for `seed`. Panics (with the failing invariant) where one breaks.
pub fn run(seed: u64) {
    let shared: Shared = Arc::default();
    let mut rng = SimRng::new(seed ^ 0x00B4_0CE5);
    let config = config(&mut rng, &shared);
    let broker = Broker::start_stepped(config.clone()).expect("a valid configuration");
    let sim = broker.simulator(seed).expect("a stepped broker");
    {
        let mut w = world(&shared);
        w.quorum = config.replication.map(|r| r.quorum);
        w.names = (0..NAMES).map(|_| Name::default()).collect();
    }
    sim.note(format_args!("{config:?}"));
    let mut run = Run {
        broker,
        sim,
        shared,
        producers: Vec::new(),
        consumers: Vec::new(),
        config,
        next_handle: 0,
    };

    for _ in 0..1 + run.sim.rng().below(3) {
        run.open_producer(None);
    }
    for _ in 0..run.sim.rng().below(3) {
        run.open_consumer();
    }

    let actions = 40 + run.sim.rng().below(200);
    let shutdown = run.sim.rng().one_in(3);
    let shutdown_at = shutdown.then(|| run.sim.rng().below(actions));
    for action in 0..actions {
        if shutdown_at == Some(action) {
            run.sim.note("shutdown in mid-stream");
            run.w().shutting_down = true;
            run.sim.shutdown();
        }
        match run.sim.rng().below(24) {
            0..=6 => {
                let open = run.open_instances();
                if let Some(&i) = run.sim.rng().pick(&open) {
                    run.publish(i, None);
                }
            }
            7 => {
                let free: Vec<usize> = {
                    let w = run.w();
                    (0..NAMES).filter(|&n| w.names[n].open.is_none()).collect()
                };
                let named = !run.sim.rng().one_in(4);
                let name = named.then(|| run.sim.rng().pick(&free).copied()).flatten();
                let opened = run.open_producer(name);
                if let Some(i) = opened.filter(|_| name.is_some() && run.sim.rng().one_in(2)) {
                    run.resend(i);
                }
            }
            8 => {
                let open = run.open_instances();
                if let Some(&i) = run.sim.rng().pick(&open) {
                    run.close_producer(i);
                }
            }
            9 | 10 => {
                let named: Vec<usize> = {
                    let w = run.w();
                    let named = |&i: &usize| w.instances[i].name.is_some();
                    run.open_instances().into_iter().filter(named).collect()
                };
                if let Some(&i) = run.sim.rng().pick(&named) {
                    run.reconnect(i);
                }
            }
            11 => run.open_consumer(),
            12 => {
                let open = run.open_consumers();
                if let Some(&c) = run.sim.rng().pick(&open) {
                    run.close_consumer(c);
                }
            }
            13 => {
                let open = run.open_consumers();
                if let Some(&c) = run.sim.rng().pick(&open) {
                    if run.sim.rng().one_in(2) {
                        run.confirm(c);
                    } else {
                        let credit = 1 + run.sim.rng().below(4) as u32;
                        let consumer = run.consumers[c].as_ref().unwrap();
                        let done = run.broker.add_credit(consumer, credit);
                        run.sim
                            .note(format_args!("consumer {c} credit +{credit}: {done:?}"));
                        assert!(done.is_ok() || run.shutting_down(), "add_credit: {done:?}");
                    }
                }
            }
            14 | 15 => {
                if let Some(r) = run.config.replication {
                    let n = run.w().attempts.len() as u64;
                    let pick = (n > 0).then(|| {
                        // Mostly the latest messages.
                        let back = run.sim.rng().below(n.min(8));
                        let a = &run.w().attempts[(n - 1 - back) as usize];
                        (a.queue, a.guid)
                    });
                    if let Some((queue, guid)) = pick {
                        let replica = run.sim.rng().below(u64::from(r.replicas)) as u8;
                        run.receipt(queue, guid, replica);
                    }
                }
            }
            16 => {
                let by = Duration::from_micros(run.sim.rng().below(2_000));
                run.sim.note(format_args!("advance {by:?}"));
                run.sim.advance(by);
            }
            _ => {
                for _ in 0..1 + run.sim.rng().below(4) {
                    run.sim.step();
                }
            }
        }
        run.check();
    }

    if !run.shutting_down() {
        finish(&mut run);
    }
    run.sim.note("shutdown");
    run.w().shutting_down = true;
    run.sim.shutdown();
    run.check();
    for i in 0..run.producers.len() {
        if let Some(p) = run.producers[i].take() {
            run.w().instances[i].closing = true;
            drop(p);
        }
    }
    run.consumers.clear();
    run.check();

    let w = run.w();
    for (index, a) in w.attempts.iter().enumerate() {
        assert_eq!(
            a.outcomes.len(),
            1,
            "message {index} ({:?} of producer {} to queue {}) has outcomes {:?}",
            a.guid,
            a.instance,
            a.queue,
            a.outcomes
        );
    }
    for handle in &w.released {
        let published = w.handles.contains_key(handle);
        assert!(published, "payload {handle} released, never published");
    }
    let stats = run.broker.queue_stats();
    for (q, s) in stats.iter().enumerate() {
        let to_q = |(queue, _): &&(u32, Guid)| *queue == q as u32;
        let guids = w.published.iter().filter(to_q).count() as u64;
        assert!(
            s.stored <= guids,
            "queue {q} stored {} messages of {guids} GUIDs published to it: one stored twice",
            s.stored
        );
    }
}

/// The end of a run without a shutdown: every stored message delivered, the counters conserved.
fn finish(run: &mut Run) {
    run.sim.note("finish: settle");
    run.sim.settle();
    if let Some(r) = run.config.replication {
        let all: Vec<(u32, Guid)> = run.w().published.iter().copied().collect();
        for (queue, guid) in all {
            for replica in 0..r.quorum {
                run.receipt(queue, guid, replica);
            }
        }
        run.sim.settle();
    }
    // The consumers that hold shares back: paced ones get all the credit they want, and
    // explicit ones confirm what they hold, until none holds anything.
    for c in 0..run.consumers.len() {
        if run.consumers[c].is_some() && run.w().consumers[c].paced {
            let consumer = run.consumers[c].as_ref().unwrap();
            let done = run.broker.add_credit(consumer, u32::MAX);
            assert!(done.is_ok(), "add_credit: {done:?}");
        }
    }
    for _ in 0..1_000 {
        run.sim.settle();
        let holds = |&c: &usize| !run.w().consumers[c].held.is_empty();
        let holding: Vec<usize> = run.open_consumers().into_iter().filter(holds).collect();
        if holding.is_empty() {
            break;
        }
        for c in holding {
            while !run.w().consumers[c].held.is_empty() {
                run.confirm(c);
            }
        }
    }
    for q in 0..run.config.queues.len() as u32 {
        for app in 0..run.apps(q) {
            run.open_consumer_with(q, app, ConsumerOptions::default());
        }
    }
    run.sim.settle();
    run.check();
    {
        let w = run.w();
        for &(queue, guid, msg) in &w.stored {
            for app in 0..run.apps(queue) {
                if w.lossy.contains(&(queue, app)) {
                    continue;
                }
                let share = w.shares.get(&(queue, guid, app));
                let delivered = share.map_or(0, |s| s.deliveries);
                assert!(
                    delivered > 0,
                    "{guid:?} was reported Stored to queue {queue}, never delivered to app {app}"
                );
                assert!(
                    w.delivered.contains(&(queue, msg, app)),
                    "{msg:?} was reported Stored to queue {queue} (as {guid:?}), never delivered to app {app}"
                );
            }
        }
    }
    for i in 0..run.producers.len() {
        run.close_producer(i);
    }
    run.sim.settle();
    run.check();
    let queues = run.broker.queue_stats();
    let sessions = run.broker.session_stats();
    let sent = |q: &QueueStats| q.acked + q.rejected_full + q.out_of_window + q.superseded;
    let sent: u64 = queues.iter().map(sent).sum();
    let counted = format!("ACKs the queues sent, counted by the sessions: {queues:?} {sessions:?}");
    assert_eq!(sent, sessions.acks + sessions.late_acks, "{counted}");
    let (w, s) = (run.w(), &sessions);
    for (status, counted) in [
        (AckStatus::Closed, s.closed_reported),
        (AckStatus::NotSent, s.not_sent),
        (AckStatus::TimedOut, s.timed_out),
        (AckStatus::RejectedProducerFull, s.rejected_producer_full),
    ] {
        assert_eq!(w.outcomes[status as usize], counted, "{status:?} outcomes");
    }
    let counted = "messages published, as the sessions count them";
    assert_eq!(w.attempts.len() as u64, sessions.published, "{counted}");
}
