//! The machine's floor under the confirm path at low rates: a message at 50 msg/s crosses
//! five threads (bench, session, queue, consumer session, queue again, producer session),
//! and at that rate every one of them is parked when the message arrives. This example
//! times the same chain with nothing but `thread::park`/`unpark`: a ring of threads, each
//! parked until the one before it unparks it, one lap every 20 ms, 500 laps (the shape of
//! `perftest --rate 50 --duration 10s`), and prints the percentiles of a lap in
//! microseconds. What it shows is what any design that parks its threads pays on this
//! machine before doing any work.
//!
//! Run: `cargo run --release --example wake_ring [hops] [laps]` (defaults 5 and 500).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let hops: usize = args
        .next()
        .map_or(5, |a| a.parse().expect("hops: a number"));
    let laps: usize = args
        .next()
        .map_or(500, |a| a.parse().expect("laps: a number"));

    // Each hop waits for its turn number to change, then passes it on.
    let turn = Arc::new(AtomicU64::new(0));
    let mut next: Option<Thread> = None;
    let mut handles = Vec::new();
    // Build the ring backwards: hop i unparks hop i+1; the last unparks the main thread.
    let main = thread::current();
    for hop in (1..=hops).rev() {
        let turn = turn.clone();
        let to = next.take().unwrap_or_else(|| main.clone());
        let handle = thread::Builder::new()
            .name(format!("hop-{hop}"))
            .spawn(move || {
                let mut seen = 0;
                loop {
                    // Hop `hop` runs when the turn reaches `seen * (hops + 1) + hop`.
                    let mine = seen * (hops as u64 + 1) + hop as u64;
                    while turn.load(Ordering::Acquire) < mine {
                        thread::park();
                    }
                    if turn.load(Ordering::Acquire) == u64::MAX {
                        return;
                    }
                    turn.store(mine + 1, Ordering::Release);
                    to.unpark();
                    seen += 1;
                }
            })
            .expect("spawn a hop");
        next = Some(handle.thread().clone());
        handles.push(handle);
    }
    let first: Thread = next.expect("at least one hop");

    let mut laps_us = Vec::with_capacity(laps);
    for lap in 0..laps as u64 {
        thread::sleep(Duration::from_millis(20));
        let start = Instant::now();
        let base = lap * (hops as u64 + 1);
        turn.store(base + 1, Ordering::Release);
        first.unpark();
        while turn.load(Ordering::Acquire) < base + hops as u64 + 1 {
            thread::park();
        }
        laps_us.push(start.elapsed().as_secs_f64() * 1e6);
    }
    turn.store(u64::MAX, Ordering::Release);
    for h in &handles {
        h.thread().unpark();
    }
    for h in handles {
        h.join().unwrap();
    }

    laps_us.sort_by(f64::total_cmp);
    let at = |q: f64| laps_us[((laps_us.len() - 1) as f64 * q).round() as usize];
    println!(
        "{hops} parked hops, {laps} laps at 50 a second: p50 {:.0} us, p90 {:.0}, p99 {:.0}, max {:.0}",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}
