//! One seeded scenario of the core (`tests/simulate.rs`, the example): events run once if accepted,
//! in order, flushed; timers run on time or dropped; every client dropped once, on its processor.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::zd::testing::{SimRng, Simulator};
use crate::zd::{
    Callback, Client, ClientHandle, ClientType, Context, Dispatcher, DispatcherHandle, Event,
    Placement, PoolConfig, ProcessorId,
};

/// Who sent an event: the test's thread, or client `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sender {
    Test,
    Client(usize),
}

impl Sender {
    /// Its row in the per-sender tables: 0 for the test, i + 1 for client i.
    fn row(self) -> usize {
        match self {
            Sender::Test => 0,
            Sender::Client(i) => i + 1,
        }
    }
}

#[derive(Debug)]
struct Sent {
    from: Sender,
    to: usize,
    /// Per (sender, receiver): what order they must arrive in.
    seq: u64,
    accepted: bool,
    runs: u32,
    /// The receiver forwards it (as a new event) to this client.
    forward: Option<usize>,
    /// The receiver's handler panics after taking it.
    panics: bool,
}

#[derive(Clone, Debug, Default)]
struct ClientState {
    handle: Option<ClientHandle>,
    processor: Option<ProcessorId>,
    /// The last seq received from each sender (index 0: the test; i + 1: client i).
    last_seq: Vec<Option<u64>>,
    since_flush: u64,
    drops: u32,
    dropped_on: Option<Option<ProcessorId>>,
    /// Its drop dispatches a goodbye to this client.
    goodbye: Option<usize>,
}

#[derive(Debug, Default)]
struct Timer {
    deadline_ns: u64,
    ran_at_ns: Option<u64>,
    dropped_unrun: bool,
    cancelled: bool,
}

#[derive(Default)]
struct World {
    sent: Vec<Sent>,
    clients: Vec<ClientState>,
    next_seq: Vec<Vec<u64>>,
    timers: Vec<Timer>,
    max_batch: u64,
    /// During an `advance` from `.0` ns: the deadlines of the timers that ran, in order.
    advancing: Option<(u64, Vec<u64>)>,
    /// The first invariant a handler found broken.
    breach: Option<String>,
    now_ns: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
}

type Shared = Arc<Mutex<World>>;

fn world(shared: &Shared) -> MutexGuard<'_, World> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl World {
    /// Records a broken invariant if `ok` is false (see [`World::fail_on_breach`]).
    fn check(&mut self, ok: bool, breach: impl FnOnce() -> String) {
        if !ok && self.breach.is_none() {
            self.breach = Some(breach());
        }
    }

    /// Panics, on the test's thread, with the first invariant a handler found broken.
    fn fail_on_breach(&mut self) {
        if let Some(breach) = self.breach.take() {
            panic!("{breach}");
        }
    }

    /// Records an event about to be dispatched (accepted unless told otherwise); its id.
    fn send(&mut self, from: Sender, to: usize, forward: Option<usize>, panics: bool) -> u64 {
        let seq = self.next_seq[from.row()][to];
        self.next_seq[from.row()][to] += 1;
        self.sent.push(Sent {
            from,
            to,
            seq,
            accepted: true,
            runs: 0,
            forward,
            panics,
        });
        (self.sent.len() - 1) as u64
    }

    /// The time on the simulated clock, in ns since the scenario began.
    fn now_ns(&self) -> u64 {
        (self.now_ns.as_ref().expect("clock set"))()
    }
}

/// Client `from` sends a new event to client `to`, if registered, through `dispatcher`.
fn send_from(shared: &Shared, from: usize, to: usize, dispatcher: &DispatcherHandle<u64>) {
    let mut w = world(shared);
    let Some(handle) = w.clients[to].handle else {
        return;
    };
    // Accepted before the handle is used: the target may run it before this returns.
    let id = w.send(Sender::Client(from), to, None, false);
    drop(w);
    let accepted = dispatcher.dispatch(handle, Event::Message(id)).is_ok();
    world(shared).sent[id as usize].accepted = accepted;
}

