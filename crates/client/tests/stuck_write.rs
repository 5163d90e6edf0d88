//! A connection whose broker stops reading: the client's write stays in flight while its
//! heartbeat interval and its timer's ticks pass. The I/O task must wait for the write,
//! not wake again and again on those past deadlines: the process's CPU time over a
//! quarter of a second stays far below a quarter of a second.
//!
//! Its own test binary, so that no other test's CPU time is counted. Linux only (it reads
//! `/proc/self/stat`); elsewhere it passes without measuring.

mod support;

use std::time::Duration;

use support::{producer_opened_bytes, quiet, welcome_bytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zerodispatch_client::{Client, Flush, ProducerOptions, QueueId, TrySendError};
use zerodispatch_wire::{MAX_PAYLOAD_LEN, ProducerId};

/// The process's user and system CPU time, in clock ticks (1/100 s on Linux).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

#[test]
fn a_write_stuck_in_flight_does_not_spin_the_io_task() {
    zerodispatch_testkit::within(Duration::from_secs(30), "the stuck write", run);
}

fn run() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // A broker that answers Hello, then never reads again.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (opened, held) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut hello = [0; 16];
            stream.read_exact(&mut hello).await.unwrap();
            // The broker asks for a heartbeat every 5 ms (the client announces none, so
            // this broker, which sends nothing, is never timed out).
            stream.write_all(&welcome_bytes(5)).await.unwrap();
            // The OpenProducer the client sends next (producer 1, queue 0, cap 256,
            // anonymous), and the broker's answer.
            let mut open = [0; 23];
            stream.read_exact(&mut open).await.unwrap();
            let answer = producer_opened_bytes(ProducerId(1));
            stream.write_all(&answer).await.unwrap();
            let _ = opened.send(stream);
        });
        let client = Client::connect(addr, quiet()).await.unwrap();
        let options = ProducerOptions {
            max_unconfirmed: 256,
            flush: Flush::Timer(Duration::from_millis(2)),
            confirm_timeout: None,
        };
        let producer = client
            .open_producer(QueueId(0), options, |_| {})
            .await
            .unwrap();
        let _stream = held.await.unwrap();
        // 64 MiB at most: far more than the socket buffers take.
        let payload = vec![0; MAX_PAYLOAD_LEN as usize];
        for _ in 0..256 {
            match producer.try_send(&payload) {
                Ok(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                Err(TrySendError::Full) => break,
                Err(other) => panic!("{other}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Some(before) = cpu_ticks() else {
            return;
        };
        tokio::time::sleep(Duration::from_millis(250)).await;
        let used = cpu_ticks().unwrap() - before;
        assert!(
            used < 8,
            "{used} ticks of CPU in 25 ticks with a write stuck: the I/O task spins"
        );
        assert_eq!(client.error(), None);
    });
}
