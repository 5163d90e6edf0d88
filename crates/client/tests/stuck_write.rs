//! A write stuck past heartbeat and timer deadlines: the I/O task waits instead of spinning.
//! Its own binary so no other test's CPU is counted; Linux only (`/proc/self/stat`).

mod support;

use std::time::Duration;

use support::*;
use zerodispatch_client::{Client, QueueId, TrySendError};
use zerodispatch_wire::MAX_PAYLOAD_LEN;

/// The process's user and system CPU time, in clock ticks (1/100 s on Linux).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // utime and stime: fields 14 and 15 of the line, 12 and 13 after the `(name)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

#[test]
fn a_write_stuck_in_flight_does_not_spin_the_io_task() {
    zerodispatch_testkit::within(Duration::from_secs(30), "the stuck write", run);
}

fn run() {
    runtime(1).block_on(async {
        // A broker that answers the open, asks for heartbeats every 5 ms, then never reads.
        let (listener, addr) = listen().await;
        let (opened, held) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            answer_hello_and_open(&mut stream, 5).await;
            let _ = opened.send(stream);
        });
        let client = Client::connect(addr, quiet()).await.unwrap();
        let mut options = timer(ms(2));
        (options.max_unconfirmed, options.confirm_timeout) = (256, None);
        let producer = client.open_producer(QueueId(0), options, |_| {});
        let producer = producer.await.unwrap();
        let _stream = held.await.unwrap();
        // 64 MiB at most: far more than the socket buffers take.
        let payload = vec![0; MAX_PAYLOAD_LEN as usize];
        for _ in 0..256 {
            match producer.try_send(&payload) {
                Ok(_) => tokio::time::sleep(ms(1)).await,
                Err(TrySendError::Full) => break,
                Err(other) => panic!("{other}"),
            }
        }
        tokio::time::sleep(ms(100)).await;
        let Some(before) = cpu_ticks() else { return };
        tokio::time::sleep(ms(250)).await;
        let used = cpu_ticks().unwrap() - before;
        assert!(
            used < 8,
            "{used} ticks of CPU in 25 ticks with a write stuck: the I/O task spins"
        );
        assert_eq!(client.error(), None);
    });
}