/// One of `n` clients, at random.
fn any_client(rng: &mut SimRng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

/// One of `n` clients one time in two, else none.
fn maybe_client(rng: &mut SimRng, n: usize) -> Option<usize> {
    rng.one_in(2).then(|| any_client(rng, n))
}

/// Every processor of the dispatcher `live`.
fn processors(live: &DispatcherHandle<u64>) -> Vec<ProcessorId> {
    ClientType::ALL
        .iter()
        .flat_map(|t| live.processors(*t))
        .collect()
}

/// A client of the scenario: checks and records what it is handed.
struct Node {
    me: usize,
    world: Shared,
    handle: DispatcherHandle<u64>,
}

impl Client<u64> for Node {
    fn on_message(&mut self, id: u64, ctx: &mut Context<u64>) {
        let mut w = world(&self.world);
        let max_batch = w.max_batch;
        let me = self.me;
        let sent = &mut w.sent[id as usize];
        sent.runs += 1;
        let (to, accepted, runs) = (sent.to, sent.accepted, sent.runs);
        let (from, seq, forward, panics) = (sent.from, sent.seq, sent.forward, sent.panics);
        w.check(to == me, || {
            format!("event {id} for client {to} reached client {me}")
        });
        w.check(accepted, || {
            format!("event {id} ran though its dispatch was refused")
        });
        w.check(runs == 1, || format!("event {id} ran {runs} times"));
        let state = &mut w.clients[me];
        let last = state.last_seq[from.row()].replace(seq);
        state.since_flush += 1;
        let since_flush = state.since_flush;
        if let Some(last) = last {
            w.check(seq > last, || {
                format!("client {me} got seq {seq} from {from:?} after {last}")
            });
        }
        w.check(since_flush <= max_batch, || {
            format!(
                "client {me} got {since_flush} events since its last flush (max_batch {max_batch})"
            )
        });
        drop(w);
        if let Some(to) = forward {
            send_from(&self.world, me, to, ctx.dispatcher());
        }
        if panics {
            std::panic::panic_any(SimulatedPanic);
        }
    }

    fn flush(&mut self, _ctx: &mut Context<u64>) {
        world(&self.world).clients[self.me].since_flush = 0;
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let mut w = world(&self.world);
        let state = &mut w.clients[self.me];
        state.drops += 1;
        state.dropped_on = Some(self.handle.current_processor());
        let goodbye = state.goodbye;
        drop(w);
        if let Some(to) = goodbye {
            send_from(&self.world, self.me, to, &self.handle);
        }
    }
}

/// The payload of a handler's deliberate panic (the processor contains it).
pub struct SimulatedPanic;

/// Keeps the default panic hook for every panic but the scenario's own (thousands).
pub fn quiet_simulated_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<SimulatedPanic>().is_none() {
            default(info);
        }
    }));
}

/// A timer's callback: records its run; dropped unrun, records that.
struct TimerProbe {
    world: Shared,
    index: usize,
    ran: bool,
}

impl TimerProbe {
    fn run(mut self) {
        self.ran = true;
        let mut w = world(&self.world);
        let now = w.now_ns();
        let index = self.index;
        let timer = &mut w.timers[index];
        let ran_before = timer.ran_at_ns.replace(now);
        let (cancelled, deadline) = (timer.cancelled, timer.deadline_ns);
        w.check(!cancelled, || {
            format!("timer {index} ran after it was cancelled")
        });
        w.check(ran_before.is_none(), || format!("timer {index} ran twice"));
        w.check(now >= deadline, || {
            format!("timer {index} ran at {now} ns, before its deadline {deadline}")
        });
        if let Some((from, ran)) = &mut w.advancing
            && deadline > *from
        {
            ran.push(deadline);
        }
    }
}

impl Drop for TimerProbe {
    fn drop(&mut self) {
        if !self.ran {
            let mut w = world(&self.world);
            let index = self.index;
            let twice = std::mem::replace(&mut w.timers[index].dropped_unrun, true);
            w.check(!twice, || format!("timer {index} dropped twice"));
        }
    }
}

