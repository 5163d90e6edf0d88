//! Fault soak (`ZD_SOAK_SECS`, 20 s): every token ends once, none stalls 3 s, clients drop once.

#![cfg(not(loom))]

mod common;

use std::sync::atomic::AtomicU8;

use common::*;
use zerodispatch_core::testing::SimRng as Rng;
use zerodispatch_testkit::within;

/// Tokens the soak can issue, at most (the ledger is preallocated).
const MAX_TOKENS: usize = 1 << 25;

/// How each token ended: one count per token, which must be exactly 1 at the end.
struct Ledger {
    ends: Vec<AtomicU8>,
    issued: AtomicUsize,
    finished: AtomicU64,
    dropped: AtomicU64,
}

impl Ledger {
    fn new() -> Self {
        Self {
            ends: (0..MAX_TOKENS).map(|_| AtomicU8::new(0)).collect(),
            issued: AtomicUsize::new(0),
            finished: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn progress(&self) -> u64 {
        self.finished.load(Ordering::Relaxed) + self.dropped.load(Ordering::Relaxed)
    }
}

/// A token with hops left; ends when consumed at its last hop or dropped (maybe panicking).
struct Token {
    id: u32,
    hops: u8,
    panic_on_drop: bool,
    consumed: bool,
    ledger: Arc<Ledger>,
}

impl Token {
    fn issue(ledger: &Arc<Ledger>, rng: &mut Rng) -> Option<Token> {
        let id = ledger.issued.fetch_add(1, Ordering::Relaxed);
        if id >= MAX_TOKENS {
            return None;
        }
        Some(Token {
            id: id as u32,
            hops: rng.below(4) as u8,
            panic_on_drop: rng.below(1000) == 0,
            consumed: false,
            ledger: ledger.clone(),
        })
    }

    fn finish(mut self) {
        self.consumed = true;
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        let before = self.ledger.ends[self.id as usize].fetch_add(1, Ordering::Relaxed);
        assert_eq!(before, 0, "token {} ended twice", self.id);
        if self.consumed {
            self.ledger.finished.fetch_add(1, Ordering::Relaxed);
        } else {
            self.ledger.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if self.panic_on_drop && !thread::panicking() {
            panic!("planned panic in a token's drop");
        }
    }
}

/// Drops what a refused dispatch handed back; a token's planned drop panic is contained.
fn discard<T>(handed_back: T) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(handed_back)));
}

/// The handles of the live clients, for producers and clients to pick from.
type Registry = Arc<Mutex<Vec<ClientHandle>>>;

/// Forwards tokens with hops left to a random live client, panics now and then.
struct Worker {
    registry: Registry,
    rng: Rng,
    drops: Arc<AtomicU64>,
}

impl Client<Token> for Worker {
    fn on_message(&mut self, mut token: Token, ctx: &mut Context<Token>) {
        if self.rng.below(500) == 0 {
            panic!("planned panic in a handler"); // drops the token: it ends
        }
        if token.hops == 0 {
            return token.finish();
        }
        token.hops -= 1;
        let next = *self.rng.pick(&self.registry.lock().unwrap()).unwrap();
        // On a processor thread: never waits; the token comes back or drops, and ends.
        let _ = ctx.dispatcher().dispatch(next, Event::Message(token));
    }

