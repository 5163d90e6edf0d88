//! Processors never stall each other (a 3 s watchdog) on tiny queues under heavy load,
//! with confirms direct and through the cluster and a replica flooding it; every message
//! has one outcome and the counters conserve.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use zerodispatch_broker::*;

mod support;

use support::*;

const PRODUCERS: u64 = 3;
/// Messages per producer: about a second in a debug build.
const MESSAGES: u64 = if cfg!(debug_assertions) {
    20_000
} else {
    200_000
};
const STALL: Duration = Duration::from_secs(3);

#[test]
fn tiny_queues_under_heavy_load_never_stall_and_lose_nothing() {
    let broker = Arc::new(start(with(two_queues(16, 8, 16), |c| c.max_batch = 8)));
    // Each app: one consumer direct, one (sleeping now and then) through the cluster.
    let delivered = Arc::new(AtomicU64::new(0));
    let mut consumers = Vec::new();
    for app in TWO_QUEUES_APPS {
        for (slow, route) in [
            (false, ConfirmRoute::Direct),
            (true, ConfirmRoute::ViaCluster),
        ] {
            let seen = delivered.clone();
            let mut calls = 0_u64;
            let options = support::confirming(ConfirmMode::Typed, route);
            let count = move |b: &[Delivery]| {
                seen.fetch_add(b.len() as u64, Ordering::Relaxed);
                calls += 1;
                if slow && calls.is_multiple_of(64) {
                    thread::sleep(Duration::from_micros(200));
                }
            };
            consumers.push(open_consumer(&broker, app, options, count));
        }
    }
    let outcomes = Arc::new(Outcomes::default());
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|n| {
            let (broker, outcomes) = (broker.clone(), outcomes.clone());
            thread::spawn(move || {
                let p = broker.open_producer(1000, move |b: &[Ack]| outcomes.record(b));
                let p = p.unwrap();
                let mut sent = Vec::with_capacity(MESSAGES as usize);
                for i in 0..MESSAGES {
                    let queue = QueueId(((i + n) % 2) as u32);
                    let payload = payload(i);
                    // Half with the cap's back-pressure, half without.
                    let guid = if n % 2 == 0 {
                        p.send(queue, payload).unwrap()
                    } else {
                        p.publish(queue, payload).unwrap()
                    };
                    sent.push(guid);
                }
                let closed = p.close(Duration::from_secs(30));
                assert!(closed, "producer {n}: outcomes missing");
                sent
            })
        })
        .collect();

    // A replica node flooding the cluster with confirms of messages never held (unknown).
    let stop = Arc::new(AtomicBool::new(false));
    let replica = {
        let (broker, stop) = (broker.clone(), stop.clone());
        thread::spawn(move || {
            let mut sent = 0_u64;
            while !stop.load(Ordering::Relaxed) {
                let guid = Guid::new(ProducerId(u32::MAX), sent);
                // Whatever slot it names, it holds no message of that GUID.
                let token = DeliveryToken(sent as u32);
                let confirm = confirm_of(((sent % 2) as u32, 0), guid, token, ConsumerId(u32::MAX));
                broker.replica_confirm(confirm, ConfirmMode::Typed).unwrap();
                sent += 1;
            }
            sent
        })
    };

    // The watchdog: every message's outcome moves the count; 3 s without a move is a stall.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watched = outcomes.clone();
    let watchdog = thread::spawn(move || {
        let (mut last, mut since) = (0, Instant::now());
        loop {
            match done_rx.recv_timeout(Duration::from_millis(50)) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                _ => return Ok(()),
            }
            let now = watched.count();
            if now != last {
                (last, since) = (now, Instant::now());
            } else if since.elapsed() > STALL {
                return Err(format!("no outcome for {STALL:?}, after {now}"));
            }
        }
    });
    let mut published = Vec::new();
    for p in producers {
        while !p.is_finished() {
            if watchdog.is_finished() {
                panic!("{}", watchdog.join().unwrap().unwrap_err());
            }
            thread::sleep(Duration::from_millis(10));
        }
        published.extend(p.join().unwrap());
    }
    let _ = done_tx.send(());
    watchdog.join().unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    let replica_confirms = replica.join().unwrap();

    broker.quiesce().unwrap();
    let acked = count_of(&outcomes.one_each(&published), AckStatus::Stored);
    let stats = broker.queue_stats();
    assert_eq!(stats.iter().map(|q| q.acked).sum::<u64>(), acked);
    assert_eq!(stats.iter().map(|q| q.held).sum::<u64>(), 0);
    let stored: u64 = stats.iter().map(|q| q.stored).sum();
    assert_eq!(stored, acked, "every stored message acked");
    let sessions = broker.session_stats();
    assert_eq!(sessions.published, published.len() as u64);
    assert!(acked > 0, "some messages went through");
    // Every confirm reached its queue once: the consumers' and the replica's.
    let reached =
        |q: &QueueStats| q.confirms + q.duplicate_confirms + q.unknown_guid + q.gone_consumer;
    let arrived: u64 = stats.iter().map(reached).sum();
    assert_eq!(arrived, sessions.confirms_sent + replica_confirms);
    let cluster = broker.cluster_state().unwrap();
    assert!(cluster.routed >= replica_confirms && cluster.unknown_queue == 0);
    let outboxed: u64 = broker.processor_stats().iter().map(|s| s.outboxed).sum();
    println!(
        "no stall: {} published, {acked} acked, {} rejected queue-full, {} delivered, \
         {replica_confirms} replica confirms, {outboxed} events outboxed",
        published.len(),
        stats.iter().map(|q| q.rejected_full).sum::<u64>(),
        delivered.load(Ordering::Relaxed)
    );
    drop(consumers);
    let broker = Arc::try_unwrap(broker).expect("producers finished");
    broker.shutdown();
}