/// The scenario for `seed`. Panics (with the failing invariant) where one breaks.
pub fn run(seed: u64) {
    let mut rng = SimRng::new(seed ^ 0x5EED);
    let capacity = *rng.pick(&[2, 4, 8]).unwrap();
    let max_batch = *rng.pick(&[1, 2, 64]).unwrap();
    let pool = |rng: &mut SimRng| {
        PoolConfig::new(1 + rng.below(2) as usize)
            .capacity(capacity)
            .max_batch(max_batch)
            .timers(4)
    };
    let test = Dispatcher::<u64>::builder()
        .pool(ClientType::Session, pool(&mut rng))
        .pool(ClientType::Queue, pool(&mut rng))
        .pool(ClientType::Cluster, pool(&mut rng))
        .build_stepped()
        .expect("a valid configuration");
    let mut sim = Simulator::new(test.handle(), seed);
    let shared: Shared = Arc::new(Mutex::new(World {
        max_batch: max_batch as u64,
        ..World::default()
    }));
    let clock = sim.handle();
    let epoch = clock.now();
    world(&shared).now_ns = Some(Arc::new(move || {
        clock.now().duration_since(epoch).as_nanos() as u64
    }));

    let clients = 3 + sim.rng().below(4) as usize;
    let last_seq = vec![None; clients + 1];
    let fresh = ClientState {
        last_seq,
        ..ClientState::default()
    };
    world(&shared).next_seq = vec![vec![0; clients]; clients + 1];
    world(&shared).clients = vec![fresh; clients];
    for me in 0..clients {
        let client_type = *sim.rng().pick(&ClientType::ALL).unwrap();
        let goodbye = maybe_client(sim.rng(), clients);
        let node = Node {
            me,
            world: shared.clone(),
            handle: sim.handle(),
        };
        let handle = sim
            .register(client_type, node, Placement::LeastLoaded)
            .expect("room for every client")
            .erase();
        let state = &mut world(&shared).clients[me];
        (state.handle, state.processor) = (Some(handle), Some(handle.processor()));
        state.goodbye = goodbye;
        sim.note(format_args!(
            "client {me} on {} (goodbye to {goodbye:?})",
            handle.processor()
        ));
    }

    let actions = 20 + sim.rng().below(200);
    let shutdown_at = sim.rng().one_in(2).then(|| sim.rng().below(actions));
    let mut tokens = Vec::new();
    for action in 0..actions {
        if shutdown_at == Some(action) {
            sim.note("shutdown in mid-stream");
            sim.shutdown();
        }
        match sim.rng().below(10) {
            0..=3 => {
                let to = any_client(sim.rng(), clients);
                let forward = maybe_client(sim.rng(), clients);
                let panics = sim.rng().one_in(20);
                let mut w = world(&shared);
                let handle = w.clients[to].handle.unwrap();
                let id = w.send(Sender::Test, to, forward, panics);
                drop(w);
                let accepted = if sim.rng().one_in(2) {
                    sim.try_dispatch(handle, Event::Message(id)).is_ok()
                } else {
                    sim.dispatch(handle, Event::Message(id)).is_ok()
                };
                world(&shared).sent[id as usize].accepted = accepted;
                sim.note(format_args!(
                    "event {id} to client {to}: accepted {accepted}"
                ));
            }
            4 => {
                let processors = processors(&sim.handle());
                let on = *sim.rng().pick(&processors).unwrap();
                let delay = Duration::from_nanos(sim.rng().below(20_000));
                let mut w = world(&shared);
                let index = w.timers.len();
                let deadline_ns = w.now_ns() + delay.as_nanos() as u64;
                w.timers.push(Timer {
                    deadline_ns,
                    ..Timer::default()
                });
                drop(w);
                let probe = TimerProbe {
                    world: shared.clone(),
                    index,
                    ran: false,
                };
                match sim.schedule_in(on, delay, Callback::new(move || probe.run())) {
                    Ok(token) => tokens.push((index, token)),
                    // Refused: handed back, and dropped unrun here.
                    Err(refused) => drop(refused),
                }
                sim.note(format_args!("timer {index} on {on} in {delay:?}"));
            }
            5 if !tokens.is_empty() => {
                let at = sim.rng().below(tokens.len() as u64) as usize;
                let (index, token) = tokens.swap_remove(at);
                let cancelled = sim.cancel(token);
                if cancelled {
                    let mut w = world(&shared);
                    let timer = &mut w.timers[index];
                    let why = "cancelled after it ran";
                    assert!(timer.ran_at_ns.is_none(), "timer {index} {why}");
                    timer.cancelled = true;
                }
                sim.note(format_args!("cancel timer {index}: {cancelled}"));
            }
            6 if sim.rng().one_in(4) => {
                // The double's own clock move: timers in deadline order across processors.
                let by = Duration::from_nanos(sim.rng().below(30_000));
                sim.note(format_args!("advance {by:?}"));
                let mut w = world(&shared);
                w.advancing = Some((w.now_ns(), Vec::new()));
                drop(w);
                sim.advance(by);
                let (_, ran) = world(&shared).advancing.take().unwrap();
                assert!(
                    ran.is_sorted(),
                    "advance({by:?}) ran timers out of deadline order: {ran:?}"
                );
            }
            7 if sim.rng().one_in(3) => {
                // A dispatcher callback: its processor's clients are flushed before it runs.
                let processors = processors(&sim.handle());
                let on = *sim.rng().pick(&processors).unwrap();
                let w = shared.clone();
                let check = Callback::new(move || {
                    let mut w = world(&w);
                    let unflushed: Vec<usize> = (0..w.clients.len())
                        .filter(|&c| {
                            w.clients[c].processor == Some(on) && w.clients[c].since_flush > 0
                        })
                        .collect();
                    w.check(unflushed.is_empty(), || {
                        format!("a dispatcher callback on {on} ran before clients {unflushed:?} were flushed")
                    });
                });
                let accepted = sim.execute(on, check).is_ok();
                sim.note(format_args!("execute on {on}: accepted {accepted}"));
            }
            _ => {
                sim.step();
            }
        }
        world(&shared).fail_on_breach();
    }
    sim.note("settle");
    sim.settle();
    world(&shared).fail_on_breach();
    if shutdown_at.is_none() {
        for (me, state) in world(&shared).clients.iter().enumerate() {
            assert_eq!(state.since_flush, 0, "client {me} not flushed before idle");
        }
    }
    sim.shutdown();

    let mut w = world(&shared);
    w.fail_on_breach();
    for (id, sent) in w.sent.iter().enumerate() {
        let expected = u32::from(sent.accepted);
        assert_eq!(
            sent.runs, expected,
            "event {id} ({sent:?}) ran {} times, accepted {}",
            sent.runs, sent.accepted
        );
    }
    for (index, timer) in w.timers.iter().enumerate() {
        let one_fate = timer.ran_at_ns.is_some() != timer.dropped_unrun;
        assert!(one_fate, "timer {index} has no single fate: {timer:?}");
    }
    for (me, state) in w.clients.iter().enumerate() {
        assert_eq!(state.drops, 1, "client {me} dropped {} times", state.drops);
        assert_eq!(
            state.dropped_on,
            Some(state.processor),
            "client {me} dropped off its processor"
        );
    }
}
