//! Proof that a running dispatcher allocates nothing per event, `synchronize` or `call`.

#![cfg(not(loom))]

mod common;

use common::*;
use zerodispatch_testkit::CountingAllocator;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const EVENTS: u64 = 1_000_000;
const WARM_UP: u64 = 20_000;
const CALLS: u64 = 10_000;

/// Tallies what it handles (the sum of the confirms' seqs) and counts its flushes.
struct Queue(Tally, Arc<AtomicU64>);

impl Client<Confirm> for Queue {
    fn on_event(&mut self, event: ClientEvent<Confirm>, _ctx: &mut Context<Confirm>) {
        let seq = match event {
            ClientEvent::Callback(cb) => {
                cb.call();
                0 // a callback adds nothing to the sum of the confirms
            }
            ClientEvent::Message(c) => {
                let seq = seq_of(&c);
                assert_eq!((c.queue, c.sub_queue), ((seq % 8) as u32, 1));
                seq
            }
        };
        self.0.count(seq);
    }

    fn flush(&mut self, _ctx: &mut Context<Confirm>) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
}

/// On the session processor: forwards every message to the queue client via its outbox.
struct Relay(ClientHandle);

impl Client<Confirm> for Relay {
    fn on_message(&mut self, c: Confirm, ctx: &mut Context<Confirm>) {
        let sent = ctx.dispatcher().dispatch(self.0, Event::Message(c));
        assert!(sent.is_ok(), "the relay's outbox is sized for the test");
    }
}

/// The sequence number in a confirm's GUID.
fn seq_of(c: &Confirm) -> u64 {
    u64::from_le_bytes(c.guid[..8].try_into().unwrap())
}

fn confirm(seq: u64) -> Confirm {
    let mut guid = [0; 16];
    guid[..8].copy_from_slice(&seq.to_le_bytes());
    Confirm {
        queue: (seq % 8) as u32,
        guid,
        sub_queue: 1,
    }
}

common::proof_main!(a_running_dispatcher_allocates_nothing_per_event);

fn a_running_dispatcher_allocates_nothing_per_event() {
    let queues = PoolConfig::new(1).max_batch(64).capacity(64);
    let sessions = PoolConfig::new(1).capacity(256).outbox_capacity(1 << 16);
    let builder = Dispatcher::<Confirm>::builder().pool(ClientType::Queue, queues);
    let dispatcher = builder.pool(ClientType::Session, sessions).build().unwrap();
    let (tally, flushes) = (Tally::default(), Arc::new(AtomicU64::new(0)));
    let Tally { handled, sum } = tally.clone();
    let client = Queue(tally.clone(), flushes.clone());
    let queue = dispatcher.register(ClientType::Queue, client, Placement::LeastLoaded);
    let queue = queue.unwrap();
    let relay = Relay(queue.erase());
    let relay = dispatcher.register(ClientType::Session, relay, Placement::LeastLoaded);
    let relay = relay.unwrap();
    let callback_sum = Arc::new(AtomicU64::new(0));
    let session = dispatcher.processors(ClientType::Session)[0];
    let session_ran = Arc::new(AtomicU64::new(0));
    let (queue_to, relay_to) = (queue.erase(), relay.erase());

    // Confirms, callbacks, client callbacks, and every 1000th a session callback.
    let send = |range: std::ops::Range<u64>| {
        for seq in range {
            let c = confirm(seq);
            // Cloning an Arc is no allocation; the closures are inline.
            let s = callback_sum.clone();
            let add_seq = move || _ = s.fetch_add(seq_of(&c), Ordering::Relaxed);
            let event = if seq % 2 == 0 {
                Event::Message(c)
            } else if seq % 4 == 3 {
                // A callback handed the client itself: inline too.
                Event::from(Event::to_client(move |q: &mut Queue, _ctx| {
                    add_seq();
                    q.0.count(0);
                }))
            } else {
                Event::Callback(Callback::new(add_seq))
            };
            let to = if seq % 4 == 2 { relay_to } else { queue_to };
            dispatcher.dispatch(to, event).unwrap();
            if seq % 1000 == 0 {
                let r = session_ran.clone();
                let ran = Callback::new(move || _ = r.fetch_add(1, Ordering::Relaxed));
                dispatcher.execute(session, ran).unwrap();
            }
        }
    };

    send(0..WARM_UP);
    tally.wait_for(WARM_UP);
    let before = CountingAllocator::allocations();
    send(WARM_UP..WARM_UP + EVENTS);
    tally.wait_for(WARM_UP + EVENTS);
    let after = CountingAllocator::allocations();

    let total = WARM_UP + EVENTS;
    let even: u64 = (0..total).filter(|s| s % 2 == 0).sum();
    let odd: u64 = (0..total).filter(|s| s % 2 == 1).sum();
    let why = "every typed confirm handled once";
    assert_eq!(sum.load(Ordering::Relaxed), even, "{why}");
    let why = "every callback ran once";
    assert_eq!(callback_sum.load(Ordering::Relaxed), odd, "{why}");
    let flushed = flushes.load(Ordering::Relaxed);
    let why = "flushed at least every max_batch events";
    assert!(flushed >= EVENTS / 64, "{why}");
    let outboxed = dispatcher.stats().iter().map(|s| s.outboxed).sum::<u64>();
    assert!(outboxed > 0, "the relay's outbox was used");
    let what = format_args!("{EVENTS} events through a running dispatcher");
    assert_none_allocated(after - before, what);

    // `synchronize` and `call` from an application thread, after its first.
    let queue_processor = queue.processor();
    dispatcher.synchronize(queue_processor).unwrap();
    let before = CountingAllocator::allocations();
    for i in 0..CALLS {
        dispatcher.synchronize(queue_processor).unwrap();
        let h = handled.clone();
        let answer = move || (i, h.load(Ordering::Acquire));
        let (seq, seen) = dispatcher.call(session, answer).unwrap();
        assert_eq!(seq, i);
        assert!(seen >= WARM_UP + EVENTS);
    }
    let after = CountingAllocator::allocations();
    let what = format_args!("{CALLS} synchronize and call pairs");
    assert_none_allocated(after - before, what);

    // Blocking batches from two threads into 64 slots and 4 packs; a held warm-up waits.
    let phases = Arc::new(std::sync::Barrier::new(3));
    let batch_callbacks = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..2)
        .map(|thread| {
            let (handle, phases) = (dispatcher.handle(), phases.clone());
            let callbacks = batch_callbacks.clone();
            thread::spawn(move || {
                phases.wait();
                send_batches(&handle, queue, thread, 0..BATCH_WARM_UP, &callbacks);
                phases.wait();
                send_batches(&handle, queue, thread, BATCH_WARM_UP..BATCHES, &callbacks);
            })
        })
        .collect();
    let base = handled.load(Ordering::Acquire);
    let sum_base = sum.load(Ordering::Relaxed);
    let hold = Callback::new(|| thread::sleep(std::time::Duration::from_millis(50)));
    dispatcher.execute(queue_processor, hold).unwrap();
    phases.wait();
    tally.wait_for(base + batch_totals(0..BATCH_WARM_UP).0);
    let before = CountingAllocator::allocations();
    phases.wait();
    tally.wait_for(base + batch_totals(0..BATCHES).0);
    let after = CountingAllocator::allocations();
    producers.into_iter().for_each(|p| p.join().unwrap());
    let (events, messages, callbacks) = batch_totals(0..BATCHES);
    assert_eq!(handled.load(Ordering::Acquire) - base, events);
    assert_eq!(sum.load(Ordering::Relaxed) - sum_base, messages);
    assert_eq!(batch_callbacks.load(Ordering::Relaxed), callbacks);
    let packs = dispatcher.stats().iter().map(|s| s.packs).sum::<u64>();
    assert!(packs > 0, "the batches were packed");
    let measured = events - batch_totals(0..BATCH_WARM_UP).0;
    let what = format_args!("{measured} events in blocking batches");
    assert_none_allocated(after - before, what);

    drop(dispatcher);
    let every_thousandth = (WARM_UP + EVENTS) / 1000;
    assert_eq!(session_ran.load(Ordering::Relaxed), every_thousandth);
}

