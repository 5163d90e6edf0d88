//! Measurement harnesses shared by the benches and the `compare` example, so that the
//! criterion figures and the example's table come from the same code.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::Backoff;

/// One producer (the caller) and one consumer thread joined by a bounded
/// `crossbeam_queue::ArrayQueue`: the shape of a cross-thread hop.
///
/// The consumer pops and calls until the relay is dropped, spinning with a short backoff
/// when the queue is empty, so that the measurement sees the hop and not a wake-up.
pub struct Relay<T> {
    queue: Arc<ArrayQueue<T>>,
    /// How many items the consumer has called; written only by the consumer.
    called: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    consumer: Option<thread::JoinHandle<()>>,
}

impl<T: Send + 'static> Relay<T> {
    /// Starts a consumer thread that passes every item it pops to `call`.
    #[must_use]
    pub fn start(capacity: usize, call: fn(T)) -> Self {
        let queue = Arc::new(ArrayQueue::new(capacity));
        let called = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (queue, called, stop) = (queue.clone(), called.clone(), stop.clone());
            thread::spawn(move || {
                let mut n = 0_u64;
                let backoff = Backoff::new();
                while !stop.load(Ordering::Relaxed) {
                    while let Some(item) = queue.pop() {
                        call(item);
                        n += 1;
                        // Release: the producer's Acquire load sees every call done.
                        called.store(n, Ordering::Release);
                        backoff.reset();
                    }
                    backoff.snooze();
                }
            })
        };
        Self {
            queue,
            called,
            stop,
            consumer: Some(consumer),
        }
    }

    /// Pushes `count` items made by `make` from this thread, waits until the consumer has
    /// called all of them, and returns the time from the first push to the last call.
    pub fn run(&self, count: u64, mut make: impl FnMut() -> T) -> Duration {
        let target = self.called.load(Ordering::Acquire) + count;
        let backoff = Backoff::new();
        let start = Instant::now();
        for _ in 0..count {
            let mut item = make();
            while let Err(back) = self.queue.push(item) {
                item = back;
                backoff.snooze();
            }
            backoff.reset();
        }
        while self.called.load(Ordering::Acquire) < target {
            backoff.snooze();
        }
        start.elapsed()
    }
}

impl<T> Drop for Relay<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(consumer) = self.consumer.take() {
            // A consumer that panicked (in `call`) has nothing left to report here.
            let _ = consumer.join();
        }
    }
}
