//! Resident memory per connection, in its own binary so that no other test's counts.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use common::*;

const CONNECTIONS: usize = 200;
const ROUNDS: usize = 16;

/// This process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

/// A connection that has said `Hello` (no heartbeats) and read its `Welcome`.
fn silent(addr: SocketAddr, hello: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    let timeout = Some(Duration::from_secs(10));
    stream.set_read_timeout(timeout).unwrap();
    stream.write_all(hello).unwrap();
    read_frame(&mut stream, "Welcome", |frame| {
        assert!(matches!(frame, Frame::Welcome(_)), "{frame:?}");
    });
    stream
}

/// Reads the next frame from `stream` (`what`, the end before it a failure) into `check`.
fn read_frame(stream: &mut TcpStream, what: &str, check: impl FnOnce(Frame<'_>)) {
    let mut buf = [0; 2048];
    let mut filled = 0;
    loop {
        let n = stream.read(&mut buf[filled..]).unwrap();
        assert_ne!(n, 0, "closed before {what}");
        filled += n;
        if let Some((frame, _)) = decode(&buf[..filled]).unwrap() {
            return check(frame);
        }
    }
}

/// Gives the server and the allocator a moment to settle before a measure.
fn settle() {
    std::thread::sleep(ms(200));
}

#[test]
fn a_silent_connection_costs_at_most_64_kib_churn_does_not_grow_memory_and_a_burst_is_given_back() {
    within(Duration::from_secs(120), "memory per connection", || {
        // The default limits, a small store (allocated once, before the first measure).
        let limits = Limits {
            store_slots: 1024,
            ..Limits::default()
        };
        let server = server(&[QueueMode::Priority], limits);
        let addr = server.local_addr();
        let hello = encoded(hello_frame(0));
        let mut streams = Vec::with_capacity(CONNECTIONS);
        // One connection first, so that the runtime's own first allocations are not counted.
        drop(silent(addr, &hello));
        connections_become(&server, 0);
        settle();
        let before = rss_kib();
        for _ in 0..CONNECTIONS {
            streams.push(silent(addr, &hello));
        }
        settle();
        let open = rss_kib();
        let per_connection = (open.saturating_sub(before)) as f64 / CONNECTIONS as f64;
        eprintln!(
            "{CONNECTIONS} silent connections: {before} KiB -> {open} KiB, {per_connection:.1} KiB each"
        );
        let mut after = Vec::with_capacity(ROUNDS);
        for round in 0..ROUNDS {
            if round > 0 {
                for _ in 0..CONNECTIONS {
                    streams.push(silent(addr, &hello));
                }
            }
            streams.clear();
            connections_become(&server, 0);
            settle();
            after.push(rss_kib());
        }
        eprintln!("RSS after each round of {CONNECTIONS} opened and closed (KiB): {after:?}");
        // A burst: one large frame each (refused, but read whole) grows each read buffer.
        let burst = built(|out| publish(out, 99, (0..48).map(|id| (id, &[7; 4096][..]))));
        let quiet = rss_kib();
        for _ in 0..CONNECTIONS {
            let mut stream = silent(addr, &hello);
            stream.write_all(&burst).unwrap();
            streams.push(stream);
        }
        for stream in &mut streams {
            read_frame(stream, "the refusal", |frame| match frame {
                Frame::Error(e) => assert_eq!(e.code, ErrorCode::UNKNOWN_PRODUCER, "{e:?}"),
                other => panic!("{other:?}"),
            });
        }
        let grown = rss_kib();
        std::thread::sleep(ms(1500));
        let trimmed = rss_kib();
        let per = |kib: u64| kib.saturating_sub(quiet) as f64 / CONNECTIONS as f64;
        eprintln!(
            "{CONNECTIONS} connections after a {} KiB frame each: {:.1} KiB each; quiet 1.5 s later: {:.1} KiB each",
            burst.len() >> 10,
            per(grown),
            per(trimmed)
        );
        streams.clear();
        assert!(
            per(trimmed) <= 64.0,
            "a connection quiet after a burst still holds {:.1} KiB",
            per(trimmed)
        );
        assert!(
            per_connection <= 64.0,
            "a silent connection costs {per_connection:.1} KiB resident"
        );
        let (first, last) = (after[0] as f64, after[ROUNDS - 1] as f64);
        assert!(
            last <= first * 1.25,
            "RSS grew from {first} KiB after the first round to {last} KiB after {ROUNDS}"
        );
    });
}