/// Batches per thread: the first `BATCH_WARM_UP` warm up.
const BATCHES: u64 = 12_000;
const BATCH_WARM_UP: u64 = 2_000;

/// The length of batch `round` of `thread`: 1 to 40.
fn batch_len(thread: u64, round: u64) -> u64 {
    1 + (round * 7 + thread) % 40
}

/// The sequence number of event `i` of batch `round` of `thread`, unique over the proof.
fn batch_seq(thread: u64, round: u64, i: u64) -> u64 {
    (round << 8) | (thread << 6) | i
}

/// `thread`'s blocking batches: two typed confirms in three, one a counting callback.
fn send_batches(
    handle: &DispatcherHandle<Confirm>,
    queue: ClientHandle<Queue>,
    thread: u64,
    rounds: std::ops::Range<u64>,
    callbacks: &Arc<AtomicU64>,
) {
    for round in rounds {
        let len = batch_len(thread, round);
        let mut events = (0..len).map(|i| {
            let seq = batch_seq(thread, round, i);
            if i % 3 == 0 {
                let c = callbacks.clone();
                Event::Callback(Callback::new(move || {
                    _ = c.fetch_add(seq, Ordering::Relaxed)
                }))
            } else {
                // `Queue` checks a confirm's queue against `seq % 8`.
                Event::Message(confirm(seq))
            }
        });
        let enqueued = handle.dispatch_batch(queue, &mut events).unwrap();
        assert_eq!(enqueued as u64, len);
    }
}

/// Over both threads' batches: the events, and the sums of confirms' and callbacks' seqs.
fn batch_totals(rounds: std::ops::Range<u64>) -> (u64, u64, u64) {
    let (mut events, mut messages, mut callbacks) = (0, 0, 0);
    for thread in 0..2 {
        for round in rounds.clone() {
            for i in 0..batch_len(thread, round) {
                events += 1;
                let seq = batch_seq(thread, round, i);
                if i % 3 == 0 {
                    callbacks += seq;
                } else {
                    messages += seq;
                }
            }
        }
    }
    (events, messages, callbacks)
}
