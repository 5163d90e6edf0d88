//! How the consumer's wait decides what the ring costs: one producer pushes runs of 16
//! 48-byte events (waiting for a quarter of the ring free when it is full), one consumer
//! takes them, and after taking fewer than 64 in a row it waits `LINGER` spins before
//! looking again (0: it looks again at once). Prints ns per event for three rounds, how
//! often the producer found the ring full, and the consumer's events per look.
//!
//! ```text
//! cargo run --release -p zerodispatch-ring --example consumer_wait -- 0
//! cargo run --release -p zerodispatch-ring --example consumer_wait -- 100
//! ```
//!
//! With 0 the consumer keeps up and chases the slot being written, 16 or so events a
//! look; with about 100 it takes hundreds at a time behind the producer (figures in
//! `docs/benchmarks.md`, "The ring's next steps, tried").

use std::hint::spin_loop;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use zerodispatch_ring::{Consumer, Ring, Run};

/// A 48-byte event: the size of the dispatcher's inline callback.
struct Event([u64; 6]);

const CAPACITY: usize = 4096;
const EVENTS: u64 = 20_000_000;
/// Fewer than this many events taken in a row, and the consumer lingers.
const LINGER_BELOW: usize = 64;

/// Takes up to a quarter of the ring, handing each event to `handle`; returns how many.
fn take_some(consumer: &mut Consumer<'_, Event>, handle: &mut impl FnMut(Event)) -> usize {
    let mut taken = 0;
    while taken < CAPACITY / 4 {
        let Some(event) = consumer.pop() else { break };
        handle(event);
        taken += 1;
    }
    taken
}

fn main() {
    let linger: u32 = std::env::args()
        .nth(1)
        .map_or(0, |spins| spins.parse().expect("LINGER: spins, a number"));
    let ring = Arc::new(Ring::<Event>::new(CAPACITY));
    let handled = Arc::new(AtomicU64::new(0));
    let looks = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (ring, handled, looks, stop) =
            (ring.clone(), handled.clone(), looks.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut consumer = ring.consumer().expect("the one consumer");
            let (mut n, mut sum) = (0_u64, 0_u64);
            while !stop.load(Ordering::Relaxed) {
                let taken = take_some(&mut consumer, &mut |event| {
                    sum = sum.wrapping_add(event.0[0] ^ event.0[5]);
                    n += 1;
                    handled.store(n, Ordering::Release);
                });
                if taken > 0 {
                    looks.fetch_add(1, Ordering::Relaxed);
                }
                if taken < LINGER_BELOW {
                    for _ in 0..linger {
                        spin_loop();
                    }
                }
            }
            std::hint::black_box(sum);
        })
    };
    for round in 1..=3 {
        looks.store(0, Ordering::Relaxed);
        let target = handled.load(Ordering::Acquire) + EVENTS;
        let mut fulls = 0_u64;
        let start = Instant::now();
        let mut run = Run::<Event, 16>::new();
        for seq in 0..EVENTS {
            assert!(
                run.push(Event([seq; 6])).is_ok(),
                "a run is pushed as soon as it fills"
            );
            if run.is_full() || seq + 1 == EVENTS {
                while ring.push_run(&mut run).is_err() {
                    fulls += 1;
                    while ring.len() > CAPACITY - CAPACITY / 4 {
                        spin_loop();
                    }
                }
            }
        }
        while handled.load(Ordering::Acquire) < target {
            spin_loop();
        }
        let ns = start.elapsed().as_nanos() as f64 / EVENTS as f64;
        let per_look = EVENTS as f64 / looks.load(Ordering::Relaxed).max(1) as f64;
        println!(
            "linger {linger}, round {round}: {ns:.1} ns/event, full {fulls} times, {per_look:.0} events a look"
        );
    }
    stop.store(true, Ordering::Relaxed);
    consumer.join().expect("the consumer");
}
