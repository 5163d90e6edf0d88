//! Stress: 4 producers, mixed events, rare panics, every event accounted for, and a cut.

#![cfg(not(loom))]

mod common;

use common::*;

const PRODUCERS: u64 = 4;
const PER_PRODUCER: u64 = if cfg!(debug_assertions) {
    50_000
} else {
    250_000
};

/// Runs callbacks; counts messages; panics on every message whose value is 999 mod 1000.
struct Counting(Arc<AtomicU64>);

impl Client<u64> for Counting {
    fn on_message(&mut self, m: u64, _ctx: &mut Context<u64>) {
        add(&self.0);
        if m % 1000 == 999 {
            panic!("planned panic on message {m}");
        }
    }
}

#[derive(Default)]
struct Tally {
    callbacks_run: AtomicU64,
    accepted: AtomicU64,
    handed_back: AtomicU64,
    refused_at_shutdown: AtomicU64,
    panicking_sent: AtomicU64,
}

fn dispatcher() -> Dispatcher<u64> {
    // The planned panics are caught and counted: the hook stays quiet on those alone, so
    // that a failing assertion still reports.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let planned = info
            .payload()
            .downcast_ref::<String>()
            .is_some_and(|m| m.starts_with("planned panic"));
        if !planned {
            report(info);
        }
    }));
    Dispatcher::builder()
        .pool(ClientType::Session, PoolConfig::new(1).capacity(512))
        .pool(ClientType::Queue, PoolConfig::new(2).capacity(512))
        .pool(ClientType::Cluster, PoolConfig::new(1).capacity(512))
        .build()
        .unwrap()
}

/// Sends `PER_PRODUCER` events from each producer round-robin, stopping at `ShutDown`.
fn run_producers(
    handle: &DispatcherHandle<u64>,
    clients: &[ClientHandle],
    tally: &Arc<Tally>,
) -> Vec<thread::JoinHandle<()>> {
    (0..PRODUCERS)
        .map(|p| {
            let (handle, clients, tally) = (handle.clone(), clients.to_vec(), tally.clone());
            thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    let to = clients[((p + i) % clients.len() as u64) as usize];
                    let send = |event| {
                        if i % 2 == 0 {
                            handle.dispatch(to, event)
                        } else {
                            handle.try_dispatch(to, event)
                        }
                    };
                    let t = tally.clone();
                    let ran = Callback::new(move || add(&t.callbacks_run));
                    if i % 3 == 0 && i % 1000 == 999 {
                        add(&tally.panicking_sent);
                    }
                    let result = match i % 3 {
                        0 => send(Event::Message(i)),
                        1 => send(Event::Callback(ran)),
                        // A dispatcher callback, to the client's processor.
                        _ => handle
                            .execute(to.processor(), ran)
                            .map_err(|e| e.map(Event::Callback)),
                    };
                    match result {
                        Ok(()) => add(&tally.accepted),
                        Err(DispatchError::Full(_)) => add(&tally.handed_back),
                        Err(DispatchError::NoSuchProcessor(_)) => {
                            unreachable!("every handle is of this dispatcher")
                        }
                        Err(DispatchError::ShutDown(_)) => {
                            add(&tally.handed_back);
                            add(&tally.refused_at_shutdown);
                            // Every later dispatch would be refused too.
                            break;
                        }
                        Err(other) => unreachable!("no deadline was given: {other:?}"),
                    }
                }
            })
        })
        .collect()
}

/// Adds one to `count`.
fn add(count: &AtomicU64) {
    count.fetch_add(1, Ordering::Relaxed);
}

/// Two [`Counting`] clients on every processor of `d`.
fn register_all(d: &Dispatcher<u64>, messages: &Arc<AtomicU64>) -> Vec<ClientHandle> {
    let processors = ClientType::ALL.into_iter().flat_map(|t| d.processors(t));
    let twice = processors.flat_map(|p| [p, p]);
    let on = |p: ProcessorId| Placement::Processor(p.index);
    let register = |p: ProcessorId| d.register(p.client_type, Counting(messages.clone()), on(p));
    twice.map(|p| register(p).unwrap().erase()).collect()
}

/// The callbacks run and the messages handled.
fn ran(tally: &Tally, messages: &AtomicU64) -> u64 {
    tally.callbacks_run.load(Ordering::Relaxed) + messages.load(Ordering::Relaxed)
}

/// The messages handled, the clients (two per processor), an empty tally.
fn stream(d: &Dispatcher<u64>) -> (Arc<AtomicU64>, Vec<ClientHandle>, Arc<Tally>) {
    let messages = Arc::new(AtomicU64::new(0));
    let clients = register_all(d, &messages);
    (messages, clients, Arc::default())
}

#[test]
fn every_event_runs_once_or_is_handed_back() {
    let mut d = dispatcher();
    let (messages, clients, tally) = stream(&d);
    let producers = run_producers(&d.handle(), &clients, &tally);
    producers.into_iter().for_each(|t| t.join().unwrap());
    d.shutdown();
    let stats = d.stats();
    let sent = PRODUCERS * PER_PRODUCER;
    let accepted = tally.accepted.load(Ordering::Relaxed);
    let ran = ran(&tally, &messages);
    assert_eq!(accepted + tally.handed_back.load(Ordering::Relaxed), sent);
    assert_eq!(ran, accepted, "every accepted event ran exactly once");
    // A panicking message may have been handed back rather than run: at most those sent.
    let panics: u64 = stats.iter().map(|s| s.panics).sum();
    assert!(panics > 0 && panics <= tally.panicking_sent.load(Ordering::Relaxed));
    println!(
        "stress: sent {sent}, accepted {accepted}, handed back (full) {}, ran {ran}, panics caught {panics}",
        tally.handed_back.load(Ordering::Relaxed)
    );
}

#[test]
fn shutdown_in_the_middle_of_a_stream_loses_nothing() {
    let mut d = dispatcher();
    let (messages, clients, tally) = stream(&d);
    let producers = run_producers(&d.handle(), &clients, &tally);
    while tally.accepted.load(Ordering::Relaxed) < PER_PRODUCER {
        thread::yield_now();
    }
    d.shutdown();
    producers.into_iter().for_each(|t| t.join().unwrap());
    let accepted = tally.accepted.load(Ordering::Relaxed);
    let ran = ran(&tally, &messages);
    let refused = tally.refused_at_shutdown.load(Ordering::Relaxed);
    let once = "every event accepted before shutdown ran exactly once";
    assert_eq!(ran, accepted, "{once}");
    let middle = accepted < PRODUCERS * PER_PRODUCER;
    assert!(middle, "shutdown came in the middle of the stream");
    let why = "producers still sending were handed their events back";
    assert!(refused > 0, "{why}");
    println!(
        "shutdown mid-stream: accepted {accepted}, ran {ran}, handed back {} ({refused} at shutdown)",
        tally.handed_back.load(Ordering::Relaxed)
    );
}