    fn flush(&mut self, _ctx: &mut Context<Token>) {
        if self.rng.below(2000) == 0 {
            panic!("planned panic in a flush");
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

fn soak_secs() -> u64 {
    let secs = std::env::var("ZD_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    secs.unwrap_or(20)
}

#[test]
fn faults_injected_at_random_lose_nothing_and_stall_nothing() {
    // The planned panics are counted by the processors, not printed; any other is.
    zerodispatch_testkit::quiet_planned_panics();
    let small = |n| PoolConfig::new(n).capacity(8).outbox_capacity(16);
    let tiny = |n| small(n).max_batch(4);
    let builder = Dispatcher::<Token>::builder().pool(ClientType::Session, tiny(2));
    let builder = builder.pool(ClientType::Queue, tiny(2));
    let mut dispatcher = builder.pool(ClientType::Cluster, tiny(1)).build().unwrap();
    // A foreign dispatcher: its handles must be refused by ours.
    let foreign_dispatcher =
        Dispatcher::<Token>::builder().pool(ClientType::Queue, PoolConfig::new(1));
    let foreign_dispatcher = foreign_dispatcher.build().unwrap();
    let worker_drops = Arc::new(AtomicU64::new(0));
    let worker = |registry: &Registry, seed| Worker {
        registry: registry.clone(),
        rng: Rng::new(seed),
        drops: worker_drops.clone(),
    };
    let alone = worker(&Registry::default(), 7);
    let foreign = foreign_dispatcher.register(ClientType::Queue, alone, Placement::LeastLoaded);
    let foreign = foreign.unwrap().erase();
    let ledger = Arc::new(Ledger::new());
    let registry = Registry::default();
    // Clients handed to `register`, each dropped exactly once: the foreign one and below.
    let registered = Arc::new(AtomicU64::new(1));
    let stale = Arc::new(Mutex::new(Vec::new()));
    let new_worker = |seed| worker(&registry, seed);
    for (i, t) in ClientType::ALL.iter().cycle().take(6).enumerate() {
        let h = dispatcher.register(*t, new_worker(i as u64 + 11), Placement::LeastLoaded);
        let h = h.unwrap();
        registered.fetch_add(1, Ordering::Relaxed);
        registry.lock().unwrap().push(h.erase());
    }

    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // Producers: every dispatch form, to live, stale and foreign handles.
    for p in 0..3_u64 {
        let (d, ledger, registry) = (dispatcher.handle(), ledger.clone(), registry.clone());
        let (stale, stop) = (stale.clone(), stop.clone());
        threads.push(thread::spawn(move || {
            let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15 ^ (p + 1));
            while !stop.load(Ordering::Relaxed) {
                let to = match rng.below(50) {
                    0 => foreign,
                    1 => match stale.lock().unwrap().last() {
                        Some(&h) => h,
                        None => continue,
                    },
                    _ => *rng.pick(&registry.lock().unwrap()).unwrap(),
                };
                let Some(token) = Token::issue(&ledger, &mut rng) else {
                    return;
                };
                // A refused token comes back in the error and ends when it is dropped.
                match rng.below(5) {
                    0 => discard(d.try_dispatch(to, Event::Message(token))),
                    1 => {
                        let more =
                            (0..rng.below(6)).filter_map(|_| Token::issue(&ledger, &mut rng));
                        let mut batch = std::iter::once(token).chain(more).map(Event::Message);
                        discard(d.dispatch_batch(to, &mut batch));
                        batch.for_each(discard);
                    }
                    2 => {
                        // A callback that consumes the token, sometimes panicking after.
                        let panics = rng.below(100) == 0;
                        let cb = Callback::new(move || {
                            token.finish();
                            assert!(!panics, "planned panic in a callback");
                        });
                        discard(d.dispatch(to, Event::Callback(cb)));
                    }
                    _ => discard(d.dispatch(to, Event::Message(token))),
                }
            }
        }));
    }
    // Churn: clients registered and unregistered under load.
    {
        let (d, registry, stale) = (dispatcher.handle(), registry.clone(), stale.clone());
        let (stop, registered) = (stop.clone(), registered.clone());
        let make = new_worker;
        let mut workers: Vec<Worker> = (0..100_000).map(|i| make(1000 + i)).collect();
        threads.push(thread::spawn(move || {
            let mut rng = Rng::new(99);
            while !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(2));
                let len = registry.lock().unwrap().len();
                if len > 2 && rng.below(2) == 0 {
                    let at = rng.below(len as u64) as usize;
                    let h = registry.lock().unwrap().swap_remove(at);
                    if d.unregister(h).is_ok() {
                        stale.lock().unwrap().push(h);
                    }
                } else if len < 10 {
                    let Some(worker) = workers.pop() else {
                        continue;
                    };
                    let t = ClientType::ALL[rng.below(3) as usize];
                    // A refused registration (shutdown) drops the client: it counts too.
                    registered.fetch_add(1, Ordering::Relaxed);
                    if let Ok(h) = d.register(t, worker, Placement::LeastLoaded) {
                        registry.lock().unwrap().push(h.erase());
                    }
                }
            }
            // Workers never registered are dropped here: count them as registered.
            registered.fetch_add(workers.len() as u64, Ordering::Relaxed);
        }));
    }

    // The watchdog: progress at least every 3 s, for the soak's length.
    let end = Instant::now() + Duration::from_secs(soak_secs());
    let (mut last, mut since) = (ledger.progress(), Instant::now());
    // (A soak long enough to issue every token ends when they run out.)
    while Instant::now() < end && ledger.issued.load(Ordering::Relaxed) < MAX_TOKENS {
        thread::sleep(Duration::from_millis(50));
        let now = ledger.progress();
        if now != last {
            (last, since) = (now, Instant::now());
        }
        assert!(
            since.elapsed() < Duration::from_secs(3),
            "no token ended for 3 s: stalled; stats {:#?}",
            dispatcher.stats()
        );
    }
    // Shutdown in mid-stream: producers are still dispatching.
    let stats = dispatcher.stats();
    let what = "shutdown in mid-stream";
    let dispatcher = within(Duration::from_secs(10), what, move || {
        dispatcher.shutdown();
        dispatcher
    });
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    drop(dispatcher);
    drop(foreign_dispatcher);

    let issued = ledger.issued.load(Ordering::Relaxed).min(MAX_TOKENS);
    let unended = (0..issued).filter(|&i| ledger.ends[i].load(Ordering::Relaxed) != 1);
    let unended: Vec<usize> = unended.take(10).collect();
    let why = format!("tokens that did not end exactly once: {unended:?}");
    assert!(unended.is_empty(), "{why}");
    let drops = worker_drops.load(Ordering::Relaxed);
    let once = "every client dropped exactly once";
    assert_eq!(drops, registered.load(Ordering::Relaxed), "{once}");
    let panics: u64 = stats.iter().map(|s| s.panics).sum();
    let outboxed: u64 = stats.iter().map(|s| s.outboxed).sum();
    let stale_events: u64 = stats.iter().map(|s| s.stale).sum();
    println!(
        "soak: {issued} tokens, {} run, {} dropped; {panics} panics contained, {outboxed} outboxed, {stale_events} stale",
        ledger.finished.load(Ordering::Relaxed),
        ledger.dropped.load(Ordering::Relaxed),
    );
    let exercised = panics > 0 && outboxed > 0 && stale_events > 0;
    assert!(exercised, "every fault was exercised");
}
